"""Reliable request/response and event delivery over a byte transport (SPEC §6).

Stop-and-wait ARQ in each direction:

* **Host requests.** Each request carries a SEQ (1..255, wrapping, 0 reserved
  for ``Identify``). The host waits for a reply frame with the same SEQ,
  retransmitting the same bytes after ``retransmit_initial_ms``, doubling up to
  ``retransmit_max_ms``, at most ``max_attempts`` sends; then
  :class:`LinkTimeout`. The device answers a repeated SEQ from its cache
  without acting twice.
* **Device events.** Each event carries the device's own SEQ. The host ACKs
  it and delivers it once: a repeat of the last SEQ is re-ACKed, not
  delivered. When the event queue is full the host does not ACK, so the
  device retransmits later (back-pressure, nothing dropped).

One reader thread per link blocks in the transport's read; nothing polls.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

import structlog

from protocols.errors import MessageError
from protocols.frame import FrameParser, encode_frame
from protocols.messages import (
    PROTOCOL_MAJOR,
    Ack,
    DeviceKind,
    Direction,
    Identify,
    IdentifyReply,
    Message,
    Nak,
    NakCode,
    catalogue,
    decode_message,
    direction_of,
    encode_message,
)

from .errors import LinkError, LinkLost, LinkTimeout, ProtocolVersionMismatch, RequestRefused, WrongDevice
from .transport import Transport

log = structlog.get_logger("firmware_bridge.link")


@dataclass(frozen=True)
class LinkConfig:
    """Link timing (SPEC §7). Units are in the names."""

    retransmit_initial_ms: int = 50
    retransmit_max_ms: int = 2000
    max_attempts: int = 6
    event_queue_size: int = 256

    def __post_init__(self) -> None:
        if not 1 <= self.retransmit_initial_ms <= self.retransmit_max_ms:
            raise ValueError("need 1 <= retransmit_initial_ms <= retransmit_max_ms")
        if self.max_attempts < 1 or self.event_queue_size < 1:
            raise ValueError("max_attempts and event_queue_size must be >= 1")


@dataclass(frozen=True)
class DeviceEvent:
    """An event a device sent, in arrival order: ``source`` is the link's name,
    ``received_at`` a ``time.monotonic()`` stamp (s)."""

    source: str
    message: Message
    received_at: float


@dataclass(frozen=True)
class DeviceIdentity:
    """What the device said at handshake (SPEC §6.1)."""

    kind: DeviceKind
    protocol_major: int
    protocol_minor: int
    firmware_version: str
    serial_number: str


@dataclass
class LinkStats:
    """Counters for diagnostics and benchmarks."""

    requests: int = 0
    retransmits: int = 0
    events: int = 0
    duplicate_events: int = 0
    stale_replies: int = 0
    bad_payloads: int = 0
    backpressure: int = 0
    extra: dict = field(default_factory=dict)


class Link:
    """One device link: a transport, a reader thread, a request slot and an event queue.

    ``events`` may be shared by several links (so one consumer sees every
    device's events in arrival order); each item is a :class:`DeviceEvent`.
    Raises :class:`LinkLost` from :meth:`request` once the transport fails.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        config: LinkConfig | None = None,
        events: "queue.Queue[DeviceEvent] | None" = None,
    ) -> None:
        self.transport = transport
        self.name = name
        self.config = config or LinkConfig()
        self.events: queue.Queue[DeviceEvent] = events if events is not None else queue.Queue(self.config.event_queue_size)
        self.stats = LinkStats()
        self.identity: DeviceIdentity | None = None
        self._parser = FrameParser()
        self._write_lock = threading.Lock()
        self._request_lock = threading.Lock()
        self._cv = threading.Condition()
        self._pending_seq: int | None = None
        self._reply = None
        self._seq = 0
        self._last_event_seq: int | None = None
        self._lost: LinkLost | None = None
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._log = log.bind(link=name, url=getattr(transport, "name", "?"))

    # -- lifecycle -----------------------------------------------------------

    def open(self) -> "Link":
        """Open the transport and start the reader thread. Raises ``TransportError``."""
        self.transport.open()
        self._lost = None
        self._stop.clear()
        self._parser.reset()
        self._reader = threading.Thread(target=self._read_loop, name=f"link-{self.name}", daemon=True)
        self._reader.start()
        return self

    def close(self) -> None:
        """Stop the reader thread and close the transport; safe to call twice."""
        self._stop.set()
        self._fail(LinkLost(f"{self.name}: link closed"))
        reader, self._reader = self._reader, None
        if reader is not None and reader is not threading.current_thread():
            cancel = getattr(self.transport, "cancel_read", None)
            if cancel is not None:
                cancel()
            reader.join(timeout=2.0)
        self.transport.close()

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """True while the transport has not failed and the link is not closed."""
        return self._lost is None and self._reader is not None

    # -- requests --------------------------------------------------------------

    def request(self, msg: Message, expect: type[Message] = Ack) -> Message:
        """Send ``msg`` and return the device's reply, an instance of ``expect``.

        Raises :class:`RequestRefused` on a NAK, :class:`LinkTimeout` after the
        last retransmission, :class:`LinkLost` when the link fails, and
        :class:`LinkError` on a reply of another type.
        """
        with self._request_lock:
            if isinstance(msg, Identify):
                seq = 0
            else:
                self._seq = self._seq % 255 + 1
                seq = self._seq
            msg_type, payload = encode_message(msg)
            wire = encode_frame(seq, msg_type, payload)
            self.stats.requests += 1
            timeout_s = self.config.retransmit_initial_ms / 1000
            frame = None
            for attempt in range(self.config.max_attempts):
                with self._cv:
                    if self._lost is not None:
                        raise self._lost
                    self._pending_seq, self._reply = seq, None
                self._write(wire)
                deadline = time.monotonic() + timeout_s
                with self._cv:
                    while self._reply is None and self._lost is None:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self._cv.wait(remaining)
                    frame, self._pending_seq = self._reply, None
                    if frame is None and self._lost is not None:
                        raise self._lost
                if frame is not None:
                    break
                self.stats.retransmits += 1
                self._log.debug("retransmit", seq=seq, attempt=attempt + 1, timeout_ms=round(timeout_s * 1000))
                timeout_s = min(timeout_s * 2, self.config.retransmit_max_ms / 1000)
            else:
                raise LinkTimeout(
                    f"{self.name}: no reply to {type(msg).__name__} after {self.config.max_attempts} sends"
                )
        try:
            reply = decode_message(frame.type, frame.payload)
        except MessageError as exc:
            raise LinkError(f"{self.name}: undecodable reply to {type(msg).__name__}: {exc}") from exc
        if isinstance(reply, Nak):
            raise RequestRefused(type(msg).__name__, reply.code)
        if not isinstance(reply, expect):
            raise LinkError(f"{self.name}: {type(msg).__name__} answered by {type(reply).__name__}, not {expect.__name__}")
        return reply

    def handshake(self, expected_kind: DeviceKind) -> DeviceIdentity:
        """Identify the device (SPEC §6.1) and check it is the expected kind and speaks
        protocol major version :data:`PROTOCOL_MAJOR`.

        Raises :class:`ProtocolVersionMismatch` or :class:`WrongDevice`.
        """
        reply = self.request(Identify(), IdentifyReply)
        assert isinstance(reply, IdentifyReply)
        if reply.protocol_major != PROTOCOL_MAJOR:
            raise ProtocolVersionMismatch(
                f"{self.name}: device {reply.serial_number} speaks protocol "
                f"{reply.protocol_major}.{reply.protocol_minor}; this host speaks {PROTOCOL_MAJOR}.x. "
                f"Update the {'host' if reply.protocol_major > PROTOCOL_MAJOR else 'device firmware'}."
            )
        if reply.kind != expected_kind:
            raise WrongDevice(
                f"{self.name}: expected a {expected_kind} but the device at "
                f"{getattr(self.transport, 'name', '?')} is a {reply.kind} (serial {reply.serial_number})"
            )
        ident = DeviceIdentity(
            reply.kind, reply.protocol_major, reply.protocol_minor, reply.firmware_version, reply.serial_number
        )
        if self.identity is None or self.identity.serial_number != ident.serial_number:
            self._last_event_seq = None
        self.identity = ident
        self._log = self._log.bind(device_serial=ident.serial_number)
        self._log.info("handshake", kind=str(ident.kind), firmware=ident.firmware_version,
                       protocol=f"{ident.protocol_major}.{ident.protocol_minor}")
        return ident

    # -- reader side -------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        try:
            with self._write_lock:
                self.transport.write(data)
        except LinkLost as exc:
            self._fail(exc)
            raise

    def _reply_to(self, seq: int, msg: Message) -> None:
        t, p = encode_message(msg)
        try:
            self._write(encode_frame(seq, t, p))
        except LinkLost:
            pass

    def _fail(self, exc: LinkLost) -> None:
        with self._cv:
            if self._lost is None:
                self._lost = exc
            self._cv.notify_all()

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.transport.read(512)
            except LinkLost as exc:
                if not self._stop.is_set():
                    self._log.warning("link_lost", error=str(exc))
                self._fail(exc)
                return
            if data:
                for frame in self._parser.feed(data):
                    self._on_frame(frame)

    def _on_frame(self, frame) -> None:
        kind = direction_of(frame.type)
        if kind is Direction.REPLY:
            with self._cv:
                if frame.seq == self._pending_seq and self._reply is None:
                    self._reply = frame
                    self._cv.notify_all()
                    return
            self.stats.stale_replies += 1
            return
        if kind is Direction.REQUEST:
            self._reply_to(frame.seq, Nak(NakCode.UNKNOWN_MESSAGE))
            return
        try:
            msg = decode_message(frame.type, frame.payload)
        except MessageError as exc:
            self.stats.bad_payloads += 1
            self._log.error("bad_event_payload", seq=frame.seq, type=frame.type, error=str(exc))
            self._reply_to(frame.seq, Nak(NakCode.BAD_PAYLOAD if frame.type in catalogue() else NakCode.UNKNOWN_MESSAGE))
            return
        if frame.seq == self._last_event_seq:
            self.stats.duplicate_events += 1
            self._reply_to(frame.seq, Ack())
            return
        try:
            self.events.put_nowait(DeviceEvent(self.name, msg, time.monotonic()))
        except queue.Full:
            self.stats.backpressure += 1  # no ACK: the device sends it again later
            return
        self._last_event_seq = frame.seq
        self.stats.events += 1
        self._reply_to(frame.seq, Ack())

