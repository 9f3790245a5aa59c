"""The web console's figures, measured in the browser: event-to-screen latency and the page's memory.

A real-table controller (``tablectl run --web``) against standalone emulators deals
ROUNDS rounds, its dealer working at machine speed (the table API for the screen's
steps, the emulators' control ports for the hands: ``tests/console_helpers.ApiDealer``),
while the dealer's screen is open in Debian's chromium (Playwright). The page records, for every event, the time from the event's
journal timestamp (the controller's clock; same machine) to the animation frame
that draws it (``model.perf`` in ``web_static/js/model.js``). Its JS heap is read
after a forced garbage collection (Chrome DevTools Protocol) as the rounds go by.

    python bench/web.py [--rounds 1000] [--json]

Prints latency p50/p99/max (ms) over every event of the run, the heap (bytes) at
each sample point, and whether memory stayed flat (the last sample within 25 % of
the one after the first 100 rounds). Targets (issue 16): p99 under 250 ms, flat memory.
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

from console_helpers import CHROMIUM_ARGS, PEOPLE, chromium_path  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--seats", type=int, default=3)
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
            browser.close()
    finally:
        bench.stop()
        shutil.rmtree(work, ignore_errors=True)
    ms = [s["ms"] for s in samples]
    first, last = heap[min(heap, key=int)], heap[max(heap, key=int)]
    out = {"rounds": ns.rounds, "seats": ns.seats, "events": len(ms),
           "latency_ms": {"p50": percentile(ms, 50), "p99": percentile(ms, 99), "max": max(ms) if ms else None},
           "heap_bytes": heap, "dom_nodes": dom_nodes, "memory_growth": round(last / first - 1, 3),
           "flat_memory": last <= first * 1.25, "p99_under_250_ms": percentile(ms, 99) < 250}
    if ns.json:
        print(json.dumps(out))
    else:
        print(f"{out['events']} events over {ns.rounds} rounds: event-to-screen p50 {out['latency_ms']['p50']:.0f} ms, "
              f"p99 {out['latency_ms']['p99']:.0f} ms, max {out['latency_ms']['max']:.0f} ms")
        print("JS heap after GC: " + ", ".join(f"round {k}: {v / 1e6:.2f} MB" for k, v in heap.items())
              + f" ({'flat' if out['flat_memory'] else 'GROWING'}, {out['memory_growth']:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
