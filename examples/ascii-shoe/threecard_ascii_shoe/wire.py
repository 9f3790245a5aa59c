"""The ASCII shoe line protocol (SPEC.md in this package): one pure codec, no I/O.

A line is printable ASCII fields separated by single spaces, then ``*HH`` (the
XOR of every byte before the ``*``, two upper-case hex digits, as NMEA 0183),
then CR LF; at most :data:`MAX_LINE` bytes with the terminator (SPEC.md §1).
Both ends (the driver and the emulator) use this module; it imports nothing of
the table's.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the longest line either end sends or accepts, CR LF included (SPEC.md §1)
MAX_LINE = 80
#: event sequence numbers run 1..SEQ_MAX and wrap to 1 (SPEC.md §3)
SEQ_MAX = 9999
#: NAK reasons the host may give (SPEC.md §3)
NAK_REASONS = ("BAD", "WRONG")


class WireError(ValueError):
    """A line that is not a line of this protocol: the reason, never the line itself
    (a card line names a card, which stays sealed: SPEC.md §5)."""


def checksum(body: bytes) -> str:
    """The two hex digits of a line's checksum: XOR of ``body``'s bytes (SPEC.md §1)."""
    x = 0
    for b in body:
        x ^= b
    return f"{x:02X}"


def encode(*fields: object) -> bytes:
    """One line from its fields: ``encode("EV", 3, "LOAD", "red")`` ->
    ``b"EV 3 LOAD red*HH\\r\\n"``. Raises :class:`WireError` for a field with a space
    or a non-printable character, or a line over :data:`MAX_LINE`."""
    texts = [str(f) for f in fields]
    for t in texts:
        if not t or not t.isascii() or not t.isprintable() or " " in t or "*" in t:
            raise WireError("a field is empty, not printable ASCII, or holds a space or '*'")
    body = " ".join(texts).encode("ascii")
    line = body + b"*" + checksum(body).encode() + b"\r\n"
    if len(line) > MAX_LINE:
        raise WireError(f"line of {len(line)} bytes; at most {MAX_LINE}")
    return line


def decode(line: bytes) -> list[str]:
    """A received line's fields (terminator optional). Raises :class:`WireError`: too
    long, not ASCII, no checksum, a wrong checksum, an empty field."""
    line = line.rstrip(b"\r\n")
    if len(line) + 2 > MAX_LINE:
        raise WireError(f"line of {len(line) + 2} bytes; at most {MAX_LINE}")
    body, star, tail = line.rpartition(b"*")
    if not star or len(tail) != 2:
        raise WireError("no *HH checksum at the end of the line")
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        raise WireError("not ASCII") from None
    if not text.isprintable():
        raise WireError("not printable")
    if tail.decode("ascii", "replace").upper() != checksum(body):
        raise WireError("checksum does not match")
    fields = text.split(" ")
    if any(not f for f in fields):
        raise WireError("an empty field (two spaces, or one at an end)")
    return fields


class LineBuffer:
    """Bytes in, whole lines out: :meth:`feed` returns the complete lines so far.
    A run of more than :data:`MAX_LINE` bytes without LF is dropped up to the next
    LF (bounded memory; the line is counted in :attr:`overlong`)."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._buf = bytearray()
        self._skipping = False
        self.overlong = 0
        self.max_line = max_line  # the wire's MAX_LINE; a bench's control lines are longer (a carried deck)

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        self._buf += data
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                if len(self._buf) > self.max_line:
                    self._buf.clear()
                    if not self._skipping:
                        self.overlong += 1
                    self._skipping = True
                return out
            line, self._buf = bytes(self._buf[:i + 1]), self._buf[i + 1:]
            if self._skipping:
                self._skipping = False
                continue
            if len(line) > self.max_line:
                self.overlong += 1
                continue
            out.append(line)


@dataclass(frozen=True)
class Event:
    """An event line parsed (``EV SEQ WHAT ...``): ``seq``; ``what`` (LOAD, CARD,
    UNREAD, EMPTY); ``args``: the remaining fields."""

    seq: int
    what: str
    args: tuple[str, ...]


def parse_event(fields: list[str]) -> Event:
    """``["EV", "3", "LOAD", "red"]`` -> :class:`Event`. Raises :class:`WireError`
    when the SEQ is not 1..SEQ_MAX (the rest is checked by whoever reads the event)."""
    if len(fields) < 3 or fields[0] != "EV":
        raise WireError("not an event line")
    if not fields[1].isdigit() or not 1 <= int(fields[1]) <= SEQ_MAX:
        raise WireError(f"event SEQ is not 1..{SEQ_MAX}")
    return Event(int(fields[1]), fields[2], tuple(fields[3:]))
