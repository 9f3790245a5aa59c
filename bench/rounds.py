"""Round throughput of ``tablectl run --simulate``.

    python bench/rounds.py [--json] [--rounds N] [--seats 1,3,7] [--transports serial,usb] [--baseline DIR]

``--baseline DIR``: also run another checkout (``git worktree add DIR <commit>``)
the same way, each of its runs just after this checkout's, and print its rows
and ratios beside these (tree ``base``): before and after in one run.

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


def one(rounds: int, seats: int, transport: str, journal: bool, tree: str | None = None) -> dict:
    bare = interpreter_start_s()
    with tempfile.TemporaryDirectory(prefix="bench-rounds-") as tmp:
        args = ["run", "--simulate", "--rounds", str(rounds), "--seats", str(seats), "--seed", "1", "--json",
                "--transport", transport, "--log-file", str(Path(tmp) / "run.log")]
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
    args = ap.parse_args()
    trees = [None] + ([args.baseline] if args.baseline else [])
    runs = [one(args.rounds, int(s), tr, j, tree) for tr in args.transports.split(",")
            for s in args.seats.split(",") for j in (False, True) for tree in trees]
    pairs = ratios(runs)
    if args.json:
        print(json.dumps({"rounds_per_run": args.rounds, "runs": runs, "ratios": pairs}))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
