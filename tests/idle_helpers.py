"""A dealing table with every front door open, and idle clients to pile on its doors
(issue 24, point 6): shared by tests/test_attacks_idle.py and bench/idle_doors.py.

:class:`DealingTable` is ``tablectl run --simulate`` in its own process, dealing
round after round, with the web door (a people file, so a status request is a
signed-in person's), the control socket and the event socket. :func:`idle_clients`
opens connections that never send a byte; :meth:`DealingTable.ask` sends one
status request on a fresh connection, as a screen or a tool would, and returns
the reply with the seconds it took.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from console_helpers import PEOPLE, make_people, stop, tablectl, wait_until, web_url_in_log
from table.interfaces.control_socket import send

DOORS = ("web", "control", "events")


def raise_descriptor_limit(needed: int) -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to ``needed`` (at most the hard limit);
    returns the limits before, to restore. Raises ``AssertionError`` when the hard
    limit is below ``needed`` (the test would measure the limit, not the table)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise AssertionError(f"RLIMIT_NOFILE hard limit {hard} < {needed} descriptors this test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    return soft, hard


class DealingTable:
    """``tablectl run --simulate`` dealing up to ``rounds`` rounds in ``folder`` (mode
    0700: the people file's rule), with ``--web``, ``--control-socket`` and
    ``--event-socket``. :meth:`close` stops it (SIGTERM, its clean shutdown)."""

    def __init__(self, folder: Path, *, rounds: int = 100_000, seed: int = 5) -> None:
        os.chmod(folder, 0o700)
        self.folder = folder
        self.control = folder / "control.sock"
        self.events = folder / "events.sock"
        people = make_people(folder / "people.toml")
        self._stderr = open(folder / "stderr.txt", "wb")
        # --web on port 0: the table picks a free port itself and logs it (web_listening); a port
        # found free beforehand and then probed could meanwhile be another process's on a loaded machine
        self.proc = subprocess.Popen(
            tablectl() + ["run", "--simulate", "--rounds", str(rounds), "--seed", str(seed), "--json",
                          "--journal", str(folder / "journal.sqlite3"), "--web", "127.0.0.1:0",
                          "--people-file", str(people), "--control-socket", str(self.control),
                          "--event-socket", str(self.events), "--log-file", str(folder / "run.log")],
            stdout=subprocess.DEVNULL, stderr=self._stderr)
        try:
            url = wait_until(lambda: web_url_in_log(self.proc, folder / "run.log"), 60, "the table's web front door")
            self.port = int(url.rsplit(":", 1)[1])
            self.address = ("127.0.0.1", self.port)
            # the control socket opens before the web door, the event socket once the table is built
            wait_until(self._ready, 60, "the table's event socket")
            self.token = self._sign_in()
        except BaseException:
            self.close()
            raise

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"tablectl run ended ({self.proc.returncode}): "
                                 f"{(self.folder / 'stderr.txt').read_text()[-2000:]}")
        return self.control.exists() and self.events.exists()

    def _sign_in(self) -> str:
        status, body = self._http("POST", "/api/v1/session", {"person": "S-17", "pin": PEOPLE["S-17"][1]})
        assert status == 200, body
        return body["token"]

    def _http(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(*self.address, timeout=60)
        try:
            headers = {"content-type": "application/json"}
            if token:
                headers["authorization"] = f"Bearer {token}"
            conn.request(method, path, None if body is None else json.dumps(body), headers)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"{}")
        finally:
            conn.close()

    def rounds_played(self) -> int:
        """The table's own count, from its control socket."""
        reply = send(self.control, {"action": "status"}, timeout_s=60)
        assert reply["ok"] is True, reply
        return reply["rounds_played"]

    def ask(self, door: str) -> tuple[dict, float]:
        """One status request on ``door`` (a fresh connection): ``(reply, seconds)``. The
        event socket's answer to a request is its ``hello`` (it names the head)."""
        t0 = time.monotonic()
        if door == "web":
            status, reply = self._http("GET", "/api/v1/status", token=self.token)
            assert status == 200, reply
        elif door == "control":
            reply = send(self.control, {"action": "status"}, timeout_s=60)
            assert reply["ok"] is True, reply
        else:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(60)
                s.connect(str(self.events))
                f = s.makefile("rwb")
                f.write(b"{}\n")
                f.flush()
                reply = json.loads(f.readline())
            assert reply["type"] == "hello", reply
        return reply, time.monotonic() - t0

    def close(self) -> None:
        stop(self.proc, 30)
        self._stderr.close()


def idle_clients(table: DealingTable, door: str, n: int) -> list[socket.socket]:
    """``n`` connections to ``door`` that never send a byte (the caller closes them)."""
    out = []
    try:
        for _ in range(n):
            if door == "web":
                s = socket.create_connection(table.address, timeout=30)
            else:
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(30)
                s.connect(str(table.control if door == "control" else table.events))
            out.append(s)
    except BaseException:
        for s in out:
            s.close()
        raise
    return out
