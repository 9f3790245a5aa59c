"""Who may do what on the floor's reports (issue 28, point 3; docs/integration.md "Who sees what"):
a pit boss sees and writes about the tables of their own pits only, a floor manager the whole
floor; a note about a table or a gaming day the floor does not know is refused with a typed
error and writes nothing; a floor sign-in is logged with origin "floor" and the peer's address;
today's report is the floor's gaming day (its time zone and start hour), not a calendar date."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import urllib.error
import urllib.request

import pytest
from structlog.testing import capture_logs

from table.floor.ingest import Floor, GamingDay
from table.floor.reports import report_routes
from table.floor.store import open_store
from table.floor.web import FloorServer, floor_app
from table.interfaces.auth import PeopleFile, Person, load_people, save_people
from table.interfaces.brokers import load_table_keys
from table.keys import generate
from table.roles import Role

from console_helpers import CHEAP
from floor_helpers import SignedTable, call, database  # noqa: F401

#: the floor key (signs the notes)
FLOOR_KEY = generate()

PINS = {"PB-1": (Role.PIT_BOSS, "482913", ["pit1"]), "FM-1": (Role.FLOOR_MANAGER, "739201", [])}
FLUCTUATION_DAY = "2026-03-05"


def fluctuating(t: SignedTable, first: int = 1) -> list[tuple[str, str]]:
    """40 ordinary rounds in February (the table wins or loses 1000, alternately), then a day
    the table loses all of its 12 rounds: a fluctuation outside the 95 % band."""
    stream = []
    for n in range(40):
        stream += t.round(first + n, ts=f"2026-02-{1 + n % 28:02d}T20:00:00+00:00",
                          nets={"1": -1000} if n % 2 else {"1": 1000})
    for n in range(12):
        stream += t.round(first + 100 + n, ts=f"{FLUCTUATION_DAY}T20:00:00+00:00", nets={"1": 1000})
    return stream


class Clock:
    """The floor's wall clock (µs since the epoch), set by the test."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> int:
        return int(self.at.timestamp() * 1_000_000)


@pytest.fixture
def floor_of_two_pits(tmp_path, database):
    """A floor with pit1-tcp-01 in pit1 and pit2-tcp-01 in pit2 (as their signed statuses say),
    each with a fluctuation on FLUCTUATION_DAY; PB-1 runs pit1, FM-1 is the floor manager."""
    people = PeopleFile(tmp_path / "people.toml")
    for person, (role, pin, pits) in PINS.items():
        people.add(person, role, pin, hasher=CHEAP, pits=pits)
    a, b = SignedTable(tmp_path / "a", "pit1-tcp-01", "pit1"), SignedTable(tmp_path / "b", "pit2-tcp-01", "pit2")
    for t in (a, b):
        t.publish_key(tmp_path / "keys")
    store = open_store(database)
    floor = Floor(store, load_table_keys(tmp_path / "keys")).start()
    clock = Clock(dt.datetime(2026, 3, 5, 22, 0, tzinfo=dt.timezone.utc))
    server = FloorServer(floor_app(floor, FLOOR_KEY, extra_routes=report_routes(floor, tmp_path / "people.toml", key=FLOOR_KEY,
                                                                                clock=clock)), "127.0.0.1", 0)
    for topic, payload in [a.status(alarms=[{"kind": "held", "text": "pit1 table held"}]),
                           b.status(alarms=[{"kind": "held", "text": "pit2 table held"}]),
                           *fluctuating(a), *fluctuating(b)]:
        assert floor.receive(topic, payload.encode())
    assert floor.wait_idle(30)
    try:
        yield floor, server, tmp_path / "people.toml"
    finally:
        server.close()
        floor.close()
        store.close()
        a.close()
        b.close()


def token(server, person):
    status, body = call(server, "/api/v1/floor/session", {"person": person, "pin": PINS[person][1]})
    assert status == 200, body
    return body["token"]


def note(server, tok, table_id, gaming_day=FLUCTUATION_DAY, text="count re-run, video reviewed"):
    return call(server, "/api/v1/floor/notes", {"table_id": table_id, "gaming_day": gaming_day, "text": text},
                token=tok)


def test_a_pit_boss_sees_and_writes_about_their_pit_only_a_floor_manager_the_whole_floor(floor_of_two_pits):
    floor, server, _ = floor_of_two_pits
    pb, fm = token(server, "PB-1"), token(server, "FM-1")
    assert call(server, "/api/v1/floor/session", token=pb)[1]["pits"] == ["pit1"]
    assert call(server, "/api/v1/floor/session", token=fm)[1]["pits"] is None

    status, rep = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}", token=pb)
    assert status == 200 and rep["scope"] == {"pits": ["pit1"], "whole_floor": False}
    assert [r["table_id"] for r in rep["rows"]] == ["pit1-tcp-01"]
    assert [f["table_id"] for f in rep["fluctuations"]] == ["pit1-tcp-01"]
    assert rep["totals"]["day"]["win_cents"] == rep["rows"][0]["day"]["win_cents"] == -12_000  # pit1's, not the floor's
    _, whole = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}", token=fm)
    assert [r["table_id"] for r in whole["rows"]] == ["pit1-tcp-01", "pit2-tcp-01"]
    assert whole["scope"]["whole_floor"] and whole["totals"]["day"]["win_cents"] == -24_000

    # the export: the pit boss's file holds pit1 only, and another pit (or the floor) is refused
    _, text = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}&format=csv", token=pb)
    assert {r["table_id"] for r in csv.DictReader(io.StringIO(text))} == {"pit1-tcp-01"}
    status, body = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}&format=csv&pit=pit2", token=pb)
    assert status == 403 and body["code"] == "not_your_pit" and "pit2" in body["error"]
    _, text = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}&format=csv&pit=pit2", token=fm)
    assert {r["table_id"] for r in csv.DictReader(io.StringIO(text))} == {"pit2-tcp-01"}

    # notes: the pit boss on their own pit's table yes, another pit's no (nothing written); the floor manager any
    assert note(server, pb, "pit1-tcp-01", text="seat 1 paid twice, video reviewed")[0] == 200
    status, body = note(server, pb, "pit2-tcp-01", text="not my pit")
    assert status == 403 and body["code"] == "not_your_pit" and "pit2-tcp-01" in body["error"]
    status, body = note(server, fm, "pit2-tcp-01", text="surveillance report filed")
    assert status == 200 and body["note"]["role"] == "floor_manager"
    _, mine = call(server, "/api/v1/floor/notes", token=pb)
    assert [(n["table_id"], n["author"]) for n in mine["notes"]] == [("pit1-tcp-01", "PB-1")]
    _, every = call(server, "/api/v1/floor/notes", token=fm)
    assert [(n["table_id"], n["author"], n["text"]) for n in every["notes"]] == [
        ("pit1-tcp-01", "PB-1", "seat 1 paid twice, video reviewed"),
        ("pit2-tcp-01", "FM-1", "surveillance report filed")]

    # alarms: the pit boss's pit's tables; the floor manager's every table's
    _, alarms = call(server, "/api/v1/floor/alarms", token=pb)
    assert {a["text"] for a in alarms["alarms"]} == {"pit1 table held"}
    _, alarms = call(server, "/api/v1/floor/alarms", token=fm)
    assert {a["text"] for a in alarms["alarms"]} == {"pit1 table held", "pit2 table held"}


def test_a_pit_boss_of_no_pit_is_refused_at_sign_in_and_their_pits_are_read_at_each_request(floor_of_two_pits):
    floor, server, people_file = floor_of_two_pits
    pb = token(server, "PB-1")
    people = load_people(people_file)
    old = people["PB-1"]
    people["PB-1"] = Person(old.id, old.role, old.pin, pits=("pit2",))  # moved to pit2 while signed in
    save_people(people_file, people)
    _, rep = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}", token=pb)
    assert [r["table_id"] for r in rep["rows"]] == ["pit2-tcp-01"]
    people["PB-1"] = Person(old.id, old.role, old.pin)  # a file of an earlier release: a pit boss without pits
    save_people(people_file, people)
    assert call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}", token=pb)[0] == 401
    status, body = call(server, "/api/v1/floor/session", {"person": "PB-1", "pin": PINS["PB-1"][1]})
    assert status == 403 and "pit boss of no pit" in body["error"] and "--pit" in body["error"]


def test_a_note_on_an_unknown_table_or_day_is_refused_by_name_and_writes_nothing(floor_of_two_pits):
    floor, server, _ = floor_of_two_pits
    fm = token(server, "FM-1")
    assert note(server, fm, "pit1-tcp-01", text="first look")[0] == 200
    _, before = call(server, "/api/v1/floor/notes", token=fm)
    _, report_before = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}", token=fm)

    status, body = note(server, fm, "pit9-tcp-99")
    assert status == 404 and body["code"] == "unknown_table" and body["table_id"] == "pit9-tcp-99"
    assert "pit9-tcp-99" in body["error"] and "nothing was written" in body["error"]
    status, body = note(server, fm, "pit1-tcp-01", "2026-03-04")  # a day the table has no record of
    assert status == 404 and body["code"] == "unknown_gaming_day" and body["gaming_day"] == "2026-03-04"
    assert "pit1-tcp-01" in body["error"] and "2026-03-04" in body["error"]
    status, body = note(server, fm, "pit1-tcp-01", "2027-03-05")  # a day to come
    assert status == 404 and body["code"] == "unknown_gaming_day"
    status, body = note(server, fm, "pit1-tcp-01", "March 5")
    assert status == 400 and "gaming_day" in body["error"]
    status, body = call(server, "/api/v1/floor/notes", {"table_id": "pit1-tcp-01", "text": "no day"}, token=fm)
    assert status == 400 and "gaming_day" in body["error"]

    _, after = call(server, "/api/v1/floor/notes", token=fm)
    assert after == before and len(after["notes"]) == 1
    _, report_after = call(server, f"/api/v1/floor/report?day={FLUCTUATION_DAY}", token=fm)
    assert report_after == report_before
    pb = token(server, "PB-1")  # a pit boss is told the same of a table nobody knows
    status, body = note(server, pb, "pit9-tcp-99")
    assert status == 404 and body["code"] == "unknown_table"
    status, body = note(server, pb, "pit1-tcp-01", "2026-03-04")  # and of a day of their own table
    assert status == 404 and body["code"] == "unknown_gaming_day"
    assert call(server, "/api/v1/floor/notes", token=fm)[1] == before
    assert note(server, fm, "pit1-tcp-01", text="second look")[1]["note"]["n"] == 2  # the chain went on unbroken


def test_a_floor_sign_in_is_logged_with_origin_floor_and_the_peers_address(floor_of_two_pits):
    floor, server, _ = floor_of_two_pits
    with capture_logs() as logs:
        assert call(server, "/api/v1/floor/session", {"person": "FM-1", "pin": "000000"})[0] == 401
        token(server, "FM-1")
    signed = [e for e in logs if e["event"] in ("signed_in", "sign_in_failed")]
    assert [(e["event"], e["person"], e["origin"], e["address"]) for e in signed] == [
        ("sign_in_failed", "FM-1", "floor", "127.0.0.1"), ("signed_in", "FM-1", "floor", "127.0.0.1")]


def test_a_header_cannot_change_the_address_a_floor_sign_in_is_logged_with(floor_of_two_pits):
    floor, server, _ = floor_of_two_pits
    req = urllib.request.Request(server.url + "/api/v1/floor/session", method="POST",
                                 data=json.dumps({"person": "FM-1", "pin": PINS["FM-1"][1]}).encode(),
                                 headers={"Content-Type": "application/json", "X-Forwarded-For": "10.9.9.9"})
    with capture_logs() as logs:
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
    assert [e["address"] for e in logs if e["event"] == "signed_in"] == ["127.0.0.1"]


def test_todays_report_is_the_floors_gaming_day_after_midnight_before_the_start_hour(tmp_path):
    """00:30 in New York on 11 March, the gaming day starting at 06:00: the floor is still on
    the 10th, and so is its report when no day is asked for."""
    PeopleFile(tmp_path / "people.toml").add("FM-1", Role.FLOOR_MANAGER, PINS["FM-1"][1], hasher=CHEAP)
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    t.publish_key(tmp_path / "keys")
    store = open_store(str(tmp_path / "floor.sqlite3"))
    day = GamingDay("America/New_York", 6)
    floor = Floor(store, load_table_keys(tmp_path / "keys"), day=day).start()
    clock = Clock(dt.datetime(2026, 3, 11, 4, 30, tzinfo=dt.timezone.utc))  # 00:30 EDT
    server = FloorServer(floor_app(floor, FLOOR_KEY, extra_routes=report_routes(floor, tmp_path / "people.toml", key=FLOOR_KEY,
                                                                                clock=clock)), "127.0.0.1", 0)
    try:
        for topic, payload in [*t.round(1, ts="2026-03-10T23:00:00+00:00"),   # 19:00 on the 10th
                               *t.round(2, ts="2026-03-11T04:20:00+00:00")]:  # 00:20 on the 11th: still the 10th's
            assert floor.receive(topic, payload.encode())
        assert floor.wait_idle(30)
        fm = token(server, "FM-1")
        assert call(server, "/api/v1/floor/session", token=fm)[1]["gaming_day"] == "2026-03-10"
        status, rep = call(server, "/api/v1/floor/report", token=fm)
        assert status == 200 and rep["gaming_day"] == "2026-03-10" and rep["totals"]["day"]["rounds"] == 2
        clock.at = dt.datetime(2026, 3, 11, 10, 0, tzinfo=dt.timezone.utc)  # 06:00 EDT: the 11th begins
        assert call(server, "/api/v1/floor/report", token=fm)[1]["gaming_day"] == "2026-03-11"
    finally:
        server.close()
        floor.close()
        store.close()
        t.close()


def test_an_old_genuine_status_replayed_does_not_move_a_table_into_another_pit(tmp_path, database):
    """Attack (fresh review of issue 28): table pit2-tcp-09 was once in pit1, and its genuine signed
    status of then is republished by anyone on the floor network, on pit1's topic, after today's.
    Believed, it would move the table into pit1: pit1's boss would see its year and write notes on
    it. The floor takes a status only if its signed ts is newer than the last one taken, also
    after the floor restarts on the same database."""
    people = PeopleFile(tmp_path / "people.toml")
    people.add("PB-1", Role.PIT_BOSS, PINS["PB-1"][1], hasher=CHEAP, pits=["pit1"])
    t = SignedTable(tmp_path / "t", "pit2-tcp-09", "pit1")
    t.publish_key(tmp_path / "keys")
    old = t.status(alarms=[{"kind": "held", "text": "an old hold"}])  # signed while the table was in pit1
    t.floor, t.status_topic = "pit2", t.status_topic.replace("/pit1/", "/pit2/")  # moved to pit2
    today = t.status()
    store = open_store(database)
    try:
        for restarted in (False, True):
            floor = Floor(store, load_table_keys(tmp_path / "keys")).start()
            server = FloorServer(floor_app(floor, FLOOR_KEY, extra_routes=report_routes(floor, people.path, key=FLOOR_KEY)),
                                 "127.0.0.1", 0)
            try:
                # today's (retained: the broker gives it again to a restarted floor) is no replay
                assert floor.receive(today[0], today[1].encode())
                assert not floor.receive(old[0], old[1].encode()), "an old status taken again"
                assert floor.wait_idle(30)
                assert floor.counts.forged == 1
                assert store.query("SELECT floor FROM tables_seen") == [("pit2",)]
                pb = token(server, "PB-1")
                status, body = note(server, pb, "pit2-tcp-09", text="not my pit")
                assert status == 403 and body["code"] == "not_your_pit"
                _, alarms = call(server, "/api/v1/floor/alarms", token=pb)
                assert "an old hold" not in {a["text"] for a in alarms["alarms"]}
            finally:
                server.close()
                floor.close()
    finally:
        store.close()
        t.close()


def test_forged_messages_with_chosen_key_ids_do_not_flood_the_alarms_or_hide_another_pits(floor_of_two_pits,
                                                                                      tmp_path):
    """Attack (fresh review of issue 28): 300 envelopes on pit2's table's topic, each signed by a
    key of the attacker's with its own key id. One alarm row a chosen text would fill the newest
    200 and hide pit1's genuine "held" alarm from pit1's boss; it is one row a table, day and kind."""
    floor, server, _ = floor_of_two_pits
    for n in range(300):
        forger = SignedTable(tmp_path / "forgers" / str(n), "pit2-tcp-01", "pit2")
        topic, payload = forger.status()
        assert not floor.receive(topic, payload.encode())
        forger.close()
    assert floor.wait_idle(30) and floor.counts.forged == 300
    _, alarms = call(server, "/api/v1/floor/alarms", token=token(server, "FM-1"))
    assert [a["kind"] for a in alarms["alarms"]].count("forged_message") == 1
    _, alarms = call(server, "/api/v1/floor/alarms", token=token(server, "PB-1"))
    assert {a["text"] for a in alarms["alarms"]} == {"pit1 table held"}
