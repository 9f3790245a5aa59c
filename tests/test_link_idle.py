"""An idle connected link sleeps: its reader thread wakes for bytes, never on a timer (docs/architecture.md, "Waits on the round's path")."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from devices import CardShoe
from simulators.table import SimulatedTable


def _voluntary_switches(native_id: int) -> int:
    """How many times the thread blocked and was woken (the kernel's count)."""
    with open(f"/proc/self/task/{native_id}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches line")


@pytest.mark.alone
def test_an_idle_links_reader_does_not_wake_on_a_timer():
    """Connected to the shoe with nothing on the line but the SPEC's heartbeat (§6.4, whose
    replies the heartbeat reads itself, §7.1): over three heartbeats the link's reader
    thread is woken at most once (it was woken four times a second by its read timeout)."""
    events: queue.Queue = queue.Queue()
    with SimulatedTable(seed=1) as sim, CardShoe.open(sim.shoe_url, events=events):
        reader = next(t for t in threading.enumerate() if t.name == "link-shoe-rx")
        assert reader.native_id is not None
        before = _voluntary_switches(reader.native_id)
        time.sleep(3.0)  # the window watched: three heartbeats
        woken = _voluntary_switches(reader.native_id) - before
    assert woken <= 1, f"the idle reader woke {woken} times in 3 s"
