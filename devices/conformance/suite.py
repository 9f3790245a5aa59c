"""Device conformance suite: does a shuffler or shoe speak protocols/SPEC.md?

The same checks run under pytest (``devices/conformance/test_conformance.py``
with the ``table.hil.pytest_plugin`` fixtures) and outside it (``tablectl
conformance``), against in-process emulators, a standalone emulator
(``tablectl emulate``) or a real device. Each check opens its own
connection to the device and closes it, so checks are independent and a
device that serves one host at a time (TCP, an exclusive serial port) works.

Two kinds of connection:

* the driver (:class:`~devices.Shuffler`, :class:`~devices.CardShoe`) for
  behaviour a host relies on: status, shuffle → ``DeckVerified``, card events;
* a raw session (:class:`RawSession`) that writes frames byte for byte, for
  what the host's link would never send: an unknown type, a bad payload, a
  repeated SEQ, an event left unacknowledged. These mirror the golden
  vectors' exchanges (``protocols/golden_vectors.json``) that make sense on a
  live device (the golden boot id and "request before Identify" need a fresh
  power-up, so they are not replayed here).

Physical steps (inserting a deck, drawing cards) go through an
:class:`Operator`: the in-process emulators' own hands, a standalone
emulator's control socket (:class:`ControlOperator`), or a person
(:class:`PromptOperator`). Without one such a check is *skipped* with the
reason, and a skip is never a pass.

Imports ``devices``, ``firmware_bridge`` and ``protocols`` only.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, cast

from firmware_bridge.errors import LinkError, RequestRefused
from firmware_bridge.factory import transport_for
from firmware_bridge.link import DeviceEvent, LinkConfig, LinkNotice
from protocols.cards import DECK_SIZE, BackColour, Card
from protocols.errors import MessageError
from protocols.frame import Frame, FrameParser, encode_frame
from protocols.messages import (
    PROTOCOL_MAJOR,
    Ack,
    CardDrawn,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceKind,
    DeviceState,
    Direction,
    Echo,
    EchoReply,
    GetStatus,
    Identify,
    IdentifyReply,
    Message,
    Nak,
    NakCode,
    COMMITMENT_SIZE,
    ShoeLoaded,
    Shuffle,
    StatusReply,
    decode_message,
    direction_of,
    encode_message,
)

from ..drivers import CardShoe, DeviceDriver, Shuffler
from . import shuffler_faults
from .outcomes import (  # the outcomes and the operator's errors are named from here too
    FAIL as FAIL,
    PASS as PASS,
    SKIP as SKIP,
    CheckFailed as CheckFailed,
    NeedsOperator as NeedsOperator,
    OperatorError as OperatorError,
    expect,
)

#: A device message of one kind (what :meth:`CheckContext.next_event` returns).
M = TypeVar("M", bound=Message)

#: Link settings for conformance runs: patient enough for a real device on a slow line.
CONFORMANCE_LINK = LinkConfig(retransmit_initial_ms=100, retransmit_max_ms=1000, max_attempts=6,
                              heartbeat_interval_ms=60_000, reconnect_wait_s=5, read_timeout_ms=100)



# -- operators ---------------------------------------------------------------------------


class Operator:
    """Who makes physical things happen at the devices under test.

    The base class has no hands: every step raises :class:`NeedsOperator`,
    which skips the check with the step as the reason. Subclasses override
    the steps they can do; each returns once the step is done.
    """

    name = "none"

    def insert_deck(self, colour: BackColour) -> None:
        """Put a complete 52-card deck with ``colour`` backs into the shuffler."""
        raise NeedsOperator(f"a person must insert a complete {colour} deck into the shuffler")

    def take_deck(self) -> None:
        """Take the verified deck out of the shuffler."""
        raise NeedsOperator("a person must take the deck out of the shuffler")

    def load_shoe(self, colour: BackColour) -> None:
        """Load a complete 52-card deck with ``colour`` backs into the shoe."""
        raise NeedsOperator(f"a person must load a {colour} deck into the shoe")

    def draw(self, n: int) -> None:
        """Draw ``n`` cards from the shoe, one at a time."""
        raise NeedsOperator(f"a person must draw {n} cards from the shoe")

    def unload_shoe(self) -> None:
        """Take whatever is left out of the shoe."""
        raise NeedsOperator("a person must empty the shoe")

    # faults, for the drivers' suite (devices/conformance/drivers.py)
    def unreadable(self, n: int) -> None:
        """Make the shoe's next ``n`` draws unreadable (a card turned, a dirty reader)."""
        raise NeedsOperator(f"the next {n} draws must be unreadable: an emulator's control can do it")

    def disconnect(self, device: str) -> None:
        """Pull ``device``'s cable and put it back (the host reconnects)."""
        raise NeedsOperator(f"a person must pull the {device}'s cable and plug it back in")

    def reboot(self, device: str) -> None:
        """Power-cycle ``device`` (a new boot id)."""
        raise NeedsOperator(f"a person must power-cycle the {device}")

    def garble(self, device: str, n: int) -> None:
        """Corrupt the next ``n`` lines or frames ``device`` sends (line noise)."""
        raise NeedsOperator(f"line noise on the {device}: an emulator's control can make it")

    # the shuffler's faults, for the shufflers' checks
    def insert_faulty_deck(self, colour: BackColour, *, missing: tuple[Card, ...] = (),
                           doubled: tuple[Card, ...] = (), foreign: int = 0) -> None:
        """Put a ``colour`` deck into the shuffler without the ``missing`` cards, with a
        second copy of each ``doubled`` card and ``foreign`` cards of another back colour."""
        raise NeedsOperator(f"a person must insert a {colour} deck {describe_faulty_deck(missing, doubled, foreign)}")

    def jam(self) -> None:
        """Make the shuffler's next shuffle jam (``ShufflerFault`` JAM), the jam then cleared."""
        raise NeedsOperator("a person must jam the next shuffle (a bent card) and clear it")

    def door(self, open_: bool) -> None:
        """Open (``open_``) or close the shuffler's door."""
        raise NeedsOperator(f"a person must {'open' if open_ else 'close'} the shuffler's door")

    def hold_shuffle(self) -> None:
        """Keep the shuffler's next shuffle in progress until :meth:`finish_shuffle` (or a
        power cycle), so the shuffler can be power-cycled mid-shuffle."""
        raise NeedsOperator("a power cycle mid-shuffle: an emulator's control can hold a shuffle in progress")

    def lose(self, device: str, n: int) -> None:
        """Make ``device`` lose its next ``n`` events inside it (never sent)."""
        raise NeedsOperator(f"a lost event on the {device}: an emulator's control can make it")


def describe_faulty_deck(missing: tuple[Card, ...], doubled: tuple[Card, ...], foreign: int) -> str:
    """How a person makes the deck of :meth:`Operator.insert_faulty_deck`, in words."""
    parts = ([f"without {' '.join(map(str, missing))}"] if missing else []) + \
            ([f"with a second {' '.join(map(str, doubled))}"] if doubled else []) + \
            ([f"with {foreign} card(s) of another back colour"] if foreign else [])
    return ", ".join(parts) or "complete"


class ControlOperator(Operator):
    """Drives standalone emulators (``tablectl emulate ... --control HOST:PORT``)
    through their control sockets (docs/emulators.md). ``shuffler``/``shoe``:
    ``(host, port)`` or None. Raises :class:`OperatorError` when a command is
    refused and ``OSError`` when the socket cannot be reached."""

    name = "emulator control"

    def __init__(self, shuffler: tuple[str, int] | None = None, shoe: tuple[str, int] | None = None) -> None:
        self.addresses = {"shuffler": shuffler, "shoe": shoe}

    def command(self, device: str, line: str) -> str:
        """Send one control line; return the text after ``ok``."""
        address = self.addresses[device]
        if address is None:
            raise NeedsOperator(f"no control address for the {device}: '{line}' needs a person")
        with socket.create_connection(address, timeout=10) as sock, sock.makefile("rwb") as f:
            f.write(line.encode() + b"\n")
            f.flush()
            reply = f.readline().decode().strip()
        if reply.startswith("error unknown command"):  # this emulator has no such hands: a skip, not a fail
            raise NeedsOperator(f"{device} control has no '{line.split()[0]}' command: {reply}")
        if not reply.startswith("ok"):
            raise OperatorError(f"{device} control '{line}': {reply or 'no reply'}")
        return reply[2:].strip()

    def insert_deck(self, colour: BackColour) -> None:
        self.command("shuffler", f"insert {colour}")

    def take_deck(self) -> None:
        self.command("shuffler", "take")

    def load_shoe(self, colour: BackColour) -> None:
        self.command("shoe", "unload")  # the shoe takes a deck only when empty
        self.command("shoe", f"load {colour}")

    def draw(self, n: int) -> None:
        self.command("shoe", f"draw {n}")

    def unload_shoe(self) -> None:
        self.command("shoe", "unload")

    def unreadable(self, n: int) -> None:
        self.command("shoe", f"unreadable {n}")

    def disconnect(self, device: str) -> None:
        self.command(device, "disconnect")

    def reboot(self, device: str) -> None:
        self.command(device, "reboot")

    def garble(self, device: str, n: int) -> None:
        self.command(device, f"garble {n}")

    def insert_faulty_deck(self, colour: BackColour, *, missing: tuple[Card, ...] = (),
                           doubled: tuple[Card, ...] = (), foreign: int = 0) -> None:
        mods = [f"-{c}" for c in missing] + [f"+{c}" for c in doubled] + ([f"foreign={foreign}"] if foreign else [])
        self.command("shuffler", " ".join([f"insert {colour}", *mods]))

    def jam(self) -> None:
        self.command("shuffler", "jam")

    def door(self, open_: bool) -> None:
        self.command("shuffler", f"door {'open' if open_ else 'closed'}")

    def hold_shuffle(self) -> None:
        self.command("shuffler", "hold-shuffle")

    def lose(self, device: str, n: int) -> None:
        self.command(device, f"lose {n}")


class CallOperator(ControlOperator):
    """The control commands of :class:`ControlOperator`, handed to in-process emulators:
    ``commands`` maps ``"shuffler"``/``"shoe"`` to a callable taking a control line and
    returning its reply (``"ok ..."``/``"error ..."``, or the text after ``ok``, raising
    on a refusal, as ``simulators.standalone.StandaloneEmulator.command``)."""

    name = "emulator control (in process)"

    def __init__(self, commands: "dict[str, Callable[[str], str]]") -> None:
        super().__init__()
        self.commands = commands

    def command(self, device: str, line: str) -> str:
        fn = self.commands.get(device)
        if fn is None:
            raise NeedsOperator(f"no control for the {device}: '{line}' needs a person")
        try:
            reply = fn(line)
        except ValueError as exc:  # a ControlError
            reply = f"error {exc}"
        if not reply.startswith(("ok", "error")):
            reply = "ok " + reply
        if reply.startswith("error unknown command"):
            raise NeedsOperator(f"{device} control has no '{line.split()[0]}' command: {reply}")
        if not reply.startswith("ok"):
            raise OperatorError(f"{device} control '{line}': {reply}")
        return reply[2:].strip()


class PromptOperator(Operator):
    """A person at the bench: ``ask(text)`` shows the instruction and returns once
    they confirm (e.g. ``click.pause``). Nothing is skipped for want of hands."""

    name = "person"

    def __init__(self, ask: Callable[[str], None]) -> None:
        self.ask = ask

    def insert_deck(self, colour: BackColour) -> None:
        self.ask(f"Insert a complete {colour} deck into the shuffler, then press Enter")

    def take_deck(self) -> None:
        self.ask("Take the deck out of the shuffler, then press Enter")

    def load_shoe(self, colour: BackColour) -> None:
        self.ask(f"Empty the shoe, load a shuffled {colour} deck into it, then press Enter")

    def draw(self, n: int) -> None:
        self.ask(f"Draw {n} cards from the shoe, one at a time, then press Enter")

    def unload_shoe(self) -> None:
        self.ask("Take the remaining cards out of the shoe, then press Enter")

    def disconnect(self, device: str) -> None:
        self.ask(f"Pull the {device}'s cable out, plug it back in, then press Enter")

    def reboot(self, device: str) -> None:
        self.ask(f"Switch the {device} off and on again, then press Enter")

    def insert_faulty_deck(self, colour: BackColour, *, missing: tuple[Card, ...] = (),
                           doubled: tuple[Card, ...] = (), foreign: int = 0) -> None:
        self.ask(f"Insert a {colour} deck {describe_faulty_deck(missing, doubled, foreign)} into the shuffler, "
                 "then press Enter")

    def door(self, open_: bool) -> None:
        self.ask(f"{'Open' if open_ else 'Close'} the shuffler's door, then press Enter")


# -- the devices under test ----------------------------------------------------------------


@dataclass
class Target:
    """The devices under test and how to reach them.

    ``shuffler_url`` / ``shoe_url``: a pyserial URL or ``usb://VID:PID[/SERIAL]``
    selector, None when that device is not under test. ``usb_backend``: the
    pyusb backend for USB selectors (None: libusb). ``event_timeout_s``: how
    long to wait for a device event after the step that causes it (s);
    ``shuffle_timeout_s``: how long a shuffle may take to verify (s, SPEC §7).
    ``label``: where the devices are, for reports.
    """

    shuffler_url: str | None = None
    shoe_url: str | None = None
    operator: Operator = field(default_factory=Operator)
    config: LinkConfig = CONFORMANCE_LINK
    usb_backend: object = None
    event_timeout_s: float = 10.0
    shuffle_timeout_s: float = 180.0
    label: str = "devices"

    def url(self, device: str) -> str | None:
        """The address of ``device`` ("shuffler" or "shoe"), None when it is not under test."""
        return self.shuffler_url if device == "shuffler" else self.shoe_url


class RawSession:
    """A bare connection to a device: frames written byte for byte, replies read back.

    Events that arrive meanwhile are acknowledged (as a host would) and kept in
    :attr:`events` unless the caller asked to see them unacknowledged.
    Raises ``TransportError`` when the device cannot be opened.
    """

    def __init__(self, url: str, *, usb_backend: object = None, read_timeout_ms: int = 100) -> None:
        self.transport = transport_for(url, usb_backend=usb_backend, read_timeout_ms=read_timeout_ms)
        self.transport.open()
        self.parser = FrameParser()
        self.events: list[tuple[Frame, Message]] = []
        self._held: list[Frame] = []

    def close(self) -> None:
        """Close the transport; safe to call twice."""
        self.transport.close()

    def send(self, wire: bytes) -> None:
        """Write raw bytes. Raises ``LinkLost``."""
        self.transport.write(wire)

    def next_frame(self, timeout_s: float) -> Frame | None:
        """The next frame from the device, or None after ``timeout_s``."""
        if self._held:
            return self._held.pop(0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            data = self.transport.read(512)
            if data:
                frames = list(self.parser.feed(data))
            elif self.parser.pending:
                frames = list(self.parser.expire())
            else:
                continue
            if frames:
                self._held.extend(frames[1:])
                return frames[0]
        return None

    def ack(self, seq: int) -> None:
        """Acknowledge the device event with ``seq``."""
        self.send(encode_frame(seq, *encode_message(Ack())))

    def exchange(self, wire: bytes, *, timeout_s: float = 1.0, attempts: int = 3) -> Frame:
        """Send a request frame and return the reply with its SEQ (resending the same
        bytes after ``timeout_s``, at most ``attempts`` times). Events in between are
        ACKed and kept. Raises :class:`CheckFailed` if no reply comes."""
        seq = wire[2]
        for _ in range(attempts):
            self.send(wire)
            deadline = time.monotonic() + timeout_s
            while (left := deadline - time.monotonic()) > 0:
                frame = self.next_frame(left)
                if frame is None:
                    break
                if direction_of(frame.type) is Direction.EVENT:
                    self._take_event(frame)
                elif frame.seq == seq:
                    return frame
        raise CheckFailed(f"no reply to {wire.hex()} after {attempts} sends")

    def _take_event(self, frame: Frame) -> None:
        try:
            msg = decode_message(frame.type, frame.payload)
        except MessageError as exc:
            raise CheckFailed(f"undecodable event frame {frame.encode().hex()}: {exc}") from None
        self.ack(frame.seq)
        if not self.events or self.events[-1][0] != frame:
            self.events.append((frame, msg))

    def request(self, seq: int, msg: Message) -> Message:
        """Send ``msg`` with ``seq``; return the decoded reply."""
        reply = self.exchange(encode_frame(seq, *encode_message(msg)))
        return _decode_reply(reply)

    def identify(self, session: int) -> IdentifyReply:
        """Identify (SEQ 0) with host session ``session`` (u32). Raises :class:`CheckFailed`."""
        reply = self.request(0, Identify(session))
        if not isinstance(reply, IdentifyReply):
            raise CheckFailed(f"Identify answered with {reply}")
        return reply

    def wait_event(self, kind: type[Message], timeout_s: float) -> tuple[Frame, Message]:
        """The next event of type ``kind``, left UNacknowledged; other events are ACKed."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            frame = self.next_frame(left)
            if frame is None:
                break
            if direction_of(frame.type) is not Direction.EVENT:
                continue
            msg = decode_message(frame.type, frame.payload)
            if isinstance(msg, kind):
                return frame, msg
            self._take_event(frame)
        raise CheckFailed(f"no {kind.__name__} event within {timeout_s:g} s")


def _decode_reply(frame: Frame) -> Message:
    try:
        return decode_message(frame.type, frame.payload)
    except MessageError as exc:
        raise CheckFailed(f"undecodable reply {frame.encode().hex()}: {exc}") from None


class CheckContext:
    """What a check gets: the target, and connections that close when the check ends."""

    def __init__(self, target: Target, device: str, stack: contextlib.ExitStack) -> None:
        self.target = target
        self.device = device
        self.operator = target.operator
        self._stack = stack
        self.events: queue.Queue[DeviceEvent] = queue.Queue()

    @property
    def url(self) -> str:
        """The address of the device under test."""
        url = self.target.url(self.device)
        assert url is not None
        return url

    def driver(self) -> DeviceDriver:
        """A connected driver for the device under test (handshake done)."""
        cls = Shuffler if self.device == "shuffler" else CardShoe
        drv = cls.open(self.url, config=self.target.config, events=self.events, usb_backend=self.target.usb_backend)
        self._stack.callback(drv.close)
        return drv

    def raw(self) -> RawSession:
        """A raw session to the device under test, closed when the check ends."""
        session = RawSession(self.url, usb_backend=self.target.usb_backend,
                             read_timeout_ms=self.target.config.read_timeout_ms)
        self._stack.callback(session.close)
        return session

    def next_event(self, kind: type[M], timeout_s: float | None = None) -> M:
        """The next device event of type ``kind`` from the driver, skipping link
        notices and other events. Raises :class:`CheckFailed` after the timeout."""
        deadline = time.monotonic() + (timeout_s or self.target.event_timeout_s)
        while (left := deadline - time.monotonic()) > 0:
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(ev.message, kind):
                return ev.message
            if isinstance(ev.message, LinkNotice) and ev.message.kind not in ("link_up",):
                raise CheckFailed(f"link trouble while waiting for {kind.__name__}: {ev.message}")
        raise CheckFailed(f"no {kind.__name__} event within {timeout_s or self.target.event_timeout_s:g} s")



# -- the checks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One conformance check: ``device`` ("shuffler", "shoe"), ``name``, what it
    verifies (``title``, with the SPEC section), whether it needs physical steps,
    and ``run(ctx) -> detail`` which raises :class:`CheckFailed`, :class:`NeedsOperator`."""

    device: str
    name: str
    title: str
    run: Callable[[CheckContext], str]
    physical: bool = False

    @property
    def id(self) -> str:
        """``device/name``, e.g. ``shoe/card-events``."""
        return f"{self.device}/{self.name}"


@dataclass(frozen=True)
class CheckResult:
    """``outcome``: ``"pass"``, ``"fail"`` or ``"skip"`` (never a pass); ``detail``:
    what was seen, why it failed, or why it was skipped; ``seconds``: how long it took."""

    check: Check
    outcome: str
    detail: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (the ``--json`` report's ``results`` items)."""
        return {"device": self.check.device, "check": self.check.name, "title": self.check.title,
                "outcome": self.outcome, "detail": self.detail, "seconds": round(self.seconds, 3)}


def _session() -> int:
    return int.from_bytes(os.urandom(4), "big")


def _kind(device: str) -> DeviceKind:
    return DeviceKind.SHUFFLER if device == "shuffler" else DeviceKind.SHOE


def check_identify(ctx: CheckContext) -> str:
    raw = ctx.raw()
    reply = raw.identify(_session())
    expect(reply.kind == _kind(ctx.device), f"kind is {reply.kind}, expected {ctx.device}")
    expect(1 <= len(reply.serial_number) <= 32 and reply.serial_number.isprintable(),
           f"serial number {reply.serial_number!r} is not 1..32 printable ASCII")
    again = raw.identify(_session())  # Identify is never answered from the cache (SPEC §6.1)
    expect(again.boot_id == reply.boot_id, "boot id changed between two Identify without a reboot")
    expect(again.serial_number == reply.serial_number, "serial number changed between two Identify")
    return (f"{reply.kind} serial {reply.serial_number} firmware {reply.firmware_version} "
            f"boot id {reply.boot_id:08x}")


def check_protocol_version(ctx: CheckContext) -> str:
    reply = ctx.raw().identify(_session())
    version = f"{reply.protocol_major}.{reply.protocol_minor}"
    expect(reply.protocol_major == PROTOCOL_MAJOR,
           f"device speaks protocol {version}; the host speaks {PROTOCOL_MAJOR}.x (SPEC §6.1)")
    return f"protocol {version}"


def check_status(ctx: CheckContext) -> str:
    st = ctx.driver().status()
    expect(0 <= st.cards <= 255, f"cards held {st.cards}")
    if st.state is DeviceState.IDLE:
        expect(st.cards == 0, f"idle but holds {st.cards} cards")
    return f"{st.state.name.lower()}, {st.cards} cards, back colour {st.back_colour}, fault {st.fault}"


def check_echo(ctx: CheckContext) -> str:
    raw = ctx.raw()
    raw.identify(_session())
    for seq, data in ((1, bytes(range(64))), (2, b""), (3, b"\xa5\xa5golden")):
        reply = raw.request(seq, Echo(data))
        expect(isinstance(reply, EchoReply) and reply.data == data, f"Echo({data.hex()}) answered {reply}")
    return "64-byte, empty and SYNC-laden echoes returned intact"


def check_unknown_message(ctx: CheckContext) -> str:
    raw = ctx.raw()
    raw.identify(_session())
    for seq, msg_type in ((4, 0x3E), (5, 0x7E)):  # an unassigned request type, an unassigned event type
        reply = _decode_reply(raw.exchange(encode_frame(seq, msg_type, b"")))
        expect(reply == Nak(NakCode.UNKNOWN_MESSAGE),
               f"type 0x{msg_type:02X} answered {reply}, expected NAK UNKNOWN_MESSAGE (SPEC §5)")
    return "types 0x3E and 0x7E refused UNKNOWN_MESSAGE"


def check_bad_payload(ctx: CheckContext) -> str:
    raw = ctx.raw()
    raw.identify(_session())
    cases = ((5, GetStatus.TYPE, b"\x00"), (6, Identify.TYPE, b"\x01\x02"), (7, Echo.TYPE, bytes(65)))
    for seq, msg_type, payload in cases:
        reply = _decode_reply(raw.exchange(encode_frame(seq, msg_type, payload)))
        expect(reply == Nak(NakCode.BAD_PAYLOAD),
               f"type 0x{msg_type:02X} with {len(payload)}-byte payload answered {reply}, expected NAK BAD_PAYLOAD")
    return "GetStatus+1 byte, Identify with 2 bytes, Echo with 65 bytes refused BAD_PAYLOAD"


def check_reply_cache(ctx: CheckContext) -> str:
    raw = ctx.raw()
    raw.identify(_session())
    first = raw.exchange(encode_frame(9, *encode_message(Echo(b"first"))))
    expect(_decode_reply(first) == EchoReply(b"first"), f"Echo answered {_decode_reply(first)}")
    # Same SEQ, different request: answered from the cache and NOT acted on (SPEC §6.2).
    cached = raw.exchange(encode_frame(9, *encode_message(Echo(b"second"))))
    expect(cached == first, f"a repeated SEQ was acted on again: {_decode_reply(cached)} (expected the cached "
                            f"EchoReply 'first')")
    fresh = raw.request(10, Echo(b"second"))
    expect(fresh == EchoReply(b"second"), f"a new SEQ answered {fresh}")
    raw.identify(_session())  # a new host session clears the cache (SPEC §6.1)
    after = raw.request(9, Echo(b"third"))
    expect(after == EchoReply(b"third"), f"after a new session SEQ 9 answered {after}, expected a fresh reply")
    return "repeated SEQ answered byte for byte from the cache, not re-executed; new session clears it"


def _retransmit_then_ack(raw: RawSession, kind: type[Message], timeout_s: float,
                         first_timeout_s: float | None = None) -> Frame:
    frame, _ = raw.wait_event(kind, first_timeout_s or timeout_s)
    # Not acknowledged: the device must send the very same frame again (SPEC §6.3).
    deadline = time.monotonic() + timeout_s
    again = None
    while (left := deadline - time.monotonic()) > 0:
        nxt = raw.next_frame(left)
        if nxt is None:
            break
        if direction_of(nxt.type) is Direction.EVENT:
            if nxt == frame:
                again = nxt
                break
            raise CheckFailed(f"sent event SEQ {nxt.seq} while SEQ {frame.seq} was unacknowledged "
                              f"(events go one at a time, SPEC §6.3)")
    expect(again is not None, f"{kind.__name__} (SEQ {frame.seq}) was not resent within {timeout_s:g} s "
                              f"without an ACK")
    raw.ack(frame.seq)
    return frame


def _next_new_event(raw: RawSession, acked: Frame, kind: type[Message], timeout_s: float) -> Frame:
    """The next event after ``acked``: a late resend of ``acked`` (crossing our ACK) is
    re-acked and ignored; anything else must have the next SEQ."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        frame = raw.next_frame(left)
        if frame is None:
            break
        if direction_of(frame.type) is not Direction.EVENT:
            continue
        if frame == acked:
            raw.ack(frame.seq)
            continue
        expect(frame.seq == (acked.seq + 1) % 256,
               f"event after SEQ {acked.seq} has SEQ {frame.seq}, expected {(acked.seq + 1) % 256}")
        msg = decode_message(frame.type, frame.payload)
        expect(isinstance(msg, kind), f"expected {kind.__name__}, got {msg}")
        raw.ack(frame.seq)
        return frame
    raise CheckFailed(f"no {kind.__name__} event within {timeout_s:g} s")


def check_shuffler_event_arq(ctx: CheckContext) -> str:
    timeout = ctx.target.event_timeout_s
    raw = ctx.raw()
    raw.identify(_session())
    status = raw.request(1, GetStatus())
    expect(isinstance(status, StatusReply), f"GetStatus answered {status}")
    if cast(StatusReply, status).state is DeviceState.IDLE:  # a StatusReply: checked just above
        ctx.operator.insert_deck(BackColour.RED)
        first = _retransmit_then_ack(raw, DeckInserted, timeout)
    else:  # a deck is already in: its shuffle's event serves
        reply = raw.request(2, Shuffle())
        expect(reply == Ack(), f"Shuffle with a deck inside answered {reply}")
        first = _retransmit_then_ack(raw, DeckVerified, timeout, first_timeout_s=ctx.target.shuffle_timeout_s)
    reply = raw.request(3, Shuffle())
    expect(reply == Ack(), f"Shuffle answered {reply}")
    second = _next_new_event(raw, first, DeckVerified, ctx.target.shuffle_timeout_s)
    return f"unacknowledged event SEQ {first.seq} resent identically; next event SEQ {second.seq}"


def check_shoe_event_arq(ctx: CheckContext) -> str:
    timeout = ctx.target.event_timeout_s
    raw = ctx.raw()
    raw.identify(_session())
    ctx.operator.load_shoe(BackColour.RED)
    first = _retransmit_then_ack(raw, ShoeLoaded, timeout)
    ctx.operator.draw(1)
    second = _next_new_event(raw, first, CardDrawn, timeout)
    ctx.operator.unload_shoe()
    return f"unacknowledged ShoeLoaded SEQ {first.seq} resent identically; CardDrawn SEQ {second.seq} next"


def check_shuffle_verifies(ctx: CheckContext) -> str:
    shuffler = ctx.driver()
    assert isinstance(shuffler, Shuffler)
    st = shuffler.status()
    colour = st.back_colour
    if st.state is DeviceState.IDLE:
        colour = BackColour.RED
        ctx.operator.insert_deck(colour)
        inserted = ctx.next_event(DeckInserted)
        expect(inserted.back_colour == colour, f"DeckInserted says {inserted.back_colour}, the deck is {colour}")
    shuffler.shuffle()
    verified = ctx.next_event(DeckVerified, ctx.target.shuffle_timeout_s)
    expect(verified.card_count == DECK_SIZE, f"card count {verified.card_count}, expected 52")
    expect(len(verified.present) == DECK_SIZE, f"missing cards {sorted(verified.missing)}")
    expect(not verified.duplicates and verified.foreign_count == 0,
           f"duplicates {sorted(verified.duplicates)}, foreign {verified.foreign_count}")
    expect(verified.back_colour == colour, f"DeckVerified says {verified.back_colour}, the deck is {colour}")
    after = shuffler.status()
    expect(after.state is DeviceState.READY and after.cards == DECK_SIZE,
           f"after the shuffle status is {after.state.name} with {after.cards} cards, expected READY with 52")
    return f"{colour} deck shuffled and verified complete: 52 cards, no duplicates, none foreign"


def check_shuffle_commitment(ctx: CheckContext) -> str:
    """SPEC §4.2.1: a complete deck's DeckVerified carries a commitment; the deck inside is
    never opened; once delivered, its opening hashes to the commitment and names each card
    once; another commitment is refused."""
    shuffler = ctx.driver()
    assert isinstance(shuffler, Shuffler)
    ident = shuffler.identity
    expect(ident is not None and (ident.protocol_major, ident.protocol_minor) >= (1, 1),
           f"protocol {ident.protocol_major}.{ident.protocol_minor} has no shuffle commitment (SPEC 4.2.1, 1.1): "
           "the table runs with the residual risk docs/drivers.md names" if ident else "no identity")
    st = shuffler.status()
    if st.state is DeviceState.IDLE:
        ctx.operator.insert_deck(BackColour.RED)
        ctx.next_event(DeckInserted)
    shuffler.shuffle()
    verified = ctx.next_event(DeckVerified, ctx.target.shuffle_timeout_s)
    expect(verified.complete, f"the deck did not verify complete: {verified}")
    commitment = verified.commitment
    expect(len(commitment) == COMMITMENT_SIZE, f"DeckVerified of a complete deck carries no commitment "
                                               f"({len(commitment)} bytes, expected {COMMITMENT_SIZE})")
    try:
        shuffler.open_shuffle(commitment)
        raise CheckFailed("the shuffler opened the order of the deck inside it, not yet delivered")
    except RequestRefused as exc:
        expect(exc.code is NakCode.UNKNOWN_COMMITMENT, f"OpenShuffle of the deck inside refused {exc.code}, "
                                                        "expected UNKNOWN_COMMITMENT")
    ctx.operator.take_deck()
    ctx.next_event(DeckDelivered)
    opening = shuffler.open_shuffle(commitment)
    expect(opening.commitment() == commitment, "the opening's SHA-256(salt || order) is not the commitment "
                                               "DeckVerified carried: a deal could not be checked against it")
    again = shuffler.open_shuffle(commitment)
    expect(again == opening, "a second OpenShuffle gave another opening")
    other = bytes(b ^ 0xFF for b in commitment)
    try:
        shuffler.open_shuffle(other)
        raise CheckFailed("the shuffler opened a commitment it never made")
    except RequestRefused as exc:
        expect(exc.code is NakCode.UNKNOWN_COMMITMENT, f"OpenShuffle of another commitment refused {exc.code}, "
                                                        "expected UNKNOWN_COMMITMENT")
    return (f"commitment {commitment.hex()[:16]}... in DeckVerified; refused while inside; opened after the "
            "delivery, hashing to it; another commitment refused")


def check_shuffle_without_deck(ctx: CheckContext) -> str:
    shuffler = ctx.driver()
    assert isinstance(shuffler, Shuffler)
    st = shuffler.status()
    if st.state is not DeviceState.IDLE:
        if st.state is DeviceState.HAS_DECK:
            shuffler.shuffle()  # a deck must be verified before it can be taken out
            ctx.next_event(DeckVerified, ctx.target.shuffle_timeout_s)
        ctx.operator.take_deck()
        ctx.next_event(DeckDelivered)
    try:
        shuffler.shuffle()
    except RequestRefused as exc:
        expect(exc.code is NakCode.NO_DECK, f"Shuffle with no deck refused {exc.code}, expected NO_DECK")
        return "Shuffle with no deck refused NO_DECK"
    raise CheckFailed("Shuffle with no deck was accepted")


def check_shoe_refuses_shuffle(ctx: CheckContext) -> str:
    raw = ctx.raw()
    raw.identify(_session())
    reply = raw.request(3, Shuffle())
    expect(reply == Nak(NakCode.UNKNOWN_MESSAGE), f"Shuffle sent to a shoe answered {reply}, "
                                                  f"expected NAK UNKNOWN_MESSAGE")
    return "Shuffle refused UNKNOWN_MESSAGE"


def check_card_events(ctx: CheckContext) -> str:
    shoe = ctx.driver()
    colour = BackColour.RED
    ctx.operator.load_shoe(colour)
    loaded = ctx.next_event(ShoeLoaded)
    expect(loaded.back_colour == colour, f"ShoeLoaded says {loaded.back_colour}, the deck is {colour}")
    n = 6
    ctx.operator.draw(n)
    draws = [ctx.next_event(CardDrawn) for _ in range(n)]
    indices = [d.draw_index for d in draws]
    expect(indices == list(range(n)), f"draw indices {indices}, expected 0..{n - 1} since loading")
    expect(len({d.card for d in draws}) == n, f"the same card read twice: {[str(d.card) for d in draws]}")
    expect({d.back_colour for d in draws} == {colour}, f"back colours {[str(d.back_colour) for d in draws]}")
    st = shoe.status()
    expect(st.cards == DECK_SIZE - n, f"status says {st.cards} cards left, expected {DECK_SIZE - n}")
    ctx.operator.unload_shoe()
    return f"ShoeLoaded {colour}, then {' '.join(str(d.card) for d in draws)} with draw indices 0..{n - 1}"


class _SpecSession:
    """The context :mod:`~devices.conformance.shuffler_faults` checks take, for a SPEC device
    through the built-in driver: each :meth:`open` is a driver of its own that acknowledges
    an event only when told (as a table with a journal), closed when the check ends."""

    def __init__(self, ctx: CheckContext) -> None:
        self.target = ctx.target
        self.operator = ctx.operator
        self._ctx = ctx

    def open(self) -> tuple[DeviceDriver, "queue.Queue[DeviceEvent]"]:
        events: queue.Queue[DeviceEvent] = queue.Queue(256)
        cls = Shuffler if self._ctx.device == "shuffler" else CardShoe
        drv = cls.open(self._ctx.url, config=self.target.config, events=events,
                       usb_backend=self.target.usb_backend, name=f"{self._ctx.device}-under-test",
                       ack_on_delivery=False)
        self._ctx._stack.callback(drv.close)
        return drv, events

    def next(self, events: "queue.Queue[DeviceEvent]", timeout_s: float | None = None, *,
             notices: bool = False) -> DeviceEvent:
        """The next event (notices too when ``notices``; else ``link_up`` is passed over and
        any other notice fails). Raises :class:`CheckFailed` on time-out."""
        timeout = timeout_s or self.target.event_timeout_s
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                ev = events.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(ev.message, LinkNotice) and not notices:
                if ev.message.kind == "link_up":
                    continue
                raise CheckFailed(f"link trouble: {ev.message.kind} {ev.message.detail}")
            return ev
        raise CheckFailed(f"no event within {timeout:g} s")

    def expect_event(self, drv: DeviceDriver, events: "queue.Queue[DeviceEvent]", kind: type, *,
                     ack: bool = True, timeout_s: float | None = None,
                     across_reconnect: bool = False) -> DeviceEvent:
        """The next event must be a ``kind``; acknowledged unless ``ack`` is False."""
        while True:
            ev = self.next(events, timeout_s, notices=across_reconnect)
            if not (isinstance(ev.message, LinkNotice) and ev.message.kind in ("link_down", "link_up")):
                break
        expect(isinstance(ev.message, kind), f"expected {kind.__name__}, got {type(ev.message).__name__}")
        if ack:
            drv.link.acknowledge(ev)
        return ev


def _fault_check(fn: Callable[[_SpecSession], str]) -> Callable[[CheckContext], str]:
    """A check of :mod:`~devices.conformance.shuffler_faults`, on a SPEC device."""
    return lambda ctx: fn(_SpecSession(ctx))


#: The shufflers' fault checks (docs/conformance.md, "Shuffler faults"), shared with the drivers' suite.
SHUFFLER_FAULT_CHECKS = (
    ("short-deck", "a short deck: count and the missing cards by name (SPEC 4.2)"),
    ("doubled-card", "a doubled card: count and the card by name (SPEC 4.2)"),
    ("foreign-card", "cards of another back colour: the foreign count (SPEC 4.2)"),
    ("jam", "a jam: ShufflerFault JAM, the deck inside; shuffled again (SPEC 4.2, 5)"),
    ("door", "the door open: status FAULT, Shuffle refused DOOR_OPEN; closed: shuffles (SPEC 4.1, 5)"),
    ("line-noise", "garbled frames lose and double no event (SPEC 2.1, 6.3)"),
    ("reboot-mid-shuffle", "power cycle mid-shuffle: the shuffle lost, the deck inside (SPEC 6.5)"),
    ("reboot-mid-delivery", "power cycle mid-delivery: the status says the deck left (SPEC 6.5)"),
)


CHECKS: tuple[Check, ...] = tuple(
    Check(device, name, title, fn, physical)
    for device in ("shuffler", "shoe")
    for name, title, fn, physical in (
        ("identify", "Identify reply: kind, serial, boot id (SPEC 4.1, 6.1)", check_identify, False),
        ("protocol-version", f"protocol major {PROTOCOL_MAJOR} (SPEC 6.1)", check_protocol_version, False),
        ("status", "GetStatus reply (SPEC 4.1)", check_status, False),
        ("echo", "Echo round trip (SPEC 4.1)", check_echo, False),
        ("unknown-message", "unknown type -> NAK UNKNOWN_MESSAGE (SPEC 5)", check_unknown_message, False),
        ("bad-payload", "bad payload -> NAK BAD_PAYLOAD (SPEC 5)", check_bad_payload, False),
        ("reply-cache", "repeated SEQ answered from the cache, not re-executed (SPEC 6.2)", check_reply_cache,
         False),
        *((
            ("event-arq", "event resent until ACKed, then the next SEQ (SPEC 6.3)", check_shuffler_event_arq, True),
            ("shuffle-verifies", "Shuffle -> DeckVerified, 52 cards complete (SPEC 4.2)", check_shuffle_verifies,
             True),
            ("shuffle-commitment", "DeckVerified commits to the order; opened only once delivered (SPEC 4.2.1)",
             check_shuffle_commitment, True),
            ("shuffle-without-deck", "Shuffle with no deck -> NAK NO_DECK (SPEC 4.2)", check_shuffle_without_deck,
             True),
            *((name, title, _fault_check(dict(shuffler_faults.CHECKS)[name]), True)
              for name, title in SHUFFLER_FAULT_CHECKS),
        ) if device == "shuffler" else (
            ("refuses-shuffle", "Shuffle sent to a shoe -> NAK UNKNOWN_MESSAGE", check_shoe_refuses_shuffle, False),
            ("event-arq", "event resent until ACKed, then the next SEQ (SPEC 6.3)", check_shoe_event_arq, True),
            ("card-events", "ShoeLoaded, CardDrawn with draw indices and back colour (SPEC 4.3)", check_card_events,
             True),
        )),
    )
)


def checks_for(device: str) -> list[Check]:
    """The checks of one device, in running order."""
    return [c for c in CHECKS if c.device == device]


def run_check(check: Check, target: Target) -> CheckResult:
    """Run one check against ``target``; never raises for a device's misbehaviour.

    A device not under test (no URL) or a physical step without an operator is
    ``"skip"``; :class:`CheckFailed`, a link error (timeout, refused handshake,
    a NAK) or an operator error is ``"fail"``.
    """
    start = time.monotonic()
    if target.url(check.device) is None:
        return CheckResult(check, SKIP, f"no {check.device} under test", 0.0)
    try:
        with contextlib.ExitStack() as stack:
            detail = check.run(CheckContext(target, check.device, stack))
        outcome = PASS
    except NeedsOperator as exc:
        outcome, detail = SKIP, f"needs a person: {exc}"
    except (CheckFailed, OperatorError) as exc:
        outcome, detail = FAIL, str(exc)
    except (LinkError, MessageError, OSError) as exc:
        outcome, detail = FAIL, f"{type(exc).__name__}: {exc}"
    return CheckResult(check, outcome, detail, time.monotonic() - start)


def run_suite(target: Target, devices: tuple[str, ...] = ("shuffler", "shoe"),
              on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run every check of ``devices`` against ``target`` in order; ``on_result`` is
    called after each (for progress). Returns the results."""
    results = []
    for check in CHECKS:
        if check.device in devices:
            result = run_check(check, target)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results
