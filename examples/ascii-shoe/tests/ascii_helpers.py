"""Helpers of the ASCII shoe's tests (a module of its own: ``conftest`` is a name every test folder has)."""

from __future__ import annotations

from devices.contract import LinkConfig

#: quick link timings for tests: a pulled cable is seen within a second
FAST = LinkConfig(heartbeat_interval_ms=200, heartbeat_misses=2, reconnect_initial_ms=20, reconnect_max_ms=200,
                  reconnect_wait_s=5)


def next_message(events, timeout_s=5.0):
    """The next event's (DeviceEvent, message); fails the test after ``timeout_s``."""
    ev = events.get(timeout=timeout_s)
    return ev, ev.message
