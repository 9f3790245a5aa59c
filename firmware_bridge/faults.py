"""Seeded fault injection for any transport (pymodbus's byte manipulator).

:class:`FaultyTransport` wraps a host transport (in-memory, pty, ``socket://``,
USB) and applies one :class:`FaultPlan` to the bytes crossing it, so the same
plan exercises every transport. Faults that need the device's side (a cable
pulled at the device, a firmware reboot) are callbacks the test harness
supplies.
"""

from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass
from typing import Callable

from .errors import LinkLost
from .transport import Transport, as_timed

#: Type byte of an Ack reply (protocols/SPEC.md §4.1).
_ACK_TYPE = 0x80


@dataclass(frozen=True)
class FaultPlan:
    """Which faults to inject and how often; ``seed`` makes a run repeatable.

    Probabilities are per host write (one frame) unless noted:

    ``drop``: the frame is lost (also per device read chunk);
    ``bit_flip``: per byte, in both directions, one bit flips;
    ``truncate``: the frame loses its tail;
    ``duplicate``: the frame is sent twice;
    ``junk``: 1..8 random bytes go out before the frame;
    ``fragment``: every byte travels alone (both directions);
    ``delay`` / ``delay_ms``: a device read chunk arrives ``delay_ms`` late
    (set it past the retransmit timeout);
    ``withhold_ack``: the host's ACK of a device event is not sent;
    ``disconnect_every``: every Nth host write, the connection drops;
    ``reboot_every``: every Nth host write, the device firmware reboots.
    """

    seed: int = 0
    drop: float = 0.0
    bit_flip: float = 0.0
    truncate: float = 0.0
    duplicate: float = 0.0
    junk: float = 0.0
    fragment: bool = False
    delay: float = 0.0
    delay_ms: int = 0
    withhold_ack: float = 0.0
    disconnect_every: int = 0
    reboot_every: int = 0

    def __post_init__(self) -> None:
        for name in ("drop", "bit_flip", "truncate", "duplicate", "junk", "delay", "withhold_ack"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"fault plan {name} must be a probability 0..1")
        if min(self.delay_ms, self.disconnect_every, self.reboot_every) < 0:
            raise ValueError("fault plan delay_ms, disconnect_every and reboot_every must be >= 0")


class FaultyTransport:
    """A transport that applies a :class:`FaultPlan` to an inner transport.

    ``on_disconnect``: called to pull the cable at the device (else the inner
    transport is closed here and the read raises :class:`LinkLost`, as EIO
    would); ``on_reboot``: called to reboot the device firmware.
    ``injected`` counts each fault applied, by name. :meth:`mute` drops every
    byte from the device (a dead device) until unmuted.
    """

    def __init__(
        self,
        inner: Transport,
        plan: FaultPlan,
        *,
        on_disconnect: Callable[[], None] | None = None,
        on_reboot: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self.plan = plan
        self.name = getattr(inner, "name", "faulty")
        self.on_disconnect = on_disconnect
        self.on_reboot = on_reboot
        self.injected: collections.Counter[str] = collections.Counter()
        self._rng = random.Random(plan.seed)
        self._writes = 0
        self._rx_backlog = bytearray()
        self._cut = False
        self._muted = False

    def mute(self, on: bool = True) -> None:
        """Drop everything the device sends (True) or let it through again (False)."""
        self._muted = on

    # Transport protocol --------------------------------------------------------

    def open(self) -> None:
        self._cut = False
        self._rx_backlog.clear()
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def cancel_read(self) -> None:
        cancel = getattr(self.inner, "cancel_read", None)
        if cancel is not None:
            cancel()

    def _flip(self, data: bytes) -> bytes:
        p = self.plan.bit_flip
        if not p:
            return data
        out = bytearray(data)
        for i in range(len(out)):
            if self._rng.random() < p:
                out[i] ^= 1 << self._rng.randrange(8)
                self.injected["bit_flip"] += 1
        return bytes(out)

    def write(self, data: bytes) -> None:
        plan, rng = self.plan, self._rng
        if self._cut:
            raise LinkLost(f"{self.name}: disconnected (fault injection)")
        self._writes += 1
        if plan.reboot_every and self._writes % plan.reboot_every == 0 and self.on_reboot:
            self.injected["reboot"] += 1
            self.on_reboot()
        if plan.disconnect_every and self._writes % plan.disconnect_every == 0:
            self.injected["disconnect"] += 1
            if self.on_disconnect:
                self.on_disconnect()
            else:
                self._cut = True
                self.inner.close()
                raise LinkLost(f"{self.name}: disconnected (fault injection)")
        if plan.withhold_ack and len(data) > 3 and data[3] == _ACK_TYPE and rng.random() < plan.withhold_ack:
            self.injected["withhold_ack"] += 1
            return
        if plan.drop and rng.random() < plan.drop:
            self.injected["drop"] += 1
            return
        if plan.truncate and len(data) > 1 and rng.random() < plan.truncate:
            data = data[: rng.randrange(1, len(data))]
            self.injected["truncate"] += 1
        if plan.junk and rng.random() < plan.junk:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data
            self.injected["junk"] += 1
        data = self._flip(data)
        copies = 1
        if plan.duplicate and rng.random() < plan.duplicate:
            copies = 2
            self.injected["duplicate"] += 1
        for _ in range(copies):
            if plan.fragment:
                for b in data:
                    self.inner.write(bytes((b,)))
            else:
                self.inner.write(data)

    @property
    def timed_read(self) -> bool:
        """As the inner transport's: whether :meth:`read` honours ``timeout_s``."""
        return bool(getattr(self.inner, "timed_read", False))

    def wait_readable(self, timeout_s: float | None) -> bool:
        """As the inner transport's, counting the bytes held back by ``fragment``."""
        if self._cut:
            raise LinkLost(f"{self.name}: disconnected (fault injection)")
        if self._rx_backlog:
            return True
        return as_timed(self.inner).wait_readable(timeout_s)

    def quiet(self, on: bool) -> None:
        """As the inner transport's; bytes held back by ``fragment`` when it ends
        wake the watcher (they are not on the inner line to end its wait)."""
        quiet = getattr(self.inner, "quiet", None)
        if quiet is not None:
            quiet(on)
        if not on and self._rx_backlog:
            self.cancel_read()

    def read(self, max_bytes: int = 512, timeout_s: float | None = None) -> bytes:
        plan, rng = self.plan, self._rng
        if self._cut:
            raise LinkLost(f"{self.name}: disconnected (fault injection)")
        if self._rx_backlog:
            b = bytes(self._rx_backlog[:1])
            del self._rx_backlog[:1]
            return b
        data = self.inner.read(max_bytes) if timeout_s is None else as_timed(self.inner).read(max_bytes, timeout_s)
        if not data:
            return data
        if self._muted:
            self.injected["muted"] += 1
            return b""
        if plan.drop and rng.random() < plan.drop:
            self.injected["drop"] += 1
            return b""
        if plan.delay and rng.random() < plan.delay:
            self.injected["delay"] += 1
            time.sleep(plan.delay_ms / 1000)
        data = self._flip(data)
        if plan.fragment and len(data) > 1:
            self.injected["fragment"] += 1
            self._rx_backlog += data[1:]
            data = data[:1]
        return data
