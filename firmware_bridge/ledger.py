"""One event ledger and one identity check for every kind of device link.

The SPEC link (:class:`firmware_bridge.link.Link`) and the driver kit's link for
other wire protocols (:class:`devices.contract.EventLink`) answer the same three
questions, and answer them here, once, in the manner of python-can's ``BusABC``
(one base every bus backend shares, so a rule holds for every backend):

* **Who is this device?** :func:`check_identity`: the protocol's major version
  (SPEC links only), the kind, the firmware allowlist with the versions the
  journal approved after a signed update (``LinkConfig.firmware_approved``,
  docs/firmware.md), the pinned serial number, and across a reconnect the same
  kind, serial and firmware (a different device is a tamper event) (SPEC §6.1, §6.6).
* **Was this event delivered already?** :class:`EventLedger`: the last event SEQ
  the device sent, whether it is answered, and with what. A repeat of it (the
  device's resend) is answered again, never delivered twice; an event meeting a
  full queue is left unanswered so the device sends it again; a new boot (SPEC
  §6.5) or a restarted host's journal (``resume``) resets it (SPEC §6.3).
* **What does the table hear about the link?** :func:`post_notice`: a
  :class:`LinkNotice` in the shared event queue.

Pure bookkeeping: no I/O, no threads of its own; the caller writes the answers.
"""

from __future__ import annotations

import enum
import fnmatch
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeGuard, TypeVar

from protocols.messages import DeviceKind, Message, NakCode, catalogue

from .errors import HandshakeError, ProtocolVersionMismatch, WrongDevice


class FirmwareNotAllowed(HandshakeError):
    """The device's firmware version matches no pattern in ``firmware_allowlist`` and no
    version the journal approved for its serial (``firmware_approved``)."""


class TamperDetected(HandshakeError):
    """The device's identity differs from the pinned or first-seen one."""


@dataclass(frozen=True)
class LinkNotice:
    """A host-side happening on a link, delivered in the event queue.

    ``kind``: ``"link_down"``, ``"link_up"``, ``"device_rebooted"``,
    ``"identity_changed"`` (a tamper event) or ``"handshake_refused"``;
    ``detail`` says why.
    """

    kind: str
    detail: str = ""


@dataclass(frozen=True)
class DeviceIdentity:
    """What the device said at handshake (SPEC §6.1)."""

    kind: DeviceKind
    protocol_major: int
    protocol_minor: int
    firmware_version: str
    serial_number: str
    boot_id: int = 0


@dataclass(frozen=True)
class RefusedEvent:
    """A device event the host refused (SPEC §6.3), delivered in the event queue like an
    event, with the device's SEQ, so its consumer records the refusal before the
    host answers ``Nak(nak)`` (:meth:`Link.acknowledge`): a host killed in between
    gets the event again.

    ``type``: the frame's type byte; ``reason``: ``"undecodable"`` (a payload that
    does not fit, a type not in the catalogue) or ``"wrong_device"`` (an event this
    link's device kind does not send, ``EVENTS_BY_KIND``); ``detail``: why;
    ``payload``: the raw bytes. A card event's payload can name a card: never log
    ``detail`` or ``payload``, keep them sealed."""

    type: int
    reason: str
    nak: NakCode
    detail: str = ""
    payload: bytes = b""

    @property
    def name(self) -> str:
        """The message's name, or its type byte when it is not in the catalogue."""
        cls = catalogue().get(self.type)
        return cls.__name__ if cls else f"type 0x{self.type:02X}"


@dataclass(frozen=True)
class DeviceEvent:
    """An event from a device (a protocol message) or from the link itself (a
    :class:`LinkNotice`), in arrival order. ``source`` is the link's name and
    ``received_at`` a ``time.monotonic()`` stamp (s); ``seq`` the device's own
    event SEQ (-1 for a notice); ``boot_id`` the boot it came from."""

    source: str
    message: Message | LinkNotice | RefusedEvent
    received_at: float
    seq: int = -1
    boot_id: int = 0


def check_identity(name: str, ident: DeviceIdentity, config: Any, *, expected_kind: DeviceKind | None,
                   previous: DeviceIdentity | None, protocol_major: int | None = None, where: str = "") -> None:
    """Refuse a device this link must not talk to (SPEC §6.1, §6.6). ``config``: a
    :class:`~firmware_bridge.link.LinkConfig` (``firmware_allowlist``,
    ``firmware_approved``, ``pinned_serial``); ``previous``: the identity seen before
    this (re)connect, None at the first; ``protocol_major``: the host's major version
    of the device's protocol (None: not checked, a driver of another protocol);
    ``where``: the address, for the message.

    Raises :class:`ProtocolVersionMismatch`, :class:`WrongDevice`,
    :class:`FirmwareNotAllowed`, or :class:`TamperDetected` (the pinned serial, or
    a kind, serial or firmware changed across a reconnect)."""
    at = f" at {where}" if where else ""
    if protocol_major is not None and ident.protocol_major != protocol_major:
        raise ProtocolVersionMismatch(
            f"{name}: device {ident.serial_number} speaks protocol {ident.protocol_major}.{ident.protocol_minor}; "
            f"this host speaks {protocol_major}.x. "
            f"Update the {'host' if ident.protocol_major > protocol_major else 'device firmware'}.")
    if expected_kind is not None and ident.kind != expected_kind:
        raise WrongDevice(f"{name}: expected a {expected_kind} but the device{at} is a {ident.kind} "
                          f"(serial {ident.serial_number})")
    allow = tuple(config.firmware_allowlist)
    approved = tuple(tuple(p) for p in getattr(config, "firmware_approved", ()))
    if allow and not any(fnmatch.fnmatchcase(ident.firmware_version, p) for p in allow) and (
            ident.serial_number, ident.firmware_version) not in approved:
        raise FirmwareNotAllowed(f"{name}: firmware {ident.firmware_version} of {ident.serial_number} "
                                 f"is not in the allowlist {list(allow)}")
    pinned = config.pinned_serial
    if pinned is not None and ident.serial_number != pinned:
        raise TamperDetected(f"{name}: found serial {ident.serial_number}{at}, pinned {pinned}")
    if previous is not None and (previous.kind, previous.serial_number, previous.firmware_version) != (
            ident.kind, ident.serial_number, ident.firmware_version):
        raise TamperDetected(
            f"{name}: identity changed across a reconnect: {previous.kind} {previous.serial_number} "
            f"firmware {previous.firmware_version} -> {ident.kind} {ident.serial_number} "
            f"firmware {ident.firmware_version}")


def refusal_notice(exc: HandshakeError) -> str:
    """The notice kind a refused handshake is announced with: ``identity_changed`` for a
    different device at this address (:class:`TamperDetected`), else ``handshake_refused``."""
    return "identity_changed" if isinstance(exc, TamperDetected) else "handshake_refused"


def post_notice(events: "queue.Queue[DeviceEvent]", name: str, kind: str, detail: str = "") -> bool:
    """Put a :class:`LinkNotice` of link ``name`` in the shared queue without blocking.
    Returns False when the queue is full (the consumer is behind; the link's state says it too)."""
    try:
        events.put_nowait(DeviceEvent(name, LinkNotice(kind, detail), time.monotonic()))
    except queue.Full:
        return False
    return True


def rebooted(previous: DeviceIdentity | None, ident: DeviceIdentity) -> TypeGuard[DeviceIdentity]:
    """Whether ``ident`` is the same device after a restart (a new ``boot_id``, SPEC §6.5)."""
    return previous is not None and previous.boot_id != ident.boot_id


class Offer(enum.Enum):
    """What :meth:`EventLedger.offer` did with an event."""

    DELIVERED = "delivered"  # new: in the queue
    REPEAT = "repeat"  # the last SEQ again (the device's resend): not delivered twice
    FULL = "full"  # the queue was full: unanswered, the device sends it again


A = TypeVar("A")


class EventLedger(Generic[A]):
    """The last device event of one link: its SEQ, whether it is answered, and the
    answer (SPEC §6.3). ``ack``: the answer a journaled event gets by default (the
    wire's ``Ack``, or a driver's own form); ``ack_on_delivery``: answer as soon as
    it is queued (a bench with no journal) instead of in :meth:`acknowledge`.
    Thread-safe: the reader offers, the consumer acknowledges."""

    def __init__(self, ack: A, *, ack_on_delivery: bool) -> None:
        self.ack = ack
        self.ack_on_delivery = ack_on_delivery
        self._lock = threading.Lock()
        self.seq: int | None = None
        self.answered = True
        self.answer: A = ack

    def identified(self, previous: DeviceIdentity | None, ident: DeviceIdentity,
                   resume: Callable[[DeviceIdentity], int | None] | None) -> None:
        """A (re)connect identified ``ident``: at the first connect or after a reboot the
        device's SEQs start afresh; ``resume(ident)`` (the journal's cursor) names the last
        event already recorded for that boot, whose resend is answered, not delivered."""
        with self._lock:
            if previous is None or rebooted(previous, ident):
                self.seq, self.answered = None, True
            done = resume(ident) if resume is not None else None
            if done is not None:
                self.seq, self.answered, self.answer = done, True, self.ack

    def offer(self, seq: int, answer: A, put: Callable[[], bool]) -> tuple[Offer, A | None]:
        """The device sent event ``seq`` (answered with ``answer`` once recorded). ``put()``
        queues it and returns False when the queue is full. Returns what happened and the
        answer to write now (None: nothing to write yet)."""
        with self._lock:
            if seq == self.seq:
                return Offer.REPEAT, (self.answer if self.answered else None)
            previous = (self.seq, self.answered, self.answer)
            # delivered-but-unanswered before the consumer can see it, so an acknowledge()
            # racing the reader always finds it
            self.seq, self.answered, self.answer = seq, self.ack_on_delivery, answer
            if not put():
                self.seq, self.answered, self.answer = previous
                return Offer.FULL, None
        return Offer.DELIVERED, (answer if self.ack_on_delivery else None)

    def acknowledge(self, event: DeviceEvent, name: str) -> A | None:
        """``event`` is recorded: the answer to write now, once (None: not this link's
        last event, or answered already)."""
        with self._lock:
            due = event.source == name and event.seq == self.seq and not self.answered
            if due:
                self.answered = True
            return self.answer if due else None


__all__ = ["DeviceEvent", "DeviceIdentity", "EventLedger", "FirmwareNotAllowed", "LinkNotice", "Offer",
           "TamperDetected", "check_identity", "post_notice", "rebooted", "refusal_notice"]
