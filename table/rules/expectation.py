"""The house's exact expectation of a round, and the theoretical win.

Two figures a gaming day's report sets beside the win the table settled:

* **Expected result given the decisions** (:func:`round_expectation`). A settled
  round is known: each seat's wagers, cards and decision. What chance decided
  after the decisions is the dealer's hand, and it was any three of the cards
  no seat held, each set alike likely (a shuffled deck; 52 - 3 x seats cards,
  C(31, 3) = 4,495 hands at seven seats). The house's result is counted for
  every one of them, exactly, so the mean and the variance are fractions of
  cents, not estimates. Rounds are independent given what the seats held (a
  shuffle per round), so the day's expectation and variance are the sums of the
  rounds': the band a day's settled win should fall in at 95 %
  (COMAR 36.05.03.25 B(2); K.A.R. 112-108-51).
* **Theoretical win** (:func:`seat_theoretical`, :func:`round_theoretical`): what
  the wagers placed are worth to the house before any card is seen, when every
  seat plays the profile's strategy (Q-6-4, :func:`table.rules.strategy.plays_q64`),
  from the same full enumeration :mod:`table.rules.report` makes of each
  paytable.

Nothing here settles a wager itself: the seat's net for a dealer hand is what
:func:`table.rules.settlement.settle_seat` gives it. The dealer hands fall into
a few classes that every rule treats alike (the dealer does not qualify, or
qualifies and loses, ties or wins against the seat; for a Six Card Bonus wager
also the six cards' hand); one member of each class is settled, and its net is
the class's. Hand ranks come from :func:`table.rules.report.hand_ordinals`.

Amounts are int cents, results the house's (positive: the house won).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from itertools import combinations
from math import comb
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from protocols.cards import Card

from . import kinds
from .hands import SixCardCategory
from .paytables import PaytableError
from .profiles import PENNSYLVANIA, RulesProfile
from .report import N_DEALER, N_HANDS, N_SIX, _ante_play_counts, _hand_classes, hand_ordinals, six_card_counts
from .settlement import SeatRound, SettlementError, Tables, settle_seat
from .strategy import plays_q64
from .wagers import Decision, Wagers

#: The wagers a report counts, in its order: the ante's three results (the ante, the play
#: wager equal to it and the ante bonus paid on it, 649a.11, 649a.12(b)), then each side
#: wager kind of :mod:`table.rules.kinds`.
WAGER_KINDS = ("ante", "play", "ante_bonus") + tuple(k.key for k in kinds.side_kinds())


@dataclass(frozen=True)
class Expectation:
    """The house's result of one round (or a sum of rounds) as a random amount.

    ``mean`` and ``variance``: exact, in cents and cents squared (a
    :class:`~fractions.Fraction`); ``by_wager``: the mean split by wager (keys of
    :data:`WAGER_KINDS` that took part); ``outcomes``: how many equally likely
    outcomes were counted (the dealer hands; 0 for a sum). Adding two
    expectations of independent rounds adds means and variances."""

    mean: Fraction
    variance: Fraction
    by_wager: Mapping[str, Fraction] = field(default_factory=dict)
    outcomes: int = 0

    def __add__(self, other: "Expectation") -> "Expectation":
        keys = list(dict.fromkeys([*self.by_wager, *other.by_wager]))
        return Expectation(self.mean + other.mean, self.variance + other.variance,
                           {k: self.by_wager.get(k, Fraction(0)) + other.by_wager.get(k, Fraction(0)) for k in keys})

    def band(self, z: Fraction = Fraction(196, 100)) -> tuple[float, float]:
        """The interval ``mean -/+ z * sqrt(variance)`` in cents (floats: a square root is
        not a fraction); ``z`` = 1.96 for 95 % (a normal approximation of a sum of many
        independent rounds)."""
        half = float(z) * float(self.variance) ** 0.5
        return float(self.mean) - half, float(self.mean) + half


ZERO = Expectation(Fraction(0), Fraction(0), {}, 0)


def total(items: Iterable[Expectation]) -> Expectation:
    """The sum of independent rounds' expectations (:data:`ZERO` for none), exact.
    Fractions are summed by denominator first (rounds of one size share them), so a
    day of 1,600 rounds costs a few additions of fractions, not 1,600 each."""
    parts: dict[str, dict[int, int]] = {" mean": {}, " variance": {}}
    means, variances = parts[" mean"], parts[" variance"]
    for e in items:
        m, v = e.mean, e.variance
        means[m.denominator] = means.get(m.denominator, 0) + m.numerator
        variances[v.denominator] = variances.get(v.denominator, 0) + v.numerator
        for k, x in e.by_wager.items():
            d = parts.get(k)
            if d is None:
                d = parts[k] = {}
            d[x.denominator] = d.get(x.denominator, 0) + x.numerator

    def sum_of(name: str) -> Fraction:
        return sum((Fraction(num, den) for den, num in parts.get(name, {}).items()), Fraction(0))

    return Expectation(sum_of(" mean"), sum_of(" variance"),
                       {k: sum_of(k) for k in WAGER_KINDS if k in parts}, 0)


_DECK = tuple(Card.from_index(i) for i in range(52))


class _Cache:
    """Settled results by class, bounded: a class's results are the same in every round
    (the seat's wagers, decision, hand class and contest outcome, or a Six Card Bonus
    stake and hand), so a day settles each class once, not once a round."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self.items: dict[tuple, tuple] = {}

    def get(self, key: tuple) -> tuple | None:
        return self.items.get(key)

    def put(self, key: tuple, value: tuple) -> tuple:
        if len(self.items) >= self.limit:
            self.items.clear()
        self.items[key] = value
        return value


_CACHES: dict[tuple, _Cache] = {}


def _class_cache(tables: Tables, profile: RulesProfile) -> _Cache:
    key = (_tables_key(tables), profile)
    if key not in _CACHES:
        if len(_CACHES) >= 16:
            _CACHES.clear()
        _CACHES[key] = _Cache()
    return _CACHES[key]


def but_six_card(w: Wagers) -> Wagers:
    """``w`` without its Six Card Bonus wager (settled on its own, from the six cards)."""
    return Wagers(**{k: v for k, v in w.to_record().items() if k != "six_card"})


def _contest(s: SeatRound, tables: Tables, profile: RulesProfile) -> tuple:
    """One seat's results (its wagers but the Six Card Bonus) for each contest outcome:
    a tuple indexed 0 (the dealer does not qualify), 1 (the seat loses to a qualifying
    dealer), 2 (ties), 3 (wins), each a tuple of (wager, seat's amount). Settled once by
    :func:`settle_seat` against a dealer hand below queen high; the other outcomes
    differ from it only in the ante and the play wager (649a.11, 649a.12(a): the play
    wager is won 1 to 1 with the ante, both push, or both lose)."""
    w = s.wagers
    low = next(d for d in _LOW_DEALERS if not {str(c) for c in s.cards} & set(d))
    st = settle_seat(but_six_card(w), s.decision, s.cards, low, tables, profile)
    base = tuple((r.wager, r.amount) for r in st.results)
    if s.decision is not Decision.PLAY:
        return (base,) * 4
    a = w.ante

    def moved(ante: int, play: int) -> tuple:
        return tuple((wg, ante if wg == "ante" else play if wg == "play" else amt) for wg, amt in base)

    return (base, moved(-a, -a), moved(0, 0), moved(a, a))


# -- the dealer hands a settled round allowed -------------------------------------------------


@lru_cache(maxsize=64)
def _positions(m: int) -> Any:
    """Every 3-subset of ``range(m)`` in ascending order, as an (C(m,3), 3) int64 array."""
    return np.array(list(combinations(range(m), 3)), dtype=np.int64).reshape(-1, 3)


def _index(cards: Sequence[Card]) -> list[int]:
    return [c.index for c in cards]


def _straight_top_of_mask(mask: int) -> int:
    """Top rank (0 deuce .. 12 ace; 3 for the wheel A-5) of the best five-rank straight
    in a 13-bit rank mask, or -1."""
    ext = (mask << 1) | (mask >> 12)  # bit 0: the ace played low
    for top in range(13, 3, -1):
        if (ext >> (top - 4)) & 0b11111 == 0b11111:
            return top - 1
    return -1


@lru_cache(maxsize=1)
def _mask_tables() -> tuple[Any, Any]:
    """Per 13-bit rank mask: whether the ranks hold a five-rank straight, and the
    Six Card Bonus category of five or six cards of one suit with those ranks."""
    C = SixCardCategory
    straight = np.zeros(1 << 13, dtype=bool)
    suited = np.zeros(1 << 13, dtype=np.int64)
    for m in range(1 << 13):
        top = _straight_top_of_mask(m)
        straight[m] = top >= 0
        if m == 0b1111110000000:  # nine to ace, all six of one suit
            suited[m] = C.SIX_CARD_ROYAL
        elif top == 12:
            suited[m] = C.ROYAL_FLUSH
        elif top >= 0:
            suited[m] = C.STRAIGHT_FLUSH
        else:
            suited[m] = C.FLUSH
    return straight, suited


@lru_cache(maxsize=1)
def _rank_tables() -> tuple[Any, Any]:
    """The multisets of three ranks (455 of them): ``id_of[(r0 * 13 + r1) * 13 + r2]`` for
    ranks 0..12 in any order, and ``category[a, b]``: the Six Card Bonus category of six
    cards of rank multisets ``a`` and ``b`` when no five of them share a suit (four of a
    kind, full house, straight, three of a kind, nothing; an impossible pair, with a
    rank five times, is never looked up)."""
    C = SixCardCategory
    multisets = [m for m in combinations(range(13 + 2), 3)]  # stars and bars: r0 <= r1 <= r2
    triples = [(a, b - 1, c - 2) for a, b, c in multisets]
    id_of = np.zeros(13 ** 3, dtype=np.int64)
    counts = np.zeros((len(triples), 13), dtype=np.int8)  # at most 3 a rank; 6 for a pair of multisets
    for k, t in enumerate(triples):
        for perm in {(t[0], t[1], t[2]), (t[0], t[2], t[1]), (t[1], t[0], t[2]),
                     (t[1], t[2], t[0]), (t[2], t[0], t[1]), (t[2], t[1], t[0])}:
            id_of[(perm[0] * 13 + perm[1]) * 13 + perm[2]] = k
        for r in t:
            counts[k, r] += 1
    straight, _ = _mask_tables()
    both = counts[:, None, :] + counts[None, :, :]  # 455 x 455 x 13 in int8: 2.7 MB, not 21
    most = both.max(axis=2)
    pairs = (both >= 2).sum(axis=2)
    held = ((counts > 0) * (1 << np.arange(13))).sum(axis=1)  # each multiset's ranks as a mask
    mask = held[:, None] | held[None, :]  # a rank is among the six cards when among either three
    category = np.where(most >= 4, C.FOUR_OF_A_KIND,
                        np.where((most == 3) & (pairs >= 2), C.FULL_HOUSE,
                                 np.where(straight[mask], C.STRAIGHT,
                                          np.where(most == 3, C.THREE_OF_A_KIND, C.NOTHING))))
    return id_of, category


@dataclass(frozen=True)
class _DealerSide:
    """Per dealer hand: its rank multiset (:func:`_rank_tables`), its cards of each suit
    (N x 4) and their ranks as 13-bit masks (N x 4): computed once a round for every
    seat's Six Card Bonus."""

    multiset: Any
    suit_n: Any
    suit_mask: Any

    @classmethod
    def of(cls, dealer: Any) -> "_DealerSide":
        cols = [dealer[:, j] for j in range(3)]
        ranks, suits = [c >> 2 for c in cols], [c & 3 for c in cols]
        id_of, _ = _rank_tables()
        bits = [np.left_shift(1, r) for r in ranks]
        suit_n = np.empty((len(dealer), 4), dtype=np.int64)
        suit_mask = np.empty((len(dealer), 4), dtype=np.int64)
        for suit in range(4):
            is_suit = [x == suit for x in suits]
            suit_n[:, suit] = is_suit[0].astype(np.int64) + is_suit[1] + is_suit[2]
            # distinct cards of one suit have distinct ranks: the sum is the mask
            suit_mask[:, suit] = is_suit[0] * bits[0] + is_suit[1] * bits[1] + is_suit[2] * bits[2]
        return cls(id_of[(ranks[0] * 13 + ranks[1]) * 13 + ranks[2]], suit_n, suit_mask)


def six_card_codes(seat: Sequence[int], dealer: Any, side: "_DealerSide | None" = None) -> Any:
    """The Six Card Bonus hand of ``seat`` (three card indices) with each row of
    ``dealer`` (an (N, 3) int array of card indices), as ``category * 5 + suit``
    (suit 0..3 for the flush categories, 4 otherwise): the hand
    :func:`table.rules.hands.six_card_hand` finds (tests compare the two on every
    case drawn), for N rows at once (58 Pa. Code 649a.12(f), 649b.5(b): the best
    five of the six cards). The order of the checks is the same: five or six of
    one suit first (six cards holding five of a suit cannot hold four of a kind
    or a full house), then four of a kind, full house, straight, three of a kind."""
    side = side or _DealerSide.of(np.asarray(dealer, dtype=np.int64))
    _, suited_cat = _mask_tables()
    id_of, category = _rank_tables()
    r = [i // 4 for i in seat]
    out = category[int(id_of[(r[0] * 13 + r[1]) * 13 + r[2]])][side.multiset] * 5 + 4
    for suit in range(4):
        mine = [i // 4 for i in seat if i % 4 == suit]
        if len(mine) < 2:  # the dealer holds three cards: five of a suit needs two of the seat's
            continue
        rows = np.nonzero(side.suit_n[:, suit] >= 5 - len(mine))[0]
        if len(rows):
            out[rows] = suited_cat[side.suit_mask[rows, suit] | sum(1 << x for x in mine)] * 5 + suit
    return out


def _moments(values: Any) -> tuple[int, int]:
    """(sum, sum of squares) of an int array, in Python ints (no overflow)."""
    vals, counts = np.unique(values, return_counts=True)
    s = s2 = 0
    for v, c in zip(vals.tolist(), counts.tolist()):
        s += v * c
        s2 += v * v * c
    return s, s2


def _held_and_deck(seats: Sequence[SeatRound], profile: RulesProfile,
                   deck: Iterable[Card] | None) -> tuple[list[int], set[int]]:
    """The card indices the seats hold and the deck's, checked as :func:`round_expectation`
    says (raises :class:`~table.rules.settlement.SettlementError`)."""
    if profile.player_dealer_bank:
        raise SettlementError(f"profile {profile.name}: a player-dealer banks the round, not the house; "
                              "there is no house expectation to count")
    if not seats:
        raise SettlementError("a round needs at least one seat")
    held = [i for s in seats for i in _index(s.cards)]
    if len(set(held)) != len(held):
        raise SettlementError("a card is held twice among the seats")
    cards = set(range(52)) if deck is None else {c.index for c in deck}
    if not set(held) <= cards:
        raise SettlementError("a seat holds a card that is not in the deck")
    if len(cards) - len(held) < 3:
        raise SettlementError("fewer than three cards are left for the dealer's hand")
    return held, cards


def _six_card_results(s: SeatRound, idx: list[int], dealer: np.ndarray, side: Any, cache: Any, tables: Tables,
                      profile: RulesProfile, by_wager: dict[str, int]) -> np.ndarray:
    """The house's result of seat ``s``'s Six Card Bonus against each row of ``dealer``
    (an int64 array, one per row), settled once per hand code and cached; its total
    is taken from ``by_wager["six_card"]``."""
    w = s.wagers
    codes = six_card_codes(idx, dealer, side)
    code_n = np.bincount(codes, minlength=45).tolist()
    amounts = np.zeros(45, dtype=np.int64)
    for code, count in enumerate(code_n):
        if not count:
            continue
        ck = ("six_card", w.six_card, code)
        results = cache.get(ck)
        if results is None:
            rep = dealer[int(np.argmax(codes == code))].tolist()
            # The Six Card Bonus stands after a fold (649a.11(b)(3)): settled alone, beside an ante.
            st = settle_seat(Wagers(w.ante, six_card=w.six_card), Decision.FOLD, s.cards,
                             [_DECK[i] for i in rep], tables, profile)
            results = cache.put(ck, (("six_card", st.result("six_card").amount),))
        amounts[code] = results[0][1]
        by_wager["six_card"] = by_wager.get("six_card", 0) - results[0][1] * count
    return amounts[codes]


def round_expectation(seats: Sequence[SeatRound], tables: Tables, profile: RulesProfile = PENNSYLVANIA,
                      deck: Iterable[Card] | None = None) -> Expectation:
    """The house's exact expected result of a settled round, and its variance, over
    every dealer hand the cards no seat held allow.

    ``seats``: each seat's :class:`~table.rules.settlement.SeatRound` (wagers,
    decision, three cards) as the round was dealt and decided; ``tables``: the
    paytables the round was settled with; ``profile``: the rules profile;
    ``deck``: the cards the dealer's hand was drawn from with the seats' (default
    the 52; a smaller deck is for tests that check this against a slow
    enumeration). Returns an :class:`Expectation` with ``outcomes`` =
    C(52 - 3 x seats, 3).

    Raises :class:`~table.rules.settlement.SettlementError` for a card held
    twice or not in ``deck``, fewer than three cards left for the dealer, no seats, or a profile where a player-dealer banks the round (the
    house's result is then not the seats' loss: :mod:`table.rules.bank`).
    """
    held, cards = _held_and_deck(seats, profile, deck)
    ho = hand_ordinals(profile)
    classes = _hand_classes(profile).of_hand
    unseen = np.array(sorted(cards - set(held)), dtype=np.int64)
    dealer = unseen[_positions(len(unseen))]
    n = len(dealer)
    d_ord = ho.ordinal[ho.index_of[(dealer[:, 0] * 52 + dealer[:, 1]) * 52 + dealer[:, 2]]]
    # Dealer hands weakest first: each contest outcome is then one run of rows, the
    # hands that do not qualify first (below queen high, 58 Pa. Code 649a.11).
    order = np.argsort(d_ord, kind="stable")
    dealer, d_ord = dealer[order], d_ord[order]
    nq_end = int(np.searchsorted(d_ord, ho.qualifying, "left"))
    steps = np.zeros(n + 1, dtype=np.int64)  # the contest's house result, as steps along the rows
    house = np.zeros(n, dtype=np.int64)  # the Six Card Bonus's, row by row
    by_wager: dict[str, int] = {}
    cache = _class_cache(tables, profile)
    side = _DealerSide.of(dealer) if any(s.wagers.six_card for s in seats) else None
    for s in seats:
        idx = sorted(_index(s.cards))
        row = int(ho.index_of[(idx[0] * 52 + idx[1]) * 52 + idx[2]])
        w = s.wagers
        if s.decision is Decision.PLAY:
            # 0: the dealer does not qualify; 3, 2, 1: the seat beats, ties, loses to a qualifying dealer
            p = int(ho.ordinal[row])
            lo = max(nq_end, int(np.searchsorted(d_ord, p, "left")))
            hi = max(nq_end, int(np.searchsorted(d_ord, p, "right")))
            runs = ((0, 0, nq_end), (3, nq_end, lo), (2, lo, hi), (1, hi, n))
        else:
            runs = ((0, 0, n),)
        ck = (w.ante, w.pair_plus, w.progressive, s.decision, int(classes[row]))
        outcomes = cache.get(ck)
        if outcomes is None:
            outcomes = cache.put(ck, _contest(s, tables, profile))
        for k, a, b in runs:
            if a == b:
                continue
            net = 0
            for wager, amount in outcomes[k]:
                net += amount
                by_wager[wager] = by_wager.get(wager, 0) - amount * (b - a)
            steps[a] -= net
            steps[b] += net
        if w.six_card:
            house -= _six_card_results(s, idx, dealer, side, cache, tables, profile, by_wager)
    house += np.cumsum(steps[:-1])
    s1, s2 = _moments(house)
    return Expectation(Fraction(s1, n), Fraction(n * s2 - s1 * s1, n * n),
                       {k: Fraction(by_wager[k], n) for k in WAGER_KINDS if k in by_wager}, n)


# -- the theoretical win: before any card, at the profile's strategy ------------------------------

#: Dealer hands below queen high and pairwise disjoint: a seat's three cards meet at
#: most three of them, so one is always left to settle a "dealer does not qualify".
_LOW_DEALERS = (("2c", "3d", "5h"), ("4s", "6c", "7d"), ("8h", "9s", "Jc"), ("2h", "4d", "6s"))


def _tables_key(tables: Tables) -> tuple:
    """A hashable stand-in for ``tables`` (a paytable's lines are a dict): its lines and the meter."""
    return tuple(None if pt is None else (pt.name, pt.kind, tuple(pt.lines.items()))
                 for pt in (tables.ante_bonus, tables.pair_plus, tables.six_card_bonus, tables.progressive)
                 ) + (tables.progressive_meter_cents,)


_THEORETICAL: dict[tuple, "Expectation"] = {}
_THEORETICAL_MAX = 1024


def seat_theoretical(wagers: Wagers, tables: Tables, profile: RulesProfile = PENNSYLVANIA) -> Expectation:
    """What one seat's ``wagers`` are worth to the house before the deal, every
    deal of its three cards and the dealer's alike likely and the seat playing
    Q-6-4 or better (:func:`table.rules.strategy.plays_q64`).

    The ante, play, ante bonus, Pair Plus and progressive wagers are counted
    jointly over all 22,100 x 18,424 deals of the seat's and the dealer's hands
    (their mean and variance are exact); the Six Card Bonus over all C(52, 6)
    six-card sets (exact alone). The covariance between the Six Card Bonus and
    the seat's other wagers is left out of the variance, as is, in
    :func:`round_theoretical`, the covariance between seats (the same dealer
    hand plays against every seat): the theoretical band is an approximation;
    the band given the decisions (:func:`round_expectation`) is exact.

    Raises :class:`~table.rules.settlement.SettlementError` for a profile where a
    player-dealer banks the round, or a wager whose paytable is missing; a
    progressive meter line needs ``tables.progressive_meter_cents``.
    """
    key = (wagers, _tables_key(tables), profile)
    hit = _THEORETICAL.get(key)
    if hit is None:
        hit = _seat_theoretical(wagers, tables, profile)
        if len(_THEORETICAL) >= _THEORETICAL_MAX:
            _THEORETICAL.clear()
        _THEORETICAL[key] = hit
    return hit


def _proportional(pt: Any) -> bool:
    """Whether every line of paytable ``pt`` pays in proportion to the wager (N to 1, N for 1)."""
    return pt is not None and all(p.form in ("to", "for") for p in pt.lines.values())


_PARTS: dict[tuple, dict[str, Any]] = {}


def _part(group: str, stake: int, with_ante: bool, tables: Tables, profile: RulesProfile) -> dict[str, Any]:
    """The house's result on one wager group of a seat (``"ante"``: ante, play and ante
    bonus; ``"pair_plus"``; ``"progressive"``) at ``stake``, per hand class and contest
    outcome (does not qualify, seat wins, ties, loses): wager -> an (classes, 4) int64
    array, each class settled once by :func:`settle_seat` at Q-6-4 play. Cached; a
    paytable paying in proportion to the wager is settled at a 1-cent stake and scaled."""
    pt = {"ante": tables.ante_bonus, "pair_plus": tables.pair_plus, "progressive": tables.progressive}[group]
    unit = _proportional(pt)
    # The rows kept are the group's own wagers', paid from the group's paytable alone: the key
    # is that paytable, with the meter only when one of its lines pays a share of it (a day's
    # progressive meter differs at every round; the ante's and Pair Plus's rows do not).
    meter = tables.progressive_meter_cents if pt is not None and any(
        p.form == "meter" for p in pt.lines.values()) else None
    own = None if pt is None else (pt.name, pt.kind, tuple(pt.lines.items()))
    key = (own, meter, profile, group, 1 if unit else stake, with_ante)
    part = _PARTS.get(key)
    if part is None:
        at = 1 if unit else stake
        hc = _hand_classes(profile)
        lows = [tuple(Card.parse(c) for c in d) for d in _LOW_DEALERS]
        if group == "ante":
            w = Wagers(at)
        elif group == "pair_plus":
            w = Wagers(1 if with_ante else 0, pair_plus=at)
        else:
            w = Wagers(1, progressive=at)
        rows: dict[str, Any] = {}
        for i, v in enumerate(hc.values):
            cards = list(v.cards)
            low = next(d for d in lows if not set(cards) & set(d))
            plays = plays_q64(cards, profile)
            dec = (Decision.PLAY if plays else Decision.FOLD) if group != "pair_plus" or with_ante else None
            st = settle_seat(w, dec, cards, low, tables, profile)
            for r in st.results:
                if group != "ante" and r.wager != group:
                    continue
                rows.setdefault(r.wager, np.zeros((len(hc.values), 4), dtype=np.int64))[i, :] = -r.amount
            if group == "ante" and dec is Decision.PLAY:
                # From "does not qualify" (ante paid 1 to 1, play returned) to the contest's
                # outcomes, 649a.11 and 649a.12(a): seat wins (play paid), ties (ante and play
                # push), loses (both lost).
                rows.setdefault("play", np.zeros((len(hc.values), 4), dtype=np.int64))
                rows["play"][i, 1], rows["play"][i, 3] = -at, at
                rows["ante"][i, 2], rows["ante"][i, 3] = 0, at
        part = {"unit": unit, "rows": rows}
        if len(_PARTS) >= 256:
            _PARTS.clear()
        _PARTS[key] = part
    scale = stake if part["unit"] else 1
    return {k: v * scale for k, v in part["rows"].items()}


@lru_cache(maxsize=8)
def _class_weights(profile: RulesProfile, with_ante: bool) -> Any:
    """How many deals of (seat hand, dealer hand) fall in each class and contest outcome:
    an (classes, 4) int64 array; a hand folded at Q-6-4 (or a seat without an ante)
    counts every dealer hand in the first column."""
    hc = _hand_classes(profile)
    counts = np.stack([np.bincount(hc.of_hand, weights=x, minlength=len(hc.values)).astype(np.int64)
                       for x in _ante_play_counts(profile)], axis=1)
    alone = np.zeros_like(counts)
    alone[:, 0] = hc.class_size * N_DEALER
    if not with_ante:
        return alone
    plays = np.array([plays_q64(v.cards, profile) for v in hc.values])
    return np.where(plays[:, None], counts, alone)


def _seat_theoretical(wagers: Wagers, tables: Tables, profile: RulesProfile) -> Expectation:
    if profile.player_dealer_bank:
        raise SettlementError(f"profile {profile.name}: a player-dealer banks the round, not the house")
    for kind in kinds.side_kinds():
        slot = kind.paytable_slot or ""
        if wagers.amount(kind.key) and tables.slot(slot) is None:
            raise SettlementError(f"a {slot} wager was placed but no {slot} paytable was selected")
    mean, var, by_wager = Fraction(0), Fraction(0), {}
    with_ante = wagers.ante > 0
    parts: dict[str, Any] = {}
    for group, stake in (("ante", wagers.ante), ("pair_plus", wagers.pair_plus), ("progressive", wagers.progressive)):
        if stake:
            parts.update(_part(group, stake, with_ante, tables, profile))
    if parts:
        weights = _class_weights(profile, with_ante)
        x = sum(parts.values())
        n = N_HANDS * N_DEALER
        s1 = int((weights * x).sum())
        s2 = sum(int(v) for v in (weights * x * x).sum(axis=0).tolist())  # per column: no overflow at table stakes
        mean += Fraction(s1, n)
        var += Fraction(n * s2 - s1 * s1, n * n)
        by_wager.update({k: Fraction(int((weights * v).sum()), n) for k, v in parts.items()})
    if wagers.six_card:
        pt = tables.six_card_bonus
        if pt is None:
            raise SettlementError("a six_card_bonus wager was placed but no six_card_bonus paytable was selected")
        stake = wagers.six_card
        s1 = s2 = 0
        for hand, count in six_card_counts().items():
            line = pt.line_for(hand)
            try:
                x = -pt.lines[line].net_cents(stake, tables.progressive_meter_cents) if line else stake
            except PaytableError:
                raise SettlementError(f"six_card: line {line!r} of {pt.name} needs a meter amount") from None
            s1 += x * count
            s2 += x * x * count
        mean += Fraction(s1, N_SIX)
        var += Fraction(N_SIX * s2 - s1 * s1, N_SIX * N_SIX)
        by_wager["six_card"] = Fraction(s1, N_SIX)
    return Expectation(mean, var, {k: by_wager[k] for k in WAGER_KINDS if k in by_wager}, 0)


def round_theoretical(wagers: Iterable[Wagers], tables: Tables,
                      profile: RulesProfile = PENNSYLVANIA) -> Expectation:
    """The theoretical win of one round: the sum of :func:`seat_theoretical` over its
    seats' wagers (the mean is exact; the variance leaves out the covariance between
    seats, see :func:`seat_theoretical`)."""
    return total(seat_theoretical(w, tables, profile) for w in wagers)


def dealer_hands(seats: int) -> int:
    """How many dealer hands the unseen cards allow with ``seats`` seats dealt: C(52 - 3 x seats, 3)."""
    return comb(52 - 3 * seats, 3)
