"""An emulated ASCII shoe (SPEC.md of this package) on a pty or TCP, with a control socket.

The emulator stands in for the shoe on a bench: the host opens its pty (or
``socket://HOST:PORT``) as it would the shoe's serial port, and a bench makes
the physical things happen (load a deck, draw cards, pull the cable) through
the **control socket**, one command per line, one reply line each (``ok ...``
or ``error ...``), as the table's own emulators do (the commands: :data:`HELP`).
``ascii-shoe-emulator --tcp 127.0.0.1:0 --control 127.0.0.1:0`` prints the
address to open and ``control HOST:PORT`` as its first two lines.

Imports the line codec and ``protocols.cards`` only: never the driver, so one
bug cannot hide on both ends.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import secrets
import selectors
import signal
import socket
import sys
import threading
import time
import tty
from dataclasses import dataclass, field

from protocols.cards import DECK_SIZE, BackColour, Card, full_deck
from protocols.deck_text import deck_from_text
from protocols.errors import CardError

from .wire import SEQ_MAX, LineBuffer, WireError, decode, encode

MODEL = "ASH-1"
FIRMWARE = "1.0.0"
#: the longest control line (a carried deck, ``load deck=TEXT``: up to 120 cards, docs/emulators.md)
CONTROL_MAX_LINE = 1024
#: the shoe sends an unanswered event again after this long (SPEC.md §3)
RESEND_S = 0.5

HELP = [
    "help                 list the commands",
    "status               what the shoe holds (one line)",
    "load COLOUR [ordered]  load a fresh deck of 52 (shuffled unless 'ordered') into the empty shoe",
    "load deck=TEXT       load the deck carried from the shuffler, in its order (docs/emulators.md)",
    "draw [N]             draw N cards (default 1; the reply names the faces as they lie on the layout); "
    "with none left the shoe says EMPTY",
    "unload               take every card out (the shoe is empty; no event)",
    "unreadable N         the next N draws are not read (UNREAD events)",
    "slip N               the next N draws leave the shoe past the reader: no event at all",
    "put CARD COLOUR      a card slips into the shoe on top of the deck (a foreign card, a repeat): put As blue",
    "garble N             the next N lines the shoe sends carry a wrong checksum",
    "garble-card N        the next N CARD event lines carry a wrong checksum (noise as a card is reported)",
    "inject WHAT [ARG..]  send an event of any content (a faulty firmware): inject CARD 0 Zz red",
    "reboot               power-cycle: a new BOOT, the unanswered events are lost",
    "disconnect           pull the cable: tcp drops the host; pty makes a new pty behind the link",
    "quit                 stop the emulator",
]


class ControlError(ValueError):
    """A control command the emulator cannot carry out; the reply says why."""


def _new_deck(colour: BackColour, rng: random.Random, ordered: bool) -> list[tuple[Card, BackColour]]:
    cards = [(card, colour) for card in full_deck()]
    assert len(cards) == DECK_SIZE
    if not ordered:
        rng.shuffle(cards)
    return cards


@dataclass
class ShoeModel:
    """The shoe's state and its side of the protocol; no I/O (the server sends what
    :meth:`take_output` returns). ``draw_index``: a shoe that numbers its draws;
    ``resend``: a shoe that keeps an event until it is answered (SPEC.md §3); the
    model without (``--no-resend``) sends each event once and forgets it."""

    serial: str = "ASH-SIM-0001"
    draw_index: bool = True
    resend: bool = True
    rng: random.Random = field(default_factory=random.Random)
    boot_id: int = field(default_factory=lambda: secrets.randbits(32))
    cards: list = field(default_factory=list)
    colour: BackColour = BackColour.NONE
    draws: int = 0
    unreadable: int = 0
    slip: int = 0
    garble: int = 0
    garble_card: int = 0
    _seq: int = 0
    _pending: collections.deque = field(default_factory=collections.deque)
    _outstanding: tuple[int, bytes] | None = None
    _due: float = 0.0
    _out: list = field(default_factory=list)
    acked: int = 0
    #: a host sent ID? since power-up (until then: no events, and ER BOOT to other requests)
    identified: bool = False

    # events
    def _event(self, *fields: object) -> None:
        self._seq = self._seq % SEQ_MAX + 1
        self._pending.append((self._seq, encode("EV", self._seq, *fields)))
        self._pump(time.monotonic())

    def _pump(self, now: float) -> None:
        if not self.resend:  # the model without resend: each event goes once, answered or not
            while self._pending and self.identified:
                self._send(self._pending.popleft()[1])
            return
        if self._outstanding is None and self._pending and self.identified:
            self._outstanding = self._pending.popleft()
            self._send(self._outstanding[1])
            self._due = now + RESEND_S

    def _send(self, line: bytes) -> None:
        card = self.garble_card and b" CARD " in line
        if card:
            self.garble_card -= 1
        if self.garble or card:
            self.garble -= 0 if card else 1
            line = line[:-4] + (b"00" if line[-4:-2] != b"00" else b"FF") + b"\r\n"
        self._out.append(line)

    def tick(self, now: float) -> float | None:
        """Resend the outstanding event when its time is up; returns when to call again."""
        if self._outstanding is not None and now >= self._due and self.identified:
            self._send(self._outstanding[1])
            self._due = now + RESEND_S
        self._pump(now)
        return self._due if self._outstanding is not None else None

    def take_output(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    # the host's lines
    def on_line(self, line: bytes) -> None:
        try:
            fields = decode(line)
        except WireError:
            return  # dropped without an answer (SPEC.md §1)
        head = fields[0]
        if head in ("ACK", "NAK"):
            if len(fields) >= 2 and fields[1].isdigit() and self._outstanding is not None \
                    and int(fields[1]) == self._outstanding[0]:
                self._outstanding = None
                self.acked += 1
                self._pump(time.monotonic())
            return
        if head == "ID?":
            reply = encode("ID", MODEL, self.serial, FIRMWARE, f"{self.boot_id:08x}") if len(fields) == 1 \
                else encode("ER", "BAD")
            if len(fields) == 1:
                self.identified = True
                self._send(reply)
                if self._outstanding is not None:
                    self._due = time.monotonic()  # the outstanding event goes again at once
                self._pump(time.monotonic())
                return
        elif not self.identified:
            reply = encode("ER", "BOOT")
        elif head == "ST?":
            reply = encode("ST", "LOADED" if self.cards else "EMPTY", str(self.colour), len(self.cards)) \
                if len(fields) == 1 else encode("ER", "BAD")
        else:
            reply = encode("ER", "UNKNOWN")
        self._send(reply)

    # the dealer's hands
    def load(self, colour: BackColour, ordered: bool = False,
             cards: "list[tuple[Card, BackColour]] | None" = None) -> None:
        """Load a fresh deck of ``colour`` or, with ``cards``, the carried deck in its order."""
        if self.cards:
            raise ControlError("the shoe is not empty (unload first)")
        self.cards = list(cards) if cards else _new_deck(colour, self.rng, ordered)
        self.colour, self.draws = colour, 0
        self._event("LOAD", str(colour))

    def draw(self) -> str:
        if not self.cards:
            self._event("EMPTY", self.draws)
            return "empty"
        card, colour = self.cards.pop(0)
        index = self.draws % 256
        self.draws += 1
        where = (index,) if self.draw_index else ()
        if self.slip:
            self.slip -= 1
            return str(card)  # out of the shoe past the reader: the shoe knows nothing of it
        if self.unreadable:
            self.unreadable -= 1
            self._event("UNREAD", *where, str(colour))
            return str(card)  # the card on the layout, which the reader did not read
        self._event("CARD", *where, str(card), str(colour))
        return str(card)

    def put(self, card: str, colour: BackColour) -> None:
        """A card slips into the shoe on top of its deck (the next drawn)."""
        if not self.cards:
            raise ControlError("the shoe is empty (load first)")
        self.cards.insert(0, (Card.parse(card), colour))

    def unload(self) -> int:
        n, self.cards, self.colour = len(self.cards), [], BackColour.NONE
        return n

    def reboot(self) -> None:
        self.boot_id = secrets.randbits(32)
        self._seq, self._outstanding, self.identified = 0, None, False
        self._pending.clear()
        self._out.clear()


class Emulator:
    """The shoe on a port (``tcp=(host, port)``, or ``pty=True`` with an optional
    ``link`` symlink path) with a control socket (``control=(host, port)`` or None).
    :meth:`start` runs it on a thread; :attr:`url` is what the host opens and
    :attr:`control_address` where the control socket listens."""

    def __init__(self, model: ShoeModel, *, tcp: tuple[str, int] | None = None, pty: bool = False,
                 link: str | None = None, control: tuple[str, int] | None = None) -> None:
        if (tcp is None) == (not pty):
            raise ValueError("give exactly one of tcp or pty")
        self.model = model
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._listen: socket.socket | None = None
        self._host: socket.socket | None = None
        self._master: int | None = None
        self._slave: int | None = None
        self._link = link
        self._rx = LineBuffer()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._controls: dict[socket.socket, LineBuffer] = {}
        if tcp is not None:
            self._listen = socket.create_server(tcp)
            self._sel.register(self._listen, selectors.EVENT_READ, "accept")
            host, port = self._listen.getsockname()[:2]
            self.url = f"socket://{host}:{port}"
        else:
            self._open_pty()
            self.url = link or os.ttyname(self._slave)
        self._control: socket.socket | None = None
        self.control_address: tuple[str, int] | None = None
        if control is not None:
            self._control = socket.create_server(control)
            self._sel.register(self._control, selectors.EVENT_READ, "control-accept")
            self.control_address = self._control.getsockname()[:2]

    # ports
    def _open_pty(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)  # a new pty echoes and cooks lines (docs/pitfalls.md, "Pseudo-terminals")
        os.set_blocking(master, False)
        self._master, self._slave = master, slave  # the slave stays open: else the master reads EIO
        self._sel.register(master, selectors.EVENT_READ, "host")
        if self._link:
            tmp = f"{self._link}.{os.getpid()}.tmp"
            os.symlink(os.ttyname(slave), tmp)
            os.replace(tmp, self._link)

    def _close_pty(self) -> None:
        if self._master is not None:
            self._sel.unregister(self._master)
            os.close(self._master)
            os.close(self._slave)
            self._master = self._slave = None

    def _drop_host(self) -> None:
        if self._host is not None:
            self._sel.unregister(self._host)
            self._host.close()
            self._host = None

    def _write_host(self, data: bytes) -> None:
        try:
            if self._host is not None:
                self._host.sendall(data)
            elif self._master is not None:
                os.write(self._master, data)
        except OSError:
            if self._host is not None:
                self._drop_host()

    # control
    def command(self, line: str) -> str:
        """Carry out one control command; returns the reply line (``ok ...``/``error ...``)."""
        words = line.split()
        if not words:
            return "error empty command (help lists them)"
        name, args = words[0], words[1:]
        m = self.model
        try:
            with self._lock:
                if name == "help":
                    return "ok " + " | ".join(h.split("  ")[0].strip() for h in HELP)
                if name == "status":
                    return f"ok {'loaded' if m.cards else 'empty'} colour={m.colour} cards={len(m.cards)} " \
                           f"draws={m.draws} boot={m.boot_id:08x}"
                if name == "load" and len(args) == 1 and args[0].startswith("deck="):
                    try:
                        carried = deck_from_text(args[0][5:])
                    except CardError as exc:
                        raise ControlError(f"deck=: {exc}") from None
                    colour = collections.Counter(b for _, b in carried).most_common(1)[0][0]
                    m.load(colour, cards=carried)
                    return f"ok loaded {colour} cards={len(m.cards)}"
                if name == "load":
                    if not args or len(args) > 2 or (len(args) == 2 and args[1] != "ordered"):
                        raise ControlError("load COLOUR [ordered]")
                    colour = BackColour.parse(args[0])
                    if colour is BackColour.NONE:
                        raise ControlError(f"{args[0]!r} is not a back colour")
                    m.load(colour, ordered=len(args) == 2)
                    return f"ok loaded {colour} cards={len(m.cards)}"
                if name == "draw":
                    n = _count(args[0]) if args else 1
                    return "ok drew " + " ".join(m.draw() for _ in range(n))
                if name == "unload":
                    return f"ok unloaded cards={m.unload()}"
                if name == "unreadable":
                    m.unreadable = _count(args[0]) if len(args) == 1 else _fail("unreadable N")
                    return f"ok the next {m.unreadable} draws are unreadable"
                if name == "slip":
                    m.slip = _count(args[0]) if len(args) == 1 else _fail("slip N")
                    return f"ok the next {m.slip} draws leave unseen"
                if name == "put":
                    if len(args) != 2 or BackColour.parse(args[1]) is BackColour.NONE:
                        raise ControlError("put CARD COLOUR")
                    m.put(args[0], BackColour.parse(args[1]))
                    return f"ok put cards={len(m.cards)}"
                if name == "garble-card":
                    m.garble_card = _count(args[0]) if len(args) == 1 else _fail("garble-card N")
                    return f"ok the next {m.garble_card} card lines are garbled"
                if name == "garble":
                    m.garble = _count(args[0]) if len(args) == 1 else _fail("garble N")
                    return f"ok the next {m.garble} lines are garbled"
                if name == "inject":
                    if not args:
                        raise ControlError("inject WHAT [ARG..]")
                    m._event(*args)
                    return f"ok injected {args[0]}"
                if name == "reboot":
                    m.reboot()
                    return f"ok rebooted boot={m.boot_id:08x}"
                if name == "disconnect":
                    if self._listen is not None:
                        self._drop_host()
                    else:
                        self._close_pty()
                        self._open_pty()
                    return "ok disconnected"
                if name == "quit":
                    self._stop = True
                    return "ok quitting"
        except (ControlError, ValueError) as exc:
            return f"error {exc}"
        finally:
            self._wake()
        return f"error unknown command {name!r} (help lists them)"

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    # the loop
    def start(self) -> "Emulator":
        self._thread = threading.Thread(target=self.serve_forever, name="ascii-shoe", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._drop_host()
        self._close_pty()
        for s in list(self._controls) + [x for x in (self._listen, self._control) if x is not None]:
            s.close()
        if self._link:
            try:
                os.unlink(self._link)
            except FileNotFoundError:
                pass

    def __enter__(self) -> "Emulator":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve until ``quit`` or :meth:`stop`: host lines, control lines, resends."""
        while not self._stop:
            with self._lock:
                due = self.model.tick(time.monotonic())
                out = self.model.take_output()
            for line in out:
                self._write_host(line)
            timeout = None if due is None else max(0.0, due - time.monotonic())
            for key, _ in self._sel.select(timeout):
                what = key.data
                if what == "wake":
                    os.read(self._wake_r, 4096)
                elif what == "accept":
                    conn, _ = self._listen.accept()
                    if self._host is not None:
                        conn.close()  # one host at a time, as a serial port
                        continue
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    conn.setblocking(False)
                    self._host, self._rx = conn, LineBuffer()
                    self._sel.register(conn, selectors.EVENT_READ, "host")
                elif what == "host":
                    self._read_host(key.fileobj)
                elif what == "control-accept":
                    conn, _ = self._control.accept()
                    if len(self._controls) >= 8:
                        conn.close()
                        continue
                    conn.setblocking(False)
                    self._controls[conn] = LineBuffer(max_line=CONTROL_MAX_LINE)
                    self._sel.register(conn, selectors.EVENT_READ, "control")
                elif what == "control":
                    self._read_control(key.fileobj)

    def _read_host(self, f) -> None:
        try:
            data = f.recv(4096) if isinstance(f, socket.socket) else os.read(f, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if isinstance(f, socket.socket):
                self._drop_host()
            return
        with self._lock:
            for line in self._rx.feed(data):
                self.model.on_line(line)

    def _read_control(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(conn)
            self._controls.pop(conn, None)
            conn.close()
            return
        for line in self._controls[conn].feed(data):
            reply = self.command(line.decode("ascii", "replace").strip())
            try:
                conn.sendall(reply.encode() + b"\n")
            except OSError:
                pass


def _count(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 1000:
        raise ControlError(f"{text!r} is not a count 0..1000")
    return int(text)


def _fail(usage: str) -> int:
    raise ControlError(usage)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    """``ascii-shoe-emulator``: serve an emulated ASCII shoe until SIGTERM or ``quit``."""
    ap = argparse.ArgumentParser(prog="ascii-shoe-emulator", description=__doc__.split("\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--tcp", type=_address, metavar="HOST:PORT", help="listen for the host on TCP")
    where.add_argument("--pty", action="store_true", help="make a pty for the host")
    ap.add_argument("--link", metavar="PATH", help="with --pty: a symlink to the pty at PATH")
    ap.add_argument("--control", type=_address, metavar="HOST:PORT", help="the control socket (the dealer's hands)")
    ap.add_argument("--serial", default="ASH-SIM-0001", help="the serial number the shoe reports")
    ap.add_argument("--seed", type=int, default=None, help="seed of the decks' order")
    ap.add_argument("--no-draw-index", action="store_true", help="the basic model: CARD lines carry no index")
    ap.add_argument("--no-resend", action="store_true",
                    help="a model that sends each event once and never again (no ACK awaited)")
    args = ap.parse_args(argv)
    model = ShoeModel(serial=args.serial, draw_index=not args.no_draw_index, resend=not args.no_resend,
                      rng=random.Random(args.seed))
    emu = Emulator(model, tcp=args.tcp, pty=args.pty, link=args.link, control=args.control)
    print(emu.url, flush=True)
    if emu.control_address is not None:
        print(f"control {emu.control_address[0]}:{emu.control_address[1]}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: emu.command("quit"))
    try:
        emu.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
