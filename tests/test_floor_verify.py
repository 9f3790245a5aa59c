"""The Ed25519 check the pit view and the floor run on every table message (table.keys.verify_signature):
libsodium's when PyNaCl is installed, and it accepts and refuses exactly what the cryptography package does."""

from __future__ import annotations

import nacl.signing
from cryptography.exceptions import InvalidSignature

from table.keys import generate, verify_signature


def _openssl(public, signature: bytes, data: bytes) -> bool:
    try:
        public.verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


def test_libsodium_and_openssl_agree_on_genuine_changed_and_foreign_signatures():
    key, other = generate(), generate()
    raw = key.public.public_bytes_raw()
    assert nacl.signing.VerifyKey(raw)  # the test extra brings PyNaCl: the libsodium path is the one tested
    cases = []
    for n in range(40):
        data = f"threecard.signed/2\npit1-tcp-{n:03d}\nevents\n{{\"seq\":{n}}}".encode()
        sig = key.sign(data)
        flipped = bytes([sig[0] ^ 1]) + sig[1:]
        cases += [(key.public, sig, data, True), (key.public, flipped, data, False),
                  (key.public, sig, data + b" ", False), (other.public, sig, data, False),
                  (key.public, sig[:63], data, False), (key.public, b"", data, False),
                  (key.public, sig[32:] + sig[:32], data, False)]
    for public, sig, data, genuine in cases:
        assert verify_signature(public, sig, data) is genuine
        assert _openssl(public, sig, data) is genuine
