"""Exact return of each paytable, by full enumeration.

Nothing here is typed in: every figure is counted from the 52-card deck.

* Ante and play wager, for one ante bonus paytable: for each of the 22,100
  player hands, the dealer's 18,424 remaining hands are counted as does not
  qualify / qualifies and loses / ties / wins (inclusion-exclusion over the
  player's cards on sorted rank lists, so no pair of hands is ever compared in
  a double loop). The optimal strategy plays a hand when playing loses less
  than folding (a fold loses the ante); the report gives its boundary, the
  house edge per ante and the element of risk (house edge per unit wagered,
  ante plus the average play wager).
* Pair Plus and progressive: the 22,100 player hands, line by line.
* Six Card Bonus: all C(52,6) = 20,358,520 six-card sets, counted by rank
  set: at most one suit can hold five or six cards, and only sets of five or six
  distinct ranks can hold one (3,003 of them), so the flush assignments are
  few and counted directly; below five distinct ranks only the pattern of
  rank counts decides the hand.

Figures are :class:`fractions.Fraction`; the text and JSON forms also give a
percentage to 4 decimals. House edge is positive when the house wins.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import combinations
from math import comb, factorial, perm, prod
from typing import Any, Iterable, Iterator

import numpy as np

from protocols.cards import RANK_CHARS, Suit, full_deck

from .hands import (
    ACE,
    NINE,
    QUALIFYING_KEY,
    HandValue,
    SixCardCategory,
    SixCardHand,
    _straight_top,
    evaluate,
)
from .paytables import Paytable, PaytableError
from .profiles import PENNSYLVANIA, RulesProfile
from .strategy import plays_q64

N_HANDS = comb(52, 3)  # 22,100 player hands
N_DEALER = comb(49, 3)  # 18,424 dealer hands for each
N_SIX = comb(52, 6)  # 20,358,520 six-card sets


def pct(x: Fraction) -> str:
    """``x`` as a percentage rounded half away from zero to 4 decimals, e.g. ``"3.3730%"``."""
    v = x * 100 * 10_000
    sign = "-" if v < 0 else ""
    n = (abs(v) * 2 + 1) // 2  # round half up on the magnitude
    return f"{sign}{n // 10_000}.{n % 10_000:04d}%"


def frac(x: Fraction) -> str:
    """``x`` as ``"p/q"`` (or ``"p"`` when whole)."""
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def figure(x: Fraction) -> dict[str, str]:
    """JSON form of one figure: exact fraction and 4-decimal percentage."""
    return {"fraction": frac(x), "percent": pct(x)}


def hand_text(v: HandValue) -> str:
    """A hand class as text, e.g. ``"Q-6-4 (high card)"``."""
    ranks = sorted((c.rank for c in v.cards), reverse=True)
    return "-".join(RANK_CHARS[r - 2] for r in ranks) + f" ({v.category.label})"


# --------------------------------------------------------------------------
# Ante / play


@dataclass(frozen=True)
class PlayerHandOdds:
    """For one player hand: counts of the dealer's 18,424 hands that do not
    qualify, qualify and lose to it, tie it, and beat it."""

    hand: HandValue
    no_qualify: int
    win: int
    tie: int
    lose: int


@dataclass(frozen=True)
class _HandClasses:
    """The 22,100 three-card hands grouped into classes that every rule here
    treats alike: the same ranks, and the same suit when all three share one
    (suits never break ties; a suit matters only to a flush's lines, such as
    ``mini_royal_spades``). About 1,600 classes, so each rule is asked once a
    class, not once a hand.

    Arrays are numpy, one row per hand in ``itertools.combinations(range(52), 3)``
    order: ``hands`` (22,100 x 3 card indices), ``of_hand`` (its class),
    ``ordinal`` (rank of its :attr:`HandValue.key` among all keys, 0 weakest).
    ``values``: one :class:`HandValue` per class (a member of it), ``class_size``
    the hands in each class, ``class_ordinal`` its ordinal, ``n_ordinals`` the
    distinct keys.
    """

    hands: Any
    of_hand: Any
    ordinal: Any
    values: tuple[HandValue, ...]
    class_size: Any
    class_ordinal: Any
    n_ordinals: int


@lru_cache(maxsize=4)
def _hand_classes(profile: RulesProfile) -> _HandClasses:
    deck = full_deck()
    hands = np.array(list(combinations(range(52), 3)), dtype=np.int64)
    ranks, suits = hands // 4 + 2, hands % 4  # Card.index = (rank - 2) * 4 + suit
    suited = (suits[:, 0] == suits[:, 1]) & (suits[:, 1] == suits[:, 2])
    code = ((ranks[:, 2] * 16 + ranks[:, 1]) * 16 + ranks[:, 0]) * 5 + np.where(suited, suits[:, 0], 4)
    _, first, of_hand = np.unique(code, return_index=True, return_inverse=True)
    values = tuple(evaluate([deck[i] for i in hands[f]], profile) for f in first.tolist())
    keys = sorted({v.key for v in values})
    ordinal_of = {k: i for i, k in enumerate(keys)}
    class_ordinal = np.array([ordinal_of[v.key] for v in values], dtype=np.int64)
    return _HandClasses(hands, of_hand, class_ordinal[of_hand], values,
                        np.bincount(of_hand, minlength=len(values)), class_ordinal, len(keys))


@dataclass(frozen=True)
class HandOrdinals:
    """Every three-card hand's place in the ranking, as numpy arrays (for
    :mod:`table.rules.expectation`, which compares a seat's hand with every
    dealer hand the unseen cards allow without evaluating one of them).

    ``index_of``: a flat int64 array of 52**3 entries; for card indices
    ``a < b < c`` (:attr:`~protocols.cards.Card.index`), ``index_of[(a * 52 + b) * 52 + c]``
    is the hand's row in ``itertools.combinations(range(52), 3)`` order (-1 elsewhere).
    ``ordinal``: per row, the rank of its :attr:`HandValue.key` among all keys (0
    weakest; equal keys, equal ordinals: a tie). ``qualifying``: the first ordinal
    at queen high or better (the dealer qualifies, 58 Pa. Code 649a.11).
    """

    index_of: Any
    ordinal: Any
    qualifying: int


@lru_cache(maxsize=4)
def hand_ordinals(profile: RulesProfile = PENNSYLVANIA) -> HandOrdinals:
    """The :class:`HandOrdinals` of ``profile`` (computed once per profile, ~0.2 s)."""
    hc = _hand_classes(profile)
    h = hc.hands
    index_of = np.full(52 ** 3, -1, dtype=np.int64)
    index_of[(h[:, 0] * 52 + h[:, 1]) * 52 + h[:, 2]] = np.arange(len(h), dtype=np.int64)
    q = bisect.bisect_left(sorted({v.key for v in hc.values}), QUALIFYING_KEY)
    return HandOrdinals(index_of, hc.ordinal, q)


@lru_cache(maxsize=4)
def _ante_play_counts(profile: RulesProfile) -> tuple[Any, Any, Any, Any]:
    """Per player hand (numpy int64 arrays in :class:`_HandClasses` order): the
    dealer's remaining 18,424 hands that do not qualify, that it beats, ties,
    and loses to.

    Counted by inclusion-exclusion over the player's cards: the dealer hands
    below an ordinal x that share no card with the player's are all hands below
    x, less those holding each of its cards, plus those holding each pair of
    them, less the player's own hand. Cumulative count tables by card and by
    pair of cards make every term one array look-up.
    """
    hc = _hand_classes(profile)
    hands, o, n_ord = hc.hands, hc.ordinal, hc.n_ordinals
    n = len(o)
    cum = np.concatenate(([0], np.cumsum(np.bincount(o, minlength=n_ord))))
    by_card = np.zeros((52, n_ord), dtype=np.int64)
    for j in range(3):
        np.add.at(by_card, (hands[:, j], o), 1)
    card_cum = np.concatenate((np.zeros((52, 1), dtype=np.int64), np.cumsum(by_card, axis=1)), axis=1)
    pair_ids = [hands[:, i] * 52 + hands[:, j] for i, j in ((0, 1), (0, 2), (1, 2))]
    used, compact = np.unique(np.concatenate(pair_ids), return_inverse=True)
    pairs = compact.reshape(3, n)
    by_pair = np.zeros((len(used), n_ord), dtype=np.int64)
    for j in range(3):
        np.add.at(by_pair, (pairs[j], o), 1)
    pair_cum = np.concatenate((np.zeros((len(used), 1), dtype=np.int64), np.cumsum(by_pair, axis=1)), axis=1)
    a, b, c = hands[:, 0], hands[:, 1], hands[:, 2]

    def below(x: Any) -> Any:
        """Dealer hands disjoint from each player's cards with ordinal < x."""
        return (cum[x] - card_cum[a, x] - card_cum[b, x] - card_cum[c, x]
                + pair_cum[pairs[0], x] + pair_cum[pairs[1], x] + pair_cum[pairs[2], x]
                - (o < x))

    q = bisect.bisect_left(sorted({v.key for v in hc.values}), QUALIFYING_KEY)  # first ordinal at queen high
    nq = below(np.full(n, q))
    lo, hi = below(o), below(o + 1)
    qualifies = o >= q  # a player hand below queen high loses to every qualifying dealer hand
    win = np.where(qualifies, lo - nq, 0)
    tie = np.where(qualifies, hi - lo, 0)
    lose = np.where(qualifies, N_DEALER - hi, N_DEALER - nq)
    return nq, win, tie, lose


def ante_play_table(profile: RulesProfile = PENNSYLVANIA) -> tuple[PlayerHandOdds, ...]:
    """The dealer-outcome counts of every one of the 22,100 player hands under
    ``profile`` (the same for every ante bonus paytable), each with the hand's
    own :class:`HandValue`, in ``itertools.combinations`` order of the deck."""
    deck = full_deck()
    hc = _hand_classes(profile)
    nq, win, tie, lose = (x.tolist() for x in _ante_play_counts(profile))
    return tuple(
        PlayerHandOdds(evaluate([deck[i] for i in h], profile), *row)
        for h, *row in zip(hc.hands.tolist(), nq, win, tie, lose)
    )


@dataclass(frozen=True)
class AnteReport:
    """Ante/play return of one ante bonus paytable under the optimal strategy.

    ``house_edge``: expected loss per ante; ``element_of_risk``: expected loss
    per unit wagered (ante + average play wager); ``play_probability``: share
    of hands played; ``weakest_played``/``strongest_folded``: the boundary;
    ``exceptions``: hands on the wrong side of a rank boundary (none when the
    strategy is a pure threshold); ``q64_house_edge``: the edge of the Q-6-4
    rule, for comparison; ``indifferent``: hands where play and fold are equal.
    """

    paytable: Paytable
    profile: str
    house_edge: Fraction
    element_of_risk: Fraction
    play_probability: Fraction
    weakest_played: str
    strongest_folded: str
    threshold: bool
    exceptions: tuple[str, ...]
    indifferent: int
    q64_house_edge: Fraction
    q64_is_optimal: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.paytable.name, "kind": self.paytable.kind, "profile": self.profile,
            "citation": self.paytable.citation,
            "strategy": {
                "play_weakest": self.weakest_played, "fold_strongest": self.strongest_folded,
                "threshold": self.threshold, "exceptions": list(self.exceptions),
                "indifferent_hands": self.indifferent, "q64_is_optimal": self.q64_is_optimal,
            },
            "house_edge_per_ante": figure(self.house_edge),
            "element_of_risk": figure(self.element_of_risk),
            "play_probability": figure(self.play_probability),
            "q64_house_edge_per_ante": figure(self.q64_house_edge),
        }

    def lines(self) -> list[str]:
        """Human-readable report lines."""
        s = [
            f"  strategy: play {self.weakest_played} or better; fold {self.strongest_folded} or worse"
            + ("" if self.threshold else f" (exceptions: {', '.join(self.exceptions)})"),
            f"  hands played: {pct(self.play_probability)}  ({frac(self.play_probability)})",
            f"  house edge per ante: {pct(self.house_edge)}  ({frac(self.house_edge)})",
            f"  element of risk: {pct(self.element_of_risk)}  ({frac(self.element_of_risk)})",
            f"  Q-6-4 rule: {'optimal' if self.q64_is_optimal else 'house edge ' + pct(self.q64_house_edge)}",
        ]
        return s


def _bonus_odds(pt: Paytable, v: HandValue) -> int:
    line = pt.line_for(v)
    if line is None:
        return 0
    p = pt.lines[line]
    if p.form != "to":
        raise PaytableError(f"ante bonus line {line!r} must pay N to 1", pt.source)
    return p.value


def ante_report(pt: Paytable, profile: RulesProfile = PENNSYLVANIA) -> AnteReport:
    """Enumerate the ante/play return of ante bonus paytable ``pt``.

    Raises :class:`~table.rules.paytables.PaytableError` if ``pt`` is not an
    ante bonus paytable.
    """
    if pt.kind != "ante_bonus":
        raise PaytableError(f"{pt.name} is a {pt.kind} paytable, not ante_bonus")
    hc = _hand_classes(profile)
    nq, win, _tie, lose = _ante_play_counts(profile)
    fold = -N_DEALER
    bonus = np.array([_bonus_odds(pt, v) for v in hc.values], dtype=np.int64)[hc.of_hand]
    q64 = np.array([plays_q64(v.cards, profile) for v in hc.values])[hc.of_hand]
    play = nq + 2 * win - 2 * lose + N_DEALER * bonus  # per hand, in units of 1/N_DEALER ante
    plays = play > fold
    indifferent = int(np.count_nonzero(play == fold))
    total_opt = int(np.where(plays, play, fold).sum())
    total_q64 = int(np.where(q64, play, fold).sum())
    played = int(np.count_nonzero(plays))
    denom = N_HANDS * N_DEALER
    edge = Fraction(-total_opt, denom)
    edge_q64 = Fraction(-total_q64, denom)
    p_play = Fraction(played, N_HANDS)
    eor = edge / (1 + p_play)
    # The boundary by key ordinal (HandValue compares by key alone; one key, one text).
    value_of_ordinal = {int(o): v for o, v in zip(hc.class_ordinal.tolist(), hc.values)}
    played_ords, folded_ords = np.unique(hc.ordinal[plays]), np.unique(hc.ordinal[~plays])
    w = int(played_ords[0])
    weakest = value_of_ordinal[w]
    s = int(folded_ords[-1]) if len(folded_ords) else None
    strongest = value_of_ordinal[s] if s is not None else None
    threshold = s is None or s < w
    exceptions: list[str] = []
    if not threshold:
        # card removal can make the decision depend on more than rank: list the
        # played hands below the strongest fold and the folds above the weakest play
        exceptions = sorted(
            {f"fold {hand_text(value_of_ordinal[int(x)])}" for x in folded_ords if x > w}
            | {f"play {hand_text(value_of_ordinal[int(x)])}" for x in played_ords if x < s}
        )[:20]
    return AnteReport(
        paytable=pt,
        profile=profile.name,
        house_edge=edge,
        element_of_risk=eor,
        play_probability=p_play,
        weakest_played=hand_text(weakest),
        strongest_folded=hand_text(strongest) if strongest else "nothing",
        threshold=threshold,
        exceptions=tuple(exceptions),
        indifferent=indifferent,
        q64_house_edge=edge_q64,
        q64_is_optimal=total_q64 == total_opt,
    )


# --------------------------------------------------------------------------
# Pair Plus and progressive (the player's three cards)


def three_card_line_counts(pt: Paytable, profile: RulesProfile = PENNSYLVANIA) -> Counter:
    """How many of the 22,100 hands each line of ``pt`` pays (``None``: no line)."""
    hc = _hand_classes(profile)
    out: Counter = Counter()
    for v, n in zip(hc.values, hc.class_size.tolist()):
        out[pt.line_for(v)] += n
    return out


@dataclass(frozen=True)
class LineReport:
    """Return of a fixed-line wager (Pair Plus, Six Card Bonus, progressive).

    ``counts``: hands or sets per line (``None`` = lose) out of ``total``;
    ``house_edge`` per unit wagered (``None`` for a progressive, whose return
    depends on the meter); ``break_even_meter``: for a progressive, the meter
    (in wagers) at which the house edge is zero; ``wager_cents``: the wager
    assumed for flat-amount lines, else ``None``.
    """

    paytable: Paytable
    profile: str
    total: int
    counts: dict[str | None, int]
    house_edge: Fraction | None
    break_even_meter: Fraction | None = None
    fixed_return: Fraction | None = None
    wager_cents: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d: dict[str, Any] = {
            "name": self.paytable.name, "kind": self.paytable.kind, "profile": self.profile,
            "citation": self.paytable.citation, "combinations": self.total,
            "counts": {str(k) if k else "no line": v for k, v in self.counts.items()},
        }
        if self.house_edge is not None:
            d["house_edge"] = figure(self.house_edge)
        if self.break_even_meter is not None:
            d["break_even_meter_wagers"] = frac(self.break_even_meter)
            d["break_even_meter_per_dollar_wager"] = _dollars(self.break_even_meter * 100)
        if self.fixed_return is not None:
            d["return_of_fixed_lines"] = figure(self.fixed_return)
        if self.wager_cents is not None:
            d["wager_cents_for_flat_lines"] = self.wager_cents
        return d

    def lines(self) -> list[str]:
        """Human-readable report lines."""
        out = []
        for line, p in self.paytable.lines.items():
            out.append(f"  {line:<24} {str(p):>22}  {self.counts.get(line, 0):>10,} / {self.total:,}")
        if self.house_edge is not None:
            extra = f" (flat lines valued at a {_dollars(self.wager_cents)} wager)" if self.wager_cents else ""
            out.append(f"  house edge: {pct(self.house_edge)}  ({frac(self.house_edge)}){extra}")
        if self.break_even_meter is not None:
            out.append(
                f"  break-even meter: {frac(self.break_even_meter)} wagers "
                f"({_dollars(self.break_even_meter * 100)} for a $1.00 wager); "
                f"fixed lines return {pct(self.fixed_return)}"
            )
        return out


def _dollars(cents: Fraction | int) -> str:
    c = Fraction(cents)
    whole = (c.numerator * 2 + c.denominator) // (2 * c.denominator)  # to the cent
    return f"${whole // 100:,}.{whole % 100:02d}" + ("" if c.denominator == 1 else " (rounded)")


def _line_return(pt: Paytable, counts: Counter, total: int, wager_cents: int | None):
    """(return of fixed lines incl. stake, meter weight) per unit wagered."""
    ret = Fraction(0)
    meter_weight = Fraction(0)
    for line, n in counts.items():
        if line is None:
            continue
        p = pt.lines[line]
        share = Fraction(n, total)
        if p.form == "to":
            ret += share * (p.value + 1)
        elif p.form == "for":
            ret += share * p.value
        elif p.form == "flat":
            ret += share * (1 + Fraction(p.value, wager_cents))
        else:  # meter: pays value% of the meter in place of the wager
            meter_weight += share * Fraction(p.value, 100)
    return ret, meter_weight


def line_report(pt: Paytable, profile: RulesProfile = PENNSYLVANIA, wager_cents: int = 500) -> LineReport:
    """Enumerate a Pair Plus, Six Card Bonus or progressive paytable.

    ``wager_cents`` values flat-amount lines (649a.12(f) Paytable E) only.
    Raises :class:`~table.rules.paytables.PaytableError` for an ante bonus
    paytable (use :func:`ante_report`).
    """
    if pt.kind == "ante_bonus":
        raise PaytableError(f"{pt.name} is an ante bonus paytable; use ante_report")
    if pt.kind == "six_card_bonus":
        counts = Counter()
        for hand, n in six_card_counts().items():
            counts[pt.line_for(hand)] += n
        total = N_SIX
    else:
        counts = three_card_line_counts(pt, profile)
        total = N_HANDS
    has_flat = any(p.form == "flat" for p in pt.lines.values())
    wc = wager_cents if has_flat else None
    ret, meter_w = _line_return(pt, counts, total, wc)
    ordered = {ln: counts.get(ln, 0) for ln in pt.lines}
    ordered[None] = counts.get(None, 0)
    if meter_w:
        return LineReport(pt, profile.name, total, ordered, None, (1 - ret) / meter_w, ret, wc)
    return LineReport(pt, profile.name, total, ordered, 1 - ret, None, None, wc)


# --------------------------------------------------------------------------
# Six Card Bonus: counting all C(52,6) sets


def _suited_five_or_six(ranks: set[int]) -> SixCardCategory:
    if len(ranks) == 6 and ranks == set(range(NINE, ACE + 1)):
        return SixCardCategory.SIX_CARD_ROYAL
    top = _straight_top(ranks)
    if top == ACE:
        return SixCardCategory.ROYAL_FLUSH
    return SixCardCategory.STRAIGHT_FLUSH if top else SixCardCategory.FLUSH


def six_card_counts(ranks: Iterable[int] = range(2, 15)) -> dict[SixCardHand, int]:
    """Count the Six Card Bonus hand of every six-card set from a deck of the
    given ``ranks`` in four suits (the whole deck by default: C(52,6) sets).

    Keys are :class:`SixCardHand` with ``suit`` set only for
    ``SIX_CARD_ROYAL`` (the one hand a paytable pays by suit). Counted by sets
    of distinct ranks, rank-count patterns and suit combinatorics, not by
    visiting the sets.
    """
    rk = sorted(set(ranks))
    return dict(_six_card_counts(tuple(rk)))


def _count_patterns(size: int, most: int = 4) -> Iterator[tuple[int, ...]]:
    """Every way to split ``size`` cards into ranks holding at most ``most`` each,
    as counts high to low, e.g. (3, 2, 1)."""

    def rec(left: int, cap: int) -> Iterator[tuple[int, ...]]:
        if left == 0:
            yield ()
            return
        for c in range(min(cap, left), 0, -1):
            for rest in rec(left - c, c):
                yield (c,) + rest

    yield from rec(size, most)


@lru_cache(maxsize=8)
def _six_card_counts(rk: tuple[int, ...]) -> tuple[tuple[SixCardHand, int], ...]:
    C = SixCardCategory
    out: Counter = Counter()
    per_suit_royal = 0
    # Six distinct ranks (4**6 suit assignments each): all six of one suit (4 ways,
    # one per suit), exactly five of one suit (flush suit 4 x off-card 6 x its suit
    # 3 = 12 per off-card), the rest unsuited.
    for distinct in combinations(rk, 6):
        ranks = set(distinct)
        cat6 = _suited_five_or_six(ranks)
        if cat6 is C.SIX_CARD_ROYAL:
            per_suit_royal += 1
        else:
            out[cat6] += 4
        for off in distinct:
            out[_suited_five_or_six(ranks - {off})] += 12
        out[C.STRAIGHT if _straight_top(ranks) else C.NOTHING] += 4 ** 6 - 4 - 72
    # Five distinct ranks, one of them paired (5 choices; C(4,2) x 4**4 suit
    # assignments each): five suited cards need every single of suit s and one of
    # the pair in s, 4 suits x 3 suits for the pair's other card = 12.
    for distinct in combinations(rk, 5):
        ranks = set(distinct)
        out[_suited_five_or_six(ranks)] += 5 * 12
        out[C.STRAIGHT if _straight_top(ranks) else C.NOTHING] += 5 * (comb(4, 2) * 4 ** 4 - 12)
    # Four or fewer distinct ranks: no straight and no flush; the hand is the
    # rank-count pattern's, counted once per choice of ranks for the counts.
    m = len(rk)
    for pattern in _count_patterns(6):
        if len(pattern) > 4 or len(pattern) > m:
            continue
        rank_choices = perm(m, len(pattern)) // prod(factorial(n) for n in Counter(pattern).values())
        ways = prod(comb(4, c) for c in pattern)
        if pattern[0] == 4:
            cat = C.FOUR_OF_A_KIND
        elif pattern[0] == 3 and pattern[1] >= 2:
            cat = C.FULL_HOUSE
        elif pattern[0] == 3:
            cat = C.THREE_OF_A_KIND
        else:
            cat = C.NOTHING
        out[cat] += rank_choices * ways
    result = {SixCardHand(cat): n for cat, n in out.items() if n}
    if per_suit_royal:
        for s in Suit:
            result[SixCardHand(C.SIX_CARD_ROYAL, s)] = per_suit_royal
    return tuple(result.items())


# --------------------------------------------------------------------------


def report(pt: Paytable, profile: RulesProfile = PENNSYLVANIA, wager_cents: int = 500) -> AnteReport | LineReport:
    """The report of one paytable, whatever its kind."""
    if pt.kind == "ante_bonus":
        return ante_report(pt, profile)
    return line_report(pt, profile, wager_cents)
