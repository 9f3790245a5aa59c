"""The deck custody machine refuses each violation of the two-deck procedure."""

from __future__ import annotations

import pytest

from protocols.cards import BackColour, Card
from protocols.messages import DeckVerified
from table.custody import CustodyViolation, DeckCustody, DeckPlace, Rule

RED, BLUE, GREEN = BackColour.RED, BackColour.BLUE, BackColour.GREEN
FULL = frozenset(range(52))


def verified(colour, present=FULL, count=52, foreign=0, dups=frozenset()):
    return DeckVerified(colour, count, foreign, present, dups)


def shuffle_in(c: DeckCustody, colour):
    c.on_deck_inserted(colour)
    c.on_shuffle_started(colour)
    c.on_deck_verified(verified(colour))


def to_shoe(c: DeckCustody, colour):
    c.on_deck_delivered(colour)
    c.on_shoe_loaded(colour)


@pytest.fixture
def table() -> DeckCustody:
    """Red verified and in the shoe, blue verified in the shuffler: ready for round 1."""
    c = DeckCustody([("A", RED), ("B", BLUE)])
    shuffle_in(c, RED)
    to_shoe(c, RED)
    shuffle_in(c, BLUE)
    return c


def deal(c: DeckCustody, cards: str, colour) -> None:
    for t in cards.split():
        c.on_card_read(Card.parse(t), colour)


def next_round(c: DeckCustody) -> None:
    """Collect, then rotate the decks the regulated way."""
    played = c.collect()
    other = c.other(played)
    to_shoe(c, other.back_colour)
    shuffle_in(c, played.back_colour)


def rule_of(excinfo) -> Rule:
    return excinfo.value.rule


def test_regular_procedure_alternates_decks(table):
    seen = []
    for _ in range(4):
        deck = table.start_round()
        seen.append(deck.back_colour)
        deal(table, "As Kd 2c", deck.back_colour)
        next_round(table)
    assert seen == [RED, BLUE, RED, BLUE]
    assert not table.violations


def test_two_decks_with_the_same_back_colour_are_refused():
    with pytest.raises(CustodyViolation) as e:
        DeckCustody([("A", RED), ("B", RED)])
    assert rule_of(e) is Rule.SAME_BACK_COLOUR


def test_decks_must_alternate(table):
    table.start_round()
    deal(table, "As Kd 2c", RED)
    table.collect()
    # The red deck goes back through the shuffler and into the shoe again: blue was skipped.
    table.on_deck_delivered(BLUE)  # blue out of the shuffler, not loaded
    shuffle_in(table, RED)
    table.on_deck_delivered(RED)
    with pytest.raises(CustodyViolation) as e:
        table.on_shoe_loaded(RED)
    assert rule_of(e) is Rule.SHOE_LOADED_WITH_DECK_JUST_PLAYED


def test_a_round_cannot_start_with_the_deck_just_played():
    c = DeckCustody([("A", RED), ("B", BLUE)])
    shuffle_in(c, RED)
    to_shoe(c, RED)
    shuffle_in(c, BLUE)
    c.start_round()
    c.collect()
    c.in_play = None
    # Force the red deck back into the shoe state to model a dealer error the devices missed.
    c.decks[RED].state = DeckPlace.IN_SHOE.value
    with pytest.raises(CustodyViolation) as e:
        c.start_round()
    assert rule_of(e) is Rule.DECKS_NOT_ALTERNATING


def test_a_deck_is_dealt_only_after_the_shuffler_verified_it():
    c = DeckCustody([("A", RED), ("B", BLUE)])
    c.on_deck_inserted(RED)
    with pytest.raises(CustodyViolation) as e:
        c.on_shoe_loaded(RED)  # straight from the shuffler without a verification
    assert rule_of(e) is Rule.DECK_NOT_VERIFIED
    with pytest.raises(CustodyViolation) as e:
        c.on_deck_delivered(RED)
    assert rule_of(e) is Rule.DECK_NOT_VERIFIED


@pytest.mark.parametrize(
    "event",
    [
        verified(RED, present=FULL - {5}, count=51),
        verified(RED, present=FULL - {5}, count=52, dups=frozenset({6})),
        verified(RED, count=53, foreign=1),
    ],
    ids=["missing card", "duplicate", "foreign card"],
)
def test_a_deck_that_fails_verification_goes_out_of_service(event):
    c = DeckCustody([("A", RED), ("B", BLUE)])
    c.on_deck_inserted(RED)
    c.on_shuffle_started(RED)
    with pytest.raises(CustodyViolation) as e:
        c.on_deck_verified(event)
    assert rule_of(e) is Rule.DECK_INCOMPLETE
    assert c.decks[RED].place is DeckPlace.OUT_OF_SERVICE


def test_only_one_decks_cards_in_the_discard_rack(table):
    table.start_round()
    deal(table, "As Kd 2c", RED)
    table.collect()  # red in the rack
    to_shoe(table, BLUE)
    table.in_play = table.decks[BLUE]  # a round dealt from blue while red still sits in the rack
    with pytest.raises(CustodyViolation) as e:
        table.collect()
    assert rule_of(e) is Rule.TWO_DECKS_IN_DISCARD_RACK
    assert table.decks[BLUE].place is DeckPlace.IN_SHOE  # refused: nothing moved


def test_no_round_starts_before_the_other_deck_is_verified():
    c = DeckCustody([("A", RED), ("B", BLUE)])
    shuffle_in(c, RED)
    to_shoe(c, RED)
    with pytest.raises(CustodyViolation) as e:
        c.start_round()
    assert rule_of(e) is Rule.OTHER_DECK_NOT_VERIFIED


def test_every_card_read_must_carry_the_back_colour_of_the_deck_in_play(table):
    table.start_round()
    deal(table, "As", RED)
    with pytest.raises(CustodyViolation) as e:
        table.on_card_read(Card.parse("Kd"), BLUE)
    assert rule_of(e) is Rule.FOREIGN_CARD
    with pytest.raises(CustodyViolation) as e:
        table.on_card_read(Card.parse("Kd"), GREEN)
    assert rule_of(e) is Rule.FOREIGN_CARD


def test_the_same_card_read_twice_is_a_violation(table):
    table.start_round()
    deal(table, "As Kd", RED)
    with pytest.raises(CustodyViolation) as e:
        table.on_card_read(Card.parse("As"), RED)
    assert rule_of(e) is Rule.DUPLICATE_CARD


def test_violations_are_recorded_with_their_citation(table):
    table.start_round()
    with pytest.raises(CustodyViolation):
        table.on_card_read(Card.parse("2c"), BLUE)
    assert [v.rule for v in table.violations] == [Rule.FOREIGN_CARD]
    assert "649a.3(b)" in table.violations[0].citation


def test_a_card_read_before_the_round_is_out_of_the_deck_in_the_shoe(table):
    """Drawn with no round in progress (dealt to nobody), the card still left the deck
    in the shoe: the round dealt from that shoe load reading it again is a duplicate.
    A card of the other colour touches neither deck's record."""
    assert table.on_card_read_between_rounds(Card.parse("4c"), RED).back_colour is RED
    assert table.on_card_read_between_rounds(Card.parse("9h"), BLUE) is None
    table.start_round()
    deal(table, "3d Qc 9h", RED)
    with pytest.raises(CustodyViolation) as e:
        table.on_card_read(Card.parse("4c"), RED)
    assert rule_of(e) is Rule.DUPLICATE_CARD


def test_a_deck_loaded_again_starts_with_no_card_read(table):
    table.start_round()
    deal(table, "As Kd", RED)
    next_round(table)  # blue is dealt; red goes back through the shuffler, verified
    table.start_round()
    deal(table, "As Kd", BLUE)
    next_round(table)
    table.start_round()
    deal(table, "As Kd", RED)  # red loaded again: its earlier reads were another shoe load
