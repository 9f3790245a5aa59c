"""Idle clients on every front door of a dealing table, then one status request on each.
``python bench/idle_doors.py [--idle N] [--json]``.

A simulated table (``tablectl run --simulate``, its own process) deals round after
round with its web door, control socket and event socket open. On each door in
turn, ``--idle`` clients connect and never send a byte; at once a status request
on a fresh connection to that door is timed (the web's is a signed-in
supervisor's ``GET /api/v1/status``; the event socket's answer is its ``hello``).
With every door so loaded, the rounds the table dealt meanwhile are counted.
Figures: seconds to open the idle clients, seconds to the answer, per door; the
machine's load (``/proc/loadavg``) before and after. Everything stays on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from idle_helpers import DOORS, DealingTable, idle_clients, raise_descriptor_limit  # noqa: E402


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--idle", type=int, default=2000, help="idle clients on each door")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = p.parse_args()
    raise_descriptor_limit(len(DOORS) * args.idle + 512)
    out: dict[str, object] = {"idle_per_door": args.idle, "load_before": load()}
    held = []
    with tempfile.TemporaryDirectory() as folder:
        table = DealingTable(Path(folder))
        try:
            for door in DOORS:  # the same request with no idle client: what the table's pace costs
                out[f"{door}_status_alone_s"] = round(min(table.ask(door)[1] for _ in range(5)), 3)
            for door in DOORS:
                t0 = time.monotonic()
                held += idle_clients(table, door, args.idle)
                out[f"{door}_idle_open_s"] = round(time.monotonic() - t0, 3)
                out[f"{door}_status_s"] = round(table.ask(door)[1], 3)
            before = table.rounds_played()
            t0 = time.monotonic()
            while table.rounds_played() < before + 5 and time.monotonic() - t0 < 60:
                time.sleep(0.05)
            out["rounds_dealt_meanwhile"] = table.rounds_played() - before
            out["five_rounds_s"] = round(time.monotonic() - t0, 3)
        finally:
            for s in held:
                s.close()
            table.close()
    out["load_after"] = load()
    out["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:24} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
