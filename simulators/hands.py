"""The simulated table's control socket: the dealer's hands, one line at a time.

On a simulated table dealt at a person's pace (``tablectl run --simulate --pace
person``, docs/emulators.md "Training") the virtual dealer does nothing by itself:
each physical step is one line sent here, and the emulators report what their
sensors see, exactly as when the virtual dealer moves the cards. The lines are
those of a standalone emulator's control socket (docs/emulators.md), for the one
table both emulators share::

    insert COLOUR    put the COLOUR deck into the shuffler
    take             take the shuffled deck out of the shuffler
    load COLOUR      load the deck in hand into the shoe
    draw             draw the next card from the shoe onto the layout
    collect          the round's cards and the shoe's stub into the discard rack
    unreadable N     the shoe cannot read its next N cards (a fault to practise on)

Each line is answered ``ok`` or ``error WHY`` on one line. Listens on
127.0.0.1 only (an ephemeral port by default): the hands of a training table,
not a door for the floor's network.
"""

from __future__ import annotations

import socketserver
import threading
from typing import Callable, cast

from protocols.cards import BackColour

from .devices import DeviceRefused, ShoeEmulator
from .table import VirtualDealer


def _colour(args: list[str]) -> BackColour:
    if len(args) != 1:
        raise ValueError("give the deck's back colour, e.g. 'insert red'")
    try:
        return BackColour.parse(args[0])
    except ValueError:
        raise ValueError(f"{args[0]!r} is not a back colour") from None


class HandsServer:
    """The control socket of a :class:`~simulators.table.SimulatedTable`'s dealer
    (``dealer``) and shoe (``shoe``); a context manager. ``address``: where to listen
    (``("127.0.0.1", 0)``: a free port); :attr:`address` is the one bound. Raises
    ``OSError`` when it cannot listen."""

    def __init__(self, dealer: VirtualDealer, shoe: ShoeEmulator,
                 address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.dealer = dealer
        self.shoe = shoe
        commands: dict[str, Callable[[list[str]], None]] = {
            "insert": lambda a: dealer.insert_deck(_colour(a)),
            "take": lambda a: dealer.take_from_shuffler(),
            "load": lambda a: dealer.load_shoe(_colour(a)),
            "draw": lambda a: dealer.draw_card(),
            "collect": lambda a: dealer.collect(),
            "unreadable": self._unreadable,
        }
        self._commands = commands
        outer = self

        class _Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for raw in self.rfile:
                    self.wfile.write((outer.command(raw.decode("utf-8", "replace")) + "\n").encode())
                    self.wfile.flush()

        class _Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = _Server(address, _Handler)
        self.address = cast("tuple[str, int]", self._server.server_address[:2])  # AF_INET: the host is a str
        self._thread = threading.Thread(target=self._server.serve_forever, name="sim-hands", daemon=True)

    def _unreadable(self, args: list[str]) -> None:
        if len(args) != 1 or not args[0].isdigit() or not 1 <= int(args[0]) <= 52:
            raise ValueError("unreadable N: N the number of next draws the shoe cannot read, 1..52")
        self.shoe.faults.unreadable_draws = int(args[0])

    def command(self, line: str) -> str:
        """One control line's answer: ``"ok"`` or ``"error WHY"``."""
        words = line.split()
        if not words:
            return "error empty line"
        do = self._commands.get(words[0].lower())
        if do is None:
            return f"error unknown command {words[0]!r}; one of: {', '.join(self._commands)}"
        try:
            do(words[1:])
        except (DeviceRefused, ValueError) as exc:
            return f"error {exc}"
        return "ok"

    def __enter__(self) -> "HandsServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
