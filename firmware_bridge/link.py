"""Reliable request/response and event delivery over a byte transport (SPEC §6).

Stop-and-wait ARQ in each direction, in the manner of Klipper's host/MCU link:

* **Host requests.** Each request carries a SEQ (1..255, wrapping; 0 is for
  ``Identify``). The host resends the same bytes after
  ``retransmit_initial_ms``, doubling up to ``retransmit_max_ms``, at most
  ``max_attempts`` sends, then raises :class:`LinkTimeout`. The device answers
  a repeated SEQ from its reply cache without acting twice, so a request is
  carried out once even across a reconnect.
* **Device events.** Each carries the device's own SEQ. The host ACKs it and
  delivers it once, in order, into a bounded queue: a repeat of the last SEQ
  is re-ACKed, not delivered; when the queue is full the host does not ACK and
  the device's resend delivers it later.
* **Heartbeat.** With no frame received for ``heartbeat_interval_ms`` the host
  sends ``GetStatus``; ``heartbeat_misses`` unanswered in a row declare the
  link lost.
* **Reconnect.** After EIO, ENODEV, a closed socket or a dead heartbeat the
  link reopens the transport with backoff (``reconnect_initial_ms`` doubling
  to ``reconnect_max_ms``) and handshakes again. A request in flight waits up
  to ``reconnect_wait_s`` for the link to come back, then is resent.
* **Identity.** The handshake checks the protocol major version, the device
  kind, the firmware version against ``firmware_allowlist`` and the serial
  number against ``pinned_serial``. A different identity after a reconnect
  is a tamper event: the link refuses to come up until a person intervenes.
* **Reboot.** A new ``boot_id`` at handshake (or a ``NOT_IDENTIFIED`` NAK)
  means the firmware restarted: its SEQs start again, so the host forgets the
  last event SEQ it saw and re-identifies.

Threads: one reader per connection (blocked in the transport's read) and one
supervisor (heartbeat and reconnect, sleeping on a condition). Nothing polls.
Host-side notices (link down, link up, device rebooted, identity changed) are
delivered into the same event queue as :class:`LinkNotice`.
"""

from __future__ import annotations

import enum
import queue
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import structlog

from protocols.errors import MessageError
from protocols.frame import Frame, FrameParser, encode_frame
from protocols.messages import (
    PROTOCOL_MAJOR,
    Ack,
    DeviceKind,
    Direction,
    GetStatus,
    Identify,
    IdentifyReply,
    Message,
    Nak,
    NakCode,
    StatusReply,
    EVENTS_BY_KIND,
    catalogue,
    decode_message,
    direction_of,
    encode_message,
)

from .errors import (
    HandshakeError,
    LinkError,
    LinkLost,
    LinkTimeout,
    ProtocolVersionMismatch,
    RequestRefused,
    TransportError,
    WrongDevice,
)
from .ledger import (
    DeviceEvent as DeviceEvent,  # re-exported: drivers and the updater name them from here
    DeviceIdentity as DeviceIdentity,
    EventLedger,
    FirmwareNotAllowed,
    LinkNotice as LinkNotice,  # re-exported, like DeviceEvent
    Offer,
    RefusedEvent as RefusedEvent,  # defined with DeviceEvent, which carries it; named from here too
    TamperDetected,
    check_identity,
    post_notice,
    rebooted as _rebooted,
    refusal_notice,
)
from .transport import TimedTransport, Transport, as_timed

log = structlog.get_logger("firmware_bridge.link")


class _HeartbeatSkipped(LinkError):
    """The heartbeat found a request in flight: none is needed now."""


@dataclass(frozen=True)
class LinkConfig:
    """Link timing and identity policy (SPEC §7). Units are in the names.

    Bounds: the retransmit timeout lives between 25 ms and 5 s (it starts at
    ``retransmit_initial_ms`` and doubles up to ``retransmit_max_ms``).
    ``requester_reads``: a requester reads its own reply off the line where
    the transport allows it (SPEC §7.1); False: the reader thread reads
    every reply and hands it over. ``firmware_allowlist``: ``fnmatch`` patterns such as ``"1.4.*"``; empty
    allows any. ``firmware_approved``: ``(serial, version)`` pairs also allowed
    when the allowlist is set: a firmware update the table journaled approves the
    version it installed on that device (``table/firmware.py``, docs/firmware.md).
    ``pinned_serial``: the serial number this link must find.
    Raises ``ValueError`` naming the field on a bad value.
    """

    retransmit_initial_ms: int = 50
    retransmit_max_ms: int = 2000
    max_attempts: int = 6
    event_queue_size: int = 256
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 500
    heartbeat_misses: int = 3
    reconnect_initial_ms: int = 100
    reconnect_max_ms: int = 5000
    reconnect_wait_s: float = 30.0
    read_timeout_ms: int = 250
    requester_reads: bool = True
    firmware_allowlist: tuple[str, ...] = ()
    firmware_approved: tuple[tuple[str, str], ...] = ()
    pinned_serial: str | None = None

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, rule: str) -> None:
            if not ok:
                raise ValueError(f"link config {name}={getattr(self, name)!r}: {rule}")

        need(25 <= self.retransmit_initial_ms <= 5000, "retransmit_initial_ms", "must be 25..5000")
        need(self.retransmit_initial_ms <= self.retransmit_max_ms <= 5000, "retransmit_max_ms",
             "must be retransmit_initial_ms..5000")
        need(1 <= self.max_attempts <= 100, "max_attempts", "must be 1..100")
        need(self.event_queue_size >= 1, "event_queue_size", "must be >= 1")
        need(50 <= self.heartbeat_interval_ms <= 600_000, "heartbeat_interval_ms", "must be 50..600000")
        need(25 <= self.heartbeat_timeout_ms <= 60_000, "heartbeat_timeout_ms", "must be 25..60000")
        need(1 <= self.heartbeat_misses <= 100, "heartbeat_misses", "must be 1..100")
        need(10 <= self.reconnect_initial_ms <= self.reconnect_max_ms, "reconnect_initial_ms",
             "must be 10..reconnect_max_ms")
        need(self.reconnect_max_ms <= 600_000, "reconnect_max_ms", "must be <= 600000")
        need(0 <= self.reconnect_wait_s <= 3600, "reconnect_wait_s", "must be 0..3600")
        need(10 <= self.read_timeout_ms <= 5000, "read_timeout_ms", "must be 10..5000")
        need(isinstance(self.requester_reads, bool), "requester_reads", "must be true or false")


class LinkState(str, enum.Enum):
    """Where the link is (SPEC §6.7)."""

    CLOSED = "closed"
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"
    REFUSED = "refused"


@dataclass
class LinkStats:
    """Counters for diagnostics and benchmarks."""

    requests: int = 0
    retransmits: int = 0
    events: int = 0
    duplicate_events: int = 0
    stale_replies: int = 0
    #: Replies the requester read off the line itself (SPEC §7.1), not handed over.
    replies_read_by_requester: int = 0
    #: Times the reader thread had to stand aside (park) for a pending request and be
    #: woken after it: 0 where the transport can be made quiet and no bytes race the request.
    reader_parks: int = 0
    bad_payloads: int = 0
    wrong_device_events: int = 0
    backpressure: int = 0
    heartbeats: int = 0
    heartbeat_misses: int = 0
    heartbeats_skipped: int = 0
    disconnects: int = 0
    reconnects: int = 0
    reboots: int = 0


class _LinkShared:
    """What the two halves of a :class:`Link` share, declared for the type checker only:
    the link's own state (every attribute is set in ``Link.__init__``) and the link's
    methods each half calls. Nothing here exists at run time."""

    transport: Transport
    _timed_transport: TimedTransport
    frame_trace: Callable[[str, bytes], None] | None
    name: str
    config: LinkConfig
    events: queue.Queue[DeviceEvent]
    auto_reconnect: bool
    stats: LinkStats
    identity: DeviceIdentity | None
    expected_kind: DeviceKind | None
    _ledger: EventLedger[Message]
    _cv: threading.Condition
    _kick: threading.Lock
    _state: LinkState
    _generation: int
    _pending_seq: int | None
    _reply: Frame | None
    _slot: threading.Lock
    _rx_role: threading.Lock
    _park: threading.Condition
    _parked: bool
    _watching: bool
    _timed: bool
    _last_rx: float
    _parser: FrameParser
    _write_lock: threading.Lock
    _log: Any  # structlog's bound logger (structlog types get_logger as Any)

    if TYPE_CHECKING:
        def _connect(self) -> None: ...
        def _stop_reader(self) -> None: ...
        def _identify(self) -> DeviceIdentity: ...
        def _transact(self, msg: Message, expect: type[Message], *, internal: bool = False,
                      attempts: int | None = None, first_timeout_ms: int | None = None,
                      heartbeat: bool = False, _reidentified: int = 0) -> Message: ...
        def _wake_requester(self) -> None: ...
        def _changed(self) -> None: ...
        def _notice(self, kind: str, detail: str) -> None: ...
        def _go_down(self, reason: str) -> None: ...
        def _refuse(self, exc: HandshakeError) -> None: ...


#: the heartbeat's request (SPEC §6.4): a message is immutable, so one serves every heartbeat
_HEARTBEAT = GetStatus()

#: how early a wait for the heartbeat's moment may end and still count as that moment (s):
#: the clock's tick, so a wait that ends a hair early does not wake the thread a second time
_EARLY_S = 0.002


class _LinkSupervisor(_LinkShared):
    """The supervisor half of a :class:`Link`: the heartbeat while the link is up and the
    reconnect with backoff while it is down (SPEC §6.4, §6.6). A mixin: it works on the link's
    own state (``_cv``, ``_state``, ``config``, ``stats``), split out so each piece has one job."""

    def _supervise(self) -> None:
        cfg = self.config
        interval = cfg.heartbeat_interval_ms / 1000
        misses = 0
        kick = self._kick
        while True:
            # Forget a stale kick, then read the state: a change after this read kicks
            # the wait below, so none is missed. A bare lock, not the condition: the
            # idle link's one timed wait a heartbeat, with nothing allocated for it.
            kick.acquire(blocking=False)
            st = self._state
            if st in (LinkState.CLOSED, LinkState.REFUSED):
                return
            if st is LinkState.CONNECTING:  # a re-identify is under way elsewhere
                kick.acquire(timeout=interval)
                continue
            if st is LinkState.UP:
                idle = time.monotonic() - self._last_rx
                if idle < interval - _EARLY_S:  # a wait ends a little early: no second wake-up for it
                    kick.acquire(timeout=interval - idle)
                    continue
                try:
                    self._transact(_HEARTBEAT, StatusReply, attempts=1, first_timeout_ms=cfg.heartbeat_timeout_ms,
                                   heartbeat=True)
                    misses = 0
                except LinkTimeout:
                    misses += 1
                    self.stats.heartbeat_misses += 1
                    if misses >= cfg.heartbeat_misses:
                        misses = 0
                        self._go_down(f"{cfg.heartbeat_misses} heartbeats unanswered")
                except (LinkLost, LinkError):
                    # Skipped (a request in flight watches the device with its own
                    # retransmits) or the link went down meanwhile: look again after an
                    # interval, or at once when the state changes. Never spin.
                    self.stats.heartbeats_skipped += 1
                    kick.acquire(blocking=False)
                    if self._state is LinkState.UP:
                        kick.acquire(timeout=interval)
                continue
            if st is LinkState.DOWN:
                if not self.auto_reconnect:
                    return
                self._reconnect()

    def _reconnect(self) -> None:
        cfg = self.config
        backoff = cfg.reconnect_initial_ms / 1000
        while True:
            self._stop_reader()
            with self._cv:
                if self._state is not LinkState.DOWN:
                    return
                self._cv.wait(backoff)
                if self._state is not LinkState.DOWN:
                    return
                self._state = LinkState.CONNECTING
            try:
                self._connect()
                self._identify()
            except HandshakeError as exc:
                self._refuse(exc)
                return
            except (TransportError, LinkLost, LinkTimeout, OSError) as exc:
                with self._cv:
                    if self._state is LinkState.CLOSED:
                        return
                    self._state = LinkState.DOWN
                    self._generation += 1
                self._log.info("reconnect_failed", error=str(exc), retry_in_ms=round(min(backoff * 2, cfg.reconnect_max_ms / 1000) * 1000))
                backoff = min(backoff * 2, cfg.reconnect_max_ms / 1000)
                continue
            with self._cv:
                if self._state is LinkState.CONNECTING:
                    self._state = LinkState.UP
                self._changed()
            self.stats.reconnects += 1
            self._log.info("link_up", reconnects=self.stats.reconnects)
            self._notice("link_up", "reconnected")
            return


class _LinkReader(_LinkShared):
    """The reader half of a :class:`Link`: writing frames, reading the line (the reader
    thread, or a requester reading its own reply, SPEC §7.1) and dispatching each frame:
    a reply to the waiting requester, an event to the queue with its answer (SPEC §6.3).
    A mixin on the link's own state, split out so each piece has one job."""

    def _write(self, data: bytes) -> None:
        if self.frame_trace is not None:  # before the write: the reply may be parsed before it returns
            self.frame_trace("tx", data)
        try:
            with self._write_lock:
                self.transport.write(data)
        except LinkLost as exc:
            self._go_down(str(exc))
            raise

    def _reply_to(self, seq: int, msg: Message) -> None:
        t, p = encode_message(msg)
        try:
            self._write(encode_frame(seq, t, p))
        except LinkLost:
            pass

    def _read_once(self, gen: int, timeout_s: float | None = None) -> bool:
        """Read once and dispatch every whole frame; the caller holds the role.

        ``timeout_s``: a requester's bound for this read (None: the transport's
        own read timeout, the reader thread's). Returns False when the
        connection failed (the link is then down)."""
        try:
            data = self.transport.read(512) if timeout_s is None else self._timed_transport.read(512, timeout_s)
        except LinkLost as exc:
            if self._generation == gen:
                self._go_down(str(exc))
            return False
        parser = self._parser
        if data:
            self._last_rx = time.monotonic()
            trace = self.frame_trace
            for frame in parser.feed(data):
                if trace is not None:
                    trace("rx", frame.encode())
                self._on_frame(frame)
        elif parser.pending and (timeout_s is None
                                 or time.monotonic() - self._last_rx >= self.config.read_timeout_ms / 1000):
            for frame in parser.expire():  # the line went idle mid-frame (SPEC §2.1)
                if self.frame_trace is not None:
                    self.frame_trace("rx", frame.encode())
                self._on_frame(frame)
        return True

    def _read_loop(self, gen: int) -> None:
        """The reader thread: reads the line whenever no requester does (SPEC §7.1).

        Where requesters read their own replies (``_timed``), the reader waits
        for bytes on the line without holding the read role: it takes the role
        only to read what has arrived, never to block, so a request can take the
        line at once and an event is read as soon as it arrives, with no linger
        and no sleep. A transport that can be made ``quiet`` stops waking the
        reader for bytes while a request is pending: the requester reads its
        reply, and the reader is neither woken nor handed anything; elsewhere
        the reader parks while a request is pending. Where reads cannot be timed
        (USB bulk, pyserial's socket://) the reader blocks in the transport's
        read and hands every reply over."""
        role = self._rx_role
        timed = self._timed
        quietable = hasattr(self.transport, "quiet")
        read_s = self.config.read_timeout_ms / 1000
        while self._generation == gen:
            if timed:
                if self._pending_seq is not None and not quietable:
                    self._park_while_pending(gen)
                    continue
                self._watching = True  # before the check: a request sees it, or it sees the request
                try:
                    if self._pending_seq is not None and not quietable:
                        continue
                    # Blocked until bytes arrive or someone wakes it (a request, a close, the link
                    # going down): no timed poll while the line is idle; a partial frame alone
                    # bounds the wait, by the inter-byte timeout that ends it (SPEC §2.1).
                    ready = self._timed_transport.wait_readable(read_s if self._parser.pending else None)
                except LinkLost as exc:
                    if self._generation == gen:
                        self._go_down(str(exc))
                    return
                finally:
                    self._watching = False
                if self._pending_seq is not None:
                    # What arrived is the requester's to read. Bytes seen before the line
                    # went quiet (or a hang-up, which quiet does not mask): park, never spin.
                    if ready or not quietable:
                        self._park_while_pending(gen)
                    continue
                if not ready and not self._parser.pending:
                    continue  # idle (or woken by close): nothing to read, no partial frame to end
            with role:
                if self._generation != gen:
                    return
                # A request went out since the checks above: leave the line to its requester.
                off = timed and self._pending_seq is not None
                if not off and not self._read_once(gen, 0.0 if timed else None):
                    return
            if timed and self._pending_seq is not None and self._reply is None:
                self._wake_requester()  # a request went out during this read: its requester reads on

    def _park_while_pending(self, gen: int) -> None:
        """Wait, off the line, until no request is pending (its end notifies)."""
        self.stats.reader_parks += 1
        with self._park:
            self._parked = True
            try:
                while self._pending_seq is not None and self._generation == gen:
                    self._park.wait(1.0)
            finally:
                self._parked = False

    def _on_frame(self, frame: Frame) -> None:
        if frame.type >= 0x80:  # a reply (SPEC §4): the hot path of every request
            with self._slot:
                if frame.seq == self._pending_seq and self._reply is None:
                    self._reply = frame
                    self._wake_requester()
                    return
            self.stats.stale_replies += 1
            return
        kind = direction_of(frame.type)
        if kind is Direction.REQUEST:
            self._reply_to(frame.seq, Nak(NakCode.UNKNOWN_MESSAGE))
            return
        msg: Message | RefusedEvent
        try:
            msg = decode_message(frame.type, frame.payload)
        except MessageError as exc:
            self.stats.bad_payloads += 1
            # Not the error text: it can name a rank or a suit of the card it failed on.
            self._log.error("bad_event_payload", seq=frame.seq, type=frame.type, length=len(frame.payload))
            code = NakCode.BAD_PAYLOAD if frame.type in catalogue() else NakCode.UNKNOWN_MESSAGE
            msg = RefusedEvent(frame.type, "undecodable", code, str(exc), bytes(frame.payload))
        else:
            allowed = EVENTS_BY_KIND.get(self.expected_kind) if self.expected_kind is not None else None
            if allowed is not None and frame.type not in allowed:
                self.stats.wrong_device_events += 1
                self._log.error("event_from_wrong_device", seq=frame.seq, message=type(msg).__name__,
                                expected=str(self.expected_kind))
                msg = RefusedEvent(frame.type, "wrong_device", NakCode.UNKNOWN_MESSAGE,
                                   f"{type(msg).__name__} is not an event a {self.expected_kind} sends",
                                   bytes(frame.payload))
        if self._state is not LinkState.UP:
            return  # not before the handshake is done: unacknowledged, the device resends it
        ident = self.identity
        answer = Nak(msg.nak) if isinstance(msg, RefusedEvent) else Ack()
        event = DeviceEvent(self.name, msg, time.monotonic(), frame.seq, ident.boot_id if ident else 0)
        outcome, reply = self._ledger.offer(frame.seq, answer, lambda: post_event(self.events, event))
        if outcome is Offer.REPEAT:
            self.stats.duplicate_events += 1  # answered again once recorded; else its answer will come
        elif outcome is Offer.FULL:
            self.stats.backpressure += 1  # no answer: the device sends it again later
        else:
            self.stats.events += 1
        if reply is not None:
            self._reply_to(frame.seq, reply)


def post_event(events: "queue.Queue[DeviceEvent]", event: DeviceEvent) -> bool:
    """Queue ``event`` without blocking; False when the queue is full."""
    try:
        events.put_nowait(event)
    except queue.Full:
        return False
    return True


class Link(_LinkSupervisor, _LinkReader):
    """One device link: a transport, its reader, a supervisor, a request slot and
    an event queue.

    ``events`` may be shared by several links (one consumer then sees every
    device's events in arrival order); items are :class:`DeviceEvent`.
    ``auto_reconnect``: reopen the transport after it fails (default True).
    ``frame_trace``: called as ``frame_trace(direction, wire)`` with ``"tx"`` or
    ``"rx"`` and each whole frame's bytes just before it is written or as it is parsed (a trace
    file: table.frame_trace); it must not raise or block.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        config: LinkConfig | None = None,
        events: "queue.Queue[DeviceEvent] | None" = None,
        auto_reconnect: bool = True,
        ack_on_delivery: bool = True,
        frame_trace: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self.transport = transport
        #: the same transport, typed for the timed reads used only while ``_timed`` is true
        #: (one cast here, not one a read)
        self._timed_transport = as_timed(transport)
        self.frame_trace = frame_trace
        self.name = name
        self.config = config or LinkConfig()
        self.events: queue.Queue[DeviceEvent] = (
            events if events is not None else queue.Queue(self.config.event_queue_size)
        )
        self.auto_reconnect = auto_reconnect
        #: the last event the device sent and its answer, shared with every link kind (SPEC §6.3)
        self._ledger: EventLedger[Message] = EventLedger(Ack(), ack_on_delivery=ack_on_delivery)
        #: Called at each handshake with the device's identity; returns the SEQ of the
        #: last event already recorded for this boot (or None), so a restarted host
        #: does not take the device's resend of it as new.
        self.resume: Callable[[DeviceIdentity], int | None] | None = None
        self.stats = LinkStats()
        self.identity: DeviceIdentity | None = None
        self.expected_kind: DeviceKind | None = None
        self.session = secrets.randbits(32)
        self._request_lock = threading.RLock()
        self._cv = threading.Condition()
        # The supervisor's wake-up when the state changes (``_changed``): a bare lock
        # used as a binary semaphore (held = nothing new), like ``_signal``.
        self._kick = threading.Lock()
        self._kick.acquire()
        self._state = LinkState.CLOSED
        self._generation = 0
        self._pending_seq: int | None = None
        self._reply: Frame | None = None
        # Reply hand-off from the reader to the waiting requester: a bare lock used as
        # a binary semaphore (held = nothing to report), cheaper than Condition.wait.
        self._signal = threading.Lock()
        self._signal.acquire()
        self._slot = threading.Lock()  # guards _pending_seq and _reply
        # Whoever reads and parses the transport holds the role: the reader thread,
        # or a requester reading its own reply (SPEC §7.1). The reader waits for
        # bytes *without* the role and takes it only to read what is there, so a
        # request can take the line at any moment; ``_park`` wakes a reader parked
        # while a request is pending.
        self._rx_role = threading.Lock()
        self._park = threading.Condition()
        self._parked = False
        self._watching = False  # the reader waits for bytes (without the role)
        self._timed = False  # the transport can wait and read with a timeout: requesters may read
        self._seq = 0
        self._last_rx = time.monotonic()
        self._refusal: HandshakeError | None = None
        self._reader: threading.Thread | None = None
        self._supervisor: threading.Thread | None = None
        self._parser = FrameParser()
        self._write_lock = threading.Lock()

        self._log = log.bind(link=name, url=getattr(transport, "name", "?"))

    # -- lifecycle ---------------------------------------------------------------

    @property
    def ack_on_delivery(self) -> bool:
        """Answer each event as soon as it is queued (a bench with no journal), not in :meth:`acknowledge`."""
        return self._ledger.ack_on_delivery

    @ack_on_delivery.setter
    def ack_on_delivery(self, value: bool) -> None:
        self._ledger.ack_on_delivery = value

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def frame_errors(self) -> int:
        """Frames dropped for a bad CRC since the link was made (SPEC §3): line noise, counted
        across reconnects (a driver in a process of its own reports it to the table)."""
        return self._parser.crc_errors

    @property
    def alive(self) -> bool:
        """True while the link is up (handshaken, transport working)."""
        return self._state is LinkState.UP

    def open(self) -> "Link":
        """Open the transport and start the reader. Raises :class:`TransportError`."""
        with self._cv:
            if self._state is not LinkState.CLOSED:
                raise LinkError(f"{self.name}: already open")
            self._state = LinkState.CONNECTING
        try:
            self._connect()
        except BaseException:
            with self._cv:
                self._state = LinkState.CLOSED
            raise
        return self

    def _connect(self) -> None:
        """Open the transport and start a reader for this connection."""
        self.transport.open()
        self._parser.reset()
        self._last_rx = time.monotonic()
        self._timed = (self.config.requester_reads and bool(getattr(self.transport, "timed_read", False))
                       and hasattr(self.transport, "wait_readable") and hasattr(self.transport, "cancel_read"))
        with self._cv:
            self._generation += 1
            gen = self._generation
        self._reader = threading.Thread(target=self._read_loop, args=(gen,), name=f"link-{self.name}-rx", daemon=True)
        self._reader.start()

    def _wake_reader(self) -> None:
        """Wake whoever reads the line (a blocked read returns empty) and a parked reader."""
        cancel = getattr(self.transport, "cancel_read", None)
        if cancel is not None:
            cancel()
        with self._park:
            self._park.notify_all()

    def _stop_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and reader is not threading.current_thread():
            # The reader waits for bytes without the read role (SPEC §7.1), so the role
            # alone does not keep it off the port: wake it until it has gone (a
            # requester reading at the same moment may take one wake-up for itself).
            deadline = time.monotonic() + 2.0
            while reader.is_alive() and time.monotonic() < deadline:
                self._wake_reader()
                reader.join(timeout=0.05)
        # A requester may still be reading this connection: wake it and take the
        # role, so the port is never closed (and its fd reused) under a read.
        deadline = time.monotonic() + 2.0
        while not (got := self._rx_role.acquire(timeout=0.05)) and time.monotonic() < deadline:
            self._wake_reader()
        try:
            with self._write_lock:  # nor under a write
                self.transport.close()
        finally:
            if got:
                self._rx_role.release()

    def close(self) -> None:
        """Stop the supervisor and reader and close the transport; safe to call twice."""
        with self._cv:
            was = self._state
            self._state = LinkState.CLOSED
            self._generation += 1
            self._changed()
        self._wake_requester()
        if was is LinkState.CLOSED and self._reader is None and self._supervisor is None:
            return
        # Wake whoever reads the line now (the reader, or a heartbeat or Identify
        # reading its own reply) before waiting for the supervisor.
        self._wake_reader()
        sup, self._supervisor = self._supervisor, None
        if sup is not None and sup is not threading.current_thread():
            sup.join(timeout=5.0)
        self._stop_reader()

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- handshake -------------------------------------------------------------------

    def handshake(self, expected_kind: DeviceKind) -> DeviceIdentity:
        """Identify the device (SPEC §6.1) and bring the link up; then start the
        supervisor (heartbeat, reconnect).

        Raises :class:`ProtocolVersionMismatch`, :class:`WrongDevice`,
        :class:`FirmwareNotAllowed`, :class:`TamperDetected`, :class:`LinkTimeout`.
        """
        self.expected_kind = expected_kind
        ident = self._identify()
        with self._cv:
            if self._state is LinkState.CONNECTING:
                self._state = LinkState.UP
            self._changed()
        if self._supervisor is None:
            self._supervisor = threading.Thread(target=self._supervise, name=f"link-{self.name}-sup", daemon=True)
            self._supervisor.start()
        return ident

    def _identify(self) -> DeviceIdentity:
        reply = self._transact(Identify(self.session), IdentifyReply, internal=True)
        assert isinstance(reply, IdentifyReply)
        ident = DeviceIdentity(reply.kind, reply.protocol_major, reply.protocol_minor,
                               reply.firmware_version, reply.serial_number, reply.boot_id)
        self._check_identity(ident)
        old = self.identity
        self._ledger.identified(old, ident, self.resume)
        if _rebooted(old, ident):
            self.stats.reboots += 1
            self._notice("device_rebooted", f"boot_id {old.boot_id:08x} -> {ident.boot_id:08x}")
        self.identity = ident
        self._log = self._log.bind(device_serial=ident.serial_number)
        self._log.info("handshake", kind=str(ident.kind), firmware=ident.firmware_version,
                       protocol=f"{ident.protocol_major}.{ident.protocol_minor}", boot_id=f"{ident.boot_id:08x}")
        return ident

    def _check_identity(self, ident: DeviceIdentity) -> None:
        """The one identity check every link kind shares (:func:`firmware_bridge.ledger.check_identity`)."""
        check_identity(self.name, ident, self.config, expected_kind=self.expected_kind, previous=self.identity,
                       protocol_major=PROTOCOL_MAJOR, where=getattr(self.transport, "name", "?"))

    # -- requests ----------------------------------------------------------------------

    def request(self, msg: Message, expect: type[Message] = Ack) -> Message:
        """Send ``msg`` and return the device's reply, an instance of ``expect``.

        Waits up to ``reconnect_wait_s`` for a link that is down to come back.
        Raises :class:`RequestRefused` on a NAK, :class:`LinkTimeout` after the
        last retransmission, :class:`LinkLost` when the link is closed, refused
        or stays down, and :class:`LinkError` on a reply of another type.
        """
        return self._transact(msg, expect)

    def _wait_up(self, internal: bool) -> int:
        """Block until the link can carry a request; return its generation."""
        st = self._state
        if st is LinkState.UP or (internal and st is LinkState.CONNECTING):
            return self._generation  # the common case, without the lock
        deadline = time.monotonic() + self.config.reconnect_wait_s
        with self._cv:
            while True:
                st = self._state
                if st is LinkState.CLOSED:
                    raise LinkLost(f"{self.name}: link closed")
                if st is LinkState.REFUSED:
                    raise LinkLost(f"{self.name}: link refused: {self._refusal}")
                if st is LinkState.UP or (internal and st is LinkState.CONNECTING):
                    return self._generation
                if internal:
                    raise LinkLost(f"{self.name}: link went down during the handshake")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LinkLost(f"{self.name}: link down for more than {self.config.reconnect_wait_s:g} s")
                self._cv.wait(remaining)

    def _transact(
        self,
        msg: Message,
        expect: type[Message],
        *,
        internal: bool = False,
        attempts: int | None = None,
        first_timeout_ms: int | None = None,
        heartbeat: bool = False,
        _reidentified: int = 0,
    ) -> Message:
        """One request through the ARQ (see :meth:`request`).

        ``internal``: the handshake's own Identify (runs while CONNECTING, never
        waits for the request lock or for the link to come up). ``heartbeat``:
        the supervisor's probe: skipped (LinkError) when a request is already in
        flight, and never waits for a reconnect, since the supervisor is the
        one who reconnects.
        """
        # The request lock: none for the handshake's Identify; taken without waiting for a
        # heartbeat (a request in flight watches the device with its own retransmits);
        # else one request at a time, held across a reconnect so a resend keeps its SEQ
        # and the device's reply cache still answers it. Taken here, not in a context
        # manager of its own: no object and no frames for it on every heartbeat.
        lock = self._request_lock
        if heartbeat:
            if not lock.acquire(blocking=False):
                raise _HeartbeatSkipped(f"{self.name}: a request is in flight; no heartbeat needed")
            self.stats.heartbeats += 1
        elif not internal:
            lock.acquire()
        try:
            frame = self._send_until_answered(msg, internal=internal, attempts=attempts,
                                              first_timeout_ms=first_timeout_ms, heartbeat=heartbeat)
        finally:
            if not internal:
                lock.release()
        try:
            reply = decode_message(frame.type, frame.payload)
        except MessageError as exc:
            raise LinkError(f"{self.name}: undecodable reply to {type(msg).__name__}: {exc}") from exc
        if isinstance(reply, Nak):
            if reply.code is NakCode.NOT_IDENTIFIED and not internal:
                # The firmware rebooted without the port dropping: identify, then resend.
                if _reidentified >= 3:
                    self._go_down("the device keeps answering NOT_IDENTIFIED after Identify")
                    raise LinkLost(f"{self.name}: the device keeps answering NOT_IDENTIFIED after Identify")
                self._log.warning("device_not_identified", request=type(msg).__name__)
                with self._request_lock:
                    self._identify_or_go_down()
                return self._transact(msg, expect, attempts=attempts, first_timeout_ms=first_timeout_ms,
                                      heartbeat=heartbeat, _reidentified=_reidentified + 1)
            raise RequestRefused(type(msg).__name__, reply.code)
        if not isinstance(reply, expect):
            raise LinkError(f"{self.name}: {type(msg).__name__} answered by {type(reply).__name__}, not {expect.__name__}")
        return reply

    def _send_until_answered(self, msg: Message, *, internal: bool, attempts: int | None,
                             first_timeout_ms: int | None, heartbeat: bool) -> Frame:
        """Send ``msg`` under a fresh SEQ and resend it (same SEQ, doubling timeout) until
        its reply frame comes (SPEC §6.2); the caller holds the request lock. Raises
        :class:`LinkTimeout` after the last send, :class:`LinkLost` as :meth:`_transact`."""
        cfg = self.config
        if isinstance(msg, Identify):
            seq = 0
        else:
            self._seq = self._seq % 255 + 1
            seq = self._seq
        msg_type, payload = encode_message(msg)
        wire = encode_frame(seq, msg_type, payload)
        self.stats.requests += 1
        max_sends = attempts or cfg.max_attempts
        quiet = getattr(self.transport, "quiet", None) if self._timed else None
        timeout_s = (first_timeout_ms or cfg.retransmit_initial_ms) / 1000
        sends = 0
        try:
            while True:
                if heartbeat and self._state is not LinkState.UP:
                    raise LinkLost(f"{self.name}: link not up")
                st = self._state  # _wait_up's common case inline: one frame fewer a request
                gen = self._generation if st is LinkState.UP or (internal and st is LinkState.CONNECTING) \
                    else self._wait_up(internal)
                self._signal.acquire(blocking=False)  # forget a stale wake-up
                with self._cv:  # claim the reply slot only for the connection we waited for
                    if self._generation != gen or not (
                            self._state is LinkState.UP or (internal and self._state is LinkState.CONNECTING)):
                        continue
                    with self._slot:
                        self._pending_seq, self._reply = seq, None
                timed = self._timed
                if timed and quiet is not None:
                    # The reader thread stops waking for bytes: the reply is this
                    # thread's to read, with no hand-off and no wake-up (SPEC §7.1).
                    quiet(True)
                try:
                    self._write(wire)
                except LinkLost:
                    if internal or heartbeat:
                        raise
                    continue  # wait for the reconnect, then resend the same SEQ
                sends += 1
                if timed and quiet is None and self._watching:
                    # The reader waits on the line too: send it to park now, while the
                    # device works, not when the reply wakes both of us.
                    self._timed_transport.cancel_read()
                self._await_reply(gen, time.monotonic() + timeout_s, timed)
                with self._slot:
                    frame, self._pending_seq = self._reply, None
                went_down = frame is None and self._generation != gen
                if frame is not None:
                    break
                if went_down:
                    if internal or heartbeat:
                        raise LinkLost(f"{self.name}: link lost during {type(msg).__name__}")
                    continue
                if sends >= max_sends:
                    raise LinkTimeout(f"{self.name}: no reply to {type(msg).__name__} after {sends} sends")
                self.stats.retransmits += 1
                self._log.debug("retransmit", seq=seq, sends=sends, timeout_ms=round(timeout_s * 1000))
                timeout_s = min(timeout_s * 2, cfg.retransmit_max_ms / 1000)
        finally:
            with self._slot:
                if self._pending_seq == seq:  # an early exit: free the slot
                    self._pending_seq = None
            if quiet is not None:
                quiet(False)  # the reader watches again: an event already waiting wakes it at once
            if self._parked:  # a reader parked while this request was pending: the line is its again
                with self._park:
                    self._park.notify_all()
        return frame

    def _await_reply(self, gen: int, deadline: float, timed: bool) -> None:
        """Wait until the reply slot is filled, the connection ``gen`` ends or
        ``deadline`` (monotonic s) passes. With ``timed``, read the line here while
        the reader thread is off it: one thread hand-off fewer per round trip
        (SPEC §7.1); else the reader hands the reply over."""
        role, read_s = self._rx_role, self.config.read_timeout_ms / 1000
        while self._reply is None and self._generation == gen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if timed and role.acquire(blocking=False):
                try:
                    if self._reply is None and self._generation == gen:
                        self._read_once(gen, min(remaining, read_s))  # no longer than the reader would
                        if self._reply is not None:
                            self.stats.replies_read_by_requester += 1
                finally:
                    role.release()
            elif not self._signal.acquire(timeout=remaining):
                return  # the reader holds the line; it hands over the reply or the role

    def _identify_or_go_down(self) -> None:
        with self._cv:
            if self._state is LinkState.UP:
                self._state = LinkState.CONNECTING
        try:
            self._identify()
        except TamperDetected as exc:
            self._refuse(exc)
            raise LinkLost(str(exc)) from exc
        except HandshakeError as exc:
            self._refuse(exc)
            raise
        except (LinkLost, LinkTimeout) as exc:
            self._go_down(f"re-identify failed: {exc}")
            raise LinkLost(str(exc)) from exc
        with self._cv:
            if self._state is LinkState.CONNECTING:
                self._state = LinkState.UP
            self._changed()

    # -- state changes -----------------------------------------------------------------

    def _changed(self) -> None:
        """The state or generation changed (the caller holds ``_cv``): wake every thread
        waiting on ``_cv`` and the supervisor's wait (its ``_kick``)."""
        self._cv.notify_all()
        try:
            self._kick.release()
        except RuntimeError:  # already kicked
            pass

    def _wake_requester(self) -> None:
        try:
            self._signal.release()
        except RuntimeError:  # already signalled
            pass

    def _notice(self, kind: str, detail: str) -> None:
        if not post_notice(self.events, self.name, kind, detail):
            self._log.error("notice_dropped_queue_full", notice=kind)

    def _go_down(self, reason: str) -> None:
        with self._cv:
            if self._state not in (LinkState.UP, LinkState.CONNECTING):
                return
            self._state = LinkState.DOWN
            self._generation += 1
            self._changed()
        self._wake_requester()
        self._wake_reader()  # the reader waits on the line with no timeout: it ends with its connection
        self.stats.disconnects += 1
        self._log.warning("link_down", reason=reason)
        self._notice("link_down", reason)

    def _refuse(self, exc: HandshakeError) -> None:
        kind = refusal_notice(exc)
        self._notice(kind, str(exc))  # queued before the state changes: whoever sees REFUSED finds it
        with self._cv:
            if self._state is LinkState.CLOSED:
                return
            self._state = LinkState.REFUSED
            self._refusal = exc
            self._generation += 1
            self._changed()
        self._wake_requester()
        self._log.error(kind, error=str(exc))

    def acknowledge(self, event: DeviceEvent) -> None:
        """Answer a device event once it is recorded (``ack_on_delivery=False``): ``Ack``,
        or ``Nak`` for a :class:`RefusedEvent`. Until then the device keeps it and
        resends it, so a host that dies between delivery and record gets it again
        after restart (SPEC §6.3)."""
        answer = self._ledger.acknowledge(event, self.name)
        if answer is not None:
            self._reply_to(event.seq, answer)
