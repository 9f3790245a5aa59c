"""Idle cost of a connected table: CPU and wake-ups a second with both links up and no traffic.

    python bench/idle.py [--json] [--seconds 20] [--pairs 2] [--baseline DIR]

The table's side (:class:`devices.Shuffler` and :class:`devices.CardShoe` opened on
the SPEC emulators, which run in a process of their own, as devices would) sits
connected with nothing to do: the only traffic is the link's heartbeat as
protocols/SPEC.md §6.4 sets it (``GetStatus`` after ``heartbeat_interval_ms`` =
1000 ms with no frame, per device). Over ``--seconds`` it measures

| figure | what | limit |
| --- | --- | --- |
| idle_cpu_pct | the table process's user + system CPU, % of one core | < 0.05 |
| wakeups_per_s | its threads' context switches a second (``/proc/self/task/*/status``) | |
| by_thread | the same, per thread (which thread wakes, and how often) | |

``--baseline DIR``: the same in another checkout (``git archive <commit> | tar -x -C
DIR``), run alternately with this one ``--pairs`` times; each figure beside the
baseline's with the ratio (medians of the pairs, from one run: the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _checkout  # noqa: E402

MEASURE = r"""
import json, multiprocessing as mp, os, queue, resource, sys, threading, time
sys.path.insert(0, os.getcwd())
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
from devices import CardShoe, Shuffler
from simulators.table import SimulatedTable

def far(conn):
    with SimulatedTable(seed=1) as sim:
        conn.send((sim.shuffler_url, sim.shoe_url))
        conn.recv()

def switches():
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            text = open(f"/proc/self/task/{tid}/status").read()
        except OSError:
            continue
        out[names.get(int(tid), f"tid-{tid}")] = sum(int(l.split()[1]) for l in text.splitlines()
                                                     if l.endswith("ctxt_switches") or "ctxt_switches:" in l)
    return out

if __name__ == "__main__":
    seconds = float(sys.argv[1])
    here, there = mp.Pipe()
    p = mp.Process(target=far, args=(there,))
    p.start()
    shuffler_url, shoe_url = here.recv()
    events = queue.Queue()
    with Shuffler.open(shuffler_url, events=events), CardShoe.open(shoe_url, events=events):
        time.sleep(1.5)
        s0, r0, t0 = switches(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        time.sleep(seconds)
        s1, r1, t1 = switches(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    here.send("stop")
    p.join()
    span = t1 - t0
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    by = {k: round((v - s0.get(k, 0)) / span, 2) for k, v in s1.items() if v - s0.get(k, 0)}
    print(json.dumps({"idle_cpu_pct": 100 * cpu / span, "wakeups_per_s": sum(by.values()), "by_thread": by}))
"""

LIMITS = {"idle_cpu_pct": 0.05}


def measure(tree: Path, seconds: float) -> dict:
    """One measurement in checkout ``tree``, in a process of its own."""
    return _checkout.measure(tree, MEASURE, [str(seconds)], seconds + 120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--seconds", type=float, default=20.0, help="the idle window measured (s)")
    _checkout.add_arguments(ap, pairs=2)
    a = ap.parse_args()
    trees = _checkout.trees(a.baseline)
    runs = _checkout.alternate(trees, a.pairs, lambda tree: measure(tree, a.seconds))
    out: dict = {"seconds": a.seconds, "pairs": a.pairs, "load_average_1min": round(os.getloadavg()[0], 1),
                 "limit": LIMITS}
    for name, rs in runs.items():
        out[name] = {k: round(statistics.median(r[k] for r in rs), 4) for k in ("idle_cpu_pct", "wakeups_per_s")}
        out[name]["by_thread"] = rs[-1]["by_thread"]
    if "base" in out:
        out["ratio"] = {k: round(out["this"][k] / out["base"][k], 3) if out["base"][k] else None
                        for k in ("idle_cpu_pct", "wakeups_per_s")}
    if a.json:
        print(json.dumps(out))
        return 0
    print(f"a connected table, idle, {a.seconds:.0f} s x {a.pairs} (load average {out['load_average_1min']} on "
          f"{os.cpu_count()} CPUs):")
    for k in ("idle_cpu_pct", "wakeups_per_s"):
        base = f"  base {out['base'][k]:>8}  ratio {out['ratio'][k]}" if "base" in out else ""
        limit = f"  (limit < {LIMITS[k]})" if k in LIMITS else ""
        print(f"  {k:<16} {out['this'][k]:>8}{base}{limit}")
    for name in trees:
        print(f"  {name} by thread: " + ", ".join(f"{k} {v}/s" for k, v in sorted(out[name]['by_thread'].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
