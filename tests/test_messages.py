"""Message catalogue round trips and typed decode errors (protocols/SPEC.md §4)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.cards import BackColour, Card, full_deck
from protocols.errors import MessageError, ProtocolError, UnknownMessageType
from protocols.messages import (
    Ack, CardDrawn, Echo, EchoReply, CardUnreadable, DeckDelivered, DeckInserted, DeckVerified, DeviceKind, DeviceState,
    FirmwareInfo, GetFirmwareInfo, GetStatus, Identify, IdentifyReply, Nak, NakCode, ShoeEmpty, ShoeLoaded, Shuffle,
    ShufflerFault, ShufflerFaultCode, StatusReply, UpdateActivate, UpdateBegin, UpdateChunk, UpdateCommit,
    UpdateOffset, UpdateResult, UpdateState, catalogue, decode_message, encode_message,
    OpenShuffle, ShuffleOpening, shuffle_commitment,
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
    GetFirmwareInfo(), FirmwareInfo("SIM-SHOE", 7, 1, (2, 0, 1), (1, 9, 9), UpdateState.COMMITTED,
                                    UpdateResult.ROLLED_BACK, 1_048_713, 128),
    UpdateBegin(bytes(range(73))), UpdateChunk(0xFFFFFFF0, bytes(251)), UpdateCommit(), UpdateActivate(),
    UpdateOffset(73), Nak(NakCode.DECK_PRESENT),
    DeckVerified(BackColour.RED, 52, 0, frozenset(range(52)), frozenset(), bytes(range(32))),
    OpenShuffle(bytes(range(32))), ShuffleOpening(bytes(16), tuple(range(52))), Nak(NakCode.UNKNOWN_COMMITMENT),
]


def test_a_shuffle_opening_recomputes_its_commitment_and_names_each_card_once():
    """SPEC §4.2.1: SHA-256 over salt then the order; an order naming a card twice is not an opening."""
    import hashlib
    order = tuple(reversed(range(52)))
    opening = ShuffleOpening(b"s" * 16, order)
    assert opening.commitment() == hashlib.sha256(b"s" * 16 + bytes(order)).digest() == shuffle_commitment(
        b"s" * 16, order)
    assert opening.commitment() != ShuffleOpening(b"t" * 16, order).commitment()
    doubled = bytes(16) + bytes([0, 0] + list(range(2, 52)))
    with pytest.raises(MessageError):
        decode_message(ShuffleOpening.TYPE, doubled)
    with pytest.raises(MessageError):
        decode_message(DeckVerified.TYPE, bytes(17 + 31))  # a commitment is 32 bytes or none


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
    with pytest.raises(MessageError, match="unknown device state 5"):
        decode_message(StatusReply.TYPE, bytes([5, 1, 52, 0]))
    with pytest.raises(MessageError, match="unknown back colour code 9"):
        decode_message(StatusReply.TYPE, bytes([3, 9, 52, 0]))


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


@pytest.mark.parametrize("msg_type, payload", [
    (UpdateBegin.TYPE, bytes(72)),  # the header is 73 bytes
    (UpdateChunk.TYPE, bytes(4)),  # an offset and no data
    (UpdateChunk.TYPE, bytes(4 + 252)),  # more data than a chunk carries
    (UpdateOffset.TYPE, bytes(3)),
    (FirmwareInfo.TYPE, FirmwareInfo("M", 0, 0, (1, 0, 0)).encode()[:-1]),  # model cut short
    (FirmwareInfo.TYPE, bytes(4) + b"\x02" + bytes(14) + b"\x01M"),  # slot 2: there are two
    (FirmwareInfo.TYPE, bytes(11) + b"\x07" + bytes(5) + b"\x01\x01M"),  # no such update state
    (UpdateCommit.TYPE, b"\x00"),
])
def test_update_messages_refuse_payloads_that_do_not_fit(msg_type, payload):
    with pytest.raises(MessageError):
        decode_message(msg_type, payload)


def test_an_update_chunk_cannot_be_built_empty_or_too_long():
    for data in (b"", bytes(252)):
        with pytest.raises(MessageError):
            encode_message(UpdateChunk(73, data))


def test_the_spec_tables_list_every_message_and_every_nak_code():
    """protocols/SPEC.md §4 names each message with its type byte and direction, §5 each NAK code."""
    import re
    from pathlib import Path

    spec = (Path(__file__).resolve().parent.parent / "protocols" / "SPEC.md").read_text()
    rows = dict(re.findall(r"^\| 0x([0-9A-F]{2}) \| (\w+) \|", spec, re.M))
    assert {int(t, 16): name for t, name in rows.items()} == {t: c.__name__ for t, c in catalogue().items()}
    naks = dict(re.findall(r"^\| (\d+) \| ([A-Z_]+) \|", spec, re.M))
    assert {int(n): name for n, name in naks.items()} == {c.value: c.name for c in NakCode}
