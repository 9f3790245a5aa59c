"""The floor page in real Chromium (issue 28): the README's floor example run as written (two
simulated tables publishing to a real mosquitto, `tablectl floor serve` on SQLite), both tables
on the page, the report behind sign-in, no horizontal scroll on a 390 px phone; a fluctuation's
investigation note entered on the page, stored with who wrote it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from console_helpers import ChildOutput, close_contexts, chromium_path, screenshot_dir
from floor_helpers import floor_for_pages, needs_mosquitto
from mqtt_broker import Broker

CHROMIUM = chromium_path()
README = Path(__file__).resolve().parent.parent / "README.md"
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
              needs_mosquitto, pytest.mark.timeout(240), pytest.mark.long]
PIN = "739201"


def readme_floor_example() -> str:
    text = README.read_text()
    section = text[text.index("## The floor:"):]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def readme_floor(tmp_path):
    """The README's floor example, its broker's port moved to the test broker's, the floor's
    web port to 0 (the floor picks a free one and prints its address, which the example
    echoes: a port found free beforehand could meanwhile be another process's), and the PIN
    typed on stdin."""
    broker = Broker(tmp_path / "broker").start()
    script = (readme_floor_example().replace("1883", str(broker.port)).replace("127.0.0.1:8091", "127.0.0.1:0")
              .replace("--role floor_manager FM-1", f"--role floor_manager --pin-stdin FM-1 <<< {PIN}"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", "-euc", script + "\nwait\n"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "example.log", "wb"))
    said = ChildOutput(proc.stdout, tmp_path / "example.out", name="readme-floor-out")
    try:
        url = said.wait(lambda o: next((line.strip() for line in o.text().splitlines()
                                        if re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*", line.strip())), None),
                        60, f"the floor's address (its log: {tmp_path / 'example.log'})")
        assert proc.poll() is None, (tmp_path / "example.log").read_text()[-3000:]
        yield url, tmp_path / "floor"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the example's own session: the floor and both tables
        except ProcessLookupError:
            pass
        proc.wait(30)
        said.close()
        broker.stop()


def no_horizontal_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_readme_floor_example_shows_both_simulated_tables_and_their_report(chromium, readme_floor):
    url, folder = readme_floor
    browser = chromium
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        for t in ("pit1-tcp-01", "pit1-tcp-02"):  # both tables, each with a notarised checkpoint
            expect(page.locator(f'#tables [data-table="{t}"]')).to_contain_text(re.compile(r"checkpoint \d+"),
                                                                              timeout=90_000)
        for t in ("pit1-tcp-01", "pit1-tcp-02"):  # and offline: their 20 rounds dealt (the report is as of sign-in)
            expect(page.locator(f'#tables [data-table="{t}"]')).to_contain_text("offline", timeout=120_000)
        assert no_horizontal_scroll(page)
        page.fill("#person", "FM-1")
        page.fill("#pin", "000000")
        page.click("#signin-form button")
        page.wait_for_function("() => document.querySelector('#signin-error').textContent.length > 0")
        assert page.is_hidden("#reports")
        page.fill("#pin", PIN)
        page.click("#signin-form button")
        page.wait_for_selector("#reports:not([hidden])")
        assert "FM-1 (floor manager)" in page.inner_text("#who")
        for t in ("pit1-tcp-01", "pit1-tcp-02"):  # each table's 20 rounds of the day, from its signed results:
            # every one, the first too (the tables start once the floor says it follows the broker)
            expect(page.locator(f'#rows [data-table="{t}"]')).to_contain_text(re.compile(r"rounds\s*20\b"),
                                                                            timeout=60_000)
        assert "Year to date" in page.inner_text("#totals")
        assert no_horizontal_scroll(page)
        page.screenshot(path=str(screenshot_dir() / "floor-readme-example-390px.png"), full_page=True)
        assert errors == []
    finally:
        close_contexts(browser)
    assert (folder / "floor.sqlite3").exists()


def test_a_fluctuation_gets_an_investigation_note_on_the_page(chromium, tmp_path):
    from table.roles import Role

    # its broker is away: the messages below are handed to it
    with floor_for_pages(tmp_path, "pit1-tcp-09", "PB-3", Role.PIT_BOSS, PIN) as (service, t):
        stream = [t.status()]  # the table says it is in pit1, PB-3's pit
        for n in range(40):
            stream += t.round(n + 1, ts=f"2026-02-{1 + n % 28:02d}T20:00:00+00:00",
                              nets={"1": -1000} if n % 2 else {"1": 1000})
        for n in range(12):
            stream += t.round(200 + n, ts="2026-03-05T20:00:00+00:00", nets={"1": 1000})
        for topic, payload in stream:
            service.floor.receive(topic, payload.encode())
        assert service.floor.wait_idle(30)
        browser = chromium
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            held = []  # the report for today, asked at sign-in, answered only after the chosen day's

            def hold_todays_report(route):
                if "day=2026-03-05" in route.request.url:
                    route.continue_()
                else:  # answered by the server now (before the note), handed to the page later
                    held.append((route, route.fetch()))

            page.route("**/api/v1/floor/report?day=*", hold_todays_report)
            page.goto(service.url)
            page.fill("#person", "PB-3")
            page.fill("#pin", PIN)
            page.click("#signin-form button")
            page.wait_for_selector("#reports:not([hidden])")
            page.fill("#day", "2026-03-05")
            page.click("#day-form button[type=submit]")
            card = page.locator('[data-fluctuation="pit1-tcp-09/2026-03-05"]')
            card.wait_for(timeout=20_000)
            card.locator("textarea").fill("seat 1 paid twice on a straight; video reviewed with surveillance")
            card.locator("button").click()
            page.wait_for_function("() => /PB-3 \\(pit_boss\\)/.test((document.querySelector("
                                   "'[data-fluctuation=\"pit1-tcp-09/2026-03-05\"]') || {}).textContent || '')")
            # a slow answer to the older ask (today's report, asked at sign-in, before the note) must not
            # replace the newer one: on a loaded machine it did, and the note vanished from the page
            assert held, "the sign-in asked for today's report first"
            with page.expect_response(lambda r: "/api/v1/floor/report?day=" in r.url
                                      and "2026-03-05" not in r.url) as stale:
                route, answer = held.pop()
                route.fulfill(response=answer)
            stale.value.finished()  # its body read: the page's next tasks take it
            page.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
            assert "PB-3 (pit_boss)" in card.inner_text(), "an older, slower answer replaced the newer one"
            assert "video reviewed" in page.locator('[data-fluctuation="pit1-tcp-09/2026-03-05"]').inner_text()
            assert no_horizontal_scroll(page)
            page.screenshot(path=str(screenshot_dir() / "floor-fluctuation-note-390px.png"), full_page=True)
            assert errors == []
        finally:
            close_contexts(browser)
        rows = service.store.query("SELECT author, role, table_id, gaming_day FROM notes")
        assert rows == [("PB-3", "pit_boss", "pit1-tcp-09", "2026-03-05")]
