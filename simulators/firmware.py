"""Device-side link logic shared by the shuffler and shoe firmware emulators (SPEC §6).

Imports ``protocols`` only, never the host's ``firmware_bridge`` or ``devices``,
so one bug cannot hide on both ends (DESIGN.md, "Layers").

Each emulator runs one thread that blocks in ``poll`` on its port and a
wake-up pipe; with nothing to send and nothing arriving it sleeps with no
timeout, so an idle emulator costs no CPU.
"""

from __future__ import annotations

import collections
import os
import secrets
import select
import threading
from typing import Callable, Protocol

from protocols.clock import REAL_CLOCK, Clock
from protocols.errors import MessageError, UnknownMessageType
from protocols.frame import FrameParser, encode_frame
from protocols.messages import (
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    Ack,
    DeviceKind,
    Direction,
    Echo,
    EchoReply,
    Identify,
    IdentifyReply,
    Message,
    Nak,
    NakCode,
    decode_message,
    direction_of,
    encode_message,
)


class DevicePort(Protocol):
    """The device end of a byte stream (a pty master, a TCP connection...)."""

    name: str

    def fileno(self) -> int: ...

    def read(self, max_bytes: int = 4096) -> bytes: ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class FirmwareEmulator:
    """Base firmware: identify, duplicate suppression, event ARQ with retransmit.

    Subclasses set ``KIND`` and implement :meth:`handle_request`. Physical
    happenings call :meth:`emit`, which is thread-safe. Events are held until
    the host's first ``Identify`` since power-up (SPEC §6.3), then sent one at
    a time, each resent after ``retransmit_initial_ms`` doubling to
    ``retransmit_max_ms`` until ACKed. Until that ``Identify`` every other
    request is refused with ``NOT_IDENTIFIED`` (SPEC §6.5). :meth:`reboot`
    models a power cycle: new ``boot_id``; link state and unsent events lost.

    ``on_frame``: optional hook ``(direction "rx"/"tx", frame bytes)`` for logging.
    ``executed``: the last ``executed_kept`` requests acted on, ``(host SEQ,
    request)``, for tests and benches (bounded: a long run stays flat).
    ``clock``: what the firmware's own waits (event resends, the inter-frame gap)
    run on (:class:`protocols.clock.Clock`; a soak passes a faster
    :class:`~protocols.clock.VirtualClock`); real time by default.
    """

    KIND: DeviceKind

    def __init__(
        self,
        port: DevicePort,
        *,
        serial_number: str,
        firmware: tuple[int, int, int] = (1, 0, 0),
        protocol: tuple[int, int] = (PROTOCOL_MAJOR, PROTOCOL_MINOR),
        retransmit_initial_ms: int = 50,
        retransmit_max_ms: int = 2000,
        frame_gap_ms: int = 50,
        boot_id: int | None = None,
        on_frame: Callable[[str, bytes], None] | None = None,
        clock: Clock = REAL_CLOCK,
        executed_kept: int = 1024,
    ) -> None:
        self.port = port
        self.clock = clock
        self.serial_number = serial_number
        self.firmware = firmware
        self.protocol = protocol
        self.retransmit_initial_ms = retransmit_initial_ms
        self.retransmit_max_ms = retransmit_max_ms
        self.frame_gap_ms = frame_gap_ms
        self._last_rx = 0.0
        self.on_frame = on_frame
        self.lock = threading.RLock()
        self._outbox: collections.deque[Message] = collections.deque()
        self._pending: tuple[int, bytes, Message] | None = None  # (seq, wire bytes, event)
        self._pending_deadline = 0.0
        self._pending_timeout_s = 0.0
        self._event_seq = 0
        self._identified = False
        self._reply_cache: tuple[int, bytes] | None = None
        self._host_session: int | None = None
        self.boot_id = secrets.randbits(32) if boot_id is None else boot_id
        self.boots = 1
        self.executed: collections.deque[tuple[int, Message]] = collections.deque(maxlen=executed_kept)
        self._parser = FrameParser()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        if hasattr(port, "on_change"):
            port.on_change = self._wake  # the port tells us when its fd changes
        self._stop = False
        self._thread: threading.Thread | None = None
        self.events_sent = 0
        self.events_lost_in_reboots = 0
        self.events_acked = 0

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> "FirmwareEmulator":
        self._thread = threading.Thread(target=self._loop, name=f"emu-{self.KIND}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and close the port and wake pipe; safe to call twice."""
        self._stop = True
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        self.port.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1

    # -- events --------------------------------------------------------------------

    def emit(self, event: Message) -> None:
        """Queue a device event for the host (thread-safe)."""
        if direction_of(event.TYPE) is not Direction.EVENT:
            raise ValueError(f"{type(event).__name__} is not an event")
        with self.lock:
            self._outbox.append(event)
        self._wake()

    @property
    def idle(self) -> bool:
        """True when every emitted event has been ACKed by the host."""
        with self.lock:
            return self._pending is None and not self._outbox

    # -- subclass hook ---------------------------------------------------------------

    def handle_request(self, msg: Message) -> Message:
        """Answer one host request (not ``Identify``); return the reply message."""
        return Nak(NakCode.UNKNOWN_MESSAGE)

    # -- loop ------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (OSError, ValueError):
            pass

    def _send(self, wire: bytes) -> None:
        if self.on_frame:
            self.on_frame("tx", wire)
        try:
            self.port.write(wire)
        except OSError:
            pass  # the host is gone; the ARQ resends once it is back

    def _loop(self) -> None:
        poller = select.poll()  # poll, not selectors: fewer objects per wake-up
        poller.register(self._wake_r, select.POLLIN)
        port_fd = -1
        wake_r = self._wake_r
        while not self._stop:
            fd = self.port.fileno()
            if fd != port_fd:  # the port reconnected (TCP accept, new pty, new socket pair)
                if port_fd >= 0:
                    try:
                        poller.unregister(port_fd)
                    except (KeyError, ValueError, OSError):
                        pass
                port_fd = fd
                if fd >= 0:
                    poller.register(fd, select.POLLIN)
            timeout = None
            if self._pending is not None:
                with self.lock:
                    if self._pending is not None:
                        timeout = max(0.0, self._pending_deadline - self.clock.monotonic())
            if self._parser.pending:
                # A partial frame: if the line stays idle past the gap it can never
                # complete (SPEC §2.1 step 5); drop it and rescan.
                gap = self._last_rx + self.frame_gap_ms / 1000 - self.clock.monotonic()
                if gap <= 0:
                    for frame in self._parser.expire():
                        self._on_frame(frame)
                    continue
                timeout = gap if timeout is None else min(timeout, gap)
            for ready_fd, _ in poller.poll(None if timeout is None else self.clock.real_s(timeout) * 1000):
                if ready_fd == wake_r:
                    try:
                        os.read(wake_r, 512)
                    except BlockingIOError:
                        pass
                    continue
                try:
                    data = self.port.read(4096)
                except OSError:
                    data = b""
                if data:
                    self._last_rx = self.clock.monotonic()
                    for frame in self._parser.feed(data):
                        self._on_frame(frame)
                elif self._parser.pending:
                    self._parser.reset()
            if self._stop:
                break
            self._pump()

    def _pump(self) -> None:
        """Send the next event, or resend the unacknowledged one when its time is up."""
        if self._pending is None and not (self._outbox and self._identified):
            return  # nothing to send (read without the lock: a hint, rechecked below)
        with self.lock:
            now = self.clock.monotonic()
            if self._pending is not None:
                if now >= self._pending_deadline:
                    self._pending_timeout_s = min(self._pending_timeout_s * 2, self.retransmit_max_ms / 1000)
                    self._pending_deadline = now + self._pending_timeout_s
                    wire = self._pending[1]
                else:
                    return
            elif self._outbox and self._identified:
                event = self._outbox.popleft()
                t, p = encode_message(event)
                seq = self._event_seq
                self._event_seq = (seq + 1) % 256
                wire = encode_frame(seq, t, p)
                self._pending = (seq, wire, event)
                self._pending_timeout_s = self.retransmit_initial_ms / 1000
                self._pending_deadline = now + self._pending_timeout_s
                self.events_sent += 1
            else:
                return
        self._send(wire)

    def _on_frame(self, frame) -> None:
        if self.on_frame:
            self.on_frame("rx", frame.encode())
        kind = direction_of(frame.type)
        if kind is Direction.REPLY:
            with self.lock:
                if self._pending is not None and frame.seq == self._pending[0]:
                    # An ACK, or a NAK (host refused it: do not resend forever).
                    self._pending = None
                    self.events_acked += 1
            self._pump()
            return
        if kind is Direction.EVENT:
            self._reply(frame.seq, Nak(NakCode.UNKNOWN_MESSAGE))
            return
        try:
            msg = decode_message(frame.type, frame.payload)
        except UnknownMessageType:
            self._reply(frame.seq, Nak(NakCode.UNKNOWN_MESSAGE))
            return
        except MessageError:
            self._reply(frame.seq, Nak(NakCode.BAD_PAYLOAD))
            return
        if isinstance(msg, Identify):
            with self.lock:
                if msg.host_session != self._host_session:
                    self._reply_cache = None  # a new host: its SEQs start afresh
                self._host_session = msg.host_session
                self._identified = True
                if self._pending is not None:  # a host (re)connected: resend what it lacks soon
                    self._pending_timeout_s = self.retransmit_initial_ms / 1000
                    self._pending_deadline = self.clock.monotonic() + self._pending_timeout_s
            self._reply(frame.seq, self.identify_reply(), cache=False)
            self._pump()
            return
        with self.lock:
            wire = None
            if self._identified:
                cached = self._reply_cache
                if cached is not None and cached[0] == frame.seq:
                    wire = cached[1]  # a retransmitted request: answer again, act once
                else:
                    self.executed.append((frame.seq, msg))
                    reply = EchoReply(msg.data) if isinstance(msg, Echo) else self.handle_request(msg)
                    wire = encode_frame(frame.seq, *encode_message(reply))
                    self._reply_cache = (frame.seq, wire)
        if wire is None:
            self._reply(frame.seq, Nak(NakCode.NOT_IDENTIFIED), cache=False)
        else:
            self._send(wire)

    def identify_reply(self) -> IdentifyReply:
        """This device's identity (SPEC §4.1)."""
        return IdentifyReply(self.KIND, self.protocol[0], self.protocol[1], self.firmware, self.serial_number,
                             self.boot_id)

    def disconnect(self, down_s: float = 0.0) -> None:
        """Pull the cable (for ``down_s`` seconds, where the port can model that): the
        port drops the host; for a pty, a new pty appears behind its symlink.
        Firmware state is kept."""
        with self.lock:
            if down_s > 0:
                self.port.disconnect(down_s)
            else:
                self.port.disconnect()
            self._parser.reset()
        self._wake()

    def reboot(self) -> None:
        """Power-cycle the firmware: a new ``boot_id``; SEQ numbers, the reply cache,
        the host session and every event not yet ACKed are lost (RAM). The host
        learns of the reboot at its next request (``NOT_IDENTIFIED``) or
        handshake (new ``boot_id``) and must treat what the device was doing as
        unknown (SPEC §6.5)."""
        with self.lock:
            self.boot_id = secrets.randbits(32)
            self.boots += 1
            self._identified = False
            self._reply_cache = None
            self._host_session = None
            self._event_seq = 0
            self.events_lost_in_reboots += len(self._outbox) + (self._pending is not None)
            self._outbox.clear()
            self._pending = None
            self._parser.reset()
        self._wake()

    def _reply(self, seq: int, msg: Message, *, cache: bool = True) -> None:
        t, p = encode_message(msg)
        wire = encode_frame(seq, t, p)
        if cache:
            with self.lock:
                self._reply_cache = (seq, wire)
        self._send(wire)


__all__ = ["DevicePort", "FirmwareEmulator", "Ack"]
