"""The table's driver for the ASCII shoe (SPEC.md of this package), on the published contract.

Imports ``devices.contract`` (the driver contract, docs/drivers.md) and
``protocols`` types only, never the table's core. Registered as the entry
point ``ascii-shoe`` of group ``threecard.devices`` (this package's
pyproject); a table selects it with::

    [devices.shoe]
    driver = "ascii-shoe"
    url = "/dev/ttyUSB1"        # any pyserial URL: socket://HOST:PORT for the emulator
    baudrate = 9600             # this driver's own options
    draw_index = true           # false: a shoe of the basic model (no draw numbers)
    resend = true               # false: a shoe that sends each event once (no resend)

Threads: one reader (blocked in the port's read with a short timeout) and
one supervisor (heartbeat, reconnect with back-off), as the SPEC link's.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Mapping

import serial

from devices.contract import (
    CONTRACT_VERSION,
    DECK_SIZE,
    BackColour,
    Capabilities,
    Card,
    CardDrawn,
    CardUnreadable,
    DeviceIdentity,
    DeviceKind,
    DeviceState,
    DrawCounter,
    DriverKind,
    DriverOptionError,
    EventLink,
    HandshakeError,
    LinkConfig,
    LinkLost,
    LinkState,
    LinkTimeout,
    NakCode,
    OpenRequest,
    RefusedEvent,
    ShoeEmpty,
    ShoeLoaded,
    StatusReply,
    TransportError,
)

from .wire import LineBuffer, WireError, decode, encode, parse_event

#: how long a request waits for its reply, and how many times it is sent (SPEC.md §2)
REPLY_TIMEOUT_S = 0.5
REQUEST_ATTEMPTS = 5
#: the ASCII protocol's own version, reported as the identity's protocol_major
ASCII_PROTOCOL = 1

_TYPES = {"LOAD": ShoeLoaded.TYPE, "CARD": CardDrawn.TYPE, "UNREAD": CardUnreadable.TYPE, "EMPTY": ShoeEmpty.TYPE}


class AsciiLink(EventLink):
    """The connection to one ASCII shoe: the port, its reader and supervisor, and the
    contract's link surface (:class:`devices.contract.EventLink`)."""

    def __init__(self, url: str, name: str, config: LinkConfig, events, *, baudrate: int, draw_index: bool,
                 ack_on_delivery: bool, resume, resend: bool = True) -> None:
        super().__init__(name, config, events, expected=DriverKind.SHOE, ack_on_delivery=ack_on_delivery,
                         resume=resume, resend=resend)
        self.url = url
        self.baudrate = baudrate
        self.draw_index = draw_index
        self.counter = DrawCounter()
        self._port: Any = None
        self._write_lock = threading.Lock()
        self._request_lock = threading.RLock()
        self._cv = threading.Condition()
        self._want: str | None = None
        self._reply: list[str] | None = None
        self._closed = False
        self._gen = 0
        self._last_rx = time.monotonic()
        self._cached: tuple[int, Any] | None = None  # the last event translated (a resend is the same)
        self._reader: threading.Thread | None = None
        self._supervisor: threading.Thread | None = None
        self.dropped_lines = 0
        #: True while open() numbers a basic shoe's draws from its status: an event read
        #: meanwhile is left unanswered (the shoe resends it once the count is known)
        self._starting = False

    # -- the port -----------------------------------------------------------------------------
    @property
    def frame_errors(self) -> int:
        """Lines dropped for a bad checksum (the contract's optional ``link.frame_errors``)."""
        return self.dropped_lines

    def _open_port(self) -> None:
        try:
            port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=0.1, write_timeout=2)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise TransportError(f"{self.name}: cannot open {self.url}: {exc}",
                                 "check the url and that nothing else holds the port") from None
        with self._cv:
            self._port = port
            self._gen += 1
            gen = self._gen
            self._last_rx = time.monotonic()
        self._reader = threading.Thread(target=self._read_loop, args=(port, gen), name=f"{self.name}-rx",
                                        daemon=True)
        self._reader.start()

    def _write(self, line: bytes) -> None:
        port = self._port
        if port is None:
            raise LinkLost(f"{self.name}: the line is down")
        try:
            with self._write_lock:
                port.write(line)
        # pyserial's socket port raises TypeError/AttributeError when closed under a write
        except (serial.SerialException, OSError, TypeError, AttributeError) as exc:
            self._go_down(f"write failed: {exc}")
            raise LinkLost(f"{self.name}: write failed: {exc}") from None

    def _go_down(self, reason: str) -> None:
        with self._cv:
            port, self._port = self._port, None
            self._gen += 1
            if self.state is LinkState.UP:
                self.set_state(LinkState.DOWN, reason)
            self._cv.notify_all()
        if port is not None:
            try:
                port.close()
            except Exception:  # noqa: BLE001 - closing a broken port
                pass

    def _read_loop(self, port: Any, gen: int) -> None:
        buf = LineBuffer()
        while not self._closed and gen == self._gen:
            try:
                # one byte waits (up to the port's timeout), then whatever is in: read(256) alone
                # would wait out the timeout for every line shorter than 256 bytes
                data = port.read(1)
                if data:
                    data += port.read(port.in_waiting)
            except (serial.SerialException, OSError, TypeError, AttributeError) as exc:
                if gen == self._gen and not self._closed:
                    self._go_down(f"read failed: {exc}")
                return
            if not data:
                continue
            self._last_rx = time.monotonic()
            for line in buf.feed(data):
                self._on_line(line)

    def _on_line(self, line: bytes) -> None:
        try:
            fields = decode(line)
        except WireError:
            self.dropped_lines += 1  # the shoe resends an event; a request is sent again
            return
        if fields[0] == "EV":
            self._on_event(fields, line)
            return
        with self._cv:
            if self._want is not None and fields[0] in (self._want, "ER"):
                self._reply = fields
                self._cv.notify_all()

    def _on_event(self, fields: list[str], line: bytes) -> None:
        if self._starting:
            return
        try:
            ev = parse_event(fields)
        except WireError:
            self.dropped_lines += 1  # no SEQ to answer: the shoe's resend is dropped too (the round waits)
            return
        if self._cached is not None and self._cached[0] == ev.seq:
            message = self._cached[1]
        else:
            message = self._translate(ev.what, ev.args, line)
            self._cached = (ev.seq, message)
        self.deliver(message, ev.seq)

    def _translate(self, what: str, args: tuple[str, ...], line: bytes) -> Any:
        """An event line's fields -> the contract's message, or a RefusedEvent (never raises)."""
        try:
            if what == "LOAD" and len(args) == 1:
                self.counter.loaded()
                return ShoeLoaded(_colour(args[0]))
            if what == "CARD" and len(args) == (3 if self.draw_index else 2):
                index = _index(args[0]) if self.draw_index else None
                card, colour = Card.parse(args[-2]), _colour(args[-1])
                return CardDrawn(index if index is not None else self.counter.next(), card, colour)
            if what == "UNREAD" and len(args) == (2 if self.draw_index else 1):
                index = _index(args[0]) if self.draw_index else None
                colour = _colour(args[-1])
                return CardUnreadable(index if index is not None else self.counter.next(), colour)
            if what == "EMPTY" and len(args) == 1 and args[0].isdigit():
                return ShoeEmpty(int(args[0]) % 65536)
        except ValueError as exc:  # CardError is a ValueError
            return RefusedEvent(_TYPES[what], "undecodable", NakCode.BAD_PAYLOAD, f"{what}: {exc}", line)
        if what in _TYPES:
            return RefusedEvent(_TYPES[what], "undecodable", NakCode.BAD_PAYLOAD,
                                f"{what} with {len(args)} fields", line)
        return RefusedEvent(0, "wrong_device", NakCode.UNKNOWN_MESSAGE, f"{what} is not an event of a shoe", line)

    def send_answer(self, seq: int, ok: bool, nak: NakCode | None) -> None:
        line = encode("ACK", seq) if ok else encode("NAK", seq, "WRONG" if nak is NakCode.UNKNOWN_MESSAGE else "BAD")
        try:
            self._write(line)
        except LinkLost:
            pass  # unanswered: the shoe resends it after the reconnect and it is answered then

    # -- requests -------------------------------------------------------------------------------
    def request(self, head: str, reply: str, *, internal: bool = False) -> list[str]:
        """Send request ``head`` (``ID?``, ``ST?``) and return the reply's fields.
        Waits up to ``reconnect_wait_s`` for a line that is down (``internal``: not).
        Raises :class:`LinkTimeout` (no reply after every attempt), :class:`LinkLost`."""
        if not internal:
            self._wait_up()
        with self._request_lock:
            for _ in range(REQUEST_ATTEMPTS):
                with self._cv:
                    self._want, self._reply = reply, None
                self._write(encode(head))
                with self._cv:
                    got = self._cv.wait_for(lambda: self._reply is not None or self._port is None or self._closed,
                                            timeout=REPLY_TIMEOUT_S)
                    fields, self._want = self._reply, None
                if fields is not None:
                    if fields[0] == "ER" and fields[1:] == ["BOOT"] and head != "ID?":
                        self.identify()  # the shoe restarted (SPEC.md §4): device_rebooted, then again
                        return self.request(head, reply, internal=True)
                    if fields[0] == "ER":
                        raise LinkTimeout(f"{self.name}: the shoe answered {head} with ER {' '.join(fields[1:])}")
                    return fields
                if got:
                    raise LinkLost(f"{self.name}: the line went down during {head}")
            raise LinkTimeout(f"{self.name}: no answer to {head} after {REQUEST_ATTEMPTS} attempts")

    def _wait_up(self) -> None:
        with self._cv:
            ok = self._cv.wait_for(lambda: self.state in (LinkState.UP, LinkState.REFUSED, LinkState.CLOSED),
                                   timeout=self.config.reconnect_wait_s)
        if not ok or self.state is not LinkState.UP:
            raise LinkLost(f"{self.name}: the shoe is not connected ({self.state.value})")

    def identify(self) -> DeviceIdentity:
        fields = self.request("ID?", "ID", internal=True)
        if len(fields) != 5 or not _is_hex8(fields[4]):
            raise HandshakeError(f"{self.name}: the ID reply does not fit (SPEC.md §2)")
        _, model, serial_no, firmware, boot = fields
        ident = DeviceIdentity(DeviceKind.SHOE, ASCII_PROTOCOL, 0, firmware, serial_no, int(boot, 16))
        with self._cv:
            self.identified(ident)  # raises, and refuses the link, on a wrong identity
            self._cv.notify_all()
        return ident

    # -- lifecycle ------------------------------------------------------------------------------
    def open(self) -> None:
        self.set_state(LinkState.CONNECTING)
        self._starting = not self.draw_index and self.resend  # a shoe without resend would not send it again
        self._open_port()
        try:
            self.identify()
            if not self.draw_index:
                # the basic model numbers nothing: go on from what its status says is gone
                fields = self.request("ST?", "ST", internal=True)
                if len(fields) == 4 and fields[1] == "LOADED" and fields[3].isdigit():
                    self.counter.start_at(DECK_SIZE - int(fields[3]))
                self._starting = False
        except BaseException:
            self.close()
            raise
        self._supervisor = threading.Thread(target=self._supervise, name=f"{self.name}-sup", daemon=True)
        self._supervisor.start()

    def _supervise(self) -> None:
        cfg = self.config
        backoff = cfg.reconnect_initial_ms / 1000
        misses = 0
        while not self._closed:
            state = self.state
            if state is LinkState.REFUSED:
                return
            if state is LinkState.DOWN:
                with self._cv:
                    self._cv.wait_for(lambda: self._closed, timeout=backoff)
                if self._closed:
                    return
                try:
                    self._open_port()
                    self.identify()
                    backoff, misses = cfg.reconnect_initial_ms / 1000, 0
                except HandshakeError:
                    return
                except (TransportError, LinkTimeout, LinkLost):
                    self._go_down("reconnect failed")
                    backoff = min(backoff * 2, cfg.reconnect_max_ms / 1000)
                continue
            quiet = time.monotonic() - self._last_rx
            interval = cfg.heartbeat_interval_ms / 1000
            if quiet < interval:
                with self._cv:
                    self._cv.wait_for(lambda: self._closed or self.state is not LinkState.UP,
                                      timeout=interval - quiet)
                continue
            try:
                self.request("ST?", "ST", internal=True)
                misses = 0
            except LinkTimeout:
                misses += 1
                if misses >= cfg.heartbeat_misses:
                    self._go_down(f"{misses} heartbeats unanswered")
            except LinkLost:
                pass

    def close(self) -> None:
        self._closed = True
        with self._cv:
            port, self._port = self._port, None
            self._gen += 1
            self._cv.notify_all()
        self.set_state(LinkState.CLOSED)
        if port is not None:
            try:
                port.close()
            except Exception:  # noqa: BLE001
                pass
        for t in (self._supervisor, self._reader):
            if t is not None and t is not threading.current_thread():
                t.join(timeout=5)


class AsciiShoe:
    """A shoe driver (:class:`devices.contract.ShoeDriver`) for the ASCII shoe."""

    KIND = DeviceKind.SHOE

    def __init__(self, link: AsciiLink, capabilities: Capabilities) -> None:
        self.link = link
        self.capabilities = capabilities

    @property
    def identity(self) -> DeviceIdentity | None:
        return self.link.identity

    def status(self) -> StatusReply:
        """``ST?``: EMPTY -> IDLE, LOADED -> HAS_DECK; the back colour; cards left.
        Raises :class:`LinkTimeout`, :class:`LinkLost`."""
        fields = self.link.request("ST?", "ST")
        try:
            if len(fields) != 4 or fields[1] not in ("EMPTY", "LOADED") or not fields[3].isdigit():
                raise ValueError("fields")
            colour = BackColour.NONE if fields[2] == "none" else _colour(fields[2])
            cards = int(fields[3])
            if cards > DECK_SIZE:
                raise ValueError("count")
        except ValueError:
            raise LinkTimeout(f"{self.link.name}: the ST reply does not fit (SPEC.md §2)") from None
        return StatusReply(DeviceState.HAS_DECK if fields[1] == "LOADED" else DeviceState.IDLE, colour, cards)

    def close(self) -> None:
        self.link.close()

    def __enter__(self) -> "AsciiShoe":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsciiShoePlugin:
    """The entry point ``ascii-shoe`` (:class:`devices.contract.DriverPlugin`)."""

    name = "ascii-shoe"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHOE})
    option_keys = frozenset({"baudrate", "draw_index", "resend"})

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None:
        baud = options.get("baudrate", 9600)
        if not isinstance(baud, int) or isinstance(baud, bool) or baud not in serial.Serial.BAUDRATES:
            raise DriverOptionError(f"devices.{kind}.baudrate", f"{baud!r} is not a baud rate; allowed: 1200, "
                                    "2400, 4800, 9600, 19200, 38400, 57600, 115200")
        for key in ("draw_index", "resend"):
            if not isinstance(options.get(key, True), bool):
                raise DriverOptionError(f"devices.{kind}.{key}", "allowed: true or false")

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Capabilities:
        return Capabilities(draw_index=bool(options.get("draw_index", True)), deck_count=True,
                            resend=bool(options.get("resend", True)))

    def emulator_argv(self, kind: DriverKind, options: Mapping[str, Any]) -> list[str]:
        """The command of this shoe's emulator for ``options`` (the soak starts it, the
        table's docs/drivers.md "Soak"): on TCP, any free port, with its control socket;
        it prints the address and ``control HOST:PORT`` first."""
        argv = [sys.executable, "-m", "threecard_ascii_shoe.emulator", "--tcp", "127.0.0.1:0",
                "--control", "127.0.0.1:0"]
        if not options.get("draw_index", True):
            argv.append("--no-draw-index")
        if not options.get("resend", True):
            argv.append("--no-resend")
        return argv

    def open(self, request: OpenRequest) -> AsciiShoe:
        self.check_options(request.kind, request.options)
        link = AsciiLink(request.url, request.name, request.link_config, request.events,
                         baudrate=request.options.get("baudrate", 9600),
                         draw_index=request.options.get("draw_index", True),
                         ack_on_delivery=request.ack_on_delivery, resume=request.resume,
                         resend=request.options.get("resend", True))
        link.open()
        return AsciiShoe(link, self.capabilities(request.kind, request.options))


PLUGIN = AsciiShoePlugin()


def _colour(text: str) -> BackColour:
    colour = BackColour.parse(text)
    if colour is BackColour.NONE:
        raise ValueError("no back colour")
    return colour


def _index(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 255:
        raise ValueError("draw index is not 0..255")
    return int(text)


def _is_hex8(text: str) -> bool:
    return len(text) == 8 and all(c in "0123456789abcdefABCDEF" for c in text)
