"""A real mosquitto broker for tests: its own process, a free 127.0.0.1 port, a temp config."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def mosquitto_path() -> str | None:
    return shutil.which("mosquitto") or next((p for p in ("/usr/sbin/mosquitto",) if os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """mosquitto on 127.0.0.1:``port`` with persistence in ``folder`` (so a persistent
    subscriber's session and queued messages survive :meth:`stop` + :meth:`start`)."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        exe = mosquitto_path()
        if exe is None:
            raise RuntimeError("mosquitto is not installed (apt-get install mosquitto; .ci/run does it)")
        self.exe = exe
        self.folder = folder
        self.port = port or free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.conf = folder / "mosquitto.conf"
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous true", "persistence true",
                 f"persistence_location {folder}/", "autosave_interval 1", "max_queued_messages 0",
                 "log_dest stderr", "log_type error", "log_type warning"]
        if os.geteuid() == 0:
            lines.append("user root")  # else mosquitto drops to user 'mosquitto', who cannot write the folder
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None
        self.log = folder / "mosquitto.log"

    def start(self, timeout_s: float = 10.0) -> "Broker":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.exe, "-c", str(self.conf)], stdout=log, stderr=log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        """SIGTERM (mosquitto saves its persistence file), then wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
