"""The clock that device timing runs on, shared by both ends of the link.

Real devices and people take real time: a cable stays unplugged for 2 s, a
device waits 50 ms, then 100 ms, ... before it resends an event, a dealer is
slow to put a deck in the shuffler. A bench that only needs the same things to
happen in the same order, not at the same pace (the chaos soak), runs those
waits on a :class:`VirtualClock` that goes ``speed`` times faster than real
time, so that 10,000 rounds take minutes instead of hours.

Whoever waits asks the clock twice: :meth:`Clock.monotonic` for "now" on that
clock (deadlines are kept in clock seconds), and :meth:`Clock.real_s` for how
many real seconds a wait of so many clock seconds takes, to hand to
``select``, ``poll``, ``Queue.get`` or ``Condition.wait``. Nothing here
sleeps or polls; :meth:`Clock.timer` runs a function once after a wait on
the clock, on a daemon ``threading.Timer``.

The journal's wall clock is another: :class:`SettableWallClock` gives the µs since
the epoch that entries are timed by, moved on by hand by a test or a bench that
plays gaming days without waiting for them.

Pure: no I/O, no project imports; both the emulators (``simulators/``) and the
controller (``table/``) take a clock, so one soak compresses both alike.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable


class Clock:
    """Real time (``speed`` 1): the default everywhere."""

    speed: float = 1.0

    def monotonic(self) -> float:
        """Now on this clock (s); only differences mean anything."""
        return time.monotonic()

    def real_s(self, seconds: float) -> float:
        """The real seconds that ``seconds`` on this clock take (never negative)."""
        return max(0.0, seconds) / self.speed

    def timer(self, seconds: float, fn: Callable[..., Any], *args: Any) -> threading.Timer:
        """Call ``fn(*args)`` once, ``seconds`` on this clock from now, on a daemon
        thread; returns the started ``threading.Timer`` (``cancel()`` stops it)."""
        t = threading.Timer(self.real_s(seconds), fn, args)
        t.daemon = True
        t.start()
        return t

    def __repr__(self) -> str:
        return f"{type(self).__name__}(speed={self.speed:g})"


#: The real-time clock.
REAL_CLOCK = Clock()


class VirtualClock(Clock):
    """A clock that runs ``speed`` times faster than real time (``speed`` > 0; 1 is
    real time). Its :meth:`monotonic` starts at the real monotonic time of its
    creation and advances ``speed`` seconds each real second. Raises
    ``ValueError`` for a speed that is not a positive finite number."""

    def __init__(self, speed: float) -> None:
        if not (isinstance(speed, (int, float)) and 0 < speed < float("inf")):
            raise ValueError(f"clock speed must be a positive number, got {speed!r}")
        self.speed = float(speed)
        self._origin = time.monotonic()

    def monotonic(self) -> float:
        return self._origin + (time.monotonic() - self._origin) * self.speed


class SettableWallClock:
    """A wall clock that a bench or a test moves by hand, for a journal's entries
    (``Journal(clock=...)``: a callable giving µs since the epoch, UTC), so gaming days
    pass without waiting for them. It starts at ``start`` (an aware ``datetime``); each
    call returns a time 1 ms after the last (entries keep their order in time), and
    :meth:`set` moves it on to ``at`` (never back: a time already given stays given).
    Thread-safe: the table's threads and the bench read it at once. Raises
    ``ValueError`` for a naive ``start`` or ``at`` (a wall time names its zone)."""

    STEP_US = 1000

    def __init__(self, start: datetime) -> None:
        self._us = _epoch_us(start)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        """The next time (µs since the epoch): 1 ms after the last."""
        with self._lock:
            self._us += self.STEP_US
            return self._us

    def set(self, at: datetime) -> None:
        """Move the clock on to ``at``; a time before the last one given changes nothing."""
        us = _epoch_us(at)
        with self._lock:
            self._us = max(self._us, us)


def _epoch_us(at: datetime) -> int:
    if at.tzinfo is None:
        raise ValueError(f"a wall clock's time names its zone: {at.isoformat()} has none")
    return int(at.timestamp() * 1_000_000)
