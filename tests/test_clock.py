"""The clock device and person waits run on (protocols/clock.py): real time, or a
virtual clock a soak compresses (issue 18)."""

from __future__ import annotations

import threading

import pytest

import protocols.clock as clock_mod
from protocols.clock import REAL_CLOCK, VirtualClock
from simulators.pty_port import PtyPort


class FakeTime:
    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


def test_a_virtual_clock_runs_speed_times_faster_than_real_time(monkeypatch):
    fake = FakeTime(100.0)
    monkeypatch.setattr(clock_mod.time, "monotonic", fake.monotonic)
    c = VirtualClock(20)
    start = c.monotonic()
    fake.now += 0.5  # half a real second
    assert c.monotonic() - start == pytest.approx(10.0)
    assert c.real_s(2.0) == pytest.approx(0.1)  # a 2 s unplug takes 0.1 s
    assert c.real_s(-1) == 0.0
    assert REAL_CLOCK.real_s(2.0) == 2.0


@pytest.mark.parametrize("speed", [0, -1, float("inf"), "fast"])
def test_a_clock_speed_must_be_a_positive_number(speed):
    with pytest.raises(ValueError, match="positive"):
        VirtualClock(speed)


def test_a_timer_on_the_clock_calls_once_with_its_arguments():
    got = []
    done = threading.Event()
    VirtualClock(1000).timer(5.0, lambda x: (got.append(x), done.set()), "replug")
    assert done.wait(5), "a 5 s wait at speed 1000 is 5 ms"
    assert got == ["replug"]


def test_an_unplug_lasts_its_seconds_on_the_port_s_clock(tmp_path):
    """The pty's unplug asks its clock for the wait, so a soak's clock compresses it."""
    asked = []
    looked = threading.Event()

    class Recording(VirtualClock):
        def timer(self, seconds, fn, *args):
            asked.append(seconds)

            def once_looked():  # not before the test has seen the adapter out: 20 ms is no
                looked.wait(30)  # window to look in on a loaded machine
                fn(*args)

            return super().timer(seconds, once_looked)

    replugged = threading.Event()
    port = PtyPort(tmp_path / "shoe", clock=Recording(100))
    port.on_change = replugged.set
    try:
        port.disconnect(2.0)
        assert asked == [2.0]
        assert not (tmp_path / "shoe").exists()  # unplugged: the name is gone meanwhile
        looked.set()
        assert replugged.wait(5), "2 s at speed 100 is 20 ms"
        assert (tmp_path / "shoe").is_symlink()
    finally:
        looked.set()
        port.close()


def test_a_settable_wall_clock_moves_on_by_hand_and_never_back():
    """The journal's wall clock a test or bench sets (protocols.clock.SettableWallClock):
    µs since the epoch, 1 ms a read, moved on by set(), never back; a time without a zone
    is refused."""
    from datetime import datetime, timedelta, timezone

    from protocols.clock import SettableWallClock

    start = datetime(2026, 12, 1, 10, tzinfo=timezone.utc)
    clock = SettableWallClock(start)
    first = clock()
    assert first == int(start.timestamp() * 1_000_000) + 1000 and clock() == first + 1000
    clock.set(start + timedelta(days=1))
    assert clock() == int((start + timedelta(days=1)).timestamp() * 1_000_000) + 1000
    later = clock()
    clock.set(start)  # back: a time already given stays given
    assert clock() == later + 1000
    with pytest.raises(ValueError, match="names its zone"):
        SettableWallClock(datetime(2026, 12, 1, 10))
    with pytest.raises(ValueError, match="names its zone"):
        clock.set(datetime(2026, 12, 2, 7))
