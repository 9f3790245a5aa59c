"""California player-dealer bank: coverage and rotation."""

from __future__ import annotations

import pytest

from table.rules.bank import BankError, BankRotation, clockwise_from, settle_bank
from table.rules.settlement import Round, SettlementError, settle_round


def test_clockwise_order_wraps():
    assert clockwise_from(5, [1, 2, 6, 8]) == [6, 8, 1, 2]
    assert clockwise_from(8, [1, 3, 7]) == [1, 3, 7]


def test_bank_covers_everything():
    b = settle_bank(4, 10_000, [(1, 1_000), (2, -500), (6, 2_000)])
    assert b.collected == 500 and b.paid == 3_000
    assert b.player_dealer_net == -2_500
    assert [s.net for s in b.seats] == [2_000, 1_000, -500]  # clockwise from seat 4: 6, 1, 2


def test_bank_pays_and_collects_only_the_wagers_it_covers():
    # Clockwise from seat 4: seat 6 (+1200) is more than the 1000 bank: not covered,
    # returned; seat 1 (+1000) fits: covered and paid; seat 2 (-500) no longer fits:
    # returned, not collected (CA standards of play: only to the extent covered).
    b = settle_bank(4, 1_000, [(1, 1_000), (2, -500), (6, 1_200)])
    assert (b.seat(6).net, b.seat(6).covered) == (0, False)
    assert (b.seat(1).net, b.seat(1).covered) == (1_000, True)
    assert (b.seat(2).net, b.seat(2).covered) == (0, False)
    assert b.collected == 0 and b.paid == 1_000 and b.player_dealer_net == -1_000


def test_an_empty_bank_covers_nobody():
    b = settle_bank(8, 0, [(1, 1_000), (2, -700)])
    assert [s.net for s in b.seats] == [0, 0] and b.collected == 0 and b.paid == 0


def test_covered_winners_are_paid_from_stake_and_collections():
    # Both covered (1800 + 500 of 2500); seat 1 wins 1800 with a bonus: the
    # bank pays from its 2500 plus the 500 collected.
    b = settle_bank(4, 2_500, [(1, 1_800), (2, -500)])
    assert b.seat(1).net == 1_800 and b.seat(2).net == -500
    assert b.player_dealer_net == -1_300


def test_bank_errors():
    with pytest.raises(BankError):
        settle_bank(4, -1, [(1, 5)])
    with pytest.raises(BankError):
        settle_bank(4, 100, [(4, 5)])


def test_rotation_two_consecutive_then_offered_clockwise():
    r = BankRotation([1, 2, 3, 5, 8], banker=3)
    r.hand_banked()
    assert r.next_banker(lambda s: True) == 3  # one hand banked, keeps it
    r.hand_banked()
    assert r.must_offer
    assert r.offer_order() == [5, 8, 1, 2]
    asked = []
    assert r.next_banker(lambda s: asked.append(s) or s == 1) == 1
    assert asked == [5, 8, 1]
    assert r.consecutive == 0 and not r.must_offer


def test_rotation_everyone_declines():
    r = BankRotation([1, 2], banker=2)
    r.hand_banked(); r.hand_banked()
    assert r.next_banker(lambda s: False) == 2
    assert r.consecutive == 0


def test_at_most_eight_places():
    with pytest.raises(BankError):
        BankRotation(list(range(1, 10)), banker=1)


ROUND = {
    "profile": "california",
    "player_dealer_seat": 8,
    "bank_cents": 1_000,
    "paytables": {"ante_bonus": "pa-649a12b-1"},
    "dealer": ["Jc", "8d", "3h"],
    "seats": [
        {"seat": s, "cards": c, "decision": "play", "wagers": {"ante": 500}}
        for s, c in [(1, ["2c", "3d", "4h"]), (2, ["Kc", "Kd", "5h"]), (3, ["Ac", "9d", "2s"])]
    ],
}


def test_california_round_uses_the_bank():
    out = settle_round(Round.from_dict(ROUND))
    # dealer does not qualify: every ante paid 1 to 1; seat 1 also gets the straight bonus
    owed = {s["seat"]: s["net"] for s in out["seats"]}
    assert owed == {1: 1_000, 2: 500, 3: 500}
    after = {s["seat"]: s["net_after_bank"] for s in out["seats"]}
    assert after == {1: 1_000, 2: 0, 3: 0}
    assert out["bank"]["player_dealer_net"] == -1_000
    assert out["total_net"] == 1_000


def test_california_round_needs_a_bank_and_at_most_eight_places():
    with pytest.raises(SettlementError, match="player-dealer"):
        settle_round(Round.from_dict({**ROUND, "bank_cents": None}))
    seats = [
        {"seat": i, "cards": c, "decision": "fold", "wagers": {"ante": 100}}
        for i, c in enumerate([["2c", "3c", "4c"], ["2d", "3d", "4d"], ["9h", "Th", "Qh"], ["2s", "3s", "4s"],
                               ["5c", "6c", "7c"], ["5d", "6d", "7d"], ["5h", "6h", "7h"], ["5s", "6s", "7s"]], 1)
    ]
    with pytest.raises(SettlementError, match="at most 8"):
        Round.from_dict({**ROUND, "player_dealer_seat": 9, "seats": seats})
