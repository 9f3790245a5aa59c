"""The held round's journaled form: a checkpoint's ``state.held`` reads back into a
:class:`~table.round.HeldRound` and is written again the same, byte for byte (old
journals read, the record does not change)."""

from __future__ import annotations

import json

import pytest

from table.round import HeldRound, RoundState, VoidRequest

#: ``state.held`` as checkpoints wrote it when the held round was a dict (a hold mid-round,
#: and a restart with a void waiting for its second supervisor)
WRITTEN = [
    {"round_id": "r00007-0a1b2c3d", "deck_id": "A", "reason": "foreign card", "open_seq": 41, "number": 7,
     "settled": False, "placed": {"1": 1000, "3": 2500}, "cause": "custody", "decisions_final": False},
    {"round_id": "r00012-deadbeef", "deck_id": "B", "settled": False,
     "reason": "the controller restarted during the round", "number": 12, "open_seq": 90,
     "placed": {"2": 2000}, "cause": "void_request", "decisions_final": True,
     "void_request": {"supervisor": "S-1", "reason": "misdeal", "by": {"role": "supervisor", "id": "S-1"}}},
]


def canonical(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize("written", WRITTEN)
def test_a_held_round_as_journaled_reads_back_and_is_written_again_the_same(written):
    held = HeldRound.from_dict(written)
    assert canonical(held.to_dict()) == canonical(written)


def test_what_a_release_resumes_from_is_never_journaled():
    held = HeldRound("r1", "A", "jam", 1, False, {"1": 500}, "device", False, hold_from=RoundState.DEALING,
                     void_request=None)
    assert "hold_from" not in held.to_dict() and "open_seq" not in held.to_dict()
    held.void_request = VoidRequest("S-1", "misdeal", None)
    assert held.to_dict()["void_request"] == {"supervisor": "S-1", "reason": "misdeal", "by": None}
    assert held.releasable and held.said == "round 1"
