"""Golden test vectors: machine-readable examples of every frame and message.

``protocols/golden_vectors.json`` is the reference a vendor writing firmware
tests against: CRC check values, whole frames, every catalogue message's
payload, and request → reply exchanges a conforming device must produce,
among them a whole signed firmware update (``firmware_update``, SPEC §9.6).
The codec tests and the emulator tests both replay it. Regenerate it only on
a deliberate protocol change: ``python -m protocols.vectors --write``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from importlib import resources
from typing import TYPE_CHECKING, Any

from .cards import BackColour, Card
from .firmware_image import HEADER_SIZE, FirmwareImage, ImageHeader, build_header, key_id_of
from .frame import crc16, encode_frame
from .messages import (
    PROTOCOL_MINOR, OpenShuffle, ShuffleOpening, shuffle_commitment,
    Ack, CardDrawn, CardUnreadable, DeckDelivered, DeckInserted, DeckVerified, DeviceKind, DeviceState, Echo,
    EchoReply, FirmwareInfo, GetFirmwareInfo, GetStatus, Identify, IdentifyReply, Message, Nak, NakCode, ShoeEmpty,
    ShoeLoaded, Shuffle, ShufflerFault, ShufflerFaultCode, StatusReply, UpdateActivate, UpdateBegin, UpdateChunk,
    UpdateCommit, UpdateOffset, UpdateResult, UpdateState, encode_message,
)

if TYPE_CHECKING:  # imported where used: the wire protocol does not need cryptography to load
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

VECTORS_FILE = "golden_vectors.json"

#: Identity the emulators take when built for the golden exchanges.
GOLDEN_BOOT_ID = 0x12345678
GOLDEN_SESSION = 0x0BADCAFE

#: Seeds of the golden firmware vectors' Ed25519 keys (SPEC §9.6). Published test keys:
#: never provision a shipped device with them.
GOLDEN_VENDOR_SEED = b"threecard golden vendor key, test only".ljust(32, b".")[:32]
GOLDEN_FOREIGN_SEED = b"threecard golden FOREIGN key, test".ljust(32, b".")[:32]
#: The golden shoe's bootloader: its model and security version (firmware 1.0.0 in slot A).
GOLDEN_MODEL = "SIM-SHOE"
GOLDEN_SECURITY_VERSION = 1

#: The golden shuffle commitment (SPEC §4.2.1): a published salt and an order (the
#: deck in reverse index order, As first), what a vendor checks its SHA-256 against.
GOLDEN_SALT = bytes(range(0xA0, 0xB0))
GOLDEN_ORDER = tuple(range(51, -1, -1))


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
        Ack(), *(Nak(code) for code in NakCode if code <= NakCode.NOT_IDENTIFIED), EchoReply(b"ok"),
        IdentifyReply(DeviceKind.SHOE, 1, 0, (1, 0, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID),
        StatusReply(DeviceState.READY, red, 52, 0),
        DeckInserted(red), DeckDelivered(BackColour.BLUE),
        ShufflerFault(ShufflerFaultCode.JAM), ShufflerFault(ShufflerFaultCode.DOOR_OPEN),
        StatusReply(DeviceState.FAULT, red, 52, int(ShufflerFaultCode.JAM)),
        DeckVerified(red, 52, 0, frozenset(range(52))),
        DeckVerified(red, 52, 1, frozenset(range(52)) - {Card.parse("As").index}, frozenset({Card.parse("2c").index})),
        ShoeLoaded(red), CardDrawn(0, Card.parse("As"), red), CardDrawn(17, Card.parse("Td"), BackColour.BLUE),
        CardUnreadable(5, BackColour.NONE), ShoeEmpty(52),
        # firmware update (SPEC §9), after every message of protocol 1.0's first catalogue
        *(Nak(code) for code in NakCode if code > NakCode.NOT_IDENTIFIED),
        GetFirmwareInfo(), FirmwareInfo(GOLDEN_MODEL, GOLDEN_SECURITY_VERSION, 0, (1, 0, 0)),
        FirmwareInfo(GOLDEN_MODEL, 2, 1, (1, 1, 0), (1, 0, 0), UpdateState.RECEIVING, UpdateResult.UPDATED, 173, 200),
        UpdateBegin(_golden_images()["good"][:HEADER_SIZE]), UpdateChunk(73, bytes(range(16))),
        UpdateCommit(), UpdateActivate(), UpdateOffset(173),
        # the shuffle commitment (SPEC §4.2.1, protocol 1.1)
        DeckVerified(red, 52, 0, frozenset(range(52)), frozenset(), shuffle_commitment(GOLDEN_SALT, GOLDEN_ORDER)),
        OpenShuffle(shuffle_commitment(GOLDEN_SALT, GOLDEN_ORDER)), ShuffleOpening(GOLDEN_SALT, GOLDEN_ORDER),
    ]


def _keys() -> tuple[Ed25519PrivateKey, Ed25519PrivateKey]:
    """The golden vendor and foreign signing keys (deterministic, from their seeds)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (Ed25519PrivateKey.from_private_bytes(GOLDEN_VENDOR_SEED),
            Ed25519PrivateKey.from_private_bytes(GOLDEN_FOREIGN_SEED))


def _raw_public(private: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _golden_images() -> dict[str, bytes]:
    """The images of the golden update exchanges, each as its file's bytes. Ed25519
    signatures are deterministic (RFC 8032), so these are the same on every run."""
    vendor, foreign = _keys()
    vid, fid = key_id_of(_raw_public(vendor)), key_id_of(_raw_public(foreign))
    body, body2 = bytes(range(100)), bytes(range(100, 200))
    shoe = DeviceKind.SHOE

    def signed(header: ImageHeader, payload: bytes, key: Ed25519PrivateKey = vendor) -> bytes:
        data = header.encode() + payload
        return data + key.sign(data)

    good_h = build_header(shoe, GOLDEN_MODEL, (1, 1, 0), 2, body, vid)
    good = signed(good_h, body)
    flipped_header = bytearray(good)
    flipped_header[24] ^= 0x01  # the version's patch byte: 1.1.0 -> 1.1.1, not what was signed
    flipped_body = bytearray(good)
    flipped_body[HEADER_SIZE + 10] ^= 0x01
    bad_magic = b"XXFW" + good[4:]
    large = ImageHeader(shoe, GOLDEN_MODEL, (1, 1, 0), 2, 8 * 1024 * 1024, bytes(32), vid)  # 8 MiB: the slot holds 4
    return {
        "good": good,
        "unsigned": good[: HEADER_SIZE + len(body)],
        "flipped_header": bytes(flipped_header),
        "flipped_body": bytes(flipped_body),
        "wrong_kind": signed(build_header(DeviceKind.SHUFFLER, "SIM-SHUFFLER", (1, 1, 0), 2, body, vid), body),
        "wrong_model": signed(build_header(shoe, "OTHER-SHOE", (1, 1, 0), 2, body, vid), body),
        "downgrade": signed(build_header(shoe, GOLDEN_MODEL, (1, 1, 0), 0, body, vid), body),
        "foreign_key": signed(build_header(shoe, GOLDEN_MODEL, (1, 1, 0), 2, body, fid), body, foreign),
        "bad_magic": bad_magic,
        "too_large": large.encode(),
        "next": signed(build_header(shoe, GOLDEN_MODEL, (1, 2, 0), 2, body2, vid), body2),
        "older_after_update": signed(build_header(shoe, GOLDEN_MODEL, (1, 0, 5), 1, body2, vid), body2),
    }


# long: one golden exchange script, step after step as the device sees it; split, it would not read as one
def _update_exchanges() -> list[dict[str, Any]]:
    """A signed update of the golden shoe from power-up, every refusal, a power cut
    mid-transfer, activation, and a power cut during the trial boot (a roll-back)."""
    im = _golden_images()
    good, nxt = im["good"], im["next"]
    hdr = {name: data[:HEADER_SIZE] for name, data in im.items()}
    out: list[dict[str, Any]] = []
    seq = [0]

    def ex(name: str, msg: Message | None, reply: Message, *, action: str | None = None, wire: str | None = None,
           same_seq: bool = False) -> None:
        if not same_seq and not isinstance(msg, Identify):
            seq[0] = seq[0] % 255 + 1
        s = 0 if isinstance(msg, Identify) else seq[0]
        item: dict[str, Any] = {"name": name}
        if action:
            item["action"] = action
        if wire is None:
            if msg is None:
                raise ValueError(f"{name}: an exchange needs its request message or its wire text")
            wire = _wire(s, msg)
        item["request"] = wire
        item["reply"] = _wire(s, reply)
        out.append(item)

    def begin(name: str, which: str, reply: Message, **kw: Any) -> None:
        ex(name, UpdateBegin(hdr[which]), reply, **kw)

    def chunk(name: str, image: bytes, start: int, end: int, reply: Message) -> None:
        ex(name, UpdateChunk(start, image[start:end]), reply)

    ident = Identify(GOLDEN_SESSION)
    ex("identify the shoe", ident, IdentifyReply(DeviceKind.SHOE, 1, PROTOCOL_MINOR, (1, 0, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID))
    ex("firmware info at power-up", GetFirmwareInfo(), FirmwareInfo(GOLDEN_MODEL, GOLDEN_SECURITY_VERSION, 0, (1, 0, 0)))
    ex("a chunk before any begin", UpdateChunk(73, b"x"), Nak(NakCode.NO_UPDATE))
    ex("a commit before any begin", UpdateCommit(), Nak(NakCode.NO_UPDATE))
    ex("activate with nothing committed", UpdateActivate(), Nak(NakCode.NOT_COMMITTED))
    begin("not an image (bad magic)", "bad_magic", Nak(NakCode.BAD_IMAGE))
    begin("an image for the other device kind", "wrong_kind", Nak(NakCode.WRONG_KIND))
    begin("an image for another model", "wrong_model", Nak(NakCode.WRONG_MODEL))
    begin("a security version below the device's", "downgrade", Nak(NakCode.DOWNGRADE))
    begin("signed by a key the device does not hold", "foreign_key", Nak(NakCode.UNKNOWN_KEY))
    begin("larger than a slot", "too_large", Nak(NakCode.TOO_LARGE))
    begin("an update while a deck is in the shoe", "good", Nak(NakCode.DECK_PRESENT), action="load red")
    begin("begin the good image (the stub taken out)", "good", UpdateOffset(73), action="unload")
    chunk("its body", good, 73, 173, UpdateOffset(173))
    ex("commit with no signature sent: unsigned", UpdateCommit(), Nak(NakCode.UNSIGNED))
    chunk("a refused commit erased the transfer", good, 173, 237, Nak(NakCode.NO_UPDATE))
    f = im["flipped_header"]
    begin("begin an image whose header was altered after signing", "flipped_header", UpdateOffset(73))
    chunk("its body", f, 73, 173, UpdateOffset(173))
    chunk("its signature", f, 173, 237, UpdateOffset(237))
    ex("commit: the signature does not cover this header", UpdateCommit(), Nak(NakCode.BAD_SIGNATURE))
    f = im["flipped_body"]
    begin("begin the good header again: a new transfer", "good", UpdateOffset(73))
    chunk("a body with one bit flipped", f, 73, 173, UpdateOffset(173))
    chunk("the signature", f, 173, 237, UpdateOffset(237))
    ex("commit: the body does not match the header's SHA-256", UpdateCommit(), Nak(NakCode.BAD_HASH))
    begin("begin the good image", "good", UpdateOffset(73))
    ex("a chunk past the bytes held", UpdateChunk(200, good[200:210]), Nak(NakCode.BAD_OFFSET))
    chunk("the body", good, 73, 173, UpdateOffset(173))
    chunk("the first 10 bytes of the signature", good, 173, 183, UpdateOffset(183))
    ex("commit before the last byte: incomplete", UpdateCommit(), Nak(NakCode.INCOMPLETE))
    ex("after a power cut the device is not identified", GetStatus(), Nak(NakCode.NOT_IDENTIFIED),
       action="power cycle")
    ex("identify after the power cut: the old image, a new boot id", ident,
       IdentifyReply(DeviceKind.SHOE, 1, PROTOCOL_MINOR, (1, 0, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID + 1))
    chunk("a chunk without a begin in this boot", good, 183, 237, Nak(NakCode.NO_UPDATE))
    begin("begin the same image: the device resumes from flash", "good", UpdateOffset(183))
    chunk("a chunk overlapping what is held: only the new bytes are written", good, 173, 237, UpdateOffset(237))
    ex("commit: hash, signature, kind, model and security version verified", UpdateCommit(), Ack())
    ex("firmware info: committed, the new image in slot B", GetFirmwareInfo(),
       FirmwareInfo(GOLDEN_MODEL, GOLDEN_SECURITY_VERSION, 0, (1, 0, 0), (1, 1, 0), UpdateState.COMMITTED,
                    UpdateResult.NONE, 237))
    ex("activate while a deck is in the shoe", UpdateActivate(), Nak(NakCode.DECK_PRESENT), action="load red")
    ex("activate: the device restarts into slot B once", UpdateActivate(), Ack(), action="unload")
    ex("the restarted device is not identified", GetStatus(), Nak(NakCode.NOT_IDENTIFIED))
    ex("identify: the new image reaches a handshake, which confirms it", ident,
       IdentifyReply(DeviceKind.SHOE, 1, PROTOCOL_MINOR, (1, 1, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID + 2))
    ex("firmware info: updated, security version raised to the image's", GetFirmwareInfo(),
       FirmwareInfo(GOLDEN_MODEL, 2, 1, (1, 1, 0), (1, 0, 0), UpdateState.IDLE, UpdateResult.UPDATED))
    begin("an image the device took before is now a downgrade", "older_after_update", Nak(NakCode.DOWNGRADE))
    begin("begin the next image", "next", UpdateOffset(73))
    chunk("its body", nxt, 73, 173, UpdateOffset(173))
    chunk("its signature", nxt, 173, 237, UpdateOffset(237))
    ex("commit it", UpdateCommit(), Ack())
    ex("activate it", UpdateActivate(), Ack())
    ex("a power cut before its first handshake", GetStatus(), Nak(NakCode.NOT_IDENTIFIED), action="power cycle")
    ex("identify: the device rolled back to the confirmed image", ident,
       IdentifyReply(DeviceKind.SHOE, 1, PROTOCOL_MINOR, (1, 1, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID + 4))
    ex("firmware info: rolled back, the security version unchanged", GetFirmwareInfo(),
       FirmwareInfo(GOLDEN_MODEL, 2, 1, (1, 1, 0), (1, 2, 0), UpdateState.IDLE, UpdateResult.ROLLED_BACK))
    return out


def _firmware_update_vectors() -> dict[str, Any]:
    vendor, foreign = _keys()
    images = _golden_images()
    headers = []
    for name in ("good", "wrong_kind", "downgrade", "foreign_key"):
        h = FirmwareImage.decode(images[name]).header
        headers.append({"image": name, "header": images[name][:HEADER_SIZE].hex(), "decoded": {
            "kind": str(h.kind), "model": h.model, "version": h.version_text, "security_version": h.security_version,
            "body_size": h.body_size, "body_sha256": h.body_sha256.hex(), "key_id": h.key_id.hex()}})
    return {
        "vendor_public_key": _raw_public(vendor).hex(),
        "vendor_key_id": key_id_of(_raw_public(vendor)).hex(),
        "foreign_public_key": _raw_public(foreign).hex(),
        "device": {"kind": "shoe", "serial": "SHOE-SIM-0001", "model": GOLDEN_MODEL, "firmware": "1.0.0",
                   "security_version": GOLDEN_SECURITY_VERSION, "boot_id": GOLDEN_BOOT_ID,
                   "slot_size": 4 * 1024 * 1024, "max_chunk": 251},
        "images": {name: data.hex() for name, data in images.items()},
        "headers": headers,
        "exchanges": _update_exchanges(),
    }


def _wire(seq: int, msg: Message) -> str:
    return encode_frame(seq, *encode_message(msg)).hex()


def build_vectors() -> dict[str, Any]:
    """The golden vectors as a dict (what ``--write`` stores)."""
    ident = Identify(GOLDEN_SESSION)
    shoe_id = IdentifyReply(DeviceKind.SHOE, 1, PROTOCOL_MINOR, (1, 0, 0), "SHOE-SIM-0001", GOLDEN_BOOT_ID)
    shuf_id = IdentifyReply(DeviceKind.SHUFFLER, 1, PROTOCOL_MINOR, (1, 0, 0), "SHF-SIM-0001", GOLDEN_BOOT_ID)
    golden_commit = shuffle_commitment(GOLDEN_SALT, GOLDEN_ORDER)
    return {
        "protocol": f"1.{PROTOCOL_MINOR}",
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
            {"name": "no deck delivered: no commitment is opened", "device": "shuffler",
             "request": _wire(8, OpenShuffle(golden_commit)), "reply": _wire(8, Nak(NakCode.UNKNOWN_COMMITMENT))},
            {"name": "open a shuffle sent to a shoe", "device": "shoe",
             "request": _wire(8, OpenShuffle(golden_commit)), "reply": _wire(8, Nak(NakCode.UNKNOWN_MESSAGE))},
        ],
        # SPEC §4.2.1: SHA-256 over the salt then the 52 card indices, the first card dealt first.
        "shuffle_commitment": {"salt": GOLDEN_SALT.hex(), "order": list(GOLDEN_ORDER),
                               "commitment": golden_commit.hex()},
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
        # A signed firmware update of the shoe, from power-up (SPEC §9.6).
        "firmware_update": _firmware_update_vectors(),
    }


def load_vectors() -> dict[str, Any]:
    """The committed golden vectors."""
    vectors: dict[str, Any] = json.loads(resources.files("protocols").joinpath(VECTORS_FILE).read_text())
    return vectors


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    if sys.argv[1:] == ["--write"]:
        from pathlib import Path

        Path(__file__).with_name(VECTORS_FILE).write_text(json.dumps(build_vectors(), indent=1) + "\n")
    else:
        print(json.dumps(build_vectors(), indent=1))
