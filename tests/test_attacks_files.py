"""Attacks by another account on the table PC through the files ``tablectl run`` makes.

``--log-file`` was opened by click (``open(path, "a")``): it followed a symlink
someone else planted in the log folder, so the table's account appended its log
to any file it may write (the people file, the journal's head file ...), and a
new log was made 0644, readable by every account on the PC. DESIGN.md: "files
created safely" (``O_NOFOLLOW``), as the journal, head file and frame trace are.
"""

from __future__ import annotations

import os
import stat
import subprocess

from console_helpers import tablectl
from frontdoor_helpers import NOBODY


def _run(log: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([*tablectl(), "run", "--simulate", "--rounds", "1", "--seed", "5", "--json",
                           "--log-file", log], capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_a_planted_symlink_at_the_log_file_is_not_followed(tmp_path):
    shared = tmp_path / "logs"
    shared.mkdir()
    shared.chmod(0o777)  # a log folder other accounts may write (no sticky bit)
    victim = tmp_path / "precious.toml"
    victim.write_text("kept = true\n")
    victim.chmod(0o600)
    link = shared / "table.log"
    link.symlink_to(victim)
    os.lchown(link, NOBODY, NOBODY)  # planted by another account
    proc = _run(str(link), tmp_path)
    assert victim.read_text() == "kept = true\n", "the table's log was appended to the file the symlink names"
    assert proc.returncode == 2 and "log" in proc.stderr.lower(), proc.stderr[-500:]


def test_a_new_log_file_is_readable_by_the_table_only(tmp_path):
    log = tmp_path / "table.log"
    proc = _run(str(log), tmp_path)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert log.stat().st_size > 0
    assert stat.S_IMODE(log.stat().st_mode) & 0o077 == 0, oct(log.stat().st_mode)
