"""Frame codec and incremental parser (protocols/SPEC.md §2)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.errors import FrameError
from protocols.frame import SYNC, Frame, FrameParser, crc16, decode_frame, encode_frame

frames = st.builds(Frame, st.integers(0, 255), st.integers(0, 255), st.binary(max_size=255))


def test_crc_is_ccitt_false():
    assert crc16(b"123456789") == 0x29B1  # the catalogued check value of CRC-16/CCITT-FALSE


def test_layout_of_a_known_frame():
    wire = encode_frame(7, 0x51, bytes([0, 14, 3, 1]))
    assert wire[:4] == bytes([SYNC, 4, 7, 0x51])
    assert wire[4:8] == bytes([0, 14, 3, 1])
    assert int.from_bytes(wire[8:], "big") == crc16(wire[1:8])


@given(frames)
def test_round_trip(frame):
    assert decode_frame(frame.encode()) == frame
    assert list(FrameParser().feed(frame.encode())) == [frame]


@given(st.lists(frames, min_size=1, max_size=5), st.integers(1, 7))
def test_frames_split_anywhere_arrive_whole_and_in_order(fs, chunk):
    wire = b"".join(f.encode() for f in fs)
    parser = FrameParser()
    out = []
    for i in range(0, len(wire), chunk):
        out += parser.feed(wire[i : i + chunk])
    assert out == fs
    assert parser.pending == 0


@given(st.binary(max_size=300), frames)
def test_parser_always_resynchronises(garbage, frame):
    """Garbage may hold sync bytes and fake headers claiming long payloads; once the
    line goes idle (expire), the real frame behind it always comes out."""
    parser = FrameParser()
    got = list(parser.feed(garbage + frame.encode()))
    got += parser.expire()
    assert frame in got
    assert parser.pending == 0


def test_fake_header_holds_back_a_frame_only_until_the_line_is_idle():
    frame = Frame(9, 0x51, b"\x00\x0e\x03\x01")
    parser = FrameParser()
    assert list(parser.feed(bytes([SYNC, 200]) + frame.encode())) == []  # waiting for 206 bytes
    assert list(parser.expire()) == [frame]


def test_bad_crc_is_rejected_and_next_frame_found():
    good = encode_frame(1, 0x40, b"\x01")
    bad = bytearray(encode_frame(2, 0x40, b"\x02"))
    bad[-1] ^= 0xFF
    parser = FrameParser()
    assert list(parser.feed(bytes(bad) + good)) == [Frame(1, 0x40, b"\x01")]
    assert parser.crc_errors == 1
    with pytest.raises(FrameError, match="bad CRC"):
        decode_frame(bytes(bad))


def test_encode_refuses_out_of_range_fields():
    with pytest.raises(FrameError):
        encode_frame(256, 1)
    with pytest.raises(FrameError):
        encode_frame(0, 1, bytes(256))
