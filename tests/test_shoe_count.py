"""The shoe's count as a custody fact, unit by unit: what a count may be (0..52, a whole
number), and the second deck of one colour as custody names it (docs/deck-custody.md)."""

from __future__ import annotations

import pytest

from protocols.cards import BackColour
from table.custody import CustodyViolation, DeckCustody, Rule
from table.errors import DeviceFault
from table.procedure.intake import DeviceIntake
from table.procedure.state import TableState
from table.recovery import DeviceCursor

RED, BLUE, GREEN = BackColour.RED, BackColour.BLUE, BackColour.GREEN


def intake() -> DeviceIntake:
    """The intake of a table with no journal and no devices: :meth:`DeviceIntake.counted`
    judges a count alone."""
    state = TableState(DeckCustody([("A", RED), ("B", BLUE)]), None, seats=2, cursor=DeviceCursor())
    return DeviceIntake(state, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("cards", [0, 1, 43, 52])
def test_a_count_of_0_to_52_is_taken_as_it_is(cards):
    assert intake().counted(cards) == cards


@pytest.mark.parametrize("cards", [-1, -52, 1.5, 52.0, True, "52", None])
def test_a_negative_or_not_whole_count_is_a_device_fault(cards):
    with pytest.raises(DeviceFault, match="impossible count"):
        intake().counted(cards)


@pytest.mark.parametrize("cards", [53, 58, 60, 255])
def test_a_count_over_a_deck_is_foreign_cards(cards):
    i = intake()
    with pytest.raises(CustodyViolation) as info:
        i.counted(cards)
    assert info.value.rule is Rule.FOREIGN_CARD and f"{cards} cards, more than one deck of 52" in info.value.detail


def test_a_second_deck_of_one_colour_is_a_violation_with_its_rules():
    c = DeckCustody([("A", RED), ("B", BLUE)])
    v = c.second_deck(RED, "the shoe")
    assert v.rule is Rule.SECOND_DECK and c.violations == [v]
    assert "649a.3(b)" in v.citation and "36.05.03.27 C" in v.citation
    assert "second red deck" in v.detail and "deck A is the only red deck" in v.detail


def test_a_second_deck_of_a_colour_not_on_the_table_is_an_unknown_colour():
    c = DeckCustody([("A", RED), ("B", BLUE)])
    with pytest.raises(CustodyViolation) as info:
        c.second_deck(GREEN, "the shoe")
    assert info.value.rule is Rule.UNKNOWN_BACK_COLOUR
