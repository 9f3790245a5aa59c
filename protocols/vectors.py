"""Golden test vectors: machine-readable examples of every frame and message.

``protocols/golden_vectors.json`` is the reference a vendor writing firmware
tests against: CRC check values, whole frames, every catalogue message's
payload, and request → reply exchanges a conforming device must produce.
The codec tests and the emulator tests both replay it. Regenerate it only on
a deliberate protocol change: ``python -m protocols.vectors --write``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from importlib import resources
from typing import Any

from .cards import BackColour, Card
from .frame import crc16, encode_frame
from .messages import (
    Ack, CardDrawn, CardUnreadable, DeckDelivered, DeckInserted, DeckVerified, DeviceKind, DeviceState, Echo,
    EchoReply, GetStatus, Identify, IdentifyReply, Message, Nak, NakCode, ShoeEmpty, ShoeLoaded, Shuffle,
    ShufflerFault, ShufflerFaultCode, StatusReply, encode_message,
)

VECTORS_FILE = "golden_vectors.json"

#: Identity the emulators take when built for the golden exchanges.
GOLDEN_BOOT_ID = 0x12345678
GOLDEN_SESSION = 0x0BADCAFE


def message_to_dict(msg: Message) -> dict[str, Any]:
    """A JSON-ready description of a message: its class name and fields (enums by
    name, cards as text, card sets as sorted indices, bytes as hex)."""

    def conv(v: Any) -> Any:
        if isinstance(v, enum.Enum):
            return v.name.lower()
        if isinstance(v, Card):
            return str(v)
        if isinstance(v, (frozenset, set)):
            return sorted(v)
        if isinstance(v, bytes):
            return v.hex()
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        return v

    return {"message": type(msg).__name__, **{f.name: conv(getattr(msg, f.name)) for f in dataclasses.fields(msg)}}


def _examples() -> list[Message]:
    red = BackColour.RED
    return [
        Identify(GOLDEN_SESSION), GetStatus(), Echo(bytes(range(16))), Shuffle(),
        Ack(), *(Nak(code) for code in NakCode), EchoReply(b"ok"),
        IdentifyReply(DeviceKind.SHOE, 1, 0, (1, 0, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID),
        StatusReply(DeviceState.READY, red, 52, 0),
        DeckInserted(red), DeckDelivered(BackColour.BLUE),
        ShufflerFault(ShufflerFaultCode.JAM), ShufflerFault(ShufflerFaultCode.DOOR_OPEN),
        StatusReply(DeviceState.FAULT, red, 52, int(ShufflerFaultCode.JAM)),
        DeckVerified(red, 52, 0, frozenset(range(52))),
        DeckVerified(red, 52, 1, frozenset(range(52)) - {Card.parse("As").index}, frozenset({Card.parse("2c").index})),
        ShoeLoaded(red), CardDrawn(0, Card.parse("As"), red), CardDrawn(17, Card.parse("Td"), BackColour.BLUE),
        CardUnreadable(5, BackColour.NONE), ShoeEmpty(52),
    ]


def _wire(seq: int, msg: Message) -> str:
    return encode_frame(seq, *encode_message(msg)).hex()


def build_vectors() -> dict[str, Any]:
    """The golden vectors as a dict (what ``--write`` stores)."""
    ident = Identify(GOLDEN_SESSION)
    shoe_id = IdentifyReply(DeviceKind.SHOE, 1, 0, (1, 0, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID)
    shuf_id = IdentifyReply(DeviceKind.SHUFFLER, 1, 0, (1, 0, 0), "SHF-SIM-0001", GOLDEN_BOOT_ID)
    return {
        "protocol": "1.0",
        "crc16_ccitt_false": [
            {"data": b"123456789".hex(), "crc": f"{crc16(b'123456789'):04x}"},
            {"data": "", "crc": f"{crc16(b''):04x}"},
            {"data": "00", "crc": f"{crc16(bytes(1)):04x}"},
        ],
        "messages": [
            {"type": m.TYPE, "payload": encode_message(m)[1].hex(), "decoded": message_to_dict(m)} for m in _examples()
        ],
        "frames": [
            {"seq": seq, "wire": _wire(seq, m), "decoded": message_to_dict(m)}
            for seq, m in [(0, ident), (1, GetStatus()), (255, Echo(b"\xa5" * 4)), (7, CardDrawn(3, Card.parse("Qs"), BackColour.RED))]
        ],
        "exchanges": [
            {"name": "request before Identify is refused", "device": "any",
             "request": _wire(1, GetStatus()), "reply": _wire(1, Nak(NakCode.NOT_IDENTIFIED))},
            {"name": "identify the shoe", "device": "shoe", "request": _wire(0, ident), "reply": _wire(0, shoe_id)},
            {"name": "identify the shuffler", "device": "shuffler", "request": _wire(0, ident), "reply": _wire(0, shuf_id)},
            {"name": "status of an empty shoe", "device": "shoe",
             "request": _wire(1, GetStatus()), "reply": _wire(1, StatusReply(DeviceState.IDLE, BackColour.NONE, 0, 0))},
            {"name": "status of an empty shuffler", "device": "shuffler",
             "request": _wire(1, GetStatus()), "reply": _wire(1, StatusReply(DeviceState.IDLE, BackColour.NONE, 0, 0))},
            {"name": "a repeated SEQ is answered from the reply cache", "device": "any",
             "request": _wire(1, GetStatus()), "reply": None, "same_as_previous": True},
            {"name": "echo", "device": "any", "request": _wire(2, Echo(b"golden")), "reply": _wire(2, EchoReply(b"golden"))},
            {"name": "shuffle with no deck", "device": "shuffler",
             "request": _wire(3, Shuffle()), "reply": _wire(3, Nak(NakCode.NO_DECK))},
            {"name": "shuffle sent to a shoe", "device": "shoe",
             "request": _wire(3, Shuffle()), "reply": _wire(3, Nak(NakCode.UNKNOWN_MESSAGE))},
            {"name": "unknown request type", "device": "any",
             "request": encode_frame(4, 0x3E, b"").hex(), "reply": _wire(4, Nak(NakCode.UNKNOWN_MESSAGE))},
            {"name": "bad payload", "device": "any",
             "request": encode_frame(5, GetStatus.TYPE, b"\x00").hex(), "reply": _wire(5, Nak(NakCode.BAD_PAYLOAD))},
            {"name": "junk before the sync byte is skipped", "device": "any",
             "request": "00ff13" + _wire(6, Echo(b"j")), "reply": _wire(6, EchoReply(b"j"))},
            {"name": "a frame with a bad CRC gets no reply", "device": "any",
             "request": _wire(7, Echo(b"c"))[:-2] + "0000", "reply": None},
            {"name": "the same request with a good CRC is answered", "device": "any",
             "request": _wire(7, Echo(b"c")), "reply": _wire(7, EchoReply(b"c"))},
        ],
        # Device events after the host's Identify: the first event has device SEQ 0,
        # is sent again with the same bytes until the host ACKs that SEQ, and the
        # next event then takes SEQ 1 (SPEC §6.3).
        "events": [
            {"name": "the shuffler reports a red deck inserted", "device": "shuffler", "action": "insert red",
             "event": _wire(0, DeckInserted(BackColour.RED)), "ack": _wire(0, Ack())},
            {"name": "the shoe reports a red deck loaded", "device": "shoe", "action": "load red",
             "event": _wire(0, ShoeLoaded(BackColour.RED)), "ack": _wire(0, Ack())},
            # The deck loaded above is in index order (Card.from_index(0..51)): the
            # first card drawn is index 0, draw index 0.
            {"name": "the shoe reads the first card", "device": "shoe", "action": "draw",
             "event": _wire(1, CardDrawn(0, Card.from_index(0), BackColour.RED)), "ack": _wire(1, Ack())},
        ],
    }


def load_vectors() -> dict[str, Any]:
    """The committed golden vectors."""
    return json.loads(resources.files("protocols").joinpath(VECTORS_FILE).read_text())


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    if sys.argv[1:] == ["--write"]:
        from pathlib import Path

        Path(__file__).with_name(VECTORS_FILE).write_text(json.dumps(build_vectors(), indent=1) + "\n")
    else:
        print(json.dumps(build_vectors(), indent=1))
