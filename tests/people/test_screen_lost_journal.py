"""The last procedure of tests/people that had no browser test (issue 25): a restart without
the journal, whose incidents a supervisor acknowledges on the web screen alone. A real table
(standalone emulators over TCP, tablectl run --web), its journal lost with the disk; S-1 signs
in in Chromium, reads the incidents the table found in the Alarms panel and acknowledges them
with the button beside them; the dealer's screen (a second browser) shows them with no such
button, and the table goes on."""

from __future__ import annotations

import pytest

from bench import DEALER_PINS, SUPERVISOR_PINS, Bench
from test_procedures import waiting
from tests.console_helpers import close_contexts, chromium_path

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(300)]
STEP_MS = 30_000


@pytest.fixture
def tcp_bench():
    b = Bench("tcp")
    try:
        yield b
    finally:
        b.close()


def test_a_supervisor_acknowledges_the_lost_journals_incidents_on_the_screen(chromium, tcp_bench):
    bench, crew = tcp_bench, tcp_bench.crew
    crew.play_rounds(1)
    crew.run_until(lambda st: waiting(st, "close_bets"), what="the next round open for bets")
    bench.restart(journal=False)  # the journal is lost with the table PC
    st = crew.run_until(lambda st: len([a for a in st["alarms"] if a["kind"] == "incident"]) >= 2,
                        what="the incidents the table found")
    found = [a["text"] for a in st["alarms"] if a["kind"] == "incident"]
    browser = chromium
    try:
        page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(bench.table.base_url + "/")
        page.fill("#person", "S-1")
        page.fill("#pin", SUPERVISOR_PINS["S-1"])
        page.click("#sign-in-button")
        try:
            page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
        except Exception:
            raise AssertionError(f"{page.url}: {page.inner_text('body')[:1500]}")
        # A table that keeps no journal has no event stream: the screen says so and follows
        # its status (before, a red "error: subscribe" and an empty Incidents panel).
        assert "status only" in page.inner_text("#connection")
        # and the Incidents panel says where the standing ones are, not "none"
        page.wait_for_selector("#incidents-status-only", timeout=STEP_MS)
        # Every incident the table found stands in the Alarms panel, with the button beside them.
        page.wait_for_selector("#alarms #ack-incidents", timeout=STEP_MS)
        text = page.inner_text("#alarms")
        for t in found:
            assert t.split(":")[0] in text, (t, text)
        assert page.inner_text("#ack-incidents") == f"Acknowledge the {len(found)} incidents"
        # The dealer's screen shows them and has no such button.
        dealer = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        dealer.goto(bench.table.base_url + "/")
        dealer.fill("#person", "D-1")
        dealer.fill("#pin", DEALER_PINS["D-1"])
        dealer.click("#sign-in-button")
        dealer.wait_for_selector('#alarms [data-alarm="incident"]', timeout=STEP_MS)
        assert dealer.locator("#ack-incidents").count() == 0
        page.click("#ack-incidents")
        crew.run_until(lambda st: not [a for a in st["alarms"] if a["kind"] == "incident"],
                       what="the incidents acknowledged from the screen", act=False)
        # The alarms panel has none left either; the screen never threw.
        page.wait_for_function("() => !document.querySelector('#alarms [data-alarm=\"incident\"]')",
                               timeout=STEP_MS)
        assert errors == []
    finally:
        close_contexts(browser)
    crew.play_rounds(1)  # the table goes on
