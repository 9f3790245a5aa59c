"""Time of the gaming day's report for a 1,600-round day (under 5 s).

    python bench/day_report.py [--rounds 1600] [--seats 7] [--side none|pp|all] [--json]

Writes a journal of ROUNDS rounds as the table journals them (each round's
``open``, ``decisions_done``, ``dealer_reveal`` and ``settle`` entries: seats
dealt from a shuffled deck, Q-6-4 decisions, settled by ``settle_seat``), then
times ``tablectl report day`` on it in its own process (start-up included) and
the report in this process (journal read + exact expectation of every round +
theoretical win), wall and CPU time (on a loaded machine the CPU time is what
an idle one would take). ``--side``: ante only, with Pair Plus, or with Pair Plus, Six
Card Bonus and progressive. The figures are whatever this machine gives: say
whether it was loaded.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1600)
    ap.add_argument("--seats", type=int, default=7)
    ap.add_argument("--side", choices=sorted(SIDES), default="pp")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
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
