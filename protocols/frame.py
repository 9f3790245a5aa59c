"""Binary frame codec and incremental parser (protocols/SPEC.md §2). Pure: no I/O.

Frame layout, all integers unsigned, multi-byte ones big-endian::

    +------+-----+-----+------+-------------+--------+
    | SYNC | LEN | SEQ | TYPE | PAYLOAD     | CRC16  |
    | 0xA5 | u8  | u8  | u8   | LEN bytes   | u16 BE |
    +------+-----+-----+------+-------------+--------+

``CRC16`` is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no
final XOR) over LEN, SEQ, TYPE and PAYLOAD, computed with ``binascii.crc_hqx``.
A frame is 6 + LEN bytes, at most 261.

The parser follows Klipper's contract: given the bytes so far it either needs
more bytes, drops one byte and resynchronises (garbage, bad CRC), or emits a
frame of *n* bytes.
"""

from __future__ import annotations

import binascii
from typing import NamedTuple

from .errors import FrameError

SYNC = 0xA5
HEADER_SIZE = 4  # SYNC, LEN, SEQ, TYPE
CRC_SIZE = 2
OVERHEAD = HEADER_SIZE + CRC_SIZE
MAX_PAYLOAD = 255
MAX_FRAME = OVERHEAD + MAX_PAYLOAD


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (check value of b"123456789" is 0x29B1)."""
    return binascii.crc_hqx(data, 0xFFFF)


class Frame(NamedTuple):
    """One decoded frame: ``seq`` 0..255, ``type`` 0..255, ``payload`` 0..255 bytes.

    A named tuple, not a frozen dataclass: it is built once per frame on the
    link's hot path, and a tuple is built in half the time."""

    seq: int
    type: int
    payload: bytes = b""

    def encode(self) -> bytes:
        """The frame's bytes on the wire; raises :class:`FrameError` if a field is out of range."""
        return encode_frame(self.seq, self.type, self.payload)


def encode_frame(seq: int, msg_type: int, payload: bytes = b"") -> bytes:
    """Build one frame (SPEC §2). Raises :class:`FrameError` on out-of-range fields."""
    if not 0 <= seq <= 0xFF:
        raise FrameError(f"sequence number must be 0..255, got {seq}")
    if not 0 <= msg_type <= 0xFF:
        raise FrameError(f"message type must be 0..255, got {msg_type}")
    if len(payload) > MAX_PAYLOAD:
        raise FrameError(f"payload is {len(payload)} bytes, at most {MAX_PAYLOAD} fit a frame")
    body = bytes((len(payload), seq, msg_type)) + bytes(payload)
    return bytes((SYNC,)) + body + crc16(body).to_bytes(2, "big")


def decode_frame(data: bytes) -> Frame:
    """Decode exactly one whole frame; raises :class:`FrameError` on any defect."""
    if len(data) < OVERHEAD:
        raise FrameError(f"frame is {len(data)} bytes, shorter than the {OVERHEAD}-byte minimum")
    if data[0] != SYNC:
        raise FrameError(f"frame starts with 0x{data[0]:02X}, not sync 0x{SYNC:02X}")
    length = data[1]
    if len(data) != OVERHEAD + length:
        raise FrameError(f"LEN says {length} payload bytes but frame is {len(data)} bytes")
    body = bytes(data[1 : HEADER_SIZE + length])
    got = int.from_bytes(data[HEADER_SIZE + length :], "big")
    want = crc16(body)
    if got != want:
        raise FrameError(f"bad CRC: frame carries 0x{got:04X}, computed 0x{want:04X}")
    return Frame(data[2], data[3], bytes(data[HEADER_SIZE : HEADER_SIZE + length]))


class FrameParser:
    """Incremental frame parser: ``feed(bytes)`` yields whole, CRC-checked frames.

    Bytes before a sync byte are dropped; a candidate frame with a bad CRC costs
    its sync byte only, and the search for the next sync byte restarts right
    after it, so a frame hidden inside garbage is still found. The buffer never
    holds more than one maximal frame (261 bytes) of unparsed input.

    Counters (for link statistics): ``bytes_dropped``, ``crc_errors``, ``frames``.
    """

    __slots__ = ("_buf", "bytes_dropped", "crc_errors", "frames")

    def __init__(self) -> None:
        self._buf = bytearray()
        self.bytes_dropped = 0
        self.crc_errors = 0
        self.frames = 0

    def reset(self) -> None:
        """Forget any partial frame (after a reconnect)."""
        self.bytes_dropped += len(self._buf)
        self._buf.clear()

    @property
    def pending(self) -> int:
        """Bytes held while waiting for the rest of a frame."""
        return len(self._buf)

    def expire(self) -> list[Frame]:
        """The line went idle with a partial frame held: it can never complete.

        Drop its sync byte and rescan what is held, returning any whole frame
        found inside. Call it when a read times out with :attr:`pending` > 0
        (an inter-frame gap, SPEC §2.1 step 5), so a garbage header claiming a
        long payload cannot hold back the frames behind it.
        """
        out: list[Frame] = []
        while self._buf:
            self.bytes_dropped += 1
            del self._buf[0]
            out += self.feed(b"")
        return out

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data`` (any length, bytes or bytearray); return every frame now
        complete, in order (an empty list while a frame is still partial)."""
        buf = self._buf
        if not buf:
            # The common case on a quiet line: the read holds exactly whole frames.
            # Parse them straight from ``data``, without copying it into the buffer.
            out: list[Frame] = []
            n, i = len(data), 0
            while n - i >= OVERHEAD and data[i] == SYNC:
                end = i + OVERHEAD + data[i + 1]
                if end > n or binascii.crc_hqx(data[i + 1 : end - 2], 0xFFFF) != (data[end - 2] << 8 | data[end - 1]):
                    break
                out.append(Frame(data[i + 2], data[i + 3], bytes(data[i + 4 : end - 2])))
                i = end
            if i:
                self.frames += len(out)
                if i == n:
                    return out
                data = data[i:]
            return out + self._feed_slow(data)
        return self._feed_slow(data)

    def _feed_slow(self, data: bytes) -> list[Frame]:
        """Buffer ``data`` and scan byte by byte: partial frames, garbage, bad CRCs."""
        buf = self._buf
        buf += data
        out: list[Frame] = []
        while buf:
            if buf[0] != SYNC:
                start = buf.find(SYNC)
                drop = len(buf) if start < 0 else start
                del buf[:drop]
                self.bytes_dropped += drop
                continue
            if len(buf) < 2:
                break
            end = OVERHEAD + buf[1]
            if len(buf) < end:
                break
            body = bytes(buf[1 : end - CRC_SIZE])
            if crc16(body) != (buf[end - 2] << 8 | buf[end - 1]):
                # Resync: drop just this sync byte and look for the next one.
                self.crc_errors += 1
                self.bytes_dropped += 1
                del buf[0]
                continue
            del buf[:end]
            self.frames += 1
            out.append(Frame(body[1], body[2], body[3:]))
        return out
