"""Device-side link logic shared by the shuffler and shoe firmware emulators (SPEC §6).

Imports ``protocols`` only, never the host's ``firmware_bridge`` or ``devices``,
so one bug cannot hide on both ends (docs/architecture.md, "The layer rule").

Each emulator runs one thread that blocks in ``poll`` on its port and a
wake-up pipe; with nothing to send and nothing arriving it sleeps with no
timeout, so an idle emulator costs no CPU.

Every emulator has a bootloader (:mod:`simulators.bootloader`, SPEC §9): it
answers the firmware update requests, runs the image of its A or B slot,
and after an ``UpdateActivate`` resets into the new image once. A new image
that "fails to boot" (``bootloader.faults.fail_boot``) hangs: it answers
nothing until the watchdog (``watchdog_ms``) resets the device, which then
boots the previous slot.
"""

from __future__ import annotations

import collections
import os
import secrets
import select
import threading
from typing import Callable, Iterable, Protocol

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
    UPDATE_REQUESTS,
    Message,
    Nak,
    NakCode,
    decode_message,
    direction_of,
    encode_message,
)

from .bootloader import DEFAULT_SLOT_SIZE, Bootloader


class DevicePort(Protocol):
    """The device end of a byte stream (a pty master, a TCP connection...)."""

    name: str

    def fileno(self) -> int: ...

    def read(self, max_bytes: int = 4096) -> bytes: ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class _RawEvent:
    """An event frame queued as raw bytes (:meth:`FirmwareEmulator.emit_raw`)."""

    __slots__ = ("msg_type", "payload")

    def __init__(self, msg_type: int, payload: bytes) -> None:
        self.msg_type, self.payload = msg_type, payload


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
    ``clock``: what the firmware's own waits (event resends, the inter-frame gap, the watchdog)
    run on (:class:`protocols.clock.Clock`; a soak passes a faster
    :class:`~protocols.clock.VirtualClock`); real time by default.
    ``history``: how many requests acted on :attr:`executed` keeps (the oldest drop out).

    Bootloader (SPEC §9): ``firmware`` is the factory image's version in slot A;
    ``model`` (default :attr:`MODEL`), ``security_version`` and ``vendor_keys``
    (Ed25519 public keys, objects or 32 raw bytes; none: every update is refused
    UNKNOWN_KEY) are this device's own; ``slot_size`` bytes per slot;
    ``watchdog_ms``: how long a hung image runs before the watchdog resets the
    device; ``fail_boot``: every new image activated hangs at boot (the emulator
    option behind a roll-back test; also ``bootloader.faults.fail_boot``).
    ``boot_id``: the first boot's id; later boots count up from it (for
    reproducible golden vectors); None draws each at random.
    """

    KIND: DeviceKind
    MODEL = "SIM"

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
        history: int = 1024,
        model: str | None = None,
        security_version: int = 0,
        vendor_keys: Iterable[object] = (),
        slot_size: int = DEFAULT_SLOT_SIZE,
        watchdog_ms: int = 2000,
        fail_boot: bool = False,
    ) -> None:
        self.port = port
        #: a fault injection: power-cycle once the reply to the request being handled is out
        self.power_cut_after_reply = False
        self.clock = clock
        self.serial_number = serial_number
        self.bootloader = Bootloader(self.KIND, model=model or self.MODEL, firmware=firmware,
                                     security_version=security_version, vendor_keys=vendor_keys,  # type: ignore[arg-type]
                                     slot_size=slot_size)
        self.bootloader.faults.fail_boot = fail_boot
        self.watchdog_ms = watchdog_ms
        self._watchdog_at: float | None = None  # a hung image: when the watchdog resets the device
        self._hung = False
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
        self._boot_id_base = boot_id
        self.boot_id = secrets.randbits(32) if boot_id is None else boot_id
        self.boots = 1
        #: (host SEQ, request) acted on, the last ``history`` of them (for tests and benches);
        #: bounded, like the reply cache (SPEC §6.2), so a device running for days stays flat.
        self.executed: collections.deque[tuple[int, Message]] = collections.deque(maxlen=history)
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
        #: Fault injection (a bench's control lines ``garble N`` and ``lose N``): the next
        #: ``garble_frames`` frames sent carry a wrong CRC (line noise: the host drops
        #: them, SPEC §2.1; the ARQ and the reply cache bring them back), and the next
        #: ``lose_events`` events are never sent (a sensor's report lost inside the
        #: device: only the device's status tells the host).
        self.garble_frames = 0
        self.lose_events = 0
        self.events_lost_on_purpose = 0

    @property
    def firmware(self) -> tuple[int, int, int]:
        """The version of the image running (from its slot)."""
        return self.bootloader.firmware

    @property
    def hung(self) -> bool:
        """True while a new image that fails to boot hangs (until the watchdog resets)."""
        return self._hung

    def holds_cards(self) -> bool:
        """Whether the device holds a deck now; an update is refused DECK_PRESENT while
        it does (SPEC §9.4). Subclasses with cards say so."""
        return False

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
            if self.lose_events > 0:  # fault injection: this event is lost inside the device
                self.lose_events -= 1
                self.events_lost_on_purpose += 1
                return
            self._outbox.append(event)
        self._wake()

    def emit_raw(self, msg_type: int, payload: bytes) -> None:
        """Queue an event frame with any type and payload bytes, as faulty firmware
        would send it (a rank code no card has, a type not in the catalogue, another
        device kind's event): fault injection for tests and benches (thread-safe)."""
        if not 0x40 <= msg_type <= 0x7F:
            raise ValueError(f"type 0x{msg_type:02X} is not in the event range 0x40..0x7F")
        with self.lock:
            self._outbox.append(_RawEvent(msg_type, bytes(payload)))
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
        if self.garble_frames > 0:  # fault injection: line noise flips the CRC's last byte
            with self.lock:
                if self.garble_frames > 0:
                    self.garble_frames -= 1
                    wire = wire[:-1] + bytes([wire[-1] ^ 0xFF])
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
            if self._watchdog_at is not None:
                left = self._watchdog_at - self.clock.monotonic()
                if left <= 0:
                    self.reboot()  # the watchdog resets a hung image: the bootloader rolls back
                    continue
                timeout = left
            if self._pending is not None and not self._hung:
                with self.lock:
                    if self._pending is not None:
                        left = max(0.0, self._pending_deadline - self.clock.monotonic())
                        timeout = left if timeout is None else min(timeout, left)
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
        if self._hung:
            return  # a hung image sends nothing
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
                t, p = (event.msg_type, event.payload) if isinstance(event, _RawEvent) else encode_message(event)
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
        if self._hung:
            return  # an image that failed to boot answers nothing
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
                self.bootloader.confirm()  # a new image on trial reached a handshake (SPEC §9.3)
                if self._pending is not None:  # a host (re)connected: resend what it lacks soon
                    self._pending_timeout_s = self.retransmit_initial_ms / 1000
                    self._pending_deadline = self.clock.monotonic() + self._pending_timeout_s
            self._reply(frame.seq, self.identify_reply(), cache=False)
            self._pump()
            return
        restart = False
        with self.lock:
            wire = None
            if self._identified:
                cached = self._reply_cache
                if cached is not None and cached[0] == frame.seq:
                    wire = cached[1]  # a retransmitted request: answer again, act once
                else:
                    self.executed.append((frame.seq, msg))
                    if isinstance(msg, Echo):
                        reply = EchoReply(msg.data)
                    elif isinstance(msg, UPDATE_REQUESTS):
                        reply, restart = self.bootloader.handle(msg, holds_cards=self.holds_cards())
                    else:
                        reply = self.handle_request(msg)
                    wire = encode_frame(frame.seq, *encode_message(reply))
                    self._reply_cache = (frame.seq, wire)
        if wire is None:
            self._reply(frame.seq, Nak(NakCode.NOT_IDENTIFIED), cache=False)
        else:
            self._send(wire)
        if restart or self.power_cut_after_reply:
            self.power_cut_after_reply = False
            self.reboot()  # UpdateActivate: reset into the new image, once the Ack is out (or a power cut)

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

    def unplug(self) -> None:
        """Pull the cable and keep it out until :meth:`plug` (where the port can model
        that: a pty, a TCP server; raises ``ValueError`` otherwise). Firmware state and
        the events not yet acknowledged are kept: they are resent once the host is back."""
        if not hasattr(self.port, "unplug"):
            raise ValueError(f"a {type(self.port).__name__} cannot be unplugged")
        with self.lock:
            self.port.unplug()
            self._parser.reset()
        self._wake()

    def plug(self) -> None:
        """Plug the cable back in after :meth:`unplug` (the host reconnects)."""
        if not hasattr(self.port, "plug"):
            raise ValueError(f"a {type(self.port).__name__} cannot be plugged in")
        with self.lock:
            self.port.plug()
        self._wake()

    @property
    def unplugged(self) -> bool:
        """True while the cable is out (:meth:`unplug`)."""
        return bool(getattr(self.port, "unplugged", False))

    def reboot(self) -> None:
        """Power-cycle the firmware: a new ``boot_id``; SEQ numbers, the reply cache,
        the host session and every event not yet ACKed are lost (RAM). The host
        learns of the reboot at its next request (``NOT_IDENTIFIED``) or
        handshake (new ``boot_id``) and must treat what the device was doing as
        unknown (SPEC §6.5). Flash survives: the bootloader then picks the slot to
        run (SPEC §9.3), so a power cut at any point of an update leaves the device
        on a bootable image."""
        with self.lock:
            self.boots += 1
            base = self._boot_id_base
            self.boot_id = secrets.randbits(32) if base is None else (base + self.boots - 1) & 0xFFFFFFFF
            trial = self.bootloader.boot()
            self._hung = trial and self.bootloader.faults.fail_boot
            self._watchdog_at = self.clock.monotonic() + self.watchdog_ms / 1000 if self._hung else None
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
