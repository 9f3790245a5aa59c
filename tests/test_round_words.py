"""Rounds said as people count them ("round 11"), never by the journal's round id
("r00011-79645365"): in what a table waits for and its alarms as the floor and the pit view
show them, and in a void's refusal."""

from __future__ import annotations

from table.interfaces.pit import PitBoard
from table.interfaces.status_view import floor_status, rounds_as_people_say
from test_pit_board import KEY, status


def test_round_ids_in_a_tables_texts_are_said_as_round_numbers():
    assert rounds_as_people_say("the dealer to collect settled round r00011-79645365") == \
        "the dealer to collect settled round 11"
    assert rounds_as_people_say("r00002-0a1b2c3d: cannot deal while held") == "round 2: cannot deal while held"
    # Not a round id: left as it is (a deck id, a serial, a longer hex digest).
    for text in ("deck r1 is in the shoe", "SHF-SIM-0001", "r00011-79645365ab", "counter00011-79645365"):
        assert rounds_as_people_say(text) == text
    shown = floor_status({"waiting_for": {"what": "the dealer to collect settled round r00011-79645365"},
                          "alarms": [{"kind": "held", "text": "round 11 held: round r00011-79645365: the shoe is away"}]})
    assert shown["waiting_for"] == "the dealer to collect settled round 11"
    assert shown["alarms"][0]["text"] == "round 11 held: round 11: the shoe is away"


def test_the_pit_view_says_round_11_for_an_older_tables_round_id():
    board = PitBoard("pit7", {"t-1": KEY.public})
    assert board.receive(*status("t-1", table={
        "rounds_played": 10, "round": {"number": 11, "state": "settle"}, "links": {},
        "waiting_for": "the dealer to collect settled round r00011-79645365",
        "alarms": [{"kind": "held", "text": "round r00011-79645365 held: a restart"}]}))
    card = next(c for c in board.snapshot()["tables"] if c["table_id"] == "t-1")
    assert card["table"]["waiting_for"] == "the dealer to collect settled round 11"
    assert card["table"]["alarms"][0]["text"] == "round 11 held: a restart"
    assert "r00011" not in str(card["table"])


def test_a_void_heard_without_its_round_opening_is_still_round_11_on_the_pit_view():
    """The pit view started after round 11 opened: the void names round 11, from its id."""
    import datetime

    from table.interfaces.mqtt import sign_message

    board = PitBoard("pit7", {"t-1": KEY.public})
    topic = "threecard/pit7/t-1/events"
    ev = {"schema": "threecard.events/1", "seq": 5, "table_id": "t-1", "round_id": "r00011-79645365",
          "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(), "type": "round_voided",
          "data": {"reason": "misdeal", "supervisor": "S-1", "wagers": "returned"}}
    board.receive(topic, sign_message(KEY, topic, ev).encode())
    card = next(c for c in board.snapshot()["tables"] if c["table_id"] == "t-1")
    assert card["last_result"]["number"] == 11 and card["last_result"]["voided"] is True
