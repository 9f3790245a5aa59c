"""Message catalogue round trips and typed decode errors (protocols/SPEC.md §4)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.cards import BackColour, Card, full_deck
from protocols.errors import MessageError, ProtocolError, UnknownMessageType
from protocols.messages import (
    Ack, CardDrawn, Echo, EchoReply, CardUnreadable, DeckDelivered, DeckInserted, DeckVerified, DeviceKind, DeviceState,
    GetStatus, Identify, IdentifyReply, Nak, NakCode, ShoeEmpty, ShoeLoaded, Shuffle, ShufflerFault,
    ShufflerFaultCode, StatusReply, catalogue, decode_message, encode_message,
)

EXAMPLES = [
    Identify(), GetStatus(), Ack(), Shuffle(), Nak(NakCode.NO_DECK), Echo(b"ping"), EchoReply(bytes(range(64))),
    IdentifyReply(DeviceKind.SHOE, 1, 0, (2, 3, 4), "SHOE-0042", 0xDEADBEEF),
    StatusReply(DeviceState.READY, BackColour.RED, 52, 0),
    DeckInserted(BackColour.BLUE), DeckDelivered(BackColour.RED),
    DeckVerified(BackColour.RED, 52, 0, frozenset(range(52))),
    DeckVerified(BackColour.RED, 53, 1, frozenset(range(51)), frozenset({7})),
    ShufflerFault(ShufflerFaultCode.JAM), ShoeLoaded(BackColour.GREEN),
    CardDrawn(3, Card.parse("Qs"), BackColour.RED), CardUnreadable(4, BackColour.NONE), ShoeEmpty(52),
]


def test_every_catalogue_message_has_an_example():
    assert {type(m) for m in EXAMPLES} == set(catalogue().values())


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(msg):
    t, p = encode_message(msg)
    assert decode_message(t, p) == msg


@given(st.sampled_from(full_deck()), st.integers(0, 255), st.sampled_from(list(BackColour)))
def test_card_drawn_round_trip(card, idx, colour):
    msg = CardDrawn(idx, card, colour)
    assert decode_message(*encode_message(msg)) == msg


def test_unknown_type_and_bad_payloads_raise_typed_errors():
    with pytest.raises(UnknownMessageType):
        decode_message(0x3E, b"")
    with pytest.raises(MessageError):
        decode_message(CardDrawn.TYPE, bytes([0, 15, 0, 1]))  # rank 15
    with pytest.raises(MessageError):
        decode_message(DeckInserted.TYPE, bytes([99]))  # no such colour
    with pytest.raises(MessageError):
        decode_message(DeckVerified.TYPE, bytes(3) + b"\xff" * 14)  # bits above card 51


@given(st.integers(0, 255), st.binary(max_size=40))
def test_decoders_raise_only_protocol_errors(msg_type, payload):
    try:
        decode_message(msg_type, payload)
    except ProtocolError:
        pass


def test_deck_verified_never_carries_an_order():
    # Two decks with the same cards in different orders verify to the same bytes.
    a = DeckVerified(BackColour.RED, 52, 0, frozenset(range(52)))
    b = DeckVerified(BackColour.RED, 52, 0, frozenset(reversed(range(52))))
    assert encode_message(a) == encode_message(b)
    assert a.complete and not a.missing
