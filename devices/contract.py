"""The published driver contract: what a shuffler or shoe driver gives the controller.

A driver for a device that does not speak ``protocols/SPEC.md`` is a separate
package (``examples/ascii-shoe``); it imports this module (and ``protocols``
types) only, never ``table`` (docs/drivers.md; ``tests/test_layers.py``).
The SPEC drivers (:class:`devices.Shuffler`, :class:`devices.CardShoe`) satisfy
it unchanged: they are the built-in plugin ``spec`` (:mod:`devices.plugins`).

What the controller uses of a driver (docs/drivers.md, "The contract"):

* ``driver.link``, a :class:`DriverLink`: ``name``, ``alive``, ``state``
  (``.value``), ``identity`` (:class:`DeviceIdentity`), ``config`` (a
  :class:`LinkConfig`: ``reconnect_wait_s``, ``retransmit_max_ms``),
  ``events`` (the shared queue) and ``acknowledge(event)``;
* ``driver.status()`` -> :class:`StatusReply` (state, back colour, cards);
  ``shuffler.shuffle()``; ``driver.close()``; ``driver.capabilities``;
* events on the one shared queue, each a :class:`DeviceEvent` whose
  ``message`` is one of :data:`EVENTS_BY_ROLE` of the driver's kind, a
  :class:`LinkNotice` or a :class:`RefusedEvent`.

Failures are the exception tree of :mod:`firmware_bridge.errors`, re-exported
here (:class:`LinkError` and its children): the controller holds the round on
any of them.
"""

from __future__ import annotations

import enum
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from firmware_bridge.errors import (
    HandshakeError,
    LinkError,
    LinkLost,
    LinkTimeout,
    ProtocolVersionMismatch,
    RequestRefused,
    TransportError,
    WrongDevice,
)
from firmware_bridge.ledger import (
    EventLedger,
    FirmwareNotAllowed,
    TamperDetected,
    check_identity,
    post_notice,
    rebooted,
    refusal_notice,
)
from firmware_bridge.link import DeviceEvent, DeviceIdentity, LinkConfig, LinkNotice, LinkState, RefusedEvent
from protocols.cards import DECK_SIZE, BackColour, Card
from protocols.messages import (
    CardDrawn,
    CardUnreadable,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceKind,
    DeviceState,
    Message,
    NakCode,
    ShoeEmpty,
    ShoeLoaded,
    ShufflerFault,
    ShufflerFaultCode,
    ShuffleOpening,
    StatusReply,
)

#: The contract's version: a driver declares the one it was written against
#: (``contract_version``); the loader refuses one it does not list in
#: :data:`SUPPORTED_CONTRACT_VERSIONS`. Raised only for a change a driver must follow.
CONTRACT_VERSION = 1
SUPPORTED_CONTRACT_VERSIONS = frozenset({1})

#: The entry-point group a driver package registers its plugin in (pyproject:
#: ``[project.entry-points."threecard.devices"] NAME = "pkg.module:PLUGIN"``).
ENTRY_POINT_GROUP = "threecard.devices"

#: Link notice kinds (``LinkNotice.kind``) a driver may deliver, and what each means.
NOTICE_KINDS = {
    "link_down": "the device stopped answering or its line closed; the driver is reconnecting",
    "link_up": "the device answers again, identity checked (same serial, same boot)",
    "device_rebooted": "the device answers again after a restart (a new boot_id): events not acknowledged "
                       "before it may be lost",
    "identity_changed": "a different device answers at this address (a tamper event): the link stays down",
    "handshake_refused": "the device's identity is refused (version, kind, serial, firmware): the link stays down",
}


class DriverKind(str, enum.Enum):
    """The kinds of device a driver can be for: the table config's section
    (``[devices.shoe]``), the driver's ``link.name``, and the events it delivers
    (:data:`EVENTS_BY_ROLE`). A later kind (a betting-spot sensor) is a new member
    with its own events; the shuffler's and the shoe's contracts stay as they are
    (docs/drivers.md, "A new kind of device")."""

    SHUFFLER = "shuffler"
    SHOE = "shoe"

    @property
    def device_kind(self) -> DeviceKind:
        """The kind a device of this role reports in its identity."""
        return DeviceKind[self.name]

    def __str__(self) -> str:
        return self.value


#: The events each kind of driver delivers (SPEC §4.2, §4.3); anything else from it
#: must be delivered as a :class:`RefusedEvent` with reason ``"wrong_device"``.
EVENTS_BY_ROLE: dict[DriverKind, tuple[type[Message], ...]] = {
    DriverKind.SHUFFLER: (DeckInserted, DeckVerified, DeckDelivered, ShufflerFault),
    DriverKind.SHOE: (ShoeLoaded, CardDrawn, CardUnreadable, ShoeEmpty),
}


@dataclass(frozen=True)
class Capabilities:
    """What the device itself provides; each missing one has a documented fallback
    and a weaker custody guarantee (docs/drivers.md, "Capabilities").

    ``draw_index``: the shoe numbers each card it reads since loading (0, 1, 2 ...,
    SPEC §4.3); without it the driver numbers the reads itself
    (:class:`DrawCounter`), and a card that leaves the shoe without any read is found
    only by the count at collect, not at the next card. ``deck_count``: the shuffler
    reports the count and the cards present at verification (``DeckVerified``);
    without it a deck is not verified (the driver cannot deliver ``DeckVerified``)
    and such a shuffler is refused by the loader (:func:`check_capabilities`).
    ``resend``: the device keeps an event until the host acknowledges it and sends it
    again until then (SPEC §6.3); without it an event read but not yet journaled when
    the host dies is lost, so the driver acknowledges nothing the device could resend
    and the controller's restart finds the gap (held round) instead of the card.
    ``commitment`` (a shuffler's; SPEC §4.2.1, protocol 1.1): the shuffler commits to
    each verified deck's order (``DeckVerified.commitment``) and opens it for the deck
    it last delivered (the driver's ``open_shuffle(commitment)`` ->
    :class:`ShuffleOpening`, :class:`CommittingShuffler`); the table checks the deal
    against it before settlement. Without it nothing proves the deck dealt is the
    deck verified, in its order (a substituted "cold deck" of the right colour,
    cards added on top, a card slipped back are found only as far as back colour
    and counts find them): the table says so at start and in ``config check``.
    False by default: a driver declares it only when it implements ``open_shuffle``.
    """

    draw_index: bool = True
    deck_count: bool = True
    resend: bool = True
    commitment: bool = False

    def missing(self, kind: "DriverKind | None" = None) -> tuple[str, ...]:
        """The names of the capabilities this device lacks, e.g. ``("draw_index",)``;
        for ``kind`` SHUFFLER the shuffle ``commitment`` too (a shoe has none to give)."""
        names = ("draw_index", "deck_count", "resend") + (("commitment",) if kind is DriverKind.SHUFFLER else ())
        return tuple(n for n in names if not getattr(self, n))


FULL = Capabilities(commitment=True)
#: a SPEC device of protocol 1.0: all but the shuffle commitment (SPEC §4.2.1)
WITHOUT_COMMITMENT = Capabilities()


class DriverError(LinkError):
    """A driver plugin could not be found, loaded or opened; the message names the
    driver, its package and what to do."""


class DriverOptionError(DriverError):
    """A driver's own option is wrong: ``key`` (``devices.shoe.NAME``), the rule."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


# -- what the controller calls ---------------------------------------------------------------


@runtime_checkable
class LinkTiming(Protocol):
    """The two link timings the controller reads (``driver.link.config``): how long a
    device may stay away before the round is held (s), and the longest retransmit
    timeout (ms), which bounds how long an answer takes to reach the device."""

    reconnect_wait_s: float
    retransmit_max_ms: int


@runtime_checkable
class DriverLink(Protocol):
    """``driver.link``: the connection as the controller sees it.

    ``name``: the source named in every :class:`DeviceEvent` (``"shuffler"``,
    ``"shoe"``); ``alive``: True while the device answers; ``state``: a
    :class:`LinkState` (``.value`` is shown in the table's status); ``identity``:
    the device's :class:`DeviceIdentity` (None before the first handshake);
    ``config``: :class:`LinkTiming`; ``events``: the shared queue.
    ``acknowledge(event)``: the controller has journaled ``event``; answer the
    device now (ACK, or NAK for a :class:`RefusedEvent`). Idempotent; an event
    from another link or an older one is ignored. Optional: ``frame_errors`` (an
    ``int``), the frames or lines the driver dropped as corrupt since it was opened
    (line noise: the table's soaks count it, and a driver in a process of its own
    reports it with each event and reply, docs/drivers.md).
    """

    name: str
    identity: DeviceIdentity | None
    config: Any
    events: "queue.Queue[DeviceEvent]"

    @property
    def alive(self) -> bool: ...

    @property
    def state(self) -> LinkState: ...

    def acknowledge(self, event: DeviceEvent) -> None: ...


@runtime_checkable
class ShoeDriver(Protocol):
    """A card-recognition shoe's driver. ``status()`` -> :class:`StatusReply`
    (``state``: IDLE empty, HAS_DECK loaded; ``back_colour``; ``cards`` left); raises
    :class:`LinkError` (a timeout, the link down). Events: :data:`EVENTS_BY_ROLE`."""

    # Read-only members: the controller reads them and never sets them, so a driver may
    # have them as attributes, properties or class variables (devices.drivers.Shuffler's
    # capabilities is a property, its link a firmware_bridge Link).
    @property
    def link(self) -> DriverLink: ...

    @property
    def capabilities(self) -> Capabilities: ...

    def status(self) -> StatusReply: ...

    def close(self) -> None: ...


@runtime_checkable
class ShufflerDriver(ShoeDriver, Protocol):
    """A shuffler's driver: a shoe driver's surface plus ``shuffle()``: start
    shuffling and verifying the deck inside; ``DeckVerified`` (or ``ShufflerFault``)
    follows as an event. Raises :class:`RequestRefused` (``code`` a :class:`NakCode`:
    NO_DECK, BUSY, DOOR_OPEN, JAMMED)."""

    def shuffle(self) -> None: ...


@runtime_checkable
class CommittingShuffler(ShufflerDriver, Protocol):
    """A shuffler driver with the ``commitment`` capability (SPEC §4.2.1):
    ``open_shuffle(commitment)`` asks the device to open the 32-byte commitment its
    ``DeckVerified`` carried for the deck it last delivered, and returns the
    :class:`ShuffleOpening` (salt, order) exactly as the device gave it: the table,
    not the driver, checks it. Raises :class:`RequestRefused` (UNKNOWN_COMMITMENT,
    NOT_SUPPORTED) or another :class:`LinkError`."""

    def open_shuffle(self, commitment: bytes) -> ShuffleOpening: ...


@dataclass(frozen=True)
class OpenRequest:
    """What the table hands a plugin's ``open``.

    ``kind``: the :class:`DriverKind`; ``url``: the config's ``url`` (the driver
    says what forms it takes); ``name``: the link name to put in every event;
    ``events``: the queue shared by every device (put events and notices there,
    never block: when it is full leave the event unacknowledged); ``options``: the
    driver's own keys of ``[devices.KIND]``, checked by ``check_options``;
    ``link_config``: the table's ``[link]`` timings and the device's pinned
    ``serial_number``/``firmware_allowlist`` (a :class:`LinkConfig`);
    ``ack_on_delivery``: True when nothing journals (a bench): acknowledge as soon
    as the event is queued; False: only in ``link.acknowledge``; ``resume``: called
    with the device's identity at each handshake, returns the ``seq`` of the last
    event the journal already holds for that device in that boot (or None): a
    device's resend of it is acknowledged, not delivered again. ``extras``: keys
    only the built-in SPEC driver reads (``usb_backend``, ``frame_trace``).
    """

    kind: DriverKind
    url: str
    name: str
    events: "queue.Queue[DeviceEvent]"
    options: Mapping[str, Any] = field(default_factory=dict)
    link_config: LinkConfig = field(default_factory=LinkConfig)
    ack_on_delivery: bool = False
    resume: Callable[[DeviceIdentity], int | None] | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class DriverPlugin(Protocol):
    """What an entry point of :data:`ENTRY_POINT_GROUP` resolves to.

    ``name``: the driver's name (the config's ``driver``); ``contract_version``:
    the :data:`CONTRACT_VERSION` it was written for; ``kinds``: the
    :class:`DriverKind` s it drives; ``capabilities(kind, options)``: what the
    device provides; ``option_keys``: the driver's own keys of ``[devices.KIND]``
    (``url``, ``driver``, ``serial_number``, ``firmware_allowlist`` are the
    table's); ``check_options(kind, options)``: raises :class:`DriverOptionError`;
    ``open(request)``: a connected driver (identity known), or raises
    :class:`LinkError` (:class:`TransportError` cannot open, :class:`LinkTimeout`
    no answer, :class:`HandshakeError` refused).
    """

    name: str
    contract_version: int
    kinds: frozenset[DriverKind]
    option_keys: frozenset[str]

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Capabilities: ...

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None: ...

    def open(self, request: OpenRequest) -> ShoeDriver | ShufflerDriver: ...


def check_capabilities(kind: DriverKind, caps: Capabilities, driver: str) -> None:
    """Refuse what the table cannot make up for: a shuffler without the deck count at
    verification cannot verify a deck (COMAR 36.05.03.27 C: a deck whose count is
    not known correct is not dealt). Raises :class:`DriverError`."""
    if kind is DriverKind.SHUFFLER and not caps.deck_count:
        raise DriverError(f"driver {driver!r}: a shuffler without the deck count at verification cannot verify "
                          "a deck (docs/drivers.md, 'Capabilities'); the table does not run with it")


# -- a kit for drivers that are not the SPEC's --------------------------------------------------


class DrawCounter:
    """The fallback for a shoe without a per-card draw index: numbers the reads since
    the last ``ShoeLoaded`` itself (0, 1, 2 ...). Call :meth:`loaded` when the shoe
    reports a deck loaded, :meth:`next` for each card read or unreadable (returns its
    index, 0..255 wrapping as SPEC §4.3). A card that leaves the shoe with no read at
    all is then invisible here (docs/drivers.md, "Capabilities")."""

    def __init__(self) -> None:
        self._next = 0

    def loaded(self) -> None:
        """The shoe reported a deck loaded: the next read is numbered 0."""
        self._next = 0

    def start_at(self, drawn: int) -> None:
        """The shoe already gave ``drawn`` cards of its deck (at connect: 52 - cards left,
        from its status), so the next read is numbered ``drawn``."""
        self._next = max(0, drawn)

    def next(self) -> int:
        """The number of this read (0..255, wrapping), and one more for the next."""
        index = self._next % 256
        self._next += 1
        return index


class EventLink:
    """A :class:`DriverLink` for a driver package to build on: state, identity, the
    shared queue, notices, and acknowledgement after the journal (docs/drivers.md,
    "Acknowledgement"). Its identity check and event ledger are the SPEC link's own
    (:mod:`firmware_bridge.ledger`), so a device behind a plugin is held to the same
    rules as a built-in one.

    The driver calls :meth:`set_state`, :meth:`identified` after each handshake
    (it checks the kind, the firmware allowlist with the versions the journal
    approved after a signed update, the pinned serial and, across a reconnect, the
    same kind, serial and firmware; and sends the ``link_up``/``device_rebooted``
    notices), :meth:`deliver` for each event the device sends (with the device's own
    sequence number), and implements :meth:`send_answer` (write the ACK or NAK for
    ``seq`` to the device). A repeat of the last ``seq`` (the device's resend) is
    answered again, not delivered twice. ``resend``: False for a device that cannot
    resend (its :class:`Capabilities`): an event meeting a full queue is then waited
    in for up to ``config.reconnect_wait_s`` instead of being left for a resend that
    never comes (after that it is lost, and the table's count finds it).
    """

    def __init__(self, name: str, config: LinkConfig, events: "queue.Queue[DeviceEvent]", *,
                 expected: DriverKind, ack_on_delivery: bool = False,
                 resume: Callable[[DeviceIdentity], int | None] | None = None, resend: bool = True) -> None:
        self.name = name
        self.resend = resend
        self.config = config
        self.events = events
        self.expected = expected
        self.resume = resume
        self.identity: DeviceIdentity | None = None
        self._state = LinkState.CLOSED
        self._ledger: EventLedger[tuple[bool, NakCode | None]] = EventLedger((True, None),
                                                                              ack_on_delivery=ack_on_delivery)

    @property
    def ack_on_delivery(self) -> bool:
        """Answer each event as soon as it is queued (a bench with no journal), not in :meth:`acknowledge`."""
        return self._ledger.ack_on_delivery

    @ack_on_delivery.setter
    def ack_on_delivery(self, value: bool) -> None:
        self._ledger.ack_on_delivery = value

    # state
    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def alive(self) -> bool:
        return self._state is LinkState.UP

    def set_state(self, state: LinkState, detail: str = "") -> None:
        """Move to ``state``; going DOWN from UP delivers a ``link_down`` notice."""
        was, self._state = self._state, state
        if state is LinkState.DOWN and was is LinkState.UP:
            self.notice("link_down", detail)

    def notice(self, kind: str, detail: str = "") -> None:
        """Deliver a :class:`LinkNotice` (``kind`` one of :data:`NOTICE_KINDS`)."""
        assert kind in NOTICE_KINDS, kind
        post_notice(self.events, self.name, kind, detail)  # a full queue: the link's state says it too

    def identified(self, ident: DeviceIdentity) -> None:
        """The device said who it is at (re)connect. Raises :class:`WrongDevice`,
        :class:`FirmwareNotAllowed` or :class:`TamperDetected` (all :class:`HandshakeError`;
        the link is then REFUSED, with its ``identity_changed`` or ``handshake_refused``
        notice) as :func:`firmware_bridge.ledger.check_identity` (SPEC §6.1, §6.6); else the
        link is UP (``link_up`` or ``device_rebooted``)."""
        old = self.identity
        try:
            check_identity(self.name, ident, self.config, expected_kind=self.expected.device_kind, previous=old)
        except HandshakeError as problem:
            self.notice(refusal_notice(problem), str(problem))
            self._state = LinkState.REFUSED
            raise
        self._ledger.identified(old, ident, self.resume)
        self.identity = ident
        was, self._state = self._state, LinkState.UP
        if rebooted(old, ident):
            self.notice("device_rebooted", f"boot_id {old.boot_id:08x} -> {ident.boot_id:08x}")
        elif old is not None and was is not LinkState.UP:
            self.notice("link_up", "")

    # events
    def deliver(self, message: Message | RefusedEvent, seq: int) -> None:
        """The device sent event ``seq``: queue it once (a repeat of the last ``seq`` is
        answered again when it was answered, else left for the consumer's answer); when
        the queue is full it is left unanswered (the device's resend brings it back; a
        link made with ``resend=False`` waits up to ``config.reconnect_wait_s`` for room)."""
        if not self.alive:
            return
        nak = message.nak if isinstance(message, RefusedEvent) else None
        ident = self.identity
        ev = DeviceEvent(self.name, message, time.monotonic(), seq, ident.boot_id if ident else 0)

        def put() -> bool:
            try:
                if self.resend:
                    self.events.put_nowait(ev)
                else:  # nothing brings it back: wait for room (the reader, not the consumer, waits)
                    self.events.put(ev, timeout=self.config.reconnect_wait_s)
            except queue.Full:
                return False
            return True

        _, answer = self._ledger.offer(seq, (nak is None, nak), put)
        if answer is not None:
            self.send_answer(seq, *answer)

    def acknowledge(self, event: DeviceEvent) -> None:
        """Answer ``event`` now that it is journaled (ACK, or NAK for a refused one)."""
        answer = self._ledger.acknowledge(event, self.name)
        if answer is not None:
            self.send_answer(event.seq, *answer)

    def send_answer(self, seq: int, ok: bool, nak: NakCode | None) -> None:
        """Write the answer to event ``seq`` to the device (the driver's own wire form)."""
        raise NotImplementedError


__all__ = [
    "CONTRACT_VERSION", "SUPPORTED_CONTRACT_VERSIONS", "ENTRY_POINT_GROUP", "NOTICE_KINDS", "EVENTS_BY_ROLE",
    "FULL", "DECK_SIZE",
    "WITHOUT_COMMITMENT", "CommittingShuffler", "ShuffleOpening",
    "BackColour", "Capabilities", "Card", "CardDrawn", "CardUnreadable", "DeckDelivered", "DeckInserted",
    "DeckVerified", "DeviceEvent", "DeviceIdentity", "DeviceKind", "DeviceState", "DrawCounter", "DriverError",
    "DriverKind", "DriverLink", "DriverOptionError", "DriverPlugin", "EventLink", "FirmwareNotAllowed",
    "HandshakeError", "LinkConfig", "LinkError", "LinkLost", "LinkNotice", "LinkState", "LinkTimeout",
    "LinkTiming", "Message", "NakCode", "OpenRequest", "ProtocolVersionMismatch", "RefusedEvent",
    "RequestRefused", "ShoeDriver", "ShoeEmpty", "ShoeLoaded", "ShufflerDriver", "ShufflerFault",
    "ShufflerFaultCode", "StatusReply", "TamperDetected", "TransportError", "WrongDevice", "check_capabilities",
]
