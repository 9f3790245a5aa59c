"""Card and back-colour encodings shared by the host and the device emulators.

Wire encoding (protocols/SPEC.md §3):

* rank: one byte, 2..14 (11 = jack, 12 = queen, 13 = king, 14 = ace);
* suit: one byte, 0 = clubs, 1 = diamonds, 2 = hearts, 3 = spades;
* card index (for the 52-bit presence bitmaps): ``(rank - 2) * 4 + suit``, 0..51;
* back colour: one byte from :class:`BackColour`; 0 means "not read".

Text form is rank then suit letter, e.g. ``"As"``, ``"Td"``, ``"2c"`` (case-insensitive on input).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable

from .errors import CardError

RANK_CHARS = "23456789TJQKA"
SUIT_CHARS = "cdhs"
DECK_SIZE = 52


class Suit(enum.IntEnum):
    """Card suit, as encoded on the wire (one byte)."""

    CLUBS = 0
    DIAMONDS = 1
    HEARTS = 2
    SPADES = 3


class BackColour(enum.IntEnum):
    """Back colour of a deck, as encoded on the wire (one byte).

    The two decks on a table must have different back colours
    (58 Pa. Code 649a.3(b); California TCP standards of play). ``NONE`` is what a
    device reports when it could not read the colour.
    """

    NONE = 0
    RED = 1
    BLUE = 2
    GREEN = 3
    BLACK = 4
    GREY = 5
    PURPLE = 6
    ORANGE = 7
    BROWN = 8

    @classmethod
    def parse(cls, name: "str | int | BackColour") -> "BackColour":
        """Return the colour named by ``name`` (``"red"``, ``"BLUE"``, 2, ...).

        Raises :class:`CardError` naming the allowed values when it is unknown.
        """
        if isinstance(name, BackColour):
            return name
        try:
            if isinstance(name, int):
                return cls(name)
            return cls[name.strip().upper()]
        except (KeyError, ValueError):
            allowed = ", ".join(c.name.lower() for c in cls if c is not cls.NONE)
            raise CardError(f"unknown back colour {name!r}; allowed: {allowed}") from None

    def __str__(self) -> str:  # "red", not "BackColour.RED"
        return self.name.lower()


@dataclass(frozen=True, order=True, slots=True)
class Card:
    """One playing card: ``rank`` 2..14 (ace high), ``suit`` a :class:`Suit`.

    Raises :class:`CardError` when the rank or suit cannot exist in a 52-card deck.
    """

    rank: int
    suit: Suit

    def __post_init__(self) -> None:
        if not isinstance(self.rank, int) or not 2 <= self.rank <= 14:
            raise CardError(f"rank must be 2..14, got {self.rank!r}")
        try:
            object.__setattr__(self, "suit", Suit(self.suit))
        except ValueError:
            raise CardError(f"suit must be 0..3, got {self.suit!r}") from None

    @property
    def index(self) -> int:
        """Position 0..51 in the presence bitmaps: ``(rank - 2) * 4 + suit``."""
        return (self.rank - 2) * 4 + int(self.suit)

    @classmethod
    def from_index(cls, index: int) -> "Card":
        """Inverse of :attr:`index`; raises :class:`CardError` outside 0..51."""
        if not isinstance(index, int) or not 0 <= index < DECK_SIZE:
            raise CardError(f"card index must be 0..51, got {index!r}")
        return cls(index // 4 + 2, Suit(index % 4))

    @classmethod
    def parse(cls, text: str) -> "Card":
        """Parse ``"As"``, ``"td"``, ``"10h"``; raises :class:`CardError` on anything else."""
        t = text.strip()
        if len(t) == 3 and t[:2] == "10":
            t = "T" + t[2]
        if len(t) != 2:
            raise CardError(f"not a card: {text!r} (expected rank+suit like 'As', 'Td', '2c')")
        r, s = t[0].upper(), t[1].lower()
        if r not in RANK_CHARS or s not in SUIT_CHARS:
            raise CardError(f"not a card: {text!r} (ranks {RANK_CHARS}, suits {SUIT_CHARS})")
        return cls(RANK_CHARS.index(r) + 2, Suit(SUIT_CHARS.index(s)))

    def __str__(self) -> str:
        return RANK_CHARS[self.rank - 2] + SUIT_CHARS[int(self.suit)]

    def __repr__(self) -> str:
        return f"Card({self})"


def full_deck() -> list[Card]:
    """The 52 cards of one deck in index order (no jokers)."""
    return [Card.from_index(i) for i in range(DECK_SIZE)]


def parse_cards(texts: Iterable[str] | str) -> list[Card]:
    """Parse several cards: a list of texts or one space/comma separated string."""
    if isinstance(texts, str):
        texts = texts.replace(",", " ").split()
    return [Card.parse(t) for t in texts]


def cards_to_bitmap(indices: Iterable[int]) -> bytes:
    """Pack card indices 0..51 into the 7-byte little-endian presence bitmap (SPEC §3.3)."""
    value = 0
    for i in indices:
        if not 0 <= i < DECK_SIZE:
            raise CardError(f"card index must be 0..51, got {i}")
        value |= 1 << i
    return value.to_bytes(7, "little")


def bitmap_to_cards(bitmap: bytes) -> frozenset[int]:
    """Unpack a 7-byte presence bitmap into card indices; bits 52..55 must be zero."""
    if len(bitmap) != 7:
        raise CardError(f"bitmap must be 7 bytes, got {len(bitmap)}")
    value = int.from_bytes(bitmap, "little")
    if value >> DECK_SIZE:
        raise CardError("bitmap has bits set above card index 51")
    return frozenset(i for i in range(DECK_SIZE) if value >> i & 1)
