"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl, a Unix socket in a temp folder, stopped at the end.

PostgreSQL refuses to run as root; CI runs as root, so there the cluster runs as
``nobody`` (subprocess's own ``user=``/``group=``: no ``runuser``, which is in /usr/sbin and
not on every PATH), in a folder of its own under the system temp folder
(pytest's tmp_path is 0700 root's, which ``nobody`` cannot enter). It listens on
no TCP port, only on its socket: nothing on the machine's network sees it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path


def pg_bin() -> Path | None:
    """The folder of initdb/pg_ctl (Debian's /usr/lib/postgresql/N/bin, or the PATH's)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PgCluster:
    """A PostgreSQL cluster of its own; :meth:`url` of a database :meth:`create_database` made."""

    def __init__(self) -> None:
        bin_dir = pg_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (scripts/test-deps installs it)")
        self.bin = bin_dir
        self.folder = Path(tempfile.mkdtemp(prefix="threecard-pg-"))
        self.data = self.folder / "data"
        self.sock = self.folder / "sock"
        self.sock.mkdir()
        self.log = self.folder / "postgres.log"
        self.as_user: dict = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for p in (self.folder, self.sock):
                os.chown(p, nobody.pw_uid, nobody.pw_gid)
            self.as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": [],
                            "env": {**os.environ, "HOME": str(self.folder), "USER": "nobody", "LOGNAME": "nobody"}}
        os.chmod(self.folder, 0o700)
        self.port = 5432  # names the socket file only (no TCP listener)

    def _run(self, *args: str) -> None:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=self.folder,
                              **self.as_user)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")

    def start(self) -> "PgCluster":
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "floor", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        opts = f"-k {self.sock} -c listen_addresses= -p {self.port} -c fsync=off -c max_connections=40"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60",
                  "start")
        self._n = 0
        return self

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://floor@/{db}?host={self.sock}&port={self.port}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        self._n += 1
        name = f"floor_t{self._n}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
