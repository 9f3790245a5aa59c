"""The dealer's and supervisor's screens in real Chromium (Playwright, Debian's chromium) against a
real-table controller (`tablectl run --web`) and standalone emulators; the dealer's hands work the
emulators' control ports, as docs/emulators.md has a person do. Every screen action is a click.
Each test saves a screenshot of its final page (folder: THREECARD_SCREENSHOTS, else
test-artifacts/screenshots, printed at the end of the run)."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from urllib.parse import urlparse
from pathlib import Path

import pytest

from console_helpers import (DEVICE_STEPS, PEOPLE, BenchTable, Hands, PageTraffic, cards_in,
                             chromium_path, enter_sign_in, screenshot_dir, wait_until)

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(240)]
# One screen step's bound: what the page waits for comes from a table and its emulators in child
# processes, which under two suites on 2 cores took over 20 s for one step (a shuffle); the test's
# own timeout still bounds the whole.
STEP_S = 60.0
SUITS = {"s": "♠", "h": "♥", "d": "♦", "c": "♣"}
WORDS = {"s": "spades", "h": "hearts", "d": "diamonds", "c": "clubs"}
RANKS = {"A": "ace", "K": "king", "Q": "queen", "J": "jack", "T": "10"}


def card_forms(card: str) -> set[str]:
    """Every way a page could write ``card``: "Qs", "Q♠", "queen of spades"."""
    rank, suit = card[:-1], card[-1]
    shown = "10" if rank in ("T", "10") else rank
    return {card, f"{shown}{SUITS[suit]}", f"{RANKS.get(rank, shown)} of {WORDS[suit]}"}


@pytest.fixture(autouse=True)
def no_leaks(no_leaks_but):
    """conftest's leak check, but for the threads of Playwright's own pool (``asyncio_N``,
    started on demand as the browser is driven): the table runs in other processes here."""
    yield from no_leaks_but(lambda t: t.name.startswith("asyncio_"))


@pytest.fixture
def bench(tmp_path):
    table = BenchTable(tmp_path / "bench", rounds=3)
    try:
        yield table
    finally:
        table.stop()


def open_screen(chromium, bench, person, path="/"):
    """A new browser (its own cookies) at the sign-in page; signs ``person`` in by typing."""
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    traffic = PageTraffic(page)
    page.goto(bench.url + path)
    enter_sign_in(page, person, PEOPLE[person][1])  # keyboard: the form submits without a pointer
    page.wait_for_url(lambda url: urlparse(url).path.endswith(".html"))  # not the sign-in page's ?next=/x.html
    page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_S * 1000)
    return page, traffic


def shoot(page, name: str) -> Path:
    path = screenshot_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def waiting(page) -> str | None:
    return page.get_attribute("#now-what", "data-waiting-action")


def wait_action_not(page, action: str) -> None:
    page.wait_for_function("a => { const e = document.getElementById('now-what');"
                           " return e && e.dataset.waitingAction !== a; }", arg=action, timeout=STEP_S * 1000)


def face_down(page) -> int:
    return page.locator("#round .card-back").count()


def api(bench, method, path, person="A-1", body=None):
    """The table API over HTTP, signed in as ``person`` (an auditor by default: reads only)."""
    req = urllib.request.Request(bench.url + "/api/v1/session", method="POST",
                                 data=json.dumps({"person": person, "pin": PEOPLE[person][1]}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        token = json.loads(resp.read())["token"]
    req = urllib.request.Request(bench.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def events_of(bench, type_: str) -> list[dict]:
    _, page = api(bench, "GET", "/api/v1/events?after=0&limit=1000")
    return [e for e in page["events"] if e["type"] == type_]


def drive(page, hands, *, until, decisions=None, on_draw=None, confirm_collect=True, deadline_s=120.0, keyboard=False):
    """Be the dealer: read what the dealer's screen waits for and do it, by clicking or with
    the hands at the devices, until ``until(page)`` holds. ``decisions``: seat -> play/fold;
    ``on_draw(n)``: called before the n-th draw of the deal (0-based)."""
    end = time.monotonic() + deadline_s
    decisions = decisions or {}
    draws_this_round = 0
    while not until(page):
        if time.monotonic() > end:
            raise AssertionError(f"the round did not get there; the screen says: {page.inner_text('#now')}")
        page.wait_for_selector("#now-what", timeout=STEP_S * 1000)
        action = waiting(page)
        colour = page.get_attribute("#now-what", "data-waiting-colour") or None
        # asked after the step was read: the screen only moves on, so a step read before the
        # test's own moment was reached is never done once it is (read after, a decision step
        # reached between the two reads was taken for this loop's and its seats decided)
        if until(page):
            break
        if action in DEVICE_STEPS:
            if action == "draw_card":
                deal = 3 * (page.locator("section.seat[data-seat]").count())  # 3 cards each, the dealer's too
                if draws_this_round >= deal:  # a dealer draws no card beyond the deal
                    wait_action_not(page, action)
                    continue
                # The shoe's own count against the card the table asks for: a screen a frame behind
                # the shoe (after a restart, when this loop did not count the cards already out) must
                # not make the hands draw a card beyond the deal (a misdeal the test caused).
                asked = page.evaluate("() => { const s = window.threecard && window.threecard.status;"
                                      " const w = s && s.waiting_for;"
                                      " return w && w.action === 'draw_card' ? w.draw_index : null; }")
                out = re.search(r"draws=(\d+)", hands.bench.shoe.do("status"))
                if asked is None or (out is not None and int(out.group(1)) > asked):
                    page.wait_for_function("n => { const s = window.threecard && window.threecard.status;"
                                           " const w = s && s.waiting_for;"
                                           " return !w || w.action !== 'draw_card' || w.draw_index > n; }",
                                           arg=asked if asked is not None else -1, timeout=STEP_S * 1000)
                    continue
                if on_draw is not None:
                    on_draw(draws_this_round)
                before = face_down(page)
                hands.do(action, colour)
                draws_this_round += 1
                page.wait_for_function(
                    "n => document.querySelectorAll('#round .card-back').length > n"
                    " || document.getElementById('now-what').dataset.waitingAction !== 'draw_card'",
                    arg=before, timeout=STEP_S * 1000)
            else:
                hands.do(action, colour)
                wait_action_not(page, action)
        elif action == "close_bets":
            draws_this_round = 0
            if keyboard:  # Tab to the one button and press Enter: no pointer
                for _ in range(30):
                    page.keyboard.press("Tab")
                    if page.evaluate("() => document.activeElement && document.activeElement.id") == "do-now":
                        break
                else:
                    raise AssertionError("Tab never reaches the close-bets button")
                page.keyboard.press("Enter")
            else:
                page.click("#do-now")
            wait_action_not(page, action)
        elif action == "decide":
            clicked = False
            for seat in sorted(page.locator("section.seat[data-seat]").evaluate_all(
                    "els => els.map(e => e.dataset.seat).filter(s => s !== 'dealer').map(Number)")):
                choice = decisions.get(seat, "play")
                button = page.locator(f"#{choice}-{seat}")
                if button.count():
                    button.click()
                    page.wait_for_selector(f"#{choice}-{seat}", state="detached", timeout=STEP_S * 1000)
                    clicked = True
            if not clicked:  # the table takes one seat's decision before it asks for the next
                page.wait_for_function("() => document.querySelector('#round [id^=play-]')"
                                       " || document.getElementById('now-what').dataset.waitingAction !== 'decide'",
                                       timeout=STEP_S * 1000)
        elif action == "confirm_collect":
            if not confirm_collect or until(page):
                return
            page.click("#do-now")
            wait_action_not(page, action)
        else:  # the table works (a shuffle) or waits for a supervisor: the screen will change; or
            # the caller's own step (bets) whose controls the screen draws a frame after its banner
            wait_until(lambda: until(page) or page.evaluate("() => (document.getElementById('now-what') || {})"
                                                            ".dataset?.waitingAction ?? null") != action, STEP_S,
                       f"the screen to move on from {action!r} or reach the test's step")


def unnamed_controls(page) -> list[str]:
    """Controls without an accessible name (aria-label, text, or a label for the field)."""
    return page.evaluate("""() => [...document.querySelectorAll('button, a, input, textarea, select')]
        .filter(e => !((e.getAttribute('aria-label') || '').trim() || (e.textContent || '').trim()
                       || (e.id && document.querySelector(`label[for="${e.id}"]`))))
        .map(e => e.outerHTML.slice(0, 120))""")


def settled_on_screen(page) -> bool:
    return page.locator("#round .outcome[data-net-cents]").count() > 0


def test_a_full_round_dealt_by_clicking_only_shows_the_settlement(chromium, bench):
    page, _ = open_screen(chromium, bench, "D-4")
    hands = Hands(bench)
    drive(page, hands, until=settled_on_screen, decisions={1: "play", 2: "fold", 3: "play"}, confirm_collect=False,
          keyboard=True)
    # the settlement can show a moment before the table's next wait reaches the page: wait for it
    page.wait_for_selector('#now-what[data-waiting-action="confirm_collect"]', timeout=30_000)
    assert waiting(page) == "confirm_collect"
    assert unnamed_controls(page) == []
    settled = events_of(bench, "round_settled")
    assert len(settled) == 1
    results = settled[0]["data"]["results"]
    for seat, result in results.items():
        box = page.locator(f'section.seat[data-seat="{seat}"]')
        assert int(box.locator(".outcome").get_attribute("data-net-cents")) == result["net"]
        shown = box.locator(".wager").evaluate_all(
            "els => els.map(e => [e.dataset.wager, Number(e.dataset.amountCents), e.dataset.outcome, e.textContent])")
        assert [(w, a, o) for w, a, o, _ in shown] == [(w["wager"], w["amount"], w["outcome"]) for w in result["wagers"]]
        headline = box.locator(".headline").inner_text()
        assert headline.startswith(result["hand"]["category"])
        for w, (_, _, _, text) in zip(result["wagers"], shown):
            if w.get("payout"):
                assert w["payout"] in text and w["payout"] in headline  # e.g. "straight, ante bonus 1 to 1"
    assert box.locator(".decision").count()
    decided = {s: page.get_attribute(f'section.seat[data-seat="{s}"] .decision', "data-decision") for s in "123"}
    assert decided == {"1": "play", "2": "fold", "3": "play"}
    # every card's face is on the screen now, the dealer's too
    faces = page.locator("#round .card-face").evaluate_all("els => els.map(e => e.dataset.card)")
    assert sorted(faces) == sorted(hands.draws)
    page.click("#do-now")  # confirm the collect: the round closes
    wait_until(lambda: events_of(bench, "round_closed"), 20, "round_closed")
    assert page.errors == []
    shoot(page, "dealer-full-round")


def test_the_dealers_cards_are_in_no_dom_and_no_message_before_decisions(chromium, bench):
    page, traffic = open_screen(chromium, bench, "D-4")
    hands = Hands(bench)
    snapshots: list[str] = []

    def at_decisions(p):
        if waiting(p) == "decide":
            snapshots.append(p.content())
            return True
        return False

    drive(page, hands, until=at_decisions, on_draw=lambda n: snapshots.append(page.content()))
    seats = 3
    dealer_cards = [hands.draws[i] for i in range(seats, 3 * (seats + 1), seats + 1)]
    seat_cards = [c for i, c in enumerate(hands.draws) if i % (seats + 1) != seats]
    assert len(dealer_cards) == 3 and len(seat_cards) == 9
    frames_before = list(traffic.frames)
    assert any('"card_dealt"' in f for f in frames_before)  # the page did receive the deal
    for html in snapshots:  # the DOM after every draw and at the decisions
        for card in dealer_cards + seat_cards:
            for form in card_forms(card):
                assert form not in html if len(form) > 3 else card not in cards_in(html), (card, form)
    for frame in frames_before:  # every WebSocket message the page received before the decisions
        assert not set(dealer_cards + seat_cards) & cards_in(frame), frame[:300]
        assert not any(f in frame for c in dealer_cards for f in card_forms(c) if len(f) > 3)
    assert page.locator("#round .card-back").count() == 12
    # The decisions: then the seats' faces, then the dealer's, arrive and are shown.
    drive(page, hands, until=settled_on_screen, confirm_collect=False)
    html = page.content()
    for card in dealer_cards:
        assert card in cards_in(html)  # the check above could see them: it was not blind
    msgs = traffic.messages()
    first_reveal = next(i for i, m in enumerate(msgs) if m.get("type") == "decisions_final")
    for m in msgs[:first_reveal]:
        assert not set(dealer_cards) & cards_in(json.dumps(m))
    assert page.errors == []
    shoot(page, "dealer-sealed-until-decisions")


def test_a_foreign_card_holds_the_round_a_supervisor_voids_it_the_dealer_cannot(chromium, bench):
    page, _ = open_screen(chromium, bench, "D-4")
    hands = Hands(bench)

    def slip(n):
        if n == 2:  # someone slips a card with the other deck's back onto the shoe
            bench.shoe.do("slip Kd blue")

    drive(page, hands, until=lambda p: p.locator('[data-alarm="held"]').count() > 0, on_draw=slip)
    alarm = page.locator('[data-alarm="held"]').inner_text()
    assert "ROUND HELD" in alarm and "Kd" not in alarm  # the reason names no card (masked)
    # The dealer's screen has no void control, and the table refuses the dealer's void itself.
    assert page.locator("#void-form").count() == 0
    refused = page.evaluate("() => window.threecard.request({action: 'void', reason: 'misdeal'})")
    assert refused["ok"] is False and refused["code"] == "forbidden"
    status, reply = api(bench, "POST", "/api/v1/commands/void", "D-4", {"reason": "misdeal"})
    assert status == 403 and reply["code"] == "forbidden"
    assert not events_of(bench, "round_voided")
    # A supervisor signs in at another screen and voids it, with a reason.
    sup, _ = open_screen(chromium, bench, "S-17")
    assert sup.url.endswith("/supervisor.html")
    sup.wait_for_selector("#held-round", timeout=STEP_S * 1000)
    assert unnamed_controls(sup) == []
    sup.click("#void-button")  # no reason yet: the form refuses to send it
    assert not events_of(bench, "round_voided")
    sup.fill("#void-reason", "foreign card in the shoe: misdeal")
    sup.click("#void-button")
    sup.wait_for_selector("#no-held", timeout=STEP_S * 1000)
    voided = wait_until(lambda: events_of(bench, "round_voided"), 20, "round_voided")
    assert voided[0]["data"]["supervisor"] == "S-17"
    page.wait_for_selector("#no-alarms", timeout=STEP_S * 1000)
    assert "VOIDED" in page.inner_text("#round")
    assert page.errors == [] and sup.errors == []
    shoot(sup, "supervisor-voided-foreign-card")
    shoot(page, "dealer-after-void")


def test_a_deck_missing_a_card_goes_out_of_service_and_its_replacement_is_dealt(chromium, bench):
    page, _ = open_screen(chromium, bench, "D-4")
    hands = Hands(bench)
    hands.insert_args["red"] = "-As"  # deck A comes back from the floor without its ace of spades
    drive(page, hands, until=lambda p: p.locator('[data-alarm="out_of_service"]').count() > 0)
    assert page.get_attribute('[data-deck="A"]', "data-place") == "out_of_service"
    assert "OUT OF SERVICE" in page.inner_text("#decks")
    sup, _ = open_screen(chromium, bench, "S-17")
    sup.wait_for_function("() => document.getElementById('deck-hint').textContent.includes('out of service')",
                          timeout=STEP_S * 1000)
    # The failed deck comes out of the shuffler first (the dealer's screen asks for it), then
    # the table waits for the supervisor's replacement.
    drive(page, hands, until=lambda p: waiting(p) == "register_deck")
    sup.fill("#deck-id", "A2")
    sup.click("#deck-button")
    sup.wait_for_selector('[data-deck="A2"]', timeout=STEP_S * 1000)
    page.wait_for_selector('[data-deck="A2"]', timeout=STEP_S * 1000)
    # The replacement (a complete red deck) is shuffled, counted and dealt: a full round.
    drive(page, hands, until=settled_on_screen, confirm_collect=False)
    assert page.get_attribute('[data-deck="A2"]', "data-place") == "in_play"
    dealt = events_of(bench, "card_dealt")
    assert len(dealt) == 12 and {e["data"]["back_colour"] for e in dealt} == {"red"}
    actions = events_of(bench, "supervisor_action")
    assert any(a["data"].get("new_deck_id") == "A2" and a["data"]["supervisor"] == "S-17" for a in actions)
    assert page.errors == [] and sup.errors == []
    shoot(page, "dealer-replacement-deck-dealt")
    shoot(sup, "supervisor-replacement-deck")
