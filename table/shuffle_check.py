"""Shuffle randomness check: chi-square on the dealt position of each card.

In the style of GLI-29 and COMAR 36.05.02.17 F: for each deck, count how
often card *c* was dealt at position *p* (its draw index within the deck's
round), and test those counts against a uniform shuffle with a chi-square
goodness-of-fit test at 95 % confidence. Pure: no I/O, no scipy.

Only dealt cards, as the shoe reads them, go in: the shuffled order of a deck
is never asked for (protocols/SPEC.md §4.2). So the counts cover positions ``0..P-1`` where
*P* is the number of cards dealt per round (``3 * (seats + 1)``); the undealt
stub is never seen and never counted.

The statistic, per deck and position *p* with *n_p* cards dealt there::

    X2 = sum over cards c of (O[c, p] - n_p / 52) ** 2 / (n_p / 52)

with 51 degrees of freedom per position, summed over positions and decks
(decks are independent; positions within one deck are very nearly so). The
p-value is the upper regularized incomplete gamma function
``Q(dof / 2, X2 / 2)``, computed here by its series and continued fraction
(Numerical Recipes, 3rd ed., §6.2).

Below ``min_expected`` cards expected per cell the verdict is
``"insufficient"``, never a pass. With equiprobable cells the chi-square
approximation holds down to about 1 expected per cell (Koehler and Larntz
1980), hence the default; raise it for a more conservative lab.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Hashable, Iterable, Sequence

DECK_SIZE = 52
#: Confidence of the test: fail when p < 1 - CONFIDENCE.
CONFIDENCE = 0.95


class PositionCounts:
    """Accumulates, per deck, how often each card was dealt at each position.

    ``deck_id``: any hashable naming the physical deck (``"A"``, a back
    colour...). ``draw_index``: the card's 0-based dealt position within the
    deck's round. ``card_index``: 0..51 (SPEC §3.1). A round of a deck starts
    at draw index 0; :meth:`add` counts a new round for the deck each time it
    sees draw index 0.
    """

    def __init__(self) -> None:
        self._counts: dict[Hashable, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
        self._rounds: dict[Hashable, int] = defaultdict(int)
        self._per_position: dict[Hashable, dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, deck_id: Hashable, draw_index: int, card_index: int) -> None:
        """Count one dealt card. Raises ``ValueError`` for a card index outside
        0..51 or a negative draw index."""
        if not 0 <= card_index < DECK_SIZE:
            raise ValueError(f"card index {card_index} is not 0..51")
        if draw_index < 0:
            raise ValueError(f"draw index {draw_index} is negative")
        if draw_index == 0:
            self._rounds[deck_id] += 1
        self._counts[deck_id][(draw_index, card_index)] += 1
        self._per_position[deck_id][draw_index] += 1

    def add_round(self, deck_id: Hashable, card_indices: list[int]) -> None:
        """Count one round's dealt cards, in draw order (draw index 0, 1, ...)."""
        for i, c in enumerate(card_indices):
            self.add(deck_id, i, c)

    @property
    def decks(self) -> list[Hashable]:
        """Deck ids seen, in first-seen order."""
        return list(self._counts)

    def rounds(self, deck_id: Hashable | None = None) -> int:
        """Rounds counted for ``deck_id`` (all decks when None)."""
        if deck_id is None:
            return sum(self._rounds.values())
        return self._rounds.get(deck_id, 0)

    def count(self, deck_id: Hashable, draw_index: int, card_index: int) -> int:
        """How often ``card_index`` was dealt at ``draw_index`` from ``deck_id``."""
        return self._counts.get(deck_id, {}).get((draw_index, card_index), 0)

    def positions(self, deck_id: Hashable) -> dict[int, int]:
        """Draw index -> cards dealt at it, for ``deck_id``."""
        return dict(sorted(self._per_position.get(deck_id, {}).items()))


def chi_square_statistic(counts: PositionCounts, deck_id: Hashable) -> tuple[float, int, float]:
    """``(X2, dof, smallest expected count per cell)`` for one deck.

    Every position dealt at least once contributes its 52 cells and 51 dof.
    Raises ``KeyError`` for a deck never counted.
    """
    per_position = counts.positions(deck_id)
    if not per_position:
        raise KeyError(deck_id)
    stat = 0.0
    dof = 0
    min_expected = math.inf
    for p, n in per_position.items():
        expected = n / DECK_SIZE
        min_expected = min(min_expected, expected)
        stat += sum((counts.count(deck_id, p, c) - expected) ** 2 for c in range(DECK_SIZE)) / expected
        dof += DECK_SIZE - 1
    return stat, dof, min_expected


def chi_square_sf(x: float, dof: int) -> float:
    """P(X2 >= x) for a chi-square variable with ``dof`` degrees of freedom (the p-value).

    ``x`` >= 0; ``dof`` >= 1. Equals ``Q(dof / 2, x / 2)``, the upper regularized
    incomplete gamma function. Raises ``ValueError`` on a negative ``x`` or
    ``dof`` < 1.
    """
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    if x < 0:
        raise ValueError(f"chi-square statistic must be >= 0, got {x}")
    return gamma_q(dof / 2, x / 2)


def gamma_q(a: float, x: float) -> float:
    """Upper regularized incomplete gamma ``Q(a, x) = Gamma(a, x) / Gamma(a)``; a > 0, x >= 0.

    Series for ``x < a + 1``, Lentz's continued fraction otherwise; relative
    error about 1e-14. Raises ``ValueError`` for ``a <= 0`` or ``x < 0``.
    """
    if a <= 0 or x < 0:
        raise ValueError("gamma_q needs a > 0 and x >= 0")
    if x == 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        # P(a, x) = e^-x x^a / Gamma(a + 1) * sum x^n / ((a+1)...(a+n))
        term = total = 1.0 / a
        ap = a
        for _ in range(10_000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return math.exp(log_prefix) * h


def chi_square_critical(dof: int, confidence: float = CONFIDENCE) -> float:
    """The statistic above which the test fails at ``confidence`` (e.g. 3.841 for 1 dof
    at 0.95), by bisection on :func:`chi_square_sf`. Raises ``ValueError`` for a
    confidence outside (0, 1)."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    alpha = 1 - confidence
    lo, hi = 0.0, float(dof) + 10 * math.sqrt(2 * dof) + 20
    while chi_square_sf(hi, dof) > alpha:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if chi_square_sf(mid, dof) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9 * max(1.0, hi):
            break
    return (lo + hi) / 2


def chi_square_report(counts: PositionCounts, *, confidence: float = CONFIDENCE,
                      min_expected: float = 1.0) -> dict[str, Any]:
    """The randomness verdict on ``counts``, as a JSON-ready dict.

    Keys: ``statistic`` (X2 summed over decks), ``dof``, ``p_value``,
    ``critical_value`` (X2 at which the test fails), ``confidence``,
    ``verdict`` (``"pass"``, ``"fail"`` when p < 1 - confidence, or
    ``"insufficient"`` when fewer than ``min_expected`` cards are expected per
    cell or nothing was counted), ``passed`` (True only for ``"pass"``),
    ``rounds`` (all decks), ``min_expected`` (smallest expected count per cell),
    ``decks``: deck id (as text) -> the same keys for that deck alone
    (``positions``: how many dealt positions it covers); ``rounds_per_deck_needed``
    (rounds of each deck a verdict takes) and ``rounds_needed`` (deck -> how many more
    of its rounds are needed at least; all 0 once there is a verdict).
    """
    decks: dict[str, dict[str, Any]] = {}
    total_stat, total_dof, overall_min = 0.0, 0, math.inf
    for deck_id in counts.decks:
        stat, dof, low = chi_square_statistic(counts, deck_id)
        total_stat += stat
        total_dof += dof
        overall_min = min(overall_min, low)
        decks[str(deck_id)] = {**_verdict(stat, dof, low, confidence, min_expected),
                               "rounds": counts.rounds(deck_id), "positions": len(counts.positions(deck_id))}
    need = {"rounds_per_deck_needed": rounds_per_deck_needed(min_expected),
            "rounds_needed": rounds_needed(counts, min_expected)}
    if total_dof == 0:
        return {"statistic": 0.0, "dof": 0, "p_value": None, "critical_value": None, "confidence": confidence,
                "verdict": "insufficient", "passed": False, "rounds": 0, "min_expected": 0.0, "decks": {}, **need}
    return {**_verdict(total_stat, total_dof, overall_min, confidence, min_expected),
            "rounds": counts.rounds(), "decks": decks, **need}


def rounds_per_deck_needed(min_expected: float = 1.0) -> int:
    """Rounds of one deck before it can have a verdict: every dealt position needs
    ``min_expected`` cards expected in each of its 52 cells, i.e. 52 deals (at the
    default of 1)."""
    return math.ceil(DECK_SIZE * min_expected - 1e-9)


def rounds_needed(counts: PositionCounts, min_expected: float = 1.0) -> dict[str, int]:
    """Per deck (id as text), how many more rounds of it are needed at least before the
    test can give a verdict (0 when it already can): its least-dealt position must reach
    :func:`rounds_per_deck_needed` deals. A lower bound: each further round is taken to
    deal every position again."""
    need = rounds_per_deck_needed(min_expected)
    out = {}
    for deck_id in counts.decks:
        dealt = min(counts.positions(deck_id).values(), default=0)
        out[str(deck_id)] = max(0, need - dealt)
    return out


def rounds_until_flagged(rounds: Iterable[tuple[Hashable, Sequence[int]]], *, confidence: float = CONFIDENCE,
                         min_expected: float = 1.0) -> int | None:
    """After how many rounds the test first fails, feeding ``rounds`` one at a time.

    ``rounds``: ``(deck_id, dealt card indices in draw order)`` per round, in
    the order they were dealt. Returns the 1-based count of rounds (all decks)
    at which :func:`chi_square_report` would first say ``"fail"``, or None if
    it never does. Rounds before every deck has ``min_expected`` cards
    expected per cell cannot fail (``"insufficient"``).

    Each round is a new look at the data, so over many rounds a fair shuffle
    is flagged somewhat more often than 5 % of the time: use this to say when
    a bad shuffle was caught, and :func:`chi_square_report` on the whole
    record for the verdict.
    """
    counts = PositionCounts()
    critical: dict[int, float] = {}
    for n, (deck_id, cards) in enumerate(rounds, start=1):
        counts.add_round(deck_id, list(cards))
        total, dof, low = 0.0, 0, math.inf
        for d in counts.decks:
            stat, k, m = chi_square_statistic(counts, d)
            total, dof, low = total + stat, dof + k, min(low, m)
        if low < min_expected:
            continue
        if dof not in critical:
            critical[dof] = chi_square_critical(dof, confidence)
        if total > critical[dof]:
            return n
    return None


def chi_square_series(rounds: Iterable[tuple[Hashable, Sequence[int]]], *, confidence: float = CONFIDENCE,
                      min_expected: float = 1.0, max_points: int = 200) -> dict[str, dict[str, Any]]:
    """Per deck, the chi-square statistic after each of its rounds: the shuffle check as a
    curve, for a chart with the line the test fails above.

    ``rounds``: ``(deck_id, dealt card indices in draw order)`` per round, in the order
    dealt. Returns deck id (as text) -> ``{"rounds", "points": [{"round", "statistic",
    "dof", "critical_value", "p_value", "verdict"}], "verdict", "p_value"}``, where
    ``round`` counts that deck's rounds, ``critical_value`` is the statistic at which the
    test fails at ``confidence`` (the 95 % line), and ``verdict`` is ``"insufficient"``
    while fewer than ``min_expected`` cards are expected per cell, never a pass. At most
    ``max_points`` points per deck, evenly spread over its rounds (its last always in).
    The statistic is updated per card, not recomputed: a deck's sum of squared counts
    per position (``X2 = sum_p 52 * S2_p / n_p - n_p``).
    """
    state: dict[Hashable, dict[str, Any]] = {}
    critical: dict[int, float] = {}
    for deck_id, cards in rounds:
        st = state.setdefault(deck_id, {"counts": defaultdict(int), "s2": defaultdict(int), "n": defaultdict(int),
                                        "rounds": 0, "curve": []})
        st["rounds"] += 1
        for p, c in enumerate(cards):
            if not 0 <= c < DECK_SIZE:
                raise ValueError(f"card index {c} is not 0..51")
            o = st["counts"][(p, c)]
            st["counts"][(p, c)] = o + 1
            st["s2"][p] += 2 * o + 1
            st["n"][p] += 1
        n = st["n"]
        if not n:
            continue
        stat = max(0.0, sum(DECK_SIZE * st["s2"][p] / n[p] - n[p] for p in n))
        dof = (DECK_SIZE - 1) * len(n)
        low = min(n.values()) / DECK_SIZE
        st["curve"].append((st["rounds"], stat, dof, low))
    out: dict[str, dict[str, Any]] = {}
    for deck_id, st in state.items():
        curve = st["curve"]
        if len(curve) > max_points:
            step = (len(curve) - 1) / (max_points - 1)
            curve = [curve[round(i * step)] for i in range(max_points)]
        points = []
        for r, stat, dof, low in curve:
            if dof not in critical:
                critical[dof] = chi_square_critical(dof, confidence)
            p_value = chi_square_sf(stat, dof)
            verdict = "insufficient" if low < min_expected else "pass" if p_value >= 1 - confidence else "fail"
            points.append({"round": r, "statistic": round(stat, 3), "dof": dof,
                           "critical_value": round(critical[dof], 3), "p_value": p_value, "verdict": verdict})
        last = points[-1] if points else None
        out[str(deck_id)] = {"rounds": st["rounds"], "points": points,
                             "verdict": last["verdict"] if last else "insufficient",
                             "p_value": last["p_value"] if last else None}
    return out


def _verdict(stat: float, dof: int, low: float, confidence: float, min_expected: float) -> dict[str, Any]:
    p = chi_square_sf(stat, dof)
    verdict = "insufficient" if low < min_expected else "pass" if p >= 1 - confidence else "fail"
    return {"statistic": round(stat, 6), "dof": dof, "p_value": p,
            "critical_value": round(chi_square_critical(dof, confidence), 6), "confidence": confidence,
            "verdict": verdict, "passed": verdict == "pass", "min_expected": round(low, 6)}


__all__ = ["PositionCounts", "chi_square_report", "chi_square_series", "rounds_until_flagged", "chi_square_sf",
           "chi_square_critical", "gamma_q", "chi_square_statistic", "rounds_needed", "rounds_per_deck_needed"]
