"""Shuffler and CardShoe drivers: typed commands over a firmware link, typed events.

The same driver code runs against a real device, a pty emulator, a TCP
emulator or the emulated USB devices: the transport is chosen by URL or USB
selector (docs/architecture.md, "The layer rule"; ``firmware_bridge.factory.transport_for``).
Events are the protocol's dataclasses (``DeckVerified``, ``CardDrawn``...),
wrapped in :class:`firmware_bridge.link.DeviceEvent` with their source and
arrival time.
"""

from __future__ import annotations

import queue
from typing import Callable, ClassVar, TypeVar

from firmware_bridge.link import DeviceEvent, DeviceIdentity, Link, LinkConfig
from firmware_bridge.factory import transport_for
from protocols.messages import Ack, DeviceKind, GetStatus, OpenShuffle, Shuffle, ShuffleOpening, StatusReply

from .contract import FULL, WITHOUT_COMMITMENT, Capabilities

D = TypeVar("D", bound="DeviceDriver")


class DeviceDriver:
    """Common driver: handshake on open, status, close.

    Use :meth:`open` with a pyserial URL or a USB selector; or build a :class:`Link` yourself
    (another transport) and pass it to the constructor, then :meth:`connect`.
    """

    KIND: ClassVar[DeviceKind]
    #: a SPEC device has them all: draw index, deck count, resend (docs/drivers.md)
    capabilities: ClassVar[Capabilities] = FULL

    def __init__(self, link: Link) -> None:
        self.link = link

    @classmethod
    def open(
        cls: type[D],
        url: str,
        *,
        config: LinkConfig | None = None,
        events: "queue.Queue[DeviceEvent] | None" = None,
        name: str | None = None,
        usb_backend: object = None,
        ack_on_delivery: bool = True,
        resume: "Callable[[DeviceIdentity], int | None] | None" = None,
        frame_trace: "Callable[[str, bytes], None] | None" = None,
    ) -> D:
        """Open ``url``, handshake, and return a connected driver.

        ``url``: a pyserial URL (``/dev/ttyUSB0``, ``socket://host:port``...) or a
        USB selector ``usb://VID:PID[/SERIAL]`` (hex IDs); ``usb_backend``: the
        pyusb backend for a USB selector (None: libusb; tests pass the emulators').

        Raises ``TransportError`` (cannot open, or a malformed ``usb://``
        selector; its ``hint`` says what to do), ``LinkTimeout`` (no answer),
        ``ProtocolVersionMismatch`` / ``WrongDevice`` (handshake refused).
        ``frame_trace``: see :class:`~firmware_bridge.link.Link` (every frame, both ways).
        """
        transport = transport_for(url, usb_backend=usb_backend,
                                  read_timeout_ms=config.read_timeout_ms if config is not None else None)
        link = Link(transport, name=name or str(cls.KIND), config=config, events=events,
                    ack_on_delivery=ack_on_delivery, frame_trace=frame_trace)
        link.resume = resume
        link.open()
        driver = cls(link)
        try:
            driver.connect()
        except BaseException:
            link.close()
            raise
        return driver

    def connect(self) -> DeviceIdentity:
        """Handshake with the device (SPEC §6.1)."""
        return self.link.handshake(self.KIND)

    @property
    def identity(self) -> DeviceIdentity | None:
        return self.link.identity

    def status(self) -> StatusReply:
        """The device's state, the back colour of the deck it holds and its card count."""
        reply = self.link.request(GetStatus(), StatusReply)
        assert isinstance(reply, StatusReply)
        return reply

    def next_event(self, timeout_s: float | None = None) -> DeviceEvent | None:
        """The next event from this driver's queue (shared with other drivers if
        one queue was passed to :meth:`open`), or None after ``timeout_s``."""
        try:
            return self.link.events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.link.close()

    def __enter__(self: D) -> D:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Shuffler(DeviceDriver):
    """A single-deck automatic shuffler.

    Events: ``DeckInserted``, ``DeckVerified``, ``DeckDelivered``, ``ShufflerFault``.
    """

    KIND = DeviceKind.SHUFFLER

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """FULL for a shuffler of protocol 1.1 or later; a 1.0 shuffler lacks the shuffle
        commitment (SPEC §4.2.1): :data:`~devices.contract.WITHOUT_COMMITMENT`."""
        ident = self.link.identity
        if ident is not None and (ident.protocol_major, ident.protocol_minor) < (1, 1):
            return WITHOUT_COMMITMENT
        return FULL

    def open_shuffle(self, commitment: bytes) -> ShuffleOpening:
        """Ask the shuffler to open ``commitment`` (32 bytes), that of the deck it last
        delivered (SPEC §4.2.1). Returns its :class:`ShuffleOpening` unchecked (the
        table checks it). Raises ``RequestRefused`` (UNKNOWN_COMMITMENT: not the deck
        last delivered; NOT_SUPPORTED: a 1.0 shuffler) or another ``LinkError``."""
        reply = self.link.request(OpenShuffle(commitment), ShuffleOpening)
        assert isinstance(reply, ShuffleOpening)
        return reply

    def shuffle(self) -> None:
        """Start shuffling and verifying the deck inside. ``DeckVerified`` (or
        ``ShufflerFault``) follows as an event. Raises ``RequestRefused`` with
        NO_DECK, BUSY, DOOR_OPEN or JAMMED."""
        self.link.request(Shuffle(), Ack)


class CardShoe(DeviceDriver):
    """A card-recognition dealing shoe.

    Events: ``ShoeLoaded``, ``CardDrawn``, ``CardUnreadable``, ``ShoeEmpty``.
    """

    KIND = DeviceKind.SHOE
