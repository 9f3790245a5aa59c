"""A dealer on the other end of a socket: the virtual dealer of a simulated table
running as its own process (``tablectl simulate-table``)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

from protocols.cards import BackColour

from table.errors import DeviceFault


class RemoteDealer:
    """Implements the controller's ``Dealer`` over the JSON-lines dealer socket at
    ``path`` (simulators/table_server.py). Raises :class:`DeviceFault` when the
    dealer refuses an action or cannot be reached."""

    def __init__(self, path: str | Path, timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.settimeout(timeout_s)
            self._sock.connect(str(self.path))
        except OSError as exc:
            self._sock.close()
            raise DeviceFault(f"cannot reach the dealer at {self.path}: {exc}") from exc
        self._file = self._sock.makefile("rwb")

    def request(self, action: str, **args: Any) -> dict[str, Any]:
        with self._lock:
            try:
                self._file.write((json.dumps({"action": action, **args}) + "\n").encode())
                self._file.flush()
                line = self._file.readline()
            except OSError as exc:
                raise DeviceFault(f"dealer at {self.path}: {exc}") from exc
        if not line:
            raise DeviceFault(f"dealer at {self.path} went away")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise DeviceFault(f"the dealer could not {action.replace('_', ' ')}: {reply.get('error')}")
        return reply

    def insert_deck(self, colour: BackColour) -> None:
        self.request("insert_deck", colour=str(colour))

    def take_from_shuffler(self) -> None:
        self.request("take_from_shuffler")

    def load_shoe(self, colour: BackColour) -> None:
        self.request("load_shoe", colour=str(colour))

    def draw_card(self) -> None:
        self.request("draw_card")

    def collect(self) -> None:
        self.request("collect")

    def truth(self) -> dict[str, Any]:
        return self.request("truth")

    def close(self) -> None:
        try:
            self._file.close()
        finally:
            self._sock.close()
