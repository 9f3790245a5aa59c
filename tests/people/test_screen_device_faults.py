"""Device faults on the screens (docs/device-faults.md): a real table (standalone emulators
over TCP, tablectl run --web), the shuffler's door opened at a shuffle, then a jam that stands
until the dealer opens the door, clears it and closes it again. The dealer's and the
supervisor's screens (Chromium) say what to do, the DEVICE FAULT alarm stands while it lasts,
and the table deals on in the same process: no exit, no restart."""

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


def _sign_in(browser, base_url: str, person: str, pin: str):
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(base_url + "/")
    page.fill("#person", person)
    page.fill("#pin", pin)
    page.click("#sign-in-button")
    try:
        page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
    except Exception:
        raise AssertionError(f"{page.url}: {page.inner_text('body')[:1500]}")
    return page, errors


def _now_says(page, text: str) -> None:
    """Waits until the "Now" panel says ``text``."""
    page.wait_for_function("(t) => (document.querySelector('#now-what') || {}).textContent?.includes(t)", arg=text,
                           timeout=STEP_MS)


def _says(page, text: str) -> None:
    """The "Now" panel says ``text`` and the Alarms panel shows the DEVICE FAULT."""
    _now_says(page, text)
    page.wait_for_selector('#alarms [data-alarm="device_fault"]', timeout=STEP_MS)
    assert "DEVICE FAULT" in page.inner_text("#alarms")


def _fault_asked(st: dict) -> bool:
    return waiting(st, "fix_device")


def _fault_at_the_shuffle(crew, shuffler, pages, command: str, asked: str, said: str) -> None:
    """The deck just played goes to the shuffler, where the emulator does ``command`` (a device
    fault); the table asks for it to be fixed (``asked`` in what it waits for) and every page
    says ``said`` with the DEVICE FAULT alarm."""
    crew.run_until(lambda st: waiting(st, "insert_deck"), what="the played deck to go into the shuffler")
    shuffler.do(command)
    st = crew.run_until(_fault_asked, what=f"the table to ask to {asked}")
    assert asked in st["waiting_for"]["what"]
    for page in pages:
        _says(page, said)


def test_the_door_at_a_shuffle_and_a_jam_cleared_by_the_dealer_are_said_on_the_screens_and_ridden_through(
        chromium, tcp_bench):
    bench, crew = tcp_bench, tcp_bench.crew
    shuffler = bench.shuffler
    crew.play_rounds(1)
    pid = bench.table.proc.pid
    browser = chromium
    try:
        dealer, dealer_errors = _sign_in(browser, bench.table.base_url, "D-1", DEALER_PINS["D-1"])
        supervisor, supervisor_errors = _sign_in(browser, bench.table.base_url, "S-1", SUPERVISOR_PINS["S-1"])

        # 1. The door is open when the deck just played goes into the shuffler to be shuffled.
        _fault_at_the_shuffle(crew, shuffler, (dealer, supervisor), "door open", "close the shuffler's door",
                              "close the shuffler's door")
        shuffler.do("door closed")  # the dealer closes it: nothing to press, the table goes on
        crew.play_rounds(1)
        for page in (dealer, supervisor):
            page.wait_for_function("() => !document.querySelector('#alarms [data-alarm=\"device_fault\"]')",
                                   timeout=STEP_MS)

        # 2. A jam that stands until the dealer opens the door, clears it and closes the door.
        _fault_at_the_shuffle(crew, shuffler, (dealer, supervisor), "jam stays", "clear the jam",
                              "clear the jam in the shuffler")
        shuffler.do("door open")  # the dealer opens the door and clears the jam
        crew.run_until(lambda st: _fault_asked(st) and "close the shuffler's door" in st["waiting_for"]["what"],
                       what="the table to ask for the door to be closed again", act=False)
        _now_says(dealer, "close the shuffler's door")
        shuffler.do("door closed")
        crew.play_rounds(2)  # the table deals on
        assert dealer_errors == [] and supervisor_errors == []
    finally:
        close_contexts(browser)
    # the same process all along: never an exit, never a restart
    assert bench.table.proc.poll() is None and bench.table.proc.pid == pid and bench.table.runs == 1
    held = [line for line in bench.table.stderr().splitlines() if "exit" in line.lower()]
    assert held == [], held
