"""The emulated devices' bootloader: A/B slots, signed images, boot once, roll back (SPEC §9).

It refuses on its own what the host should have refused (the host may be
compromised; CVE-2025-34500 is a shuffler that took unsigned firmware over
USB): it holds its own vendor public keys and security version, checks an
image's header when a transfer begins and verifies the whole image (hash,
Ed25519 signature, kind, model, security version) after the commit, before
it may ever run. Verification uses ``cryptography`` directly, never the
host's ``table/keys.py`` (docs/architecture.md "The layer rule": one bug cannot hide on both
ends).

What survives a power loss is the *flash*: both slots, the image being
received and how much of it arrived, the committed flag, the boot record
(which slot is confirmed, which one is on trial and whether it has booted)
and the security version (a monotonic counter, OTP on real parts). RAM is
only the transfer session of this boot. The boot record follows MCUboot's
"test" swap: an activated image is booted **once**; it becomes the
confirmed image when it reaches a successful handshake (it answers an
``Identify``); a reset before that (a power cut, or the watchdog biting an
image that hangs) boots the previous slot again and records a roll-back.
The security version rises to the new image's only on confirmation, so a
rolled-back device still accepts what it accepted before.

Pure state: no I/O, no threads. :class:`simulators.firmware.FirmwareEmulator`
calls it under its lock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from protocols.firmware_image import HEADER_SIZE, SIGNATURE_SIZE, ImageError, ImageHeader, key_id_of
from protocols.messages import (
    MAX_CHUNK_DATA,
    Ack,
    DeviceKind,
    FirmwareInfo,
    GetFirmwareInfo,
    Message,
    Nak,
    NakCode,
    UpdateActivate,
    UpdateBegin,
    UpdateChunk,
    UpdateCommit,
    UpdateOffset,
    UpdateResult,
    UpdateState,
)

#: default capacity of one slot (bytes): a whole signed image must fit
DEFAULT_SLOT_SIZE = 4 * 1024 * 1024


def raw_public_key(key: Ed25519PublicKey | bytes) -> bytes:
    """The 32 raw bytes of an Ed25519 public key (given as an object or as the raw bytes)."""
    if isinstance(key, Ed25519PublicKey):
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raw = bytes(key)
    Ed25519PublicKey.from_public_bytes(raw)  # raises ValueError for anything but 32 good bytes
    return raw


@dataclass
class Slot:
    """One flash slot: the ``version`` and ``security_version`` of the image in it
    (``None``: erased), and the image's bytes (``None`` for the factory image)."""

    version: tuple[int, int, int] | None = None
    security_version: int = 0
    image: bytes | None = None


@dataclass
class UpdateFaults:
    """Faults of the update path. ``fail_boot``: an activated new image hangs at boot
    (it never answers, so it never reaches a handshake) until the watchdog resets the
    device, which then boots the previous slot (a roll-back)."""

    fail_boot: bool = False


@dataclass
class _Staging:
    """The transfer in flash: the header it began with, the bytes held (header first)
    and whether the whole image was verified (committed)."""

    header: bytes
    data: bytearray = field(default_factory=bytearray)
    committed: bool = False


class Bootloader:
    """A/B-slot bootloader state for one device (SPEC §9).

    ``kind`` and ``model``: what this device is; ``firmware``: the factory image's
    version in slot A; ``security_version``: the device's anti-rollback counter;
    ``vendor_keys``: the vendor public keys it accepts (Ed25519 objects or 32 raw
    bytes; none: it refuses every update UNKNOWN_KEY); ``slot_size``: bytes per
    slot; ``max_chunk``: most data bytes per chunk it takes (1..251).
    Raises ``ValueError`` for a bad key or size.
    """

    def __init__(self, kind: DeviceKind, *, model: str, firmware: tuple[int, int, int] = (1, 0, 0),
                 security_version: int = 0, vendor_keys: Iterable[Ed25519PublicKey | bytes] = (),
                 slot_size: int = DEFAULT_SLOT_SIZE, max_chunk: int = MAX_CHUNK_DATA) -> None:
        if not 1 <= max_chunk <= MAX_CHUNK_DATA:
            raise ValueError(f"max_chunk must be 1..{MAX_CHUNK_DATA}")
        if slot_size < HEADER_SIZE + 1 + SIGNATURE_SIZE:
            raise ValueError("a slot must hold at least a one-byte image")
        self.kind = kind
        self.model = model
        self.slot_size = slot_size
        self.max_chunk = max_chunk
        self.keys: dict[bytes, Ed25519PublicKey] = {}
        for key in vendor_keys:
            raw = raw_public_key(key)
            self.keys[key_id_of(raw)] = Ed25519PublicKey.from_public_bytes(raw)
        self.faults = UpdateFaults()
        # -- flash: survives power loss ----------------------------------------------
        self.slots = [Slot(tuple(firmware), security_version), Slot()]  # type: ignore[arg-type]
        self.confirmed = 0  # the slot that boots when nothing is on trial
        self.security_version = security_version
        self.trial: int | None = None  # a slot activated but not yet confirmed
        self.trial_booted = False  # ... and it has been booted once already
        self.last_result = UpdateResult.NONE
        self.staging: _Staging | None = None
        # -- RAM: lost at every reset ------------------------------------------------
        self.running = 0
        self.session = False  # an UpdateBegin was accepted in this boot
        self.bytes_written = 0  # image bytes written to flash (a counter for tests and benches)
        self.rollbacks = 0

    # -- boot ----------------------------------------------------------------------------

    @property
    def firmware(self) -> tuple[int, int, int]:
        """The version of the image running."""
        version = self.slots[self.running].version
        assert version is not None
        return version

    @property
    def on_trial(self) -> bool:
        """True while the running image was activated but has not reached a handshake."""
        return self.trial is not None and self.running == self.trial

    def boot(self) -> bool:
        """Power-up: choose the slot to run. Returns True when it is a new image's one
        trial boot. A trial that already booted once and was not confirmed is
        abandoned: the confirmed slot runs again and the roll-back is recorded."""
        self.session = False
        if self.trial is not None:
            if not self.trial_booted:
                self.trial_booted = True  # written before the jump: a reset now reverts
                self.running = self.trial
                return True
            self.trial, self.trial_booted = None, False
            self.last_result = UpdateResult.ROLLED_BACK
            self.rollbacks += 1
        self.running = self.confirmed
        return False

    def confirm(self) -> bool:
        """The running trial image reached a handshake: it becomes the confirmed image and
        the security version rises to its own. Returns True if it was on trial."""
        if not self.on_trial:
            return False
        slot = self.slots[self.running]
        self.confirmed = self.running
        self.trial, self.trial_booted = None, False
        self.security_version = max(self.security_version, slot.security_version)
        self.last_result = UpdateResult.UPDATED
        return True

    # -- requests ------------------------------------------------------------------------

    def info(self) -> FirmwareInfo:
        """This device's :class:`FirmwareInfo` (SPEC §9.2)."""
        other = self.slots[1 - self.running].version or (0, 0, 0)
        st = self.staging
        state = UpdateState.IDLE if st is None else UpdateState.COMMITTED if st.committed else UpdateState.RECEIVING
        return FirmwareInfo(self.model, self.security_version, self.running, self.firmware, other, state,
                            self.last_result, len(st.data) if st else 0, self.max_chunk)

    def handle(self, msg: Message, *, holds_cards: bool) -> tuple[Message, bool]:
        """Answer one update request (one of ``UPDATE_REQUESTS``). ``holds_cards``: the
        device holds a deck now (a shuffler with a deck inside, a shoe with cards).
        Returns ``(reply, restart)``; ``restart`` asks the firmware to reset into the
        activated image once the reply is sent."""
        if isinstance(msg, GetFirmwareInfo):
            return self.info(), False
        if isinstance(msg, UpdateBegin):
            return self._begin(msg.header, holds_cards), False
        if isinstance(msg, UpdateChunk):
            return self._chunk(msg.offset, msg.data), False
        if isinstance(msg, UpdateCommit):
            return self._commit(), False
        if isinstance(msg, UpdateActivate):
            return self._activate(holds_cards)
        return Nak(NakCode.UNKNOWN_MESSAGE), False

    @property
    def _inactive(self) -> int:
        return 1 - self.running

    def _check_header(self, raw: bytes) -> tuple[ImageHeader | None, NakCode | None]:
        """The header's own checks, in SPEC §9.4 order (unauthenticated here: the
        signature is verified at the commit)."""
        try:
            header = ImageHeader.decode(raw)
        except ImageError:
            return None, NakCode.BAD_IMAGE
        if header.kind != self.kind:
            return header, NakCode.WRONG_KIND
        if header.model != self.model:
            return header, NakCode.WRONG_MODEL
        if header.security_version < self.security_version:
            return header, NakCode.DOWNGRADE  # anti-rollback (MCUboot's security counter)
        if header.key_id not in self.keys:
            return header, NakCode.UNKNOWN_KEY
        if header.image_size > self.slot_size:
            return header, NakCode.TOO_LARGE
        return header, None

    def _begin(self, raw: bytes, holds_cards: bool) -> Message:
        if holds_cards:
            return Nak(NakCode.DECK_PRESENT)
        _, refusal = self._check_header(raw)
        if refusal is not None:
            return Nak(refusal)
        st = self.staging
        if st is None or st.header != raw:
            # A new image: erase the inactive slot (the previous image goes) and stage there.
            self.slots[self._inactive] = Slot()
            self.staging = st = _Staging(bytes(raw), bytearray(raw))
        self.session = True
        return UpdateOffset(len(st.data))

    def _chunk(self, offset: int, data: bytes) -> Message:
        st = self.staging
        if not self.session or st is None:
            return Nak(NakCode.NO_UPDATE)
        header = ImageHeader.decode(st.header)
        held, total = len(st.data), header.image_size
        if offset > held or offset + len(data) > total:
            return Nak(NakCode.BAD_OFFSET)
        new = data[held - offset:]  # bytes already held (a resend) are not written again
        if new:
            st.data += new
            st.committed = False
            self.bytes_written += len(new)
        return UpdateOffset(len(st.data))

    def _commit(self) -> Message:
        """Verify the whole image in the inactive slot (SPEC §9.4, in this order). An
        image that fails is erased: the next begin starts a new transfer."""
        st = self.staging
        if not self.session or st is None:
            return Nak(NakCode.NO_UPDATE)
        header, refusal = self._check_header(st.header)
        assert header is not None  # the header was checked when the transfer began
        body_end = HEADER_SIZE + header.body_size
        if len(st.data) < body_end or body_end < len(st.data) < header.image_size:
            return Nak(NakCode.INCOMPLETE)  # the host may still send the rest
        data = bytes(st.data)
        if len(data) == body_end:
            refusal = NakCode.UNSIGNED
        elif refusal is None and hashlib.sha256(data[HEADER_SIZE:body_end]).digest() != header.body_sha256:
            refusal = NakCode.BAD_HASH
        elif refusal is None:
            try:
                self.keys[header.key_id].verify(data[body_end:], data[:body_end])
            except InvalidSignature:
                refusal = NakCode.BAD_SIGNATURE
        if refusal is not None:  # (a header refusal here: the security version rose since the begin)
            self.staging, self.session = None, False
            return Nak(refusal)
        st.committed = True
        self.slots[self._inactive] = Slot(header.version, header.security_version, data)
        return Ack()

    def _activate(self, holds_cards: bool) -> tuple[Message, bool]:
        st = self.staging
        if st is None or not st.committed:
            return Nak(NakCode.NOT_COMMITTED), False
        if holds_cards:
            return Nak(NakCode.DECK_PRESENT), False
        self.trial, self.trial_booted = self._inactive, False
        self.staging = None
        return Ack(), True
