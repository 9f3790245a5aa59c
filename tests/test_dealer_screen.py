"""A dealer's first rounds on the dealer's screen, at the documented 1280 x 800 touchscreen and on a
390 x 844 phone, in real Chromium against a real table (`tablectl run --web`, seven seats, the
table's limits) and standalone emulators; the dealer's hands work the emulators' control ports,
and a supervisor's screen is open beside the dealer's (two people, two browser contexts):

* a chip press goes to the wager kind chosen for that seat in this round: a seat used for Pair
  Plus last round takes an ante from a plain chip press this round, and "same as last" repeats
  last round's bets as they were;
* while bets are open the round panel shows the seats' bets as the bet spots do, and the history
  says the bets are open (not "0 seats");
* every Play and Fold button of a 7-seat round is on the 1280 x 800 screen without scrolling
  (on the phone: inside its width, a whole touch target);
* the dealer's hand is named as people say it ("flush, king-jack-9");
* the table asks for the last deck's stub out of the shoe before the next deck's load, on the
  dealer's and the supervisor's screens."""

from __future__ import annotations

import pytest

from console_helpers import BenchTable, Hands
from table.rules.hands import evaluate
from test_web_console import (CHROMIUM, STEP_S, drive, events_of, no_leaks, shoot,  # noqa: F401
                              wait_action_not, waiting)
from test_web_console_states import DESK, PHONE, sign_in, wider_than_screen

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(300)]
MS = STEP_S * 1000

LIMITS = """
[paytables]
ante_bonus = "pa-649a12b-1"
pair_plus = "example-pp-649a12d"

[limits]
chip_cents = 500
[limits.ante]
minimum_cents = 500
maximum_cents = 50000
[limits.pair_plus]
minimum_cents = 500
maximum_cents = 10000
"""

#: where a button is against the window: its box, the window's, and how far the page is scrolled
WHERE = """e => { const r = e.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height,
          width: window.innerWidth, innerHeight: window.innerHeight, scrollY: window.scrollY}; }"""


@pytest.fixture
def bench(tmp_path):
    table = BenchTable(tmp_path / "bench", seats=7, rounds=3, extra=LIMITS)
    try:
        yield table
    finally:
        table.stop()


def spot_says(page, seat: int, words: str) -> None:
    page.wait_for_function("([s, w]) => { const e = document.getElementById(`bet-${s}-placed`);"
                           " return e && e.textContent === w; }", arg=[seat, words], timeout=MS)


def round_panel_wagers(page, seat: int) -> dict[str, int]:
    """What the round panel (below the bet spots) says seat ``seat`` has bet: wager -> cents."""
    return dict(page.locator(f'#round section.seat[data-seat="{seat}"] li[data-wager-placed]').evaluate_all(
        "els => els.filter(e => e.dataset.wagerPlaced).map(e => [e.dataset.wagerPlaced, Number(e.dataset.cents)])"))


def chosen_kind(page, seat: int) -> str:
    return page.locator(f'#bet-spot-{seat} .bet-kind[aria-checked="true"]').get_attribute("id").rsplit("-kind-", 1)[1]


def decide_every_seat(page, viewport: dict, decisions: dict[int, str]) -> list[dict]:
    """Press Play or Fold for each seat as the table asks for it; before each press, where its
    buttons are (the press itself must not be what scrolls them into view)."""
    seen = []
    for seat in range(1, 8):
        page.wait_for_selector(f"#play-{seat}", timeout=MS)
        where = {b: page.locator(f"#{b}-{seat}").evaluate(WHERE) for b in ("play", "fold")}
        seen.append({"seat": seat, **where})
        if viewport is PHONE:
            page.locator(f"#{decisions.get(seat, 'play')}-{seat}").scroll_into_view_if_needed()
        page.click(f"#{decisions.get(seat, 'play')}-{seat}")
        page.wait_for_selector(f"#play-{seat}", state="detached", timeout=MS)
    return seen


@pytest.mark.parametrize("viewport", [DESK, PHONE], ids=["1280x800", "390x844"])
def test_a_dealers_first_rounds_chips_buttons_hand_names_and_the_stub(chromium, bench, viewport):
    dealer = sign_in(chromium, bench, "D-4", viewport)
    sup = sign_in(chromium, bench, "S-17", viewport)
    hands = Hands(bench)
    drive(dealer, hands, until=lambda p: waiting(p) == "place_bets" and p.locator("#bets-all-min").count() > 0)
    # Round 1: every seat at the table minimum, then seat 3 adds Pair Plus (the kind, then a chip).
    dealer.click("#bets-all-min")
    dealer.wait_for_function("() => document.getElementById('bets-in-play')?.dataset.count === '7'", timeout=MS)
    assert chosen_kind(dealer, 3) == "ante"
    dealer.click("#bet-3-kind-pair_plus")
    dealer.click("#bet-3-chip-500")
    spot_says(dealer, 3, "Ante $5 · Pair Plus $5")
    dealer.click("#bet-3-chip-2500")
    spot_says(dealer, 3, "Ante $5 · Pair Plus $30")
    # One state on every panel: the round panel below shows each seat's bets as the spots do.
    dealer.wait_for_function("() => document.querySelectorAll('#round [data-empty-seat]').length === 0", timeout=MS)
    assert round_panel_wagers(dealer, 3) == {"ante": 500, "pair_plus": 3000}
    assert round_panel_wagers(dealer, 5) == {"ante": 500}
    assert "empty: no wager" not in dealer.inner_text("#round")
    # ... and the history does not call the round in progress "0 seats" meanwhile.
    dealer.wait_for_function("() => { const r = document.querySelector('#history [data-outcome=\"in_progress\"]');"
                             " return r && r.textContent.includes('bets open'); }", timeout=MS)
    assert "0 seats" not in dealer.inner_text("#history")
    dealer.click("#bets-close")
    wait_action_not(dealer, "place_bets")
    assert events_of(bench, "bets_closed")[0]["data"]["wagers"]["3"]["pair_plus"] == 3000
    drive(dealer, hands, until=lambda p: waiting(p) == "decide")
    decisions = {2: "fold", 6: "fold"}
    seen = decide_every_seat(dealer, viewport, decisions)
    for s in seen:
        for b in ("play", "fold"):
            box = s[b]
            assert box["left"] >= 0 and box["right"] <= box["width"], (viewport, s)  # never off the side
            assert box["height"] >= 56, (viewport, s)  # a whole touch target
            if viewport is DESK:  # the dealer's touchscreen: every seat's buttons on screen, unscrolled
                assert box["scrollY"] == 0 and box["top"] >= 0 and box["bottom"] <= box["innerHeight"], s
    # The dealer's hand, named as people say it, beside whether it qualifies.
    dealer.wait_for_selector("#round .outcome[data-net-cents]", timeout=MS)
    revealed = events_of(bench, "dealer_revealed")[0]["data"]
    named = evaluate(revealed["dealer_hand"]).describe()
    line = dealer.inner_text('#round section.seat.dealer .decision')
    assert named in line, (named, line)
    assert ("does not qualify" in line) == (not revealed["dealer_qualifies"]), line
    if viewport is DESK:
        shoot(dealer, "dealer-screen-settled-1280x800")
    # The collect; then the table asks for the stub of the deck just dealt, before the next deck's
    # load, on the dealer's screen and the supervisor's.
    dealt = bench.colour("A")
    drive(dealer, hands, until=lambda p: waiting(p) == "unload_shoe")
    for page in (dealer, sup):
        page.wait_for_selector('#now-what[data-waiting-action="unload_shoe"]', timeout=MS)
        text = page.inner_text("#now-what")
        assert f"take the {dealt} deck's stub out of the shoe" in text and "before the" in text, text
    assert "shoe" in dealer.inner_text("#now .now-who") or "devices" in dealer.inner_text("#now .now-who")
    # Round 2: seat 3 (Pair Plus last round) takes an ante from a plain chip press.
    drive(dealer, hands, until=lambda p: waiting(p) == "place_bets" and p.locator("#bet-spot-3").count() > 0)
    assert chosen_kind(dealer, 3) == "ante"
    dealer.click("#bet-3-chip-500")
    spot_says(dealer, 3, "Ante $5")
    # "Same as last" repeats last round's bets as they were; a chip then still goes on the ante.
    dealer.click("#bet-3-last")
    spot_says(dealer, 3, "Ante $5 · Pair Plus $30")
    dealer.click("#bet-3-chip-500")
    spot_says(dealer, 3, "Ante $10 · Pair Plus $30")
    assert round_panel_wagers(dealer, 3) == {"ante": 1000, "pair_plus": 3000}
    assert wider_than_screen(dealer) == [], viewport
    assert dealer.errors == [] and sup.errors == []
    shoot(dealer, f"dealer-screen-round-2-bets-{viewport['width']}x{viewport['height']}")
