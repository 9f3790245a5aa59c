"""The pit boss's one screen on the floor, in real Chromium with two people at once (a pit boss
of pit1 at 390x844, the floor manager on a desktop), the floor on PostgreSQL following a real
mosquitto:

* the grid shows every table of the person's pits with its state, round step, what it waits
  for, its devices and alarms; the pit boss never sees pit2's table;
* a table process killed with SIGKILL (its last will) shows offline on both screens, with the
  floor's time in the floor's zone, then online again after its restart; no forgery alarm;
* a round's history (its incidents) is reached from the grid in two clicks;
* the phone has no horizontal scroll.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from table.interfaces.auth import PeopleFile
from table.interfaces.mqtt import sign_message

from console_helpers import CHEAP, close_contexts, chromium_path, screenshot_dir
from floor_helpers import Publisher, SignedTable, broker, call, needs_mosquitto  # noqa: F401  (fixtures)
from test_floor_crash import PIT, TABLE, TableProcess, forged_alarms
from test_floor_roles import PINS

CHROMIUM = chromium_path()
pytestmark = [needs_mosquitto,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
              pytest.mark.timeout(300)]

ZONE = "America/Chicago"


def live_status(t: SignedTable) -> tuple[str, str]:
    """A status as a live table publishes it: round 2 dealing, waiting for a card, the shoe down."""
    msg = {"schema": "threecard.status/1", "table_id": t.table_id, "floor": t.floor, "online": True,
           "ts": dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds"), "head_seq": t.seq,
           "session": "a1b2c3d4e5f60718",
           "table": {"rounds_played": 1, "round": {"number": 2, "state": "dealing"},
                     "waiting_for": "the dealer to draw the next card from the shoe",
                     "alarms": [{"kind": "link_down", "text": "the shoe does not answer: check its USB cable"}],
                     "links": {"shuffler": {"up": True, "state": "up"}, "shoe": {"up": False, "state": "down"}}}}
    return t.status_topic, sign_message(t.key, t.status_topic, msg)


def floor_config(tmp_path, database: str, port: int) -> str:
    return f"""
[floor]
database = "{database}"
key_file = "{tmp_path / 'floor.key'}"
table_keys = "{tmp_path / 'keys'}"
people_file = "{tmp_path / 'people.toml'}"
listen = "127.0.0.1:0"
display_timezone = "{ZONE}"
wall_pits = ["{PIT}"]
[[broker]]
url = "mqtt://127.0.0.1:{port}"
"""


def start_floor(tmp_path, database: str, port: int):
    from table.floor.config import parse_floor_config
    from table.floor.service import FloorService

    service = FloorService(parse_floor_config(floor_config(tmp_path, database, port))).start()
    assert service.wait_following(20) == []
    return service


def sign_in(page, url: str, person: str) -> None:
    page.goto(url + "/")
    page.fill("#person", person)
    page.fill("#pin", PINS[person][1])
    page.click("#signin-form button")
    page.wait_for_selector("#pit:not([hidden])")


def tile(page, table_id: str, state: str | None = None):
    return page.locator(f'[data-grid-table="{table_id}"]' + (f'[data-state="{state}"]' if state else ""))


@pytest.fixture
def floor_world(tmp_path, broker, pg_cluster):  # noqa: F811
    people = PeopleFile(tmp_path / "people.toml")
    for person, (role, pin, pits) in PINS.items():
        people.add(person, role, pin, hasher=CHEAP, pits=pits)
    keys = tmp_path / "keys"
    keys.mkdir()
    killed = TableProcess(tmp_path / "table", broker.port)
    (keys / f"{TABLE}.pub").write_bytes((tmp_path / "table" / "table-key.pem.pub").read_bytes())
    a, b = SignedTable(tmp_path / "a", "pit1-tcp-01", PIT), SignedTable(tmp_path / "b", "pit2-tcp-01", "pit2")
    for t in (a, b):
        t.publish_key(keys)
    database = pg_cluster.create_database()
    world = {"tmp": tmp_path, "broker": broker, "database": database, "killed": killed, "a": a, "b": b}
    yield world
    killed.stop()
    a.close()
    b.close()


def publish_rounds(port: int, a: SignedTable, b: SignedTable) -> None:
    pub = Publisher(port, "test-tables")
    try:
        r2 = "r00002-pit1-tcp-01"
        pub.send([*a.round(1), a.event("round_opened", {"number": 2, "seats": [1], "wagers": {
            "1": {"ante": 2500, "pair_plus": 500, "six_card": 0, "progressive": 0}}}, r2),
                  a.event("round_held", {"reason": "a card out of order at draw 3: the supervisor looks"}, r2),
                  live_status(a), *b.round(1), b.status()])
    finally:
        pub.close()


def test_two_people_watch_a_table_die_and_come_back_and_open_a_rounds_history_from_the_grid(chromium, floor_world):
    w = floor_world
    service = start_floor(w["tmp"], w["database"], w["broker"].port)
    try:
        w["killed"].start()
        publish_rounds(w["broker"].port, w["a"], w["b"])
        browser = chromium
        try:
            boss_ctx = browser.new_context(viewport={"width": 390, "height": 844})
            manager_ctx = browser.new_context(viewport={"width": 1440, "height": 900})
            boss, manager = boss_ctx.new_page(), manager_ctx.new_page()
            errors: list[str] = []
            for pg in (boss, manager):
                pg.on("pageerror", lambda exc: errors.append(str(exc)))
            sign_in(boss, service.url, "PB-1")
            sign_in(manager, service.url, "FM-1")
            # and the pit's read-only wall page (no sign-in), served by the same floor
            wall = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
            wall.on("pageerror", lambda exc: errors.append(str(exc)))
            wall.goto(service.url + f"/pit?pit={PIT}")

            # the grid: the pit boss sees pit1's two tables, the manager pit2's as well
            for pg in (boss, manager):
                tile(pg, TABLE, "online").wait_for(timeout=20_000)
                tile(pg, "pit1-tcp-01", "online").wait_for(timeout=20_000)
            tile(manager, "pit2-tcp-01", "online").wait_for(timeout=20_000)
            assert tile(boss, "pit2-tcp-01").count() == 0
            tile(wall, TABLE, "online").wait_for(timeout=20_000)
            assert tile(wall, "pit2-tcp-01").count() == 0 and "$" not in wall.inner_text("body")
            assert wall.locator("a, button, form").count() == 0  # read-only
            assert call(service, "/api/v1/floor/wall?pit=pit2")[0] == 404  # not a wall pit of this floor
            live = tile(boss, "pit1-tcp-01").inner_text()
            assert "round 2 · dealing" in live and "waits: the dealer to draw" in live, live
            assert "shoe DOWN" in live and "shuffler up" in live and "alarms" in live, live

            # a crash: offline on both screens (the floor's time, in the floor's zone), then back
            killed_at = time.monotonic()
            w["killed"].kill()
            for pg in (boss, manager, wall):
                tile(pg, TABLE, "offline").wait_for(timeout=20_000)  # the 5 s bound: test_floor_crash (alone)
            print(f"both screens showed {TABLE} offline {time.monotonic() - killed_at:.2f} s after SIGKILL")
            text = tile(manager, TABLE).inner_text()
            assert "connection lost" in text and ("CST" in text or "CDT" in text), text
            boss.screenshot(path=str(screenshot_dir() / "floor-grid-pit-boss-390px.png"), full_page=True)
            w["killed"].start()
            for pg in (boss, manager, wall):
                tile(pg, TABLE, "online").wait_for(timeout=20_000)
            assert forged_alarms(service.floor) == [] and service.floor.counts.forged == 0

            # a round's history from the grid: the tile, then the round
            tile(boss, "pit1-tcp-01").locator("a").click()
            boss.wait_for_selector("#table-view:not([hidden])")
            held = boss.locator('[data-round="r00002-pit1-tcp-01"]')
            held.wait_for(timeout=10_000)
            assert boss.locator('[data-round="r00001-pit1-tcp-01"]').count() == 1
            held.locator("summary").click()
            details = held.inner_text()
            assert "round held" in details and "a card out of order at draw 3" in details, details
            assert "$30.00" in details  # wagered: ante 25 + pair plus 5
            day = boss.inner_text("#table-day")
            assert "rounds" in day and "$10.00" in day, day  # round 1: the table won the ante
            assert boss.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            boss.screenshot(path=str(screenshot_dir() / "floor-table-history-390px.png"), full_page=True)
            boss.click("#back")
            tile(boss, TABLE).wait_for()
            assert boss.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

            # a pit boss asking for another pit's table by its address gets nothing of it
            boss.goto(service.url + "/#table/pit2-tcp-01")
            boss.wait_for_function("() => /no table/.test(document.querySelector('#table-card').textContent)")
            assert errors == []
        finally:
            close_contexts(browser)
    finally:
        service.close()


def test_a_floor_restart_keeps_the_pit_boss_and_the_floor_manager_signed_in(chromium, floor_world):
    w = floor_world
    service = start_floor(w["tmp"], w["database"], w["broker"].port)
    publish_rounds(w["broker"].port, w["a"], w["b"])
    try:
        browser = chromium
        try:
            boss = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            manager = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            sign_in(boss, service.url, "PB-1")
            sign_in(manager, service.url, "FM-1")
            tile(boss, "pit1-tcp-01").wait_for(timeout=20_000)
            tile(manager, "pit2-tcp-01").wait_for(timeout=20_000)

            service.close()  # the floor stops (an upgrade, a crash) and starts again
            service = start_floor(w["tmp"], w["database"], w["broker"].port)
            for pg, person in ((boss, "PB-1"), (manager, "FM-1")):
                pg.goto(service.url + "/")  # the same cookie: cookies do not follow ports
                pg.wait_for_selector("#pit:not([hidden])", timeout=20_000)
                assert person in pg.inner_text("#who")
                assert pg.locator("#signin").is_hidden()
            tile(boss, "pit1-tcp-01").wait_for(timeout=20_000)
            tile(manager, "pit2-tcp-01").wait_for(timeout=20_000)
            assert tile(boss, "pit2-tcp-01").count() == 0  # still the pit boss's pits only
            assert boss.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

            # a sign-out holds across the restart too
            boss.click("#signout")
            boss.wait_for_selector("#signin:not([hidden])")
            service.close()
            service = start_floor(w["tmp"], w["database"], w["broker"].port)
            # the page shows the sign-in before it asks who is signed in: read it after the answer
            with boss.expect_response(lambda r: r.url.endswith("/api/v1/floor/session")
                                      and r.request.method == "GET") as asked:
                boss.goto(service.url + "/")
            assert asked.value.status == 401  # the restarted floor knows no session of this browser
            asked.value.finished()  # its body read: the page's next tasks take it
            boss.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
            boss.wait_for_selector("#signin:not([hidden])")
            assert boss.locator("#pit").is_hidden()
        finally:
            close_contexts(browser)
    finally:
        service.close()
