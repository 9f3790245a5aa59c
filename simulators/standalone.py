"""One firmware emulator as a process of its own, for a hardware-in-the-loop bench.

``tablectl emulate shuffler|shoe`` (``table/cli/emulate.py``) is a thin
wrapper around :func:`serve`. The emulator listens on a pty (with a symlink
the host opens, like ``/dev/threecard/shoe``) or on TCP (the host opens
``socket://HOST:PORT``), and prints that address as the first line on stdout.

A standalone emulator has no virtual dealer, so a bench makes physical
things happen through a line-based **control interface**: on stdin, and on
an optional control TCP socket, one command per line, one reply line per
command (``ok ...`` or ``error ...``). The commands are in
:data:`HELP` and in ``docs/emulators.md``.

Imports ``protocols`` and ``simulators`` only (docs/architecture.md, "The layer rule"), plus
structlog for the frame log.
"""

from __future__ import annotations

import os
import random
import secrets
import selectors
import signal
import socket
from dataclasses import dataclass, field
from typing import Callable, TextIO

import structlog

from protocols.cards import DECK_SIZE, BackColour, Card
from protocols.errors import CardError, FrameError, MessageError
from protocols.frame import decode_frame
from protocols.messages import PROTOCOL_MAJOR, PROTOCOL_MINOR, decode_message
from protocols.vectors import message_to_dict

from protocols.deck_text import deck_from_text, deck_to_text

from .devices import SHUFFLE_MODES, DeviceRefused, ShoeEmulator, ShufflerEmulator, SimCard, new_deck
from .firmware import FirmwareEmulator
from .ports import TcpServerPort
from .pty_port import PtyPort

log = structlog.get_logger("simulators.standalone")

KINDS = ("shuffler", "shoe")
DEFAULT_SERIALS = {"shuffler": "SHF-SIM-0001", "shoe": "SHOE-SIM-0001"}

HELP = {
    "any": [
        "help                      list the commands",
        "status                    what the device holds (one line)",
        "reboot                    power-cycle the firmware (new boot id; unacked events lost; an image on "
        "trial not yet confirmed is rolled back)",
        "fail-boot on|off          on: the next image activated hangs at boot (the watchdog rolls it back)",
        "disconnect                pull the cable (pty: a new pty behind the symlink; tcp: drop the host)",
        "unplug                    pull the cable and keep it out until 'plug' (pty: the pty and its symlink go;"
        " tcp: the host is dropped and connections are refused)",
        "plug                      plug the cable back in after 'unplug' (the host reconnects)",
        "garble N                  the next N frames sent carry a wrong CRC (line noise; the host drops them)",
        "lose N                    the next N events are lost inside the device, never sent (only its status"
        " tells)",
        "quit                      stop the emulator and exit 0 (as SIGTERM)",
    ],
    "shuffler": [
        "insert COLOUR [-CARD].. [+CARD].. [foreign=N]   put a deck in (index order); -As leaves the ace of"
        " spades out, +Kd adds a second Kd, foreign=N adds N cards of another back colour",
        "insert deck=TEXT          put a carried deck in, in its order (what 'take' or the shoe's 'unload' gave,"
        " edited as the hands please)",
        "take                      take the verified deck out (DeckDelivered); the reply carries it as"
        " deck=TEXT, in order, for the shoe's 'load deck=TEXT'",
        "jam [stays|off]           the next shuffle jams (ShufflerFault JAM); 'stays': the jam stands (status"
        " FAULT, Shuffle refused JAMMED) until the door is opened to clear it; 'off' disarms it",
        "door open|closed          open or close the door (Shuffle is refused DOOR_OPEN while open)",
        "hold-shuffle              the next shuffle stays in progress (SHUFFLING) until 'finish': a reboot"
        " meanwhile loses it",
        "finish                    end the shuffle in progress (DeckVerified)",
        "power-cut-shuffle [off]   the power goes during the next shuffle, once it is accepted (the shuffle is"
        " lost; the deck stays inside unverified)",
    ],
    "shoe": [
        "load COLOUR [ordered]     load a fresh deck, not one from the shuffler (shuffled with --seed, or in"
        " index order with 'ordered')",
        "load deck=TEXT            load the carried deck (from the shuffler's 'take'), top card first",
        "draw [N]                  draw N cards (default 1): CardDrawn, CardUnreadable or ShoeEmpty each",
        "unreadable N              the next N draws cannot be read (CardUnreadable)",
        "unload                    take the stub out (no event); the reply carries it as deck=TEXT",
        "slip CARD [COLOUR]        slip a card of another back colour in on top (default: blue, red on a blue"
        " deck); the next draw reads it",
    ],
}


class ControlError(ValueError):
    """A control command that is malformed or that the device cannot do physically."""


def parse_address(text: str) -> tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)``; port 0 picks a free port.

    Raises ``ValueError`` naming the expected form.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:7001 (port 0: any free port)")
    return host.strip("[]"), int(port)


def describe_frame(direction: str, wire: bytes) -> dict:
    """A frame as log fields: ``direction`` ("rx" from the host, "tx" to it), ``seq``,
    ``hex`` and ``message`` (the decoded message as a dict, or why it does not decode)."""
    fields: dict = {"direction": direction, "hex": wire.hex()}
    try:
        frame = decode_frame(wire)
        fields["seq"] = frame.seq
        fields["message"] = message_to_dict(decode_message(frame.type, frame.payload))
    except (FrameError, MessageError) as exc:
        fields["message"] = {"error": str(exc)}
    return fields


@dataclass
class EmulatorOptions:
    """What ``tablectl emulate`` was asked for.

    ``kind``: ``"shuffler"`` or ``"shoe"``. Exactly one of ``pty`` (symlink
    path to create) or ``tcp`` (``(host, port)``, port 0 for any). ``seed``:
    None draws shuffles from ``secrets.SystemRandom``. ``shuffle``: a mode of
    :data:`~simulators.devices.SHUFFLE_MODES` (shuffler only).
    ``protocol_major``: the major version the device claims (another than
    the host's makes a deliberately non-conforming device). ``control``:
    optional ``(host, port)`` for the control socket. ``log_frames``: log
    each frame with structlog. The bootloader (SPEC §9): ``vendor_keys`` (raw
    32-byte Ed25519 public keys; none: every update is refused),
    ``security_version``, ``model`` (default the emulator's), ``firmware`` (the
    factory image's version), ``fail_boot`` (new images hang at boot).
    """

    kind: str
    pty: str | None = None
    tcp: tuple[str, int] | None = None
    seed: int | None = None
    serial_number: str | None = None
    shuffle: str = "random"
    protocol_major: int = PROTOCOL_MAJOR
    control: tuple[str, int] | None = None
    log_frames: bool = False
    retransmit_initial_ms: int = 50
    vendor_keys: tuple[bytes, ...] = ()
    security_version: int = 0
    model: str | None = None
    firmware: tuple[int, int, int] = (1, 0, 0)
    fail_boot: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"device kind {self.kind!r}: choose shuffler or shoe")
        if (self.pty is None) == (self.tcp is None):
            raise ValueError("give exactly one of --pty PATH or --tcp HOST:PORT")
        if self.shuffle not in SHUFFLE_MODES:
            raise ValueError(f"shuffle mode {self.shuffle!r}: choose one of {', '.join(SHUFFLE_MODES)}")
        if self.shuffle != "random" and self.kind != "shuffler":
            raise ValueError("a weak shuffle is a shuffler mode")
        if not 0 <= self.protocol_major <= 255:
            raise ValueError("protocol major must be 0..255")
        if not 0 <= self.security_version <= 0xFFFFFFFF:
            raise ValueError("security version must be 0..4294967295")
        if self.model is not None and not (1 <= len(self.model) <= 16 and self.model.isascii()
                                           and self.model.isprintable()):
            raise ValueError("model must be 1..16 printable ASCII characters")


class StandaloneEmulator:
    """One emulator on its own port, with its physical state driven by :meth:`command`.

    :meth:`start` opens the port and starts the firmware thread; :attr:`url`
    is what a host opens; :meth:`stop` closes everything (the pty symlink is
    removed, the TCP port closed). Raises ``OSError`` if the port cannot be
    made and ``ValueError`` for bad options.
    """

    def __init__(self, options: EmulatorOptions) -> None:
        self.options = options
        self.rng: random.Random = secrets.SystemRandom() if options.seed is None else random.Random(options.seed)
        self._log = log.bind(device=options.kind)
        if options.pty is not None:
            self.port: PtyPort | TcpServerPort = PtyPort(link=options.pty)
        else:
            host, port = options.tcp
            self.port = TcpServerPort(host, port)
        on_frame = self._log_frame if options.log_frames else None
        common = dict(serial_number=options.serial_number or DEFAULT_SERIALS[options.kind],
                      protocol=(options.protocol_major, PROTOCOL_MINOR), on_frame=on_frame,
                      retransmit_initial_ms=options.retransmit_initial_ms, vendor_keys=options.vendor_keys,
                      security_version=options.security_version, model=options.model, firmware=options.firmware,
                      fail_boot=options.fail_boot)
        try:
            if options.kind == "shuffler":
                self.device: FirmwareEmulator = ShufflerEmulator(self.port, rng=self.rng, shuffle=options.shuffle,
                                                                 **common)
            else:
                self.device = ShoeEmulator(self.port, **common)
        except BaseException:
            self.port.close()
            raise

    @property
    def url(self) -> str:
        """What a host opens: the pty symlink path, or ``socket://HOST:PORT``."""
        return self.port.name

    def start(self) -> "StandaloneEmulator":
        """Start the firmware thread; returns self."""
        self.device.start()
        return self

    def stop(self) -> None:
        """Stop the firmware thread and close the port; safe to call twice."""
        self.device.stop()

    def _log_frame(self, direction: str, wire: bytes) -> None:
        self._log.info("frame", **describe_frame(direction, wire))

    # -- control ---------------------------------------------------------------------

    def command(self, line: str) -> str:
        """Carry out one control command (see :data:`HELP`); return the reply text
        (without the leading ``ok``). Raises :class:`ControlError` for an unknown or
        malformed command or one the device refuses physically."""
        words = line.split()
        if not words:
            raise ControlError("empty command")
        verb, args = words[0].lower(), words[1:]
        try:
            handler: Callable[[list[str]], str] = getattr(self, f"_cmd_{verb.replace('-', '_')}")
        except AttributeError:
            raise ControlError(f"unknown command {verb!r}; try 'help'") from None
        if verb in _KIND_OF and _KIND_OF[verb] != self.options.kind:
            raise ControlError(f"'{verb}' is a {_KIND_OF[verb]} command; this is a {self.options.kind}")
        try:
            reply = handler(args)
        except DeviceRefused as exc:
            raise ControlError(str(exc)) from None
        except CardError as exc:
            raise ControlError(str(exc)) from None
        self._log.info("control", command=line.strip(), reply=reply)
        return reply

    def _cmd_help(self, args: list[str]) -> str:
        return " | ".join(h.split("  ")[0] for h in HELP["any"] + HELP[self.options.kind])

    def _cmd_status(self, args: list[str]) -> str:
        d = self.device
        info = d.bootloader.info()
        parts = [f"boot_id={d.boot_id:08x}", f"events_pending={'no' if d.idle else 'yes'}",
                 f"firmware={info.running_version}", f"slot={info.slot_name}",
                 f"security_version={info.security_version}", f"update={info.update_state.name.lower()}"]
        if isinstance(d, ShufflerEmulator):
            parts += [f"cards={len(d.cards or ())}", f"colour={d.colour}", f"verified={d.verified}",
                      f"shuffles={d.shuffles}", f"shuffling={d.shuffling}", f"jam_next={d.faults.jam_next_shuffle}",
                      f"power_cut_next={d.faults.power_cut_mid_shuffle}",
                      f"door={'open' if d.faults.door_open else 'closed'}"]
        else:
            assert isinstance(d, ShoeEmulator)
            parts += [f"cards={len(d.cards)}", f"colour={d.colour}", f"draws={d.draws}",
                      f"unreadable_next={d.faults.unreadable_draws}"]
        parts.append(f"cable={'out' if d.unplugged else 'in'}")
        parts += [f"garble_next={d.garble_frames}", f"lose_next={d.lose_events}"]
        return " ".join(parts)

    def _cmd_reboot(self, args: list[str]) -> str:
        self.device.reboot()
        return f"rebooted boot_id={self.device.boot_id:08x}"

    def _cmd_fail_boot(self, args: list[str]) -> str:
        if args not in (["on"], ["off"]):
            raise ControlError("fail-boot on|off")
        self.device.bootloader.faults.fail_boot = args[0] == "on"
        return f"fail-boot {args[0]}"

    def _cmd_disconnect(self, args: list[str]) -> str:
        if self.device.unplugged:
            raise ControlError("the cable is out; 'plug' puts it back")
        self.device.disconnect()
        return f"disconnected {self.url}"

    def _cmd_unplug(self, args: list[str]) -> str:
        if self.device.unplugged:
            raise ControlError("the cable is already out; 'plug' puts it back")
        self.device.unplug()
        return f"unplugged {self.url}"

    def _cmd_plug(self, args: list[str]) -> str:
        if not self.device.unplugged:
            raise ControlError("the cable is in; 'unplug' pulls it")
        try:
            self.device.plug()
        except OSError as exc:
            raise ControlError(f"cannot plug back in: {exc}") from None
        return f"plugged {self.url}"

    def _cmd_garble(self, args: list[str]) -> str:
        if len(args) != 1:
            raise ControlError("garble N")
        self.device.garble_frames = _count(args[0])
        return f"the next {self.device.garble_frames} frames sent are garbled"

    def _cmd_lose(self, args: list[str]) -> str:
        if len(args) != 1:
            raise ControlError("lose N")
        self.device.lose_events = _count(args[0])
        return f"the next {self.device.lose_events} events are lost"

    def _cmd_quit(self, args: list[str]) -> str:
        raise _Quit()

    # shuffler
    def _cmd_insert(self, args: list[str]) -> str:
        if not args:
            raise ControlError("insert COLOUR [-CARD].. [+CARD].. [foreign=N] | insert deck=TEXT")
        if args[0].startswith("deck="):
            if len(args) != 1:
                raise ControlError("insert deck=TEXT takes nothing else")
            carried = _carried(args[0])
            self.device.insert(carried)
            return f"inserted {self.device.colour} cards={len(carried)}"
        colour = BackColour.parse(args[0])
        cards = new_deck(colour)
        for arg in args[1:]:
            if arg.startswith("-"):
                card = Card.parse(arg[1:])
                cards = [c for c in cards if c.card != card]
            elif arg.startswith("+"):
                cards.append(SimCard(Card.parse(arg[1:]), colour))
            elif arg.startswith("foreign="):
                n = _count(arg.split("=", 1)[1])
                other = BackColour.BLUE if colour is not BackColour.BLUE else BackColour.RED
                cards += [SimCard(Card.from_index(i % DECK_SIZE), other) for i in range(n)]
            else:
                raise ControlError(f"insert: {arg!r} is not -CARD, +CARD or foreign=N")
        self.device.insert(cards)
        return f"inserted {colour} cards={len(cards)}"

    def _cmd_take(self, args: list[str]) -> str:
        cards = self.device.take()
        return f"taken cards={len(cards)} deck={deck_to_text(cards)}"

    def _cmd_hold_shuffle(self, args: list[str]) -> str:
        self.device.faults.hold_shuffle = True
        return "the next shuffle stays in progress until 'finish'"

    def _cmd_finish(self, args: list[str]) -> str:
        self.device.finish_shuffle()
        return "shuffle finished"

    def _cmd_jam(self, args: list[str]) -> str:
        if args not in ([], ["off"], ["stays"]):
            raise ControlError("jam [stays|off]")
        self.device.faults.jam_next_shuffle = args != ["off"]
        self.device.faults.jam_stays = args == ["stays"]
        if args == ["off"]:
            return "no jam armed"
        return "the next shuffle jams" + (" until the door is opened to clear it" if args else "")

    def _cmd_power_cut_shuffle(self, args: list[str]) -> str:
        if args not in ([], ["off"]):
            raise ControlError("power-cut-shuffle [off]")
        self.device.faults.power_cut_mid_shuffle = not args
        return "the power goes during the next shuffle" if not args else "no power cut armed"

    def _cmd_door(self, args: list[str]) -> str:
        if args not in (["open"], ["closed"]):
            raise ControlError("door open|closed")
        self.device.faults.door_open = args[0] == "open"
        if self.device.faults.door_open:
            self.device.faults.jammed = False  # the dealer's hand clears a standing jam through the open door
        return f"door {args[0]}"

    # shoe
    def _cmd_load(self, args: list[str]) -> str:
        if len(args) == 1 and args[0].startswith("deck="):
            carried = _carried(args[0])
            self.device.load(carried)
            return f"loaded {self.device.colour} cards={len(carried)}"
        if not args or len(args) > 2 or (len(args) == 2 and args[1] != "ordered"):
            raise ControlError("load COLOUR [ordered] | load deck=TEXT")
        colour = BackColour.parse(args[0])
        cards = new_deck(colour)
        if len(args) == 1:
            self.rng.shuffle(cards)
        self.device.load(cards)
        return f"loaded {colour} cards={len(cards)}"

    def _cmd_draw(self, args: list[str]) -> str:
        n = _count(args[0]) if args else 1
        drawn = []
        for _ in range(n):
            sim = self.device.draw()
            drawn.append(str(sim.card) if sim is not None else "empty")
        return "drew " + " ".join(drawn)

    def _cmd_unreadable(self, args: list[str]) -> str:
        if len(args) != 1:
            raise ControlError("unreadable N")
        self.device.faults.unreadable_draws = _count(args[0])
        return f"the next {self.device.faults.unreadable_draws} draws are unreadable"

    def _cmd_slip(self, args: list[str]) -> str:
        if not 1 <= len(args) <= 2:
            raise ControlError("slip CARD [COLOUR]")
        card = Card.parse(args[0])
        if len(args) == 2:
            colour = BackColour.parse(args[1])
            if colour is BackColour.NONE:
                raise ControlError(f"{args[1]!r} is not a back colour")
        else:
            colour = BackColour.BLUE if self.device.colour is not BackColour.BLUE else BackColour.RED
        self.device.slip(SimCard(card, colour))
        return f"slipped {card} ({colour} back) on top cards={len(self.device.cards)}"

    def _cmd_unload(self, args: list[str]) -> str:
        stub = self.device.unload()
        return f"unloaded cards={len(stub)}" + (f" deck={deck_to_text(stub)}" if stub else "")


_KIND_OF = {"insert": "shuffler", "take": "shuffler", "jam": "shuffler", "door": "shuffler",
            "hold-shuffle": "shuffler", "finish": "shuffler", "power-cut-shuffle": "shuffler",
            "load": "shoe", "draw": "shoe", "unreadable": "shoe", "unload": "shoe", "slip": "shoe"}


def _carried(word: str) -> list[SimCard]:
    """The cards of a ``deck=TEXT`` word (:mod:`protocols.deck_text`); raises :class:`ControlError`."""
    try:
        return [SimCard(c, b) for c, b in deck_from_text(word.split("=", 1)[1])]
    except CardError as exc:
        raise ControlError(f"deck=: {exc}") from None


def _count(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 1000:
        raise ControlError(f"{text!r} is not a count 0..1000")
    return int(text)


class _Quit(Exception):
    """The ``quit`` control command."""


@dataclass
class _Client:
    sock: socket.socket
    buf: bytes = b""
    out: list[bytes] = field(default_factory=list)


class _ControlLoop:
    """The control lines of one emulator, from stdin and from control-socket clients, on
    one selector: each line is answered ``ok ...`` or ``error ...`` on its channel."""

    def __init__(self, emulator: StandaloneEmulator, stdout: TextIO, stop: list[int | str]) -> None:
        self.emulator = emulator
        self.stdout = stdout
        self.stop = stop
        self.sel = selectors.DefaultSelector()
        self.clients: dict[int, _Client] = {}
        self.control: socket.socket | None = None
        self.stdin_fd: int | None = None
        self._stdin_buf = b""

    def answer(self, line: bytes) -> bytes:
        """The reply to one control line (empty for a blank line or a comment)."""
        text = line.decode("utf-8", "replace").strip()
        if not text or text.startswith("#"):
            return b""
        try:
            return f"ok {self.emulator.command(text)}\n".encode()
        except ControlError as exc:
            return f"error {exc}\n".encode()
        except _Quit:
            self.stop.append("quit")
            return b"ok quitting\n"

    def watch_stdin(self, fd: int | None) -> None:
        """Read commands on ``fd`` too (not a file or /dev/null, which a selector refuses)."""
        if fd is None:
            return
        try:
            self.sel.register(fd, selectors.EVENT_READ, "stdin")
            self.stdin_fd = fd
        except (PermissionError, ValueError, OSError):
            pass  # /dev/null or a file (a bench's `cmd &`): no commands on stdin

    def run(self, wake_r: socket.socket) -> None:
        """Serve until ``stop`` holds a reason (a signal's wake byte, or ``quit``)."""
        while not self.stop:
            for key, _ in self.sel.select():
                what = key.data
                if what == "wake":
                    try:
                        wake_r.recv(512)
                    except BlockingIOError:
                        pass
                elif what == "accept":
                    self._accept()
                elif what == "stdin":
                    self._read_stdin()
                else:
                    self._read_client(key.fd)

    def _accept(self) -> None:
        assert self.control is not None
        try:
            conn, _ = self.control.accept()
        except BlockingIOError:
            return
        conn.setblocking(True)
        self.clients[conn.fileno()] = _Client(conn)
        self.sel.register(conn, selectors.EVENT_READ, "client")

    def _read_stdin(self) -> None:
        assert self.stdin_fd is not None
        data = os.read(self.stdin_fd, 4096)
        if not data:
            self.sel.unregister(self.stdin_fd)  # EOF: keep serving until a signal
            return
        self._stdin_buf += data
        while b"\n" in self._stdin_buf:
            line, self._stdin_buf = self._stdin_buf.split(b"\n", 1)
            reply = self.answer(line)
            if reply:
                self.stdout.write(reply.decode())
                self.stdout.flush()

    def _read_client(self, fd: int) -> None:
        client = self.clients[fd]
        try:
            data = client.sock.recv(4096)
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(client.sock)
            client.sock.close()
            del self.clients[fd]
            return
        client.buf += data
        while b"\n" in client.buf:
            line, client.buf = client.buf.split(b"\n", 1)
            reply = self.answer(line)
            if reply:
                try:
                    client.sock.sendall(reply)
                except OSError:
                    pass

    def close(self) -> None:
        for client in self.clients.values():
            client.sock.close()
        self.sel.close()
        if self.control is not None:
            self.control.close()


def serve(options: EmulatorOptions, *, stdout: TextIO, stdin_fd: int | None = None,
          signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> int:
    """Run one emulator until SIGTERM/SIGINT or ``quit``; return the exit status (0).

    Prints the address a host opens as the first line of ``stdout`` (the pty
    symlink path, or ``socket://HOST:PORT``), then ``control HOST:PORT`` if a
    control socket was asked for, and flushes. Then reads control commands
    from ``stdin_fd`` (None: no stdin control; EOF just stops reading it) and
    from control-socket clients, answering each line with ``ok ...`` or
    ``error ...`` on the channel it came from. Blocks in a selector: nothing
    polls. Must run in the main thread (it installs signal handlers, restored
    on return). Raises ``OSError`` when the port or control socket cannot be
    opened (nothing is left behind).
    """
    emulator = StandaloneEmulator(options)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    old_handlers: dict[int, object] = {}
    old_wakeup = -1
    stop: list[int | str] = []
    loop = _ControlLoop(emulator, stdout, stop)
    try:
        if options.control is not None:
            loop.control = socket.create_server(options.control)
            loop.control.setblocking(False)

        def on_signal(signum, frame) -> None:
            stop.append(signum)

        old_wakeup = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        for s in signals:
            old_handlers[s] = signal.signal(s, on_signal)
        emulator.start()
        stdout.write(emulator.url + "\n")
        if loop.control is not None:
            host, port = loop.control.getsockname()[:2]
            stdout.write(f"control {host}:{port}\n")
        stdout.flush()
        emulator._log.info("listening", url=emulator.url, kind=options.kind,
                           serial=emulator.device.serial_number, pty=getattr(emulator.port, "path", None))
        loop.sel.register(wake_r, selectors.EVENT_READ, "wake")
        if loop.control is not None:
            loop.sel.register(loop.control, selectors.EVENT_READ, "accept")
        loop.watch_stdin(stdin_fd)
        loop.run(wake_r)
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h)
        if old_handlers or old_wakeup != -1:
            signal.set_wakeup_fd(old_wakeup)
        loop.close()
        emulator.stop()
        wake_r.close()
        wake_w.close()
    reason = stop[0] if stop else "stopped"
    emulator._log.info("stopped", reason=signal.Signals(reason).name if isinstance(reason, int) else reason)
    return 0


__all__ = ["ControlError", "EmulatorOptions", "HELP", "StandaloneEmulator", "describe_frame", "parse_address",
           "serve"]
