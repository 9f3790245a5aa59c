"""A physical deck written as one word of text: what a bench's hands carry between emulators.

The emulators model the deck as a thing in the dealer's hands: the deck taken
out of the shuffler is the deck loaded into the shoe, card for card, in its
order, whether the two emulators share a process or run as processes of their
own on ptys or TCP. Their control sockets are the bench's hands (never the
host's link, SPEC §4.2: no message carries a shuffled order): ``take`` answers
with the deck as this text and ``load deck=TEXT`` puts it into the shoe
(docs/emulators.md, "Carrying the deck").

The text is ``COLOUR:CARD,CARD,...``: the colour most backs carry, then each
card in order (top card first, the next the shoe deals), a card whose back is
another colour written ``CARD/COLOUR`` (a foreign card)::

    red:As,Kd,2c/blue,Th

Pure code, no I/O: imported by the emulators (``simulators``), a driver
package's emulator and the bench's hands (``table/hil``, ``tests/people``).
"""

from __future__ import annotations

import collections
from typing import Iterable

from .cards import BackColour, Card
from .errors import CardError

#: The most cards one text may hold: two decks and a few besides (a doubled or stacked deck
#: is a fault a bench makes; anything longer is not a deck a shoe could hold).
MAX_CARDS = 120


def deck_to_text(cards: Iterable[tuple[Card, BackColour]]) -> str:
    """``cards`` (``(card, back_colour)`` pairs, top first) as ``COLOUR:CARD,...``.

    An empty deck is ``none:``. Raises ``ValueError`` past :data:`MAX_CARDS`.
    """
    cards = list(cards)
    if len(cards) > MAX_CARDS:
        raise ValueError(f"{len(cards)} cards: a carried deck holds at most {MAX_CARDS}")
    if not cards:
        return "none:"
    colour = collections.Counter(b for _, b in cards).most_common(1)[0][0]
    words = [str(c) if b == colour else f"{c}/{b}" for c, b in cards]
    return f"{colour}:{','.join(words)}"


def deck_from_text(text: str) -> list[tuple[Card, BackColour]]:
    """The ``(card, back_colour)`` pairs of a ``COLOUR:CARD,...`` text, top first.

    Raises :class:`~protocols.errors.CardError` naming the word that is not a card
    or a colour, a text without ``COLOUR:``, no card at all, or more than
    :data:`MAX_CARDS` cards.
    """
    head, sep, body = text.strip().partition(":")
    if not sep:
        raise CardError(f"a carried deck is COLOUR:CARD,CARD,... (e.g. red:As,Kd), got {text[:40]!r}")
    colour = BackColour.parse(head)
    if colour is BackColour.NONE:
        raise CardError("a carried deck's colour cannot be 'none'")
    words = [w for w in body.split(",") if w]
    if not words:
        raise CardError("a carried deck holds no card")
    if len(words) > MAX_CARDS:
        raise CardError(f"{len(words)} cards: a carried deck holds at most {MAX_CARDS}")
    out: list[tuple[Card, BackColour]] = []
    for word in words:
        face, slash, back = word.partition("/")
        card_colour = BackColour.parse(back) if slash else colour
        if card_colour is BackColour.NONE:
            raise CardError(f"{word!r}: a card's back cannot be 'none'")
        out.append((Card.parse(face), card_colour))
    return out


__all__ = ["MAX_CARDS", "deck_from_text", "deck_to_text"]
