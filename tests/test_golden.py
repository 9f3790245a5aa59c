"""Golden vectors (protocols/golden_vectors.json): the codec and both emulators must match them byte for byte."""

from __future__ import annotations

import binascii
import random

import pytest
import serial

from protocols.frame import FrameParser, crc16, decode_frame, encode_frame
from protocols.messages import Ack, decode_message
from protocols.vectors import GOLDEN_BOOT_ID, build_vectors, load_vectors, message_to_dict
from simulators.devices import ShoeEmulator, ShufflerEmulator
from simulators.pty_port import PtyPort


V = load_vectors()


def test_committed_vectors_match_the_codec():
    """A codec change that alters any byte must come with regenerated vectors."""
    assert V == build_vectors()


@pytest.mark.parametrize("v", V["crc16_ccitt_false"], ids=lambda v: v["data"] or "empty")
def test_crc(v):
    assert f"{crc16(bytes.fromhex(v['data'])):04x}" == v["crc"]
    assert binascii.crc_hqx(bytes.fromhex(v["data"]), 0xFFFF) == int(v["crc"], 16)


@pytest.mark.parametrize("v", V["messages"], ids=lambda v: v["decoded"]["message"])
def test_message_payloads(v):
    msg = decode_message(v["type"], bytes.fromhex(v["payload"]))
    assert message_to_dict(msg) == v["decoded"]
    assert msg.encode().hex() == v["payload"]


@pytest.mark.parametrize("v", V["frames"], ids=lambda v: v["decoded"]["message"])
def test_frames(v):
    wire = bytes.fromhex(v["wire"])
    frame = decode_frame(wire)
    assert frame.seq == v["seq"]
    assert message_to_dict(decode_message(frame.type, frame.payload)) == v["decoded"]
    assert list(FrameParser().feed(b"\x00\x13" + wire)) == [frame]


@pytest.fixture
def raw_device(emulators):
    yield emulators[0], emulators[2]


@pytest.fixture(params=["shoe", "shuffler"])
def emulators(request):
    """An emulator with the golden boot_id on a pty, and a raw pyserial port to it."""
    port = PtyPort()
    if request.param == "shoe":
        emu = ShoeEmulator(port, boot_id=GOLDEN_BOOT_ID)
    else:
        emu = ShufflerEmulator(port, rng=random.Random(0), boot_id=GOLDEN_BOOT_ID)
    emu.start()
    ser = serial.serial_for_url(port.path, timeout=2, exclusive=True)
    yield request.param, emu, ser
    ser.close()
    emu.stop()


def _read_frame(ser) -> bytes:
    parser = FrameParser()
    buf = b""
    while True:
        chunk = ser.read(1)
        assert chunk, "no reply within 2 s"
        buf += chunk
        frames = list(parser.feed(chunk))
        if frames:
            return frames[0].encode()


def test_emulators_answer_the_golden_exchanges(raw_device):
    kind, ser = raw_device
    previous = None
    for ex in V["exchanges"]:
        if ex["device"] not in ("any", kind):
            continue
        if ex.get("same_as_previous"):
            request, reply = previous
        else:
            request, reply = ex["request"], ex["reply"]
        ser.write(bytes.fromhex(request))
        if reply is None:  # no answer at all: nothing arrives within the device's gap
            ser.timeout = 0.3
            assert ser.read(1) == b"", ex["name"]
            ser.timeout = 2
        else:
            assert _read_frame(ser).hex() == reply, ex["name"]
        previous = (request, reply)


def test_emulators_send_the_golden_events_and_resend_until_acked(emulators):
    """SPEC §6.3 from the device side: after Identify each event goes out with the
    next device SEQ, again with the same bytes until ACKed."""
    from protocols.cards import BackColour
    from protocols.vectors import GOLDEN_SESSION
    from protocols.messages import Identify
    from protocols.frame import encode_frame
    from simulators.devices import new_deck

    kind, emu, ser = emulators
    ser.write(encode_frame(0, Identify.TYPE, Identify(GOLDEN_SESSION).encode()))
    _read_frame(ser)  # the IdentifyReply
    for ev in [v for v in V["events"] if v["device"] == kind]:
        verb, *arg = ev["action"].split()
        if verb == "insert":
            emu.insert(new_deck(BackColour.parse(arg[0])))
        elif verb == "load":
            emu.load(new_deck(BackColour.parse(arg[0])))
        else:
            emu.draw()
        first = _read_frame(ser)
        if ev["event"] is not None:
            assert first.hex() == ev["event"], ev["name"]
        else:
            assert first[3] == ev["event_type"] and first[2] == ev["event_seq"], ev["name"]
        assert _read_frame(ser) == first  # not ACKed: the same bytes again
        ser.write(bytes.fromhex(ev["ack"]))
        ser.reset_input_buffer()


# -- signed firmware update (SPEC §9.6) ----------------------------------------------------

FW = V["firmware_update"]


@pytest.fixture
def golden_shoe():
    """The golden shoe: the vectors' vendor key, model, security version, boot id; a raw port."""
    port = PtyPort()
    emu = ShoeEmulator(port, boot_id=FW["device"]["boot_id"], model=FW["device"]["model"],
                       security_version=FW["device"]["security_version"],
                       vendor_keys=[bytes.fromhex(FW["vendor_public_key"])]).start()
    ser = serial.serial_for_url(port.path, timeout=2, exclusive=True)
    yield emu, ser
    ser.close()
    emu.stop()


def test_the_emulated_shoe_answers_the_golden_update_exchanges_byte_for_byte(golden_shoe):
    """Every refusal, a power cut mid-transfer (resumed from flash), the activation and
    a power cut during the trial boot (rolled back), in the order given."""
    from protocols.cards import BackColour
    from simulators.devices import new_deck

    emu, ser = golden_shoe
    for ex in FW["exchanges"]:
        action = ex.get("action")
        if action == "load red":
            emu.load(new_deck(BackColour.RED))
        elif action == "unload":
            emu.unload()
        elif action == "power cycle":
            emu.reboot()
        else:
            assert action is None, action
        ser.reset_input_buffer()  # a loaded deck's ShoeLoaded event is not part of the exchange
        ser.write(bytes.fromhex(ex["request"]))
        got = _read_frame(ser)
        while got[3] < 0x80:  # an event (ShoeLoaded): ack it and read on
            ser.write(encode_frame(got[2], Ack.TYPE))
            got = _read_frame(ser)
        assert got.hex() == ex["reply"], ex["name"]


def test_the_golden_images_decode_and_their_headers_match_the_listed_fields():
    from protocols.firmware_image import FirmwareImage

    for h in FW["headers"]:
        image = FirmwareImage.decode(bytes.fromhex(FW["images"][h["image"]]))
        assert image.header.encode().hex() == h["header"]
        assert image.header.version_text == h["decoded"]["version"]
        assert image.header.key_id.hex() == h["decoded"]["key_id"]
    assert FirmwareImage.decode(bytes.fromhex(FW["images"]["unsigned"])).signature is None


def test_the_golden_good_image_verifies_with_the_published_vendor_key_and_not_the_foreign_one():
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from protocols.firmware_image import FirmwareImage

    image = FirmwareImage.decode(bytes.fromhex(FW["images"]["good"]))
    Ed25519PublicKey.from_public_bytes(bytes.fromhex(FW["vendor_public_key"])).verify(image.signature,
                                                                                     image.signed_data)
    with pytest.raises(InvalidSignature):
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(FW["foreign_public_key"])).verify(image.signature,
                                                                                          image.signed_data)
