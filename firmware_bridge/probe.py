"""One device driven by hand, a request at a time: what ``tablectl probe`` runs.

Like pyserial's miniterm or pymodbus's REPL, and unlike :class:`~firmware_bridge.link.Link`:
no handshake of its own, no retransmit, no heartbeat, no reconnect. Each
:meth:`Probe.request` writes one frame and reads the line until the reply
with its SEQ arrives or the deadline the person set passes, and hands back
every frame seen meanwhile, so the person sees exactly what crossed the wire.

Two rules keep a probe from disturbing a table:

* the port is opened the way the link opens it, ``exclusive=True`` (pyserial's
  lock; a USB interface is claimed), so a port the controller holds is refused
  with "another process holds the port", never shared;
* device events (SPEC §6.3) are shown but **not acknowledged**: an event acked
  here would never reach the controller, whose journal must see every card.
  The device keeps resending them until a controller acks them.

SEQs (SPEC §6.1, §6.2): ``Identify`` goes with SEQ 0 and a fresh host session
(the device then clears its reply cache); other requests take SEQs 1..255 in
turn from a random start, so a first request is unlikely to meet a reply the
device cached for an earlier host.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from protocols.errors import MessageError
from protocols.frame import FrameParser, encode_frame
from protocols.messages import Direction, Identify, Message, decode_message, direction_of, encode_message

from .factory import transport_for
from .transport import Transport, as_timed


@dataclass
class Exchange:
    """One request and what came back: ``sent`` (the request frame's bytes), ``seq``;
    ``reply`` (the reply frame's bytes, None when none came by the deadline) and
    ``reply_message`` (decoded, None if it does not decode: ``decode_error`` says why);
    ``others``: every other frame read meanwhile, as ``(bytes, kind)`` with kind
    ``"event"`` (not acknowledged) or ``"stale reply"`` (another SEQ);
    ``elapsed_s``: from the write to the reply (or the deadline)."""

    sent: bytes
    seq: int
    reply: bytes | None = None
    reply_message: Message | None = None
    decode_error: str | None = None
    others: list[tuple[bytes, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def answered(self) -> bool:
        """True when a reply with the request's SEQ arrived."""
        return self.reply is not None


class Probe:
    """A device at ``url`` (a pyserial URL or ``usb://VID:PID[/SERIAL]``), driven by hand.

    ``reply_timeout_s``: how long :meth:`request` waits for its reply (the person's
    deadline, s); ``usb_backend``: the pyusb backend for a USB selector.
    :meth:`open` raises :class:`~firmware_bridge.errors.TransportError` (with a hint)
    when the port cannot be opened, including when another process holds it; reads
    and writes raise :class:`~firmware_bridge.errors.LinkLost` when it goes away.
    A context manager.
    """

    def __init__(self, url: str, *, reply_timeout_s: float = 1.0, usb_backend: Any = None,
                 transport: Transport | None = None) -> None:
        if reply_timeout_s <= 0:
            raise ValueError("reply_timeout_s must be positive")
        self.url = url
        self.reply_timeout_s = reply_timeout_s
        self.transport = transport or transport_for(url, usb_backend=usb_backend, read_timeout_ms=100)
        self.session = secrets.randbits(32)
        self._next_seq = 1 + secrets.randbelow(255)
        self._parser = FrameParser()
        self._open = False

    def open(self) -> "Probe":
        """Open the port (exclusive). Returns self."""
        self.transport.open()
        self._open = True
        return self

    def close(self) -> None:
        """Close the port; safe to call twice."""
        if self._open:
            self._open = False
            self.transport.close()

    def __enter__(self) -> "Probe":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def identify(self) -> Exchange:
        """``Identify`` with SEQ 0 and this probe's host session (SPEC §6.1)."""
        return self.request(Identify(self.session))

    def request(self, msg: Message) -> Exchange:
        """Send ``msg`` once and read until its reply or :attr:`reply_timeout_s`."""
        if direction_of(msg.TYPE) is not Direction.REQUEST:
            raise ValueError(f"{type(msg).__name__} is not a host request")
        if isinstance(msg, Identify):
            seq = 0
        else:
            seq = self._next_seq
            self._next_seq = 1 if seq == 255 else seq + 1
        msg_type, payload = encode_message(msg)
        wire = encode_frame(seq, msg_type, payload)
        ex = Exchange(wire, seq)
        start = time.monotonic()
        deadline = start + self.reply_timeout_s
        self.transport.write(wire)
        while ex.reply is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            data = self._read(left)
            for frame in self._parser.feed(data) if data else ():
                raw = frame.encode()
                kind = direction_of(frame.type)
                if kind is Direction.REPLY and frame.seq == seq and ex.reply is None:
                    ex.reply = raw
                    try:
                        ex.reply_message = decode_message(frame.type, frame.payload)
                    except MessageError as exc:
                        ex.decode_error = str(exc)
                else:
                    ex.others.append((raw, "event" if kind is Direction.EVENT else
                                      "stale reply" if kind is Direction.REPLY else "request"))
        ex.elapsed_s = time.monotonic() - start
        return ex

    def _read(self, timeout_s: float) -> bytes:
        if getattr(self.transport, "timed_read", False):
            return as_timed(self.transport).read(512, min(timeout_s, 0.1))
        return self.transport.read(512)
