"""A supervisor's press before the page's script listens (a fast person, a loaded tablet).

Fault: the supervisor's screen's four forms (void, release, replacement deck, unreadable card)
and the shift page's report form had enabled buttons in the HTML, and their listeners were
attached only after the page asked who is signed in. A deck id typed and entered then, or a
"Show the report" pressed, made the browser send the form itself: ``GET /supervisor.html?``, a
reload; what was typed was lost and nothing reached the table. Now every such button is
disabled in the HTML and enabled by the script once it listens (as the role and the table's
state allow). The pages' scripts are held with ``page.route`` (as in
``test_signin_before_script.py``) so the press lands before them every time.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from console_helpers import chromium_path
from test_signin_before_script import HeldScript
import test_web
from test_web import PINS

web = test_web.web  # the fixture: a table's web front door whose console waits for nothing

pytestmark = [pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed "
                                                                "(.ci/run installs it)"),
              pytest.mark.timeout(120)]


def signed_in_page(chromium, web, person: str):
    """A page of a new context with ``person`` signed in through the sign-in page."""
    context = chromium.new_context()
    page = context.new_page()
    page.goto(web.url + "/")
    page.wait_for_selector("#sign-in-button:not([disabled])")
    page.fill("#person", person)
    page.fill("#pin", PINS[person])
    page.click("#sign-in-button")
    page.wait_for_url(lambda url: urlparse(url).path != "/")
    return context, page


def open_with_script_held(page, url: str, script: str, first_field: str) -> tuple[HeldScript, list[str]]:
    """Opens ``url`` with ``script`` held until the returned hold is released, once
    ``first_field`` is parsed; returns the hold and the page's navigations from then on."""
    navigations: list[str] = []
    page.on("request", lambda r: navigations.append(r.url) if r.is_navigation_request() else None)
    held = HeldScript(page, script)
    page.goto(url, wait_until="commit")
    page.wait_for_selector(first_field, state="attached")  # parsed; the module script not yet run
    return held, navigations


def test_a_replacement_deck_entered_before_the_supervisors_script_listens_is_kept_and_sent_after(chromium, web):
    context, page = signed_in_page(chromium, web, "S-1")
    try:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        held, navigations = open_with_script_held(page, web.url + "/supervisor.html", "**/js/supervisor.js", "#deck-id")
        page.fill("#deck-id", "B2")
        page.press("#deck-id", "Enter")  # the form's implicit submission
        page.click("#deck-button", force=True)  # and its button, as a hurried person presses it
        held.release()
        page.wait_for_selector("#deck-button:not([disabled])")  # the script listens
        assert navigations == [web.url + "/supervisor.html"], "the browser sent the form itself (a reload)"
        assert urlparse(page.url).query == "", page.url
        assert page.input_value("#deck-id") == "B2"  # what was typed is still there
        page.click("#deck-button")
        # the table's answer beside the button (the test's table waits for nothing)
        page.wait_for_selector("#deck-button-error:not([hidden])")
        assert "register_deck is not expected now" in page.inner_text("#deck-button-error")
        assert [c.args.get("deck_id") for c in web.console.seen if c.action == "register_deck"] == ["B2"]
        assert navigations == [web.url + "/supervisor.html"]
        assert errors == []
    finally:
        context.close()


def test_show_the_report_pressed_before_the_shift_pages_script_listens_reloads_nothing(chromium, web):
    context, page = signed_in_page(chromium, web, "S-1")
    try:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        held, navigations = open_with_script_held(page, web.url + "/shift.html", "**/js/shift.js", "#report-show")
        page.select_option("#report-period", "day")
        page.click("#report-show", force=True)
        held.release()
        page.wait_for_selector("#report-show:not([disabled])")  # the script listens
        assert navigations == [web.url + "/shift.html"], "the browser sent the form itself (a reload)"
        assert urlparse(page.url).query == "", page.url
        assert page.input_value("#report-period") == "day"  # the choice is still there
        assert page.is_enabled("#report-print") and page.is_enabled("#report-download")
        assert errors == []
    finally:
        context.close()


def test_a_double_tap_on_a_supervisors_button_sends_its_form_once_and_the_button_comes_back(chromium, web):
    """A double tap on "Register the replacement" (a touchscreen, a hurried supervisor). Fault:
    each tap sent the form, so the table got the deck twice and the second answer (refused: the
    first took the deck) was said beside the button after the first one's success. Now the button
    is disabled while its form's answer is awaited, and enabled again once it comes. The table's
    first answer is held here until both taps are in, so the second lands while it is awaited."""
    import json

    held: list = []  # the first register_deck's answer, held

    def route(ws):
        server = ws.connect_to_server()
        asked: set = set()

        def from_page(message):
            try:
                req = json.loads(message)
            except (TypeError, ValueError):
                req = {}
            if isinstance(req, dict) and req.get("action") == "register_deck":
                asked.add(req.get("id"))
            server.send(message)

        def from_server(message):
            try:
                reply = json.loads(message)
            except (TypeError, ValueError):
                reply = {}
            if isinstance(reply, dict) and reply.get("id") in asked and not held:
                held.append(lambda: ws.send(message))
                return
            ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    context, page = signed_in_page(chromium, web, "S-1")
    try:
        context.route_web_socket("**/api/v1/ws", route)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        sockets: list = []
        page.on("websocket", lambda ws: sockets.append(ws))
        page.goto(web.url + "/supervisor.html")
        page.wait_for_selector('#connection[data-state="live"]')
        page.wait_for_selector("#deck-button:not([disabled])")
        sent: list[str] = []  # the page's requests from now on, in order
        sockets[-1].on("framesent", lambda payload: sent.append(json.loads(payload).get("action")))
        page.fill("#deck-id", "B2")
        page.dblclick("#deck-button")
        # the page's next status ask (it asks every second) goes after whatever both taps sent
        with sockets[-1].expect_event("framesent", lambda payload: json.loads(payload).get("action") == "status"):
            pass
        assert sent.count("register_deck") == 1, f"the double tap sent the form twice: {sent}"
        assert not page.is_enabled("#deck-button"), "pressable again while its answer is awaited"
        assert held, "the table's answer was held"
        held.pop()()
        page.wait_for_selector("#deck-button-error:not([hidden])")
        assert "register_deck is not expected now" in page.inner_text("#deck-button-error")
        page.wait_for_selector("#deck-button:not([disabled])")  # usable again once answered
        assert page.input_value("#deck-id") == "B2"  # refused: what was typed stays
        assert [c.args.get("deck_id") for c in web.console.seen if c.action == "register_deck"] == ["B2"]
        assert errors == []
    finally:
        context.close()


def test_a_sign_out_the_table_did_not_answer_is_said_beside_the_button(chromium, web):
    """The supervisor presses Sign out while the table does not answer (its network down). Fault:
    nothing happened and nothing was said (an unhandled rejection): the supervisor, seeing the
    screen still there, could only guess; a refusal would have sent the page to the sign-in
    form with the session alive. Now the screen says it did not sign out, beside the button, and
    a sign-out the table answers goes to the sign-in page."""
    context, page = signed_in_page(chromium, web, "S-1")
    try:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.wait_for_selector("#sign-out")
        answers = ["none", "503"]  # the table's answers to the next two sign-outs

        def sign_out(route):
            if route.request.method != "DELETE" or not answers:
                route.continue_()
            elif answers.pop(0) == "none":
                route.abort("connectionrefused")
            else:
                route.fulfill(status=503, content_type="application/json",
                              body='{"ok": false, "error": "the table cannot sign you out now"}')

        page.route("**/api/v1/session", sign_out)
        page.click("#sign-out")
        page.wait_for_selector("#sign-out-error:has-text('does not answer')")
        assert urlparse(page.url).path == "/supervisor.html"
        page.click("#sign-out")
        page.wait_for_selector("#sign-out-error:has-text('cannot sign you out now')")
        assert urlparse(page.url).path == "/supervisor.html"
        page.click("#sign-out")  # the table answers again
        page.wait_for_url(lambda url: urlparse(url).path == "/")
        page.goto(web.url + "/supervisor.html")
        page.wait_for_url(lambda url: urlparse(url).path == "/")  # signed out: sent to sign in
        assert errors == [], errors
    finally:
        context.close()
