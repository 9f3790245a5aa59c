"""Round throughput of ``tablectl run --simulate``.

    python bench/rounds.py [--json] [--rounds N] [--seats 1,3,7] [--transports serial,usb] [--baseline DIR]
    python bench/rounds.py --drivers [--json] [--rounds N] [--seats 7] [--pairs 3]

``--baseline DIR``: also run another checkout (``git archive <commit> | tar -x -C DIR``)
the same way, each of its runs just after this checkout's, and print its rows
and ratios beside these (tree ``base``), and each figure of this checkout beside
the baseline's with the ratio and its limit: before and after in one run. Every
seat bets the fixed bet (``--ante-cents 1000``), so the tables compared are equal
(the same seats dealt every round); ``--players``: the seeded players instead.

For each transport (emulators on ptys, or as emulated USB devices behind
pyusb), each number of seats, without and with ``--journal``: runs
``tablectl run --simulate --seed 1 --json`` as its own process and prints

| figure | what |
| --- | --- |
| rounds_per_s | rounds dealt per second, first round to last (start-up excluded), from the moments each round's JSON reaches stdout (the run streams them) |
| start_to_first_round_s | process start to the first round on stdout |
| interpreter_start_s | the same Python's bare start and exit (``-c pass``), timed just before the run |
| start_over_interpreter_s | start_to_first_round_s - interpreter_start_s (target < 0.3 s) |
| cpu_ms_per_round | the process's user + system CPU from the first round to its exit ÷ rounds after the first |
| journal_bytes_per_round | the journal's files (database, WAL, head) at the end ÷ rounds |
| peak_rss_mb | the process's peak resident memory (the kernel's ``wait4`` accounting) |

Then, for each transport and number of seats, the ratios of the journaled run
to the unjournaled one measured just before it (judged as ratios in
one run, which a shared machine can hold where it cannot hold a rate):

| ratio | target |
| --- | --- |
| rounds_per_s_ratio (journaled ÷ unjournaled rounds/s) | >= 0.5 at 1, 3 and 7 seats |
| cpu_per_round_ratio (journaled ÷ unjournaled CPU a round) | <= 1.6 |

Journal size target: <= 8 KB a round at 7 seats.

``--drivers`` instead compares the two drivers in processes of their own
(``devices/apart/``) against the same drivers in the table's process, in one run:
a table in this process (the SPEC emulators on ptys, the virtual dealer, a
journal), the two forms run alternately ``--pairs`` times, each for ``--rounds``
rounds, and prints for each form

| figure | what |
| --- | --- |
| card_p50_ms, card_p99_ms | the card path: the shoe emulator sends a ``CardDrawn`` -> the table journals it -> its ACK reaches the shoe, from the emulator's own frames (every card of every round) |
| rounds_per_s | rounds dealt per second, first round to last |

and the ratios apart ÷ in process: ``card_p99_ratio`` (target <= 1.2, docs/drivers.md
"A driver's process") and ``rounds_per_s_ratio`` (in process ÷ apart: the slowdown).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tablectl import Run, count_marks, cpu_s, interpreter_start_s  # noqa: E402

ROUND_MARK = b'{"number": '


#: what bets: the fixed bet on every seat, so a table of N seats deals N hands a round in every
#: checkout compared (seeded players sit out and vary their bets, and an older checkout has none)
FIXED_BET = ["--ante-cents", "1000"]


def one(rounds: int, seats: int, transport: str, journal: bool, tree: str | None = None,
        players: bool = False) -> dict:
    bare = interpreter_start_s()
    with tempfile.TemporaryDirectory(prefix="bench-rounds-") as tmp:
        args = ["run", "--simulate", "--rounds", str(rounds), "--seats", str(seats), "--seed", "1", "--json",
                "--transport", transport, "--log-file", str(Path(tmp) / "run.log"), *([] if players else FIXED_BET)]
        jpath = Path(tmp) / "journal.sqlite3"
        if journal:
            args += ["--journal", str(jpath)]
        stamps: list[float] = []
        cpu_at_first: list[float | None] = []
        t0 = time.monotonic()
        run = Run(args, tree)

        def mark(n: int, t: float) -> None:
            stamps.append(t)
            if n == 1:
                cpu_at_first.append(cpu_s(run.proc.pid))

        out = count_marks(ROUND_MARK, mark, run)
        code, peak_kb, err = run.wait()
        if code != 0:
            raise SystemExit(f"tablectl {' '.join(args)} exited {code}: {err.strip()[-500:]}")
        doc = json.loads(out)
        dealt = len(doc["rounds"])
        jbytes = sum(f.stat().st_size for f in Path(tmp).glob("journal.sqlite3*")) if journal else None
        first = stamps[0] - t0 if stamps else None
        cpu0 = cpu_at_first[0] if cpu_at_first else None
        return {
            "tree": "base" if tree else "this", "transport": transport, "seats": seats, "journal": journal,
            "rounds": dealt,
            "rounds_per_s": round((len(stamps) - 1) / (stamps[-1] - stamps[0]), 1) if len(stamps) > 1 else None,
            "start_to_first_round_s": round(first, 3) if first is not None else None,
            "interpreter_start_s": round(bare, 3),
            "start_over_interpreter_s": round(first - bare, 3) if first is not None else None,
            "cpu_ms_per_round": (round((run.cpu_s - cpu0) * 1000 / (len(stamps) - 1), 2)
                                 if cpu0 is not None and len(stamps) > 1 else None),
            "journal_bytes_per_round": round(jbytes / dealt) if journal and dealt else None,
            "peak_rss_mb": round(peak_kb / 1024, 1),
        }


def drivers_run(rounds: int, seats: int, apart: bool) -> dict:
    """One table in this process, its drivers apart or in process (module docstring)."""
    import queue
    import threading

    from devices.apart import open_apart
    from devices.contract import DriverKind, OpenRequest
    from devices.plugins import open_driver
    from protocols.cards import BackColour
    from protocols.frame import decode_frame
    from protocols.messages import Ack, CardDrawn
    from simulators.table import SimulatedTable
    from table.console import Console
    from table.controller import TableController, TableTiming
    from table.custody import DeckCustody
    from table.journal import Journal
    from table.keys import generate
    from table.rules.settlement import Tables

    red, blue = BackColour.RED, BackColour.BLUE
    sent: dict[int, float] = {}
    path_ms: list[float] = []
    lock = threading.Lock()

    def on_frame(direction: str, data: bytes) -> None:  # the shoe's own frames: the card path's two ends
        now = time.perf_counter()
        frame = decode_frame(data)
        with lock:
            if direction == "tx" and frame.type == CardDrawn.TYPE:
                sent.setdefault(frame.seq, now)  # a resend keeps the first send
            elif direction == "rx" and frame.type == Ack.TYPE and frame.seq in sent:
                path_ms.append((now - sent.pop(frame.seq)) * 1000)

    with tempfile.TemporaryDirectory(prefix="bench-drivers-") as tmp, \
            SimulatedTable((red, blue), seed=1) as sim:
        sim.shoe.on_frame = on_frame
        events: queue.Queue = queue.Queue(maxsize=1024)
        journal = Journal(Path(tmp) / "journal.sqlite3", key=generate())
        opened = []
        for kind, url in (("shuffler", sim.shuffler_url), ("shoe", sim.shoe_url)):
            request = OpenRequest(DriverKind(kind), url, kind, events)
            opened.append(open_apart("spec", request) if apart else open_driver("spec", request))
        console = Console()
        ctl = TableController(opened[0], opened[1], events, sim.dealer, DeckCustody([("A", red), ("B", blue)]),
                              seats=seats, ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                              console=console, timing=TableTiming(event_timeout_s=10))
        try:
            ctl.prepare()
            stamps = []
            for _ in range(rounds):
                ctl.play_round()
                stamps.append(time.perf_counter())
        finally:
            ctl.close()
            for d in opened:
                d.close()
            journal.close()
    path_ms.sort()

    def pct(q: float) -> float:
        return round(path_ms[min(len(path_ms) - 1, int(q * len(path_ms)))], 3)

    return {"drivers": "apart" if apart else "in_process", "seats": seats, "rounds": rounds, "cards": len(path_ms),
            "card_p50_ms": pct(0.50), "card_p99_ms": pct(0.99),
            "rounds_per_s": round((len(stamps) - 1) / (stamps[-1] - stamps[0]), 1)}


def drivers_main(args: argparse.Namespace) -> int:
    """``--drivers``: apart against in process, alternately, in one run; the ratios."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    seats = int(args.seats.split(",")[-1])
    runs = [drivers_run(args.rounds, seats, apart) for _ in range(args.pairs) for apart in (False, True)]
    by = {form: [r for r in runs if r["drivers"] == form] for form in ("in_process", "apart")}

    def med(form: str, key: str) -> float:
        values = sorted(r[key] for r in by[form])
        return values[len(values) // 2]

    ratio = {"card_p99_ratio": round(med("apart", "card_p99_ms") / med("in_process", "card_p99_ms"), 3),
             "card_p50_ratio": round(med("apart", "card_p50_ms") / med("in_process", "card_p50_ms"), 3),
             "rounds_per_s_ratio": round(med("in_process", "rounds_per_s") / med("apart", "rounds_per_s"), 3),
             "target_card_p99_ratio": 1.2}
    if args.json:
        print(json.dumps({"runs": runs, "ratios": ratio}))
        return 0
    print(f"{'drivers':10} {'seats':>5} {'rounds':>6} {'cards':>5} {'card p50 ms':>11} {'card p99 ms':>11} {'rounds/s':>9}")
    for r in runs:
        print(f"{r['drivers']:10} {r['seats']:5} {r['rounds']:6} {r['cards']:5} {r['card_p50_ms']:11} "
              f"{r['card_p99_ms']:11} {r['rounds_per_s']:9}")
    print()
    print("apart / in process (medians of the pairs): card path p99 "
          f"{ratio['card_p99_ratio']}x (target <= 1.2x), p50 {ratio['card_p50_ratio']}x; "
          f"rounds/s in process / apart {ratio['rounds_per_s_ratio']}x")
    return 0


def ratios(runs: list[dict]) -> list[dict]:
    """Journaled ÷ unjournaled, per transport and seats (each pair from this one run)."""
    out = []
    for j in runs:
        if not j["journal"]:
            continue
        u = next((r for r in runs if not r["journal"] and r["transport"] == j["transport"]
                  and r["seats"] == j["seats"] and r["tree"] == j["tree"]), None)
        if u is None:
            continue
        rate = j["rounds_per_s"] / u["rounds_per_s"] if j["rounds_per_s"] and u["rounds_per_s"] else None
        cpu = j["cpu_ms_per_round"] / u["cpu_ms_per_round"] if j["cpu_ms_per_round"] and u["cpu_ms_per_round"] else None
        out.append({"tree": j["tree"], "transport": j["transport"], "seats": j["seats"],
                    "rounds_per_s_ratio": round(rate, 3) if rate else None,
                    "cpu_per_round_ratio": round(cpu, 3) if cpu else None})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--rounds", type=int, default=100, help="rounds per run (default 100)")
    ap.add_argument("--seats", default="1,3,7", help="comma-separated seat counts (default 1,3,7)")
    ap.add_argument("--transports", default="serial,usb", help="serial (ptys) and/or usb (default both)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout run alongside (tree 'base')")
    ap.add_argument("--drivers", action="store_true",
                    help="compare drivers in processes of their own with drivers in the table's process")
    ap.add_argument("--pairs", type=int, default=3, help="--drivers: runs of each form, alternately (default 3)")
    ap.add_argument("--players", action="store_true",
                    help="seeded players bet (they sit out and vary their bets) instead of the fixed bet "
                         "(--ante-cents 1000) on every seat: compare only checkouts that both have them")
    args = ap.parse_args()
    if args.drivers:
        return drivers_main(args)
    trees = [None] + ([args.baseline] if args.baseline else [])
    runs = [one(args.rounds, int(s), tr, j, tree, args.players) for tr in args.transports.split(",")
            for s in args.seats.split(",") for j in (False, True) for tree in trees]
    pairs = ratios(runs)
    against = against_base(runs)
    if args.json:
        print(json.dumps({"rounds_per_run": args.rounds, "bets": "players" if args.players else "fixed",
                          "runs": runs, "ratios": pairs, "this_over_base": against, "limits": LIMITS}))
        return 0
    print(f"{'tree':4} {'transport':9} {'seats':>5} {'journal':>7} {'rounds/s':>9} {'CPU ms/round':>12} {'first round s':>13} "
          f"{'bare python s':>13} {'journal B/round':>15} {'peak RSS MB':>11}")
    for r in runs:
        print(f"{r['tree']:4} {r['transport']:9} {r['seats']:5} {'yes' if r['journal'] else 'no':>7} {r['rounds_per_s']!s:>9} "
              f"{r['cpu_ms_per_round']!s:>12} {r['start_to_first_round_s']!s:>13} {r['interpreter_start_s']!s:>13} "
              f"{r['journal_bytes_per_round']!s:>15} {r['peak_rss_mb']:11}")
    print()
    print(f"{'tree':4} {'transport':9} {'seats':>5} {'journaled/unjournaled rounds/s':>30} {'CPU a round, journaled/unjournaled':>34}")
    for p in pairs:
        print(f"{p['tree']:4} {p['transport']:9} {p['seats']:5} {p['rounds_per_s_ratio']!s:>30} {p['cpu_per_round_ratio']!s:>34}")
    if against:
        print()
        print("this checkout beside the baseline, same run (each run just after the other's):")
        print(f"{'transport':9} {'seats':>5} {'journal':>7} {'figure':<26} {'this':>9} {'base':>9} {'this/base':>9} limit")
        for a in against:
            for k, (mine, base, ratio) in a["figures"].items():
                print(f"{a['transport']:9} {a['seats']:5} {'yes' if a['journal'] else 'no':>7} {k:<26} {mine!s:>9} "
                      f"{base!s:>9} {ratio!s:>9} {LIMITS.get(k, '')}")
    return 0


#: each figure's limit (README.md, "Benches, labs and fault scenarios")
LIMITS = {"start_over_interpreter_s": "< 0.3", "journal_bytes_per_round": "<= 8192 at 7 seats"}


def against_base(runs: list[dict]) -> list[dict]:
    """Each run of this checkout beside the baseline's run of the same transport, seats and
    journal: (this, base, this ÷ base) for each figure."""
    base = {(r["transport"], r["seats"], r["journal"]): r for r in runs if r["tree"] == "base"}
    out = []
    for r in runs:
        b = base.get((r["transport"], r["seats"], r["journal"]))
        if r["tree"] != "this" or b is None:
            continue
        figs = {}
        for k in ("rounds_per_s", "cpu_ms_per_round", "start_over_interpreter_s", "start_to_first_round_s",
                  "journal_bytes_per_round", "peak_rss_mb"):
            mine, theirs = r.get(k), b.get(k)
            figs[k] = (mine, theirs, round(mine / theirs, 3) if mine is not None and theirs else None)
        out.append({"transport": r["transport"], "seats": r["seats"], "journal": r["journal"], "figures": figs})
    return out


if __name__ == "__main__":
    sys.exit(main())
