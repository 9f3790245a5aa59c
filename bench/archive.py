"""Bytes an archived gaming day costs a round, and seven years of them.

    python bench/archive.py [--json] [--rounds N] [--seats 1,3,7] [--rounds-a-day 1600] [--years 7]

For each number of seats: runs ``tablectl run --simulate --seed 1 --rounds N
--journal J`` as its own process (the journal as the table writes it: JSON
entries, sealed cards, signed checkpoints), then archives it as the day's close
does (:func:`table.day.segments.write_archive`: the segment ``VACUUM``-ed, xz at
preset 9e) and prints

| figure | what |
| --- | --- |
| journal_bytes_per_round | the live journal file (after the run's clean close) ÷ rounds |
| archive_bytes_per_round | the archive (``YYYY-MM-DD.journal.xz``) ÷ rounds (target <= 4 KB at 7 seats) |
| ratio | journal ÷ archive |
| seven_years_gb | archive_bytes_per_round × rounds a day × 365.25 × years, in GB (10^9; target < 20 at 7 seats, 1,600 rounds a day) |
| archive_s | seconds to write and compress the archive |
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _tablectl import tablectl  # noqa: E402

from table.day.segments import check_archive, write_archive  # noqa: E402


def one(rounds: int, seats: int, per_day: int, years: float) -> dict:
    from table.journal import verify
    from table.keys import load_private_key

    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        j = Path(tmp) / "journal.sqlite3"
        subprocess.run(tablectl() + ["run", "--simulate", "--rounds", str(rounds), "--seats", str(seats), "--seed",
                                     "1", "--json", "--journal", str(j), "--log-file", str(Path(tmp) / "run.log")],
                       check=True, capture_output=True, timeout=3600)
        start = time.perf_counter()
        archive = write_archive(j, Path(tmp) / "2026-12-01.journal.xz")
        took = time.perf_counter() - start
        key = load_private_key(Path(f"{j}.key"))
        r = verify(j, public_keys=[key.public])
        check_archive(archive, public_keys=[key.public], last_seq=r.entries, head=r.head)  # it is the same journal
        live, packed = j.stat().st_size, archive.stat().st_size
    per_round = packed / rounds
    return {"seats": seats, "rounds": rounds, "journal_bytes_per_round": round(live / rounds),
            "archive_bytes_per_round": round(per_round), "ratio": round(live / packed, 2),
            "seven_years_gb": round(per_round * per_day * 365.25 * years / 1e9, 2), "archive_s": round(took, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--seats", default="1,3,7")
    ap.add_argument("--rounds-a-day", type=int, default=1600)
    ap.add_argument("--years", type=float, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = [one(a.rounds, int(s), a.rounds_a_day, a.years) for s in a.seats.split(",")]
    if a.json:
        print(json.dumps(rows))
        return
    print(f"{'seats':>5} {'rounds':>6} {'journal B/round':>15} {'archive B/round':>15} {'ratio':>6} "
          f"{f'{a.years:g} years GB':>12} {'archive s':>9}")
    for r in rows:
        print(f"{r['seats']:>5} {r['rounds']:>6} {r['journal_bytes_per_round']:>15} {r['archive_bytes_per_round']:>15} "
              f"{r['ratio']:>6} {r['seven_years_gb']:>12} {r['archive_s']:>9}")
    print(f"({a.rounds_a_day} rounds a day, 365.25 days a year)")


if __name__ == "__main__":
    main()
