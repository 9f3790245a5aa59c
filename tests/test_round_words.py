"""Rounds said as people count them ("round 11"), never by the journal's round id
("r00011-79645365"): in what a table waits for and its alarms as the floor's pit grid shows
them, and in a void's refusal."""

from __future__ import annotations

from table.interfaces.status_view import floor_status, rounds_as_people_say
from table.keys import generate

KEY = generate()


def status(table_id: str, online: bool = True, **extra):
    import datetime

    from table.interfaces.mqtt import sign_message

    topic = f"threecard/pit7/{table_id}/status"
    msg = {"schema": "threecard.status/1", "table_id": table_id, "floor": "pit7", "online": online,
           "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(), "head_seq": 0, **extra}
    return topic, sign_message(KEY, topic, msg).encode()


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


def _floor(tmp_path):
    from table.floor.ingest import Floor
    from table.floor.store import open_store

    store = open_store(str(tmp_path / "floor.sqlite3"))
    return store, Floor(store, {"t-1": KEY.public}).start()


def test_the_pit_grid_says_round_11_for_an_older_tables_round_id(tmp_path):
    from table.floor.pit_screen import Clock, grid

    store, floor = _floor(tmp_path)
    try:
        assert floor.receive(*status("t-1", table={
            "rounds_played": 10, "round": {"number": 11, "state": "settle"}, "links": {},
            "waiting_for": "the dealer to collect settled round r00011-79645365",
            "alarms": [{"kind": "held", "text": "round r00011-79645365 held: a restart"}]}))
        assert floor.wait_idle(10)
        card = next(c for c in grid(store, None, clock=Clock())["tables"] if c["table_id"] == "t-1")
        assert card["waiting_for"] == "the dealer to collect settled round 11"
        assert card["table_alarms"][0]["text"] == "round 11 held: a restart"
        assert "r00011" not in str({k: v for k, v in card.items() if k != "table_id"})
    finally:
        floor.close()
        store.close()


def test_a_void_heard_without_its_round_opening_is_still_round_11_on_the_tables_page(tmp_path):
    """The floor started after round 11 opened: the void names round 11, from its id."""
    import datetime

    from table.floor.pit_screen import Clock, table_page
    from table.interfaces.mqtt import sign_message

    store, floor = _floor(tmp_path)
    try:
        assert floor.receive(*status("t-1"))
        topic = "threecard/pit7/t-1/events"
        now = datetime.datetime.now(datetime.timezone.utc)
        ev = {"schema": "threecard.events/1", "seq": 5, "table_id": "t-1", "round_id": "r00011-79645365",
              "ts": now.isoformat(), "type": "round_voided",
              "data": {"reason": "misdeal", "supervisor": "S-1", "wagers": "returned"}}
        assert floor.receive(topic, sign_message(KEY, topic, ev).encode())
        assert floor.wait_idle(10)
        page = table_page(store, "t-1", None, clock=Clock(), gaming_day=now.date().isoformat())
        voided = next(r for r in page["rounds"] if r["round_id"] == "r00011-79645365")
        assert voided["number"] == 11 and voided["state"] == "voided"
    finally:
        floor.close()
        store.close()
