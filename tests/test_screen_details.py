"""The small things people read on the screens (issue 25, rows 5 and 7), in real Chromium against a
real table (`tablectl run --web`) and standalone emulators: cards counted from 1 and the banner and
the form agreeing on the number; face-down cards in their deck's back colour; no `??` for a card
the table keeps sealed or a card missing from a deck; "1 round", not "1 rounds"; a "10" inside its
card; no moment of "nothing to do" between two seats' decisions; no link to the supervisor's
screen on the supervisor's own banner; "Void the round" disabled while no round runs."""

from __future__ import annotations

import re

import pytest

from console_helpers import BenchTable, Hands, wait_until
from test_web_console import (CHROMIUM, STEP_S, drive, events_of, no_leaks, settled_on_screen,  # noqa: F401
                              shoot, waiting)
from test_web_console_states import sign_in

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(300)]

#: records, on every change of the banner, what the table waits for and the banner's words
WATCH_BANNER = """() => {
  window.__banner = [];
  const note = () => {
    const w = document.getElementById('now-what');
    const seen = [w ? w.dataset.waitingAction || '' : '', w ? w.textContent : ''];
    const last = window.__banner[window.__banner.length - 1];
    if (!last || last[0] !== seen[0] || last[1] !== seen[1]) window.__banner.push(seen);
  };
  new MutationObserver(note).observe(document.getElementById('now'), {childList: true, subtree: true,
                                                                      characterData: true});
  note();
}"""


#: each face's text (its rank; the suit is drawn) and whether its rank and suit sit side by side on
#: one line inside its card's border: every box of the face's content shares one horizontal band
#: (a wrapped face has a box wholly below another), and the content's extent is inside the border.
FACE_FITS = """els => els.map(e => {
  const text = document.createRange();
  text.selectNodeContents(e);
  const rects = [...text.getClientRects()].filter(r => r.width > 0 && r.height > 0);
  const oneLine = rects.length > 0 && Math.max(...rects.map(r => r.top)) < Math.min(...rects.map(r => r.bottom));
  const box = e.getBoundingClientRect(), t = text.getBoundingClientRect();
  const left = box.left + e.clientLeft, top = box.top + e.clientTop;
  const inside = t.left >= left - 0.5 && t.right <= left + e.clientWidth + 0.5
    && t.top >= top - 0.5 && t.bottom <= top + e.clientHeight + 0.5;
  const suit = e.querySelector('svg.suit');
  // what a failure is read by: the card's inner box, the content's, and the number of boxes
  const detail = `card ${Math.round(e.clientWidth)}x${Math.round(e.clientHeight)}, content ${Math.round(t.width)}x`
    + `${Math.round(t.height)}, ${rects.length} boxes, font ${getComputedStyle(e).fontFamily}`;
  return [e.textContent + (suit ? suit.dataset.suit : ''), oneLine && inside, detail];
})"""


def number_in(text: str, pattern: str) -> int:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in {text!r}"
    return int(m.group(1))


@pytest.fixture
def bench(tmp_path):
    # seed 9: the shuffler (seeded 9) shuffles deck A (red backs) with the 10 of diamonds third; the
    # hands carry that deck to the shoe, which deals round 1 in the order the shuffle committed to
    table = BenchTable(tmp_path / "bench", rounds=2, seed=9)
    try:
        yield table
    finally:
        table.stop()


def test_numbers_backs_tens_plurals_and_the_banners_read_as_people_say_them(chromium, bench):
    dealer = sign_in(chromium, bench, "D-4")
    sup = sign_in(chromium, bench, "S-17")
    sup_at_dealer = sign_in(chromium, bench, "S-18")  # a supervisor on the dealer's screen: the link is there
    sup_at_dealer.goto(bench.url + "/dealer.html")
    sup_at_dealer.wait_for_selector('#connection[data-state="live"]', timeout=STEP_S * 1000)
    # No round runs yet (the table waits for the first deck): nothing to void, and the screen says so.
    assert waiting(dealer) == "insert_deck"
    sup.wait_for_function("() => document.getElementById('void-round').textContent.includes('No round')",
                          timeout=STEP_S * 1000)
    assert sup.is_disabled("#void-button")
    hands = Hands(bench)
    seen_backs: list[list[str]] = []

    def at_draw(_):
        if len(hands.draws) == 3:  # the shoe cannot read card 4 (seat 1's second card of three seats and the dealer)
            bench.shoe.do("unreadable 1")
        seen_backs.append(dealer.locator("#round .card-back").evaluate_all("els => els.map(e => e.dataset.back)"))

    def at_confirm(p):
        return waiting(p) == "confirm_card"

    drive(dealer, hands, until=at_confirm, on_draw=at_draw)
    # A round runs: the void is offered now.
    sup.wait_for_selector("#void-button:not([disabled])", timeout=STEP_S * 1000)
    # The table waits for a supervisor: the supervisor's banner and form name the same card,
    # counted from 1 as the dealer drew it (the fourth), never from 0.
    sup.wait_for_function("() => (document.getElementById('now-what') || {}).dataset?.waitingAction === 'confirm_card'",
                          timeout=STEP_S * 1000)
    banner = sup.inner_text("#now-what")
    hint = sup.inner_text("#card-hint")
    assert number_in(banner, r"card (\d+)") == 4 and number_in(hint, r"card (\d+)") == 4, (banner, hint)
    # On the supervisor's own screen the banner does not send the supervisor to it; on the
    # dealer's screen it does (the check is not blind).
    assert sup.locator('#now a[href="/supervisor.html"]').count() == 0
    assert "Use the forms below" in sup.inner_text("#now")
    sup_at_dealer.wait_for_selector('#now a[href="/supervisor.html"]', timeout=STEP_S * 1000)
    sup.fill("#card-face", hands.draws[3])
    sup.click("#card-button")
    sup.wait_for_selector('#messages [data-kind="info"]', timeout=STEP_S * 1000)
    assert "accepted" in sup.inner_text("#messages"), sup.inner_text("#messages")
    dealer.evaluate(WATCH_BANNER)
    drive(dealer, hands, until=lambda p: waiting(p) == "decide", on_draw=at_draw)
    # Every card face down so far showed its deck's back colour: deck A, red (never blue).
    assert bench.colour("A") == "red"
    # the table waits for the decisions; the round panel draws its 12 face-down cards in its next frame
    dealer.wait_for_function("() => document.querySelectorAll('#round .card-back').length >= 12",
                             timeout=STEP_S * 1000)
    backs = dealer.locator("#round .card-back").evaluate_all("els => els.map(e => e.dataset.back)")
    assert len(backs) == 12 and set(backs) == {"red"}, backs
    assert all(set(b) <= {"red"} for b in seen_backs) and sum(map(len, seen_backs)) > 0
    shown = dealer.locator("#round .card-back").first.evaluate("e => getComputedStyle(e).backgroundImage")
    rgb = [tuple(map(int, m)) for m in re.findall(r"rgb\((\d+), (\d+), (\d+)\)", shown)]
    assert rgb and all(r > b for r, _, b in rgb), shown  # painted red, not the blue deck's backs
    drive(dealer, hands, until=settled_on_screen, decisions={2: "fold"}, confirm_collect=False)
    # Between the seats' decisions the banner always asked for a decision: no moment of
    # "nothing to do" (or any other words) between two of them.
    banner_log = dealer.evaluate("() => window.__banner")
    actions = [a for a, _ in banner_log]
    first, last = actions.index("decide"), len(actions) - 1 - actions[::-1].index("decide")
    assert set(actions[first:last + 1]) == {"decide"}, banner_log[first:last + 2]
    # Every face fits its card, the two-digit 10 too (one is on the table: the check is not blind).
    faces = dealer.locator("#round .card-face").evaluate_all(FACE_FITS)
    assert len(faces) == 12 and any(f[0].startswith("10") for f in faces), faces
    assert all(f[1] for f in faces), faces
    # Settled, the collect to come: a void is refused beside its button, and the results stand.
    sup.fill("#void-reason", "a player complains about the payout")
    sup.click("#void-button")
    sup.wait_for_selector("#void-button-error:not([hidden])", timeout=STEP_S * 1000)
    assert "results stand" in sup.inner_text("#void-button-error"), sup.inner_text("#void-button-error")
    assert not events_of(bench, "round_voided")
    dealer.click("#do-now")
    wait_until(lambda: events_of(bench, "round_closed"), 20, "round_closed")
    # One round played: "1 round" everywhere the supervisor's screen counts rounds.
    sup.wait_for_function("() => /1 round\\b/.test(document.getElementById('shuffle').innerText)",
                          timeout=STEP_S * 1000)
    sup.wait_for_function("() => !/asking/.test(document.getElementById('audit').innerText)", timeout=STEP_S * 1000)
    for page in (sup, dealer):
        text = page.inner_text("body")
        assert not re.search(r"\b1 (round|seat|card|entrie|checkpoint)s\b", text), text
        assert "??" not in text
    assert dealer.errors == [] and sup.errors == [] and sup_at_dealer.errors == []
    shoot(dealer, "details-dealer-after-round")
    shoot(sup, "details-supervisor-one-round")


def test_no_question_marks_for_a_missing_card_or_a_foreign_card_held(chromium, bench):
    dealer = sign_in(chromium, bench, "D-4")
    sup = sign_in(chromium, bench, "S-17")
    hands = Hands(bench)
    hands.insert_args["red"] = "-As"  # deck A comes back without its ace of spades
    drive(dealer, hands, until=lambda p: waiting(p) == "register_deck")
    for page in (dealer, sup):
        page.wait_for_selector('[data-alarm="out_of_service"]', timeout=STEP_S * 1000)
    sup.wait_for_function("() => document.querySelectorAll('#incidents [data-incident]').length > 0",
                          timeout=STEP_S * 1000)
    for page in (dealer, sup):
        text = page.inner_text("body")
        assert "??" not in text, text
    sup.fill("#deck-id", "A2")
    sup.click("#deck-button")

    def slip(n):
        if n == 2:  # a card with the other deck's back slipped onto the shoe
            bench.shoe.do("slip Kd blue")

    drive(dealer, hands, until=lambda p: p.locator('[data-alarm="held"]').count() > 0, on_draw=slip)
    sup.wait_for_selector("#held-round", timeout=STEP_S * 1000)
    sup.wait_for_function("() => /foreign|back/.test(document.getElementById('incidents').innerText)",
                          timeout=STEP_S * 1000)
    for page in (dealer, sup):  # the held reason names no card, and says so in words
        text = page.inner_text("body")
        assert "??" not in text and "Kd" not in text, text
    assert "Why: " in sup.inner_text("#held") and len(sup.inner_text("#held").split("Why: ")[1].strip()) > 10
    assert dealer.errors == [] and sup.errors == []
    shoot(sup, "details-supervisor-no-question-marks")


def _emoji_font() -> bool:
    import shutil
    import subprocess
    fc = shutil.which("fc-list")
    return bool(fc) and "Noto Color Emoji" in subprocess.run([fc], capture_output=True, text=True).stdout


@pytest.mark.skipif(not _emoji_font(), reason="fonts-noto-color-emoji is not installed (.ci/run installs it)")
@pytest.mark.parametrize("width", [1280, 390])
def test_every_face_fits_its_card_in_its_colour_whatever_font_the_table_pc_has(chromium, width):
    """All 52 faces drawn by the screens' own ``cardEl`` with the page's stylesheet, on a desktop
    and a phone, in the default font and in a font whose suits are only colour emoji (a table PC
    whose one font with U+2660..2667 is Noto Color Emoji drew "K♥" wider than its card and the
    spade grey: CI's first run of the screen test). Each face's rank and suit fit on one line
    inside the border, and the suit is painted in the card's colour (red or black)."""
    from pathlib import Path

    static = Path(__file__).resolve().parents[1] / "table" / "interfaces" / "web_static"
    cards = [r + s for s in "shdc" for r in "23456789TJQKA"]
    page_html = ("<!doctype html><link rel=stylesheet href=/css/console.css><div id=round>"
                 "<div class=cards id=deck style='flex-wrap: wrap'></div></div><script type=module>"
                 "import { cardEl } from '/js/ui.js';"
                 f"for (const c of {cards!r}) document.getElementById('deck').append(cardEl(c));"
                 "window.__drawn = true;</script>")
    context = chromium.new_context(viewport={"width": width, "height": 844})
    try:
        page = context.new_page()

        def serve(route):
            path = route.request.url.split("cards.test", 1)[1]
            if path == "/cards.html":
                return route.fulfill(body=page_html, content_type="text/html")
            kind = "text/css" if path.endswith(".css") else "text/javascript"
            return route.fulfill(body=(static / path.lstrip("/")).read_text(), content_type=kind)

        page.route("http://cards.test/**", serve)
        page.goto("http://cards.test/cards.html")
        page.wait_for_function("() => window.__drawn === true")
        # A font of the page's own that stops at Latin-1 (unicode-range), so that the suits fall
        # back to the colour-emoji font: the CI machine's fonts, reproduced on any machine.
        page.add_style_tag(content='@font-face { font-family: "Latin Only"; src: local("Liberation Sans"), '
                                   'local("DejaVu Sans"); unicode-range: U+0000-00FF; }')
        for font in ("", '"Latin Only", "Noto Color Emoji"'):
            page.evaluate(f"() => document.body.style.fontFamily = {font!r}")
            faces = page.locator("#deck .card-face").evaluate_all(FACE_FITS)
            assert len(faces) == 52 and all(f[1] for f in faces), (font, width, faces)
            colours = page.locator("#deck .card-face").evaluate_all(
                "els => els.map(e => { const suit = e.querySelector('svg.suit path');"
                " return [e.dataset.card, suit ? getComputedStyle(suit).fill : 'no suit drawn', getComputedStyle(e).color]; })")
            for card, fill, colour in colours:
                assert fill == colour, (card, fill, colour)
                assert (fill == "rgb(192, 0, 26)") == (card[1] in "hd"), (card, fill)
        shoot(page, f"card-faces-{width}")
    finally:
        context.close()
