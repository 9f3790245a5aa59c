"""Simulated players bet like people (issue 23): seats empty and full, stakes that vary, Pair Plus
alone sometimes, side wagers only beside an ante and only when their paytables are in play, every
bet within the limits in whole chips, at least one seat in play; the same seed, the same rounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from table.bets import BetBook, Limit, TableLimits, wagers_dict
from table.players import FixedPlayers, SimulatedPlayers

LIMITS = TableLimits(ante=Limit(500, 50_000, 500), pair_plus=Limit(500, 10_000, 500),
                     six_card=Limit(500, 2_500, 500), progressive=Limit(100, 100, 100))


def rounds(players: SimulatedPlayers, n: int) -> list[dict]:
    return [players.next_round() for _ in range(n)]


def test_a_simulated_table_looks_like_a_real_one():
    got = rounds(SimulatedPlayers(7, LIMITS, 7), 300)
    seats_per_round = [len(r) for r in got]
    assert min(seats_per_round) >= 1 and max(seats_per_round) <= 7
    assert len(set(seats_per_round)) >= 3  # the table fills and empties
    antes = {w.ante for r in got for w in r.values() if w.ante}
    assert len(antes) >= 4  # stakes vary
    assert any(w.ante == 0 and w.pair_plus for r in got for w in r.values())  # Pair Plus alone
    assert any(w.six_card for r in got for w in r.values()) and any(w.progressive for r in got for w in r.values())
    assert any(r1.keys() != r2.keys() for r1, r2 in zip(got, got[1:]))  # players sit down and leave


def test_the_same_seed_makes_the_same_rounds():
    assert rounds(SimulatedPlayers(3, LIMITS, 6), 50) == rounds(SimulatedPlayers(3, LIMITS, 6), 50)
    assert rounds(SimulatedPlayers(3, LIMITS, 6), 50) != rounds(SimulatedPlayers(4, LIMITS, 6), 50)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32), seats=st.integers(1, 7),
       sides=st.sets(st.sampled_from(["pair_plus", "six_card", "progressive"])),
       chip=st.sampled_from([100, 500, 2_500]), lo=st.integers(1, 4), span=st.integers(0, 20))
def test_every_bet_is_one_the_bet_book_takes(seed, seats, sides, chip, lo, span):
    lim = Limit(lo * chip, (lo + span) * chip, chip)
    limits = TableLimits(ante=lim, pair_plus=lim, six_card=lim, progressive=Limit(chip, chip, chip))
    players = SimulatedPlayers(seed, limits, seats, sides)
    for _ in range(20):
        book = BetBook(limits, seats, offered=("ante", *sides))
        bets = players.place(book)  # raises BetRefused on any bet outside the limits or the paytables
        assert bets and book.freeze() == bets
        for w in bets.values():
            assert not (w.ante == 0 and (w.six_card or w.progressive))  # 649a.7
            for kind in ("pair_plus", "six_card", "progressive"):
                assert kind in sides or not getattr(w, kind)


def test_no_pair_plus_paytable_no_pair_plus_only_players():
    got = rounds(SimulatedPlayers(11, LIMITS, 7, ()), 200)
    assert all(w.ante and w.total == w.ante for r in got for w in r.values())


def test_fixed_players_are_the_old_fixed_bet():
    fixed = FixedPlayers(1000, 3, {"pair_plus": 500, "progressive": 100})
    book = BetBook(seats=3)
    assert fixed.place(book) == {s: fixed.wagers for s in (1, 2, 3)}
    assert wagers_dict(fixed.wagers) == {"ante": 1000, "pair_plus": 500, "six_card": 0, "progressive": 100}


def test_bad_layouts_and_kinds_are_refused():
    with pytest.raises(ValueError, match="seats 1..7"):
        SimulatedPlayers(1, LIMITS, 8 * [9])
    with pytest.raises(ValueError, match="unknown side wager 'tip'"):
        SimulatedPlayers(1, LIMITS, 6, ["tip"])
