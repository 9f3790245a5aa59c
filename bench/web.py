"""The web console's figures, measured in the browser: card-dealt-to-screen and click-to-instruction
latency, event-to-screen latency, and the page's memory, in one run with the table.

A real-table controller (``tablectl run --web``) against standalone emulators deals
ROUNDS rounds at machine speed (the table API for the screen's steps,
``tests/console_helpers.ApiDealer``) while the dealer's screen is open; then a fresh
table deals CLICK_ROUNDS rounds by clicking its dealer's screen, as a dealer does (its
buttons; the hands on the emulators' control ports): the page times each click to the
next instruction shown in its banner (``performance.now()`` at the click, then at the
first animation frame whose banner says something else the dealer must do). For every event the
page records the time from the event's journal timestamp (the controller's clock; same
machine) to the animation frame that draws it (``model.perf`` in ``web_static/js/model.js``):
for ``card_dealt`` that is a card dealt to its face-down card on the screen. Its JS heap
is read after a forced garbage collection (Chrome DevTools Protocol) as the rounds go by.

    python bench/web.py [--rounds 1000] [--click-rounds 20] [--json]

Prints card-dealt-to-screen p50/p99, click-to-instruction p50/p99, latency p50/p99/max
(ms) over every event of the run, the heap (bytes) at each sample point, and whether
memory stayed flat (the last sample within 25 % of the one after the first 100 rounds).
Targets: p99 under 250 ms, flat memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from console_helpers import CHROMIUM_ARGS, DEVICE_STEPS, PEOPLE, chromium_path  # noqa: E402

#: installed in the dealer's page: each click on a button, timed to the first frame whose
#: banner gives a new instruction (its words changed, and it names an action, not "working", nor
#: the moment between two seats' decisions while the table takes the last one)
CLICK_TIMER = """() => {
  window.__clicks = [];
  let pending = null;
  const banner = () => { const w = document.getElementById('now-what'); return w ? w.textContent : ''; };
  document.addEventListener('click', (ev) => {
    if (ev.target.closest('button')) pending = { t: performance.now(), before: banner() };
  }, true);
  const look = () => {
    if (pending) {
      const w = document.getElementById('now-what');
      if (w && w.dataset.waitingAction && !w.dataset.between && w.textContent !== pending.before) {
        window.__clicks.push(performance.now() - pending.t);
        pending = null;
      }
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}"""


def click_rounds(page, bench, rounds: int, timeout_s: float = 600.0) -> None:
    """Deal ``rounds`` rounds by clicking the dealer's screen (its banner says what to do),
    the hands on the emulators; returns at the next instruction after the last collect."""
    import time

    from console_helpers import Hands

    hands = Hands(bench)
    end = time.monotonic() + timeout_s
    draws = 0
    collected = 0
    while collected < rounds:
        if time.monotonic() > end:
            raise TimeoutError(f"clicked {collected} of {rounds} rounds")
        page.wait_for_selector("#now-what", timeout=30_000)
        action = page.get_attribute("#now-what", "data-waiting-action") or ""
        before = page.inner_text("#now")
        if action in DEVICE_STEPS:
            if action == "draw_card":
                if draws >= 3 * page.locator("section.seat[data-seat]").count():
                    page.wait_for_function("b => document.getElementById('now').innerText !== b", arg=before)
                    continue
                draws += 1
            hands.do(action, page.get_attribute("#now-what", "data-waiting-colour") or None)
        elif action in ("close_bets", "confirm_collect"):
            draws = 0
            collected += action == "confirm_collect"
            page.click("#do-now")
        elif action == "decide":
            button = page.locator(".decide button.play").first
            if button.count():
                button.click()
        page.wait_for_function("b => document.getElementById('now').innerText !== b", arg=before, timeout=30_000)


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


# long: one bench run read top to bottom (start the table, the pages, deal, time, print); left for planning
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--seats", type=int, default=3)
    ap.add_argument("--click-rounds", type=int, default=20, help="rounds dealt by clicking the screen first")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ns = ap.parse_args()
    chromium = chromium_path()
    if chromium is None:
        print("bench/web.py: Debian's chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    import threading

    from console_helpers import ApiDealer, BenchTable

    work = Path(tempfile.mkdtemp(prefix="bench-web-"))
    bench = BenchTable(work / "table", seats=ns.seats, rounds=ns.rounds + 1)
    samples: list[dict] = []
    heap: dict[str, int] = {}
    dom_nodes = None
    failure: list[BaseException] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            page.goto(bench.url + "/")
            page.fill("#person", "D-4")
            page.fill("#pin", PEOPLE["D-4"][1])
            page.keyboard.press("Enter")
            page.wait_for_selector('#connection[data-state="live"]', timeout=30_000)
            dealer = ApiDealer(bench)
            dealer.seats = ns.seats

            def deal() -> None:
                try:
                    dealer.deal(ns.rounds)
                except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                    failure.append(exc)

            worker = threading.Thread(target=deal, name="bench-dealer")
            worker.start()
            heap_marks = {min(ns.rounds, m) for m in (100, ns.rounds // 4, ns.rounds // 2, 3 * ns.rounds // 4,
                                                      ns.rounds)}
            # the page keeps its last 2,000 samples: read them every 25 rounds (about 500 events)
            marks = sorted(heap_marks | set(range(25, ns.rounds, 25)))
            for mark in marks:
                while not failure:
                    try:
                        page.wait_for_function("n => window.threecard.model.rounds > n"
                                               " || ((window.threecard.model.round || {}).closed"
                                               " && window.threecard.model.rounds >= n)", arg=mark, timeout=5_000)
                        break
                    except Exception:  # noqa: BLE001 - a timeout: the dealer still works
                        if not worker.is_alive():
                            break
                if failure:
                    raise failure[0]
                batch = page.evaluate("() => { const s = window.threecard.model.perf.samples;"
                                      " const out = s.slice(); s.length = 0; return out; }")
                samples.extend(batch)
                if mark not in heap_marks:
                    continue
                cdp.send("HeapProfiler.collectGarbage")
                metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
                heap[str(mark)] = int(metrics["JSHeapUsedSize"])
                dom_nodes = int(metrics.get("Nodes", 0))
            worker.join(60)
            dealer.close()
            page.close()
            bench.stop()
            # Then a fresh table dealt by clicking its dealer's screen (no hand-over between two
            # dealers mid-round): click to next instruction, and more cards to the screen.
            bench = BenchTable(work / "clicked", seats=ns.seats, rounds=ns.click_rounds + 1)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(bench.url + "/")
            page.fill("#person", "D-4")
            page.fill("#pin", PEOPLE["D-4"][1])
            page.keyboard.press("Enter")
            page.wait_for_selector('#connection[data-state="live"]', timeout=30_000)
            page.evaluate(CLICK_TIMER)
            click_rounds(page, bench, ns.click_rounds)
            clicks = page.evaluate("() => window.__clicks.slice()")
            samples.extend(page.evaluate("() => window.threecard.model.perf.samples.slice()"))
            browser.close()
    finally:
        bench.stop()
        shutil.rmtree(work, ignore_errors=True)
    ms = [s["ms"] for s in samples]
    cards = [s["ms"] for s in samples if s.get("type") == "card_dealt"]
    first, last = heap[min(heap, key=int)], heap[max(heap, key=int)]
    out = {"rounds": ns.rounds, "click_rounds": ns.click_rounds, "seats": ns.seats, "events": len(ms),
           "card_to_screen_ms": {"n": len(cards), "p50": percentile(cards, 50), "p99": percentile(cards, 99)},
           "click_to_instruction_ms": {"n": len(clicks), "p50": percentile(clicks, 50),
                                       "p99": percentile(clicks, 99)},
           "latency_ms": {"p50": percentile(ms, 50), "p99": percentile(ms, 99), "max": max(ms) if ms else None},
           "heap_bytes": heap, "dom_nodes": dom_nodes, "memory_growth": round(last / first - 1, 3),
           "flat_memory": last <= first * 1.25, "p99_under_250_ms": percentile(ms, 99) < 250}
    if ns.json:
        print(json.dumps(out))
    else:
        c, k = out["card_to_screen_ms"], out["click_to_instruction_ms"]
        print(f"card dealt to screen: p50 {c['p50']:.0f} ms, p99 {c['p99']:.0f} ms ({c['n']} cards); "
              f"click to next instruction: p50 {k['p50']:.0f} ms, p99 {k['p99']:.0f} ms ({k['n']} clicks, "
              f"{ns.click_rounds} rounds dealt by clicking)")
        print(f"{out['events']} events over {ns.rounds} rounds: event-to-screen p50 {out['latency_ms']['p50']:.0f} ms, "
              f"p99 {out['latency_ms']['p99']:.0f} ms, max {out['latency_ms']['max']:.0f} ms")
        print("JS heap after GC: " + ", ".join(f"round {k}: {v / 1e6:.2f} MB" for k, v in heap.items())
              + f" ({'flat' if out['flat_memory'] else 'GROWING'}, {out['memory_growth']:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
