"""Settlement of every wager, in cents, and the round file reader."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from protocols.cards import full_deck
from table.rules.paytables import PaytableError
from table.rules.settlement import (
    Decision,
    Outcome,
    Round,
    SettlementError,
    Tables,
    Wagers,
    settle_round,
    settle_seat,
)

ALL = Tables.load(
    "pa-649a12b-1", "example-pp-649a12d", "example-6cb-649a12f-e", "example-prog-649a12e",
    progressive_meter_cents=2_000_000,
)
ANTE_ONLY = Tables.load("pa-649a12b-1")


def settle(wagers, decision, seat, dealer, tables=ALL):
    return settle_seat(wagers, decision, seat.split(), dealer.split(), tables)


def outcome(s, wager):
    r = s.result(wager)
    return None if r is None else (r.outcome, r.amount)


def test_dealer_not_qualifying_pays_ante_returns_play():
    s = settle(Wagers(ante=500), "play", "2c 5d 9h", "Jc 8d 3h", ANTE_ONLY)
    assert not s.dealer_qualifies
    assert outcome(s, "ante") == (Outcome.WIN, 500)
    assert outcome(s, "play") == (Outcome.PUSH, 0)
    assert s.net == 500


def test_qualifying_dealer_better_player_wins_ante_and_play():
    s = settle(Wagers(ante=500), "play", "Kc Kd 3h", "Qc Qd Ah", ANTE_ONLY)
    assert outcome(s, "ante") == (Outcome.WIN, 500) and outcome(s, "play") == (Outcome.WIN, 500)
    assert s.net == 1000


def test_qualifying_dealer_higher_player_loses_both():
    s = settle(Wagers(ante=500), "play", "Qc 6d 4h", "Qs 7d 2h", ANTE_ONLY)
    assert outcome(s, "ante") == (Outcome.LOSE, -500) and outcome(s, "play") == (Outcome.LOSE, -500)
    assert s.net == -1000


def test_tie_pushes_ante_and_play():
    s = settle(Wagers(ante=500), "play", "Qc 6d 4h", "Qh 6s 4c", ANTE_ONLY)
    assert outcome(s, "ante") == (Outcome.PUSH, 0) and outcome(s, "play") == (Outcome.PUSH, 0)
    assert s.net == 0


def test_pair_kicker_decides():
    s = settle(Wagers(ante=100), "play", "7c 7d Kh", "7h 7s Qc", ANTE_ONLY)
    assert s.net == 200


def test_ante_bonus_paid_even_when_losing_to_dealer():
    # player straight 2-3-4 loses to dealer's three of a kind, bonus still paid 1 to 1
    s = settle(Wagers(ante=500), "play", "2c 3d 4h", "9c 9d 9h", ANTE_ONLY)
    assert outcome(s, "ante") == (Outcome.LOSE, -500)
    assert outcome(s, "ante_bonus") == (Outcome.WIN, 500)
    assert s.result("ante_bonus").line == "straight"
    assert s.net == -500


def test_ante_bonus_paid_when_dealer_does_not_qualify():
    s = settle(Wagers(ante=500), "play", "9c 9d 9h", "Jc 8d 3h", ANTE_ONLY)
    assert outcome(s, "ante_bonus") == (Outcome.WIN, 2000)  # 4 to 1 on pa-649a12b-1
    assert s.net == 500 + 0 + 2000


def test_mini_royal_lines_on_649a12c_tables():
    t = Tables.load("pa-649a12c-2")
    s = settle(Wagers(ante=100), "play", "As Ks Qs", "2c 3d 5h", t)
    assert outcome(s, "ante_bonus") == (Outcome.WIN, 5000)
    assert s.result("ante_bonus").line == "mini_royal_spades"
    s = settle(Wagers(ante=100), "play", "Ah Kh Qh", "2c 3d 5h", Tables.load("pa-649a12c-1"))
    assert outcome(s, "ante_bonus") == (Outcome.WIN, 500)
    s = settle(Wagers(ante=100), "play", "Ah Kh Qh", "2c 3d 5h", Tables.load("pa-649a12b-3"))
    assert outcome(s, "ante_bonus") == (Outcome.WIN, 400)  # straight flush line, no mini royal line


def test_fold_forfeits_ante_and_pair_plus_only():
    s = settle(Wagers(ante=500, pair_plus=500, six_card=500, progressive=100), "fold",
               "7c 7d 2h", "7h 7s 9c")
    # seat 7-7-2 + dealer 7-7-9 = four of a kind for the Six Card Bonus: stands after the fold
    assert outcome(s, "ante") == (Outcome.LOSE, -500)
    assert outcome(s, "pair_plus") == (Outcome.LOSE, -500)  # the pair would have paid
    assert s.result("play") is None and s.result("ante_bonus") is None
    assert outcome(s, "six_card") == (Outcome.WIN, 50_000)
    assert outcome(s, "progressive") == (Outcome.LOSE, -100)
    assert s.net == -500 - 500 + 50_000 - 100


def test_progressive_stands_after_fold():
    s = settle(Wagers(ante=500, progressive=100), "fold", "Ah Kh Qh", "2c 3d 5h")
    assert outcome(s, "progressive") == (Outcome.WIN, 49_900)  # 500 for 1


def test_progressive_meter_line():
    s = settle(Wagers(ante=500, progressive=100), "play", "As Ks Qs", "2c 3d 5h")
    assert outcome(s, "progressive") == (Outcome.WIN, 2_000_000 - 100)
    no_meter = Tables.load("pa-649a12b-1", progressive="example-prog-649a12e")
    with pytest.raises(SettlementError, match="meter"):
        settle(Wagers(ante=500, progressive=100), "play", "As Ks Qs", "2c 3d 5h", no_meter)


def test_pair_plus_paid_whatever_the_dealer_holds():
    s = settle(Wagers(ante=500, pair_plus=200), "play", "8c 8d 2h", "Ac Ad Kh")
    assert outcome(s, "pair_plus") == (Outcome.WIN, 200)
    s = settle(Wagers(ante=500, pair_plus=200), "play", "8c 9d 2h", "Ac Ad Kh")
    assert outcome(s, "pair_plus") == (Outcome.LOSE, -200)
    s = settle(Wagers(ante=500, pair_plus=200), "play", "8c 9c 2c", "Ac Ad Kh")
    assert outcome(s, "pair_plus") == (Outcome.WIN, 800)


def test_pair_plus_only_player():
    s = settle(Wagers(ante=0, pair_plus=200), None, "8c 8d 2h", "Ac Ad Kh")
    assert outcome(s, "pair_plus") == (Outcome.WIN, 200)
    assert s.result("ante") is None
    with pytest.raises(SettlementError, match="ante"):
        settle(Wagers(ante=0, pair_plus=200), "play", "8c 8d 2h", "Ac Ad Kh")


def test_six_card_royal_flat_amount():
    s = settle(Wagers(ante=500, six_card=500), "play", "9d Td Jd", "Qd Kd Ad")
    r = s.result("six_card")
    assert (r.outcome, r.amount, r.line) == (Outcome.WIN, 100_000_000, "six_card_royal_diamonds")


def test_missing_paytable_for_a_wager():
    with pytest.raises(SettlementError, match="pair_plus"):
        settle(Wagers(ante=500, pair_plus=5), "play", "8c 8d 2h", "Ac Ad Kh", ANTE_ONLY)


@pytest.mark.parametrize(
    "wagers", [dict(ante=-1), dict(ante=1.5), dict(ante=True), dict(ante=100, six_card="5")]
)
def test_wagers_are_whole_cents(wagers):
    with pytest.raises(SettlementError):
        Wagers(**wagers)


def test_card_dealt_twice():
    with pytest.raises(SettlementError, match="twice"):
        settle(Wagers(ante=500), "play", "8c 8d 2h", "8c Ad Kh")


def test_tables_reject_wrong_kind():
    with pytest.raises(SettlementError):
        Tables.load("example-pp-649a12d")
    with pytest.raises(SettlementError):
        Tables.load("pa-649a12b-1", pair_plus="pa-649a12b-2")


deck = full_deck()


@settings(max_examples=200, deadline=None)
@given(
    st.permutations(deck),
    st.integers(1, 10_000),
    st.integers(0, 5_000),
    st.integers(0, 5_000),
    st.sampled_from([Decision.PLAY, Decision.FOLD]),
)
def test_amounts_are_ints_and_net_adds_up(cards, ante, pp, sc, decision):
    s = settle_seat(Wagers(ante, pp, sc, 0), decision, cards[:3], cards[3:6], ALL)
    assert all(isinstance(r.amount, int) and isinstance(r.stake, int) for r in s.results)
    assert s.net == sum(r.amount for r in s.results)
    for r in s.results:
        if r.outcome is Outcome.LOSE:
            assert r.amount == -r.stake
        if r.outcome in (Outcome.PUSH, Outcome.RETURNED):
            assert r.amount == 0
        if r.outcome is Outcome.WIN:
            assert r.amount > 0
    # a fold can never lose more than the ante and Pair Plus and the Six Card Bonus
    if decision is Decision.FOLD:
        assert s.net >= -(ante + pp + sc)
    else:
        assert s.net >= -(2 * ante + pp + sc)


# ---- round files


ROUND = {
    "profile": "pennsylvania",
    "paytables": {"ante_bonus": "pa-649a12b-1", "pair_plus": "example-pp-649a12d"},
    "dealer": ["Qs", "7d", "2h"],
    "seats": [
        {"seat": 1, "cards": ["Kc", "Kd", "3h"], "decision": "play", "wagers": {"ante": 500, "pair_plus": 500}},
        {"seat": 3, "cards": ["Jc", "8d", "4h"], "decision": "fold", "wagers": {"ante": 500, "pair_plus": 500}},
    ],
}


def test_settle_round_json():
    out = settle_round(Round.from_dict(ROUND))
    assert out["dealer"]["qualifies"] is True
    s1, s3 = out["seats"]
    assert s1["seat"] == 1 and s1["net"] == 500 + 500 + 500
    assert s3["net"] == -1000
    assert out["total_net"] == 500
    json.dumps(out)


@pytest.mark.parametrize(
    "patch, match",
    [
        ({"dealer": ["Qs", "7d", "Kc"]}, "twice"),
        ({"paytables": {"pair_plus": "example-pp-649a12d"}}, "ante_bonus"),
        ({"bogus": 1}, "unknown"),
        ({"profile": "nevada"}, "profile"),
    ],
)
def test_round_errors(patch, match):
    with pytest.raises(SettlementError, match=match):
        Round.from_dict({**ROUND, **patch})


def test_round_unknown_paytable():
    with pytest.raises(PaytableError):
        Round.from_dict({**ROUND, "paytables": {"ante_bonus": "nope"}})


def test_round_from_file_relative_paytable(tmp_path):
    (tmp_path / "my.toml").write_text(
        'name = "op-ab"\nkind = "ante_bonus"\ncitation = "c"\n[pays]\nstraight = 2\n'
    )
    f = tmp_path / "r.json"
    f.write_text(json.dumps({**ROUND, "paytables": {"ante_bonus": "my.toml", "pair_plus": "example-pp-649a12d"}}))
    out = settle_round(Round.from_file(f))
    assert out["paytables"]["ante_bonus"] == "op-ab"
    (tmp_path / "bad.json").write_text("{\n  nope")
    with pytest.raises(SettlementError, match="bad.json:2"):
        Round.from_file(tmp_path / "bad.json")
