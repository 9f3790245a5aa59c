"""The pit grid at 500 tables (the pit view's limit): every table has its tile, the counts say
how many are online, offline and alarmed, "needs attention only" leaves exactly the offline and
alarmed ones, and the page stays readable (no horizontal scroll, tiles side by side that do not
overlap, text no smaller than 12 px) on a floor monitor and on a phone."""

from __future__ import annotations

import datetime as dt

import pytest

from table.floor.ingest import Floor
from table.floor.reports import report_routes
from table.floor.store import open_store
from table.floor.web import FloorServer, floor_app
from table.interfaces.auth import PeopleFile
from table.interfaces.mqtt import sign_message, topics
from table.keys import generate

from console_helpers import CHEAP, close_contexts, chromium_path, screenshot_dir
from floor_helpers import call
from test_floor_roles import PINS

CHROMIUM = chromium_path()
pytestmark = pytest.mark.timeout(300)
N = 500
PITS = [f"pit{p}" for p in range(1, 11)]  # 50 tables a pit


def table_id(i: int) -> str:
    return f"{PITS[i % 10]}-tcp-{i // 10:03d}"


def status(key, i: int, online: bool, alarm: bool) -> tuple[str, bytes]:
    t, pit = table_id(i), PITS[i % 10]
    topic = topics(pit, t)[1]
    body = {"schema": "threecard.status/1", "table_id": t, "floor": pit, "online": online,
            "ts": dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds"), "head_seq": i,
            "session": f"{i:016x}"}
    if online:
        body["table"] = {"rounds_played": i, "round": {"number": i + 1, "state": "open for bets"},
                         "waiting_for": "the dealer to close bets",
                         "alarms": [{"kind": "held", "text": f"round {i} held: a card out of order"}] if alarm else [],
                         "links": {"shuffler": {"up": True, "state": "up"}, "shoe": {"up": True, "state": "up"}}}
    else:
        body["will"] = True
    return topic, sign_message(key, topic, body).encode()


@pytest.fixture
def floor_of_500(tmp_path):
    people = PeopleFile(tmp_path / "people.toml")
    for person, (role, pin, pits) in PINS.items():
        people.add(person, role, pin, hasher=CHEAP, pits=pits)
    keys = {table_id(i): generate() for i in range(N)}
    store = open_store(str(tmp_path / "floor.sqlite3"))
    floor = Floor(store, {t: k.public for t, k in keys.items()}).start()
    server = FloorServer(floor_app(floor, generate(), extra_routes=report_routes(
        floor, tmp_path / "people.toml", key=generate(), zone="UTC")), "127.0.0.1", 0)
    offline = {i for i in range(N) if i % 37 == 5}      # 14 tables down
    alarmed = {i for i in range(N) if i % 83 == 7} - offline  # 6 with an alarm
    for i in range(N):
        assert floor.receive(*status(keys[table_id(i)], i, i not in offline, i in alarmed))
    assert floor.wait_idle(60)
    try:
        yield server, {table_id(i) for i in offline}, {table_id(i) for i in alarmed}
    finally:
        server.close()
        floor.close()
        store.close()


def test_the_grid_of_500_tables_counts_them_and_a_pit_boss_gets_their_pit(floor_of_500):
    server, offline, alarmed = floor_of_500
    fm = call(server, "/api/v1/floor/session", {"person": "FM-1", "pin": PINS["FM-1"][1]})[1]["token"]
    status, g = call(server, "/api/v1/floor/pit", token=fm)
    assert status == 200 and len(g["tables"]) == N and g["pits"] == sorted(PITS)
    assert g["counts"] == {"tables": N, "online": N - len(offline), "offline": len(offline), "no_news": 0,
                           "alarmed": len(alarmed)}
    assert {t["table_id"] for t in g["tables"] if t["state"] == "offline"} == offline
    pb = call(server, "/api/v1/floor/session", {"person": "PB-1", "pin": PINS["PB-1"][1]})[1]["token"]
    status, mine = call(server, "/api/v1/floor/pit", token=pb)
    assert status == 200 and {t["pit"] for t in mine["tables"]} == {"pit1"} and len(mine["tables"]) == 50
    assert call(server, "/api/v1/floor/pit?pit=pit2", token=pb)[0] == 403


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_500_tables_stay_readable_on_a_floor_monitor_and_a_phone(chromium, floor_of_500):
    server, offline, alarmed = floor_of_500
    browser = chromium
    try:
        for width, height, name in ((1920, 1080, "monitor"), (390, 844, "phone")):
            page = browser.new_context(viewport={"width": width, "height": height}).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(server.url + "/")
            page.fill("#person", "FM-1")
            page.fill("#pin", PINS["FM-1"][1])
            page.click("#signin-form button")
            page.wait_for_function(f"() => document.querySelectorAll('#grid [data-grid-table]').length === {N}")
            assert f"{N} tables: {N - len(offline)} online, {len(offline)} offline" in page.inner_text("#pit-counts")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            layout = page.evaluate("""() => {
                const tiles = [...document.querySelectorAll('#grid a.tile')].slice(0, 40).map((a) => a.getBoundingClientRect());
                const rows = new Set(tiles.map((r) => Math.round(r.top)));
                const font = Math.min(...[...document.querySelectorAll('#grid a.tile span')].slice(0, 200)
                    .map((s) => parseFloat(getComputedStyle(s).fontSize)));
                let overlap = false;
                for (let i = 1; i < tiles.length; i++) {
                    const a = tiles[i - 1], b = tiles[i];
                    if (Math.round(a.top) === Math.round(b.top) && b.left < a.right - 0.5) overlap = true;
                }
                return {perRow: tiles.length / rows.size, font, overlap, width: tiles[0].width};
            }""")
            assert not layout["overlap"] and layout["font"] >= 12 and layout["width"] >= 150, layout
            assert layout["perRow"] >= (10 if name == "monitor" else 2), layout
            page.check("#pit-attention")
            shown = page.evaluate("[...document.querySelectorAll('#grid [data-grid-table]')]"
                                  ".filter((li) => !li.hidden).map((li) => li.dataset.gridTable)")
            assert set(shown) == offline | alarmed
            page.screenshot(path=str(screenshot_dir() / f"floor-grid-500-{name}.png"))
            page.select_option("#pit-filter", "pit3")
            page.uncheck("#pit-attention")
            shown = page.evaluate("[...document.querySelectorAll('#grid [data-grid-table]')]"
                                  ".filter((li) => !li.hidden).length")
            assert shown == 50
            assert errors == []
    finally:
        close_contexts(browser)
