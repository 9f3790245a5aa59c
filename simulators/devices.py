"""Shuffler and card-recognition shoe firmware emulators (SPEC §4.2, §4.3).

They hold physical cards (:class:`SimCard`: a card face and its back colour)
and report only what the real devices' sensors would: the deck's back colour,
the verification counts after a shuffle, and each card as it is drawn. The
order of a shuffled deck leaves the shuffler only as a commitment when it is
verified and, opened, for the deck it last delivered (SPEC §4.2.1).
"""

from __future__ import annotations

import collections
import random
import secrets
from dataclasses import dataclass
from typing import NamedTuple

from protocols.cards import DECK_SIZE, BackColour, Card
from protocols.messages import (
    Ack,
    CardDrawn,
    CardUnreadable,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceKind,
    DeviceState,
    GetStatus,
    Message,
    Nak,
    NakCode,
    OpenShuffle,
    ShoeEmpty,
    ShoeLoaded,
    Shuffle,
    ShufflerFault,
    ShufflerFaultCode,
    ShuffleOpening,
    StatusReply,
    shuffle_commitment,
)

from .firmware import FirmwareEmulator


class SimCard(NamedTuple):
    """One physical card: its face and the colour of its back."""

    card: Card
    back_colour: BackColour


class DeviceRefused(RuntimeError):
    """A physical action the simulated device cannot do (no deck, not verified, ...)."""


def deck_colour(cards: list[SimCard]) -> BackColour:
    """The back colour most of ``cards`` carry (what a back-colour sensor reports)."""
    if not cards:
        return BackColour.NONE
    return collections.Counter(c.back_colour for c in cards).most_common(1)[0][0]


#: Shuffle modes of :class:`ShufflerEmulator`: a uniform permutation, or one riffle (weak).
SHUFFLE_MODES = ("random", "riffle1")


def riffle_once(cards: list, rng: random.Random) -> list:
    """One Gilbert-Shannon-Reeds riffle of ``cards`` (a new list, same length).

    The deck is cut binomially (n, 1/2) and the two packets are interleaved,
    each next card dropping from a packet with probability proportional to its
    size. One riffle leaves at most two rising sequences: far from random
    (Bayer and Diaconis 1992 need about seven), which is what a weak-shuffle
    test wants.
    """
    n = len(cards)
    cut = sum(rng.random() < 0.5 for _ in range(n))
    left, right = cards[:cut], cards[cut:]
    out: list = []
    i = j = 0
    while i < len(left) or j < len(right):
        a, b = len(left) - i, len(right) - j
        if rng.random() * (a + b) < a:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


@dataclass
class ShufflerFaults:
    """Faults to inject on the next shuffle (fault injection for tests and scenarios)."""

    jam_next_shuffle: bool = False
    door_open: bool = False
    #: ground truth for a bench: requests answered while the door was open (a status showing
    #: the door's fault, a Shuffle refused DOOR_OPEN); a door opened and closed again before
    #: the host asked anything is a fault nobody could see
    door_seen: int = 0
    #: the next shuffle is accepted (``Ack``) and stays in progress (state SHUFFLING) until
    #: :meth:`ShufflerEmulator.finish_shuffle`: a slow shuffle, so a bench can power-cycle
    #: the shuffler mid-shuffle (a reboot loses the shuffle: the deck stays unverified)
    hold_shuffle: bool = False
    #: the power is cut right after the next ``Shuffle`` is acknowledged, once it is under way:
    #: the shuffle is lost, the deck stays inside unverified and no ``DeckVerified`` comes (SPEC §6.5)
    power_cut_mid_shuffle: bool = False
    #: the next jam stands until a person clears it (the door opened): until then the status
    #: reports FAULT (JAM) and Shuffle is refused JAMMED; False: a jam clears itself
    jam_stays: bool = False
    jammed: bool = False


class ShufflerEmulator(FirmwareEmulator):
    """A single-deck automatic shuffler.

    Physical side (called by the virtual dealer): :meth:`insert` a deck,
    :meth:`take` the verified deck. Host side: ``Shuffle`` shuffles with ``rng``
    and verifies the deck (counts, duplicates, foreign cards), ``GetStatus``.
    ``rng`` is a ``random.Random``-like object; the simulated table passes
    ``secrets.SystemRandom()`` unless a seed was given. ``shuffle``: ``"random"``
    (a uniform permutation from ``rng``) or ``"riffle1"``, a deliberately weak
    shuffle of one riffle (:func:`riffle_once`) for testing the host's
    randomness check. Raises ``ValueError`` for another mode.

    The shuffle commitment (SPEC §4.2.1): a deck that verifies complete is
    committed to (a fresh 16-byte salt from ``secrets``, never from ``rng``: a bench's seed
    must not let anyone open a commitment before its time; SHA-256 over salt and
    order) in ``DeckVerified``; ``OpenShuffle`` opens only the commitment of the
    deck last delivered with a commitment (:meth:`take`), never that of a deck inside.
    ``commitment=False`` is a protocol 1.0 shuffler: no commitment, and
    ``OpenShuffle`` is answered NOT_SUPPORTED.
    """

    KIND = DeviceKind.SHUFFLER
    MODEL = "SIM-SHUFFLER"

    def __init__(self, port, *, rng: random.Random, serial_number: str = "SHF-SIM-0001", shuffle: str = "random",
                 commitment: bool = True, **kw) -> None:
        if shuffle not in SHUFFLE_MODES:
            raise ValueError(f"shuffle mode {shuffle!r}: choose one of {', '.join(SHUFFLE_MODES)}")
        if not commitment:
            kw.setdefault("protocol", (1, 0))
        super().__init__(port, serial_number=serial_number, **kw)
        self.commits = commitment
        #: (commitment, opening) of the deck inside once verified, and of the deck last delivered
        self._committed: tuple[bytes, ShuffleOpening] | None = None
        self._delivered: tuple[bytes, ShuffleOpening] | None = None
        self.rng = rng
        self.shuffle_mode = shuffle
        self.cards: list[SimCard] | None = None
        self.colour = BackColour.NONE
        self.verified = False
        self.shuffling = False
        self.faults = ShufflerFaults()
        self.shuffles = 0

    # physical side
    def insert(self, cards: list[SimCard]) -> None:
        """The dealer puts a deck in; emits ``DeckInserted`` with its back colour."""
        with self.lock:
            if self.cards is not None:
                raise DeviceRefused("the shuffler already holds a deck")
            self.cards = list(cards)
            self.colour = deck_colour(self.cards)
            self.verified = False
        self.emit(DeckInserted(self.colour))

    def take(self) -> list[SimCard]:
        """The dealer takes the shuffled, verified deck out; emits ``DeckDelivered``."""
        with self.lock:
            if self.cards is None or not self.verified:
                raise DeviceRefused("no verified deck to deliver")
            cards, self.cards = self.cards, None
            colour, self.colour, self.verified = self.colour, BackColour.NONE, False
            if self._committed is not None:  # SPEC §4.2.1: now it may be opened (an incomplete deck
                self._delivered = self._committed  # taken out, never dealt, leaves the last one as it was)
            self._committed = None
        self.emit(DeckDelivered(colour))
        return cards

    def holds_cards(self) -> bool:
        """A deck is inside (SPEC §9.4: no update while the shuffler holds one)."""
        return self.cards is not None

    # host side
    def handle_request(self, msg: Message) -> Message:
        if self.faults.door_open and isinstance(msg, (GetStatus, Shuffle)):
            self.faults.door_seen += 1
        if isinstance(msg, GetStatus):
            state = (
                DeviceState.FAULT if self.faults.door_open or self.faults.jammed
                else DeviceState.IDLE if self.cards is None
                else DeviceState.SHUFFLING if self.shuffling
                else DeviceState.READY if self.verified
                else DeviceState.HAS_DECK
            )
            fault = (ShufflerFaultCode.DOOR_OPEN if self.faults.door_open  # SPEC §4.1: the active fault
                     else ShufflerFaultCode.JAM if self.faults.jammed else 0)
            return StatusReply(state, self.colour, len(self.cards or ()), int(fault))
        if isinstance(msg, Shuffle):
            if self.faults.door_open:
                return Nak(NakCode.DOOR_OPEN)
            if self.faults.jammed:
                return Nak(NakCode.JAMMED)
            if self.cards is None:
                return Nak(NakCode.NO_DECK)
            if self.shuffling:
                return Nak(NakCode.BUSY)
            if self.faults.jam_next_shuffle:
                self.faults.jam_next_shuffle = False
                self.faults.jammed = self.faults.jam_stays
                self.emit(ShufflerFault(ShufflerFaultCode.JAM))
                return Ack()
            if self.faults.hold_shuffle or self.faults.power_cut_mid_shuffle:
                self.faults.hold_shuffle = False
                self.shuffling = True
                self.verified = False
                if self.faults.power_cut_mid_shuffle:  # the Ack goes out, then the power goes
                    self.faults.power_cut_mid_shuffle = False
                    self.power_cut_after_reply = True
                return Ack()
            self._shuffle_and_verify()
            return Ack()
        if isinstance(msg, OpenShuffle):
            return self._open(msg.commitment)
        return Nak(NakCode.UNKNOWN_MESSAGE)

    def _shuffle_and_verify(self) -> None:
        if self.shuffle_mode == "riffle1":
            self.cards = riffle_once(self.cards, self.rng)
        else:
            self.rng.shuffle(self.cards)
        self.shuffles += 1
        self.emit(self._verify())

    def finish_shuffle(self) -> None:
        """End a shuffle held in progress (:attr:`ShufflerFaults.hold_shuffle`): the deck is
        shuffled and ``DeckVerified`` sent. Raises :class:`DeviceRefused` when no shuffle is
        in progress (none was held, or a power cycle lost it)."""
        with self.lock:
            if not self.shuffling or self.cards is None:
                raise DeviceRefused("no shuffle in progress")
            self.shuffling = False
            self._shuffle_and_verify()

    def reboot(self) -> None:
        """Power-cycle (:meth:`FirmwareEmulator.reboot`); a shuffle in progress is lost: the
        deck stays inside, unverified (state HAS_DECK), and the host asks again (SPEC §6.5)."""
        with self.lock:
            if self.shuffling:
                self.shuffling = False
                self.verified = False
        super().reboot()
    def _open(self, commitment: bytes) -> Message:
        """SPEC §4.2.1: the opening of the deck last delivered, and of no other (the deck
        inside, shuffled or verified, is never opened)."""
        if not self.commits:
            return Nak(NakCode.NOT_SUPPORTED)
        if self._delivered is None or self._delivered[0] != commitment:
            return Nak(NakCode.UNKNOWN_COMMITMENT)
        return self._delivered[1]

    def _verify(self) -> DeckVerified:
        """Count the deck as a real shuffler's reader does: per-card presence, not order."""
        own = [c.card.index for c in self.cards if c.back_colour == self.colour]
        seen = collections.Counter(own)
        present = frozenset(seen)
        duplicates = frozenset(i for i, n in seen.items() if n > 1)
        foreign = len(self.cards) - len(own)
        self.verified = True
        verified = DeckVerified(self.colour, min(len(self.cards), 255), foreign, present, duplicates)
        self._committed = None
        if self.commits and verified.complete:
            # SPEC §4.2.1: the order the deck leaves in, first card dealt first, under a fresh salt
            opening = ShuffleOpening(secrets.token_bytes(16), tuple(own))
            self._committed = (shuffle_commitment(opening.salt, opening.order), opening)
            verified = DeckVerified(verified.back_colour, verified.card_count, foreign, present, duplicates,
                                    self._committed[0])
        return verified


@dataclass
class ShoeFaults:
    """Faults to inject on upcoming draws."""

    unreadable_draws: int = 0


class ShoeEmulator(FirmwareEmulator):
    """A card-recognition dealing shoe: reads each card's face and back colour as it is drawn.

    Physical side: :meth:`load` a deck, :meth:`draw` one card, :meth:`unload` the stub.
    """

    KIND = DeviceKind.SHOE
    MODEL = "SIM-SHOE"

    def __init__(self, port, *, serial_number: str = "SHOE-SIM-0001", **kw) -> None:
        super().__init__(port, serial_number=serial_number, **kw)
        self.cards: list[SimCard] = []
        self.colour = BackColour.NONE
        self.draws = 0
        self.faults = ShoeFaults()

    def load(self, cards: list[SimCard]) -> None:
        """The dealer loads a deck face down; emits ``ShoeLoaded`` with its back colour."""
        with self.lock:
            if self.cards:
                raise DeviceRefused("the shoe still holds cards; unload it first")
            self.cards = list(cards)
            self.colour = deck_colour(self.cards)
            self.draws = 0
        self.emit(ShoeLoaded(self.colour))

    def draw(self) -> SimCard | None:
        """The dealer draws the next card; emits ``CardDrawn`` (or ``CardUnreadable`` /
        ``ShoeEmpty``). Returns the physical card, or None when the shoe is empty."""
        with self.lock:
            if not self.cards:
                self.emit(ShoeEmpty(min(self.draws, 255)))
                return None
            sim = self.cards.pop(0)
            index = self.draws
            self.draws += 1
            if self.faults.unreadable_draws > 0:
                self.faults.unreadable_draws -= 1
                self.emit(CardUnreadable(index % 256, sim.back_colour))
            else:
                self.emit(CardDrawn(index % 256, sim.card, sim.back_colour))
            return sim

    def slip(self, card: SimCard) -> None:
        """A card is slipped in on top of the shoe's cards (the next draw reads it): a
        foreign card when its back is not the deck's colour. No event: the shoe's sensor
        sees it only as it is drawn."""
        with self.lock:
            if not self.cards:
                raise DeviceRefused("the shoe holds no deck to slip a card onto")
            self.cards.insert(0, card)

    def slip_back(self, under: int = 1) -> SimCard:
        """The dealer pushes the top card back into the shoe under the next ``under`` cards
        (a peeked card kept from its place, a second deal), unread: no event, the shoe's
        sensor reads a card only as it leaves. Returns the card moved."""
        with self.lock:
            if len(self.cards) <= under or under < 1:
                raise DeviceRefused(f"the shoe holds {len(self.cards)} cards: none to slip under {under}")
            card = self.cards.pop(0)
            self.cards.insert(under, card)
            return card

    def unload(self) -> list[SimCard]:
        """The dealer removes the undealt stub (no event: the shoe just goes empty)."""
        with self.lock:
            stub, self.cards = self.cards, []
            self.colour = BackColour.NONE
            return stub

    def holds_cards(self) -> bool:
        """Cards are in the shoe (SPEC §9.4: no update while a deck is in the shoe)."""
        return bool(self.cards)

    def handle_request(self, msg: Message) -> Message:
        if isinstance(msg, GetStatus):
            state = DeviceState.HAS_DECK if self.cards else DeviceState.IDLE
            return StatusReply(state, self.colour, min(len(self.cards), 255), 0)
        return Nak(NakCode.UNKNOWN_MESSAGE)


def new_deck(colour: BackColour) -> list[SimCard]:
    """A fresh 52-card deck with ``colour`` backs, in index order."""
    return [SimCard(Card.from_index(i), colour) for i in range(DECK_SIZE)]
