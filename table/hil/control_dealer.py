"""A bench dealer whose hands are standalone emulators' control sockets.

``tablectl run --shuffler-control HOST:PORT --shoe-control HOST:PORT`` plays a
table whose devices are emulators in processes of their own (``tablectl
emulate``, or a driver package's emulator such as ``ascii-shoe-emulator``,
docs/drivers.md): each physical step the controller asks of the dealer is one
control line (docs/emulators.md), the same lines the conformance suite's
:class:`~devices.conformance.suite.ControlOperator` sends.

The hands carry the physical deck (docs/emulators.md, "Carrying the deck"): the
deck ``take`` brings out of the shuffler is the deck ``load deck=TEXT`` puts into
the shoe, card for card in its order, and the round's cards with the shoe's stub
go back into the shuffler with ``insert deck=TEXT``. A deck of a colour the hands
have never held comes fresh off the table (``insert COLOUR``).
"""

from __future__ import annotations

from protocols.cards import BackColour, Card
from protocols.deck_text import deck_from_text, deck_to_text
from protocols.errors import CardError

from devices.conformance.suite import ControlOperator, NeedsOperator, OperatorError
from table.errors import DeviceFault

#: A physical card in the hands: its face and its back colour.
HeldCard = tuple[Card, BackColour]


def carried_deck(reply: str) -> list[HeldCard] | None:
    """The deck a control reply carries (its ``deck=TEXT`` word), None when it carries none
    (an emulator that does not say, e.g. a driver package's). Raises :class:`DeviceFault`
    for a ``deck=`` word that does not read as a deck."""
    for word in reply.split():
        if word.startswith("deck="):
            try:
                return deck_from_text(word[5:])
            except CardError as exc:
                raise DeviceFault(f"the emulator's reply carries no readable deck: {exc}") from exc
    return None


class ControlDealer:
    """Implements the controller's ``Dealer`` over two control sockets
    (``(host, port)`` each). Raises :class:`DeviceFault` when a step is refused or a
    socket cannot be reached (the round is then held, as for any device fault).

    The physical decks it holds: :attr:`in_hand` (taken out of the shuffler, not yet
    loaded), :attr:`in_shoe` (loaded, what is left), :attr:`on_layout` and
    :attr:`racked` (by back colour: collected, to go back into the shuffler)."""

    def __init__(self, shuffler: tuple[str, int], shoe: tuple[str, int]) -> None:
        self._ops = ControlOperator(shuffler=shuffler, shoe=shoe)
        self.in_hand: list[HeldCard] | None = None
        self.in_shoe: list[HeldCard] = []
        self.on_layout: list[HeldCard] = []
        self.racked: dict[BackColour, list[HeldCard]] = {}

    def _do(self, device: str, line: str) -> str:
        try:
            return self._ops.command(device, line)
        except (OperatorError, NeedsOperator, OSError) as exc:
            raise DeviceFault(f"the bench dealer could not '{line.split(' deck=')[0]}' at the {device}: "
                              f"{exc}") from exc

    def insert_deck(self, colour: BackColour) -> None:
        """The racked cards of ``colour`` (the last round's and the stub) go back in, in the
        order they were gathered; a colour never held comes fresh off the table."""
        if self.in_shoe and self.in_shoe[0][1] == colour:
            self.collect()  # the deck is still in the shoe: its stub and the round's cards go in
        cards = self.racked.pop(colour, None)
        if cards:
            self._do("shuffler", f"insert deck={deck_to_text(cards)}")
        else:
            self._do("shuffler", f"insert {colour}")

    def take_from_shuffler(self) -> None:
        self.in_hand = carried_deck(self._do("shuffler", "take"))

    def load_shoe(self, colour: BackColour) -> None:
        """Load the deck in hand; an emulator that did not hand the deck over (its ``take``
        carries none) gets a fresh deck of ``colour``, said so in docs/emulators.md."""
        if self.in_hand:
            self._do("shoe", f"load deck={deck_to_text(self.in_hand)}")
            self.in_shoe, self.in_hand = self.in_hand, None
        else:
            self._do("shoe", f"load {colour}")
            self.in_shoe = []

    def draw_card(self) -> None:
        reply = self._do("shoe", "draw 1").split()  # "drew As" (or "drew empty")
        face = reply[-1] if len(reply) >= 2 else "empty"
        if face == "empty":
            return
        if self.in_shoe and str(self.in_shoe[0][0]) == face:
            self.on_layout.append(self.in_shoe.pop(0))
            return
        try:  # not the card the hands put on top: someone else's; its back is taken as the deck's
            card = Card.parse(face)
        except CardError:
            return
        colour = self.in_shoe[0][1] if self.in_shoe else BackColour.NONE
        self.on_layout.append((card, colour))

    def collect(self) -> None:
        """The round's cards and the shoe's stub go to the discard rack: the shoe is emptied."""
        stub = carried_deck(self._do("shoe", "unload"))
        cards = self.on_layout + (stub if stub is not None else self.in_shoe)
        self.on_layout, self.in_shoe = [], []
        cards = [c for c in cards if c[1] is not BackColour.NONE]
        if cards:
            colour = max({b for _, b in cards}, key=lambda b: sum(1 for _, x in cards if x == b))
            self.racked.setdefault(colour, []).extend(cards)

    def close(self) -> None:
        """Nothing held open: each step is one connection."""
