"""Time of the gaming day's report for a 1,600-round day (under 5 s), and the cost of the shift page's asks.

    python bench/day_report.py [--rounds 1600] [--seats 7] [--side none|pp|all] [--json]
    python bench/day_report.py --asks [--baseline DIR] [--pairs 3] [--poll-s 5] [--rounds-per-hour 100]

Writes a journal of ROUNDS rounds as the table journals them (each round's
``open``, ``decisions_done``, ``dealer_reveal`` and ``settle`` entries: seats
dealt from a shuffled deck, Q-6-4 decisions, settled by ``settle_seat``), then
times ``tablectl report day`` on it in its own process (start-up included) and
the report in this process (journal read + exact expectation of every round +
theoretical win), wall and CPU time (on a loaded machine the CPU time is what
an idle one would take). ``--side``: ante only, with Pair Plus, or with Pair Plus, Six
Card Bonus and progressive. The figures are whatever this machine gives: say
whether it was loaded.

``--asks``: the ``day_report`` query as the supervisor's shift page asks it
(:class:`table.interfaces.day_view.DayReportQueries`, in a process of its own on a
copy of the day's journal): the CPU of an ask when nothing was committed since the
last (``ask_unchanged_ms``), of an ask after each round committed
(``ask_after_round_ms``: the page asks after every round), and of the page open for
an hour (``page_hour_core_pct``: ``3600 / poll-s`` asks, ``rounds-per-hour`` of them
after a round, as a share of one core; limit 2 %). ``--baseline DIR``: the same in
another checkout (``git archive <commit> | tar -x -C DIR``), run alternately with
this one ``--pairs`` times; each figure is printed beside its limit and the
baseline's, with the ratio (medians of the pairs, from one run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocols.cards import Card  # noqa: E402
from table.day.day_report import read_journal, report  # noqa: E402
from table.journal import Journal  # noqa: E402
from table.rules.settlement import Tables, settle_seat  # noqa: E402
from table.rules.strategy import plays_q64  # noqa: E402
from table.rules.wagers import Decision, Wagers  # noqa: E402

SIDES = {
    "none": ([], dict()),
    "pp": (["--pair-plus", "example-pp-649a12d"], dict(pair_plus=500)),
    "all": (["--pair-plus", "example-pp-649a12d", "--six-card", "example-6cb-649a12f-e", "--progressive",
             "example-prog-649a12e", "--meter-cents", "10000000"], dict(pair_plus=500, six_card=500, progressive=100)),
}


def write_day(path: Path, rounds: int, seats: int, side: str, seed: int = 1) -> Tables:
    args, wagers = SIDES[side]
    tables = Tables.load("pa-649a12b-1", "example-pp-649a12d" if "pair_plus" in wagers else None,
                         "example-6cb-649a12f-e" if "six_card" in wagers else None,
                         "example-prog-649a12e" if "progressive" in wagers else None,
                         10_000_000 if "progressive" in wagers else None)
    rng = random.Random(seed)
    deck = [Card.from_index(i) for i in range(52)]
    w = Wagers(1000, **wagers)
    with Journal(path) as j:
        for n in range(1, rounds + 1):
            rid = f"r{n:05d}-bench"
            cards = rng.sample(deck, 3 * seats + 3)
            hands = {s: cards[3 * (s - 1):3 * s] for s in range(1, seats + 1)}
            dealer = cards[-3:]
            dec = {s: Decision.PLAY if plays_q64(h) else Decision.FOLD for s, h in hands.items()}
            res = {s: settle_seat(w, dec[s], h, dealer, tables) for s, h in hands.items()}
            with j.batch():
                j.append("round", round_id=rid, step="open", number=n,
                         wagers={str(s): {k: v for k, v in vars(w).items() if v} for s in hands})
                j.append("round", round_id=rid, step="decisions_done", number=n,
                         decisions={str(s): d.value for s, d in dec.items()},
                         hands={str(s): [str(c) for c in h] for s, h in hands.items()})
                j.append("round", round_id=rid, step="dealer_reveal", number=n, dealer_hand=[str(c) for c in dealer])
                j.append("round", round_id=rid, step="settle", number=n,
                         results={str(s): st.to_record() for s, st in res.items()})
                j.append("round", round_id=rid, step="closed", number=n)
    return tables


ASKER = r"""
import json, os, shutil, sys, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
from table.interfaces.day_view import DayReportQueries
from table.journal import Journal
from table.rules.settlement import Tables
src, work, extra = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(x) for x in Path(sys.argv[4]).read_text().splitlines()]
shutil.copy(src, work)
tables = Tables.load("pa-649a12b-1", "example-pp-649a12d")
q = DayReportQueries(work, tables)
def ask(period):
    c = time.process_time()
    r = q.day_report({"period": period})
    return (time.process_time() - c) * 1000, r
first, r0 = ask("day")
unchanged = [ask(p)[0] for p in ("day", "shift") * 5]
after = []
with Journal(work) as j:
    for n, round_rows in enumerate(rows[:extra]):
        with j.batch():
            for kind, fields in round_rows:
                j.append(kind, **fields)
        after.append(ask("day" if n % 2 else "shift")[0])
print(json.dumps({"first_ask_ms": first, "ask_unchanged_ms": sorted(unchanged)[len(unchanged) // 2],
                  "ask_after_round_ms": sorted(after)[len(after) // 2], "rounds": r0["rounds"]}))
"""


def round_rows(rounds: int, seats: int, side: str, seed: int = 2, start: int = 100_000) -> list[list]:
    """The entries of ``rounds`` more rounds as :func:`write_day` journals them (kind, fields)."""
    with tempfile.TemporaryDirectory(prefix="bench-rows-") as tmp:
        path = Path(tmp) / "j.sqlite3"
        write_day(path, rounds, seats, side, seed)
        with Journal(path, read_only=True) as j:
            out: dict[str, list] = {}
            for e in j.entries("round"):
                rid = f"r{start + int(e.body['number'])}-bench"
                body = {**e.body, "number": start + int(e.body["number"])}
                out.setdefault(rid, []).append(["round", {"round_id": rid, **body}])
    return list(out.values())


def asks(a: argparse.Namespace) -> dict:
    """The ``--asks`` figures, this checkout and the baseline's, alternately."""
    trees = {"this": Path(__file__).resolve().parent.parent}
    if a.baseline:
        trees["base"] = Path(a.baseline).resolve()
    got: dict[str, list[dict]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="bench-asks-") as tmp:
        day = Path(tmp) / "day.sqlite3"
        write_day(day, a.rounds, a.seats, "pp")
        rows = Path(tmp) / "rows.jsonl"
        rows.write_text("\n".join(json.dumps(r) for r in round_rows(a.extra, a.seats, "pp")))
        for _ in range(a.pairs):
            for name, tree in trees.items():
                work = Path(tmp) / f"{name}.sqlite3"
                for f in Path(tmp).glob(f"{name}.sqlite3*"):
                    f.unlink()
                r = subprocess.run([sys.executable, "-c", ASKER, str(day), str(work), str(a.extra), str(rows)],
                                   cwd=tree, capture_output=True, text=True)
                if r.returncode:
                    raise SystemExit(f"{name} ({tree}): {r.stderr.strip()[-600:]}")
                got[name].append(json.loads(r.stdout))
    out: dict = {"rounds": a.rounds, "seats": a.seats, "poll_s": a.poll_s, "rounds_per_hour": a.rounds_per_hour,
                 "load_average_1min": round(os.getloadavg()[0], 1)}
    for name, runs in got.items():
        fig = {k: round(sorted(r[k] for r in runs)[len(runs) // 2], 2)
               for k in ("first_ask_ms", "ask_unchanged_ms", "ask_after_round_ms")}
        per_hour = 3600 / a.poll_s
        after = min(a.rounds_per_hour, per_hour)
        cpu_s = (after * fig["ask_after_round_ms"] + (per_hour - after) * fig["ask_unchanged_ms"]) / 1000
        fig["page_hour_core_pct"] = round(100 * cpu_s / 3600, 3)
        out[name] = fig
    out["limit"] = {"page_hour_core_pct": 2.0}
    if "base" in out:
        out["ratio"] = {k: round(out["this"][k] / out["base"][k], 3) if out["base"][k] else None
                        for k in out["this"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--asks", action="store_true", help="the shift page's asks (see above)")
    ap.add_argument("--baseline", help="another checkout to compare with (--asks)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--extra", type=int, default=20, help="rounds committed one by one, each followed by an ask")
    ap.add_argument("--poll-s", type=float, default=5.0, help="the page's poll interval (s)")
    ap.add_argument("--rounds-per-hour", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=1600)
    ap.add_argument("--seats", type=int, default=7)
    ap.add_argument("--side", choices=sorted(SIDES), default="pp")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.asks:
        out = asks(a)
        if a.json:
            print(json.dumps(out))
            return 0
        print(f"day_report asks on a {a.rounds}-round day at {a.seats} seats (load average "
              f"{out['load_average_1min']} on {os.cpu_count()} CPUs), CPU ms:")
        for k in ("first_ask_ms", "ask_unchanged_ms", "ask_after_round_ms", "page_hour_core_pct"):
            base = f"  base {out['base'][k]:>9}  ratio {out['ratio'][k]}" if "base" in out else ""
            limit = f"  (limit < {out['limit'][k]})" if k in out["limit"] else ""
            print(f"  {k:<20} {out['this'][k]:>9}{base}{limit}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-day-") as tmp:
        path = Path(tmp) / "journal.sqlite3"
        tables = write_day(path, a.rounds, a.seats, a.side)
        t0, c0 = time.monotonic(), time.process_time()
        with Journal(path, read_only=True) as j:
            facts = read_journal(j)
        rep = report(facts, "day", tables)
        in_process, cpu = time.monotonic() - t0, time.process_time() - c0
        exe = [sys.executable, "-c", "from table.cli import main; main()"]
        t0 = time.monotonic()
        r = subprocess.run(exe + ["report", "day", "--journal", str(path), "--json", *SIDES[a.side][0]],
                           capture_output=True, text=True)
        cli = time.monotonic() - t0
        if r.returncode not in (0, 1):
            raise SystemExit(f"tablectl report exited {r.returncode}: {r.stderr.strip()[-400:]}")
        out = {"rounds": rep["rounds"], "seats": a.seats, "side_wagers": a.side,
               "report_in_process_s": round(in_process, 2), "report_cpu_s": round(cpu, 2),
               "tablectl_report_s": round(cli, 2), "load_average_1min": round(os.getloadavg()[0], 1),
               "target_s": 5, "settled_win": rep["settled_win"], "expected_win": rep["expected_win"]["cents"]}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{out['rounds']} rounds at {a.seats} seats, side wagers {a.side}: report {out['report_in_process_s']} s "
              f"in process ({out['report_cpu_s']} s of CPU), `tablectl report day` {out['tablectl_report_s']} s "
              f"(target < 5 s; load average {out['load_average_1min']} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
