"""Hypothesis fuzzing: arbitrary bytes into the frame parser and every message decoder.

Only the project's own typed errors (ProtocolError) may escape, and the parser
always finds the next good frame.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.errors import ProtocolError
from protocols.frame import Frame, FrameParser
from protocols.messages import catalogue, decode_message

TYPES = sorted(catalogue())


@settings(max_examples=300)
@given(st.sampled_from(TYPES), st.binary(max_size=255))
def test_every_decoder_raises_only_typed_errors(msg_type, payload):
    try:
        msg = decode_message(msg_type, payload)
    except ProtocolError:
        return
    # What decodes must encode back to the same bytes (no silent normalisation).
    assert msg.encode() == payload


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=80), max_size=8))
def test_parser_survives_arbitrary_chunks(chunks):
    parser = FrameParser()
    for chunk in chunks:
        for frame in parser.feed(chunk):
            assert isinstance(frame, Frame)
    list(parser.expire())
    assert parser.pending == 0


@settings(max_examples=300)
@given(st.binary(max_size=400), st.integers(0, 255), st.integers(0, 255), st.binary(max_size=255),
       st.integers(1, 64))
def test_parser_resynchronises_on_the_next_good_frame(garbage, seq, msg_type, payload, chunk):
    frame = Frame(seq, msg_type, payload)
    wire = garbage + frame.encode() + frame.encode()
    parser = FrameParser()
    got = []
    for i in range(0, len(wire), chunk):
        got += parser.feed(wire[i : i + chunk])
    got += parser.expire()
    assert frame in got
