"""The firmware image codec (protocols/firmware_image.py, SPEC §9.1): round trips and typed errors only."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.errors import ProtocolError
from protocols.firmware_image import (
    HEADER_SIZE,
    MAX_BODY_SIZE,
    SIGNATURE_SIZE,
    FirmwareImage,
    ImageError,
    ImageHeader,
    build_header,
    key_id_of,
    parse_version,
)
from protocols.messages import DeviceKind

KID = bytes(range(8))


def test_a_header_is_73_bytes_and_round_trips():
    h = build_header(DeviceKind.SHUFFLER, "ACME-SHF-2", (2, 10, 255), 7, b"body", KID)
    raw = h.encode()
    assert len(raw) == HEADER_SIZE == 73 and raw[:4] == b"TCFW"
    assert ImageHeader.decode(raw) == h
    assert h.body_sha256 == hashlib.sha256(b"body").digest() and h.image_size == 73 + 4 + SIGNATURE_SIZE


def test_an_image_round_trips_signed_and_unsigned():
    h = build_header(DeviceKind.SHOE, "M", (1, 0, 0), 0, b"x" * 10, KID)
    signed = FirmwareImage(h, b"x" * 10, bytes(64))
    assert FirmwareImage.decode(signed.encode()) == signed and signed.body_matches
    unsigned = FirmwareImage.decode(h.encode() + b"x" * 10)
    assert unsigned.signature is None and unsigned.signed_data == signed.signed_data


def test_key_ids_are_the_first_bytes_of_the_public_keys_sha256_as_table_keys_prints_them():
    from cryptography.hazmat.primitives import serialization

    from table.keys import generate

    key = generate()
    raw = key.public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert key_id_of(raw).hex() == key.key_id


@pytest.mark.parametrize("data, match", [
    (b"TCFX" + bytes(69), "magic"),
    (b"TCFW\x02" + bytes(68), "format version 2"),
    (b"TCFW\x01\x03" + bytes(67), "device kind 3"),
    (b"short", "shorter than an image header"),
])
def test_bad_headers_raise_image_error(data, match):
    with pytest.raises(ImageError, match=match):
        FirmwareImage.decode(data)


def test_a_length_that_is_neither_signed_nor_unsigned_is_refused():
    h = build_header(DeviceKind.SHOE, "M", (1, 0, 0), 0, b"abc", KID)
    with pytest.raises(ImageError, match="header says"):
        FirmwareImage.decode(h.encode() + b"abc" + bytes(10))


@pytest.mark.parametrize("kw, match", [
    ({"model": ""}, "model"), ({"model": "x" * 17}, "model"), ({"model": "caf\u00e9"}, "model"),
    ({"version": (1, 256, 0)}, "version"), ({"security_version": -1}, "security version"),
])
def test_headers_that_cannot_be_written_raise_image_error(kw, match):
    args = {"kind": DeviceKind.SHOE, "model": "M", "version": (1, 0, 0), "security_version": 0, "body": b"b",
            "key_id": KID, **kw}
    with pytest.raises(ImageError, match=match):
        build_header(**args)


def test_an_empty_or_oversized_body_is_refused():
    with pytest.raises(ImageError):
        build_header(DeviceKind.SHOE, "M", (1, 0, 0), 0, b"", KID)
    with pytest.raises(ImageError):
        ImageHeader(DeviceKind.SHOE, "M", (1, 0, 0), 0, MAX_BODY_SIZE + 1, bytes(32), KID)


@pytest.mark.parametrize("text, ok", [("1.4.2", (1, 4, 2)), ("0.0.0", (0, 0, 0)), ("1.4", None), ("1.4.256", None),
                                      ("1.-1.0", None), ("a.b.c", None)])
def test_versions_parse_as_three_bytes(text, ok):
    if ok:
        assert parse_version(text) == ok
    else:
        with pytest.raises(ImageError):
            parse_version(text)


@given(st.binary(max_size=300))
def test_decoding_any_bytes_raises_only_protocol_errors(data):
    try:
        FirmwareImage.decode(data)
    except ProtocolError:
        pass


@given(st.binary(min_size=HEADER_SIZE - 4, max_size=HEADER_SIZE - 4))
def test_decoding_any_header_after_the_magic_raises_only_image_errors(rest):
    try:
        ImageHeader.decode(b"TCFW" + rest)
    except ImageError:
        pass
