"""Memory of a long service-like run (docs/decisions/0001-one-commit-per-step.md).

    python bench/memory.py [--json] [--rounds 100000] [--seats 7] [--at 1000,10000,100000]

Runs ``tablectl run --simulate --rounds N --seats K`` (no ``--json``, no
journal: what a table dealing all day keeps in memory) as its own process
and reads its resident set (``VmRSS`` in /proc) when its N-th round line
reaches stdout, for each N in ``--at`` (by default 1,000, 10,000 and 100,000,
those within ``--rounds``). Target: within 5 MB from round 1,000 to round
100,000. Also prints the rounds per second between the checkpoints.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tablectl import Run, rss_kb  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--seats", type=int, default=7)
    ap.add_argument("--at", default="1000,10000,100000", help="rounds at which to read the RSS")
    args = ap.parse_args()
    marks = sorted({int(x) for x in args.at.split(",") if 0 < int(x) <= args.rounds} | {args.rounds})
    samples: list[dict] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        run = Run(["run", "--simulate", "--rounds", str(args.rounds), "--seats", str(args.seats), "--seed", "1",
                   "--log-file", str(Path(tmp) / "run.log")])

        def at(n: int, t: float) -> None:
            if n in marks:
                kb = rss_kb(run.proc.pid)
                samples.append({"round": n, "rss_mb": round(kb / 1024, 2) if kb else None,
                                "elapsed_s": round(t - t0, 1)})

        # One line per round (a round's line starts with "round"); the summary after the last.
        _lines(run, at)
        code, peak_kb, err = run.wait()
    if code != 0:
        raise SystemExit(f"tablectl run exited {code}: {err.strip()[-500:]}")
    first = next((s for s in samples if s["round"] >= 1000), samples[0] if samples else None)
    out = {"rounds": args.rounds, "seats": args.seats, "samples": samples, "peak_rss_mb": round(peak_kb / 1024, 2),
           "growth_mb_after_first_sample": round(samples[-1]["rss_mb"] - first["rss_mb"], 2) if first else None}
    if args.json:
        print(json.dumps(out))
    else:
        for s in samples:
            print(f"round {s['round']:>7}: RSS {s['rss_mb']:8.2f} MB  ({s['elapsed_s']} s)")
        print(f"peak RSS {out['peak_rss_mb']} MB; growth from round {first['round']}: "
              f"{out['growth_mb_after_first_sample']} MB")
    return 0


def _lines(run: Run, at) -> None:
    """Call ``at(n, t)`` as the n-th round line arrives (lines starting ``round``)."""
    n = 0
    pending = b""
    for t, data in run.chunks():
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"round ") and not line.startswith(b"rounds "):
                n += 1
                at(n, t)


if __name__ == "__main__":
    sys.exit(main())
