"""The line codec (SPEC.md §1): exact bytes, checksums, and what is refused."""

import pytest

from threecard_ascii_shoe.wire import MAX_LINE, LineBuffer, WireError, decode, encode, parse_event


def test_a_line_is_fields_star_xor_crlf():
    line = encode("EV", 3, "LOAD", "red")
    body = b"EV 3 LOAD red"
    x = 0
    for b in body:
        x ^= b
    assert line == body + b"*" + f"{x:02X}".encode() + b"\r\n"
    assert decode(line) == ["EV", "3", "LOAD", "red"]


def test_the_spec_examples_checksum():
    assert encode("ST?") == b"ST?*38\r\n"
    assert encode("ID?") == b"ID?*32\r\n"
    assert encode("EV", 2, "CARD", 0, "As", "red") == b"EV 2 CARD 0 As red*64\r\n"


@pytest.mark.parametrize("bad, why", [
    (b"ST?*39\r\n", "checksum"),
    (b"ST?\r\n", "checksum"),
    (b"ST?*1\r\n", "checksum"),
    (b"ST  ?*" + b"00\r\n", "checksum"),
    (b"\xffST?*00\r\n", "ASCII"),
    (b"X" * MAX_LINE + b"*00\r\n", "bytes"),
])
def test_what_is_not_a_line_is_refused(bad, why):
    with pytest.raises(WireError, match=why):
        decode(bad)


def test_a_field_with_a_space_or_star_cannot_be_sent():
    for field in ("a b", "a*b", "", "é"):
        with pytest.raises(WireError):
            encode("EV", field)


def test_an_event_needs_a_seq_in_range():
    assert parse_event(["EV", "9999", "EMPTY", "3"]).seq == 9999
    for seq in ("0", "10000", "x"):
        with pytest.raises(WireError):
            parse_event(["EV", seq, "EMPTY", "3"])


def test_line_buffer_splits_and_drops_an_overlong_run():
    buf = LineBuffer()
    assert buf.feed(b"ST?*38\r\nID") == [b"ST?*38\r\n"]
    assert buf.feed(b"?*32\r\n") == [b"ID?*32\r\n"]
    assert buf.feed(b"Z" * (MAX_LINE + 5)) == []
    assert buf.feed(b"tail\nST?*38\r\n") == [b"ST?*38\r\n"]  # the overlong run is dropped up to its LF
    assert buf.overlong == 1
