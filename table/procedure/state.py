"""What the table's parts share: its state, its devices, and the one way to record.

:class:`TableState` holds what the parts of the procedure read and write of
the table (custody, the journal, the round in play, a held round, the counts,
the draw index the shoe's next card must carry, the device cursor, the
standing alarms) and the helpers every part records with: journal before act
(:meth:`TableState.record`), one step's entries in one transaction
(:meth:`TableState.batch`), events for subscribers (:meth:`TableState.publish`).
:class:`Alarms` keeps the alarms that stay until handled. :class:`TableDevices` holds the shuffler,
the shoe, their links, the dealer and the timing. A part is given these two
objects (and the other parts it calls), never the controller.

May touch: the journal (append, batch, checkpoint),
custody, the subscribers' callbacks. Never a device: device I/O belongs to
:mod:`table.procedure.intake` and the parts that ask devices for status.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import structlog

from devices.contract import DeviceEvent, DriverLink, ShoeDriver, ShufflerDriver
from protocols.cards import BackColour, Card
from protocols.clock import REAL_CLOCK, Clock

from .. import recovery
from ..console import Command
from ..custody import CustodyViolation, Deck, DeckCustody, DeckPlace
from ..journal import Journal
from ..round import HeldRound, RoundMachine
from ..rules.settlement import Decision, SeatSettlement, Wagers
from ..sealing import CARD_FACE, mask_cards
from .device_faults import guarded

log = structlog.get_logger("table")

#: The longest wait between a device's resends of an event it holds, at the protocol's
#: default (SPEC §6.3: events are resent on the request schedule; §7: retransmit_max_ms
#: 2000 ms). A host whose own [link] retransmit_max_ms is shorter does not shorten the
#: device's: the soak's host uses 200 ms, and a table that gave a shoe's resend 0.4 s
#: after line noise ate its ShoeLoaded took the shoe's word with a "no record of the
#: red deck in the shoe" incident while the shoe's own record was on its way
#: (the seed-2 soak's alarm at round 1889); the record then arrived as a deck loaded twice.
DEVICE_RETRANSMIT_MAX_MS = 2000


class Dealer(Protocol):
    """The physical actions the controller asks of the dealer (a person at a real
    table, :class:`simulators.table.VirtualDealer` on a simulated one)."""

    def insert_deck(self, colour: BackColour) -> None: ...

    def take_from_shuffler(self) -> None: ...

    def load_shoe(self, colour: BackColour) -> None: ...

    def draw_card(self) -> None: ...

    def collect(self) -> None: ...


@dataclass(frozen=True)
class TableTiming:
    """How long the controller waits (s)."""

    event_timeout_s: float = 10.0
    shuffle_timeout_s: float = 180.0
    #: no longer waited: start-up takes what the devices already delivered and lets each
    #: step wait for its own event; kept so existing callers keep working
    settle_s: float = 0.0
    #: A person at a real table moves decks and draws cards at a person's pace; wait
    #: this long for the device event confirming a dealer's action (a virtual
    #: dealer is held to ``event_timeout_s``).
    dealer_timeout_s: float = 86_400.0
    #: A device fault people can fix (a jam, a door, a cable, a power cycle) is waited out
    #: for ever while a console is attached (service mode); on a bench with nobody to ask
    #: for this long, then the run ends saying so (docs/device-faults.md).
    fault_deadline_s: float = 300.0
    #: The clock the event waits run on (protocols/clock.py): a soak passes a faster
    #: VirtualClock, so its devices' and the controller's waits compress alike.
    clock: Clock = REAL_CLOCK


# --- results and views ------------------------------------------------------------


@dataclass
class CardRead:
    """One card as the shoe read it (or as a supervisor entered it)."""

    draw_index: int
    card: Card
    back_colour: BackColour
    manual: bool = False


@dataclass
class SeatResult:
    """One seat's round: cards, decision and settlement (cents)."""

    seat: int
    cards: list[Card]
    #: None for a seat with no ante (a Pair Plus-only seat has no decision to make, 649a.7)
    decision: Decision | None
    settlement: SeatSettlement

    @property
    def net_cents(self) -> int:
        return self.settlement.net


@dataclass
class RoundResult:
    """One completed round, as reported by ``tablectl run``."""

    number: int
    round_id: str
    deck_id: str
    deck_colour: BackColour
    dealer_hand: list[Card]
    dealer_qualifies: bool
    seats: list[SeatResult]
    reads: list[CardRead] = field(default_factory=list)


@dataclass(frozen=True)
class SeatView:
    """What one seat may see (58 Pa. Code 816a.1): its own cards, its decision, and
    the dealer's hand and its result only once every seat has decided."""

    round_id: str
    seat: int
    cards: tuple[Card, ...]
    decision: Decision | None
    dealer_hand: tuple[Card, ...] | None
    net_cents: int | None


@dataclass
class RoundInPlay:
    """The round being dealt: its machine, wagers, cards, decisions and results."""

    number: int
    round_id: str
    deck: Deck
    machine: RoundMachine
    wagers: dict[int, Wagers]
    hands: dict[int, list[Card]] = field(default_factory=dict)
    dealer: list[Card] = field(default_factory=list)
    reads: list[CardRead] = field(default_factory=list)
    decisions: dict[int, Decision] = field(default_factory=dict)
    results: dict[int, SeatSettlement] = field(default_factory=dict)
    #: draw prompts given to the dealer this round (a resumed deal does not prompt twice)
    prompted: int = 0
    #: the journal seq of the round's "open" entry (where a restart's recovery reads it from)
    open_seq: int | None = None


@dataclass(frozen=True)
class TableEvent:
    """A table event for subscribers.

    ``audience``: ``"table"`` for everyone, or ``"seat:N"`` for seat N alone.
    Nobody may see an outcome before the wager it decides is final (58 Pa.
    Code 816a.1): a card face is published to the table only after every seat
    has decided (``dealer_revealed`` carries the dealer's and every seat's
    hand); before that a seat's cards go only to that seat (``seat_card``), and
    the dealer's to nobody. A consumer that publishes events (a stream, MQTT)
    must drop every event whose audience is not ``"table"`` unless it serves
    that seat alone.
    """

    kind: str
    round_id: str | None
    data: dict[str, Any]
    audience: str = "table"


# --- the devices ------------------------------------------------------------------


class TableDevices:
    """The shuffler and the shoe, their links, the queue their events arrive on, the
    dealer who moves decks and draws cards, and how long to wait for each.

    ``shuffler`` and ``shoe`` are drivers of the published driver contract
    (``devices/contract.py``, docs/drivers.md): the SPEC drivers or a plugin's."""

    def __init__(self, shuffler: ShufflerDriver, shoe: ShoeDriver, events: "queue.Queue[DeviceEvent]", dealer: Dealer,
                 timing: TableTiming, auto_dealer: bool) -> None:
        # a driver is outside input: whatever it raises is a device fault (device_faults.GuardedDriver)
        self.shuffler = guarded(shuffler, "shuffler")
        self.shoe = guarded(shoe, "shoe")
        self.events = events
        self.dealer = dealer
        self.timing = timing
        self.auto_dealer = auto_dealer
        self.shoe_name: str = shoe.link.name
        self.shuffler_name: str = shuffler.link.name
        self.links: dict[str, DriverLink] = {self.shuffler_name: shuffler.link, self.shoe_name: shoe.link}

    @property
    def dealer_wait_s(self) -> float:
        """How long a dealer's action may take before the table gives up on it (s)."""
        return self.timing.event_timeout_s if self.auto_dealer else self.timing.dealer_timeout_s

    @property
    def resend_window_s(self) -> float:
        """How long a device takes at most to resend an event it holds (SPEC §6.3, §7):
        twice the longest retransmit timeout, the links' own or the protocol's default
        (:data:`DEVICE_RETRANSMIT_MAX_MS`), whichever is longer (s, on the table's clock)."""
        longest: float = max([DEVICE_RETRANSMIT_MAX_MS, *(link.config.retransmit_max_ms for link in self.links.values())])
        return 2 * longest / 1000

    def ident(self, source: str) -> tuple[str, int]:
        """``(serial, boot_id)`` of the device a link speaks to, ``("?", 0)`` before its handshake."""
        ident = self.links[source].identity
        return (ident.serial_number, ident.boot_id) if ident is not None else ("?", 0)


# --- the state and its record -------------------------------------------------------


def by(cmd: Command) -> dict[str, Any]:
    """Who gave a command, for its journal entry (every command is journaled with its person)."""
    return {"by": cmd.actor.to_dict()} if cmd.actor is not None else {}


def wager_dict(wagers: dict[int, Wagers]) -> dict[str, dict[str, int]]:
    """Each seat's wagers as journaled: only the wagers placed (zero amounts left out)."""
    return {str(s): w.to_record() for s, w in wagers.items()}


class TableState:
    """The table's state every part reads and writes, and how they record it.

    ``custody``: the two decks (:class:`~table.custody.DeckCustody`); ``journal``:
    the record (None: keep none); ``seats``: the layout's player positions 1..7;
    ``cursor``: the devices' last journaled events. The rest starts empty and is
    restored by :mod:`table.procedure.startup`.
    """

    def __init__(self, custody: DeckCustody, journal: Journal | None, *, seats: int,
                 cursor: recovery.DeviceCursor) -> None:
        self.custody = custody
        self.journal = journal
        self.table_id = journal.table_id if journal is not None else "table"
        self.seats = seats
        self.cursor = cursor
        self.round: RoundInPlay | None = None
        #: the held round (None: nothing held); ``held_round`` what a release resumes (None
        #: after a restart: rebuilt from the journal then)
        self.held: HeldRound | None = None
        self.held_round: RoundInPlay | None = None
        #: a voided round whose cards may still arrive from the shoe (drawn while it was away),
        #: until the shoe is loaded again: they are journaled as that round's late cards
        self.in_flight_round: str | None = None
        self.rounds_played = 0
        self.rounds_opened = 0
        self.cards_read = 0
        #: the draw index the shoe's next card must carry (SPEC §4.3)
        self.next_draw = 0
        self.alarms = Alarms()
        self.subscribers: list[Callable[[TableEvent], None]] = []
        self.lock = threading.Lock()

    # -- the round in play ------------------------------------------------------------

    def enter(self, r: RoundInPlay | None) -> None:
        """Make ``r`` the round in play (None: none), under the lock the views read with."""
        with self.lock:
            self.round = r
        if r is not None:
            structlog.contextvars.bind_contextvars(round_id=r.round_id, deck_id=r.deck.deck_id)
        else:
            structlog.contextvars.unbind_contextvars("round_id", "deck_id")

    def deck_in(self, *places: DeckPlace) -> Deck | None:
        """The first deck at one of ``places``, None when none is."""
        return next((d for d in self.custody.decks.values() if d.place in places), None)

    # -- journal and events ---------------------------------------------------------------

    def record(self, kind: str, *, sealed: dict[str, Any] | None = None, **body: Any) -> None:
        """Journal one entry in the current round's context (journal before act). With no
        round in play, ``round_id`` and ``deck_id`` in ``body`` say which it is for.
        Raises :class:`~table.journal.JournalWriteError` when the journal cannot be written."""
        if self.journal is not None:
            r = self.round
            rid = r.round_id if r else body.pop("round_id", None)
            did = r.deck.deck_id if r else body.pop("deck_id", None)
            body.pop("round_id", None)
            body.pop("deck_id", None)
            self.journal.append(kind, round_id=rid, deck_id=did, sealed=sealed, **body)

    def op(self, op: str, **args: Any) -> None:
        """Journal a custody step the controller takes itself (replayed by
        :func:`table.recovery.apply`)."""
        self.record("custody", op=op, **args)

    def violation(self, v: CustodyViolation) -> None:
        """Journal a broken rule: its detail can name a sealed card, so it is kept sealed
        and only its masked form is in the clear (816a.1)."""
        sealed = {"detail": v.detail} if self.journal is not None and CARD_FACE.search(v.detail) else None
        self.record("violation", rule=v.rule.value, detail=mask_cards(v.detail), citation=v.citation,
                    sealed=sealed)

    def batch(self) -> contextlib.AbstractContextManager[Any]:
        """The entries one step of the procedure produces commit together
        (docs/decisions/0001-one-commit-per-step.md).
        Never wait for a device inside one: an event is answered only once durable."""
        return self.journal.batch() if self.journal is not None else contextlib.nullcontext()

    def checkpoint(self) -> dict[str, Any] | None:
        """Sign the journal's head now (round boundaries, the table's opening, shutdown),
        with the state a restart resumes from (:func:`table.recovery.checkpoint_state`);
        publish it (an anchor for whoever keeps one off the table). Returns the signed
        checkpoint, None without a journal."""
        if self.journal is None:
            return None
        state = recovery.checkpoint_state(self.custody, rounds_played=self.rounds_played,
                                          rounds_opened=self.rounds_opened, cards_read=self.cards_read,
                                          next_draw=self.next_draw, cursor=self.cursor, held=self.held)
        signed = self.journal.checkpoint(**state)
        self.publish("checkpoint", **{k: v for k, v in signed.items() if k != "digests"})
        return signed

    def publish(self, kind: str, audience: str = "table", **data: Any) -> None:
        """Give every subscriber a :class:`TableEvent` (in the controller's thread); a
        subscriber's exception is logged, never raised into the procedure."""
        ev = TableEvent(kind, self.round.round_id if self.round else None, data, audience)
        for cb in self.subscribers:
            try:
                cb(ev)
            except Exception:  # noqa: BLE001 - a subscriber's bug must not stop the table
                log.exception("subscriber_failed", kind=kind)


# --- the standing alarms ---------------------------------------------------------------------


@dataclass(frozen=True)
class Alarm:
    """One standing alarm: ``id`` (its key), ``kind`` (``held``, ``device_down``,
    ``device_fault``, ``out_of_service``, ``incident``), ``text`` (card faces masked,
    816a.1) and ``since`` (UTC, ISO 8601 to the second)."""

    id: str
    kind: str
    text: str
    since: str

    def to_dict(self) -> dict[str, str]:
        """As the status shows it to the screens, the API and MQTT: ``{"id", "kind", "text", "since"}``."""
        return {"id": self.id, "kind": self.kind, "text": self.text, "since": self.since}


class Alarms:
    """The alarms that stay until handled (a held round, a device down, a deck out of
    service, an incident), for the status and the screens; safe to read from any
    thread. At most :attr:`MAX` are kept (the oldest drop out)."""

    #: standing alarms kept at most
    MAX = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._alarms: list[Alarm] = []

    def sound(self, kind: str, text: str, *, key: str | None = None) -> None:
        """Raise an alarm of ``kind`` saying ``text`` (card faces masked here). ``key``
        replaces a standing alarm of the same key (None: a new alarm of its own)."""
        with self._lock:
            key = key or f"{kind}:{len(self._alarms)}:{time.monotonic_ns()}"
            kept = [a for a in self._alarms if a.id != key]
            kept.append(Alarm(key, kind, mask_cards(text),
                              _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")))
            self._alarms = kept[-self.MAX:]

    def clear(self, key: str) -> None:
        """Remove the alarm ``key`` (handled); nothing when none stands."""
        with self._lock:
            self._alarms = [a for a in self._alarms if a.id != key]

    def take_incidents(self, want: str | None) -> list[str]:
        """Remove the incident alarms (``want``: one by id, None: all); returns their ids, sorted."""
        with self._lock:
            ids = [a.id for a in self._alarms if a.kind == "incident" and (want is None or a.id == want)]
            self._alarms = [a for a in self._alarms if a.id not in ids]
        return sorted(ids)

    def now(self) -> list[dict[str, str]]:
        """The standing alarms, oldest first, as the status shows them (:meth:`Alarm.to_dict`)."""
        with self._lock:
            return [a.to_dict() for a in self._alarms]
