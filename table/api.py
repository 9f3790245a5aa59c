"""The vendor-facing Python API of the table controller (``docs/integration.md``).

::

    from table.api import Table, CardDealt, DealerRevealed

    with Table("/etc/threecard/table.toml", simulate=True, rounds=3) as t:
        t.subscribe(DealerRevealed, lambda ev: print(ev.round_id, ev.dealer_hand))
        t.wait()

:class:`Table` builds the controller from a table config, runs rounds in a
thread of its own between :meth:`Table.start` and :meth:`Table.stop`, and
offers typed events (one frozen dataclass per event type, the same events and
sequence numbers as the event socket and MQTT, see :mod:`table.events`), the
dealer's and the supervisor's commands, and per-seat sealed views.

Sealing (58 Pa. Code 816a.1): subscriptions to the table-wide stream never
carry a card face before the decisions it decides are final; a seat's
subscription (``seat=N``) adds that seat's own cards as they are dealt;
:meth:`Table.seat_view` shows one seat its cards and the dealer's hand only
after every seat decided; :meth:`Table.dealer_hand` raises :class:`Sealed`
before that.

The API follows semantic versioning (:data:`API_VERSION`): names in
``__all__`` and their documented behaviour change incompatibly only with a
new major version.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import queue
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Union

import structlog

from .config import MqttSettings, TableConfig, load_config
from .console import Command, Console
from .controller import Dealer, SeatView, TableController
from .errors import Sealed, TableError
from .events import SCHEMA, SCHEMA_VERSION, EventLog, EventStreamError
from .in_force import settings_of as in_force_settings
from .front_doors import front_door
from .rules.strategy import q64_player

log = structlog.get_logger("table.api")

#: version of this API (semver): major = incompatible change to a name in ``__all__``.
API_VERSION = "1.3.0"  # 1.1.0: BetsClosed carries seats and wagers (issue 23); 1.2.0: Table.table_procedure; 1.3.0: its request_id

__all__ = [
    "API_VERSION", "SCHEMA", "SCHEMA_VERSION",
    "Table", "EventSubscription", "CommandRefused", "TableError", "Sealed", "EventStreamError", "SeatView",
    "MqttSettings",
    "Event", "TableOpened", "TableRestarted", "RoundOpened", "BetsClosed", "CardDealt", "DecisionsFinal",
    "DealerRevealed", "RoundSettled", "RoundClosed", "RoundHeld", "RoundVoided", "CustodyViolation",
    "Incident", "SupervisorAction", "ShuffleCommitted", "ShuffleOpened", "EVENT_CLASSES", "event_from_dict",
]


class CommandRefused(TableError):
    """A dealer or supervisor command was refused (wrong moment, missing argument) or
    not answered in time; the message is the controller's reason."""


# -- typed events ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """Fields every event has. ``seq``: per-table sequence number (1, 2, ... without
    gaps); ``journal_seq``: the journal entry it comes from; ``table_id``;
    ``round_id`` (None for table events); ``ts``: UTC time the controller
    recorded it; ``type``: the event type string (``"card_dealt"``)."""

    TYPE: ClassVar[str] = ""
    seq: int
    journal_seq: int
    table_id: str
    round_id: str | None
    ts: _dt.datetime


@dataclass(frozen=True)
class TableOpened(Event):
    """The table opened for the first time: the first deck verified and in the shoe.
    ``places``: deck id -> custody place."""

    TYPE: ClassVar[str] = "table_opened"
    places: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TableRestarted(Event):
    """The controller restarted and restored custody from the journal."""

    TYPE: ClassVar[str] = "table_restarted"
    rounds_played: int | None = None
    places: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundOpened(Event):
    """A round opened: ``number``, the ``seats`` in play, each seat's ``wagers`` (cents)."""

    TYPE: ClassVar[str] = "round_opened"
    number: int | None = None
    seats: list[int] = field(default_factory=list)
    wagers: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class BetsClosed(Event):
    """No more bets: dealing starts. ``seats``: the seats in play (the only seats dealt),
    ``wagers``: each one's wagers as frozen, in cents (event schema 1.3; empty from an
    older table, whose round_opened carries them)."""

    TYPE: ClassVar[str] = "bets_closed"
    number: int | None = None
    seats: list[int] = field(default_factory=list)
    wagers: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class CardDealt(Event):
    """A card read by the shoe: ``to`` (``"seat1"``..``"seat7"``, ``"dealer"``, or None
    for a card read after a restart), ``seat``, ``draw_index``, ``back_colour``,
    ``manual`` (entered by a supervisor). ``card`` is set only on the receiving
    seat's own subscription, never for the dealer (58 Pa. Code 816a.1)."""

    TYPE: ClassVar[str] = "card_dealt"
    to: str | None = None
    draw_index: int | None = None
    back_colour: str | None = None
    manual: bool = False
    seat: int | None = None
    card: str | None = None
    after_restart: bool = False
    #: SHA-256 commitment to the card (``table.sealing.commitment``), opened at the reveal (schema 1.1)
    commitment: str | None = None


@dataclass(frozen=True)
class DecisionsFinal(Event):
    """Every seat decided: ``seats`` = {"1": {"decision": "play", "cards": ["As", ...]}}.
    The first event with seat cards on the table-wide stream (816a.1)."""

    TYPE: ClassVar[str] = "decisions_final"
    number: int | None = None
    seats: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class DealerRevealed(Event):
    """The dealer's hand, after every decision (816a.1), and whether it qualifies."""

    TYPE: ClassVar[str] = "dealer_revealed"
    number: int | None = None
    dealer_hand: list[str] = field(default_factory=list)
    dealer_qualifies: bool = False
    #: every card of the round with the nonce its commitment hid (schema 1.1)
    openings: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RoundSettled(Event):
    """Results, recorded before they are posted (816a.1): ``net_cents`` per seat and the
    full ``results`` (each wager's outcome and amount in cents)."""

    TYPE: ClassVar[str] = "round_settled"
    number: int | None = None
    results: dict[str, Any] = field(default_factory=dict)
    net_cents: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundClosed(Event):
    """The round's cards are in the discard rack; ``voided`` after a supervisor's void."""

    TYPE: ClassVar[str] = "round_closed"
    number: int | None = None
    voided: bool = False


@dataclass(frozen=True)
class RoundHeld(Event):
    """The round is held for a supervisor (``reason``, card faces masked as ``??``): custody
    violation, device fault, restart. ``settled``: its results were recorded and stand."""

    TYPE: ClassVar[str] = "round_held"
    number: int | None = None
    reason: str = ""
    settled: bool = False


@dataclass(frozen=True)
class RoundVoided(Event):
    """A supervisor voided the round; wagers are returned (``returned_cents`` per seat)."""

    TYPE: ClassVar[str] = "round_voided"
    reason: str = ""
    supervisor: str | None = None
    wagers: str = "returned"
    returned_cents: dict[str, int] = field(default_factory=dict)
    #: the openings of the cards dealt before the void (schema 1.1)
    openings: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CustodyViolation(Event):
    """A deck custody rule was broken (``rule``, ``citation``); details stay in the journal."""

    TYPE: ClassVar[str] = "custody_violation"
    rule: str | None = None
    citation: str | None = None


@dataclass(frozen=True)
class Incident(Event):
    """An incident was recorded (``what``), e.g. a card drawn before betting closed."""

    TYPE: ClassVar[str] = "incident"
    what: str | None = None


@dataclass(frozen=True)
class SupervisorAction(Event):
    """A supervisor acted (``action``: ``register_deck``, ``confirm_card``); no card face."""

    TYPE: ClassVar[str] = "supervisor_action"
    action: str | None = None
    supervisor: str | None = None
    new_deck_id: str | None = None
    replaces: str | None = None
    draw_index: int | None = None


@dataclass(frozen=True)
class Checkpoint(Event):
    """A signed checkpoint of the journal (schema 1.1): ``seq`` (the last journal entry
    it covers, ``covers``), ``head`` (the chain hash there), ``sig`` (Ed25519, by
    ``key_id``). Saved off the table, it is an anchor: ``tablectl audit verify
    --anchors`` tells a journal cut short or rolled back from the one signed."""

    TYPE: ClassVar[str] = "checkpoint"
    signed: dict[str, Any] = field(default_factory=dict)

    @property
    def covers(self) -> int | None:
        return self.signed.get("seq")


@dataclass(frozen=True)
class ShuffleCommitted(Event):
    """The shuffler committed to a deck's order when it verified it (schema 1.5,
    protocols/SPEC.md 4.2.1): ``deck_id``, ``back_colour``, ``commitment`` (SHA-256, hex)."""

    TYPE: ClassVar[str] = "shuffle_committed"
    deck_id: str | None = None
    back_colour: str | None = None
    commitment: str | None = None


@dataclass(frozen=True)
class ShuffleOpened(Event):
    """The shuffler opened the commitment of the deck a round was dealt from, after the
    reveal and before settlement (schema 1.5): ``salt`` (hex), ``order`` (the 52 cards,
    the first dealt first), ``cards_checked`` and ``matched`` (false: held, never settled)."""

    TYPE: ClassVar[str] = "shuffle_opened"
    deck_id: str | None = None
    back_colour: str | None = None
    commitment: str | None = None
    salt: str | None = None
    order: list[str] = field(default_factory=list)
    cards_checked: int = 0
    matched: bool = False


#: event type string -> dataclass
EVENT_CLASSES: dict[str, type[Event]] = {c.TYPE: c for c in (
    TableOpened, TableRestarted, RoundOpened, BetsClosed, CardDealt, DecisionsFinal, DealerRevealed,
    RoundSettled, RoundClosed, RoundHeld, RoundVoided, CustodyViolation, Incident, SupervisorAction, Checkpoint,
    ShuffleCommitted, ShuffleOpened)}


def event_from_dict(d: dict[str, Any]) -> Event:
    """The typed event of one stream object (``docs/schemas/event-v1.schema.json``).
    Data keys unknown to this version are ignored (a newer minor schema).
    Raises ``KeyError`` for an unknown event type."""
    cls = EVENT_CLASSES[d["type"]]
    if cls is Checkpoint:
        data = {"signed": dict(d["data"])}
    else:
        names = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in d["data"].items() if k in names}
    return cls(seq=d["seq"], journal_seq=d["journal_seq"], table_id=d["table_id"], round_id=d["round_id"],
               ts=_dt.datetime.fromisoformat(d["ts"]), **data)


EventFilter = Union[type[Event], str, None]


class EventSubscription:
    """A callback subscription (from :meth:`Table.subscribe`); :meth:`close` ends it.
    The callback runs in this subscription's own thread, in ``seq`` order."""

    def __init__(self, events: EventLog, wanted: EventFilter, callback: Callable[[Event], None],
                 seat: int | None, since: int | None) -> None:
        if isinstance(wanted, type):
            self._types = {wanted.TYPE} if wanted is not Event else None
        elif wanted in (None, "*", "all"):
            self._types = None
        elif wanted in EVENT_CLASSES:
            self._types = {wanted}
        else:
            raise ValueError(f"unknown event type {wanted!r}; allowed: {', '.join(EVENT_CLASSES)} or None for all")
        self._cb = callback
        self._sub = events.subscribe(since, seat=seat)
        self._thread = threading.Thread(target=self._run, name="api-subscription", daemon=True)
        self._thread.start()

    @property
    def last_seq(self) -> int:
        """The seq of the last event handled (resume a later subscription from it)."""
        return self._sub.last_seq

    def _run(self) -> None:
        try:
            for d in self._sub:
                if self._types is not None and d["type"] not in self._types:
                    continue
                try:
                    self._cb(event_from_dict(d))
                except Exception:  # noqa: BLE001 - the vendor's bug must not stop the stream
                    log.exception("subscriber_failed", seq=d["seq"])
        finally:
            self._sub.close()

    def close(self) -> None:
        self._sub.close()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)


# -- the table ---------------------------------------------------------------------------------


class Table:
    """One table: devices, controller, journal, event stream, optional socket and MQTT.

    ``config``: a :class:`~table.config.TableConfig` or the path of a table
    config TOML (raises :class:`~table.config.ConfigError` when invalid).
    ``simulate``: emulated shuffler and shoe on ptys with a virtual dealer
    (the config's device URLs are ignored); ``seed`` makes its shuffles
    reproducible. ``journal``: the SQLite journal (default: the config's
    ``journal.path``; required for events, which are derived from it).
    ``dealer``: the physical dealer for a real table (:class:`~table.controller.Dealer`);
    ``decide``: each seat's play/fold (default: Q-6-4). ``auto_dealer``: the
    dealer's confirmations need no command (default: ``simulate``); otherwise
    call :meth:`close_bets` and :meth:`confirm_collect`. ``rounds``: stop after
    that many (None: until :meth:`stop`). ``ante_cents``: each seat's ante.
    ``event_socket``: serve the JSON-lines stream there; ``mqtt``: publish to a
    broker (:class:`~table.config.MqttSettings`).
    """

    def __init__(self, config: TableConfig | str | Path, *, simulate: bool = False, seed: int | None = None,
                 journal: str | Path | None = None, dealer: Dealer | None = None,
                 decide: Callable[..., Any] | None = None, auto_dealer: bool | None = None,
                 rounds: int | None = None, ante_cents: int = 1000, event_socket: str | Path | None = None,
                 mqtt: "MqttSettings | None" = None) -> None:
        self.config = config if isinstance(config, TableConfig) else load_config(config)
        self.table_id = self.config.table.id
        self.simulate = simulate
        self.seed = seed
        self.journal_path = Path(journal) if journal else self.config.journal.path
        self.dealer = dealer
        self.decide = decide or q64_player
        self.auto_dealer = simulate if auto_dealer is None else auto_dealer
        self.rounds = rounds
        self.ante_cents = ante_cents
        self.event_socket_path = Path(event_socket) if event_socket else None
        self.mqtt_settings = mqtt
        if not simulate and dealer is None:
            raise ValueError("a real table needs a dealer (table.controller.Dealer); or simulate=True")
        self.console = Console()
        self.console.attached = True  # this API answers for the supervisor
        self.controller: TableController | None = None
        self.events: EventLog | None = None
        self.mqtt: Any = None
        self.results: list[Any] = []
        self._stack = ExitStack()
        self._subs: list[EventSubscription] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- life cycle ------------------------------------------------------------------------

    def start(self, *, ready_timeout_s: float = 120.0) -> "Table":
        """Open the journal and devices, start the event stream (socket, MQTT) and the
        rounds thread; return once the table is ready to deal (decks shuffled and
        verified, a held round resolved). Raises what opening or preparing raised
        (``TableError``, ``LinkError``, ``JournalError``, ``OSError``;
        :class:`~table.notary_client.NotaryError` when the config's ``[floor]`` notary
        cannot be reached under ``unreachable = "refuse"``), or ``TimeoutError`` when
        not ready within ``ready_timeout_s``."""
        from .custody import DeckCustody
        from .journal import Journal
        from .keys import table_key_for

        st = self._stack
        try:
            key, _ = table_key_for(self.journal_path, self.config.journal.key_file)
            journal = Journal(self.journal_path, key=key, table_id=self.table_id)
            st.callback(journal.close)
            anchors, unconfirmed = self._floor_anchors(key)
            shuffler, shoe, evq, dealer, cursor = self._open_devices(journal)
            d = self.config.decks
            custody = DeckCustody([(d[0].id, d[0].back_colour), (d[1].id, d[1].back_colour)])
            self.controller = TableController(
                shuffler, shoe, evq, dealer, custody, seats=self.config.table.seats, ante_cents=self.ante_cents,
                tables=self.config.load_tables(), decide=self.decide, timing=self.config.link.table_timing(),
                journal=journal, console=self.console, auto_dealer=self.auto_dealer, cursor=cursor, anchors=anchors,
                limits=self.config.limits.given(), unconfirmed=unconfirmed,
                day_required=self.config.gaming_day.procedures_required, in_force=in_force_settings(self.config))
            self._start_event_stream(key, journal)
            # First out at stop: the shutdown checkpoint still reaches the stream and the broker.
            st.callback(self._close_controller)
        except BaseException:
            self._stack.close()
            raise
        self._thread = threading.Thread(target=self._run, name="table-rounds", daemon=True)
        self._thread.start()
        if not self._ready.wait(ready_timeout_s):
            raise TimeoutError(f"the table was not ready within {ready_timeout_s:g} s")
        if self._error is not None:
            err = self._error
            self.stop()
            raise err
        return self

    def _floor_anchors(self, key) -> "tuple[list, str | None]":
        """The floor's notary (``[floor] url``): the highest checkpoint the floor saw is an
        anchor; a journal behind it is held as an incident (issue 28). Returns
        ``(anchors, unconfirmed)``: ``unconfirmed`` is the notary's error text when it
        could not be reached under ``unreachable = "hold"`` (held for a supervisor's
        acknowledgement at start), else None. Raises NotaryError otherwise."""
        from .notary_client import NotaryError, floor_anchors

        unconfirmed = None
        try:
            anchors = floor_anchors(self.config.floor, table_id=self.table_id, table_public=key.public)
        except NotaryError as exc:
            if self.config.floor.unreachable != "hold":
                raise
            anchors, unconfirmed = [], str(exc)  # held for a supervisor's acknowledgement at start
        return anchors, unconfirmed

    def _open_devices(self, journal) -> tuple:
        """Open the shuffler and the shoe (simulated ones with ``simulate``) on one event
        queue, resuming from what ``journal`` recorded; each closes with the table's stack.
        Returns ``(shuffler, shoe, events_queue, dealer, device_cursor)``."""
        from devices import CardShoe, Shuffler

        from .firmware import link_config_for
        from .recovery import device_cursor

        if self.simulate:
            from simulators.table import SimulatedTable

            sim = self._stack.enter_context(SimulatedTable(self.config.deck_colours(), seed=self.seed))
            shuffler_url, shoe_url, dealer = sim.shuffler_url, sim.shoe_url, sim.dealer
        else:
            shuffler_url, shoe_url = self.config.devices.shuffler.url, self.config.devices.shoe.url
            dealer = self.dealer
        evq: queue.Queue = queue.Queue(maxsize=1024)
        cursor = device_cursor(journal)
        resume = cursor.resume
        shuffler = self._stack.enter_context(Shuffler.open(
            shuffler_url, events=evq, name="shuffler", ack_on_delivery=False, resume=resume,
            config=link_config_for(self.config, "shuffler", journal)))
        shoe = self._stack.enter_context(CardShoe.open(
            shoe_url, events=evq, name="shoe", ack_on_delivery=False, resume=resume,
            config=link_config_for(self.config, "shoe", journal)))
        return shuffler, shoe, evq, dealer, cursor

    def _start_event_stream(self, key, journal) -> None:
        """Start the event stream fed from ``journal`` and its front doors (the event
        socket, MQTT with the table key signing); each closes with the table's stack."""
        st = self._stack
        # Fed what the journal commits, from memory (the file is read to index it, and
        # to replay history to a client resuming from an older seq).
        archive = self.config.journal.archive if self.config is not None else None
        self.events = EventLog(self.journal_path, self.table_id, key=key, journal=journal, archive=archive)
        st.callback(self.events.close)
        self.events.start()
        if self.event_socket_path is not None:
            st.callback(front_door("event_socket")(self.event_socket_path, self.events).close)
        if self.mqtt_settings is not None:
            settings = self.mqtt_settings
            if settings.table_key is None:  # the journal's own table key signs what the table publishes
                settings = dataclasses.replace(settings, table_key=key)
            self.mqtt = front_door("mqtt")(self.events, settings).start()
            st.callback(self.mqtt.close)

    def _close_controller(self) -> None:
        """Sign the journal's tail at shutdown (nothing left unsigned after a clean stop)."""
        from .journal import JournalError

        if self.controller is not None:
            try:
                self.controller.close()
            except JournalError as exc:
                log.error("shutdown_checkpoint_failed", error=str(exc))

    def _run(self) -> None:
        from .errors import DeviceFault, DeviceTimeout, RoundHeld as HeldError, RoundVoided as VoidedError

        ctl = self.controller
        assert ctl is not None
        try:
            ctl.prepare()  # restore from the journal, resolve a held round, ready the decks
            self._ready.set()
            n = 0
            while not self._stop.is_set() and (self.rounds is None or n < self.rounds):
                try:
                    self.results.append(ctl.play_round())
                except VoidedError as exc:  # a supervisor voided it before settlement
                    log.warning("round_voided", error=str(exc))
                except (HeldError, DeviceFault, DeviceTimeout) as exc:
                    log.error("round_held", error=str(exc))
                    continue  # the next play_round() waits for void() or release_hold() first
                n += 1
        except BaseException as exc:  # noqa: BLE001 - reported by wait()/start()
            self._error = exc
            log.error("table_stopped", error=str(exc))
        finally:
            self._ready.set()

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait until the rounds are dealt (``rounds`` given) or the table stopped;
        re-raises the error that stopped it. Raises ``TimeoutError`` on timeout."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise TimeoutError(f"the rounds did not finish within {timeout_s} s")
        if self.events is not None:
            self.events.catch_up()
        if self._error is not None:
            raise self._error

    def stop(self, timeout_s: float = 60.0) -> None:
        """Finish the round in progress, then close subscriptions, socket, MQTT (status
        offline), devices and journal. A round held for a supervisor must be
        voided (:meth:`void`) before the table can stop."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        if self.events is not None:
            try:
                self.events.catch_up()  # subscribers get every event the journal has
            except TimeoutError as exc:
                log.warning("events_not_caught_up", error=str(exc))
        for s in self._subs:
            s.close()
        self._subs.clear()
        self._stack.close()

    def __enter__(self) -> "Table":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- events ------------------------------------------------------------------------------

    def subscribe(self, event_type: EventFilter, callback: Callable[[Event], None], *, seat: int | None = None,
                  since: int | None = None) -> EventSubscription:
        """Call ``callback(event)`` for each event of ``event_type`` (a class such as
        :class:`CardDealt`, a type string, or None / ``"*"`` for all), in ``seq``
        order, in a thread of the subscription's own. ``since``: replay events
        with seq > since from the journal first (None: from now on). ``seat``:
        that seat's channel, where :class:`CardDealt` to the seat carries its
        ``card`` (816a.1); None: the table-wide stream. Raises ``ValueError`` for
        an unknown type, :class:`EventStreamError` for a ``since`` beyond the head
        or a bad seat, :class:`TableError` before :meth:`start`."""
        if self.events is None:
            raise TableError("start() the table first")
        sub = EventSubscription(self.events, event_type, callback, seat, since)
        self._subs.append(sub)
        return sub

    @property
    def head_seq(self) -> int:
        """The seq of the last event published (0: none yet)."""
        return self.events.head if self.events else 0

    # -- views ---------------------------------------------------------------------------------

    def seat_view(self, seat: int) -> SeatView:
        """What ``seat`` may see of the round in progress: its own cards and decision;
        the dealer's hand and its net result only after every seat decided (58 Pa.
        Code 816a.1). Raises :class:`TableError` with no round in progress,
        ``ValueError`` for a seat not at the table."""
        return self._ctl().seat_view(seat)

    def dealer_hand(self) -> list[str]:
        """The dealer's cards (e.g. ``["Qs", "7h", "2d"]``). Raises :class:`Sealed` until
        every seat has decided (816a.1), :class:`TableError` with no round in progress."""
        return [str(c) for c in self._ctl().dealer_hand()]

    def status(self) -> dict[str, Any]:
        """Deck places, rounds played, the round in progress and its state, a held round
        (nothing sealed)."""
        return {**self._ctl().status(), "table_id": self.table_id, "head_seq": self.head_seq}

    def _ctl(self) -> TableController:
        if self.controller is None:
            raise TableError("start() the table first")
        return self.controller

    # -- dealer and supervisor commands -----------------------------------------------------------

    def _command(self, action: str, timeout_s: float, **args: Any) -> dict[str, Any]:
        """Submit ``action`` once the table waits for it (within ``timeout_s``) and return
        the answer; a void is submitted at once and its completion awaited. Raises
        :class:`CommandRefused` with the controller's reason."""
        deadline = time.monotonic() + timeout_s
        kept = action == "table_procedure" and self.console.keep_procedures  # taken at the next round's start
        if action != "void" and not kept:
            self._await_expectation(action, args.get("seat"), deadline)
        done = threading.Event()
        box: dict[str, Any] = {}
        finished: dict[str, Any] = {}
        over = threading.Event()

        def reply(result: dict[str, Any]) -> None:
            box.update(result)
            done.set()

        def completed(result: dict[str, Any]) -> None:
            finished.update(result)
            over.set()

        self.console.submit(Command(action, {k: v for k, v in args.items() if v is not None}, reply,
                                    done=completed if action == "void" else None))
        if not done.wait(max(0.0, deadline - time.monotonic())):
            raise CommandRefused(f"{action}: no answer within {timeout_s:g} s (the table is not waiting for it)")
        if not box.get("ok"):
            raise CommandRefused(f"{action}: {box.get('error', 'refused')}")
        if action == "void":  # accepted at once; carried out within one device step
            if not over.wait(max(0.0, deadline - time.monotonic())):
                raise CommandRefused(f"void: accepted but not carried out within {timeout_s:g} s")
            if not finished.get("ok"):
                raise CommandRefused(f"void: {finished.get('error', 'not carried out')}")
            return {"ok": True, **finished}
        return box

    def _await_expectation(self, action: str, seat: Any, deadline: float) -> None:
        """Wait (on the console's own notices, no polling) until the table waits for ``action``."""
        ready = threading.Event()

        def check(exp: Any = None) -> None:
            exp = self.console.expectation
            if exp is not None and action in exp.accepts and (seat is None or exp.seat in (None, seat)):
                ready.set()

        self.console.on_expectation(check)
        try:
            check()
            ready.wait(max(0.0, deadline - time.monotonic()))
        finally:
            self.console.remove_listener(check)

    def close_bets(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Dealer: no more bets; the deal starts. For tables without ``auto_dealer``."""
        return self._command("close_bets", timeout_s)

    def confirm_collect(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Dealer: the round's cards are collected into the discard rack."""
        return self._command("confirm_collect", timeout_s)

    def void(self, reason: str, supervisor: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """Supervisor: void the held round (misdeal; wagers returned). Returns
        ``{"ok": True, "round_id": ..., "voided": True}``; raises :class:`CommandRefused`."""
        return self._command("void", timeout_s, reason=reason, supervisor=supervisor)

    def register_deck(self, deck_id: str, supervisor: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """Supervisor: a replacement deck for one taken out of service (COMAR 36.05.03.27 C)."""
        return self._command("register_deck", timeout_s, deck_id=deck_id, supervisor=supervisor)

    def confirm_card(self, card: str, supervisor: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """Supervisor: enter a card the shoe could not read (e.g. ``"Qs"``)."""
        return self._command("confirm_card", timeout_s, card=card, supervisor=supervisor)

    def confirm_void(self, supervisor: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """A second supervisor confirms a void asked after the decisions were final (the
        two-person rule); ``supervisor`` must not be the one who asked."""
        return self._command("confirm_void", timeout_s, supervisor=supervisor)

    def release_hold(self, supervisor: str, reason: str | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """Supervisor: release a round held by a device fault or a restart: it goes on where
        it stood (a hold from a broken custody rule can only be voided)."""
        return self._command("release_hold", timeout_s, supervisor=supervisor, reason=reason)

    def table_procedure(self, procedure: str, slip: dict[str, Any] | None = None, *, dealer: str, supervisor: str,
                        request_id: str | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """The dealer and a supervisor carry out one of the gaming day's procedures between
        rounds (COMAR 36.05.03.10): ``procedure`` ``open``, ``shift_change``, ``fill``,
        ``credit``, ``close`` or ``drop``; ``slip``: ``inventory`` (denomination in cents,
        as text -> chips), ``amount`` (cents), ``gaming_day`` (``YYYY-MM-DD``, a drop),
        ``opener`` (the incoming dealer of a shift change). The vendor's code proves the
        people (this API runs in the table's own process): the two who sign, and for a
        shift change the incoming dealer, a dealer other than the outgoing one (the
        front doors ask the ``opener_pin``). Returns ``{"ok": True,
        "slip": the journaled slip}``; raises :class:`CommandRefused` (one person signing
        twice, a closed table, a malformed slip: the reason). A simulated table carries it
        out when the round being dealt ends. ``request_id`` (since 1.3.0): the caller's id
        of this ask, sent again with a retry after a timeout: the retry gets the first
        ask's slip with ``"repeated": True`` and makes no second slip; the same id for a
        different ask is refused."""
        return self._command("table_procedure", timeout_s, procedure=procedure, slip=dict(slip or {}),
                             dealer=dealer, supervisor=supervisor, request_id=request_id)

    def acknowledge_incident(self, supervisor: str, incident: str | None = None,
                             timeout_s: float = 30.0) -> dict[str, Any]:
        """Supervisor: acknowledge the table's incident alarms (one by id, or all)."""
        return self._command("acknowledge_incident", timeout_s, supervisor=supervisor, incident=incident)

