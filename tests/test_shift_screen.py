"""The shift page of the supervisor's screen (issue 27, point 4), in real Chromium (Playwright,
Debian's chromium) against `tablectl run --web` and standalone emulators: a supervisor signed in,
a dealer countersigning with their id and PIN, opens the table with an inventory by denomination,
the dealer deals rounds, a fill, a shift change, the close, the drop; the report's plot shows the
cumulative settled win against its expectation and the 95 % band; the signed report downloaded
from the page is accepted by the table's public key and refused once a byte changes. The same
page on a 390x844 phone scrolls no sideways; after a restart it asks to sign in again and reads
the table's state afresh. Refusals are said beside the button pressed."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from console_helpers import (DEVICE_STEPS, PEOPLE, ApiDealer, BenchTable, at_page, chromium_path, enter_sign_in,
                             screenshot_dir, tablectl, wait_until)
from table.keys import load_public_key
from table.day.signed_report import check_signed_report

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(420)]
STEP_MS = 30_000
DEALER, DEALER_PIN = "D-4", PEOPLE["D-4"][1]


@pytest.fixture(autouse=True)
def no_leaks(no_leaks_but):
    """conftest's leak check, but for Playwright's own pool threads (``asyncio_N``)."""
    yield from no_leaks_but(lambda t: t.name.startswith("asyncio_"))


@pytest.fixture
def bench(tmp_path):
    # a casino's table: no round is dealt until the dealer and a supervisor open it
    table = BenchTable(tmp_path / "bench", seats=3, rounds=50, extra="[gaming_day]\nprocedures_required = true\n")
    try:
        yield table
    finally:
        table.stop()


def ready_for_bets(dealer: ApiDealer, timeout_s: float = 60.0) -> dict:
    """The dealer's hands do the devices' steps until the table opens a round for bets (where
    a real table takes a procedure, before the first bet) or, closed, waits for people to open
    it; returns that status."""
    end = time.monotonic() + timeout_s
    done: set[tuple] = set()
    while True:
        st = dealer.request({"action": "status"})
        w = st.get("waiting_for") or {}
        action = w.get("action")
        if action in ("close_bets", "place_bets", "table_procedure"):
            return st
        # once per step (ApiDealer's rule): a status a moment old can still ask for a step just done
        step = (action, w.get("colour"), st.get("rounds_played"), (st.get("round") or {}).get("round_id"))
        if action in DEVICE_STEPS and step not in done:
            done.add(step)
            dealer.hands.do(action, w.get("colour"))
        if time.monotonic() > end:
            raise AssertionError(f"the table did not open a round for bets: waiting for {w}")
        time.sleep(0.01)  # a status poll's pace, bounded by the deadline above


def sign_in(chromium, bench, person, viewport=(1280, 800), via_supervisor=False):
    """A new browser signs ``person`` in; the shift page at once, or ``via_supervisor``: from the
    supervisor's screen by its link."""
    context = chromium.new_context(viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.goto(bench.url + ("/" if via_supervisor else "/?next=/shift.html"))
    enter_sign_in(page, person, PEOPLE[person][1])
    if via_supervisor:
        page.wait_for_url(at_page("/supervisor.html"))
        page.click("#to-shift")
    page.wait_for_url(at_page("/shift.html"))
    page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
    return page


def amount(page, proc: str, text: str) -> None:
    unfold(page, proc)
    page.fill(f"#proc-{proc}-amount", text)


def state(page) -> str:
    page.wait_for_selector("#day-open", timeout=STEP_MS)
    return page.get_attribute("#day-open", "data-open")


def wait_state(page, value: str) -> None:
    page.wait_for_function("v => { const e = document.getElementById('day-open'); return e && e.dataset.open === v; }",
                           arg=value, timeout=STEP_MS)


def unfold(page, proc: str) -> None:
    """Open the procedure's fold (those that apply now are open; the others one tap away). The
    page unfolds what applies once the table's state is known: looked at before that, a tap on
    the fold could cross the page's own unfolding and close it again (seen on a loaded run)."""
    page.wait_for_selector("#procedures[data-state]", state="attached", timeout=STEP_MS)
    if not page.eval_on_selector(f"#proc-{proc}-panel", "e => e.open"):
        page.click(f"#proc-{proc}-title")
    page.wait_for_selector(f"#proc-{proc}-button", state="visible", timeout=STEP_MS)


def countersign(page, proc: str, pin: str = DEALER_PIN) -> None:
    unfold(page, proc)
    page.fill(f"#proc-{proc}-dealer", DEALER)
    page.fill(f"#proc-{proc}-pin", pin)


def inventory(page, proc: str, chips: dict[int, int]) -> None:
    unfold(page, proc)
    for cents, n in chips.items():
        page.fill(f"#proc-{proc}-count-{cents}", str(n))


def press(page, proc: str) -> str:
    """Press the form's button; the table's answer said beside it: ("done", words) or ("error", words)."""
    page.click(f"#proc-{proc}-button")
    page.wait_for_function("p => { const d = document.getElementById(`proc-${p}-done`), "
                           "e = document.getElementById(`proc-${p}-error`); "
                           "return (d && d.textContent) || (e && e.textContent); }", arg=proc, timeout=STEP_MS)
    error = page.text_content(f"#proc-{proc}-error")
    return f"error: {error}" if error else page.text_content(f"#proc-{proc}-done")


def show_report(page, period: str) -> None:
    page.select_option("#report-period", period)
    page.click("#report-show")
    page.wait_for_function("p => { const e = document.getElementById('report-shown');"
                           " return (e && e.dataset.period === p) || document.getElementById('report-error').textContent; }",
                           arg=period, timeout=STEP_MS)
    assert page.inner_text("#report-error") == "", page.inner_text("#report-error")
    assert page.errors == []


def cli_report(bench, kind: str) -> dict:
    r = subprocess.run(tablectl() + ["report", kind, "--journal", str(bench.journal), "--config", str(bench.config),
                                     "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def signed_report_status(bench, person) -> int:
    """The HTTP status of GET /api/v1/report/signed as ``person`` (None: no session)."""
    import urllib.error
    import urllib.request

    headers = {}
    if person:
        req = urllib.request.Request(bench.url + "/api/v1/session", method="POST", headers={"content-type": "application/json"},
                                     data=json.dumps({"person": person, "pin": PEOPLE[person][1]}).encode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            headers["authorization"] = f"Bearer {json.loads(resp.read())['token']}"
    try:
        with urllib.request.urlopen(urllib.request.Request(bench.url + "/api/v1/report/signed?period=day",
                                                           headers=headers), timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def no_sideways_scroll(page) -> None:
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"the page is {width} px wide on a {page.viewport_size['width']} px screen"


# long: one person's gaming day at the table, step by step, each step waiting on what the page says
def test_a_supervisor_runs_the_gaming_day_from_the_shift_page(chromium, bench, tmp_path):
    dealer = ApiDealer(bench)
    try:
        waiting = ready_for_bets(dealer)
        assert waiting["waiting_for"]["action"] == "table_procedure" and waiting["rounds_played"] == 0
        page = sign_in(chromium, bench, "S-17", via_supervisor=True)
        assert state(page) == "closed"
        assert "No round is dealt on a closed table" in page.inner_text("#day-state")
        # Refusals said beside the button pressed: a wrong PIN, a fill on a closed table, a form half filled.
        inventory(page, "open", {2500: 40, 10000: 20, 500: 100})
        page.wait_for_function("() => document.getElementById('proc-open-total').textContent === '$3,500.00'",
                               timeout=STEP_MS)
        assert page.inner_text("#proc-open-row-2500") == "$1,000.00"
        assert page.inner_text("#proc-open-chips") == "160 chips"
        countersign(page, "open", pin="000000")
        assert press(page, "open").startswith("error: ")
        assert state(page) == "closed"
        assert not page.is_visible("#proc-fill-amount")  # a fill is for an open table: folded
        amount(page, "fill", "500")
        countersign(page, "fill")
        fill_refused = press(page, "fill")
        assert fill_refused.startswith("error: ") and "closed" in fill_refused, fill_refused
        amount(page, "credit", "12.345")
        countersign(page, "credit")
        assert "enter an amount of money" in press(page, "credit")
        assert page.input_value("#proc-credit-pin") == ""  # a PIN is never left in a form
        # Open: the opening inventory, countersigned by the dealer.
        countersign(page, "open")
        done = press(page, "open")
        assert done.startswith("Journaled: open, slip ") and "$3,500.00" in done and "D-4 and S-17" in done, done
        wait_state(page, "open")
        assert page.get_attribute("#day-shift", "data-shift") == "1"
        # The dealer deals three rounds; a fill; a shift change to the incoming dealer; two rounds more.
        dealer.deal(3)
        ready_for_bets(dealer)
        amount(page, "fill", "500")
        countersign(page, "fill")
        assert "$500.00" in press(page, "fill")
        inventory(page, "shift_change", {2500: 40, 10000: 15, 500: 100})
        page.fill("#proc-shift_change-opener", "D-7")
        page.fill("#proc-shift_change-opener-pin", PEOPLE["D-7"][1])  # the incoming dealer signs too
        countersign(page, "shift_change")
        assert "D-7 opens shift 2" in press(page, "shift_change")
        page.wait_for_function("() => { const e = document.getElementById('day-shift'); return e && e.dataset.shift === '2'; }",
                               timeout=STEP_MS)
        # the shift handed over ends the outgoing dealer's session: the incoming dealer deals on
        from websockets.exceptions import ConnectionClosed

        with pytest.raises(ConnectionClosed):
            dealer.request({"action": "status"})
        dealer.close()
        dealer = ApiDealer(bench, person="D-7")
        dealer.deal(5)
        ready_for_bets(dealer)
        # Close with the closing inventory; the drop after the count makes the statistical win.
        inventory(page, "close", {2500: 40})
        countersign(page, "close")
        assert "$1,000.00" in press(page, "close")
        wait_state(page, "closed")
        day = cli_report(bench, "day")
        assert day["rounds"] == 5
        # statistical win = closing - opening + credits - fills + drop: a drop that makes it the settled win
        drop = day["settled_win"] + 3_500_00 - 1_000_00 + 500_00
        amount(page, "drop", f"{drop / 100:,.2f}")
        assert page.inner_text("#proc-drop-amount-said") == f"${drop / 100:,.2f}"
        page.fill("#proc-drop-day", day["gaming_day"])
        countersign(page, "drop")
        assert "Journaled: drop" in press(page, "drop")
        # The day's report: the figures, the plot with its band, nothing flagged by the count.
        show_report(page, "day")
        assert page.get_attribute("#report-rounds", "data-rounds") == "5"
        assert page.get_attribute("#report-settled", "data-cents") == str(day["settled_win"])
        assert page.get_attribute("#report-statistical", "data-known") == "yes"
        assert "equals the settled win" in page.inner_text("#report-statistical")
        plot = page.locator("#report-plot")
        assert plot.get_attribute("data-rounds") == "5"
        band = page.get_attribute("#report-plot path.band", "d")
        assert band and band.count("L") >= 8 and band.endswith("Z")  # upper and lower edge over 5 rounds
        assert page.locator("#report-plot path.settled").count() == 1
        assert page.locator("#report-plot path.expected").count() == 1
        assert "settled win is" in page.text_content("#report-plot-desc")
        page.screenshot(path=str(screenshot_dir() / "shift-day-report.png"), full_page=True)
        # The shift's report: shift 2, two rounds.
        show_report(page, "shift")
        assert page.get_attribute("#report-plot", "data-rounds") == "2"
        # The signed report, downloaded from the page, checked with the table's public key only.
        show_report(page, "day")
        with page.expect_download(timeout=STEP_MS) as info:
            page.click("#report-download")
        saved = tmp_path / info.value.suggested_filename
        info.value.save_as(saved)
        assert saved.name.endswith(".signed.json")
        data = saved.read_bytes()
        found = check_signed_report(data, [load_public_key(bench.public_key_file)])
        assert found.ok, found.problem
        for k in ("rounds", "settled_win", "handle", "house_result", "statistical"):
            assert found.report[k] == day[k] if k != "statistical" else found.report[k]["known"], k
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x01
        assert not check_signed_report(bytes(flipped), [load_public_key(bench.public_key_file)]).ok
        ok = subprocess.run(tablectl() + ["audit", "report", str(saved), "--public-key", str(bench.public_key_file)],
                            capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        # The signed report is the day_report query's: a dealer's session may not have it, nor no session.
        assert signed_report_status(bench, "D-4") == 403
        assert signed_report_status(bench, None) == 401
        # Print: the report alone.
        page.emulate_media(media="print")
        assert not page.is_visible("#procedures") and not page.is_visible("header.bar")
        assert page.is_visible("#report-plot") and page.is_visible(".print-head")
        page.screenshot(path=str(screenshot_dir() / "shift-report-print.png"), full_page=True)
        page.emulate_media(media="screen")
        assert page.errors == []
        # A phone: a second supervisor's 390x844 screen, the same page, no sideways scroll.
        phone = sign_in(chromium, bench, "S-18", viewport=(390, 844))
        assert state(phone) == "closed"
        no_sideways_scroll(phone)
        show_report(phone, "day")
        phone.wait_for_selector("#report-plot path.band", timeout=STEP_MS)
        no_sideways_scroll(phone)
        phone.screenshot(path=str(screenshot_dir() / "shift-phone.png"), full_page=True)
        phone.locator("#report").scroll_into_view_if_needed()
        phone.screenshot(path=str(screenshot_dir() / "shift-phone-report.png"))  # what the phone's screen shows
        assert phone.errors == []
    finally:
        dealer.close()
    # The table restarts: the page says sign in again; signed in, it reads the state afresh.
    bench.kill()
    bench.start()
    # the front door listens while the table starts (journal, drivers): its status answers once
    # it is up, and the page, asking again every 2 s at most, is live soon after that
    api = ApiDealer(bench)
    wait_until(lambda: api.request({"action": "status"}).get("table_day"), 120, "the restarted table's status")
    api.close()
    page.wait_for_selector("#sign-in-again", timeout=STEP_MS)
    page.click("#sign-in-again")  # the sign-in page: Enter is heard once its button is enabled
    enter_sign_in(page, "S-17", PEOPLE["S-17"][1])
    page.wait_for_url(at_page("/shift.html"))
    page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
    wait_state(page, "closed")
    assert page.errors == []
    page.screenshot(path=str(screenshot_dir() / "shift-after-restart.png"), full_page=True)


def test_a_fill_whose_answer_was_lost_is_sent_again_from_the_page_and_journaled_once(chromium, bench):
    """The connection drops after the table journaled a fill and before its answer reached the
    page (Playwright's WebSocket route keeps the answer back and closes the page's socket, as a
    Wi-Fi drop would). The page says no answer came and that sending the same form again is
    safe; the supervisor types the dealer's PIN again and presses the button: the page says the
    fill was journaled when first sent, and the table's record holds one fill of $500, not two
    (docs/console.md, a retry makes no second slip)."""
    dealer = ApiDealer(bench)
    lost: dict = {"fill_id": None, "answer": None}

    def route(ws):
        server = ws.connect_to_server()

        def from_page(message):
            try:
                req = json.loads(message)
            except (TypeError, ValueError):
                req = {}
            if req.get("action") == "table_procedure" and req.get("procedure") == "fill" and lost["answer"] is None:
                lost["fill_id"] = req.get("id")
            server.send(message)

        def from_server(message):
            try:
                reply = json.loads(message)
            except (TypeError, ValueError):
                reply = {}
            if lost["fill_id"] is not None and lost["answer"] is None and reply.get("id") == lost["fill_id"]:
                lost["answer"] = reply  # journaled at the table; the page never hears of it
                ws.close()
                return
            ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    context.route_web_socket("**/api/v1/ws", route)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    try:
        assert ready_for_bets(dealer)["waiting_for"]["action"] == "table_procedure"
        page.goto(bench.url + "/?next=/shift.html")
        enter_sign_in(page, "S-17", PEOPLE["S-17"][1])
        page.wait_for_url(at_page("/shift.html"))
        page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
        inventory(page, "open", {2500: 40})
        countersign(page, "open")
        assert press(page, "open").startswith("Journaled: open")
        wait_state(page, "open")
        amount(page, "fill", "500")
        countersign(page, "fill")
        said = press(page, "fill")
        assert said.startswith("error: no answer from the table") and "send it again as it is" in said, said
        assert lost["answer"] and lost["answer"]["ok"], lost  # the table did journal it
        page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)  # the page reconnected
        assert page.input_value("#proc-fill-amount") == "500"  # the form kept, the PIN not
        assert page.input_value("#proc-fill-pin") == ""
        countersign(page, "fill")
        again = press(page, "fill")
        assert again.startswith("Journaled when first sent") and "$500.00" in again, again
        assert f"slip {lost['answer']['slip']['slip']}" in again, (again, lost["answer"])
        # A new fill, the same form filled in afresh after the answer: a new ask, a second slip.
        amount(page, "fill", "200")
        countersign(page, "fill")
        assert press(page, "fill").startswith("Journaled: fill")
        day = cli_report(bench, "day")
        assert day["statistical"]["fills"] == 700_00, day["statistical"]  # $500 once and $200, not $500 twice
        assert page.errors == []
    finally:
        dealer.close()
        context.close()


def test_the_drop_forms_gaming_day_is_the_tables_not_the_browsers_date(chromium, bench):
    """The drop form's gaming day defaulted to the browser's date (its UTC date, at that): a
    supervisor's browser whose clock says another day (or a night shift past midnight, before
    the gaming day's start) entered the drop for the wrong day. It defaults to the table's
    gaming day (the status)."""
    api = ApiDealer(bench)  # the front door listens while the drivers start: the table's day once it is up
    table_day = wait_until(lambda: api.request({"action": "status"})["table_day"], 60, "the table's status")["gaming_day"]
    api.close()
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.clock.set_fixed_time("2031-05-05T12:00:00Z")  # the browser's clock says another day
    try:
        page.goto(bench.url + "/?next=/shift.html")
        enter_sign_in(page, "S-17", PEOPLE["S-17"][1])
        page.wait_for_url(at_page("/shift.html"))
        page.wait_for_selector('#connection[data-state="live"]', timeout=STEP_MS)
        assert page.evaluate("() => new Date().toISOString().slice(0, 10)") == "2031-05-05"
        page.wait_for_function("(d) => document.getElementById('proc-drop-day').value === d", arg=table_day,
                               timeout=STEP_MS)
    finally:
        context.close()
