"""Every page of the product on a 390 x 844 phone, with no horizontal scroll (issue 25, row 6): the
table's sign-in (and its "sign in again"), the dealer's screen (seven seats' results; the bets of
seven seats), the supervisor's and the auditor's screens, the shift page, the pit's wall page and
the floor page (signed out and with its reports). One real bench for all of them: a real table
(`tablectl run --web`, seven seats, standalone emulators) publishing to a real mosquitto, the floor
service reading that broker and the pit's wall page (`tablectl pit serve`) reading its database; each page is opened as a
person would, with what it shows filled in, then measured and saved as a screenshot."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from console_helpers import (CHEAP, DEVICE_STEPS, ApiDealer, BenchTable, chromium_path, screenshot_dir,
                             tablectl, wait_until)
from mqtt_broker import Broker, mosquitto_path
from test_web_console_states import PHONE, type_pin, wider_than_screen

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
              pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto is not installed (.ci/run installs it)"),
              pytest.mark.timeout(300)]
STEP_MS = 30_000
FLOOR_PERSON, FLOOR_PIN = "FM-1", "739201"
SEATS = 7


@pytest.fixture(autouse=True)
def no_leaks(no_leaks_but):
    """conftest's leak check, but for Playwright's pool threads and the floor's own (module-wide)."""
    yield from no_leaks_but(lambda t: t.name.startswith(("asyncio_", "AnyIO worker thread")))


def steps_until(dealer: ApiDealer, actions: tuple[str, ...], timeout_s: float = 60.0) -> dict:
    """The dealer's hands do the devices' steps until the table waits for one of ``actions``."""
    end = time.monotonic() + timeout_s
    done: set[tuple] = set()
    while True:
        st = dealer.request({"action": "status"})
        w = st.get("waiting_for") or {}
        if w.get("action") in actions:
            return st
        step = (w.get("action"), w.get("colour"), st.get("rounds_played"), (st.get("round") or {}).get("round_id"))
        if w.get("action") in DEVICE_STEPS and step not in done:
            done.add(step)
            dealer.hands.do(w["action"], w.get("colour"))
        assert time.monotonic() < end, f"the table did not get to {actions}: {w}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def floor_bench(tmp_path_factory):
    """The table (a round of seven seats settled, waiting for the collect), the broker, the pit
    view and the floor service."""
    from table.floor.config import load_floor_config
    from table.floor.service import FloorService
    from table.interfaces.auth import PeopleFile
    from table.keys import generate, save
    from table.roles import Role

    tmp = tmp_path_factory.mktemp("phone")
    broker = Broker(tmp / "broker").start()
    keys = tmp / "keys"
    keys.mkdir()
    table_id = "pit7-tcp-01"
    mqtt = (f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\nfloor = "pit7"\nkeepalive_s = 5\n'
            f'state_path = "{tmp / "mqtt-state.json"}"\n')
    bench = BenchTable(tmp / "table", table_id=table_id, seats=SEATS, rounds=5, seed=8, extra=mqtt)
    shutil.copy(bench.public_key_file, keys / f"{table_id}.pub")
    save(generate(), tmp / "floor.key")
    PeopleFile(tmp / "floor-people.toml").add(FLOOR_PERSON, Role.FLOOR_MANAGER, FLOOR_PIN, hasher=CHEAP)
    (tmp / "floor.toml").write_text(f"""
[floor]
database = "{tmp / 'floor.sqlite3'}"
key_file = "{tmp / 'floor.key'}"
table_keys = "{keys}"
people_file = "{tmp / 'floor-people.toml'}"
listen = "127.0.0.1:0"
[[broker]]
url = "mqtt://127.0.0.1:{broker.port}"
""")
    service = FloorService(load_floor_config(tmp / "floor.toml")).start()
    # the pit's wall page on a display of its own: the floor's page, read from its database
    pit = subprocess.Popen(tablectl() + ["pit", "serve", "--config", str(tmp / "floor.toml"), "--pit", "pit7",
                                         "--web", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=open(tmp / "pit.log", "wb"), text=True)
    dealer = ApiDealer(bench, decide=lambda seat: "fold" if seat == 4 else "play")
    dealer.seats = SEATS
    try:
        pit_url = pit.stdout.readline().strip()
        assert pit_url.startswith("http://127.0.0.1:"), (tmp / "pit.log").read_text()[-2000:]
        # Round 1, seven seats, dealt by the API's dealer up to its settlement (the collect waits).
        st = steps_until(dealer, ("close_bets",))
        dealer.request({"action": "close_bets"})
        done: set[tuple] = set()  # once per card and seat: a status a moment old still asks for a step done
        end = time.monotonic() + 120
        while not (st.get("waiting_for") or {}).get("action") == "confirm_collect":
            assert time.monotonic() < end, st.get("waiting_for")
            w = st.get("waiting_for") or {}
            if w.get("action") == "draw_card" and ("draw", w.get("draw_index")) not in done:
                done.add(("draw", w.get("draw_index")))
                dealer.hands.do("draw_card", None)
            elif w.get("action") == "decide" and ("decide", w.get("seat")) not in done:
                done.add(("decide", w.get("seat")))
                dealer.request({"action": "decide", "seat": w["seat"], "decision": dealer.decide(w["seat"])})
            else:
                time.sleep(0.02)
            st = dealer.request({"action": "status"})
        yield {"bench": bench, "dealer": dealer, "pit": pit_url, "floor": service.url}
    finally:
        dealer.close()
        service.close()
        pit.terminate()
        pit.wait(10)
        pit.stdout.close()
        bench.stop()
        broker.stop()


def fits(page) -> None:
    """No horizontal scroll, and no shown element reaches past the screen's right edge."""
    sizes = page.evaluate("() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]")
    assert max(sizes[:2]) <= sizes[2] == PHONE["width"], (page.url, sizes, wider_than_screen(page))
    assert wider_than_screen(page) == [], page.url


def phone(chromium):
    """A phone's browser: 390 x 844 CSS px, a touch screen, and the page's own viewport tag
    obeyed (a page that says width=1280 is laid out 1280 px wide, as on a real phone)."""
    page = chromium.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=3).new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return page


def sign_in(chromium, bench, person, _viewport=None):
    """``person`` signs in on a phone, typing id and PIN; their screen, live."""
    page = phone(chromium)
    page.goto(bench.url + "/")
    type_pin(page, person)
    page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
    return page


def table_sign_in(chromium, fb):
    page = phone(chromium)
    page.goto(fb["bench"].url + "/")
    page.wait_for_selector("#sign-in-button")
    return page


def table_sign_in_again(chromium, fb):
    page = phone(chromium)
    page.goto(fb["bench"].url + "/?again=1&next=%2Fdealer.html")
    page.wait_for_function("() => document.getElementById('sign-in-error').textContent.includes('sign in again')")
    return page


def dealer_settled(chromium, fb):
    page = sign_in(chromium, fb["bench"], "D-4", PHONE)
    page.wait_for_function(f"() => document.querySelectorAll('#round .outcome[data-net-cents]').length === {SEATS}",
                           timeout=STEP_MS)
    page.wait_for_selector("#history-rounds", timeout=STEP_MS)
    assert page.locator("#do-now").count() == 1  # the collect button is on the phone's screen
    return page


def dealer_bets(chromium, fb):
    """Round 2 open for bets: every seat's spot with its chip buttons."""
    dealer = fb["dealer"]
    st = dealer.request({"action": "status"})
    if (st.get("waiting_for") or {}).get("action") == "confirm_collect":
        dealer.request({"action": "confirm_collect"})
    steps_until(dealer, ("close_bets", "place_bets"))
    page = sign_in(chromium, fb["bench"], "D-4", PHONE)
    page.wait_for_selector("#bets:not([hidden])", timeout=STEP_MS)
    page.wait_for_function(f"() => document.querySelectorAll('#bets .bet-spot').length === {SEATS}", timeout=STEP_MS)
    return page


def supervisor(chromium, fb):
    page = sign_in(chromium, fb["bench"], "S-17", PHONE)
    page.wait_for_selector("#shuffle-verdict", timeout=STEP_MS)
    page.wait_for_selector("#audit-status", timeout=STEP_MS)
    page.wait_for_selector("#history-rounds", timeout=STEP_MS)
    return page


def auditor(chromium, fb):
    page = sign_in(chromium, fb["bench"], "A-1", PHONE)
    page.wait_for_selector("#audit-status", timeout=STEP_MS)
    return page


def shift(chromium, fb):
    page = sign_in(chromium, fb["bench"], "S-17", PHONE)
    page.click("#to-shift")
    page.wait_for_url("**/shift.html")
    page.select_option("#report-period", "day")  # the day's report with its plot, as a supervisor asks for it
    page.click("#report-show")
    page.wait_for_selector('#report-shown[data-period="day"]', timeout=STEP_MS)
    page.wait_for_selector("#report-plot", timeout=STEP_MS)
    return page


def pit(chromium, fb):
    page = phone(chromium)
    page.goto(fb["pit"])
    page.wait_for_selector('[data-grid-table="pit7-tcp-01"][data-state="online"]', timeout=STEP_MS)
    return page


def floor_signed_out(chromium, fb):
    page = phone(chromium)
    page.goto(fb["floor"])
    page.wait_for_selector("#signin-form")
    wait_until(lambda: "pit7-tcp-01" in page.inner_text("#tables"), 60, "the table on the floor page")
    return page


def floor_reports(chromium, fb):
    page = floor_signed_out(chromium, fb)
    page.fill("#person", FLOOR_PERSON)
    page.fill("#pin", FLOOR_PIN)
    page.click("#signin-form button")
    page.wait_for_selector("#reports:not([hidden])", timeout=STEP_MS)
    page.wait_for_function("() => /Year to date/.test(document.getElementById('totals').textContent)", timeout=STEP_MS)
    return page


PAGES = [table_sign_in, table_sign_in_again, dealer_settled, supervisor, auditor, shift, pit, floor_signed_out,
         floor_reports, dealer_bets]


@pytest.mark.parametrize("open_page", PAGES, ids=[p.__name__.replace("_", "-") for p in PAGES])
def test_the_page_fits_a_390_px_phone_without_horizontal_scroll(chromium, floor_bench, open_page):
    page = open_page(chromium, floor_bench)
    try:
        fits(page)
        page.screenshot(path=str(screenshot_dir() / f"phone-{open_page.__name__.replace('_', '-')}.png"),
                        full_page=True)
        assert page.errors == [], page.errors
    finally:
        page.context.close()
