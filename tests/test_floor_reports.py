"""The floor's reports behind sign-in (issue 28, point 3): by table and game, for the day, month to
date and year to date (COMAR 36.05.03.25), from the tables' signed round results and day reports;
fluctuations outside the 95 % band with their notes (who wrote them, chained); CSV and JSON export."""

from __future__ import annotations

import csv
import io
import json

import pytest

from table.floor.ingest import Floor
from table.floor.reports import notes_chain_holds, report, report_routes
from table.floor.store import open_store
from table.floor.web import FloorServer, floor_app
from table.interfaces.auth import PeopleFile
from table.interfaces.brokers import load_table_keys
from table.keys import generate
from table.roles import Role

from console_helpers import CHEAP
from floor_helpers import SignedTable, call, database  # noqa: F401

#: the floor key (signs the notes)
FLOOR_KEY = generate()

PINS = {"PB-1": (Role.PIT_BOSS, "482913"), "FM-1": (Role.FLOOR_MANAGER, "739201"), "D-4": (Role.DEALER, "615048")}


def feed(floor: Floor, messages) -> None:
    for topic, payload in messages:
        assert floor.receive(topic, payload.encode())
    assert floor.wait_idle(30)


@pytest.fixture
def reports(tmp_path, database):
    people = PeopleFile(tmp_path / "people.toml")
    for person, (role, pin) in PINS.items():
        people.add(person, role, pin, hasher=CHEAP, pits=["pit1"] if role is Role.PIT_BOSS else ())
    a, b = SignedTable(tmp_path / "a", "pit1-tcp-01"), SignedTable(tmp_path / "b", "pit1-tcp-02")
    for t in (a, b):
        t.publish_key(tmp_path / "keys")
    store = open_store(database)
    floor = Floor(store, load_table_keys(tmp_path / "keys")).start()
    server = FloorServer(floor_app(floor, FLOOR_KEY, extra_routes=report_routes(floor, tmp_path / "people.toml", key=FLOOR_KEY)),
                         "127.0.0.1", 0)
    try:
        yield floor, server, a, b
    finally:
        server.close()
        floor.close()
        store.close()
        a.close()
        b.close()


def sign_in(server, person):
    status, body = call(server, "/api/v1/floor/session", {"person": person, "pin": PINS[person][1]})
    return status, body


def test_the_report_needs_a_floor_role_and_adds_up_by_day_month_and_year(reports):
    floor, server, a, b = reports
    feed(floor, [a.status(), b.status(),  # both in pit1, as their signed statuses say
                 *a.round(1, ts="2026-01-15T20:00:00+00:00"),  # table a: +1000 in January
                 *a.round(2, ts="2026-03-02T20:00:00+00:00"),  # +1000 earlier in March
                 *a.round(3, ts="2026-03-10T20:00:00+00:00", nets={"1": 3000}),  # -3000 on the day
                 *b.round(1, ts="2026-03-10T21:00:00+00:00", ante=500),  # table b: +500 on the day
                 *b.round(2, ts="2026-03-11T01:00:00+00:00"),  # the next day: not in the report of the 10th
                              a.event("round_voided", {"reason": "a card exposed"}, "r00009-x", "2026-03-10T22:00:00+00:00"),
                 # a round opened for bets (issue 23): its wagers are the bets as frozen at bets_closed
                 opened := b.event("round_opened", {"number": 3, "seats": [], "wagers": {}}, "r3",
                                   "2026-03-10T23:00:00+00:00"),
                 b.event("bets_closed", {"number": 3, "seats": [1], "wagers": {"1": {"ante": 700, "pair_plus": 300}}},
                         "r3", "2026-03-10T23:00:01+00:00"),
                 b.event("round_settled", {"number": 3, "results": {}, "net_cents": {"1": -1000}}, "r3",
                         "2026-03-10T23:01:00+00:00")])
    feed(floor, [opened])  # the open delivered again (QoS 1) after the bets were frozen: it changes nothing
    assert call(server, "/api/v1/floor/report?day=2026-03-10")[0] == 401
    assert sign_in(server, "D-4")[0] == 403  # a dealer may not see the floor's money
    status, who = sign_in(server, "PB-1")
    assert status == 200 and who["role"] == "pit_boss"
    status, rep = call(server, "/api/v1/floor/report?day=2026-03-10", token=who["token"])
    assert status == 200
    rows = {r["table_id"]: r for r in rep["rows"]}
    assert rows["pit1-tcp-01"]["day"] == {"rounds": 1, "wagered_cents": 1000, "win_cents": -3000, "source": "rounds"}
    assert rows["pit1-tcp-01"]["month_to_date"] == {"rounds": 2, "wagered_cents": 3000, "win_cents": -2000}
    assert rows["pit1-tcp-01"]["year_to_date"] == {"rounds": 3, "wagered_cents": 5000, "win_cents": -1000}
    assert rows["pit1-tcp-02"]["day"] == {"rounds": 2, "wagered_cents": 2000, "win_cents": 1500, "source": "rounds"}
    assert rep["totals"]["day"] == {"rounds": 3, "wagered_cents": 3000, "win_cents": -1500}
    status, text = call(server, "/api/v1/floor/report?day=2026-03-10&format=csv", token=who["token"])
    lines = list(csv.DictReader(io.StringIO(text)))
    assert {(r["table_id"], r["period"], r["win_cents"]) for r in lines} >= {
        ("pit1-tcp-01", "day", "-3000"), ("pit1-tcp-01", "year_to_date", "-1000"), ("pit1-tcp-02", "day", "1500")}
    assert call(server, "/api/v1/floor/report?day=March", token=who["token"])[0] == 400


def test_a_tables_signed_day_report_replaces_the_sum_of_its_rounds(reports):
    floor, server, a, b = reports
    feed(floor, [*a.round(1, ts="2026-03-10T20:00:00+00:00"),
                 a.event("day_report", {"gaming_day": "2026-03-10", "table_win_cents": 1234},
                         ts="2026-03-11T06:00:00+00:00")])
    rep = report(floor.store, "2026-03-10")
    assert rep["rows"][0]["day"]["win_cents"] == 1234 and rep["rows"][0]["day"]["source"] == "day_report"


def test_a_day_outside_the_band_is_listed_and_its_notes_say_who(reports):
    floor, server, a, b = reports
    stream = []
    for n in range(60):  # two months of ordinary days: the table wins 1000 or loses 1000, alternately
        day = f"2026-0{1 + n // 30}-{1 + n % 28:02d}T20:00:00+00:00"
        stream += a.round(n + 1, ts=day, nets={"1": -1000} if n % 2 else {"1": 1000})
    for n in range(12):  # then a day the table loses every round
        stream += a.round(100 + n, ts="2026-03-05T20:00:00+00:00", nets={"1": 1000})
    feed(floor, stream)
    _, who = sign_in(server, "FM-1")
    status, rep = call(server, "/api/v1/floor/report?day=2026-03-05", token=who["token"])
    flagged = [f for f in rep["fluctuations"] if f["table_id"] == "pit1-tcp-01"]
    assert [f["gaming_day"] for f in flagged] == ["2026-03-05"] and flagged[0]["z"] < -1.96
    assert call(server, "/api/v1/floor/notes", {"table_id": "pit1-tcp-01", "gaming_day": "2026-03-05",
                                                 "text": "count re-run"})[0] == 401
    for text in ("count re-run: dealer mispaid seat 1 twice, video reviewed", "surveillance report filed"):
        status, body = call(server, "/api/v1/floor/notes", {"table_id": "pit1-tcp-01", "gaming_day": "2026-03-05",
                                                             "text": text}, token=who["token"])
        assert status == 200 and body["note"]["author"] == "FM-1" and body["note"]["role"] == "floor_manager"
    assert call(server, "/api/v1/floor/notes", {"table_id": "pit1-tcp-01", "gaming_day": "2026-03-05",
                                                 "text": " "}, token=who["token"])[0] == 400
    _, rep = call(server, "/api/v1/floor/report?day=2026-03-05", token=who["token"])
    assert [n["text"][:12] for n in rep["fluctuations"][0]["notes"]] == ["count re-run", "surveillance"]
    assert notes_chain_holds(floor.store)
    with floor.store.transaction() as tx:  # someone edits a note in the database afterwards
        tx.execute("UPDATE notes SET text = ? WHERE n = 1", ("nothing found",))
    assert not notes_chain_holds(floor.store)
