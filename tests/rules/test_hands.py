"""Hand evaluation: category counts, straights, tie-breaks, dealer qualification."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, strategies as st

from protocols.cards import Card, full_deck, parse_cards
from protocols.errors import CardError
from table.rules.hands import (
    HandCategory,
    HandError,
    SixCardCategory,
    dealer_qualifies,
    evaluate,
    six_card_hand,
)
from table.rules.profiles import CALIFORNIA, CALIFORNIA_LITERAL, PENNSYLVANIA
from table.rules.strategy import plays_q64

DECK = full_deck()
ALL_HANDS = list(combinations(DECK, 3))


def ev(text, profile=PENNSYLVANIA):
    return evaluate(parse_cards(text), profile)


def test_category_counts_over_all_22100_hands_pennsylvania():
    counts = Counter()
    mini = 0
    for h in ALL_HANDS:
        v = evaluate(h)
        counts[v.category] += 1
        mini += v.category is HandCategory.STRAIGHT_FLUSH and v.mini_royal
    assert len(ALL_HANDS) == 22_100
    assert counts == {
        HandCategory.STRAIGHT_FLUSH: 48,
        HandCategory.THREE_OF_A_KIND: 52,
        HandCategory.STRAIGHT: 720,
        HandCategory.FLUSH: 1_096,
        HandCategory.PAIR: 3_744,
        HandCategory.HIGH_CARD: 16_440,
    }
    assert mini == 4


@pytest.mark.parametrize(
    "profile, expected_sf, expected_flush",
    [(CALIFORNIA, 44, 1_096), (CALIFORNIA_LITERAL, 40, 1_100)],
)
def test_category_counts_california_readings(profile, expected_sf, expected_flush):
    counts = Counter(evaluate(h, profile).category for h in ALL_HANDS)
    assert counts[HandCategory.MINI_ROYAL] == 4
    assert counts[HandCategory.STRAIGHT_FLUSH] == expected_sf
    assert counts[HandCategory.FLUSH] == expected_flush
    assert counts[HandCategory.STRAIGHT] == 720
    assert sum(counts.values()) == 22_100


def test_a23_is_lowest_straight_and_akq_highest():
    straights = [evaluate(h) for h in ALL_HANDS if evaluate(h).category is HandCategory.STRAIGHT]
    lowest, highest = min(straights), max(straights)
    assert {c.rank for c in lowest.cards} == {14, 2, 3}
    assert {c.rank for c in highest.cards} == {14, 13, 12}
    assert ev("Ah 2c 3d") < ev("2h 3c 4d") < ev("Qh Kc Ad")
    assert ev("Ah 2c 3d") == ev("As 2d 3h")


def test_k_a_2_is_no_straight():
    assert ev("Kh As 2d").category is HandCategory.HIGH_CARD
    assert ev("Kh Ah 2h").category is HandCategory.FLUSH
    assert ev("Qh Kc Jd").category is HandCategory.STRAIGHT


def test_straight_beats_flush_and_three_of_a_kind_beats_straight():
    assert ev("4c 5d 6h") > ev("Ah Kh 9h")
    assert ev("2c 2d 2h") > ev("Qh Kc Ad")
    assert ev("2s 3s 4s") > ev("Ac Ad Ah")


def test_pair_ties_by_pair_rank_then_kicker():
    assert ev("Kc Kd 2h") > ev("Tc Td Ah")
    assert ev("7c 7d Kh") > ev("7h 7s Qc")
    assert ev("7c 7d Kh") == ev("7h 7s Ks")
    assert ev("7c 7d 2h") < ev("7h 7s 3c")


def test_high_card_and_flush_tie_break_highest_card_down():
    assert ev("Ac 9d 2h") > ev("Kc Qd 9h")
    assert ev("Qc 6d 4h") > ev("Qc 6d 3h")
    assert ev("Ah Kh Jh") > ev("Ah Qh Jh")
    assert ev("Ah Kh Jh") == ev("As Ks Js")


def test_suits_never_break_ties():
    assert ev("Ac Kd 9h") == ev("As Kh 9d")


def test_dealer_qualifies_on_queen_high_or_better():
    assert not dealer_qualifies(ev("Jc Td 8h"))
    assert dealer_qualifies(ev("Qc 3d 2h"))
    assert not dealer_qualifies(ev("Jc 9d 7h"))
    assert dealer_qualifies(ev("2c 2d 3h"))
    assert dealer_qualifies(ev("Jh 9h 7h"))  # a flush qualifies even jack-high
    qualifying = sum(dealer_qualifies(evaluate(h)) for h in ALL_HANDS)
    # everything except high-card hands below queen high
    below_q = sum(
        1
        for h in ALL_HANDS
        if evaluate(h).category is HandCategory.HIGH_CARD and max(c.rank for c in h) < 12
    )
    assert qualifying == 22_100 - below_q


def test_plays_q64_boundary():
    assert plays_q64(parse_cards("Qc 6d 4h"))
    assert not plays_q64(parse_cards("Qc 6d 3h"))
    assert not plays_q64(parse_cards("Jc Td 8h"))
    assert plays_q64(parse_cards("2c 2d 3h"))
    assert plays_q64(parse_cards("Kc 3d 2h"))


def test_mini_royal_by_profile():
    pa = ev("As Ks Qs")
    ca = ev("As Ks Qs", CALIFORNIA)
    assert pa.category is HandCategory.STRAIGHT_FLUSH and pa.mini_royal
    assert ca.category is HandCategory.MINI_ROYAL and ca.mini_royal
    # the top hand either way
    assert pa > ev("Ks Qs Js") and ca > ev("Ks Qs Js", CALIFORNIA)
    assert not ev("Ad Kd Qs").mini_royal


def test_suited_a23_both_readings():
    straight_reading = ev("Ah 2h 3h", CALIFORNIA)
    literal = ev("Ah 2h 3h", CALIFORNIA_LITERAL)
    assert straight_reading.category is HandCategory.STRAIGHT_FLUSH
    assert straight_reading < ev("2h 3h 4h", CALIFORNIA)
    assert straight_reading > ev("Ac Ad Ah", CALIFORNIA)
    assert literal.category is HandCategory.FLUSH
    # an ace-high flush: below A-K-J suited, above K-Q-10 suited, below any straight
    assert ev("Kh Qh Th", CALIFORNIA_LITERAL) < literal < ev("Ac Kc Jc", CALIFORNIA_LITERAL)
    assert literal < ev("Ac 2d 3h", CALIFORNIA_LITERAL)
    assert ev("Ah 2h 3h") == ev("Ah 2h 3h", CALIFORNIA)


@pytest.mark.parametrize("bad", ["As Kd", "As Kd Qh Jc", "As As Kd"])
def test_evaluate_rejects_wrong_hands(bad):
    with pytest.raises(HandError) as e:
        ev(bad)
    assert isinstance(e.value, ValueError)


def test_evaluate_rejects_bad_card_text():
    with pytest.raises(CardError):
        evaluate(["As", "Kd", "Zz"])


cards3 = st.lists(st.sampled_from(DECK), min_size=3, max_size=3, unique=True)


@given(cards3, cards3)
def test_comparison_is_antisymmetric_and_suit_blind(a, b):
    va, vb = evaluate(a), evaluate(b)
    assert (va > vb) == (vb < va)
    assert (va == vb) == (va.key == vb.key)
    # relabelling suits by a permutation does not change the value
    perm = {0: 2, 1: 3, 2: 0, 3: 1}
    a2 = [Card(c.rank, perm[int(c.suit)]) for c in a]
    assert evaluate(a2) == va


@given(cards3)
def test_key_category_matches(a):
    v = evaluate(a)
    assert v.key[0] == v.category


# ---- Six Card Bonus hand


@pytest.mark.parametrize(
    "text, cat",
    [
        ("9h Th Jh Qh Kh Ah", SixCardCategory.SIX_CARD_ROYAL),
        ("Th Jh Qh Kh Ah 2c", SixCardCategory.ROYAL_FLUSH),
        ("Ah 2h 3h 4h 5h Kc", SixCardCategory.STRAIGHT_FLUSH),
        ("8h 9h Th Jh Qh Kh", SixCardCategory.STRAIGHT_FLUSH),
        ("7c 7d 7h 7s 2c 3d", SixCardCategory.FOUR_OF_A_KIND),
        ("7c 7d 7h 2s 2c 3d", SixCardCategory.FULL_HOUSE),
        ("7c 7d 7h 2s 2c 2d", SixCardCategory.FULL_HOUSE),
        ("2h 5h 7h 9h Jh 3h", SixCardCategory.FLUSH),
        ("Ac 2d 3h 4s 5c 9d", SixCardCategory.STRAIGHT),
        ("Tc Jd Qh Ks Ac Ad", SixCardCategory.STRAIGHT),
        ("Qc Kd Ah 2s 3c 9d", SixCardCategory.NOTHING),
        ("7c 7d 7h 2s 9c Kd", SixCardCategory.THREE_OF_A_KIND),
        ("7c 7d 2h 2s 9c 9d", SixCardCategory.NOTHING),
    ],
)
def test_six_card_hand(text, cat):
    assert six_card_hand(parse_cards(text)).category is cat


def test_six_card_hand_reports_flush_suit():
    assert int(six_card_hand(parse_cards("9d Td Jd Qd Kd Ad")).suit) == 1
    assert six_card_hand(parse_cards("7c 7d 7h 2s 2c 3d")).suit is None


def test_six_card_hand_rejects_duplicates():
    with pytest.raises(HandError):
        six_card_hand(parse_cards("7c 7c 7h 2s 2c 3d"))
