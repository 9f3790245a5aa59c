"""The simulated table as a process of its own, with its virtual dealer on a socket.

For benches and crash tests the table must outlive the controller: the
emulators keep their state (and the events the controller has not ACKed) when
the controller is killed, as real devices would. The virtual dealer takes
the controller's prompts over a Unix socket, JSON Lines:

    {"action": "insert_deck", "colour": "red"}   -> {"ok": true}
    {"action": "take_from_shuffler"} | {"action": "load_shoe", "colour": "blue"}
    {"action": "draw_card"} | {"action": "collect"}
    {"action": "truth"}   -> where every card physically is, and every card drawn

Imports ``protocols`` and ``simulators`` only.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

from protocols.cards import BackColour

from .devices import DeviceRefused, deck_colour
from .table import SimulatedTable


def truth(sim: SimulatedTable) -> dict[str, Any]:
    """Where each deck's cards are, by back colour, and every card drawn, in order."""
    d = sim.dealer
    places: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    spots = {
        "shuffler": sim.shuffler.cards or [],
        "shoe": sim.shoe.cards,
        "in_hand": d.in_hand,
        "layout": d.on_layout,
        "discard_rack": d.discard_rack,
    }
    for colour, cards in d.off_table.items():
        places[str(colour)]["off_table"] += len(cards)
    for spot, cards in spots.items():
        for c in cards:
            places[str(c.back_colour)][spot] += 1
    return {
        "places": {colour: dict(counter) for colour, counter in places.items()},
        "shuffler": {"colour": str(sim.shuffler.colour), "verified": sim.shuffler.verified,
                     "cards": len(sim.shuffler.cards or [])},
        "shoe": {"colour": str(deck_colour(sim.shoe.cards)), "cards": len(sim.shoe.cards)},
        "drawn": [[str(c.card), str(c.back_colour)] for c in d.drawn],
    }


class DealerServer:
    """Serves the virtual dealer of ``sim`` on a Unix socket at ``path``."""

    ACTIONS = ("insert_deck", "take_from_shuffler", "load_shoe", "draw_card", "collect", "truth")

    def __init__(self, sim: SimulatedTable, path: str | Path) -> None:
        self.sim = sim
        self.path = Path(path)
        if self.path.is_socket():
            self.path.unlink()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(4)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._accept = threading.Thread(target=self._serve, name="dealer-accept", daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._conns.append(conn)
            t = threading.Thread(target=self._client, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _client(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            for line in f:
                try:
                    reply = self.handle(json.loads(line))
                except ValueError as exc:
                    reply = {"ok": False, "error": f"bad request: {exc}"}
                try:
                    f.write((json.dumps(reply) + "\n").encode())
                    f.flush()
                except OSError:
                    return

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        """Carry out one dealer action; the devices report it as their sensors would."""
        action = req.get("action")
        if action not in self.ACTIONS:
            return {"ok": False, "error": f"unknown action {action!r}; allowed: {', '.join(self.ACTIONS)}"}
        with self._lock:
            if action == "truth":
                return {"ok": True, **truth(self.sim)}
            try:
                fn = getattr(self.sim.dealer, action)
                if action in ("insert_deck", "load_shoe"):
                    fn(BackColour.parse(req.get("colour", "")))
                else:
                    fn()
            except (DeviceRefused, ValueError) as exc:
                return {"ok": False, "error": str(exc)}
        return {"ok": True}

    def close(self) -> None:
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in another thread
        except OSError:
            pass
        self._server.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accept.join(2.0)
        for t in self._threads:
            t.join(2.0)
        if self.path.is_socket():
            os.unlink(self.path)
