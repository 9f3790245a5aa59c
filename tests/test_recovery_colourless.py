"""Replay of a journaled custody step that names no back colour (a damaged or forged
entry): custody's ``UNKNOWN_BACK_COLOUR`` violation is recorded, no deck moves, and the
replay goes on with the next entry (docs/deck-custody.md)."""

from __future__ import annotations

import pytest

from protocols.cards import BackColour
from table.custody import DeckCustody, Rule
from table.journal import Entry
from table.recovery import apply

RED, BLUE = BackColour.RED, BackColour.BLUE


def entry(seq: int, kind: str, body: dict) -> Entry:
    return Entry(seq, "2026-01-01T00:00:00Z", kind, None, None, body)


def device_event(seq: int, message: dict) -> Entry:
    return entry(seq, "device_event", {"message": message})


COLOURLESS = [
    device_event(1, {"message": "DeckInserted"}),
    device_event(1, {"message": "DeckVerified", "card_count": 52, "foreign_count": 0,
                     "present": list(range(52)), "duplicates": []}),
    device_event(1, {"message": "DeckDelivered"}),
    device_event(1, {"message": "ShoeLoaded"}),
    entry(1, "custody", {"op": "start_shuffle"}),
    entry(1, "custody", {"op": "fail_verification"}),
]


@pytest.mark.parametrize("colourless", COLOURLESS, ids=lambda e: e.body.get("op") or e.body["message"]["message"])
def test_a_step_naming_no_colour_is_an_unknown_colour_and_replay_goes_on(colourless):
    c = DeckCustody([("A", RED), ("B", BLUE)])
    before = c.places()
    apply(c, colourless)
    assert [(v.rule, v.detail) for v in c.violations] == [
        (Rule.UNKNOWN_BACK_COLOUR, "no deck with None backs on this table")]
    assert c.places() == before
    apply(c, device_event(2, {"message": "DeckInserted", "back_colour": "red"}))
    assert c.places()["A"] != before["A"] and c.places()["B"] == before["B"]
    assert len(c.violations) == 1
