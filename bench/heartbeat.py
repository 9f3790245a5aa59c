"""CPU of one heartbeat on the table's side, per thread: where an idle link's cost goes.

    python bench/heartbeat.py [--json] [--heartbeats 2000] [--interval-ms 50] [--pairs 2] [--baseline DIR]

A :class:`devices.Shuffler` opened on the SPEC emulator (in a process of its own, as a
device would be) sits idle with ``heartbeat_interval_ms`` shortened to ``--interval-ms``,
so ``--heartbeats`` heartbeats (protocols/SPEC.md §6.4: ``GetStatus`` after the interval
with no frame received) pass in a short run; the interval changes how often the cost is
paid, not what one costs. It measures

| figure | what |
| --- | --- |
| cpu_us_per_heartbeat | the table process's user + system CPU a heartbeat (us) |
| by_thread_us | each thread's time on a CPU a heartbeat (``/proc/self/task/*/schedstat``, us) |
| switches_per_heartbeat | each thread's context switches a heartbeat (2 is the floor: the heartbeat's moment and its reply) |

``--profile``: cProfile of the supervisor thread (the one that sends the heartbeat and
reads its reply), printed after the figures. ``--baseline DIR``: the same in another
checkout (``git archive <commit> | tar -x -C DIR``), run alternately ``--pairs`` times;
medians, each beside the baseline's with the ratio (the machine is shared: ratios from
one run matter most). See also ``bench/idle.py`` (the whole table at the SPEC's interval).
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
import cProfile, io, json, multiprocessing as mp, os, pstats, resource, sys, threading
sys.path.insert(0, os.getcwd())
import structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
from devices import Shuffler
from firmware_bridge import link as L
from simulators.table import SimulatedTable

def far(conn):
    with SimulatedTable(seed=1) as sim:
        conn.send(sim.shuffler_url)
        conn.recv()

def per_thread(field):
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            if field == "cpu":
                value = int(open(f"/proc/self/task/{tid}/schedstat").read().split()[0])
            else:
                value = sum(int(l.split()[1]) for l in open(f"/proc/self/task/{tid}/status").read().splitlines()
                            if "ctxt_switches:" in l)
        except OSError:
            continue
        out[names.get(int(tid), f"tid-{tid}")] = value
    return out

if __name__ == "__main__":
    n, interval_ms, profile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    profiles = []
    if profile:
        plain = L._LinkSupervisor._supervise
        def supervise(self):
            pr = cProfile.Profile()
            profiles.append(pr)
            pr.runcall(plain, self)
        L._LinkSupervisor._supervise = supervise
    here, there = mp.Pipe()
    p = mp.Process(target=far, args=(there,))
    p.start()
    url = here.recv()
    done = threading.Event()
    d = Shuffler.open(url, config=L.LinkConfig(heartbeat_interval_ms=interval_ms))
    stats = d.link.stats
    done.wait(0.5)
    h0, c0, s0, r0 = stats.heartbeats, per_thread("cpu"), per_thread("switches"), resource.getrusage(resource.RUSAGE_SELF)
    while stats.heartbeats - h0 < n:
        done.wait(n * interval_ms / 1000 / 4)
    h1, c1, s1, r1 = stats.heartbeats, per_thread("cpu"), per_thread("switches"), resource.getrusage(resource.RUSAGE_SELF)
    d.close()
    here.send("stop")
    p.join()
    hb = h1 - h0
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out = {"heartbeats": hb, "misses": stats.heartbeat_misses, "cpu_us_per_heartbeat": 1e6 * cpu / hb,
           "by_thread_us": {k: round((v - c0.get(k, 0)) / hb / 1000, 1) for k, v in c1.items() if v - c0.get(k, 0)},
           "switches_per_heartbeat": {k: round((v - s0.get(k, 0)) / hb, 2) for k, v in s1.items()
                                      if v - s0.get(k, 0)}}
    if profiles:
        text = io.StringIO()
        pstats.Stats(profiles[0], stream=text).sort_stats("tottime").print_stats(30)
        out["profile"] = text.getvalue()
    print(json.dumps(out))
"""


def measure(tree: Path, heartbeats: int, interval_ms: int, profile: bool) -> dict:
    """One measurement in checkout ``tree``, in a process of its own."""
    return _checkout.measure(tree, MEASURE, [str(heartbeats), str(interval_ms), "1" if profile else "0"],
                             heartbeats * interval_ms / 1000 * 3 + 120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--heartbeats", type=int, default=2000)
    ap.add_argument("--interval-ms", type=int, default=50, help="heartbeat_interval_ms for the run (50..)")
    ap.add_argument("--profile", action="store_true", help="cProfile the supervisor thread (this checkout)")
    _checkout.add_arguments(ap, pairs=1)
    a = ap.parse_args()
    trees = _checkout.trees(a.baseline)
    runs = _checkout.alternate(trees, a.pairs, lambda tree: measure(tree, a.heartbeats, a.interval_ms, False))
    out: dict = {"heartbeats": a.heartbeats, "interval_ms": a.interval_ms, "pairs": a.pairs,
                 "load_average_1min": round(os.getloadavg()[0], 1)}
    for name, rs in runs.items():
        out[name] = {"cpu_us_per_heartbeat": round(statistics.median(r["cpu_us_per_heartbeat"] for r in rs), 1),
                     "misses": sum(r["misses"] for r in rs),
                     "by_thread_us": rs[-1]["by_thread_us"], "switches_per_heartbeat": rs[-1]["switches_per_heartbeat"]}
    if "base" in out:
        out["ratio"] = round(out["this"]["cpu_us_per_heartbeat"] / out["base"]["cpu_us_per_heartbeat"], 3)
    profile = measure(trees["this"], a.heartbeats, a.interval_ms, True)["profile"] if a.profile else None
    if a.json:
        print(json.dumps(out | ({"profile": profile} if profile else {})))
        return 0
    print(f"one heartbeat, {a.heartbeats} at {a.interval_ms} ms x {a.pairs} (load average "
          f"{out['load_average_1min']} on {os.cpu_count()} CPUs):")
    for name in trees:
        o = out[name]
        ratio = f"  ratio {out['ratio']}" if name == "this" and "ratio" in out else ""
        print(f"  {name}: {o['cpu_us_per_heartbeat']} us CPU a heartbeat{ratio}; misses {o['misses']}")
        print("    by thread (us): " + ", ".join(f"{k} {v}" for k, v in sorted(o["by_thread_us"].items())))
        print("    switches: " + ", ".join(f"{k} {v}" for k, v in sorted(o["switches_per_heartbeat"].items())))
    if profile:
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
