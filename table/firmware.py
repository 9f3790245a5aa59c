"""Signed firmware updates at the table: the host's policy, the update, and what the journal approves.

N.J.A.C. 13:69E-1.28 requires that a device run only the approved software
(units identical to the approved prototype, hardware and software). The
shuffler in CVE-2025-34500 took unsigned firmware over its USB port, with a
key shared by every unit, and had no secure boot (CVE-2025-34502): what this
module is built not to be. Here:

* **Before a byte is sent** (:func:`verify_image`, :func:`check_device`,
  :func:`round_in_progress`) the host refuses an image that is malformed,
  unsigned, signed by a key the table's config does not list
  (``[firmware] vendor_keys``), whose body does not match its header's
  SHA-256, whose Ed25519 signature does not verify, that is for another
  device kind or model, whose security version is below the device's own (a
  downgrade), and any update while a round is in progress (the journal's last
  round entry is not ``closed``: open, dealing, or held) or while the device
  holds a deck (its ``StatusReply``). Each refusal is a :class:`FirmwareRefused`
  with a :class:`Refusal` reason.
* **The device refuses again on its own** (SPEC §9.4): the host may be
  compromised. Its NAK is a :class:`FirmwareRefused` with ``by="device"``.
* **Every attempt is journaled**, refused or done, with the image's SHA-256
  and who ran it (the supervisor, validated by :func:`table.roles.person_name`,
  and the operating-system user): entries of kind ``firmware``, steps
  ``refused``, ``started`` (before the first byte), ``failed`` and ``finished``.
* **Approval.** A ``finished`` entry with outcome ``updated`` approves the
  version it installed *for that device's serial*: at the controller's next
  handshake a version matching no ``firmware_allowlist`` pattern is accepted
  when the journal's latest successful update of that serial installed it, from
  an image signed by a key the config still lists (:func:`link_config_for`,
  docs/firmware.md "Approval").

A journal has one writer: ``tablectl firmware update`` runs with the
controller stopped (the controller also holds the device ports exclusively).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

import structlog

from firmware_bridge.errors import HandshakeError, LinkError, LinkLost, LinkTimeout, RequestRefused, TransportError
from firmware_bridge.factory import transport_for
from firmware_bridge.link import DeviceIdentity, Link, LinkConfig
from firmware_bridge.update import FirmwareTransfer, Progress, UpdateProtocolError, await_device
from protocols.firmware_image import FirmwareImage, ImageError, ImageHeader
from protocols.messages import (
    MAX_CHUNK_DATA,
    DeviceState,
    FirmwareInfo,
    GetStatus,
    NakCode,
    StatusReply,
    UpdateResult,
)

from .errors import TableError
from .keys import KeyFileError, verify_signature
from .roles import person_name

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from .config import TableConfig
    from .journal import Journal

log = structlog.get_logger("table.firmware")

#: the journal entry kind of firmware updates
JOURNAL_KIND = "firmware"


class Refusal(str, enum.Enum):
    """Why an update was refused (docs/firmware.md has the table)."""

    MALFORMED = "malformed"
    UNSIGNED = "unsigned"
    FOREIGN_KEY = "foreign_key"
    BAD_HASH = "bad_hash"
    BAD_SIGNATURE = "bad_signature"
    WRONG_KIND = "wrong_kind"
    WRONG_MODEL = "wrong_model"
    DOWNGRADE = "downgrade"
    ROUND_IN_PROGRESS = "round_in_progress"
    DECK_PRESENT = "deck_present"
    NOT_SUPPORTED = "not_supported"
    DEVICE_REFUSED = "device_refused"


#: the device's NAK codes (SPEC §9.4) and the refusal each one is
_NAK_REFUSAL = {
    NakCode.BAD_IMAGE: Refusal.MALFORMED, NakCode.WRONG_KIND: Refusal.WRONG_KIND,
    NakCode.WRONG_MODEL: Refusal.WRONG_MODEL, NakCode.DOWNGRADE: Refusal.DOWNGRADE,
    NakCode.UNKNOWN_KEY: Refusal.FOREIGN_KEY, NakCode.UNSIGNED: Refusal.UNSIGNED,
    NakCode.BAD_SIGNATURE: Refusal.BAD_SIGNATURE, NakCode.BAD_HASH: Refusal.BAD_HASH,
    NakCode.DECK_PRESENT: Refusal.DECK_PRESENT, NakCode.NOT_SUPPORTED: Refusal.NOT_SUPPORTED,
    NakCode.UNKNOWN_MESSAGE: Refusal.NOT_SUPPORTED,
}


class FirmwareRefused(TableError):
    """An update refused before the new image could run. ``reason``: a :class:`Refusal`;
    ``by``: ``"host"`` (nothing of the image was sent) or ``"device"`` (its NAK, ``code``);
    ``detail``: what exactly. The device keeps running the image it ran."""

    def __init__(self, reason: Refusal, detail: str, *, by: str = "host", code: NakCode | None = None) -> None:
        who = "refused by the device" if by == "device" else "refused"
        super().__init__(f"firmware update {who} ({reason.value}): {detail}")
        self.reason = reason
        self.detail = detail
        self.by = by
        self.code = code


class FirmwareUpdateFailed(TableError):
    """The update could not be carried through (the device unreachable, the link lost
    for longer than it waits, no answer after the activation). ``outcome``: the
    journaled outcome (``"unreachable"``, ``"interrupted"``, ``"no_answer"``...);
    the message says which image the device runs, or what it will boot."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class UpdateOutcome:
    """A finished update. ``outcome``: ``"updated"`` (the new image runs and is
    confirmed) or ``"rolled_back"`` (it did not reach a handshake; the previous one
    runs again). ``slot``: ``"A"`` or ``"B"``, the slot running; ``resumed_from``: the
    bytes the device already held when this run began (header included)."""

    outcome: str
    serial: str
    kind: str
    firmware_before: str
    firmware_after: str
    slot: str
    image_sha256: str
    resumed_from: int
    journal_seq: int

    @property
    def updated(self) -> bool:
        return self.outcome == "updated"

    def summary(self) -> str:
        """One line for people."""
        if self.updated:
            return (f"{self.kind} {self.serial}: updated {self.firmware_before} -> {self.firmware_after}, "
                    f"running slot {self.slot}")
        return (f"{self.kind} {self.serial}: the new image did not reach a handshake and was rolled back; "
                f"the device runs {self.firmware_after} from slot {self.slot}")


# -- the host's checks ------------------------------------------------------------------------


def verify_image(data: bytes, accepted_keys: "Mapping[str, Ed25519PublicKey]") -> FirmwareImage:
    """Parse ``data`` (an image file's bytes) and check it against ``accepted_keys`` (key id
    -> vendor public key, the config's ``[firmware] vendor_keys``), in this order:
    malformed, unsigned, a key id the table does not accept, the body against its
    SHA-256, the Ed25519 signature over header and body. Returns the image; raises
    :class:`FirmwareRefused`. (SPEC §9.1; N.J.A.C. 13:69E-1.28: only approved software.)"""
    try:
        image = FirmwareImage.decode(data)
    except ImageError as exc:
        raise FirmwareRefused(Refusal.MALFORMED, str(exc)) from None
    if image.signature is None:
        raise FirmwareRefused(Refusal.UNSIGNED, "the image carries no signature (CVE-2025-34500: never run "
                                                "unsigned firmware)")
    kid = image.header.key_id.hex()
    key = accepted_keys.get(kid)
    if key is None:
        accepted = ", ".join(sorted(accepted_keys)) or "none: [firmware] vendor_keys is empty"
        raise FirmwareRefused(Refusal.FOREIGN_KEY, f"signed with key {kid}, which this table does not accept "
                                                   f"(accepted: {accepted})")
    if not image.body_matches:
        raise FirmwareRefused(Refusal.BAD_HASH, "the body does not match the SHA-256 in its header: the image "
                                                "is corrupt or was altered")
    if not verify_signature(key, image.signature, image.signed_data):
        raise FirmwareRefused(Refusal.BAD_SIGNATURE, f"the signature does not verify with key {kid}: the header "
                                                     "or body was altered after signing, or another key signed it")
    return image


def check_device(header: ImageHeader, identity: DeviceIdentity, info: FirmwareInfo, status: StatusReply) -> None:
    """Refuse (:class:`FirmwareRefused`) an image for another device kind or model, a
    security version below the device's (a downgrade, the anti-rollback rule), or a
    device that holds a deck (a shoe with cards, a shuffler with a deck inside: the
    cards are in custody and the device must not restart under them)."""
    if header.kind != identity.kind:
        raise FirmwareRefused(Refusal.WRONG_KIND, f"the image is for a {header.kind}; the device at this address "
                                                  f"is a {identity.kind} ({identity.serial_number})")
    if header.model != info.model:
        raise FirmwareRefused(Refusal.WRONG_MODEL, f"the image is for model {header.model!r}; the device is a "
                                                   f"{info.model!r}")
    if header.security_version < info.security_version:
        raise FirmwareRefused(Refusal.DOWNGRADE, f"the image's security version {header.security_version} is below "
                                                 f"the device's {info.security_version}: a downgrade")
    if status.cards > 0 or status.state in (DeviceState.HAS_DECK, DeviceState.SHUFFLING, DeviceState.READY):
        where = "in the shoe" if identity.kind.name == "SHOE" else "in the shuffler"
        raise FirmwareRefused(Refusal.DECK_PRESENT, f"a deck is {where} ({status.cards} cards): take it out and "
                                                    "account for it first")


def round_in_progress(journal: "Journal") -> str | None:
    """What makes a round in progress per the journal (its last ``round`` entry is not
    ``closed``: open, dealt, settled, or held for a supervisor), or None."""
    last = journal.last("round")
    if last is None or last.body.get("step") == "closed":
        return None
    return f"round {last.round_id} is {last.body.get('step')} (journal entry {last.seq})"


# -- approval at the controller's handshake ------------------------------------------------


def approved_firmware(journal: "Journal", kind: str, accepted_key_ids: "set[str] | frozenset[str]"
                      ) -> tuple[tuple[str, str], ...]:
    """``(serial, version)`` pairs the journal approves for devices of ``kind``
    (``"shuffler"``/``"shoe"``): for each serial, the version installed by its latest
    ``finished`` firmware entry with outcome ``updated``, if the image's key is still
    in ``accepted_key_ids``. A roll-back approves nothing (the previous version runs
    again, approved as it was before); a key removed from the config withdraws the
    approvals of what it signed."""
    latest: dict[str, tuple[str, str]] = {}
    for e in journal.entries(JOURNAL_KIND):
        b = e.body
        dev = b.get("device") or {}
        if b.get("step") == "finished" and b.get("outcome") == "updated" and dev.get("kind") == kind:
            latest[str(dev.get("serial"))] = (str(b.get("firmware_after")), str((b.get("image") or {}).get("key_id")))
    return tuple((serial, version) for serial, (version, kid) in sorted(latest.items()) if kid in accepted_key_ids)


def link_config_for(config: "TableConfig", device: str, journal: "Journal | None") -> LinkConfig:
    """The link config the controller opens ``device`` (``"shuffler"``/``"shoe"``) with: the
    config's ``[link]`` and ``[devices.NAME]`` (pinned serial, ``firmware_allowlist``),
    and, when an allowlist is set, the journal's approvals (:func:`approved_firmware`)
    checked with it at every handshake. Vendor keys that no longer load approve nothing."""
    lc = config.link.link_config(getattr(config.devices, device))
    if journal is None or not lc.firmware_allowlist:
        return lc
    try:
        key_ids = frozenset(config.vendor_keys())
    except KeyFileError as exc:
        log.warning("firmware_approvals_skipped", reason=str(exc))
        key_ids = frozenset()
    return dataclasses.replace(lc, firmware_approved=approved_firmware(journal, device, key_ids))


# -- the update ----------------------------------------------------------------------------------


def _image_fields(h: ImageHeader) -> dict[str, Any]:
    return {"kind": str(h.kind), "model": h.model, "version": h.version_text,
            "security_version": h.security_version, "body_size": h.body_size, "key_id": h.key_id.hex()}


def _device_fields(url: Any, ident: DeviceIdentity | None, info: FirmwareInfo | None) -> dict[str, Any]:
    d: dict[str, Any] = {"url": str(url)}
    if ident is not None:
        d.update(kind=str(ident.kind), serial=ident.serial_number, firmware=ident.firmware_version)
    if info is not None:
        d.update(model=info.model, security_version=info.security_version, slot=info.slot_name)
    return d


def update_firmware(
    url: Any,
    data: bytes,
    *,
    accepted_keys: "Mapping[str, Ed25519PublicKey]",
    journal: "Journal",
    supervisor: str,
    link_config: LinkConfig | None = None,
    usb_backend: Any = None,
    progress: Progress | None = None,
    activation_timeout_s: float = 60.0,
    chunk_size: int = MAX_CHUNK_DATA,
    on_phase: Callable[[str], None] | None = None,
) -> UpdateOutcome:
    """Update the device at ``url`` (a pyserial URL or ``usb://`` selector) with the image
    file ``data``; journal the attempt in ``journal`` whatever happens.

    ``accepted_keys``: key id -> vendor public key (``TableConfig.vendor_keys()``);
    ``supervisor``: who runs it (``person_name``); ``link_config``: timing (its
    allowlist is not applied: an update must reach a device whatever it runs, and the
    new version is checked by the controller's next handshake); ``progress(held,
    total)``: after each acknowledged chunk; ``activation_timeout_s``: how long the
    device may take to come back after the activation; ``on_phase(name)``: called
    with ``"checks"``, ``"transfer"``, ``"commit"``, ``"activate"``, ``"verify"``.

    Returns an :class:`UpdateOutcome` (updated, or rolled back by the device). Raises
    :class:`FirmwareRefused` (by the host before sending, or by the device),
    :class:`FirmwareUpdateFailed`, ``roles.InvalidArgument`` (a bad supervisor name)
    and ``journal.JournalError`` (nothing is sent unless the attempt is journaled first).
    """
    u = _Update(url, data, journal, person_name(supervisor, "supervisor"), on_phase)
    cfg = dataclasses.replace(link_config or LinkConfig(), firmware_allowlist=(), firmware_approved=())
    u.phase("checks")
    try:
        image = verify_image(data, accepted_keys)
    except FirmwareRefused as exc:
        raise u.refuse(exc) from None
    u.header = header = image.header
    busy = round_in_progress(journal)
    if busy is not None:
        raise u.refuse(FirmwareRefused(Refusal.ROUND_IN_PROGRESS, f"{busy}: update between rounds, with the "
                                                                  "round closed"))
    link = Link(transport_for(url, usb_backend=usb_backend, read_timeout_ms=cfg.read_timeout_ms),
                name="firmware", config=cfg)
    try:
        transfer, before = u.reach(link, chunk_size)
        u.send(transfer, progress, before)
    finally:
        link.close()
    assert u.ident is not None and u.info is not None
    return _verify_after_activation(url, header, u.ident, u.info, before, u.sha, transfer.resumed_from or 0, cfg,
                                    usb_backend, activation_timeout_s, u.record, u.phase)


class _Update:
    """One update attempt's record: every step journaled with the image's SHA-256, who
    ran it, and what the device said it was (docs/firmware.md)."""

    def __init__(self, url: Any, data: bytes, journal: "Journal", supervisor: str,
                 on_phase: Callable[[str], None] | None) -> None:
        self.url = url
        self.data = data
        self.journal = journal
        self.sha = hashlib.sha256(data).hexdigest()
        self.phase: Callable[[str], None] = on_phase or (lambda name: None)
        self.who = {"supervisor": supervisor, "os_user": f"uid:{os.getuid()}"}
        self.header: ImageHeader | None = None
        self.ident: DeviceIdentity | None = None
        self.info: FirmwareInfo | None = None

    def record(self, step: str, **body: Any) -> int:
        """Journal one step of the attempt; returns its seq."""
        entry = self.journal.append(JOURNAL_KIND, step=step, image_sha256=self.sha, **self.who, **body)
        return int(getattr(entry, "seq", 0) or 0)

    def refuse(self, exc: FirmwareRefused) -> FirmwareRefused:
        """Journal a refusal (the host's or the device's) and return it, to be raised."""
        self.record("refused", by=exc.by, reason=exc.reason.value, detail=exc.detail,
                    nak=exc.code.name.lower() if exc.code is not None else None,
                    device=_device_fields(self.url, self.ident, self.info),
                    image=_image_fields(self.header) if self.header else None)
        log.warning("firmware_refused", by=exc.by, reason=exc.reason.value, detail=exc.detail, image_sha256=self.sha)
        return exc

    def reach(self, link: Link, chunk_size: int) -> tuple[FirmwareTransfer, str]:
        """Open the link, identify the device, read its firmware info and status, and check
        the image against it (SPEC §9.4). Returns the transfer and the version it runs."""
        header = self.header
        assert header is not None
        try:
            link.open()
            self.ident = link.handshake(None)  # type: ignore[arg-type]  # the kind is checked against the image below
            transfer = FirmwareTransfer(link, chunk_size=chunk_size)
            try:
                self.info = transfer.info()
            except RequestRefused as exc:
                raise self.refuse(FirmwareRefused(Refusal.NOT_SUPPORTED, f"the device answers GetFirmwareInfo with "
                                                                         f"{exc.code}: it takes no signed updates")
                                  ) from None
            status = link.request(GetStatus(), StatusReply)
            assert isinstance(status, StatusReply)
        except (TransportError, LinkError, HandshakeError) as exc:
            self.record("failed", outcome="unreachable", detail=str(exc),
                        device=_device_fields(self.url, self.ident, self.info), image=_image_fields(header))
            raise FirmwareUpdateFailed("unreachable", f"cannot reach the device at {self.url}: {exc}; nothing was "
                                                      "sent") from None
        ident, info = self.ident, self.info
        try:
            check_device(header, ident, info, status)
        except FirmwareRefused as exc:
            raise self.refuse(exc) from None
        before = ident.firmware_version
        self.record("started", device=_device_fields(self.url, ident, info), image=_image_fields(header),
                    firmware_before=before, device_held=info.received)
        log.info("firmware_update_started", serial=ident.serial_number, firmware_before=before,
                 image_version=header.version_text, image_sha256=self.sha)
        return transfer, before

    def send(self, transfer: FirmwareTransfer, progress: Progress | None, before: str) -> None:
        """Transfer, commit and activate; a NAK is a refusal, a lost link an interruption
        the same update resumes."""
        info = self.info
        assert info is not None
        step = "transfer"
        try:
            self.phase(step)
            transfer.send(self.data, progress)
            step = "commit"
            self.phase(step)
            transfer.commit()
            step = "activate"
            self.phase(step)
            try:
                transfer.activate()
            except (LinkLost, LinkTimeout) as exc:
                # The Ack may be lost with the device already restarting: what it runs now says.
                log.warning("activate_unanswered", error=str(exc))
        except RequestRefused as exc:
            code = exc.code if isinstance(exc.code, NakCode) else None
            reason = _NAK_REFUSAL.get(code, Refusal.DEVICE_REFUSED) if code is not None else Refusal.DEVICE_REFUSED
            raise self.refuse(FirmwareRefused(reason, f"at the {step}: NAK {code.name if code else exc.code}; the "
                                                      f"device still runs {before} from slot {info.slot_name}",
                                              by="device", code=code)) from None
        except (LinkError, UpdateProtocolError) as exc:
            held = (transfer.resumed_from or 0) + transfer.bytes_sent
            self.record("failed", outcome="interrupted", during=step, detail=str(exc),
                        device=_device_fields(self.url, self.ident, info), image=_image_fields(self.header),
                        firmware_before=before)
            raise FirmwareUpdateFailed("interrupted", (
                f"the {step} was interrupted ({exc}); the device still runs {before} from slot {info.slot_name}: "
                f"the new image is not active (about {held} of {len(self.data)} bytes were sent). Run the same "
                f"update again: the device resumes from the bytes it holds")) from None


def _verify_after_activation(url: Any, header: ImageHeader, ident: DeviceIdentity, info: FirmwareInfo,
                             before: str, sha: str, resumed_from: int, cfg: LinkConfig, usb_backend: Any,
                             timeout_s: float, record: Callable[..., int], phase: Callable[[str], None]
                             ) -> UpdateOutcome:
    """Handshake again on a new link (SPEC §9.3) and say which image the device runs."""
    phase("verify")
    try:
        link, new = await_device(url, deadline_s=timeout_s, config=cfg, usb_backend=usb_backend, name="firmware",
                                 expected_kind=ident.kind)
    except (LinkError, HandshakeError) as exc:
        record("failed", outcome="no_answer", detail=str(exc), device=_device_fields(url, ident, info),
               image=_image_fields(header), firmware_before=before)
        raise FirmwareUpdateFailed("no_answer", (
            f"the device did not come back within {timeout_s:g} s of the activation ({exc}). Until the new image "
            f"reaches a handshake it is on trial: the next reset boots {before} again")) from None
    try:
        after = FirmwareTransfer(link).info()
    except (LinkError, RequestRefused) as exc:
        link.close()
        record("failed", outcome="no_answer", detail=str(exc), device=_device_fields(url, new, None),
               image=_image_fields(header), firmware_before=before)
        raise FirmwareUpdateFailed("no_answer", f"the device came back but did not report its slots: {exc}") from None
    link.close()
    if new.serial_number != ident.serial_number:
        record("failed", outcome="other_device", detail=f"{new.serial_number} answered, not {ident.serial_number}",
               device=_device_fields(url, new, after), image=_image_fields(header), firmware_before=before)
        raise FirmwareUpdateFailed("other_device", f"another device ({new.serial_number}) answered at {url} after the "
                                                   f"activation of {ident.serial_number}: a tamper event")
    if after.last_result is UpdateResult.UPDATED and new.firmware_version == header.version_text:
        outcome = "updated"
    elif after.last_result is UpdateResult.ROLLED_BACK:
        outcome = "rolled_back"
    else:
        record("failed", outcome="unexpected", detail=f"runs {new.firmware_version}, last result "
                                                      f"{after.last_result.name.lower()}",
               device=_device_fields(url, new, after), image=_image_fields(header), firmware_before=before)
        raise FirmwareUpdateFailed("unexpected", f"after the activation the device runs {new.firmware_version} from "
                                                 f"slot {after.slot_name} ({after.last_result.name.lower()}), "
                                                 f"not the image {header.version_text}")
    seq = record("finished", outcome=outcome, device=_device_fields(url, new, after), image=_image_fields(header),
                 firmware_before=before, firmware_after=new.firmware_version)
    log.info("firmware_update_finished", outcome=outcome, serial=new.serial_number, firmware=new.firmware_version,
             slot=after.slot_name)
    return UpdateOutcome(outcome, new.serial_number, str(new.kind), before, new.firmware_version, after.slot_name,
                         sha, resumed_from, seq)
