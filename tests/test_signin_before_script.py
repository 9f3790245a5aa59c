"""A sign-in typed before the page's script listens (a fast person, a loaded tablet).

Attack and fault: both sign-in forms (the table's ``index.html``, the floor page) had no
method and an enabled button before their script ran. A PIN typed and entered then was sent by
the browser itself as ``GET /?person=..&pin=..``: the PIN in the address bar, the history and
any proxy's log, and the person not signed in. The floor page also attached its sign-in
listener only after asking the floor who was signed in, so a click during that ask did the
same (the floor-page CI failure of 2026-12-06); and that slower answer, arriving after a
sign-in, signed the person out again. Now the buttons are disabled until the script listens,
the forms say ``method="post"``, every listener is attached before the first ask, and an
answer older than a sign-in on the page is dropped.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest

from console_helpers import chromium_path, close_contexts
from floor_helpers import floor_for_pages
import test_web
from test_web import PINS

web = test_web.web  # the fixture: a table's web front door whose console waits for nothing

pytestmark = [pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed "
                                                                "(.ci/run installs it)"),
              pytest.mark.timeout(120)]


class HeldScript:
    """Holds the first fetch of one script of the page until :meth:`release`."""

    def __init__(self, page, pattern: str) -> None:
        self.routes: list = []
        page.route(pattern, self._hold)

    def _hold(self, route) -> None:
        if self.routes:  # only the first fetch is held
            route.continue_()
        else:
            self.routes.append(route)

    def release(self) -> None:
        assert self.routes, "the page asked for its script"
        self.routes.pop().continue_()


def enter_before_the_script(page, url: str, script: str, person: str, pin: str) -> list[str]:
    """Opens ``url`` with ``script`` held, types ``person`` and ``pin`` and presses Enter; then
    lets the script run. Returns the address of every request the page made."""
    requests: list[str] = []
    page.on("request", lambda r: requests.append(f"{r.method} {r.url}"))
    held = HeldScript(page, script)
    page.goto(url, wait_until="commit")
    page.wait_for_selector("#pin", state="attached")  # parsed; the deferred script not yet run
    page.fill("#person", person)
    page.fill("#pin", pin)
    page.press("#pin", "Enter")
    held.release()
    return requests


def no_pin_sent_by_the_browser(requests: list[str], pin: str, page) -> None:
    assert not [r for r in requests if pin in r], f"the PIN in an address: {requests}"
    assert not [r for r in requests if r.startswith("POST ") and urlparse(r.split(" ", 1)[1]).path == "/"], requests
    assert urlparse(page.url).query == "", page.url


def test_the_tables_sign_in_entered_before_its_script_ran_sends_no_pin_and_signs_in_after(chromium, web):
    context = chromium.new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        requests = enter_before_the_script(page, web.url + "/", "**/js/signin.js", "D-1", PINS["D-1"])
        page.wait_for_selector("#sign-in-button:not([disabled])")  # the script listens
        no_pin_sent_by_the_browser(requests, PINS["D-1"], page)
        assert page.input_value("#person") == "D-1"  # what was typed is still there: nothing reloaded
        page.fill("#pin", PINS["D-1"])
        page.click("#sign-in-button")
        page.wait_for_url(lambda url: urlparse(url).path == "/dealer.html")
        no_pin_sent_by_the_browser(requests, PINS["D-1"], page)
        assert errors == []
    finally:
        context.close()


@pytest.fixture
def floor(tmp_path):
    """A floor with one pit boss and one table's key (the table never publishes); its broker is
    away (none is needed here)."""
    from table.roles import Role

    os.chmod(tmp_path, 0o700)
    with floor_for_pages(tmp_path, "pit1-tcp-09", "PB-3", Role.PIT_BOSS, PINS["S-1"]) as (service, _table):
        yield service


def test_the_floors_sign_in_entered_before_its_script_ran_sends_no_pin_and_signs_in_after(chromium, floor):
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        requests = enter_before_the_script(page, floor.url, "**/floor-static/floor.js", "PB-3", PINS["S-1"])
        page.wait_for_selector("#signin-form button:not([disabled])")
        no_pin_sent_by_the_browser(requests, PINS["S-1"], page)
        assert page.input_value("#person") == "PB-3"
        page.fill("#pin", PINS["S-1"])
        page.click("#signin-form button")
        page.wait_for_selector("#reports:not([hidden])")
        no_pin_sent_by_the_browser(requests, PINS["S-1"], page)
        assert errors == []
    finally:
        close_contexts(chromium)


def test_a_pit_boss_who_signs_in_while_the_floor_page_still_asks_who_is_signed_in_stays_signed_in(chromium, floor):
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        held = []  # the page's first ask: who is signed in (nobody, it will say)

        def hold_first_ask(route):
            if route.request.method == "GET" and not held:  # answered by the floor now, handed over later
                held.append((route, route.fetch()))
            else:
                route.continue_()

        page.route("**/api/v1/floor/session", hold_first_ask)
        page.goto(floor.url)
        page.fill("#person", "PB-3")
        page.fill("#pin", PINS["S-1"])
        page.click("#signin-form button")  # while the ask is unanswered
        page.wait_for_selector("#reports:not([hidden])")
        assert held, "the page asked who is signed in first"
        with page.expect_response(lambda r: r.url.endswith("/api/v1/floor/session")
                                  and r.request.method == "GET") as older:
            route, answer = held.pop()
            route.fulfill(response=answer)
        assert older.value.status == 401  # asked before the sign-in: nobody
        older.value.finished()  # its body read: the page's next tasks take it
        page.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
        assert page.is_visible("#reports"), "the older answer signed the pit boss out"
        assert "PB-3" in page.inner_text("#who")
        assert errors == []
    finally:
        context.close()


def test_a_refusal_stays_on_the_tables_sign_in_when_the_older_who_is_signed_in_answer_comes_after(chromium, web):
    """D-1's screen is left signed in; someone opens the sign-in page and types a wrong PIN
    while the page still asks who is signed in. The refusal must stay: the older answer
    ("D-1 is signed in") cleared it and offered D-1's screen instead."""
    context = chromium.new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(web.url + "/")
        page.fill("#person", "D-1")
        page.fill("#pin", PINS["D-1"])
        page.click("#sign-in-button")
        page.wait_for_url(lambda url: urlparse(url).path == "/dealer.html")
        held = []  # the sign-in page's ask: who is signed in (D-1, it will say)

        def hold_first_ask(route):
            if route.request.method == "GET" and not held:
                held.append((route, route.fetch()))
            else:
                route.continue_()

        page.route("**/api/v1/session", hold_first_ask)
        page.goto(web.url + "/")
        page.fill("#person", "S-1")
        page.fill("#pin", "000000")
        page.click("#sign-in-button")
        page.wait_for_function("() => document.getElementById('sign-in-error').textContent.length > 0")
        refusal = page.inner_text("#sign-in-error")
        assert held, "the page asked who is signed in first"
        with page.expect_response(lambda r: r.url.endswith("/api/v1/session") and r.request.method == "GET") as older:
            route, answer = held.pop()
            route.fulfill(response=answer)
        assert older.value.status == 200  # asked before the refusal: D-1
        older.value.finished()  # its body read: the page's next tasks take it
        page.evaluate("() => new Promise((done) => setTimeout(() => setTimeout(done, 0), 0))")
        assert page.inner_text("#sign-in-error") == refusal, "the older answer cleared the refusal"
        assert "Signed in as D-1" not in page.inner_text("main")
        assert errors == []
    finally:
        context.close()


def test_a_double_tap_on_the_floors_sign_in_sends_one_and_the_button_comes_back(chromium, floor):
    """A pit boss double-taps Sign in on the floor page with a mistyped PIN, then the floor does
    not answer a sign-in. Faults: the PIN was cleared only once the floor answered, so each tap
    sent a sign-in (one mistyped PIN counted twice toward the lock-out; a right one made two
    sessions); and a sign-in the floor did not answer said nothing (an unhandled rejection).
    Now the button is disabled while a sign-in is asked and enabled again by any answer or by
    none, which is said. The floor's first answer is held until both taps are in."""
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        held = []  # the first sign-in, held
        sent = []  # every sign-in the page sent
        lost = {"next": False}  # the next sign-in gets no answer (the floor away)

        def sign_ins(route):
            if route.request.method != "POST":
                route.continue_()
                return
            sent.append(route.request.url)
            if not held:
                held.append(route)
            elif lost["next"]:
                lost["next"] = False
                route.abort("connectionrefused")
            else:
                route.continue_()

        page.route("**/api/v1/floor/session", sign_ins)
        page.goto(floor.url)
        page.wait_for_selector("#signin-form button:not([disabled])")
        page.fill("#person", "PB-3")
        page.fill("#pin", "000000")
        page.dblclick("#signin-form button")
        # a request the page makes after both taps were handled: any sign-in they sent is in `sent` by then
        with page.expect_request("**/floor-static/grid.js?after-the-taps"):
            page.evaluate("() => { fetch('/floor-static/grid.js?after-the-taps'); }")
        assert len(sent) == 1, f"the double tap sent {len(sent)} sign-ins"
        assert not page.is_enabled("#signin-form button"), "pressable again while the sign-in is asked"
        held[0].continue_()
        page.wait_for_selector("#signin-error:not(:empty)")
        page.wait_for_selector("#signin-form button:not([disabled])")  # usable again after the refusal
        lost["next"] = True
        page.fill("#pin", PINS["S-1"])
        page.click("#signin-form button")
        page.wait_for_selector("#signin-error:has-text('does not answer')")
        page.wait_for_selector("#signin-form button:not([disabled])")  # and after no answer
        page.fill("#pin", PINS["S-1"])
        page.click("#signin-form button")
        page.wait_for_selector("#reports:not([hidden])")
        assert len(sent) == 3
        assert errors == []
    finally:
        context.close()


def test_a_sign_in_the_table_does_not_answer_is_said_in_words_and_the_button_stays_usable(chromium, web):
    """The table's network drops as a dealer signs in. Fault: the page said the browser's
    "Failed to fetch". Now it says the table does not answer; the button is usable, and the next
    sign-in, answered, goes to the dealer's screen."""
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        lost = {"next": True}

        def drop_first_sign_in(route):
            if route.request.method == "POST" and lost["next"]:
                lost["next"] = False
                route.abort("connectionrefused")
            else:
                route.continue_()

        page.route("**/api/v1/session", drop_first_sign_in)
        page.goto(web.url + "/")
        page.wait_for_selector("#sign-in-button:not([disabled])")
        page.fill("#person", "D-1")
        page.fill("#pin", PINS["D-1"])
        page.click("#sign-in-button")
        page.wait_for_selector("#sign-in-error:not(:empty)")
        assert page.inner_text("#sign-in-error").startswith("the table does not answer"), page.inner_text("#sign-in-error")
        assert page.is_enabled("#sign-in-button")
        page.fill("#pin", PINS["D-1"])
        page.click("#sign-in-button")
        page.wait_for_url(lambda url: urlparse(url).path == "/dealer.html")
        assert errors == []
    finally:
        context.close()
