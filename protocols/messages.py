"""Message catalogue for the shuffler and the shoe (protocols/SPEC.md §4). Pure: no I/O.

Every message is a frozen dataclass with a class-level ``TYPE`` byte, an
``encode()`` that returns its payload bytes, and a ``decode(payload)`` class
method. :func:`decode_message` maps a frame's type byte to the right class.
Decoding bad bytes raises :class:`~protocols.errors.MessageError` (or a
subclass) and nothing else.

Type byte ranges:

* ``0x01..0x3F`` host requests (need a reply); ``0x20..0x2F`` are the
  firmware update requests (SPEC §9), which both device kinds answer;
* ``0x40..0x7F`` device events (need an ``Ack`` from the host);
* ``0x80..0xFF`` replies; a reply frame carries the SEQ of the frame it answers.

Never in the catalogue: any message that asks for, or carries, the shuffled
order of a deck *while it can matter*. The shuffler commits to each order
when it verifies the deck (:class:`DeckVerified` ``commitment``, a salted
SHA-256, :func:`shuffle_commitment`) and opens it (:class:`OpenShuffle` ->
:class:`ShuffleOpening`) only for the deck it last delivered, which the
table opens after the round dealt from it is decided and collects and
reshuffles before it is dealt again (SPEC §4.2.1; the 2023 Deck Mate 2
research).
"""

from __future__ import annotations

import enum
import hashlib
import struct
from dataclasses import dataclass, field
from typing import ClassVar, cast

from .cards import DECK_SIZE, BackColour, Card, Suit, bitmap_to_cards, cards_to_bitmap
from .errors import CardError, MessageError, UnknownMessageType

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 1  # 1.1: the shuffle commitment (SPEC §4.2.1)


class DeviceKind(enum.IntEnum):
    """What a device says it is in its identify reply."""

    SHUFFLER = 1
    SHOE = 2

    def __str__(self) -> str:
        return self.name.lower()


class NakCode(enum.IntEnum):
    """Why a device refused a request (SPEC §5)."""

    UNKNOWN_MESSAGE = 1
    BAD_PAYLOAD = 2
    NO_DECK = 3
    BUSY = 4
    DOOR_OPEN = 5
    JAMMED = 6
    NOT_SUPPORTED = 7
    NOT_IDENTIFIED = 8
    # firmware update refusals (SPEC §9.4)
    BAD_IMAGE = 9
    WRONG_KIND = 10
    WRONG_MODEL = 11
    DOWNGRADE = 12
    UNKNOWN_KEY = 13
    UNSIGNED = 14
    BAD_SIGNATURE = 15
    BAD_HASH = 16
    TOO_LARGE = 17
    NO_UPDATE = 18
    BAD_OFFSET = 19
    INCOMPLETE = 20
    NOT_COMMITTED = 21
    DECK_PRESENT = 22
    # the shuffle commitment (SPEC §4.2.1, protocol 1.1)
    UNKNOWN_COMMITMENT = 23


class ShufflerFaultCode(enum.IntEnum):
    """Shuffler fault codes carried by :class:`ShufflerFault` (SPEC §5)."""

    JAM = 1
    DOOR_OPEN = 2


class DeviceState(enum.IntEnum):
    """Coarse device state in :class:`StatusReply`."""

    IDLE = 0
    HAS_DECK = 1
    SHUFFLING = 2
    READY = 3
    FAULT = 4


class UpdateState(enum.IntEnum):
    """Where a firmware transfer stands on the device (:class:`FirmwareInfo`, SPEC §9)."""

    IDLE = 0
    RECEIVING = 1
    COMMITTED = 2


class UpdateResult(enum.IntEnum):
    """What became of the last image activated (:class:`FirmwareInfo`, SPEC §9.3)."""

    NONE = 0
    UPDATED = 1
    ROLLED_BACK = 2


class Direction(enum.Enum):
    """Who sends a message: a host request, a device event, or a reply."""

    REQUEST = "request"
    EVENT = "event"
    REPLY = "reply"


_CATALOGUE: dict[int, type["Message"]] = {}


def _register(cls: type["Message"]) -> type["Message"]:
    if cls.TYPE in _CATALOGUE:
        raise RuntimeError(f"type 0x{cls.TYPE:02X} registered twice")
    _CATALOGUE[cls.TYPE] = cls
    return cls


def direction_of(msg_type: int) -> Direction:
    """The direction implied by a type byte's range (see module docstring)."""
    if msg_type >= 0x80:
        return Direction.REPLY
    if msg_type >= 0x40:
        return Direction.EVENT
    return Direction.REQUEST


#: wire byte -> member, for the decoders: a dict lookup costs less than the enum's call
#: (two Python frames), and a status reply (every heartbeat's, SPEC §6.4) decodes two
_COLOURS: dict[int, BackColour] = {c.value: c for c in BackColour}
_STATES: dict[int, DeviceState] = {s.value: s for s in DeviceState}


def _colour(value: int) -> BackColour:
    colour = _COLOURS.get(value)
    if colour is None:
        raise MessageError(f"unknown back colour code {value}")
    return colour


def _expect_len(cls: type, payload: bytes, size: int) -> None:
    if len(payload) != size:
        raise MessageError(f"{cls.__name__} payload must be {size} bytes, got {len(payload)}")


@dataclass(frozen=True)
class Message:
    """Base of every catalogue message; subclasses set ``TYPE``."""

    TYPE: ClassVar[int] = -1

    @property
    def direction(self) -> Direction:
        """Request, event or reply, from the type byte."""
        return direction_of(self.TYPE)

    def encode(self) -> bytes:
        """Payload bytes; the default is an empty payload."""
        return b""

    @classmethod
    def decode(cls, payload: bytes) -> "Message":
        """Decode a payload; the default accepts only an empty payload."""
        _expect_len(cls, payload, 0)
        return cls()


# --- common requests and replies (SPEC §4.1) -------------------------------


@_register
@dataclass(frozen=True)
class Identify(Message):
    """Host → device: who are you? Answered by :class:`IdentifyReply`, never from
    the reply cache. Payload: ``host_session`` u32, a value the host draws once per
    link; a device that sees a new one clears its reply cache (SPEC §6.1)."""

    TYPE: ClassVar[int] = 0x01
    host_session: int = 0

    def encode(self) -> bytes:
        if not 0 <= self.host_session <= 0xFFFFFFFF:
            raise MessageError("host_session must fit in 32 bits")
        return self.host_session.to_bytes(4, "big")

    @classmethod
    def decode(cls, payload: bytes) -> "Identify":
        _expect_len(cls, payload, 4)
        return cls(int.from_bytes(payload, "big"))


@_register
@dataclass(frozen=True)
class GetStatus(Message):
    """Host → device: report state. Answered by :class:`StatusReply`."""

    TYPE: ClassVar[int] = 0x02


@_register
@dataclass(frozen=True)
class Echo(Message):
    """Host → device: diagnostic echo of 0..64 bytes ``data``, answered by
    :class:`EchoReply` with the same bytes. Used by link tests and benchmarks."""

    TYPE: ClassVar[int] = 0x03
    data: bytes = b""

    def encode(self) -> bytes:
        if len(self.data) > 64:
            raise MessageError("Echo data is at most 64 bytes")
        return bytes(self.data)

    @classmethod
    def decode(cls, payload: bytes) -> "Echo":
        if len(payload) > 64:
            raise MessageError(f"Echo payload is {len(payload)} bytes, at most 64")
        return cls(bytes(payload))


@_register
@dataclass(frozen=True)
class EchoReply(Message):
    """Reply to :class:`Echo`: the same 0..64 bytes."""

    TYPE: ClassVar[int] = 0x83
    data: bytes = b""

    def encode(self) -> bytes:
        if len(self.data) > 64:
            raise MessageError("EchoReply data is at most 64 bytes")
        return bytes(self.data)

    @classmethod
    def decode(cls, payload: bytes) -> "EchoReply":
        if len(payload) > 64:
            raise MessageError(f"EchoReply payload is {len(payload)} bytes, at most 64")
        return cls(bytes(payload))


@_register
@dataclass(frozen=True)
class Ack(Message):
    """Reply: the frame with this SEQ was received and accepted. Empty payload."""

    TYPE: ClassVar[int] = 0x80


@_register
@dataclass(frozen=True)
class IdentifyReply(Message):
    """Device → host: ``kind`` u8, protocol ``major``/``minor`` u8, firmware version
    3 × u8, ``boot_id`` u32 (a value the device draws at random at each power-up, so
    the host can tell a reboot, SPEC §6.5), then serial number as u8 length + ASCII
    (1..32 bytes)."""

    TYPE: ClassVar[int] = 0x81
    kind: DeviceKind
    protocol_major: int
    protocol_minor: int
    firmware: tuple[int, int, int]
    serial_number: str
    boot_id: int = 0

    def encode(self) -> bytes:
        serial = self.serial_number.encode("ascii")
        if not 1 <= len(serial) <= 32:
            raise MessageError("serial number must be 1..32 ASCII characters")
        if not 0 <= self.boot_id <= 0xFFFFFFFF:
            raise MessageError("boot_id must fit in 32 bits")
        head = bytes((self.kind, self.protocol_major, self.protocol_minor, *self.firmware))
        return head + self.boot_id.to_bytes(4, "big") + bytes((len(serial),)) + serial

    @classmethod
    def decode(cls, payload: bytes) -> "IdentifyReply":
        if len(payload) < 12:
            raise MessageError(f"IdentifyReply payload is {len(payload)} bytes, at least 12 needed")
        kind, major, minor, fa, fb, fc = payload[:6]
        boot_id = int.from_bytes(payload[6:10], "big")
        n = payload[10]
        if len(payload) != 11 + n or not 1 <= n <= 32:
            raise MessageError(f"IdentifyReply serial length {n} does not match payload")
        try:
            serial = payload[11:].decode("ascii")
            dkind = DeviceKind(kind)
        except (UnicodeDecodeError, ValueError) as exc:
            raise MessageError(f"bad IdentifyReply: {exc}") from None
        if not serial.isprintable():
            raise MessageError("IdentifyReply serial number is not printable ASCII")
        return cls(dkind, major, minor, (fa, fb, fc), serial, boot_id)

    @property
    def firmware_version(self) -> str:
        """Firmware version as ``"major.minor.patch"``."""
        return ".".join(map(str, self.firmware))


@_register
@dataclass(frozen=True)
class StatusReply(Message):
    """Device → host: ``state`` u8 (:class:`DeviceState`), ``back_colour`` u8 of the
    deck it holds (0 for none), ``cards`` u8 (cards held), ``fault`` u8 (0 = none)."""

    TYPE: ClassVar[int] = 0x82
    state: DeviceState
    back_colour: BackColour
    cards: int
    fault: int = 0

    def encode(self) -> bytes:
        return bytes((self.state, self.back_colour, self.cards, self.fault))

    @classmethod
    def decode(cls, payload: bytes) -> "StatusReply":
        _expect_len(cls, payload, 4)
        state = _STATES.get(payload[0])
        if state is None:
            raise MessageError(f"unknown device state {payload[0]}")
        return cls(state, _colour(payload[1]), payload[2], payload[3])


@_register
@dataclass(frozen=True)
class Nak(Message):
    """Reply: the request with this SEQ was refused; ``code`` u8 (:class:`NakCode`)."""

    TYPE: ClassVar[int] = 0x8F
    code: NakCode

    def encode(self) -> bytes:
        return bytes((self.code,))

    @classmethod
    def decode(cls, payload: bytes) -> "Nak":
        _expect_len(cls, payload, 1)
        try:
            return cls(NakCode(payload[0]))
        except ValueError:
            raise MessageError(f"unknown NAK code {payload[0]}") from None


# --- shuffler (SPEC §4.2) ---------------------------------------------------


@_register
@dataclass(frozen=True)
class Shuffle(Message):
    """Host → shuffler: shuffle and verify the deck it holds. Replied with ``Ack``
    (then :class:`DeckVerified` or :class:`ShufflerFault` follows as an event) or
    ``Nak`` (NO_DECK, BUSY, DOOR_OPEN, JAMMED)."""

    TYPE: ClassVar[int] = 0x10


@_register
@dataclass(frozen=True)
class DeckInserted(Message):
    """Shuffler event: a deck was put in; ``back_colour`` u8."""

    TYPE: ClassVar[int] = 0x40
    back_colour: BackColour

    def encode(self) -> bytes:
        return bytes((self.back_colour,))

    @classmethod
    def decode(cls, payload: bytes) -> "DeckInserted":
        _expect_len(cls, payload, 1)
        return cls(_colour(payload[0]))


#: bytes of the salt a shuffler draws for each commitment (SPEC §4.2.1)
SALT_SIZE = 16
#: bytes of a shuffle commitment: a SHA-256 digest (SPEC §4.2.1)
COMMITMENT_SIZE = 32


def shuffle_commitment(salt: bytes, order: "tuple[int, ...] | list[int]") -> bytes:
    """The commitment to a shuffled deck's order (SPEC §4.2.1): SHA-256 over the
    16-byte ``salt`` followed by the 52 card indices of ``order`` (SPEC §3.1), one
    byte each, the card the shoe deals first first. 32 bytes. Raises
    :class:`MessageError` for a salt of another size or an order that is not 52
    card indices."""
    if len(salt) != SALT_SIZE:
        raise MessageError(f"a commitment's salt is {SALT_SIZE} bytes, got {len(salt)}")
    if len(order) != DECK_SIZE or any(not 0 <= i < DECK_SIZE for i in order):
        raise MessageError("a committed order is 52 card indices 0..51")
    return hashlib.sha256(bytes(salt) + bytes(order)).digest()


@_register
@dataclass(frozen=True)
class DeckVerified(Message):
    """Shuffler event: the deck was shuffled and counted.

    Payload (17 or 49 bytes): ``back_colour`` u8, ``card_count`` u8 (cards counted,
    foreign ones included), ``foreign_count`` u8 (cards of another back colour),
    ``present`` 7-byte bitmap of the distinct cards of this deck's colour,
    ``duplicates`` 7-byte bitmap of cards seen more than once, then (protocol 1.1,
    a deck that verifies complete) ``commitment``: 32 bytes, the
    :func:`shuffle_commitment` to the order the deck leaves the shuffler in
    (SPEC §4.2.1). ``b""``: no commitment (a 1.0 shuffler, or an incomplete deck).
    It never carries the order itself.
    """

    TYPE: ClassVar[int] = 0x41
    back_colour: BackColour
    card_count: int
    foreign_count: int
    present: frozenset[int]
    duplicates: frozenset[int] = field(default_factory=frozenset)
    commitment: bytes = b""

    def encode(self) -> bytes:
        if len(self.commitment) not in (0, COMMITMENT_SIZE):
            raise MessageError(f"a DeckVerified commitment is {COMMITMENT_SIZE} bytes or none")
        return (
            bytes((self.back_colour, self.card_count, self.foreign_count))
            + cards_to_bitmap(self.present)
            + cards_to_bitmap(self.duplicates)
            + bytes(self.commitment)
        )

    @classmethod
    def decode(cls, payload: bytes) -> "DeckVerified":
        if len(payload) not in (17, 17 + COMMITMENT_SIZE):
            raise MessageError(f"DeckVerified payload must be 17 or {17 + COMMITMENT_SIZE} bytes, got {len(payload)}")
        try:
            present = bitmap_to_cards(payload[3:10])
            dups = bitmap_to_cards(payload[10:17])
        except CardError as exc:
            raise MessageError(f"bad DeckVerified bitmap: {exc}") from None
        return cls(_colour(payload[0]), payload[1], payload[2], present, dups, bytes(payload[17:]))

    @property
    def complete(self) -> bool:
        """True for exactly 52 distinct cards, no duplicates, no foreign cards."""
        return (
            self.card_count == DECK_SIZE
            and len(self.present) == DECK_SIZE
            and not self.duplicates
            and self.foreign_count == 0
        )

    @property
    def missing(self) -> frozenset[int]:
        """Card indices absent from the deck."""
        return frozenset(range(DECK_SIZE)) - self.present


@_register
@dataclass(frozen=True)
class DeckDelivered(Message):
    """Shuffler event: the verified deck was taken out by the dealer; ``back_colour`` u8."""

    TYPE: ClassVar[int] = 0x42
    back_colour: BackColour

    def encode(self) -> bytes:
        return bytes((self.back_colour,))

    @classmethod
    def decode(cls, payload: bytes) -> "DeckDelivered":
        _expect_len(cls, payload, 1)
        return cls(_colour(payload[0]))


@_register
@dataclass(frozen=True)
class ShufflerFault(Message):
    """Shuffler event: a fault stopped it; ``code`` u8 (:class:`ShufflerFaultCode`)."""

    TYPE: ClassVar[int] = 0x43
    code: ShufflerFaultCode

    def encode(self) -> bytes:
        return bytes((self.code,))

    @classmethod
    def decode(cls, payload: bytes) -> "ShufflerFault":
        _expect_len(cls, payload, 1)
        try:
            return cls(ShufflerFaultCode(payload[0]))
        except ValueError:
            raise MessageError(f"unknown shuffler fault code {payload[0]}") from None


@_register
@dataclass(frozen=True)
class OpenShuffle(Message):
    """Host → shuffler (protocol 1.1): open ``commitment`` (32 bytes), the commitment of
    the deck the shuffler last delivered (SPEC §4.2.1). Answered by
    :class:`ShuffleOpening`, or ``Nak`` UNKNOWN_COMMITMENT (not the deck last
    delivered: a deck inside, being shuffled or verified, or any other) or
    NOT_SUPPORTED (a shuffler without the commitment)."""

    TYPE: ClassVar[int] = 0x11
    commitment: bytes

    def encode(self) -> bytes:
        if len(self.commitment) != COMMITMENT_SIZE:
            raise MessageError(f"OpenShuffle carries a {COMMITMENT_SIZE}-byte commitment")
        return bytes(self.commitment)

    @classmethod
    def decode(cls, payload: bytes) -> "OpenShuffle":
        _expect_len(cls, payload, COMMITMENT_SIZE)
        return cls(bytes(payload))


@_register
@dataclass(frozen=True)
class ShuffleOpening(Message):
    """Reply to :class:`OpenShuffle` (SPEC §4.2.1). Payload (68 bytes): ``salt`` 16 bytes,
    then ``order``: the 52 card indices (SPEC §3.1) of the delivered deck, the card the
    shoe deals first first, each index once. :meth:`commitment` recomputes what
    ``DeckVerified`` carried."""

    TYPE: ClassVar[int] = 0x84
    salt: bytes
    order: tuple[int, ...]

    def encode(self) -> bytes:
        self.commitment()  # checks the salt and the indices
        if sorted(self.order) != list(range(DECK_SIZE)):
            raise MessageError("a ShuffleOpening's order names each of the 52 cards once")
        return bytes(self.salt) + bytes(self.order)

    @classmethod
    def decode(cls, payload: bytes) -> "ShuffleOpening":
        _expect_len(cls, payload, SALT_SIZE + DECK_SIZE)
        order = tuple(payload[SALT_SIZE:])
        if sorted(order) != list(range(DECK_SIZE)):
            raise MessageError("a ShuffleOpening's order names each of the 52 cards once")
        return cls(bytes(payload[:SALT_SIZE]), order)

    def commitment(self) -> bytes:
        """:func:`shuffle_commitment` of this salt and order (32 bytes)."""
        return shuffle_commitment(self.salt, self.order)

    @property
    def cards(self) -> tuple[Card, ...]:
        """The order as cards, the first dealt first."""
        return tuple(Card.from_index(i) for i in self.order)


# --- shoe (SPEC §4.3) -------------------------------------------------------


@_register
@dataclass(frozen=True)
class ShoeLoaded(Message):
    """Shoe event: a deck was loaded; ``back_colour`` u8."""

    TYPE: ClassVar[int] = 0x50
    back_colour: BackColour

    def encode(self) -> bytes:
        return bytes((self.back_colour,))

    @classmethod
    def decode(cls, payload: bytes) -> "ShoeLoaded":
        _expect_len(cls, payload, 1)
        return cls(_colour(payload[0]))


@_register
@dataclass(frozen=True)
class CardDrawn(Message):
    """Shoe event: a card was drawn and read.

    Payload (4 bytes): ``draw_index`` u8 (0-based count of draws since the
    deck was loaded), ``rank`` u8 (2..14), ``suit`` u8 (0..3), ``back_colour`` u8.
    """

    TYPE: ClassVar[int] = 0x51
    draw_index: int
    card: Card
    back_colour: BackColour

    def encode(self) -> bytes:
        return bytes((self.draw_index, self.card.rank, self.card.suit, self.back_colour))

    @classmethod
    def decode(cls, payload: bytes) -> "CardDrawn":
        _expect_len(cls, payload, 4)
        try:
            # the raw suit byte: Card checks it and makes it a Suit (or raises CardError)
            card = Card(payload[1], cast(Suit, payload[2]))
        except CardError as exc:
            raise MessageError(f"bad CardDrawn card: {exc}") from None
        return cls(payload[0], card, _colour(payload[3]))


@_register
@dataclass(frozen=True)
class CardUnreadable(Message):
    """Shoe event: a card was drawn but could not be read.

    Payload (2 bytes): ``draw_index`` u8, ``back_colour`` u8 (0 if that too was unread).
    """

    TYPE: ClassVar[int] = 0x52
    draw_index: int
    back_colour: BackColour

    def encode(self) -> bytes:
        return bytes((self.draw_index, self.back_colour))

    @classmethod
    def decode(cls, payload: bytes) -> "CardUnreadable":
        _expect_len(cls, payload, 2)
        return cls(payload[0], _colour(payload[1]))


@_register
@dataclass(frozen=True)
class ShoeEmpty(Message):
    """Shoe event: a draw was attempted with no card left; ``draws`` u8 since loading."""

    TYPE: ClassVar[int] = 0x53
    draws: int

    def encode(self) -> bytes:
        return bytes((self.draws,))

    @classmethod
    def decode(cls, payload: bytes) -> "ShoeEmpty":
        _expect_len(cls, payload, 1)
        return cls(payload[0])


#: The events each device kind sends (SPEC §4.2, §4.3, §4.5 "Events by device kind"). A host
#: refuses any other event from a device of that kind: a shoe's card event on the
#: shuffler's link deals no card, a shuffler's count on the shoe's link verifies no deck.
EVENTS_BY_KIND: dict[DeviceKind, frozenset[int]] = {
    DeviceKind.SHUFFLER: frozenset({DeckInserted.TYPE, DeckVerified.TYPE, DeckDelivered.TYPE, ShufflerFault.TYPE}),
    DeviceKind.SHOE: frozenset({ShoeLoaded.TYPE, CardDrawn.TYPE, CardUnreadable.TYPE, ShoeEmpty.TYPE}),
}
# --- firmware update (SPEC §9), both device kinds ------------------------------

#: bytes of image data one ``UpdateChunk`` can carry (a 255-byte payload less the offset)
MAX_CHUNK_DATA = 251
#: the image header ``UpdateBegin`` carries (protocols.firmware_image.HEADER_SIZE)
UPDATE_HEADER_SIZE = 73


def _version3(payload: bytes) -> tuple[int, int, int]:
    return (payload[0], payload[1], payload[2])


@_register
@dataclass(frozen=True)
class GetFirmwareInfo(Message):
    """Host → device: report the bootloader's state. Answered by :class:`FirmwareInfo`,
    or ``NAK NOT_SUPPORTED`` by a device that takes no signed updates."""

    TYPE: ClassVar[int] = 0x20


@_register
@dataclass(frozen=True)
class FirmwareInfo(Message):
    """Reply to :class:`GetFirmwareInfo` (SPEC §9.2).

    Payload (19 + n bytes): ``security_version`` u32 (the device's anti-rollback
    counter), ``running_slot`` u8 (0 = A, 1 = B), ``running`` 3 × u8 (the version
    running), ``other`` 3 × u8 (the version in the other slot, 0.0.0 if none),
    ``update_state`` u8 (:class:`UpdateState`), ``last_result`` u8
    (:class:`UpdateResult`), ``received`` u32 (bytes of the image being received,
    header included), ``max_chunk`` u8 (most data bytes per ``UpdateChunk``,
    1..251), model length n u8 (1..16), model n bytes printable ASCII.
    """

    TYPE: ClassVar[int] = 0x90
    model: str
    security_version: int
    running_slot: int
    running: tuple[int, int, int]
    other: tuple[int, int, int] = (0, 0, 0)
    update_state: UpdateState = UpdateState.IDLE
    last_result: UpdateResult = UpdateResult.NONE
    received: int = 0
    max_chunk: int = MAX_CHUNK_DATA

    def encode(self) -> bytes:
        model = self.model.encode("ascii")
        if not 1 <= len(model) <= 16:
            raise MessageError("model must be 1..16 ASCII characters")
        if not 1 <= self.max_chunk <= MAX_CHUNK_DATA:
            raise MessageError(f"max_chunk must be 1..{MAX_CHUNK_DATA}")
        return (self.security_version.to_bytes(4, "big") + bytes((self.running_slot, *self.running, *self.other,
                                                                  self.update_state, self.last_result))
                + self.received.to_bytes(4, "big") + bytes((self.max_chunk, len(model))) + model)

    @classmethod
    def decode(cls, payload: bytes) -> "FirmwareInfo":
        if len(payload) < 20:
            raise MessageError(f"FirmwareInfo payload is {len(payload)} bytes, at least 20 needed")
        n = payload[18]
        if len(payload) != 19 + n or not 1 <= n <= 16:
            raise MessageError(f"FirmwareInfo model length {n} does not match the payload")
        try:
            model = payload[19:].decode("ascii")
            state, result = UpdateState(payload[11]), UpdateResult(payload[12])
        except (UnicodeDecodeError, ValueError) as exc:
            raise MessageError(f"bad FirmwareInfo: {exc}") from None
        if not model.isprintable():
            raise MessageError("FirmwareInfo model is not printable ASCII")
        slot, max_chunk = payload[4], payload[17]
        if slot > 1 or not 1 <= max_chunk <= MAX_CHUNK_DATA:
            raise MessageError(f"FirmwareInfo slot {slot} or max_chunk {max_chunk} out of range")
        return cls(model, int.from_bytes(payload[:4], "big"), slot, _version3(payload[5:8]), _version3(payload[8:11]),
                   state, result, int.from_bytes(payload[13:17], "big"), max_chunk)

    @property
    def running_version(self) -> str:
        """The running firmware version as ``"major.minor.patch"``."""
        return ".".join(map(str, self.running))

    @property
    def slot_name(self) -> str:
        """``"A"`` or ``"B"``: the slot the device runs."""
        return "AB"[self.running_slot]


@_register
@dataclass(frozen=True)
class UpdateBegin(Message):
    """Host → device: start (or resume) receiving an image; ``header`` is its 73-byte
    header (``protocols.firmware_image``). Answered by :class:`UpdateOffset` (how many
    bytes of that image the device already holds: 73 for a new transfer, more when
    it resumes one with the same header) or ``Nak`` (SPEC §9.4). The payload is
    parsed by the device, not here, so a malformed header is refused BAD_IMAGE."""

    TYPE: ClassVar[int] = 0x21
    header: bytes

    def encode(self) -> bytes:
        if len(self.header) != UPDATE_HEADER_SIZE:
            raise MessageError(f"UpdateBegin carries the {UPDATE_HEADER_SIZE}-byte image header")
        return bytes(self.header)

    @classmethod
    def decode(cls, payload: bytes) -> "UpdateBegin":
        _expect_len(cls, payload, UPDATE_HEADER_SIZE)
        return cls(bytes(payload))


@_register
@dataclass(frozen=True)
class UpdateChunk(Message):
    """Host → device: image bytes ``data`` (1..251) at image offset ``offset`` u32.
    Answered by :class:`UpdateOffset` (the bytes held after it) or ``Nak``."""

    TYPE: ClassVar[int] = 0x22
    offset: int
    data: bytes

    def encode(self) -> bytes:
        if not 1 <= len(self.data) <= MAX_CHUNK_DATA:
            raise MessageError(f"UpdateChunk data must be 1..{MAX_CHUNK_DATA} bytes")
        if not 0 <= self.offset <= 0xFFFFFFFF:
            raise MessageError("UpdateChunk offset must fit in 32 bits")
        return self.offset.to_bytes(4, "big") + bytes(self.data)

    @classmethod
    def decode(cls, payload: bytes) -> "UpdateChunk":
        if not 5 <= len(payload) <= 4 + MAX_CHUNK_DATA:
            raise MessageError(f"UpdateChunk payload is {len(payload)} bytes; 5..{4 + MAX_CHUNK_DATA}")
        return cls(int.from_bytes(payload[:4], "big"), bytes(payload[4:]))


@_register
@dataclass(frozen=True)
class UpdateCommit(Message):
    """Host → device: every byte is sent; verify the whole image (hash, signature,
    kind, model, security version). Answered ``Ack`` or ``Nak`` (SPEC §9.4)."""

    TYPE: ClassVar[int] = 0x23


@_register
@dataclass(frozen=True)
class UpdateActivate(Message):
    """Host → device: boot the committed image once. Answered ``Ack``, after which the
    device restarts into it (SPEC §9.3), or ``Nak`` NOT_COMMITTED / DECK_PRESENT."""

    TYPE: ClassVar[int] = 0x24


@_register
@dataclass(frozen=True)
class UpdateOffset(Message):
    """Reply to :class:`UpdateBegin` and :class:`UpdateChunk`: ``offset`` u32, the bytes of
    the image the device holds, contiguous from 0 (the next offset it expects)."""

    TYPE: ClassVar[int] = 0x91
    offset: int

    def encode(self) -> bytes:
        if not 0 <= self.offset <= 0xFFFFFFFF:
            raise MessageError("UpdateOffset offset must fit in 32 bits")
        return self.offset.to_bytes(4, "big")

    @classmethod
    def decode(cls, payload: bytes) -> "UpdateOffset":
        _expect_len(cls, payload, 4)
        return cls(int.from_bytes(payload, "big"))


#: the firmware update requests (SPEC §9), for devices and hosts that route them
UPDATE_REQUESTS: tuple[type[Message], ...] = (GetFirmwareInfo, UpdateBegin, UpdateChunk, UpdateCommit, UpdateActivate)


def catalogue() -> dict[int, type[Message]]:
    """Type byte → message class, for every message in SPEC §4."""
    return dict(_CATALOGUE)


def decode_message(msg_type: int, payload: bytes) -> Message:
    """Decode ``payload`` as the message ``msg_type`` names.

    Raises :class:`UnknownMessageType` for a type byte not in the catalogue and
    :class:`MessageError` for a payload that does not fit its layout.
    """
    cls = _CATALOGUE.get(msg_type)
    if cls is None:
        raise UnknownMessageType(f"unknown message type 0x{msg_type:02X}")
    return cls.decode(bytes(payload))


def encode_message(msg: Message) -> tuple[int, bytes]:
    """``(type byte, payload)`` for ``msg``; raises :class:`MessageError` on unencodable fields."""
    try:
        return msg.TYPE, msg.encode()
    except (ValueError, TypeError, struct.error) as exc:
        if isinstance(exc, MessageError):
            raise
        raise MessageError(f"cannot encode {type(msg).__name__}: {exc}") from None
