"""A bench dealer whose hands are standalone emulators' control sockets.

``tablectl run --shuffler-control HOST:PORT --shoe-control HOST:PORT`` plays a
table whose devices are emulators in processes of their own (``tablectl
emulate``, or a driver package's emulator such as ``ascii-shoe-emulator``,
docs/drivers.md): each physical step the controller asks of the dealer is one
control line (docs/emulators.md), the same lines the conformance suite's
:class:`~devices.conformance.suite.ControlOperator` sends.
"""

from __future__ import annotations

from protocols.cards import BackColour

from devices.conformance.suite import ControlOperator, NeedsOperator, OperatorError
from table.errors import DeviceFault


class ControlDealer:
    """Implements the controller's ``Dealer`` over two control sockets
    (``(host, port)`` each). Raises :class:`DeviceFault` when a step is refused or a
    socket cannot be reached (the round is then held, as for any device fault)."""

    def __init__(self, shuffler: tuple[str, int], shoe: tuple[str, int]) -> None:
        self._ops = ControlOperator(shuffler=shuffler, shoe=shoe)

    def _do(self, device: str, line: str) -> str:
        try:
            return self._ops.command(device, line)
        except (OperatorError, NeedsOperator, OSError) as exc:
            raise DeviceFault(f"the bench dealer could not '{line}' at the {device}: {exc}") from exc

    def insert_deck(self, colour: BackColour) -> None:
        self._do("shuffler", f"insert {colour}")

    def take_from_shuffler(self) -> None:
        self._do("shuffler", "take")

    def load_shoe(self, colour: BackColour) -> None:
        self._do("shoe", f"load {colour}")

    def draw_card(self) -> None:
        self._do("shoe", "draw 1")

    def collect(self) -> None:
        """The round's cards and the shoe's stub go to the discard rack: the shoe is emptied."""
        self._do("shoe", "unload")

    def close(self) -> None:
        """Nothing held open: each step is one connection."""
