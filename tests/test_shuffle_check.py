"""Chi-square shuffle check (table/shuffle_check.py): the maths against table values,
and the emulated shuffler's weak one-riffle mode flagged while a proper shuffle passes."""

from __future__ import annotations

import math
import random

import pytest

from protocols.cards import DECK_SIZE, BackColour
from protocols.messages import CardDrawn, Shuffle
from simulators.devices import SHUFFLE_MODES, ShoeEmulator, ShufflerEmulator, new_deck, riffle_once
from simulators.ports import SocketPairPort
from table.shuffle_check import (
    PositionCounts,
    chi_square_critical,
    chi_square_report,
    chi_square_sf,
    gamma_q,
    rounds_until_flagged,
)

# Upper 5 % points of the chi-square distribution (any statistics table).
CRITICAL_95 = {1: 3.841, 2: 5.991, 5: 11.070, 10: 18.307, 30: 43.773, 100: 124.342}


@pytest.mark.parametrize("dof,critical", sorted(CRITICAL_95.items()))
def test_p_value_at_the_table_critical_values_is_five_percent(dof, critical):
    assert chi_square_sf(critical, dof) == pytest.approx(0.05, abs=2e-5)
    assert chi_square_critical(dof) == pytest.approx(critical, abs=1e-3)


def test_p_value_matches_closed_forms():
    for x in (0.1, 1.0, 3.0, 10.0, 40.0):
        assert chi_square_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-12)  # 2 dof: exponential
        assert chi_square_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-10)
    assert chi_square_sf(0.0, 7) == 1.0
    assert gamma_q(1.0, 2.0) == pytest.approx(math.exp(-2.0))
    # 1 - P(a, x) near the mode and far in the tail, both branches
    assert chi_square_sf(612.0, 612) == pytest.approx(0.4905, abs=2e-3)
    assert 0.0 <= chi_square_sf(1e5, 612) < 1e-300


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        chi_square_sf(-1.0, 3)
    with pytest.raises(ValueError):
        chi_square_sf(1.0, 0)
    with pytest.raises(ValueError):
        PositionCounts().add("A", 0, 52)


def test_an_empty_count_is_insufficient_not_a_pass():
    report = chi_square_report(PositionCounts())
    assert report["verdict"] == "insufficient" and report["passed"] is False


def test_too_few_rounds_are_insufficient_even_if_perfectly_uniform():
    counts = PositionCounts()
    for r in range(10):
        counts.add_round("A", [(r + i) % 52 for i in range(12)])
    report = chi_square_report(counts)
    assert report["verdict"] == "insufficient"
    assert report["rounds"] == 10 and report["decks"]["A"]["positions"] == 12


def test_riffle_once_is_a_permutation_with_at_most_two_rising_sequences():
    rng = random.Random(3)
    for _ in range(50):
        out = riffle_once(list(range(52)), rng)
        assert sorted(out) == list(range(52))
        left_pos = {c: i for i, c in enumerate(out)}
        descents = sum(left_pos[c + 1] < left_pos[c] for c in range(51))
        assert descents <= 1  # one riffle: at most two rising sequences
    port = SocketPairPort()
    try:
        with pytest.raises(ValueError, match="riffle1"):
            ShufflerEmulator(port, rng=rng, shuffle="overhand")
    finally:
        port.close()
    assert SHUFFLE_MODES == ("random", "riffle1")


class _RecordingShoe(ShoeEmulator):
    """The shoe's events as it reads them, without a host: what the journal would hold."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.sent: list = []

    def emit(self, event) -> None:
        self.sent.append(event)


class _QuietShuffler(ShufflerEmulator):
    def emit(self, event) -> None:
        pass


def simulate(shuffle: str, rounds: int, *, seats: int = 3, seed: int = 11,
             record: list | None = None, recycle: bool = False) -> PositionCounts:
    """Deal ``rounds`` rounds with two decks alternating, using the emulators directly.

    Each round: the dealer inserts the deck, collected back in positional
    (card index) order, into the shuffler; the host's ``Shuffle`` shuffles it;
    the deck goes into the shoe and 3 * (seats + 1) cards are drawn. With
    ``recycle`` the deck goes back in as it came out instead (the dealt cards
    in order, then the stub), starting from a randomly ordered deck. Only the
    shoe's ``CardDrawn`` events are counted, never the shuffled order.
    """
    ports = [SocketPairPort("shuffler"), SocketPairPort("shoe")]
    shuffler = _QuietShuffler(ports[0], rng=random.Random(seed), shuffle=shuffle)
    shoe = _RecordingShoe(ports[1])
    counts = PositionCounts()
    per_round = 3 * (seats + 1)
    order = random.Random(seed + 1)
    decks = {c: order.sample(new_deck(c), DECK_SIZE) for c in (BackColour.RED, BackColour.BLUE)}
    try:
        for r in range(rounds):
            colour = (BackColour.RED, BackColour.BLUE)[r % 2]
            # collected and squared up in positional (index) order, or just as it came out
            shuffler.insert(decks[colour] if recycle else new_deck(colour))
            shuffler.handle_request(Shuffle())
            shoe.load(shuffler.take())
            shoe.sent.clear()
            cards = [shoe.draw() for _ in range(per_round)]
            decks[colour] = cards + shoe.unload()
            dealt = [ev for ev in shoe.sent if isinstance(ev, CardDrawn)]
            for ev in dealt:
                counts.add(str(ev.back_colour), ev.draw_index, ev.card.index)
            if record is not None:
                record.append((str(colour), [ev.card.index for ev in dealt]))
    finally:
        shuffler.stop()
        shoe.stop()
    return counts


#: Rounds (both decks together) after which the test has enough data: 1 expected per cell
#: needs 52 rounds per deck.
ROUNDS_TO_SUFFICIENT = 2 * 52


def dealt_rounds(shuffle: str, rounds: int, **kw) -> list[tuple[str, list[int]]]:
    """Each round's (deck, dealt card indices), as the shoe read them."""
    out: list[tuple[str, list[int]]] = []
    simulate(shuffle, rounds, record=out, **kw)
    return out


def test_the_weak_one_riffle_shuffle_is_flagged_as_soon_as_there_is_enough_data():
    rounds = dealt_rounds("riffle1", ROUNDS_TO_SUFFICIENT + 10)
    assert rounds_until_flagged(rounds) == ROUNDS_TO_SUFFICIENT  # the first round with a verdict at all
    assert rounds_until_flagged(rounds, min_expected=0.0) <= 10  # the signal itself is there much earlier
    counts = PositionCounts()
    for deck, cards in rounds:
        counts.add_round(deck, cards)
    report = chi_square_report(counts)
    assert report["verdict"] == "fail" and report["passed"] is False
    assert report["p_value"] < 1e-100
    assert set(report["decks"]) == {"red", "blue"}
    assert all(d["verdict"] == "fail" for d in report["decks"].values())


def test_a_recycled_one_riffle_deck_is_flagged_too():
    """Put back as it came out, a once-riffled deck changes little from round to round:
    the counts spread far wider than a fair shuffle's."""
    assert rounds_until_flagged(dealt_rounds("riffle1", 400, recycle=True)) <= 200
    assert rounds_until_flagged(dealt_rounds("random", 400, recycle=True)) is None


def test_a_proper_shuffle_is_never_flagged_over_2000_rounds():
    assert rounds_until_flagged(dealt_rounds("random", 2000, seed=5)) is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_proper_random_shuffle_passes(seed):
    report = chi_square_report(simulate("random", 2000, seed=seed))
    assert report["verdict"] == "pass", report
    assert report["rounds"] == 2000
    assert report["dof"] == 2 * 12 * 51
    assert report["min_expected"] >= 1.0
