"""Time the full paytable report for every shipped paytable.

Usage: python bench/paytable_report.py [--profile NAME]

Runs the enumeration from a cold start (no cached tables), prints each
paytable's headline figure, then the elapsed time. The target is
the whole ``tablectl paytable report`` process, start-up included, under
0.5 s on the project's 2-core machine: time that from outside, e.g.
``farm-bench -n 5 -- .venv/bin/tablectl paytable report``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from table.rules.paytables import list_paytables  # noqa: E402
from table.rules.profiles import get_profile  # noqa: E402
from table.rules.report import AnteReport, pct, report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="pennsylvania")
    args = ap.parse_args()
    profile = get_profile(args.profile)
    t0 = time.perf_counter()
    tables = list_paytables()
    for pt in tables:
        r = report(pt, profile)
        if isinstance(r, AnteReport):
            fig = f"house edge {pct(r.house_edge)} per ante, element of risk {pct(r.element_of_risk)}"
        elif r.house_edge is not None:
            fig = f"house edge {pct(r.house_edge)}"
        else:
            fig = f"break-even meter {r.break_even_meter} wagers"
        print(f"{pt.name:<24} {pt.kind:<15} {fig}")
    elapsed = time.perf_counter() - t0
    print(f"full report, {len(tables)} paytables, profile {profile.name}: {elapsed:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
