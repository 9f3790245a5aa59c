"""Round throughput of ``tablectl run --simulate`` (issue 18).

    python bench/rounds.py [--json] [--rounds N] [--seats 1,3,7] [--transports serial,usb]

For each transport (emulators on ptys, or as emulated USB devices behind
pyusb), each number of seats, without and with ``--journal``: runs
``tablectl run --simulate --seed 1 --json`` as its own process and prints

| figure | what |
| --- | --- |
| rounds_per_s | rounds dealt per second, first round to last (start-up excluded), from the moments each round's JSON reaches stdout (the run streams them) |
| start_to_first_round_s | process start to the first round on stdout |
| journal_bytes_per_round | the journal's files (database, WAL, head) at the end ÷ rounds |
| peak_rss_mb | the process's peak resident memory (the kernel's ``wait4`` accounting) |

Targets (issue 18, on the 2-core machine): >= 200 rounds/s without the
journal, >= 100 with it, <= 4 KB of journal a round at 7 seats. The figures
are whatever this checkout gives: measure on an idle machine, or say that it
was loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tablectl import Run, count_marks  # noqa: E402

ROUND_MARK = b'{"number": '


def one(rounds: int, seats: int, transport: str, journal: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-rounds-") as tmp:
        args = ["run", "--simulate", "--rounds", str(rounds), "--seats", str(seats), "--seed", "1", "--json",
                "--transport", transport, "--log-file", str(Path(tmp) / "run.log")]
        jpath = Path(tmp) / "journal.sqlite3"
        if journal:
            args += ["--journal", str(jpath)]
        stamps: list[float] = []
        t0 = time.monotonic()
        run = Run(args)
        out = count_marks(ROUND_MARK, lambda n, t: stamps.append(t), run)
        code, peak_kb, err = run.wait()
        if code != 0:
            raise SystemExit(f"tablectl {' '.join(args)} exited {code}: {err.strip()[-500:]}")
        doc = json.loads(out)
        dealt = len(doc["rounds"])
        jbytes = sum(f.stat().st_size for f in Path(tmp).glob("journal.sqlite3*")) if journal else None
        return {
            "transport": transport, "seats": seats, "journal": journal, "rounds": dealt,
            "rounds_per_s": round((len(stamps) - 1) / (stamps[-1] - stamps[0]), 1) if len(stamps) > 1 else None,
            "start_to_first_round_s": round(stamps[0] - t0, 3) if stamps else None,
            "journal_bytes_per_round": round(jbytes / dealt) if journal and dealt else None,
            "peak_rss_mb": round(peak_kb / 1024, 1),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--rounds", type=int, default=100, help="rounds per run (default 100)")
    ap.add_argument("--seats", default="1,3,7", help="comma-separated seat counts (default 1,3,7)")
    ap.add_argument("--transports", default="serial,usb", help="serial (ptys) and/or usb (default both)")
    args = ap.parse_args()
    runs = [one(args.rounds, int(s), tr, j) for tr in args.transports.split(",")
            for s in args.seats.split(",") for j in (False, True)]
    if args.json:
        print(json.dumps({"rounds_per_run": args.rounds, "runs": runs}))
        return 0
    print(f"{'transport':9} {'seats':>5} {'journal':>7} {'rounds/s':>9} {'first round s':>13} "
          f"{'journal B/round':>15} {'peak RSS MB':>11}")
    for r in runs:
        print(f"{r['transport']:9} {r['seats']:5} {'yes' if r['journal'] else 'no':>7} {r['rounds_per_s']!s:>9} "
              f"{r['start_to_first_round_s']!s:>13} {r['journal_bytes_per_round']!s:>15} {r['peak_rss_mb']:11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
