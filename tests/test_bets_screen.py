"""The dealer enters bets on the dealer's screen (issue 23), in real Chromium (Playwright, Debian's
chromium), through the web front door and the one dispatcher, against the table's betting step
(the console's wait for place_bets / close_bets, answered from the bet book): chip buttons,
"same as last round", "table minimum", "empty", a refusal shown beside its seat, and the time it
takes to enter a typical round's bets for 7 seats (printed)."""

from __future__ import annotations

import os
import time

import pytest

from console_helpers import CHEAP, PEOPLE, at_page, chromium_path, enter_sign_in, screenshot_dir
from test_bets_api import BettingTable
from table.bets import BetBook, Limit, TableLimits
from table.console import Command, Console
from table.events import EventLog
from table.interfaces.auth import Authenticator, PeopleFile
from table.interfaces.dispatch import Dispatcher, EventHub
from table.interfaces.serving import FrontDoorLoop
from table.interfaces.web import WebFrontDoor
from table.journal import Journal
from table.keys import generate
from table.rules.settlement import Wagers

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(240)]
STEP_MS = 60_000  # one screen step, as test_web_console.STEP_S: the real table is a child process
LIMITS = TableLimits(ante=Limit(500, 50_000, 500), pair_plus=Limit(500, 10_000, 500),
                     six_card=Limit(500, 2_500, 500), progressive=Limit(100, 100, 100))
LAST = {1: Wagers(2_500, 1_000), 2: Wagers(1_000, 500), 3: Wagers(500), 5: Wagers(0, 1_000), 6: Wagers(5_000, 0, 500, 100)}


@pytest.fixture(autouse=True)
def no_leaks(no_leaks_but):
    """conftest's leak check, but for Playwright's own pool threads (``asyncio_N``)."""
    yield from no_leaks_but(lambda t: t.name.startswith("asyncio_"))


@pytest.fixture
def screen_table(tmp_path):
    """A web front door on a console whose table takes bets for a round of a 7-seat layout."""
    os.chmod(tmp_path, 0o700)
    people = PeopleFile(tmp_path / "people.toml")
    role, pin = PEOPLE["D-4"]
    people.add("D-4", role, pin, hasher=CHEAP)
    key = generate()
    with Journal(tmp_path / "journal.sqlite3", key=key, table_id="t-bets") as j:
        j.append("table_open", places={"A": "in_shoe", "B": "verified"})
        j.append("round", round_id="r00002-00000000", step="open", number=2, wagers={})
    console = Console()
    book = BetBook(LIMITS, 7, last=LAST)

    def status() -> dict:
        exp = console.expectation
        return {"round": {"number": 2, "round_id": "r00002-00000000", "state": "open_for_bets"},
                "waiting_for": exp.to_dict() if exp else None, "bets": book.to_dict(), "rounds_played": 1}

    console.status = status
    front = FrontDoorLoop("test-bets-web")
    events = EventLog(tmp_path / "journal.sqlite3", "t-bets", key=key).start()
    hub = EventHub(events, front)
    auth = Authenticator(tmp_path / "people.toml", hasher=CHEAP)
    door = WebFrontDoor("127.0.0.1", 0, Dispatcher(console, front, hub=hub), auth, front)
    console.attached = True
    table = BettingTable(console, book)
    try:
        yield door, table
    finally:
        table.finish()
        door.close()
        hub.close()
        front.close()
        events.close()


def dealer_screen(chromium, door):
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.goto(door.url + "/")
    enter_sign_in(page, "D-4", PEOPLE["D-4"][1])
    page.wait_for_url(at_page("/dealer.html"))
    page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
    page.wait_for_selector("#bet-spot-7", timeout=STEP_MS)
    return page


def placed(page, seat: int) -> str:
    return page.inner_text(f"#bet-{seat}-placed")


def click_and_see(page, selector: str, seat: int, words: str) -> None:
    """Press a button, then wait until the seat's spot shows the table's answer."""
    page.click(selector)
    page.wait_for_function("([s, w]) => { const e = document.getElementById(`bet-${s}-placed`);"
                           " return e && e.textContent === w; }", arg=[seat, words], timeout=STEP_MS)


def test_the_dealer_enters_a_rounds_bets_for_seven_seats(chromium, screen_table):
    door, table = screen_table
    page = dealer_screen(chromium, door)
    assert [placed(page, s) for s in range(1, 8)] == ["empty"] * 7
    taps = 0
    start = time.monotonic()
    # Most players bet what they bet last round: one press for the whole table.
    page.click("#bets-all-last")
    taps += 1
    page.wait_for_function("() => document.getElementById('bets-in-play').dataset.count === '5'", timeout=STEP_MS)
    # Seat 1 presses: a $25 chip more on the ante (now $50).
    click_and_see(page, "#bet-1-chip-2500", 1, "Ante $50 · Pair Plus $10")
    taps += 1
    # Seat 4 sits down at the table minimum.
    click_and_see(page, "#bet-4-min", 4, "Ante $5")
    taps += 1
    # Seat 4 adds Pair Plus $5 and the progressive: choose the wager, then the chip.
    page.click("#bet-4-kind-pair_plus")
    click_and_see(page, "#bet-4-chip-500", 4, "Ante $5 · Pair Plus $5")
    page.click("#bet-4-kind-progressive")
    click_and_see(page, "#bet-4-chip-100", 4, "Ante $5 · Pair Plus $5 · Progressive $1")
    taps += 4
    # Seat 5 (Pair Plus alone last round) leaves: empty.
    click_and_see(page, "#bet-5-empty", 5, "empty")
    taps += 1
    # Seat 7 sits down with $10 of Pair Plus alone: two $5 chips.
    page.click("#bet-7-kind-pair_plus")
    click_and_see(page, "#bet-7-chip-500", 7, "Pair Plus $5")
    click_and_see(page, "#bet-7-chip-500", 7, "Pair Plus $10")
    taps += 3
    page.screenshot(path=str(screenshot_dir() / "bets-open.png"), full_page=True)
    page.click("#bets-close")
    taps += 1
    table.thread.join(STEP_MS / 1000)
    took = time.monotonic() - start
    assert table.frozen == {1: Wagers(5_000, 1_000), 2: Wagers(1_000, 500), 3: Wagers(500),
                            4: Wagers(500, 500, 0, 100), 6: Wagers(5_000, 0, 500, 100), 7: Wagers(0, 1_000)}
    assert page.errors == []
    page.screenshot(path=str(screenshot_dir() / "bets-seven-seats.png"), full_page=True)
    # A person needs about a second a press on a touchscreen (reach, press, see the answer):
    print(f"\nbets for 7 seats (6 in play) entered in {took:.2f} s by the browser, {taps} presses: "
          f"about {taps} s for a person at ~1 s a press")


def test_a_refused_bet_is_shown_beside_its_seat_and_changes_nothing(chromium, screen_table):
    door, table = screen_table
    page = dealer_screen(chromium, door)
    # Six Card Bonus with no ante: refused (649a.7), said beside seat 3.
    page.click("#bet-3-kind-six_card")
    page.click("#bet-3-chip-500")
    page.wait_for_selector("#bet-3-refused", timeout=STEP_MS)
    assert "seat 3: a Six Card Bonus wager needs an ante" in page.inner_text("#bet-3-refused")
    assert placed(page, 3) == "empty"
    # Above the Six Card maximum ($25): the refusal names the limit.
    click_and_see(page, "#bet-3-min", 3, "Ante $5")
    assert page.locator("#bet-3-refused").count() == 0  # the next accepted bet clears it
    page.click("#bet-3-kind-six_card")
    for total in ("$5", "$10", "$15", "$20", "$25"):
        click_and_see(page, "#bet-3-chip-500", 3, f"Ante $5 · Six Card {total}")
    page.click("#bet-3-chip-500")
    page.wait_for_selector("#bet-3-refused", timeout=STEP_MS)
    assert "above the table maximum of $25" in page.inner_text("#bet-3-refused")
    assert placed(page, 3) == "Ante $5 · Six Card $25"
    # Closing with a seat in play works; the bets are what the screen showed.
    page.click("#bets-close")
    table.thread.join(STEP_MS / 1000)
    assert table.frozen == {3: Wagers(500, 0, 2_500)}
    assert page.errors == []


# -- against a real table: tablectl run --web, emulators, the dealer's hands -----------------------

REAL_LIMITS = """
[paytables]
ante_bonus = "pa-649a12b-1"
pair_plus = "example-pp-649a12d"
six_card_bonus = "example-6cb-649a12f-e"

[limits]
chip_cents = 500
[limits.ante]
minimum_cents = 500
maximum_cents = 50000
[limits.pair_plus]
minimum_cents = 500
maximum_cents = 10000
[limits.six_card]
minimum_cents = 500
maximum_cents = 2500
"""


@pytest.fixture
def real_table(tmp_path):
    from console_helpers import BenchTable

    table = BenchTable(tmp_path / "bench", seats=7, rounds=1, extra=REAL_LIMITS)
    try:
        yield table
    finally:
        table.stop()


def test_bets_entered_on_the_screen_are_the_bets_a_real_table_deals_and_settles(chromium, real_table, tmp_path):
    """Seven seats' bets entered by clicking at a real table: only the seats in play are dealt;
    the settlement is exactly `tablectl settle` of the round as journaled (the frozen wagers,
    the cards, the decisions)."""
    import json
    import subprocess

    from console_helpers import Hands, tablectl
    from test_web_console import drive, events_of, open_screen, settled_on_screen, waiting

    bench = real_table
    page, _ = open_screen(chromium, bench, "D-4")
    hands = Hands(bench)
    drive(page, hands, until=lambda p: waiting(p) == "place_bets")
    page.wait_for_selector("#bets-all-min", timeout=STEP_MS)
    taps, start = 0, time.monotonic()
    page.click("#bets-all-min")  # the first round: every seat at the table minimum, then each as it bets
    page.wait_for_function("() => document.getElementById('bets-in-play').dataset.count === '7'", timeout=STEP_MS)
    taps += 1
    click_and_see(page, "#bet-1-chip-2500", 1, "Ante $30")
    page.click("#bet-1-kind-pair_plus")
    click_and_see(page, "#bet-1-chip-500", 1, "Ante $30 · Pair Plus $5")
    page.click("#bet-2-kind-six_card")
    click_and_see(page, "#bet-2-chip-500", 2, "Ante $5 · Six Card $5")
    click_and_see(page, "#bet-3-empty", 3, "empty")
    click_and_see(page, "#bet-4-chip-10000", 4, "Ante $105")
    click_and_see(page, "#bet-5-empty", 5, "empty")
    page.click("#bet-5-kind-pair_plus")
    click_and_see(page, "#bet-5-chip-2500", 5, "Pair Plus $25")  # Pair Plus alone
    click_and_see(page, "#bet-6-chip-500", 6, "Ante $10")
    taps += 11
    # a Six Card bet over its maximum is refused beside seat 2 and changes nothing
    for _ in range(5):
        page.click("#bet-2-chip-500")
        taps += 1
        if page.locator("#bet-2-refused").count():
            break
    page.wait_for_selector("#bet-2-refused", timeout=STEP_MS)
    assert "above the table maximum of $25" in page.inner_text("#bet-2-refused")
    page.click("#bets-close")
    taps += 1
    page.wait_for_function("() => document.getElementById('now-what').dataset.waitingAction !== 'place_bets'",
                           timeout=STEP_MS)
    took = time.monotonic() - start
    print(f"\nreal table: bets for 7 seats (6 in play) entered in {took:.2f} s by the browser, {taps} presses: "
          f"about {taps} s for a person at ~1 s a press")
    closed = events_of(bench, "bets_closed")[0]["data"]
    assert closed["seats"] == [1, 2, 4, 5, 6, 7]
    assert closed["wagers"]["2"] == {"ante": 500, "pair_plus": 0, "six_card": 2500, "progressive": 0}
    assert closed["wagers"]["5"] == {"ante": 0, "pair_plus": 2500, "six_card": 0, "progressive": 0}
    drive(page, hands, until=settled_on_screen, decisions={4: "fold"}, confirm_collect=False)
    assert len(hands.draws) == 3 * (6 + 1)  # the seats in play and the dealer: seat 3 got no card
    dealt = {e["data"]["seat"] for e in events_of(bench, "card_dealt") if e["data"].get("seat")}
    assert dealt == {1, 2, 4, 5, 6, 7}
    final = events_of(bench, "decisions_final")[0]["data"]["seats"]
    assert "5" in final and final["5"]["decision"] is None  # Pair Plus alone: no decision (649a.7)
    dealer = events_of(bench, "dealer_revealed")[0]["data"]["dealer_hand"]
    settled = events_of(bench, "round_settled")[0]["data"]["results"]
    round_file = tmp_path / "round.json"
    round_file.write_text(json.dumps({
        "paytables": {"ante_bonus": "pa-649a12b-1", "pair_plus": "example-pp-649a12d",
                      "six_card_bonus": "example-6cb-649a12f-e"},
        "dealer": dealer,
        "seats": [{"seat": int(s), "cards": final[s]["cards"], "wagers": w,
                   **({"decision": final[s]["decision"]} if w["ante"] else {})}
                  for s, w in closed["wagers"].items()]}))
    out = subprocess.run(tablectl() + ["settle", str(round_file)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    again = {str(s["seat"]): s for s in json.loads(out.stdout)["seats"]}
    assert set(again) == set(settled)
    for s, res in settled.items():
        assert res["net"] == again[s]["net"], (s, res, again[s])
        assert [(w["wager"], w["stake"], w["outcome"], w["amount"]) for w in res["wagers"]] == \
            [(w["wager"], w["stake"], w["outcome"], w["amount"]) for w in again[s]["wagers"]]
    assert page.errors == []
    page.screenshot(path=str(screenshot_dir() / "bets-real-table.png"), full_page=True)
