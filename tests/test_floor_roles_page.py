"""The floor page for two people at once, in real Chromium, one browser context each (issue 28):
the pit boss of pit1 sees pit1's table and its fluctuation only, writes an investigation note on
it and exports a CSV of pit1 alone; the floor manager sees both pits, the pit boss's note, and
writes one on pit2's fluctuation, which the pit boss never sees. And the page's day is the
floor's gaming day even when the browser's calendar says the next day (00:30 before a 06:00 start)."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest

from table.floor.ingest import Floor, GamingDay
from table.floor.reports import report_routes
from table.floor.store import open_store
from table.floor.web import FloorServer, floor_app
from table.interfaces.auth import PeopleFile
from table.interfaces.brokers import load_table_keys
from table.keys import generate

from console_helpers import CHEAP, close_contexts, chromium_path, screenshot_dir
from floor_helpers import SignedTable
from test_floor_roles import FLUCTUATION_DAY, PINS, Clock, fluctuating

#: the floor key (signs the notes)
FLOOR_KEY = generate()

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
              pytest.mark.timeout(240)]


def floor_server(tmp_path, tables, clock, day=GamingDay()):
    people = PeopleFile(tmp_path / "people.toml")
    for person, (role, pin, pits) in PINS.items():
        people.add(person, role, pin, hasher=CHEAP, pits=pits)
    for t in tables:
        t.publish_key(tmp_path / "keys")
    store = open_store(str(tmp_path / "floor.sqlite3"))
    floor = Floor(store, load_table_keys(tmp_path / "keys"), day=day).start()
    server = FloorServer(floor_app(floor, FLOOR_KEY, extra_routes=report_routes(floor, tmp_path / "people.toml", key=FLOOR_KEY,
                                                                                clock=clock)), "127.0.0.1", 0)
    return store, floor, server


def sign_in(page, url, person):
    page.goto(url)
    page.fill("#person", person)
    page.fill("#pin", PINS[person][1])
    page.click("#signin-form button")
    page.wait_for_selector("#reports:not([hidden])")


def card(page, table_id):
    return page.locator(f'[data-fluctuation="{table_id}/{FLUCTUATION_DAY}"]')


def test_a_pit_boss_and_the_floor_manager_each_do_their_part_on_the_floor_page(chromium, tmp_path):
    a, b = SignedTable(tmp_path / "a", "pit1-tcp-01", "pit1"), SignedTable(tmp_path / "b", "pit2-tcp-01", "pit2")
    clock = Clock(dt.datetime(2026, 3, 5, 22, 0, tzinfo=dt.timezone.utc))  # the fluctuation's gaming day
    store, floor, server = floor_server(tmp_path, (a, b), clock)
    try:
        for topic, payload in [a.status(), b.status(), *fluctuating(a), *fluctuating(b)]:
            assert floor.receive(topic, payload.encode())
        assert floor.wait_idle(30)
        browser = chromium
        try:
            boss_ctx = browser.new_context(viewport={"width": 390, "height": 844}, accept_downloads=True)
            manager_ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            boss, manager = boss_ctx.new_page(), manager_ctx.new_page()
            errors = []
            for pg in (boss, manager):
                pg.on("pageerror", lambda exc: errors.append(str(exc)))

            # the pit boss of pit1: their table and its fluctuation, nothing of pit2
            sign_in(boss, server.url, "PB-1")
            assert "PB-1 (pit boss)" in boss.inner_text("#who")
            assert "pit1" in boss.inner_text("#scope") and "pit2" not in boss.inner_text("#scope")
            assert boss.input_value("#day") == FLUCTUATION_DAY  # the floor's day, given by the server
            card(boss, "pit1-tcp-01").wait_for(timeout=20_000)
            assert boss.locator('#rows [data-table="pit1-tcp-01"]').count() == 1
            assert boss.locator('#rows [data-table="pit2-tcp-01"]').count() == 0  # no money of pit2
            assert card(boss, "pit2-tcp-01").count() == 0
            card(boss, "pit1-tcp-01").locator("textarea").fill("seat 1 paid twice on a straight; video reviewed")
            card(boss, "pit1-tcp-01").locator("button").click()
            boss.wait_for_function("() => /PB-1 \\(pit_boss\\)/.test((document.querySelector("
                                   "'[data-fluctuation=\"pit1-tcp-01/2026-03-05\"]') || {}).textContent || '')")
            with boss.expect_download() as download:
                boss.click("#export-csv")
            exported = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
            assert exported and {r["table_id"] for r in exported} == {"pit1-tcp-01"}
            assert download.value.suggested_filename == f"pits-pit1-report-{FLUCTUATION_DAY}.csv"

            # the floor manager: both pits, the pit boss's note, and a note on pit2's fluctuation
            sign_in(manager, server.url, "FM-1")
            assert "FM-1 (floor manager)" in manager.inner_text("#who")
            assert "whole floor" in manager.inner_text("#scope")
            for t in ("pit1-tcp-01", "pit2-tcp-01"):
                manager.locator(f'#rows [data-table="{t}"]').wait_for(timeout=20_000)
                card(manager, t).wait_for()
            assert "video reviewed" in card(manager, "pit1-tcp-01").inner_text()
            assert "PB-1 (pit_boss)" in card(manager, "pit1-tcp-01").inner_text()
            card(manager, "pit2-tcp-01").locator("textarea").fill("surveillance: dealer change at 20:00, filed")
            card(manager, "pit2-tcp-01").locator("button").click()
            manager.wait_for_function("() => /FM-1 \\(floor_manager\\)/.test((document.querySelector("
                                      "'[data-fluctuation=\"pit2-tcp-01/2026-03-05\"]') || {}).textContent || '')")
            manager.screenshot(path=str(screenshot_dir() / "floor-manager-two-pits.png"), full_page=True)

            # the pit boss looks again: still pit1 alone, the manager's pit2 note nowhere
            with boss.expect_response(lambda r: "/api/v1/floor/report?day=" in r.url) as again:
                boss.click("#day-form button[type=submit]")
            again.value.finished()
            boss.locator('#rows [data-table="pit1-tcp-01"]').wait_for()
            assert "surveillance" not in boss.inner_text("#reports")
            assert card(boss, "pit2-tcp-01").count() == 0
            boss.screenshot(path=str(screenshot_dir() / "floor-pit-boss-390px.png"), full_page=True)
            assert boss.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert errors == []
        finally:
            close_contexts(browser)
        assert store.query("SELECT author, role, table_id FROM notes ORDER BY n") == [
            ("PB-1", "pit_boss", "pit1-tcp-01"), ("FM-1", "floor_manager", "pit2-tcp-01")]
    finally:
        server.close()
        floor.close()
        store.close()
        a.close()
        b.close()


def test_the_pages_day_is_the_floors_gaming_day_not_the_browsers_date(chromium, tmp_path):
    """The browser in New York at 00:30 on 11 March; the floor's gaming day starts at 06:00."""
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    at = dt.datetime(2026, 3, 11, 4, 30, tzinfo=dt.timezone.utc)  # 00:30 EDT
    store, floor, server = floor_server(tmp_path, (t,), Clock(at), GamingDay("America/New_York", 6))
    try:
        for topic, payload in [t.status(), *t.round(1, ts="2026-03-10T23:00:00+00:00"),
                               *t.round(2, ts="2026-03-11T04:20:00+00:00")]:
            assert floor.receive(topic, payload.encode())
        assert floor.wait_idle(30)
        browser = chromium
        try:
            ctx = browser.new_context(timezone_id="America/New_York")
            page = ctx.new_page()
            page.clock.set_fixed_time(at)
            assert page.evaluate("new Date().toISOString().slice(0, 10)") == "2026-03-11"  # what the browser says
            sign_in(page, server.url, "FM-1")
            assert page.input_value("#day") == "2026-03-10"
            page.wait_for_function("() => /gaming day 2026-03-10/.test(document.querySelector('#totals')"
                                   ".textContent)")
            row = page.locator('#rows [data-table="pit1-tcp-01"]')
            row.wait_for()
            day_figures = row.locator("dl").first.inner_text().split()
            assert day_figures[day_figures.index("rounds") + 1] == "2"  # both rounds are the 10th's
        finally:
            close_contexts(browser)
    finally:
        server.close()
        floor.close()
        store.close()
        t.close()
