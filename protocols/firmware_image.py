"""Signed firmware image codec (protocols/SPEC.md §9.1). Pure: no I/O, no cryptography.

An image is three parts, back to back::

    +----------------------+----------------+---------------------+
    | header (73 bytes)    | body (size)    | signature (64)      |
    +----------------------+----------------+---------------------+

The header names what the image is for and what it is (device kind, model,
firmware version, security version), how long the body is and its SHA-256,
and which vendor key signed it (a key id). The signature is Ed25519
(RFC 8032) by the vendor's signing key over header and body together. This
module builds and parses the bytes and checks the body against its hash; it
neither signs nor verifies signatures: the host does that with
``table/keys.py`` and the device emulators with ``cryptography`` directly
(one bug cannot hide on both ends, docs/architecture.md "The layer rule").

Every parse failure raises :class:`ImageError` (a
:class:`~protocols.errors.ProtocolError`) and nothing else.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from .errors import ProtocolError
from .messages import UPDATE_HEADER_SIZE, DeviceKind

#: first four bytes of every image
MAGIC = b"TCFW"
#: the header layout this codec reads and writes
FORMAT_VERSION = 1
MODEL_SIZE = 16
KEY_ID_SIZE = 8
#: magic, format, kind, model, version (3), security version, body size, body SHA-256, key id
_HEADER = struct.Struct(f">4sBB{MODEL_SIZE}s3BII32s{KEY_ID_SIZE}s")
HEADER_SIZE = _HEADER.size  # 73
assert HEADER_SIZE == UPDATE_HEADER_SIZE, "UpdateBegin carries exactly one image header"
SIGNATURE_SIZE = 64
#: the largest body this codec accepts (a bound on memory; a device's slot may be smaller)
MAX_BODY_SIZE = 16 * 1024 * 1024
MAX_IMAGE_SIZE = HEADER_SIZE + MAX_BODY_SIZE + SIGNATURE_SIZE


class ImageError(ProtocolError):
    """Bytes that are not a firmware image of this format: wrong magic or format
    version, an unknown device kind, a model that is not 1..16 printable ASCII
    characters, a length that does not match the header's body size."""


def key_id_of(raw_public_key: bytes) -> bytes:
    """The 8-byte key id of a raw 32-byte Ed25519 public key: the first 8 bytes of its
    SHA-256 (the 16 hex digits ``table.keys.key_id`` prints)."""
    if len(raw_public_key) != 32:
        raise ImageError(f"an Ed25519 public key is 32 bytes, got {len(raw_public_key)}")
    return hashlib.sha256(raw_public_key).digest()[:KEY_ID_SIZE]


def format_version(version: tuple[int, int, int]) -> str:
    """``(1, 4, 2)`` -> ``"1.4.2"`` (the form ``IdentifyReply.firmware_version`` takes)."""
    return ".".join(map(str, version))


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.4.2"`` -> ``(1, 4, 2)``; each part 0..255. Raises :class:`ImageError`."""
    parts = text.strip().split(".")
    try:
        nums = tuple(int(p) for p in parts)
    except ValueError:
        nums = ()
    if len(nums) != 3 or not all(0 <= n <= 255 for n in nums) or not all(p.isdigit() for p in parts):
        raise ImageError(f"{text!r} is not a firmware version MAJOR.MINOR.PATCH with each part 0..255")
    return nums  # the length check above narrows it to three ints


@dataclass(frozen=True)
class ImageHeader:
    """The 73-byte header (SPEC §9.1). ``kind``: the device kind the image is for;
    ``model``: the device model (1..16 printable ASCII characters); ``version``:
    the firmware version it reports in ``IdentifyReply`` once running;
    ``security_version``: the monotonic anti-rollback counter (u32; a device
    refuses an image whose security version is below its own); ``body_size``
    (bytes, 1..:data:`MAX_BODY_SIZE`) and ``body_sha256`` (32 bytes) of the body;
    ``key_id``: 8 bytes naming the vendor key that signed it (:func:`key_id_of`)."""

    kind: DeviceKind
    model: str
    version: tuple[int, int, int]
    security_version: int
    body_size: int
    body_sha256: bytes
    key_id: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.kind, DeviceKind):
            raise ImageError(f"device kind {self.kind!r} is not a shuffler or a shoe")
        if not (1 <= len(self.model) <= MODEL_SIZE and self.model.isascii() and self.model.isprintable()):
            raise ImageError(f"model {self.model!r} must be 1..{MODEL_SIZE} printable ASCII characters")
        if len(self.version) != 3 or not all(isinstance(v, int) and 0 <= v <= 255 for v in self.version):
            raise ImageError(f"version {self.version!r} must be three integers 0..255")
        if not 0 <= self.security_version <= 0xFFFFFFFF:
            raise ImageError(f"security version {self.security_version} must fit in 32 bits")
        if not 1 <= self.body_size <= MAX_BODY_SIZE:
            raise ImageError(f"body size {self.body_size} must be 1..{MAX_BODY_SIZE} bytes")
        if len(self.body_sha256) != 32:
            raise ImageError("the body's SHA-256 is 32 bytes")
        if len(self.key_id) != KEY_ID_SIZE:
            raise ImageError(f"a key id is {KEY_ID_SIZE} bytes")

    @property
    def version_text(self) -> str:
        """The firmware version as ``"major.minor.patch"``."""
        return format_version(self.version)

    @property
    def image_size(self) -> int:
        """Bytes of the whole signed image: header, body and signature."""
        return HEADER_SIZE + self.body_size + SIGNATURE_SIZE

    def encode(self) -> bytes:
        """The header's 73 bytes."""
        return _HEADER.pack(MAGIC, FORMAT_VERSION, int(self.kind), self.model.encode("ascii").ljust(MODEL_SIZE, b"\0"),
                            *self.version, self.security_version, self.body_size, self.body_sha256, self.key_id)

    @classmethod
    def decode(cls, data: bytes) -> "ImageHeader":
        """Parse exactly :data:`HEADER_SIZE` bytes. Raises :class:`ImageError`."""
        if len(data) != HEADER_SIZE:
            raise ImageError(f"an image header is {HEADER_SIZE} bytes, got {len(data)}")
        magic, fmt, kind, model, va, vb, vc, sv, size, digest, kid = _HEADER.unpack(bytes(data))
        if magic != MAGIC:
            raise ImageError(f"not a firmware image: magic {magic!r}, expected {MAGIC!r}")
        if fmt != FORMAT_VERSION:
            raise ImageError(f"image format version {fmt}; this codec reads version {FORMAT_VERSION}")
        try:
            dkind = DeviceKind(kind)
        except ValueError:
            raise ImageError(f"unknown device kind {kind} in the image header") from None
        name = model.rstrip(b"\0")
        if b"\0" in name:
            raise ImageError("the model field has a NUL inside the name")
        try:
            text = name.decode("ascii")
        except UnicodeDecodeError:
            raise ImageError("the model is not ASCII") from None
        return cls(dkind, text, (va, vb, vc), sv, size, digest, kid)


@dataclass(frozen=True)
class FirmwareImage:
    """A parsed image: ``header``, ``body`` and ``signature`` (64 bytes, or None for an
    unsigned image, which no host or device accepts but which tools can show)."""

    header: ImageHeader
    body: bytes
    signature: bytes | None

    @property
    def signed_data(self) -> bytes:
        """What the signature covers: the header's bytes, then the body."""
        return self.header.encode() + self.body

    @property
    def body_matches(self) -> bool:
        """True when the body's SHA-256 is the one its header gives."""
        return hashlib.sha256(self.body).digest() == self.header.body_sha256

    def encode(self) -> bytes:
        """The image file's bytes (without a signature when unsigned)."""
        return self.signed_data + (self.signature or b"")

    @classmethod
    def decode(cls, data: bytes) -> "FirmwareImage":
        """Parse a whole image file. Its length must be header + body size (+ 64 for
        the signature). Raises :class:`ImageError`."""
        data = bytes(data)
        if len(data) < HEADER_SIZE:
            raise ImageError(f"{len(data)} bytes is shorter than an image header ({HEADER_SIZE} bytes)")
        header = ImageHeader.decode(data[:HEADER_SIZE])
        end = HEADER_SIZE + header.body_size
        if len(data) == end:
            return cls(header, data[HEADER_SIZE:end], None)
        if len(data) != end + SIGNATURE_SIZE:
            raise ImageError(f"the image is {len(data)} bytes; its header says {end + SIGNATURE_SIZE} "
                             f"({HEADER_SIZE} header + {header.body_size} body + {SIGNATURE_SIZE} signature)")
        return cls(header, data[HEADER_SIZE:end], data[end:])


def build_header(kind: DeviceKind, model: str, version: tuple[int, int, int], security_version: int, body: bytes,
                 key_id: bytes) -> ImageHeader:
    """The header for ``body`` (its size and SHA-256 filled in). Raises :class:`ImageError`."""
    return ImageHeader(kind, model, tuple(version), security_version, len(body),  # type: ignore[arg-type]
                       hashlib.sha256(body).digest(), key_id)
