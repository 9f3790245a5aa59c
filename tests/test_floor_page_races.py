"""The floor's pages when a person is quicker than the floor's answer (a double tap), or an answer
slower than the next one (a loaded floor).

Faults: "Older rounds" asked for the page before the oldest round shown and appended it when the
answer came; a second press before that answer asked for the same page again, and the table's
rounds list showed each older round twice. Now the button is disabled while its page is asked,
and a press then does nothing. The pit's wall page asks the floor every 2 s and drew every answer as
it came: an older answer arriving after a newer one put the older state back (an alarm gone from
the wall). Now an answer older than one drawn is dropped. The floor's answers are held with
``page.route`` so the second press, or the newer answer, comes first every time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os

import pytest
from playwright.sync_api import expect

from console_helpers import chromium_path
from floor_helpers import SignedTable, floor_for_pages
from test_floor_roles import Clock, fluctuating
from test_floor_roles_page import floor_server, sign_in
from test_floor_roles import PINS as FLOOR_PINS
from test_web import PINS

PHONE, DESK = {"width": 390, "height": 844}, {"width": 1280, "height": 800}

pytestmark = [pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed "
                                                                "(.ci/run installs it)"),
              pytest.mark.timeout(120)]


@contextlib.contextmanager
def pit1_floor_page(chromium, tmp_path, rounds: bool, viewport=PHONE):
    """A floor with table pit1-tcp-01 online (its status, and with ``rounds`` 52 rounds of it,
    handed to the floor) and a page of a new browser on it. Yields ``(page, errors, server)``:
    ``errors`` the page's script errors; closed after."""
    a = SignedTable(tmp_path / "a", "pit1-tcp-01", "pit1")
    store, floor, server = floor_server(tmp_path, (a,), Clock(dt.datetime(2026, 3, 5, 22, 0, tzinfo=dt.timezone.utc)))
    context = None
    try:
        for topic, payload in [a.status(), *(fluctuating(a) if rounds else [])]:  # 52 rounds: a page of 50 and 2 older
            assert floor.receive(topic, payload.encode())
        assert floor.wait_idle(30)
        context = chromium.new_context(viewport=viewport)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page, errors, server
    finally:
        if context is not None:
            context.close()
        server.close()
        floor.close()
        store.close()
        a.close()


def test_older_rounds_tapped_twice_shows_each_older_round_once(chromium, tmp_path):
    with pit1_floor_page(chromium, tmp_path, rounds=True) as (page, errors, server):
        sign_in(page, server.url, "PB-1")
        page.evaluate("() => { location.hash = '#table/pit1-tcp-01'; }")
        page.wait_for_selector("#rounds-more:not([hidden])")  # the first page of rounds is shown
        assert page.locator("#round-list > li").count() == 50
        asks, answered = [], []  # the asks for older rounds (the first held until the second tap is in); answers

        def hold_first_older(route):
            if "before=" in route.request.url:
                asks.append(route)
                if len(asks) == 1:
                    return
            route.continue_()

        page.route("**/api/v1/floor/table/**", hold_first_older)
        page.on("requestfinished", lambda r: answered.append(r.url) if "before=" in r.url else None)
        with page.expect_request(lambda r: "before=" in r.url):
            page.dblclick("#rounds-more")  # a double tap
        page.evaluate("() => new Promise((done) => setTimeout(done, 0))")  # both taps' handlers have run
        assert asks, "the page asked for the older rounds"
        asks[0].continue_()
        page.wait_for_selector("#rounds-more", state="hidden")  # no more: the 2 older rounds are drawn
        # the page's next refresh of the table (every 2 s), asked after every tap's answer was sent
        with page.expect_response(lambda r: r.url.endswith("/api/v1/floor/table/pit1-tcp-01")) as refresh:
            pass
        refresh.value.finished()
        page.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
        assert len(answered) == len(asks), (answered, asks)
        rounds = page.eval_on_selector_all("#round-list > li", "items => items.map((li) => li.dataset.round)")
        assert len(rounds) == len(set(rounds)) == 52, f"{len(rounds)} rounds shown, {len(set(rounds))} of them different"
        assert errors == []


@pytest.fixture
def wall_floor(tmp_path):
    """A floor serving pit1's wall page, with one table of pit1 (its statuses handed to the floor
    by the test; the floor's broker is away: none is needed here)."""
    from table.roles import Role

    os.chmod(tmp_path, 0o700)
    with floor_for_pages(tmp_path, "pit1-tcp-01", "PB-3", Role.PIT_BOSS, PINS["S-1"], wall_pits=("pit1",)) as floor:
        yield floor


def test_the_pit_wall_keeps_the_newer_state_when_an_older_answer_comes_last(chromium, wall_floor):
    service, table = wall_floor
    assert service.floor.receive(*_encoded(table.status()))
    assert service.floor.wait_idle(30)
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        held = []  # the wall's first ask, held; answered later with what the floor said then

        def hold_first_ask(route):
            if not held:
                held.append(route)
            else:
                route.continue_()

        page.route("**/api/v1/floor/wall?*", hold_first_ask)
        with page.expect_request("**/api/v1/floor/wall?*"):
            page.goto(service.url + "/pit?pit=pit1")
        then = page.request.get(service.url + "/api/v1/floor/wall?pit=pit1")  # the table without an alarm
        assert then.ok and "round held" not in then.text()
        # the table raises an alarm; the wall's next ask (2 s on) shows it
        assert service.floor.receive(*_encoded(table.status(alarms=[{"kind": "held", "text": "round held"}])))
        assert service.floor.wait_idle(30)
        tile = page.locator('[data-grid-table="pit1-tcp-01"]')
        expect(tile).to_contain_text("alarms 1", timeout=30_000)
        assert held, "the wall asked the floor first"
        with page.expect_response("**/api/v1/floor/wall?*") as older:
            held.pop().fulfill(response=then)
        older.value.finished()  # its body read: the page's next tasks take it
        page.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
        assert "alarms 1" in tile.inner_text(), "the older answer put the table back without its alarm"
        assert errors == []
    finally:
        context.close()


def _encoded(message: tuple[str, str]) -> tuple[str, bytes]:
    topic, payload = message
    return topic, payload.encode()


def test_the_next_person_signed_in_on_the_page_sees_nothing_of_the_previous_ones(chromium, tmp_path):
    """The floor manager looks at pit2's table and the floor's report, signs out; the pit boss of
    pit1 signs in on the same page (the address still #table/pit2-tcp-01), the floor slow to answer
    their report. Fault: sign-out only hid the sections, so the pit boss was shown pit2's table's
    day (the floor answers 404 for that table: its card said so, its figures stayed) and, until their
    own report came, the floor manager's totals and pit2's rows."""
    a, b = SignedTable(tmp_path / "a", "pit1-tcp-01", "pit1"), SignedTable(tmp_path / "b", "pit2-tcp-01", "pit2")
    store, floor, server = floor_server(tmp_path, (a, b), Clock(dt.datetime(2026, 3, 5, 22, 0, tzinfo=dt.timezone.utc)))
    context = None
    try:
        for topic, payload in [a.status(), b.status(), *fluctuating(a), *fluctuating(b)]:
            assert floor.receive(topic, payload.encode())
        assert floor.wait_idle(30)
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        sign_in(page, server.url, "FM-1")
        expect(page.locator('#rows [data-table="pit2-tcp-01"]')).to_be_visible(timeout=30_000)
        page.evaluate("() => { location.hash = '#table/pit2-tcp-01'; }")
        expect(page.locator("#table-day")).to_contain_text("Gaming day", timeout=30_000)
        assert page.locator("#round-list > li").count() > 0
        page.click("#signout")
        page.wait_for_selector("#signin:not([hidden])")

        held = []  # the pit boss's report, figures and alarms: held until the page is looked at

        def hold(route):
            held.append(route)

        for asked in ("**/api/v1/floor/report?*", "**/api/v1/floor/figures?*", "**/api/v1/floor/alarms"):
            page.route(asked, hold)
        page.fill("#person", "PB-1")
        page.fill("#pin", FLOOR_PINS["PB-1"][1])
        with page.expect_response("**/api/v1/floor/table/pit2-tcp-01") as refused:
            page.click("#signin-form button")
        assert refused.value.status == 404  # not the pit boss's table: the floor says no such table
        page.wait_for_selector("#reports:not([hidden]), #table-view:not([hidden])")
        page.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
        assert "PB-1" in page.inner_text("#who")
        assert page.locator("#table-day").inner_text().strip() == "", "pit2's day shown to pit1's boss"
        assert page.locator("#round-list > li").count() == 0
        page.evaluate("() => { location.hash = '#pit'; }")
        page.wait_for_selector("#reports:not([hidden])")
        for box in ("#totals", "#rows", "#fluctuations", "#bands", "#alarms", "#plot-caption"):
            assert page.locator(box).inner_text().strip() == "", f"{box} still shows the floor manager's"
        assert held, "the pit boss's report was asked"
        for route in held:
            route.continue_()
        expect(page.locator('#rows [data-table="pit1-tcp-01"]')).to_be_visible(timeout=30_000)
        assert page.locator('#rows [data-table="pit2-tcp-01"]').count() == 0
        assert errors == []
    finally:
        if context is not None:
            context.close()
        server.close()
        floor.close()
        store.close()
        a.close()
        b.close()


def test_the_floor_page_says_when_the_floor_does_not_answer_instead_of_showing_the_last_state_as_current(
        chromium, tmp_path):
    """The floor's service stops answering (restarted, its host's network down) with the page open.
    Fault: the page's asks every 2 s failed as unhandled rejections and the table list and the
    pit grid went on showing their last state ("online") as current, saying nothing; a sign-in
    said nothing either. Now each says the floor does not answer and that what is shown is as
    last read, and goes on when the floor answers again."""
    with pit1_floor_page(chromium, tmp_path, rounds=False) as (page, errors, server):
        away = lambda route: route.abort("connectionrefused")  # noqa: E731 - the floor does not answer

        page.goto(server.url)
        expect(page.locator('#tables [data-table="pit1-tcp-01"]')).to_be_visible(timeout=30_000)
        page.route("**/api/v1/floor/tables", away)
        expect(page.locator("#tables-error")).to_contain_text("does not answer", timeout=30_000)
        page.unroute("**/api/v1/floor/tables", away)
        expect(page.locator("#tables-error")).to_be_hidden(timeout=30_000)

        page.fill("#person", "PB-1")
        page.fill("#pin", FLOOR_PINS["PB-1"][1])
        page.click("#signin-form button")
        page.wait_for_selector("#reports:not([hidden])")
        expect(page.locator('#grid [data-grid-table="pit1-tcp-01"]')).to_be_visible(timeout=30_000)
        page.route("**/api/v1/floor/pit", away)
        expect(page.locator("#pit-counts")).to_contain_text("does not answer", timeout=30_000)
        assert "as last read" in page.inner_text("#pit-counts")
        page.unroute("**/api/v1/floor/pit", away)
        expect(page.locator("#pit-counts")).to_contain_text("1 tables: 1 online", timeout=30_000)
        assert errors == [], errors


def test_a_sign_out_the_floor_did_not_do_is_said_and_the_page_stays_signed_in(chromium, tmp_path):
    """The pit boss presses Sign out while the floor's database cannot be written (the floor answers
    503, "you are not signed out yet"), or while the floor does not answer. Fault: the page showed
    the sign-in form whatever the answer, so the session lived on behind a page that looked signed
    out: the next person to reload it was the pit boss. Now the page stays signed in and says
    why beside the button; a sign-out the floor does is done."""
    with pit1_floor_page(chromium, tmp_path, rounds=False) as (page, errors, server):
        sign_in(page, server.url, "PB-1")
        answers = ["503", "none"]  # the floor's answers to the next two sign-outs

        def sign_out(route):
            if route.request.method != "DELETE" or not answers:
                route.continue_()
            elif answers.pop(0) == "503":
                route.fulfill(status=503, content_type="application/json",
                              body='{"ok": false, "error": "the floor database cannot be written: you are not signed out yet"}')
            else:
                route.abort("connectionrefused")

        page.route("**/api/v1/floor/session", sign_out)
        page.click("#signout")
        expect(page.locator("#signout-error")).to_contain_text("not signed out yet", timeout=30_000)
        assert page.is_visible("#reports") and "PB-1" in page.inner_text("#who")
        page.click("#signout")
        expect(page.locator("#signout-error")).to_contain_text("does not answer", timeout=30_000)
        assert page.is_visible("#reports") and "PB-1" in page.inner_text("#who")
        page.click("#signout")  # the floor answers again
        page.wait_for_selector("#signin:not([hidden])")
        assert page.inner_text("#who") == "" and page.inner_text("#signout-error") == ""
        page.reload()
        page.wait_for_selector("#signin-form button:not([disabled])")
        assert page.is_hidden("#reports"), "the session lived on after the sign-out"
        assert errors == [], errors


def test_a_report_the_floor_does_not_give_is_said_beside_its_form(chromium, tmp_path):
    """A pit boss asks for another gaming day's report while the floor does not answer. Fault: the
    press did nothing and said nothing (the previous day's figures stayed, as if they were the
    day asked). Now the page says the report was not read and that what is shown is as last
    read; the next answer clears it."""
    with pit1_floor_page(chromium, tmp_path, rounds=True, viewport=DESK) as (page, errors, server):
        sign_in(page, server.url, "PB-1")
        expect(page.locator('#rows [data-table="pit1-tcp-01"]')).to_be_visible(timeout=30_000)
        away = lambda route: route.abort("connectionrefused")  # noqa: E731 - the floor does not answer
        page.route("**/api/v1/floor/report?*", away)
        page.fill("#day", "2026-02-10")
        page.click("#day-form button")
        expect(page.locator("#report-error")).to_contain_text("does not answer", timeout=30_000)
        assert "as last read" in page.inner_text("#report-error")
        page.unroute("**/api/v1/floor/report?*", away)
        with page.expect_response("**/api/v1/floor/report?*"):
            page.click("#day-form button")
        expect(page.locator("#report-error")).to_be_empty(timeout=30_000)
        expect(page.locator("#totals")).to_contain_text("2026-02-10", timeout=30_000)
        assert errors == [], errors
