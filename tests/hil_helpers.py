"""Run ``tablectl emulate`` as a subprocess for tests: address, control commands, clean stop."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-c", "from table.cli import main; main()"]


class EmulatorProcess:
    """``tablectl emulate KIND ARGS...`` in a subprocess; a context manager.

    ``url``: the first line it printed (where it listens). :meth:`control`
    sends one control line on stdin and returns the reply line. :meth:`stop`
    sends ``sig`` and returns the exit status. stderr (the logs) goes to
    ``log_path`` so a chatty ``--log-frames`` can never fill a pipe.
    """

    def __init__(self, kind: str, *args: str, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([*CLI, "emulate", kind, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log)
        self.url = self.proc.stdout.readline().decode().strip()
        if not self.url:
            self.stop()
            raise RuntimeError(f"emulator did not start: {log_path.read_text()}")
        self.extra: list[str] = []
        if "--control" in args:
            self.extra.append(self.proc.stdout.readline().decode().strip())

    def control(self, line: str) -> str:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().decode().strip()

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self._log.close()
        return rc

    def logs(self) -> str:
        return self.log_path.read_text()

    def __enter__(self) -> "EmulatorProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
