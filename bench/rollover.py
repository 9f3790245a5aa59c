"""The gaming day's rollover beside the rounds around it: the table deals on while the
closed day is compressed off the round's path (docs/journal.md, "Gaming days and archives").

    python bench/rollover.py [--json] [--rounds N] [--seats S] [--after N]

Plays ``--rounds`` rounds of ``--seats`` seats on one gaming day (a simulated table,
its journal one segment a day, a clock the bench moves), moves the clock to the next
gaming day and plays ``--after`` rounds: the first of them closes the day and rolls
over. Each round is timed (wall clock, ``play_round`` to its result). Then the same
again, waiting for the day's xz before the next round (what the rollover cost the
round's path when it compressed the day itself: the previous form, measured in the
same run), and prints

| figure | what |
| --- | --- |
| day_mb | the closed day's segment (MB) |
| neighbours_ms | the median round of the ``--after`` rounds, the rollover round left out |
| rollover_round_ms | the round that rolled over (close, archive to ``.journal.sqlite3``, next segment) |
| rollover_ratio | rollover_round_ms ÷ neighbours_ms (limit 2.0) |
| slowest_after_ms | the slowest round after it (the compression runs beside them) |
| slowest_ratio | slowest_after_ms ÷ neighbours_ms (limit 2.0) |
| compress_s | the day's xz, off the round's path |
| inline_rollover_ms | the rollover round plus the wait for the xz (the previous form) |
| inline_ratio | inline_rollover_ms ÷ rollover_round_ms |
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devices.contract import DriverKind  # noqa: E402
from protocols.cards import BackColour  # noqa: E402
from protocols.clock import SettableWallClock  # noqa: E402
from simulators.table import SimulatedTable  # noqa: E402
from table.assembly import DeviceSpec, People, TableSpec, assemble  # noqa: E402
from table.day import segments  # noqa: E402
from table.controller import TableTiming  # noqa: E402
from table.journal import Journal  # noqa: E402
from table.keys import generate  # noqa: E402
from table.procedure.day_segments import ArchivePolicy  # noqa: E402
from table.rules.settlement import Tables  # noqa: E402

LIMIT = 2.0


@contextlib.contextmanager
def table(folder: Path, clock: SettableWallClock, seats: int):
    """A prepared controller on a simulated table, assembled as every table is
    (``table.assembly``), its journal one segment a gaming day archived to ``folder/archive``."""
    (folder / "archive").mkdir()
    policy = ArchivePolicy(folder / "archive", 6, "UTC", 7, None, None)
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=1) as sim:
        with Journal(folder / "journal.sqlite3", key=generate(), table_id="bench", clock=clock) as journal:
            spec = TableSpec(shuffler=DeviceSpec(DriverKind.SHUFFLER, sim.shuffler_url),
                             shoe=DeviceSpec(DriverKind.SHOE, sim.shoe_url),
                             decks=(("A", BackColour.RED), ("B", BackColour.BLUE)), seats=seats,
                             tables=Tables.load("pa-649a12b-1"), archive=policy,
                             timing=TableTiming(event_timeout_s=5, settle_s=0.0))
            with assemble(spec, People(sim.dealer), journal=journal) as assembled:
                assembled.controller.prepare()
                yield assembled.controller


def timed(ctl) -> float:
    t0 = time.perf_counter()
    ctl.play_round()
    return (time.perf_counter() - t0) * 1000


def one(rounds: int, seats: int, after: int, inline: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-rollover-") as tmp:
        folder = Path(tmp)
        clock = SettableWallClock(datetime(2026, 12, 1, 10, tzinfo=timezone.utc))
        with table(folder, clock, seats) as ctl:
            for _ in range(rounds):
                ctl.play_round()
            day_bytes = (folder / "journal.sqlite3").stat().st_size
            clock.set(datetime(2026, 12, 2, 7, tzinfo=timezone.utc))
            t0 = time.perf_counter()
            ctl.play_round()
            if inline:
                segments.compressed()
            roll_ms = (time.perf_counter() - t0) * 1000
            c0 = time.perf_counter()
            times = [timed(ctl) for _ in range(after)]
        segments.compressed()
        compress_s = time.perf_counter() - c0
    mid = statistics.median(times)
    return {"day_mb": round(day_bytes / 1e6, 2), "neighbours_ms": round(mid, 1), "rollover_round_ms": round(roll_ms, 1),
            "slowest_after_ms": round(max(times), 1), "compress_s": round(compress_s, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1500, help="rounds on the day that closes (default 1500)")
    ap.add_argument("--seats", type=int, default=7)
    ap.add_argument("--after", type=int, default=40, help="rounds timed after the close (default 40)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    now = one(a.rounds, a.seats, a.after, inline=False)
    before = one(a.rounds, a.seats, a.after, inline=True)
    out = {**now, "rollover_ratio": round(now["rollover_round_ms"] / now["neighbours_ms"], 2),
           "slowest_ratio": round(now["slowest_after_ms"] / now["neighbours_ms"], 2),
           "inline_rollover_ms": before["rollover_round_ms"],
           "inline_ratio": round(before["rollover_round_ms"] / now["rollover_round_ms"], 2), "limit": LIMIT}
    if a.json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        print(f"{k:20} {v}")
    ok = out["rollover_ratio"] <= LIMIT and out["slowest_ratio"] <= LIMIT
    print(f"\nno round slower than {LIMIT}x its neighbours: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
