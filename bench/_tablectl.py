"""Shared by the round and memory benchmarks: run ``tablectl`` as its own process
and watch its rounds arrive on stdout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent


def tablectl() -> list[str]:
    """The ``tablectl`` next to this Python, else ``python -c`` on this checkout."""
    exe = shutil.which("tablectl", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from table.cli import main; main()"]


def rss_kb(pid: int) -> int | None:
    """The process's resident set now (KiB), from /proc; None when it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Run:
    """``tablectl ARGS`` with stdout read as it comes: :meth:`chunks` yields
    (monotonic s, bytes); :meth:`wait` reaps it and returns (exit status, peak
    RSS KiB) from the kernel's own accounting (``wait4``), and sets ``cpu_s``
    (user + system seconds of the whole process)."""

    cpu_s: float | None = None

    def __init__(self, args: list[str], tree: str | None = None) -> None:
        """``tree``: run another checkout's ``tablectl`` (its root folder) with this Python."""
        if tree is None:
            cmd, env, cwd = tablectl(), None, ROOT
        else:
            cmd, cwd = [sys.executable, "-c", "from table.cli import main; main()"], Path(tree)
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
        self.proc = subprocess.Popen(cmd + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, cwd=cwd, env=env)

    def chunks(self) -> Iterator[tuple[float, bytes]]:
        fd = self.proc.stdout.fileno()
        while True:
            data = os.read(fd, 65536)
            if not data:
                return
            yield time.monotonic(), data

    def wait(self) -> tuple[int, int, str]:
        err = self.proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, usage.ru_maxrss, err


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a running process so far (/proc, clock-tick
    resolution); None when it has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interpreter_start_s() -> float:
    """Wall seconds of this Python starting and exiting with nothing to do (``-c pass``,
    site imports included, as for ``tablectl``): the floor under a start-up time."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True, cwd=ROOT)
    return time.monotonic() - t0


def count_marks(mark: bytes, on_mark: Callable[[int, float], None], run: Run) -> bytes:
    """Feed ``run``'s stdout through, calling ``on_mark(n, t)`` at the n-th
    occurrence of ``mark`` (split across reads too); returns all of stdout."""
    out = bytearray()
    n = 0
    for t, data in run.chunks():
        start = max(0, len(out) - len(mark) + 1)
        out += data
        i = out.find(mark, start)
        while i >= 0:
            n += 1
            on_mark(n, t)
            i = out.find(mark, i + len(mark))
    return bytes(out)
