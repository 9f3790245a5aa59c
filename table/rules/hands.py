"""Three-card hand evaluation and the five-of-six Six Card Bonus hand.

Hand order, highest first (California standards of play, "Ranking of Hands",
reference 000; 58 Pa. Code 649a.12, reference 004): mini royal (suited
A-K-Q, a category of its own only where the profile says so), straight flush,
three of a kind, straight, flush, pair, high card. A straight ranks above a
flush because it is rarer in three cards. A-2-3 is the lowest straight and
A-K-Q the highest; K-A-2 is no straight. Suits never break ties.

A suited A-2-3 is ranked by :attr:`RulesProfile.suited_a23`
(see :mod:`table.rules.profiles`).
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from protocols.cards import Card, Suit

from .profiles import PENNSYLVANIA, RulesProfile

ACE, KING, QUEEN, NINE = 14, 13, 12, 9


class HandError(ValueError):
    """A hand that is not exactly three (or, for the Six Card Bonus, six) distinct cards."""


class HandCategory(enum.IntEnum):
    """Three-card hand categories; a higher value is a better hand."""

    HIGH_CARD = 0
    PAIR = 1
    FLUSH = 2
    STRAIGHT = 3
    THREE_OF_A_KIND = 4
    STRAIGHT_FLUSH = 5
    MINI_ROYAL = 6

    @property
    def label(self) -> str:
        """The category in the field's words, e.g. ``"straight flush"``."""
        return self.name.lower().replace("_", " ")


@dataclass(frozen=True, order=True)
class HandValue:
    """The value of one three-card hand.

    Only :attr:`key` takes part in comparisons, so ``evaluate(a) > evaluate(b)``
    says hand ``a`` beats hand ``b`` and equal values are a tie (a push when the
    dealer qualifies, 58 Pa. Code 649a.11).

    Fields:
        key: total-order ranking key, ``(category, r1, r2, r3)``: the category
            value then the ranks that break ties, most significant first (a
            straight by its top card, A-2-3 counting 3; a pair by the pair's rank
            then the kicker; other hands by their cards high to low); unused
            places are 0.
        category: the :class:`HandCategory`.
        cards: the three cards, highest rank first.
        mini_royal: true for a suited A-K-Q whatever the profile, so a paytable
            mini-royal line can be found (649a.12(c), (e), (g)).
    """

    key: tuple[int, int, int, int]
    category: HandCategory = field(compare=False)
    cards: tuple[Card, Card, Card] = field(compare=False)
    mini_royal: bool = field(compare=False, default=False)

    def describe(self) -> str:
        """A short text such as ``"pair of 7s, king kicker"`` for the CLI and logs."""
        names = {14: "ace", 13: "king", 12: "queen", 11: "jack"}

        def n(r: int) -> str:
            return names.get(r, str(r))

        k = self.key
        c = self.category
        if c is HandCategory.MINI_ROYAL:
            return "mini royal"
        if c is HandCategory.STRAIGHT_FLUSH:
            return ("mini royal (suited A-K-Q) " if self.mini_royal else "") + f"straight flush, {n(k[1])} high"
        if c is HandCategory.THREE_OF_A_KIND:
            return f"three {n(k[1])}s"
        if c is HandCategory.STRAIGHT:
            return f"straight, {n(k[1])} high"
        if c is HandCategory.PAIR:
            return f"pair of {n(k[1])}s, {n(k[2])} kicker"
        return f"{c.label}, {'-'.join(n(r) for r in k[1:])}"


def _as_cards(cards: Iterable[Card | str], count: int) -> list[Card]:
    out = [c if isinstance(c, Card) else Card.parse(c) for c in cards]
    if len(out) != count:
        raise HandError(f"a hand needs exactly {count} cards, got {len(out)}")
    if len(set(out)) != count:
        dup = sorted({str(c) for c in out if out.count(c) > 1})
        raise HandError(f"a hand cannot hold the same card twice: {', '.join(dup)}")
    return out


def evaluate(cards: Iterable[Card | str], profile: RulesProfile = PENNSYLVANIA) -> HandValue:
    """Evaluate a three-card hand under ``profile``.

    ``cards``: three distinct :class:`~protocols.cards.Card` (or card texts such
    as ``"As"``). Returns a :class:`HandValue`.

    Raises :class:`HandError` (a ``ValueError``) unless there are exactly three
    distinct cards, and :class:`~protocols.errors.CardError` for an unreadable
    card text.
    """
    cs = sorted(_as_cards(cards, 3), key=lambda c: (c.rank, c.suit), reverse=True)
    r1, r2, r3 = (c.rank for c in cs)
    suited = cs[0].suit == cs[1].suit == cs[2].suit
    is_akq = (r1, r2, r3) == (ACE, KING, QUEEN)
    mini = suited and is_akq
    if r1 == r2 == r3:
        return HandValue((HandCategory.THREE_OF_A_KIND, r1, 0, 0), HandCategory.THREE_OF_A_KIND, tuple(cs))
    if r1 == r2 or r2 == r3:
        pair, kicker = (r1, r3) if r1 == r2 else (r2, r1)
        return HandValue((HandCategory.PAIR, pair, kicker, 0), HandCategory.PAIR, tuple(cs))
    straight_top = 0
    ace_low = (r1, r2, r3) == (ACE, 3, 2)
    if r1 - r3 == 2:  # three distinct ranks in a row; K-A-2 never qualifies
        straight_top = r1
    elif ace_low:  # A-2-3, the lowest straight
        straight_top = 3
    if straight_top:
        if suited:
            if ace_low and profile.suited_a23 == "flush":
                # California literal reading: 4-3-2 is the lowest straight flush,
                # so a suited A-2-3 is an ace-high flush (profiles.SUITED_A23_READINGS).
                return HandValue((HandCategory.FLUSH, r1, r2, r3), HandCategory.FLUSH, tuple(cs))
            if mini and profile.mini_royal_is_category:
                return HandValue((HandCategory.MINI_ROYAL, ACE, 0, 0), HandCategory.MINI_ROYAL, tuple(cs), True)
            return HandValue(
                (HandCategory.STRAIGHT_FLUSH, straight_top, 0, 0), HandCategory.STRAIGHT_FLUSH, tuple(cs), mini
            )
        return HandValue((HandCategory.STRAIGHT, straight_top, 0, 0), HandCategory.STRAIGHT, tuple(cs))
    if suited:
        return HandValue((HandCategory.FLUSH, r1, r2, r3), HandCategory.FLUSH, tuple(cs))
    return HandValue((HandCategory.HIGH_CARD, r1, r2, r3), HandCategory.HIGH_CARD, tuple(cs))


#: The weakest hand with which the dealer qualifies: queen high (Q-3-2 offsuit).
QUALIFYING_KEY = (HandCategory.HIGH_CARD, QUEEN, 0, 0)


def dealer_qualifies(hand_value: HandValue) -> bool:
    """True when the dealer's hand is queen high or better (58 Pa. Code 649a.11;
    California standards of play).

    ``hand_value``: the dealer's :class:`HandValue` from :func:`evaluate`.
    """
    return hand_value.key >= QUALIFYING_KEY


# --------------------------------------------------------------------------
# Six Card Bonus: best five-card hand of the seat's three cards and the dealer's
# three (58 Pa. Code 649a.12(f), 649b.5(b); reference 004, "The Side Bets").


class SixCardCategory(enum.IntEnum):
    """The Six Card Bonus hands, higher is better; ``NOTHING`` is below three of a kind.

    ``SIX_CARD_ROYAL`` is all six cards nine to ace of one suit: Paytable F's
    six-card royal flush (649b.5(b)), and the reading this engine gives
    Paytable E's "Super Royal" (649a.12(f)); see docs/settlement.md. It is also
    a royal flush, and is paid as one on a paytable that has no line for it.
    """

    NOTHING = 0
    THREE_OF_A_KIND = 1
    STRAIGHT = 2
    FLUSH = 3
    FULL_HOUSE = 4
    FOUR_OF_A_KIND = 5
    STRAIGHT_FLUSH = 6
    ROYAL_FLUSH = 7
    SIX_CARD_ROYAL = 8

    @property
    def label(self) -> str:
        """The category in the field's words."""
        return self.name.lower().replace("_", " ")


@dataclass(frozen=True)
class SixCardHand:
    """The Six Card Bonus result for six cards.

    Fields: ``category`` (:class:`SixCardCategory`); ``suit``: the suit of the
    flush for the flush categories (royal, straight flush, flush, six-card
    royal), else ``None``, so suit-specific lines (Paytable E) can be paid.
    """

    category: SixCardCategory
    suit: Suit | None = None


#: the five-rank straights as bit masks of ranks (bit r for rank r; the ace also as bit 1),
#: the highest first: (top card, mask)
_STRAIGHTS = tuple((top, 0b11111 << (top - 4)) for top in range(ACE, 4, -1))


def _straight_top(ranks: set[int]) -> int:
    """Top card of the best five-rank straight among ``ranks`` (ace also low), or 0."""
    held = 0
    for r in ranks:
        held |= 1 << r
    if held >> ACE & 1:
        held |= 2
    for top, mask in _STRAIGHTS:
        if held & mask == mask:
            return top
    return 0


def six_card_hand(cards: Sequence[Card | str]) -> SixCardHand:
    """Evaluate the Six Card Bonus: the best five-card hand among six distinct cards.

    ``cards``: the seat's three cards and the dealer's three. Raises
    :class:`HandError` unless there are exactly six distinct cards.
    """
    cs = _as_cards(cards, 6)
    suits = Counter(c.suit for c in cs)
    suit, n = suits.most_common(1)[0]
    if n >= 5:
        # Six cards holding five of a suit hold at most one pair, so no four of a
        # kind or full house can outrank the flush.
        suited = {c.rank for c in cs if c.suit == suit}
        if n == 6 and suited == set(range(NINE, ACE + 1)):
            return SixCardHand(SixCardCategory.SIX_CARD_ROYAL, suit)
        top = _straight_top(suited)
        if top == ACE:
            return SixCardHand(SixCardCategory.ROYAL_FLUSH, suit)
        if top:
            return SixCardHand(SixCardCategory.STRAIGHT_FLUSH, suit)
        return SixCardHand(SixCardCategory.FLUSH, suit)
    counts = sorted(Counter(c.rank for c in cs).values(), reverse=True)
    if counts[0] == 4:
        return SixCardHand(SixCardCategory.FOUR_OF_A_KIND)
    if counts[0] == 3 and counts[1] >= 2:
        return SixCardHand(SixCardCategory.FULL_HOUSE)
    if _straight_top({c.rank for c in cs}):
        return SixCardHand(SixCardCategory.STRAIGHT)
    if counts[0] == 3:
        return SixCardHand(SixCardCategory.THREE_OF_A_KIND)
    return SixCardHand(SixCardCategory.NOTHING)
