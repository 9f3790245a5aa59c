"""Training (issue 25): a trainee deals a simulated table at a person's pace from the dealer's
screen (`tablectl run --simulate --pace person --web`), in real Chromium. Nothing moves until the
trainee does it: each physical step is the screen's one button (the dealer's hands, through the
simulated table's control socket), each press deals exactly one card, a double tap is refused
beside the button in words, and the trainee's bets, decisions and collect are the round dealt
and settled."""

from __future__ import annotations

import json
import os
import subprocess
import time
from urllib.parse import urlparse

import pytest

from console_helpers import PEOPLE, make_people, stop, tablectl, wait_until, web_url_in_log
from test_web_console import CHROMIUM, STEP_S, no_leaks, shoot  # noqa: F401

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(300)]


@pytest.fixture
def training(tmp_path, request):
    """``tablectl run --simulate --pace person`` with its web front door: 2 seats (or as
    many as the test's indirect parameter), 1 round."""
    seats = str(getattr(request, "param", 2))
    os.chmod(tmp_path, 0o700)
    people = make_people(tmp_path / "people.toml")
    log = open(tmp_path / "run.log", "wb")
    out = open(tmp_path / "run.out", "wb")
    # --web on port 0 and --log-level info: the table picks a free port itself and says which
    # (web_listening); a port found free beforehand and then probed could meanwhile be another
    # process's on a loaded machine
    proc = subprocess.Popen(tablectl() + ["run", "--simulate", "--pace", "person", "--seats", seats, "--rounds", "1",
                                          "--seed", "5", "--json", "--journal", str(tmp_path / "j.sqlite3"),
                                          "--web", "127.0.0.1:0", "--people-file", str(people),
                                          "--log-format", "json", "--log-level", "info"],
                            stdin=subprocess.DEVNULL, stdout=out, stderr=log)
    try:
        proc.url = wait_until(lambda: web_url_in_log(proc, tmp_path / "run.log"), 60,
                              "the training table's web front door")
        proc.out_path = tmp_path / "run.out"
        yield proc
    finally:
        stop(proc, 20)
        log.close()
        out.close()


def sign_in(chromium, url, person):
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.goto(url + "/")
    page.fill("#person", person)
    page.fill("#pin", PEOPLE[person][1])
    page.click("#sign-in-button")
    page.wait_for_url(lambda u: urlparse(u).path.endswith(".html"))
    page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_S * 1000)
    return page


def wait_for_something(page, training) -> bool:
    """Until the dealer's screen offers a step (True) or loses the table (False: the run ended,
    its round dealt, and the table stopped; the page's link says so at once)."""
    try:
        page.wait_for_function("() => document.getElementById('do-hands') || document.getElementById('do-now')"
                               " || document.querySelector('#bets-all-min') || document.querySelector('[id^=play-]')"
                               " || document.querySelector('#connection:not([data-state=\"live\"])')",
                               timeout=STEP_S * 1000)
    except Exception:
        if training.poll() is None:
            shoot(page, "training-stuck")
            raise AssertionError(f"the dealer's screen offers nothing: {page.inner_text('#now')!r}, "
                                 f"status {status(page)!r}") from None
        return False
    return page.locator('#connection[data-state="live"]').count() == 1


def status(page) -> dict:
    return page.evaluate("() => window.threecard.request({action: 'status'})")


def cards_out(st: dict) -> int:
    r = st.get("round") or {}
    return (r.get("dealer_cards") or 0) + sum(s.get("cards", 0) for s in (r.get("seats") or {}).values())


def test_a_trainee_deals_a_round_by_hand_at_their_own_pace(chromium, training):
    page = sign_in(chromium, training.url, "D-4")
    seen, presses, double_tap = [], 0, None
    end = time.monotonic() + 200.0
    while training.poll() is None and time.monotonic() < end:
        if not wait_for_something(page, training):  # the table stopped (its exit is checked below), or a reconnect
            wait_until(lambda: training.poll() is not None or page.locator('#connection[data-state="live"]').count(),
                       STEP_S, "the table's exit or its link back")
            continue
        if page.locator("#do-hands").count():
            step = page.get_attribute("#do-hands", "data-step")
            before = status(page)
            assert "dealer_hands" in before["waiting_for"]["accepts"]
            if step == "draw_card":
                n = before["waiting_for"]["draw_index"]
                # Nothing is dealt until the trainee presses: the cards out are the presses made.
                assert cards_out(before) == n
                page.click("#do-hands")
                presses += 1
                if double_tap is None:  # the same press again (a double tap): refused, never the next card
                    double_tap = page.evaluate("n => window.threecard.request({action: 'dealer_hands', "
                                               "step: 'draw_card', draw_index: n})", n)
                page.wait_for_function("n => { const s = window.threecard.status; const w = s && s.waiting_for;"
                                       " return !w || w.action !== 'draw_card' || w.draw_index !== n; }",
                                       arg=n, timeout=STEP_S * 1000)
                assert cards_out(status(page)) == n + 1
            else:
                page.click("#do-hands")
                page.wait_for_function("a => { const e = document.getElementById('do-hands');"
                                       " return !e || e.dataset.step !== a; }", arg=step, timeout=STEP_S * 1000)
            seen.append(step)
            continue
        if page.locator("#bets-all-min").count() and page.locator("#bets-close:not([disabled])").count() == 0:
            page.click("#bets-all-min")
            page.wait_for_selector("#bets-close:not([disabled])", timeout=STEP_S * 1000)
            continue
        if page.locator("#bets-close").count():
            page.click("#bets-close")
            page.wait_for_selector("#bets-close", state="detached", timeout=STEP_S * 1000)
            seen.append("close_bets")
            continue
        play = page.locator("[id^=play-]")
        if play.count():
            # The button's id is read once, before the press: after the last seat's decision no
            # play button is left to read it from.
            button = play.first.get_attribute("id")
            page.click(f"#{button}")
            seen.append("decide")
            page.wait_for_function("id => !document.getElementById(id)", arg=button, timeout=STEP_S * 1000)
            continue
        if page.locator("#do-now").count():
            if page.get_attribute("#now-what", "data-waiting-action") == "confirm_collect":
                page.wait_for_selector("#round .outcome[data-net-cents]", timeout=STEP_S * 1000)
                shoot(page, "training-settled")
            page.click("#do-now")
            seen.append(page.get_attribute("#now-what", "data-waiting-action") or "do-now")
            wait_until(lambda: training.poll() is not None or not page.locator("#do-now").count()
                       or page.get_attribute("#now-what", "data-waiting-action") != "confirm_collect", STEP_S,
                       "the table to take the dealer's step")
    assert training.wait(timeout=STEP_S) == 0, (training.out_path.parent / "run.log").read_text()[-2000:]
    out = json.loads(training.out_path.read_text())
    assert len(out["rounds"]) == 1
    # The deck steps and every card of a 2-seat round (9 cards) were the trainee's presses.
    for needed in ("insert_deck", "take_from_shuffler", "load_shoe", "draw_card", "close_bets", "decide"):
        assert needed in seen, seen
    assert presses == 9, seen
    # Refused either way: before the shoe reports the card ("done already"), or after, as a
    # press for card 1 while the table waits for card 2; and only 9 cards left the shoe.
    assert double_tap["ok"] is False and ("done already" in double_tap["error"]
                                          or "for card 1" in double_tap["error"]), double_tap
    assert out["cards_read"] == 9
    assert not page.errors, page.errors


def test_pace_person_needs_a_simulated_table(tmp_path):
    proc = subprocess.run(tablectl() + ["run", "--pace", "person", "--shuffler-url", "loop://", "--shoe-url", "loop://"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 2 and "--pace person paces a simulated table" in proc.stderr, proc.stderr


from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402


def hands_until(page, action: str) -> None:
    """Press the dealer's hands until the table waits for ``action``."""
    end = time.monotonic() + 3 * STEP_S  # a bound on the loop, not a step's: several steps, each under load
    while page.get_attribute("#now-what", "data-waiting-action") != action:
        assert time.monotonic() < end, page.inner_text("#now")
        # the button and its step read in one frame of the page: a re-render between a count and
        # a read left a read waiting 30 s for a button the panel had just redrawn away
        step = page.evaluate("() => { const e = document.getElementById('do-hands'); return e ? e.dataset.step : null; }")
        if step is not None:
            try:
                page.click(f'#do-hands[data-step="{step}"]', timeout=STEP_S * 1000)
            except PlaywrightTimeout:
                continue  # the table moved on meanwhile (the step is done): look again
            page.wait_for_function("a => { const e = document.getElementById('do-hands');"
                                   " return !e || e.dataset.step !== a; }", arg=step, timeout=STEP_S * 1000)
        else:
            page.wait_for_function("a => { const e = document.getElementById('now-what'); return e && "
                                   "(e.dataset.waitingAction === a || document.getElementById('do-hands')); }",
                                   arg=action, timeout=STEP_S * 1000)


@pytest.mark.parametrize("training", [3], indirect=True)
def test_refusals_show_beside_their_buttons_and_the_layout_shows_every_seat(chromium, training):
    """Errors beside the button that caused them, in words, cleared by its next success (the
    dealer's hands, the supervisor's void and replacement deck); the wagers as placed per
    seat, empty seats as empty, and the table's seat count (3) from the status."""
    dealer = sign_in(chromium, training.url, "D-4")
    supervisor = sign_in(chromium, training.url, "S-17")
    # A double tap on the hands: the first press is the step, the second is refused beside it.
    dealer.wait_for_selector('#do-hands[data-step="insert_deck"]', timeout=STEP_S * 1000)
    dealer.dblclick("#do-hands")
    dealer.wait_for_selector("#do-hands-error", timeout=STEP_S * 1000)
    text = dealer.inner_text("#do-hands-error")
    assert "Refused" in text and ("done already" in text or "waits for" in text), text
    # beside it: both read in one frame of the page (two reads apart let a re-render between them,
    # seen on a loaded 2-core CI: the button's box read as None while the panel was redrawn)
    beside = dealer.evaluate("""() => { const e = document.getElementById('do-hands-error'),
        b = document.getElementById('do-hands'); if (!e || !b) return null;
        const r = e.getBoundingClientRect(), s = b.getBoundingClientRect();
        return {error: [r.left, r.top], button: [s.left, s.top]}; }""")
    if beside is None:  # the panel was redrawn at that instant: wait for the two together
        dealer.wait_for_function("() => document.getElementById('do-hands-error') && document.getElementById('do-hands')",
                                 timeout=STEP_S * 1000)
        beside = dealer.evaluate("""() => { const r = document.getElementById('do-hands-error').getBoundingClientRect(),
            s = document.getElementById('do-hands').getBoundingClientRect();
            return {error: [r.left, r.top], button: [s.left, s.top]}; }""")
    assert beside["error"][1] >= beside["button"][1] and abs(beside["error"][0] - beside["button"][0]) < 40, beside
    # Its next success (the next step, once the table waits for it) clears it.
    dealer.wait_for_selector('#do-hands[data-step="take_from_shuffler"]', timeout=STEP_S * 1000)
    assert dealer.locator("#do-hands-error").count() == 1  # the refusal stays until then
    dealer.click("#do-hands")
    dealer.wait_for_selector("#do-hands-error", state="detached", timeout=STEP_S * 1000)
    hands_until(dealer, "place_bets")
    # The supervisor: a void without a reason, a replacement deck nobody asked for: each
    # refused beside its own button, in words.
    supervisor.wait_for_selector("#void-button:not([disabled])", timeout=STEP_S * 1000)
    supervisor.click("#void-button")
    supervisor.wait_for_selector("#void-button-error:not([hidden])", timeout=STEP_S * 1000)
    assert "reason" in supervisor.inner_text("#void-button-error")
    supervisor.fill("#deck-id", "Z9")
    supervisor.click("#deck-button")
    supervisor.wait_for_selector("#deck-button-error:not([hidden])", timeout=STEP_S * 1000)
    assert "not expected" in supervisor.inner_text("#deck-button-error"), supervisor.inner_text("#deck-button-error")
    assert supervisor.is_hidden("#void-button-error") is False  # each error stays beside its own button
    # Seat 2 bets the table minimum; seats 1 and 3 stay empty. Bets close: the round shows
    # the wagers as placed and both empty seats, and the table's 3 seats.
    dealer.click("#bet-2-min")
    dealer.wait_for_selector("#bets-close:not([disabled])", timeout=STEP_S * 1000)
    dealer.click("#bets-close")
    dealer.wait_for_selector('#round [data-seat="2"] [data-wager-placed="ante"]', timeout=STEP_S * 1000)
    assert dealer.get_attribute('#round [data-seat="2"] [data-wager-placed="ante"]', "data-cents") == "100"
    assert dealer.locator('#round [data-empty-seat="1"]').count() == 1
    assert dealer.locator('#round [data-empty-seat="3"]').count() == 1
    assert "empty" in dealer.inner_text('#round [data-empty-seat="3"]')
    assert dealer.get_attribute("#layout-seats", "data-seats") == "3"
    # A void with its reason succeeds: the refusal beside the void button is cleared.
    supervisor.fill("#void-reason", "training: a void practised")
    supervisor.click("#void-button")
    supervisor.wait_for_selector("#void-button-error", state="hidden", timeout=STEP_S * 1000)
    shoot(dealer, "training-errors-dealer")
    shoot(supervisor, "training-errors-supervisor")
    assert not dealer.errors and not supervisor.errors, (dealer.errors, supervisor.errors)
