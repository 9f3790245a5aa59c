"""The table controller: drives the shuffler and shoe through each round.

One thread (the caller's) feeds both machines: it prompts the dealer for a
physical action, then consumes device events from the one queue both links
share, in arrival order. Each device event is written to the journal before
anything is done with it, and ACKed to the device only then, so a controller
killed at any point gets the event again after restart (SPEC §6.3). The same
code runs a real table (a console dealer) and a simulated one (the virtual
dealer of ``simulators``).

Procedure per round (58 Pa. Code 649a.3(b), 649a.11, 649a.12; CA TCP
standards of play): the deck in the shoe is dealt 3 cards to each seat and 3
to the dealer, one at a time in turn; each seat plays or folds; the dealer's
hand is revealed only after every decision (816a.1); the round is settled and
the result journaled before it is posted (816a.1), then the cards are
collected into the discard rack. Between rounds the verified deck comes out
of the shuffler into the shoe and the deck just played goes from the discard
rack into the shuffler to be shuffled and verified.

On restart, custody is restored from the journal; a round that was in
progress is held for a supervisor, never silently resumed (issue 5).

Every card accounted for (issue 14): per shoe load the draw index runs 0, 1,
2 ... with no gap; a gap, a card event the host had to refuse, or a shoe that
lets out more cards than it reported holds the round: a card is never shifted
onto the next seat. Card faces are sealed in the journal until the reveal,
and each card dealt is committed to on the public stream.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import structlog

from devices import CardShoe, Shuffler
from firmware_bridge.errors import LinkError
from firmware_bridge.link import DeviceEvent, DeviceIdentity, LinkNotice, RefusedEvent
from protocols.cards import BackColour, Card
from protocols.clock import REAL_CLOCK, Clock
from protocols.messages import (
    CardDrawn,
    CardUnreadable,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceState,
    Message,
    ShoeEmpty,
    ShoeLoaded,
    ShufflerFault,
)
from protocols.vectors import message_to_dict

from . import anchors as anchor_check, recovery
from .console import Command, Console, Expectation, VoidArrived, VoidPolicy
from .custody import CustodyViolation, Deck, DeckCustody, DeckPlace, Rule
from .errors import (
    DeviceFault,
    DeviceTimeout,
    RoundHeld,
    RoundVoided,
    Sealed,
    ShufflerStopped,
    TableError,
)
from .journal import Journal, b64, fresh_seal_nonce
from .round import RoundMachine
from .rules.hands import dealer_qualifies, evaluate
from .rules.profiles import PENNSYLVANIA, RulesProfile
from .rules.settlement import Decision, SeatSettlement, Tables, Wagers, settle_seat
from .rules.strategy import Decide, q64_player
from .sealing import CARD_FACE, commitment, mask_cards

log = structlog.get_logger("table")
P = DeckPlace


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
    #: step wait for its own event (issue 18); kept so existing callers keep working
    settle_s: float = 0.0
    #: A person at a real table moves decks and draws cards at a person's pace; wait
    #: this long for the device event confirming a dealer's action (a virtual
    #: dealer is held to ``event_timeout_s``).
    dealer_timeout_s: float = 86_400.0
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
    decision: Decision
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
class _Round:
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


class TableController:
    """Runs rounds on one table.

    ``events``: the queue both drivers' links deliver into (opened with
    ``ack_on_delivery=False`` when a journal is kept). ``seats``: 1..7 player
    positions. ``wagers``: each seat's stake per round (the play wager equals
    the ante). ``tables``: the filed paytables. ``journal``: where every
    transition is written before it is acted on, opened with the table key
    (None: keep no record). ``console``: dealer/supervisor commands;
    ``auto_dealer``: the dealer's own confirmations (close bets, collect) need
    no command (a simulated table). ``cursor``: the devices' last journaled
    events (:func:`table.recovery.device_cursor`; the same object the links'
    ``resume`` hook reads). ``anchors``: signed checkpoints seen off the journal's
    own files (the head file is added): a journal behind one is not resumed until a
    supervisor acknowledges it. Raises :class:`RoundHeld`, :class:`DeviceTimeout`,
    :class:`DeviceFault`, :class:`SupervisorRequired`, and
    :class:`~table.journal.JournalWriteError` when the journal cannot be
    written (nothing is then acted on or acknowledged).
    """

    #: cards in a verified deck: what the shoe holds when it is loaded (SPEC §4.2)
    DECK_SIZE = 52

    def __init__(
        self,
        shuffler: Shuffler,
        shoe: CardShoe,
        events: "queue.Queue[DeviceEvent]",
        dealer: Dealer,
        custody: DeckCustody,
        *,
        seats: int,
        ante_cents: int,
        tables: Tables,
        profile: RulesProfile = PENNSYLVANIA,
        decide: Decide = q64_player,
        timing: TableTiming | None = None,
        journal: Journal | None = None,
        console: Console | None = None,
        auto_dealer: bool = True,
        side_wagers: dict[str, int] | None = None,
        cursor: recovery.DeviceCursor | None = None,
        anchors: list[dict[str, Any]] | None = None,
    ) -> None:
        if not 1 <= seats <= 7:
            raise ValueError(f"seats must be 1..7, got {seats}")
        if ante_cents <= 0:
            raise ValueError("ante_cents must be positive")
        if journal is not None and journal.key is None:
            raise ValueError("the controller's journal needs the table key (it seals cards and signs checkpoints)")
        self.shuffler = shuffler
        self.shoe = shoe
        self.events = events
        self.dealer = dealer
        self.custody = custody
        self.seats = seats
        self.ante_cents = ante_cents
        self.side_wagers = dict(side_wagers or {})
        self.tables = tables
        self.profile = profile
        self.decide = decide
        self.timing = timing or TableTiming()
        self.journal = journal
        self.table_id = journal.table_id if journal is not None else "table"
        self.console = console or Console()
        self.console.status = self.status
        self.auto_dealer = auto_dealer
        self.cursor = cursor or recovery.DeviceCursor()
        #: signed checkpoints seen off the journal's own files (the floor's anchors, MQTT)
        self.anchors = list(anchors or [])
        self.rounds_played = 0
        self.rounds_opened = 0
        self.cards_read = 0
        self.held: dict[str, Any] | None = None
        self._next_draw = 0  # the draw index the shoe's next card must carry (SPEC §4.3)
        self._round: _Round | None = None
        self._subscribers: list[Callable[[TableEvent], None]] = []
        self._lock = threading.Lock()
        self._links = {shuffler.link.name: shuffler.link, shoe.link.name: shoe.link}
        self._shoe_name = shoe.link.name
        self._shuffler_name = shuffler.link.name
        self._held_round: _Round | None = None  # a round held in this process (what a release resumes)
        self._links_down: dict[str, float] = {}  # link name -> when it went down (monotonic s)
        self._alarms: list[dict[str, Any]] = []  # standing alarms, until handled (status "alarms")
        self._held_void: tuple[str, str] | None = None  # a held round voided (take_held_void)
        #: a voided round whose cards may still arrive from the shoe (drawn while it was away),
        #: until the shoe is loaded again: they are journaled as that round's late cards
        self._in_flight_round: str | None = None
        self.console.wake = self._wake
        self.console.acknowledge = self.acknowledge

    # -- public API --------------------------------------------------------------------

    def subscribe(self, callback: Callable[[TableEvent], None]) -> None:
        """Call ``callback`` with every :class:`TableEvent` (in the controller's thread)."""
        self._subscribers.append(callback)

    def seat_view(self, seat: int) -> SeatView:
        """The current round as ``seat`` may see it: only its own cards; the dealer's
        hand and the result only after every seat has decided (816a.1)."""
        with self._lock:
            r = self._round
            if r is None:
                raise TableError("no round in progress")
            if seat not in r.wagers:
                raise ValueError(f"seat must be 1..{self.seats}, got {seat}")
            revealed = not r.machine.dealer_hand_sealed
            res = r.results.get(seat)
            return SeatView(r.round_id, seat, tuple(r.hands.get(seat, ())), r.decisions.get(seat),
                            tuple(r.dealer) if revealed else None, res.net if res else None)

    def dealer_hand(self) -> list[Card]:
        """The dealer's cards; raises :class:`Sealed` until every seat has decided."""
        with self._lock:
            r = self._round
            if r is None:
                raise TableError("no round in progress")
            if r.machine.dealer_hand_sealed:
                raise Sealed(f"round {r.round_id}: the dealer's hand is sealed until every seat has decided")
            return list(r.dealer)

    def status(self) -> dict[str, Any]:
        """Table status for the consoles and every front door (nothing sealed, 816a.1):
        deck places, the round and its step (seats, wagers, how many cards each
        holds, decisions once made), a held round, what the table waits for now
        (``waiting_for``: in words, and the command that does it), both links'
        health, the standing alarms, and whether a void now needs a second
        supervisor."""
        r = self._round
        round_info = None
        if r is not None:
            with self._lock:
                seats = {str(s): {"wagers": {k: v for k, v in dataclasses.asdict(w).items() if v},
                                  "cards": len(r.hands.get(s, ())),
                                  "decision": r.decisions[s].value if s in r.decisions else None}
                         for s, w in r.wagers.items()}
            round_info = {"round_id": r.round_id, "number": r.number, "state": r.machine.state,
                          "deck_id": r.deck.deck_id, "back_colour": str(r.deck.back_colour),
                          "dealer_cards": len(r.dealer), "seats": seats}
        exp = self.console.expectation
        links = {}
        for name, link in self._links.items():
            ident = link.identity
            links[name] = {"up": link.alive, "state": link.state.value,
                           "serial": ident.serial_number if ident else None,
                           "firmware": ident.firmware_version if ident else None}
        with self._lock:
            alarms = [dict(a) for a in self._alarms]
        held = None
        if self.held is not None:
            held = {k: v for k, v in self.held.items() if k in ("round_id", "deck_id", "reason", "number", "settled",
                                                                 "cause")}
            if self.held.get("void_request"):
                held["void_requested_by"] = self.held["void_request"]["supervisor"]
        return {
            "places": self.custody.places(),
            "decks": [{"deck_id": d.deck_id, "back_colour": str(d.back_colour), "place": d.state}
                      for d in self.custody.decks.values()],
            "rounds_played": self.rounds_played,
            "round": round_info,
            "held": held,
            "violations": len(self.custody.violations),
            "waiting_for": exp.to_dict() if exp is not None else None,
            "links": links,
            "alarms": alarms,
            "void_needs_second_supervisor": self.console.void_policy.needs_second,
        }

    # -- journal, events, acks -------------------------------------------------------------

    def _publish(self, kind: str, audience: str = "table", **data: Any) -> None:
        ev = TableEvent(kind, self._round.round_id if self._round else None, data, audience)
        for cb in self._subscribers:
            try:
                cb(ev)
            except Exception:  # noqa: BLE001 - a subscriber's bug must not stop the table
                log.exception("subscriber_failed", kind=kind)

    def _record(self, kind: str, *, sealed: dict[str, Any] | None = None, **body: Any) -> None:
        """Journal one entry in the current round's context (journal before act)."""
        if self.journal is not None:
            r = self._round
            rid = r.round_id if r else body.pop("round_id", None)
            did = r.deck.deck_id if r else body.pop("deck_id", None)
            body.pop("round_id", None)
            body.pop("deck_id", None)
            self.journal.append(kind, round_id=rid, deck_id=did, sealed=sealed, **body)

    def _op(self, op: str, **args: Any) -> None:
        """Journal a custody step the controller takes itself (replayed by
        :func:`table.recovery.apply`)."""
        self._record("custody", op=op, **args)

    def _violation(self, v: CustodyViolation) -> None:
        """Journal a broken rule: its detail can name a sealed card, so it is kept sealed
        and only its masked form is in the clear (816a.1)."""
        sealed = {"detail": v.detail} if self.journal is not None and CARD_FACE.search(v.detail) else None
        self._record("violation", rule=v.rule.value, detail=mask_cards(v.detail), citation=v.citation,
                     sealed=sealed)

    def _answer(self, ev: DeviceEvent) -> None:
        """ACK (or NAK, for a refused event) a device event once it is journaled."""
        if self.journal is not None and self.journal.in_batch:
            raise RuntimeError("a device event is answered only once its entry is durable, never inside a batch")
        link = self._links.get(ev.source)
        if link is not None:
            link.acknowledge(ev)

    def checkpoint(self) -> dict[str, Any] | None:
        """Sign the journal's head now (round boundaries, the table's opening, shutdown);
        returns the signed checkpoint, None without a journal."""
        if self.journal is None:
            return None
        state = recovery.checkpoint_state(self.custody, rounds_played=self.rounds_played,
                                          rounds_opened=self.rounds_opened, cards_read=self.cards_read,
                                          next_draw=self._next_draw, cursor=self.cursor, held=self.held)
        signed = self.journal.checkpoint(**state)
        self._publish("checkpoint", **{k: v for k, v in signed.items() if k != "digests"})
        return signed

    def close(self) -> None:
        """At shutdown: answer any command still waiting for one (the table stops waiting),
        and sign what the journal holds (a clean stop leaves no unsigned tail)."""
        self.console.expect(None)
        if self.journal is not None and self.journal.last_seq:
            last = self.journal.last("checkpoint")
            if last is None or last.seq != self.journal.last_seq:
                self.checkpoint()

    def _identify(self, source: str) -> None:
        """Journal which device a link speaks to (its boot id: the cursor's key)."""
        ident = self._links[source].identity
        if ident is None:
            return
        self.cursor.identified(source, ident.serial_number, ident.boot_id)
        self._record("device", source=source, serial=ident.serial_number, boot_id=ident.boot_id,
                     firmware=ident.firmware_version)

    def _next_event(self, timeout_s: float, what: str) -> DeviceEvent:
        """The next device event, journaled then answered; link notices and refused
        events are handled here. A ``CardDrawn`` is returned unjournaled: the caller
        journals it where it goes (:meth:`_card_entry`), then answers it."""
        clock = self.timing.clock
        deadline = clock.monotonic() + timeout_s
        while True:
            now = time.monotonic()  # the link's deadlines are real time; the event's is on the clock
            remaining = clock.real_s(deadline - clock.monotonic())  # real seconds
            down = self._link_down_deadline()
            if down is not None and self._round is not None:
                if now >= down[1]:  # a round whose device stays away is held within the link's timeout
                    raise DeviceFault(f"the {down[0]} link has been down for more than "
                                      f"{self._links[down[0]].config.reconnect_wait_s:g} s while waiting for {what}")
                remaining = min(remaining, down[1] - now)
            try:
                ev = self.events.get(timeout=remaining) if remaining > 0 else self.events.get_nowait()
            except queue.Empty:
                if down is not None and self._round is not None and clock.monotonic() < deadline:
                    continue  # the link's own deadline: checked at the top
                for link in self._links.values():
                    if not link.alive:
                        raise DeviceFault(f"{link.name} link down while waiting for {what}") from None
                raise DeviceTimeout(f"nothing within {timeout_s:g} s while waiting for {what}") from None
            msg = ev.message
            if isinstance(msg, ConsoleWake):  # a void was accepted: carried out within this device step
                self._check_void(self._round)
                continue
            if isinstance(msg, LinkNotice):
                self._on_notice(ev, msg)
                continue
            if isinstance(msg, RefusedEvent):
                self._on_refused(ev, msg)
                continue
            if isinstance(msg, CardDrawn):
                return ev
            self._record("device_event", source=ev.source, dseq=ev.seq, message=journaled_message(msg))
            self.cursor.journaled(ev.source, ev.seq)
            self._answer(ev)
            log.debug("device_event", source=ev.source, message=type(msg).__name__)
            if isinstance(msg, ShoeLoaded) and ev.source == self._shoe_name:
                self._next_draw = 0
                self._in_flight_round = None
            return ev

    def _wake(self) -> None:
        """Wake the controller from a device wait: a void was accepted (Console.wake)."""
        try:
            self.events.put_nowait(DeviceEvent("console", ConsoleWake(), time.monotonic()))
        except queue.Full:
            pass  # events are waiting: the controller reads them, and checks the void at each step

    def _link_down_deadline(self) -> tuple[str, float] | None:
        """The link down the longest and when its timeout (``reconnect_wait_s``) ends."""
        if not self._links_down:
            return None
        name, since = min(self._links_down.items(), key=lambda kv: kv[1])
        return name, since + self._links[name].config.reconnect_wait_s

    def _on_notice(self, ev: DeviceEvent, msg: LinkNotice) -> None:
        self._record("link", source=ev.source, notice=msg.kind, detail=mask_cards(msg.detail))
        if msg.kind == "link_down":
            self._links_down.setdefault(ev.source, time.monotonic())
            self._alarm("device_down", f"the {ev.source} link is down: {mask_cards(msg.detail)}",
                        key=f"down:{ev.source}")
        elif msg.kind in ("link_up", "device_rebooted"):
            self._links_down.pop(ev.source, None)
            self._clear_alarm(f"down:{ev.source}")
        if msg.kind in ("link_up", "device_rebooted"):
            self._identify(ev.source)
        if msg.kind in ("identity_changed", "handshake_refused"):
            raise DeviceFault(f"{ev.source}: {msg.detail}; a supervisor must inspect the device")
        if msg.kind == "device_rebooted" and self._round is not None and ev.source == self._shoe_name:
            raise DeviceFault("the shoe rebooted during the round: card reads may be missing")
        log.warning("link_notice", source=ev.source, notice=msg.kind, detail=mask_cards(msg.detail))

    def _on_refused(self, ev: DeviceEvent, msg: RefusedEvent) -> None:
        """A device event the link refused (undecodable, or not from this kind of device,
        SPEC §4.5, §6.3): journaled as an incident, then NAKed. A card the shoe could
        not report leaves a card unaccounted for: the round is held (never a shifted
        deal); an unreadable count puts the deck being shuffled out of service."""
        what = f"{ev.source} sent {msg.name}, refused: {msg.reason.replace('_', ' ')}"
        sealed = {"detail": msg.detail, "payload": msg.payload.hex()} if self.journal is not None else None
        self._record("incident", what=what, source=ev.source, dseq=ev.seq, type=msg.type, sealed=sealed)
        self.cursor.journaled(ev.source, ev.seq)
        self._answer(ev)
        log.error("event_refused", source=ev.source, message=msg.name, reason=msg.reason)
        if msg.reason == "undecodable" and msg.type == DeckVerified.TYPE and ev.source == self._shuffler_name:
            deck = self._in(P.SHUFFLING, P.IN_SHUFFLER)
            if deck is not None:
                with self._batch():
                    self._op("fail_verification", colour=str(deck.back_colour))
                    self.custody.take_out_of_service(deck.back_colour)
                v = CustodyViolation(Rule.DECK_INCOMPLETE, f"the shuffler's count of deck {deck.deck_id} "
                                     f"({deck.back_colour}) could not be read: out of service")
                self._violation(v)
                raise v
        if self._round is None:
            if msg.type in (CardDrawn.TYPE, CardUnreadable.TYPE) and ev.source == self._shoe_name:
                raise DeviceFault(f"{what}: a card left the shoe with no round in progress")
            return
        if msg.reason == "wrong_device":
            raise CustodyViolation(Rule.EVENT_FROM_WRONG_DEVICE, f"{msg.name} arrived on the {ev.source}'s link")
        raise CustodyViolation(Rule.CARD_UNACCOUNTED if ev.source == self._shoe_name else Rule.EVENT_FROM_WRONG_DEVICE,
                               f"the {ev.source} sent {msg.name} that could not be decoded: "
                               f"a card may have left the shoe unrecorded")

    def _card_entry(self, ev: DeviceEvent, card: Card, to: int | None, *, round_id: str | None = None,
                    **flags: Any) -> None:
        """Journal one card the shoe read (sealed until the reveal, with a commitment
        to it, issue 14), then answer the shoe. ``to``: 0 the dealer, 1..7 a seat,
        None a card dealt to nobody (``flags`` say why: ``late``, ``early``,
        ``extra``, ``refused`` with the rule, ``gap``)."""
        msg = ev.message
        r = self._round
        rid = round_id or (r.round_id if r is not None else (self.held or {}).get("round_id"))
        body: dict[str, Any] = {"dseq": ev.seq, "draw_index": msg.draw_index, "to": to,
                                "back_colour": str(msg.back_colour), **flags}
        if ev.source != "shoe":  # "shoe" is the default a reader assumes (journal format 3)
            body["source"] = ev.source
        if self.journal is not None:
            # The commitment's nonce comes from the sealed blob's fresh nonce and the round's
            # seal key (journal.commit_nonce): secret while the face is sealed, opened with it.
            seal_nonce = fresh_seal_nonce()
            nonce = self.journal.commit_nonce(rid, seal_nonce)
            body["commit"] = b64(bytes.fromhex(commitment(self.table_id, rid, msg.draw_index, str(card), nonce)))
            self._record("card_read", round_id=rid, sealed={"card": str(card)}, seal_nonce=seal_nonce, **body)
        self.cursor.journaled(ev.source, ev.seq)
        self._answer(ev)
        if ev.source == self._shoe_name:
            self._next_draw = msg.draw_index + 1

    def _check_draw(self, ev: DeviceEvent) -> CustodyViolation | None:
        """Every card accounted for: per shoe load the draw index runs 0, 1, 2 ... with
        no gap (SPEC §4.3); a gap means a card left the shoe unreported."""
        index = ev.message.draw_index
        expected = self._next_draw % 256
        if ev.source == self._shoe_name and index != expected:
            return CustodyViolation(Rule.CARD_UNACCOUNTED, f"the shoe's draw {index} follows draw {expected - 1}: "
                                    f"{(index - expected) % 256} card(s) left the shoe unrecorded")
        return None

    def _apply(self, msg: Message) -> Deck | None:
        """Feed one non-card device event to custody (already journaled: the replay of
        :func:`table.recovery.apply` does the same)."""
        c = self.custody
        if isinstance(msg, DeckInserted):
            return c.on_deck_inserted(msg.back_colour)
        if isinstance(msg, DeckVerified):
            try:
                return c.on_deck_verified(msg)
            except CustodyViolation as v:
                self._violation(v)
                raise
        if isinstance(msg, DeckDelivered):
            return c.on_deck_delivered(msg.back_colour)
        if isinstance(msg, ShoeLoaded):
            return c.on_shoe_loaded(msg.back_colour)
        if isinstance(msg, ShufflerFault):
            shuffling = [d for d in c.decks.values() if d.place is P.SHUFFLING]
            if shuffling:
                c.on_shuffle_fault(shuffling[0].back_colour)
            self._record("incident", what=f"shuffler fault: {msg.code.name.lower()}")
            raise ShufflerStopped(f"shuffler fault: {msg.code.name.lower()}; clear it, then the shuffle is repeated")
        if isinstance(msg, ShoeEmpty):
            raise DeviceFault(f"the shoe is empty after {msg.draws} draws")
        return None

    def _expect(self, kind: type[Message], timeout_s: float, what: str, *, cards: bool = False) -> Any:
        """Consume events (applying each to custody) until one of ``kind`` arrives.
        ``cards``: return card events (the deal); otherwise a card is a stray, handled
        by :meth:`_stray_card`. Returns the :class:`DeviceEvent` for a card, else the
        message."""
        while True:
            ev = self._next_event(timeout_s, what)
            msg = ev.message
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                if cards and self._round is not None:
                    return ev
                self._stray_card(ev)
                continue
            try:
                self._apply(msg)
            except CustodyViolation as v:
                if v.rule is not Rule.DECK_INCOMPLETE:
                    self._violation(v)
                raise
            if isinstance(msg, kind):
                return msg

    def _stray_card(self, ev: DeviceEvent) -> None:
        """A card event when no card is being dealt: read after a restart for the held
        round (taken into its custody), or drawn with no round (an incident), or
        drawn while the round is past its deal (one too many: a misdeal)."""
        msg = ev.message
        if self._round is not None:  # past the deal: a card beyond it
            if isinstance(msg, CardDrawn):
                self._card_entry(ev, msg.card, None, extra=True)
            self._record("incident", what="card drawn beyond the deal", draw_index=msg.draw_index)
            raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"draw {msg.draw_index} beyond the 3 cards to each seat "
                                   "and the dealer: misdeal")
        if self.held is not None and isinstance(msg, CardDrawn):
            self._late_card(ev)  # drawn for the held round before a restart
            return
        if self.held is None and self._in_flight_round is not None and ev.source == self._shoe_name:
            self._voided_late_card(ev)  # drawn for a round voided while the shoe was away
            return
        if isinstance(msg, CardDrawn):
            self._stray_entry(ev)
        self._record("incident", what="card drawn with no round in progress", draw_index=msg.draw_index)
        raise DeviceFault("a card was drawn with no round in progress: incident recorded")

    def _stray_entry(self, ev: DeviceEvent) -> None:
        """Journal a card read with no round in progress, dealt to nobody; custody
        counts it out of the deck in the shoe (a later read of it is a duplicate).
        Read twice already: the duplicate is recorded as a violation; the caller
        goes on as for any stray (an incident, no round to hold)."""
        msg = ev.message
        try:
            self.custody.on_card_read_between_rounds(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self._card_entry(ev, msg.card, None, stray=True, refused=v.rule.value)
            self._violation(v)
            return
        self._card_entry(ev, msg.card, None, stray=True)

    # -- start-up and recovery -------------------------------------------------------------

    @staticmethod
    def resume_hook(journal: Journal | None) -> Callable[[DeviceIdentity], int | None]:
        """For ``DeviceDriver.open(resume=...)``: the SEQ of the last event journaled for a
        device identity in its current boot (:class:`table.recovery.DeviceCursor`). Pass
        the same cursor to the controller: ``TableController(..., cursor=hook.cursor)``."""
        cursor = recovery.device_cursor(journal) if journal is not None else recovery.DeviceCursor()
        hook = cursor.resume
        return hook

    def recover(self) -> None:
        """Restore custody and counts from the journal (:mod:`table.recovery`); hold a
        round found in progress for a supervisor, never resume it silently. Entries
        after the last signed checkpoint must carry valid MACs (nobody edited them
        while the controller was down): otherwise :class:`JournalTampered`."""
        j = self.journal
        if j is None:
            return
        for source in self._links:
            self.cursor.identified(source, *self._ident(source))
        if j.last_seq == 0:
            with self._batch():
                self._record("decks_registered", decks=self.custody.snapshot()["decks"], seats=self.seats)
                for source in self._links:
                    self._identify(source)
            # An empty journal where a signed checkpoint says there was one (the journal deleted
            # or moved away): cut short to nothing, as much an incident as a tail cut short.
            self._check_anchors()
            return
        bad = j.check_tail()
        if bad is not None:
            raise JournalTampered(f"journal entry {bad} was changed after it was written (its MAC does not hold); "
                                  "a supervisor must examine the journal (tablectl audit verify)")
        restored = recovery.restore(j, self.custody)
        self.custody = restored.custody
        self.rounds_played, self.rounds_opened = restored.rounds_played, restored.rounds_opened
        self._check_anchors()
        self.cards_read = restored.cards_read
        self._next_draw = restored.next_draw
        with self._batch():
            if restored.held is not None:
                self.held = h = restored.held
                j.append("round", round_id=h["round_id"], deck_id=h["deck_id"], step="held", reason=h["reason"],
                         settled=h["settled"], number=h["number"],
                         **({"decisions_final": True} if h.get("decisions_final") else {}))
                log.error("round_held", round_id=h["round_id"], reason=h["reason"], settled=h["settled"])
            self._record("restart", places=self.custody.places(), rounds_played=self.rounds_played)
            for source in self._links:
                self._identify(source)
        log.info("recovered", places=self.custody.places(), rounds_played=self.rounds_played,
                 held=self.held is not None)

    def _check_anchors(self) -> None:
        """A journal behind a signed checkpoint seen elsewhere (cut short, or an older copy
        swapped in) is not resumed until a supervisor acknowledges it; the incident and
        the acknowledgement are journaled, and round numbers go on past the anchor's so
        none is used twice (issue 14). An anchor refused (not this table's signature,
        another table's, malformed: :func:`table.anchors.classify`) is an incident too,
        held for a supervisor the same way (issue 24)."""
        j = self.journal
        assert j is not None
        check = anchor_check.classify(self.anchors, j)
        if not check.incident:
            return
        for r in check.refused:
            what = (f"an anchor was refused ({r.source}): {r.reason}; a forged or malformed anchor is an attack "
                    "in progress, not the absence of one")
            self._record("incident", what=what, anchor_source=r.source, anchor_refused=r.reason,
                         anchor_seq=r.seq, journal_seq=j.last_seq)
            log.error("anchor_refused", source=r.source, reason=r.reason, journal_seq=j.last_seq)
            self._publish("incident", what=what)
        cp = max(check.behind, key=lambda c: c["seq"]) if check.behind else None
        if cp is not None:
            what = (f"the journal is behind a signed checkpoint seen off the table (entry {cp['seq']}, "
                    f"{cp.get('rounds_opened')} rounds opened): it was cut short or an older copy was put in its place")
            self._record("incident", what=what, anchor_seq=cp["seq"], anchor_head=cp.get("head"), journal_seq=j.last_seq)
            log.error("journal_behind_anchor", anchor_seq=cp["seq"], journal_seq=j.last_seq)
            self._publish("incident", what=what)
            waiting = f"a supervisor to acknowledge that the journal is behind checkpoint {cp['seq']}"
        else:
            waiting = f"a supervisor to acknowledge {len(check.refused)} refused anchor(s) (a forged anchor?)"
        cmd = self.console.wait(("acknowledge_incident",), waiting, role="supervisor", voids=False)
        self._record("supervisor", action="acknowledge_incident", supervisor=cmd.person,
                     anchor_seq=cp["seq"] if cp is not None else None,
                     **({"anchors_refused": len(check.refused)} if check.refused else {}), **self._by(cmd))
        if cp is not None:
            self.rounds_opened = max(self.rounds_opened, int(cp.get("rounds_opened") or 0))
        cmd.answer(ok=True, acknowledged=cp["seq"] if cp is not None else "refused anchors")

    def _ident(self, source: str) -> tuple[str, int]:
        ident = self._links[source].identity
        return (ident.serial_number, ident.boot_id) if ident is not None else ("?", 0)

    def prepare(self) -> None:
        """Open the table: restore from the journal, take in what the devices held,
        move the decks until ready; sign a checkpoint. A round held across a restart
        is left for :meth:`play_round`, which has the supervisors resolve it first and
        reports it as any round (its result when released, :class:`RoundVoided`, or a
        hold again), so a caller's round loop sees it like every other round."""
        self.recover()
        self.settle_devices()
        if self.held is None:
            self.advance()
        if self.journal is not None:
            if self.journal.last("table_open") is None:
                # The table opens only now: the first deck is verified and in the shoe (issue 5).
                self._record("table_open", places=self.custody.places())
            self.checkpoint()

    def settle_devices(self) -> None:
        """At start-up: take in the events the devices have already delivered (sent but
        never journaled and ACKed before a restart). Nothing waits here: an event
        still on its way is taken by the step that waits for it (issue 18)."""
        while True:
            try:
                ev = self._next_event(0, "events held by the devices")
            except DeviceTimeout:
                return
            msg = ev.message
            if isinstance(msg, CardDrawn):
                if self.held is not None:
                    self._late_card(ev)
                else:
                    self._stray_entry(ev)
                    self._record("incident", what="card read after a restart with no round in progress",
                                 draw_index=msg.draw_index)
            elif isinstance(msg, CardUnreadable):
                self._record("incident", what="card unreadable after a restart", draw_index=msg.draw_index)
            else:
                try:
                    self._apply(msg)
                except CustodyViolation as v:
                    if v.rule is not Rule.DECK_INCOMPLETE:
                        self._violation(v)
                    raise

    def _voided_late_card(self, ev: DeviceEvent) -> None:
        """A card the shoe read for a round voided while it was away (its event arrives once
        the shoe is back): journaled with that round, dealt to nobody; the round's cards
        are collected already, so nothing is held (a gap in the draws is recorded)."""
        msg = ev.message
        gap = {"gap": True} if self._check_draw(ev) is not None else {}
        if isinstance(msg, CardDrawn):
            self._card_entry(ev, msg.card, None, round_id=self._in_flight_round, late=True, voided=True, **gap)
        else:
            self._next_draw = msg.draw_index + 1
        log.warning("card_after_void", draw_index=msg.draw_index, **gap)

    def _late_card(self, ev: DeviceEvent) -> None:
        """A card read that arrived after a restart, for the round now held."""
        msg = ev.message
        try:
            self.custody.on_card_read(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self._card_entry(ev, msg.card, None, late=True, refused=v.rule.value)
            self._violation(v)
            return
        self.cards_read += 1
        self._card_entry(ev, msg.card, None, late=True)

    # -- deck movements ----------------------------------------------------------------------

    def _in(self, *places: DeckPlace) -> Deck | None:
        return next((d for d in self.custody.decks.values() if d.place in places), None)

    def advance(self) -> None:
        """Move the decks until the table is ready for a round: a verified deck in
        the shoe, not the one played last, and the other deck verified in the
        shuffler (649a.3(b)). Works from any custody state, so it also finishes
        a procedure a restart interrupted. A deck out of service is taken out of
        the shuffler, then a supervisor registers its replacement (COMAR 36.05.03.27 C)."""
        stops = 0
        for _ in range(40):
            c = self.custody
            out = self._in(P.OUT_OF_SERVICE)
            if out is not None:
                if self._shuffler_holds(out.back_colour):
                    self._step("take_from_shuffler", out.back_colour, DeckDelivered,
                               f"the out-of-service {out.back_colour} deck {out.deck_id} out of the shuffler")
                    continue
                self._replace_deck(out)
                continue
            in_shuffler = self._in(P.IN_SHUFFLER, P.SHUFFLING, P.VERIFIED)
            in_shoe = self._in(P.DELIVERED, P.IN_SHOE, P.IN_PLAY)
            if (in_shoe is not None and in_shoe.place is P.IN_SHOE and in_shoe is not c.last_played
                    and in_shuffler is not None and in_shuffler.place is P.VERIFIED):
                self.console.expect(None)
                return
            if in_shoe is not None and in_shoe.place is P.IN_PLAY:
                raise TableError(f"deck {in_shoe.deck_id} still has a round's cards out; resolve the held round")
            if in_shuffler is not None and in_shuffler.place is P.SHUFFLING:
                self._await_verification(in_shuffler)
            elif in_shuffler is not None and in_shuffler.place is P.IN_SHUFFLER:
                try:
                    self._shuffle(in_shuffler)
                except ShufflerStopped as exc:
                    stops += 1
                    if stops > 3:
                        raise
                    log.warning("shuffle_repeated", reason=str(exc), attempt=stops)
            elif in_shoe is not None and in_shoe.place is P.DELIVERED:
                self._step("load_shoe", in_shoe.back_colour, ShoeLoaded, f"the {in_shoe.back_colour} deck in the shoe")
            elif in_shuffler is not None and in_shoe is None and in_shuffler is not c.last_played:
                self._step("take_from_shuffler", in_shuffler.back_colour, DeckDelivered,
                           f"the {in_shuffler.back_colour} deck out of the shuffler")
            elif in_shuffler is None:
                ready = [d for d in c.decks.values() if d.place in (P.IN_DISCARD_RACK, P.OFF_TABLE) and d is not in_shoe]
                inside = self._shuffler_colour() if ready else None  # one there already (a restart): that one
                nxt = next((d for d in ready if d.back_colour == inside), ready[0] if ready else None)
                if nxt is None:
                    raise TableError(f"no deck can go into the shuffler: {c.places()}")
                self._step("insert_deck", nxt.back_colour, DeckInserted, f"the {nxt.back_colour} deck in the shuffler")
            else:
                raise TableError(f"deck custody is stuck at {c.places()}; a supervisor must inspect the table")
        raise TableError(f"the decks did not reach a ready state: {self.custody.places()}")

    def _shuffler_colour(self) -> BackColour | None:
        """The back colour of the deck the shuffler holds (its own status), None when empty."""
        try:
            st = self.shuffler.status()
        except LinkError as exc:
            raise self._device_away("shuffler", exc) from exc
        return None if st.state is DeviceState.IDLE else st.back_colour

    def _shuffler_holds(self, colour: BackColour) -> bool:
        """Whether the shuffler still holds a deck of ``colour`` (its own status)."""
        try:
            st = self.shuffler.status()
        except LinkError as exc:
            raise self._device_away("shuffler", exc) from exc
        return st.state is not DeviceState.IDLE and st.back_colour == colour

    def _step(self, action: str, colour: BackColour, expect: type[Message], what: str) -> None:
        """Journal the prompt, ask the dealer, wait for the device to confirm.

        When the device already shows the action done (a restart came between the
        action and its record) its event is on its way, resent within the device's
        retransmit schedule (SPEC §6.3); when none comes in that time the event was
        taken before the restart by a controller that kept no journal: the table
        adopts what the device reports (journaled as an incident) and goes on."""
        status = self._device_status(action, colour)
        if status == "occupied":  # the shoe holds another deck, of which the table has no record
            self._clear_shoe(colour)
        elif status == "done":
            device = "shoe" if action == "load_shoe" else "shuffler"
            self.console.expect(Expectation(
                "device_record", f"the {device}'s own record of {what} (it shows it done before the restart; "
                f"resent within {self._resend_window_s:g} s, else the table takes the {device}'s word)", "device",
                colour=str(colour), deck_id=self.custody.deck(colour).deck_id))
            try:
                self._expect(expect, self._resend_window_s, what)
            except DeviceTimeout:
                self._adopt(action, colour, what)
            self.console.expect(None)
            return
        self._record("prompt", action=action, colour=str(colour))
        self.console.expect(Expectation(action, f"the dealer to put {what}" if action != "take_from_shuffler"
                                        else f"the dealer to take {what}", "device", (),
                                        round_id=self._round.round_id if self._round else None,
                                        colour=str(colour), deck_id=self.custody.deck(colour).deck_id))
        args = () if action == "take_from_shuffler" else (colour,)
        getattr(self.dealer, action)(*args)
        self._expect(expect, self._dealer_wait_s, what)

    @property
    def _resend_window_s(self) -> float:
        """How long a device takes at most to resend an event it holds (SPEC §6.3, §7):
        twice the links' longest retransmit timeout."""
        return 2 * max(link.config.retransmit_max_ms for link in self._links.values()) / 1000

    #: how often the shoe's status is read while the dealer empties it (it sends no event for that)
    SHOE_CLEAR_POLL_S = 0.25

    def _clear_shoe(self, wanted: BackColour) -> None:
        """The shoe holds a deck the table has no record of (a restart without the journal,
        or a stub left in it): an incident; the dealer is asked to take it out into the
        discard rack (it is counted in the shuffler before it is dealt), and the table
        waits until the shoe is empty (its status: a shoe sends no event when emptied)."""
        try:
            found = self.shoe.status().back_colour
        except LinkError as exc:
            raise self._device_away("shoe", exc) from exc
        text = (f"the shoe holds a {found} deck the table has no record of loading: it goes to the discard rack, "
                f"and through the shuffler to be counted before it is dealt")
        self._record("incident", what=text)
        log.warning("shoe_holds_unknown_deck", back_colour=str(found))
        self._alarm("incident", text)
        self._publish("incident", what=text)
        deck = next((d for d in self.custody.decks.values() if d.back_colour == found), None)
        self.console.expect(Expectation("collect", f"the dealer to take the {found} deck out of the shoe and put it "
                                        f"in the discard rack, before the {wanted} deck is loaded", "device", (),
                                        colour=str(found), deck_id=deck.deck_id if deck else None))
        self.dealer.collect()
        deadline = time.monotonic() + self._dealer_wait_s
        while True:
            try:
                if self.shoe.status().state is DeviceState.IDLE:
                    break
            except LinkError as exc:
                raise self._device_away("shoe", exc) from exc
            if time.monotonic() > deadline:
                raise DeviceTimeout(f"the shoe still holds the {found} deck after {self._dealer_wait_s:g} s")
            time.sleep(self.SHOE_CLEAR_POLL_S)
        self.console.expect(None)

    def _adopt(self, action: str, colour: BackColour, what: str) -> None:
        """A device shows ``action`` done but its event was taken by an earlier controller
        with no record (a restart without the journal): custody takes the device's word,
        and a deck found in the shuffler is counted again before it is dealt."""
        deck = self.custody.deck(colour)
        msg = {"insert_deck": DeckInserted(colour), "take_from_shuffler": DeckDelivered(colour),
               "load_shoe": ShoeLoaded(colour)}[action]
        text = {"insert_deck": f"the shuffler holds the {colour} deck from before the restart: it is counted again",
                "take_from_shuffler": f"the {colour} deck is already out of the shuffler",
                "load_shoe": f"the shoe already holds the {colour} deck"}[action]
        with self._batch():
            self._record("incident", what=f"no record of {what}: {text}")
            self._record("device_event", source="adopted", message=journaled_message(msg))
        log.warning("device_state_adopted", action=action, deck_id=deck.deck_id, detail=text)
        self._alarm("incident", f"no record of {what}: {text}")
        self._publish("incident", what=text)
        self._apply(msg)

    @property
    def _dealer_wait_s(self) -> float:
        """How long a dealer's action may take before the table gives up on it."""
        return self.timing.event_timeout_s if self.auto_dealer else self.timing.dealer_timeout_s

    def _device_status(self, action: str, colour: BackColour) -> str:
        """Whether a device already shows ``action`` done (after a restart): for a
        deck put in, the device must hold a deck of ``colour`` (the previous deck's
        stub left in the shoe is not the next deck loaded)."""
        which = "shoe" if action == "load_shoe" else "shuffler"
        if not self._links[self._shoe_name if which == "shoe" else self._shuffler_name].alive:
            self._expect_reconnect(which)  # said now: the status request waits for the link to come back
        try:
            return self._device_status_of(action, colour)
        finally:
            exp = self.console.expectation
            if exp is not None and exp.action == "reconnect" and (self._links[self._shuffler_name].alive
                                                                   and self._links[self._shoe_name].alive):
                self.console.expect(None)  # the device is back: the step says what it waits for now

    def _device_status_of(self, action: str, colour: BackColour) -> str:
        try:
            if action == "take_from_shuffler":
                return "done" if self.shuffler.status().state is DeviceState.IDLE else "todo"
            if action in ("insert_deck", "load_shoe"):
                st = (self.shuffler if action == "insert_deck" else self.shoe).status()
                if st.state is DeviceState.IDLE:
                    return "todo"
                if st.back_colour == colour:
                    return "done"
                if action == "load_shoe":
                    # The stub of a deck the table collected is cleared as the next deck goes in; a deck
                    # it has no record of on the table (a restart without the journal) is an incident.
                    known = next((d for d in self.custody.decks.values() if d.back_colour == st.back_colour), None)
                    if known is None or known.place is P.OFF_TABLE:
                        return "occupied"
                return "todo"
        except LinkError as exc:
            raise self._device_away("shuffler" if action != "load_shoe" else "shoe", exc) from exc
        return "todo"

    def _expect_reconnect(self, which: str) -> None:
        self.console.expect(Expectation("reconnect", f"the {which} to be connected again (its link is down: "
                                        "check its cable and power)", "device"))

    def _device_away(self, which: str, exc: Exception) -> DeviceFault:
        """A device the next step needs does not answer (its link is down): the table says
        it waits for it (``waiting_for``: ``reconnect``), and the step is tried again."""
        self._expect_reconnect(which)
        return DeviceFault(f"the {which} does not answer ({exc}); the table goes on when it is back")

    def _shuffle(self, deck: Deck) -> None:
        # The command entry is the custody step (start_shuffle) too: journal, then act.
        self._record("command", command="shuffle", colour=str(deck.back_colour))
        self.custody.on_shuffle_started(deck.back_colour)
        self.console.expect(Expectation("shuffle", f"the shuffler to count the {deck.back_colour} deck", "device",
                                        colour=str(deck.back_colour), deck_id=deck.deck_id))
        self.shuffler.shuffle()
        self._await_verification(deck, after_restart=False)

    def _await_verification(self, deck: Deck, after_restart: bool = True) -> None:
        """Wait for the shuffler's count of ``deck``. After a restart the journal may
        say "shuffling" for a command that never reached the shuffler: its status
        (still holding an unshuffled deck) tells, and the shuffle is sent again."""
        if after_restart:
            try:
                state = self.shuffler.status().state
            except LinkError as exc:
                raise DeviceFault(f"cannot read shuffler status: {exc}") from exc
            if state is DeviceState.HAS_DECK:
                self._record("command", command="shuffle", colour=str(deck.back_colour), repeated=True)
                self.shuffler.shuffle()
        try:
            self._expect(DeckVerified, self.timing.shuffle_timeout_s, f"verification of the {deck.back_colour} deck")
        except CustodyViolation as v:
            if v.rule is not Rule.DECK_INCOMPLETE:
                raise
            log.error("deck_failed_verification", deck_id=deck.deck_id, detail=mask_cards(v.detail))
            self._alarm("out_of_service", f"deck {deck.deck_id} ({deck.back_colour}) is out of service: "
                                          f"{mask_cards(v.detail)}", key=f"oos:{deck.back_colour}")
            return  # out of service now: advance() has it taken out, and a supervisor registers a replacement
        log.info("deck_verified", deck_id=deck.deck_id, places=self.custody.places())

    def _replace_deck(self, out: Deck) -> None:
        """A deck failed verification (and is out of the shuffler): it stays out until a
        supervisor registers a replacement (issue 5; COMAR 36.05.03.27 C)."""
        log.error("deck_out_of_service", deck_id=out.deck_id, back_colour=str(out.back_colour))

        def check(cmd: Command) -> dict[str, Any] | None:
            deck_id = str(cmd.args.get("deck_id") or "").strip()
            if not deck_id:
                return {"code": "bad_request", "error": "register_deck needs deck_id"}
            colour = cmd.args.get("colour")
            if colour is not None and str(colour).lower() != str(out.back_colour):
                return {"code": "refused", "error": f"the deck out of service has {out.back_colour} backs, "
                                                    f"not {colour}"}
            if any(d.deck_id == deck_id for d in self.custody.decks.values()):
                return {"code": "refused", "error": f"deck id {deck_id!r} is already in use"}
            return None

        cmd = self._wait_person(("register_deck",), f"a supervisor to register a replacement for deck "
                                f"{out.deck_id} ({out.back_colour})", role="supervisor", check=check)
        deck_id = str(cmd.args.get("deck_id") or "").strip()
        try:
            new = self.custody.replace_deck(out.back_colour, deck_id)
        except (ValueError, CustodyViolation) as exc:
            cmd.answer(ok=False, code="refused", error=str(exc))
            return
        self._record("supervisor", action="register_deck", supervisor=cmd.person, new_deck_id=deck_id,
                     replaces=out.deck_id, colour=str(out.back_colour), **self._by(cmd))
        self._clear_alarm(f"oos:{out.back_colour}")
        cmd.answer(ok=True, deck_id=new.deck_id, replaces=out.deck_id)

    # -- people: waits, voids, holds, releases -------------------------------------------------

    @staticmethod
    def _by(cmd: Command) -> dict[str, Any]:
        """Who gave a command, for its journal entry (every command is journaled with its person)."""
        return {"by": cmd.actor.to_dict()} if cmd.actor is not None else {}

    def _wait_person(self, accepts: tuple[str, ...], what: str, **kw: Any) -> Command:
        """Wait for a person's command; a void accepted meanwhile is carried out at once
        (it raises :class:`RoundVoided`, or holds the round for a second supervisor)."""
        r = self._round
        cmd = self.console.wait(accepts, what, round_id=r.round_id if r else None, **kw)
        if cmd.action == "void":
            if r is None:
                cmd.finish(ok=False, error="no round was in progress")
                return self._wait_person(accepts, what, **kw)
            self._carry_out_void(r, cmd)
        return cmd

    def _set_void_policy(self) -> None:
        """Tell the console what a void would do now (58 Pa. Code 816a.1; the two-person rule)."""
        r, held = self._round, self.held
        two = self.console.two_person_void
        if r is not None:
            state = r.machine.state
            if state in ("settle", "collect", "closed"):
                policy = VoidPolicy(r.round_id, f"round {r.round_id} is settled: its results stand "
                                                "(58 Pa. Code 816a.1)")
            elif state in ("voided", "held"):
                policy = VoidPolicy(r.round_id, f"round {r.round_id} is already {state}")
            else:
                policy = VoidPolicy(r.round_id, "", needs_second=two and state == "dealer_reveal")
        elif held is not None:
            if held.get("settled"):
                policy = VoidPolicy(held["round_id"], f"held round {held['round_id']} is settled: its results "
                                                      "stand (58 Pa. Code 816a.1)")
            else:
                request = held.get("void_request") or {}
                policy = VoidPolicy(held["round_id"], "", needs_second=two and bool(held.get("decisions_final")),
                                    requested_by=request.get("supervisor"))
        else:
            policy = VoidPolicy(None, "no round is in progress")
        self.console.set_void_policy(policy)

    def _check_void(self, r: _Round | None) -> None:
        """Honour a void accepted while the round runs (within one device step)."""
        if r is None:
            return
        cmd = self.console.take_void()
        if cmd is not None:
            self._carry_out_void(r, cmd)

    def _carry_out_void(self, r: _Round, cmd: Command) -> None:
        """Void round ``r`` now: wagers returned, cards collected (before settlement only).
        After the decisions are final a second supervisor must confirm: the round is
        held for that (the two-person rule). Raises :class:`RoundVoided` or
        :class:`RoundHeld`."""
        reason = cmd.args["reason"]
        # As promised when the void was accepted (the round may have moved on since):
        # accepted before the decisions were final, it is carried out at once.
        policy = cmd.void_policy if cmd.void_policy is not None else self.console.void_policy
        if policy.needs_second:
            why = (f"void requested by {cmd.person} after the decisions were final: a second supervisor must "
                   "confirm it")
            self._record("supervisor", action="void_requested", supervisor=cmd.person, reason=mask_cards(reason),
                         **self._by(cmd))
            self._hold(r, why, cause="void_request",
                       void_request={"supervisor": cmd.person, "reason": reason, "by": self._by(cmd).get("by")})
            cmd.finish(ok=True, pending=True, round_id=r.round_id, what="held for a second supervisor to confirm")
            self.console.void_handed_on()  # a second supervisor's void or confirm_void is taken now
            raise RoundHeld(r.round_id, None, reason=why)
        self._record("round", step="voided", number=r.number, reason=mask_cards(reason), supervisor=cmd.person,
                     wagers="returned", returned_cents=self._placed(r),
                     seal_key=self.journal.seal_key(r.round_id).hex() if self.journal else None, **self._by(cmd))
        r.machine.void_by_supervisor(reason)
        self._set_void_policy()
        self._in_flight_round = r.round_id
        self._cards_in_flight("voided")  # a card drawn as the void came is journaled, not left for later
        self._collect_after_void(r.round_id, r.deck.deck_id)
        with self._batch():
            r.machine.step("close")
            self._record("round", step="closed", number=r.number, voided=True)
            self.checkpoint()
        cmd.finish(ok=True, round_id=r.round_id, voided=True)
        self._publish("round_voided", reason=mask_cards(reason))
        raise RoundVoided(r.round_id, reason)

    def resolve_held(self) -> RoundResult | None:
        """Resolve a held round, as the supervisors decide. Before settlement: void it
        (misdeal: every wager returned, the cards collected; after the decisions a
        second supervisor confirms) or, when the hold came from a device or a
        restart and not from a broken rule, release it (the round goes on where it
        stood; returns its result). A round already settled keeps its results (they
        were recorded and posted, 816a.1): only its collect is finished."""
        held = self.held
        if held is None:
            return None
        rid = held["round_id"]
        self._set_void_policy()
        if held.get("settled"):
            if not self.auto_dealer:
                cmd = self._wait_held(("confirm_collect", "release_hold"), f"the dealer to collect settled round {rid}")
                cmd.answer(ok=True, round_id=rid, collected=True)
            self._collect_after_void(rid, held.get("deck_id"))
            with self._batch():
                self.journal and self.journal.append("round", round_id=rid, deck_id=held.get("deck_id"),
                                                     step="closed", number=held.get("number"),
                                                     completed_after_restart=True)
                self._unhold()
                self.checkpoint()
            return None
        while True:
            request = held.get("void_request")
            releasable = held.get("cause") in ("device", "restart")
            accepts = ("void",) + (("confirm_void",) if request else ()) + (("release_hold",) if releasable else ())
            what = (f"a second supervisor to confirm the void of round {rid} ({request['supervisor']} asked)"
                    if request else f"a supervisor to void held round {rid}"
                    + (" or release it" if releasable else ""))
            def check(cmd: Command, request: dict[str, Any] | None = request) -> dict[str, Any] | None:
                if request is not None and cmd.action == "confirm_void" and cmd.person == request["supervisor"]:
                    return {"code": "refused", "error": "a second supervisor must confirm the void, not the one "
                                                        "who asked it (two-person rule)"}
                return None

            cmd = self._wait_held(accepts, what, action="confirm_void" if request else "void", check=check)
            if cmd.action == "release_hold":
                return self._release(cmd)
            if cmd.action == "void" and request is None and self.console.void_policy.needs_second:
                self._record("supervisor", action="void_requested", supervisor=cmd.person,
                             reason=mask_cards(cmd.args["reason"]), round_id=rid, **self._by(cmd))
                held["void_request"] = {"supervisor": cmd.person, "reason": cmd.args["reason"],
                                        "by": self._by(cmd).get("by")}
                cmd.finish(ok=True, pending=True, round_id=rid, what="a second supervisor must confirm")
                self._set_void_policy()  # the one who asked is refused a void of their own now
                continue
            if request is not None:  # the second supervisor: confirm_void, or a void of their own
                if cmd.person == request["supervisor"]:
                    answer = cmd.finish if cmd.action == "void" else cmd.answer
                    answer(ok=False, code="refused", error="a second supervisor must confirm the void, not the one "
                                                         "who asked it (two-person rule)")
                    self.console.void_handed_on()
                    continue
                reason, first, second = request["reason"], request["supervisor"], cmd.person
            else:
                reason, first, second = cmd.args["reason"], cmd.person, None
            self._void_held(rid, held, reason, first, second, cmd)
            return None

    def _wait_held(self, accepts: tuple[str, ...], what: str, **kw: Any) -> Command:
        return self.console.wait(accepts, what, role="supervisor" if "confirm_collect" not in accepts else "dealer",
                                 round_id=(self.held or {}).get("round_id"), **kw)

    def _void_held(self, rid: str, held: dict[str, Any], reason: str, first: str | None, second: str | None,
                   cmd: Command) -> None:
        j = self.journal
        extra = {"second_supervisor": second} if second else {}
        self._in_flight_round = rid
        self._cards_in_flight("voided")  # cards the shoe let out for this round: journaled before the collect
        if j is not None:
            j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="voided", reason=mask_cards(reason),
                     supervisor=first, wagers="returned", returned_cents=held.get("placed", {}),
                     seal_key=j.seal_key(rid).hex(), **extra, **self._by(cmd))
        self._collect_after_void(rid, held.get("deck_id"))
        with self._batch():
            j and j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="closed",
                           number=held.get("number"), voided=True)
            self._unhold()
            self.checkpoint()
        if cmd.action == "void":
            cmd.finish(ok=True, round_id=rid, voided=True)
        else:
            cmd.answer(ok=True, round_id=rid, voided=True, supervisors=[first, second])
        self._held_void = (rid, reason)
        self._publish("round_voided", round_id=rid, reason=mask_cards(reason))

    def take_held_void(self) -> tuple[str, str] | None:
        """The held round the supervisors voided last, as ``(round_id, reason)``, once (None:
        none since the last call). :meth:`play_round` raises it as :class:`RoundVoided`; a
        caller of :meth:`resolve_held` itself may report it with this."""
        voided, self._held_void = self._held_void, None
        return voided

    def _unhold(self) -> None:
        self.held = None
        self._held_round = None
        self._clear_alarm("held")
        self._set_void_policy()

    def _release(self, cmd: Command) -> RoundResult:
        """A supervisor releases a round held by a device fault or a restart: it goes on
        where it stood. Cards read while it was held are dealt where the deal order
        puts them (their draw index), recorded in the release entry."""
        held = self.held
        assert held is not None
        r = self._held_round if self._held_round is not None else self._rebuild(held)
        r.machine.resume(held.get("hold_from") or r.machine.state)
        assigned = self._deal_late_cards(r)
        self._record("round", step="released", round_id=r.round_id, number=r.number, supervisor=cmd.person,
                     assigned={str(k): v for k, v in assigned.items()}, **self._by(cmd))
        self.held = None
        self._held_round = None
        self._clear_alarm("held")
        cmd.answer(ok=True, round_id=r.round_id, released=True)
        with self._lock:
            self._round = r
        structlog.contextvars.bind_contextvars(round_id=r.round_id, deck_id=r.deck.deck_id)
        return self._run(r, resumed=True)

    def _rebuild(self, held: dict[str, Any]) -> _Round:
        """The held round, rebuilt from its journal entries (after a restart)."""
        j = self.journal
        if j is None:
            raise TableError("a round held across a restart can only be voided without a journal")
        rid = held["round_id"]
        entries = [e for e in j.entries(since=int(held.get("open_seq", 1)) - 1) if e.round_id == rid]
        opened = next(e for e in entries if e.kind == "round" and e.body.get("step") == "open")
        wagers = {int(s): Wagers(**w) for s, w in opened.body["wagers"].items()}
        deck = self.custody.in_play or self._in(P.IN_PLAY, P.IN_SHOE)
        if deck is None:
            raise TableError(f"round {rid}: its deck is not in play; it can only be voided")
        r = _Round(opened.body["number"], rid, deck, RoundMachine(rid), wagers, hands={s: [] for s in wagers},
                   open_seq=opened.seq)
        steps = []
        for e in entries:
            if e.kind == "round":
                steps.append(e.body.get("step"))
                if e.body.get("step") == "decisions_done":
                    r.decisions = {int(s): Decision.parse(d) for s, d in e.body.get("decisions", {}).items()}
            elif e.kind == "card_read" and e.body.get("to") is not None and not e.body.get("refused"):
                card = Card.parse(j.unseal(e)["card"])
                r.reads.append(CardRead(e.body["draw_index"], card, BackColour.parse(e.body["back_colour"]),
                                        bool(e.body.get("manual"))))
                (r.dealer if e.body["to"] == 0 else r.hands[e.body["to"]]).append(card)
        order = {"open": "open_for_bets", "close_bets": "bets_closed", "start_dealing": "dealing",
                 "dealing_done": "decisions", "decisions_done": "dealer_reveal"}
        state = "open_for_bets"
        for s in steps:
            state = order.get(s, state)
        held["hold_from"] = state
        r.prompted = len(r.reads)
        return r

    def _deal_late_cards(self, r: _Round) -> dict[int, int]:
        """Cards the shoe read while the round was held (journaled as late, dealt to
        nobody) take their places in the deal, in draw order."""
        if self.journal is None or r.machine.state != "dealing":
            return {}
        order = self._order(r)
        assigned: dict[int, int] = {}
        late = [e for e in self.journal.entries("card_read") if e.round_id == r.round_id and e.body.get("late")
                and not e.body.get("refused")]
        for e in sorted(late, key=lambda e: e.body["draw_index"]):
            pos = len(r.reads)
            if pos >= len(order) or e.body["draw_index"] != pos:
                break
            card = Card.parse(self.journal.unseal(e)["card"])
            target = order[pos]
            r.reads.append(CardRead(pos, card, BackColour.parse(e.body["back_colour"]), False))
            (r.dealer if target == 0 else r.hands[target]).append(card)
            assigned[pos] = target
        r.prompted = max(r.prompted, len(r.reads))
        return assigned

    def _hold(self, r: _Round, reason: str, cause: str = "custody", **extra: Any) -> None:
        if r.machine.state in ("closed", "held", "voided"):
            return
        hold_from = r.machine.state
        settled = hold_from in ("settle", "collect")
        final = hold_from == "dealer_reveal" or bool(r.decisions) and len(r.decisions) == len(r.wagers)
        sealed = {"reason": reason} if self.journal is not None and CARD_FACE.search(reason) else None
        # decisions_final is journaled with the hold: a restart before the next checkpoint
        # keeps the two-person rule (the decisions may be in memory only, not yet journaled)
        self._record("round", step="held", reason=mask_cards(reason), number=r.number, settled=settled,
                     cause=cause, sealed=sealed, **({"decisions_final": True} if final else {}))
        r.machine.hold_for_supervisor(reason)
        self.held = {"round_id": r.round_id, "deck_id": r.deck.deck_id, "reason": mask_cards(reason),
                     **({"open_seq": r.open_seq} if r.open_seq is not None else {}),
                     "number": r.number, "settled": settled, "placed": self._placed(r), "cause": cause,
                     "hold_from": hold_from, "decisions_final": final, **extra}
        self._held_round = r
        self._alarm("held", f"round {r.round_id} held: {mask_cards(reason)}", key="held")
        log.error("round_held", reason=mask_cards(reason), cause=cause)  # the journal has the faces, sealed
        self._publish("round_held", reason=mask_cards(reason))

    def _placed(self, r: _Round) -> dict[str, int]:
        """Cents each seat placed in round ``r`` (ante, side wagers, and the play wager once
        decided): what a void returns. Kept with the round, so a void costs the same
        in round 10 as in round 100,000 (issue 18)."""
        return recovery.placed(_wager_dict(r.wagers), {str(s): d.value for s, d in r.decisions.items()})

    def _collect_after_void(self, round_id: str, deck_id: str | None) -> None:
        """The void's cards (and the shoe's stub) go to the discard rack. The dealer is
        asked to collect even when custody already shows it done: a restart may have
        come between the record and the dealer's action, and an empty layout costs
        nothing to collect."""
        c = self.custody
        if c.in_play is None:
            c.in_play = self._in(P.IN_SHOE, P.IN_PLAY)
        if c.in_play is not None:
            try:
                c.collect()
            except CustodyViolation as v:
                self._violation(v)
                raise
            self._record("custody", op="collect", round_id=round_id, deck_id=deck_id)
        self.console.expect(Expectation("collect", "the dealer to collect the cards into the discard rack",
                                        "device", ()))
        self.dealer.collect()
        self.console.expect(None)

    def _batch(self) -> Any:
        """The entries one step of the procedure produces commit together (issue 18).
        Never wait for a device inside one: an event is answered only once durable."""
        return self.journal.batch() if self.journal is not None else contextlib.nullcontext()

    # -- alarms ----------------------------------------------------------------------------------

    def _alarm(self, kind: str, text: str, *, key: str | None = None) -> None:
        """Raise an alarm that stays until handled (a held round, a device down, a deck out
        of service, an incident): in the status, for the screens."""
        key = key or f"{kind}:{len(self._alarms)}:{time.monotonic_ns()}"
        with self._lock:
            self._alarms = [a for a in self._alarms if a["id"] != key]
            self._alarms.append({"id": key, "kind": kind, "text": mask_cards(text),
                                 "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
            del self._alarms[:-32]  # bounded: the oldest drop out

    def _clear_alarm(self, key: str) -> None:
        with self._lock:
            self._alarms = [a for a in self._alarms if a["id"] != key]

    def acknowledge(self, cmd: Command) -> None:
        """A supervisor acknowledges the table's incident alarms (any time; a journaled
        supervisor action): ``incident`` names one alarm by id, else all of them."""
        want = cmd.args.get("incident")
        with self._lock:
            incidents = [a for a in self._alarms if a["kind"] == "incident" and (want is None or a["id"] == str(want))]
            if not incidents:
                cmd.answer(ok=False, code="refused", error="no incident alarm to acknowledge"
                           + (f" with id {want}" if want is not None else ""))
                return
            ids = {a["id"] for a in incidents}
            self._alarms = [a for a in self._alarms if a["id"] not in ids]
        self._record("supervisor", action="acknowledge_incident", supervisor=cmd.person, incidents=sorted(ids),
                     **self._by(cmd))
        cmd.answer(ok=True, acknowledged=sorted(ids))

    # -- rounds ------------------------------------------------------------------------------

    def play_round(self) -> RoundResult:
        """Deal, decide, reveal, settle and collect one round. Raises :class:`RoundHeld`
        on a custody violation (the round then waits for a supervisor),
        :class:`DeviceTimeout` / :class:`DeviceFault` on devices, :class:`RoundVoided`."""
        if self.held is not None:
            self.take_held_void()
            result = self.resolve_held()
            if result is not None:
                return result
            voided = self.take_held_void()
            if voided is not None:  # reported like a void during the round: a round voided is not dealt
                raise RoundVoided(*voided)
        self.advance()
        number = self.rounds_opened + 1
        round_id = f"r{number:05d}-{uuid.uuid4().hex[:8]}"
        deck = self.custody.start_round()
        wagers = {s: Wagers(ante=self.ante_cents, **self.side_wagers) for s in range(1, self.seats + 1)}
        r = _Round(number, round_id, deck, RoundMachine(round_id), wagers, hands={s: [] for s in wagers})
        if not self.auto_dealer:
            # Status says "open for bets" from here; the dealer who closes bets at once is
            # answered when the table waits for it (after the open is journaled), not refused.
            self.console.between()
        with self._lock:
            self._round = r
        structlog.contextvars.bind_contextvars(round_id=round_id, deck_id=deck.deck_id)
        with self._batch():
            self._op("start_round")
            self._record("round", step="open", number=number, wagers=_wager_dict(wagers))
        if self.journal is not None:
            r.open_seq = self.journal.last_seq
        self.rounds_opened = number
        return self._run(r)

    def _run(self, r: _Round, resumed: bool = False) -> RoundResult:
        """Play round ``r`` from where it stands; a fault holds it for a supervisor."""
        try:
            return self._play(r, resumed)
        except CustodyViolation as v:
            self._hold(r, str(v))
            raise RoundHeld(r.round_id, v) from v
        except (DeviceFault, DeviceTimeout) as exc:
            self._hold(r, str(exc), cause="device")
            raise
        except LinkError as exc:
            self._hold(r, str(exc), cause="device")
            raise DeviceFault(f"device link failed: {exc}") from exc
        finally:
            structlog.contextvars.unbind_contextvars("round_id", "deck_id")
            with self._lock:
                self._round = None
            self.console.expect(None)
            self._set_void_policy()

    def _step_round(self, r: _Round, trigger: str, **body: Any) -> None:
        """Journal a round transition, then make it (journal before act)."""
        self._record("round", step=trigger, number=r.number, **body)
        if not self.auto_dealer and trigger == "settle":
            # "settle" shows before the table asks the dealer to confirm the collect: a
            # confirmation sent on seeing it is held for that wait, not refused for the gap.
            self.console.between()
        r.machine.step(trigger)
        self._set_void_policy()

    @staticmethod
    def _order(r: _Round) -> list[int]:
        """The deal: one card to each seat in turn, then the dealer (0), three times."""
        return (list(r.wagers) + [0]) * 3

    def _play(self, r: _Round, resumed: bool = False) -> RoundResult:
        self._set_void_policy()
        if r.machine.state == "open_for_bets":
            if not resumed:
                log.info("round_open", number=r.number, back_colour=str(r.deck.back_colour), seats=self.seats)
                self._publish("round_opened", number=r.number, seats=self.seats, back_colour=str(r.deck.back_colour))
            if not self.auto_dealer:
                cmd = self._wait_person(("close_bets",), "the dealer to close bets")
                self._record("console", action="close_bets", **self._by(cmd))
                cmd.answer(ok=True, round_id=r.round_id)
            self._no_early_cards(r)
            self._check_void(r)
            with self._batch():
                self._step_round(r, "close_bets")
                self._step_round(r, "start_dealing")
        if r.machine.state == "bets_closed":
            self._step_round(r, "start_dealing")
        if r.machine.state == "dealing":
            order = self._order(r)
            if resumed and r.prompted > len(r.reads):
                r.prompted = self._drawn_since_load()  # the card prompted before the hold: drawn or not
            for pos in range(len(r.reads), len(order)):
                self._check_void(r)
                target = order[pos]
                if r.prompted <= pos:
                    who = "the dealer" if target == 0 else f"seat {target}"
                    self.console.expect(Expectation("draw_card", f"the dealer to draw card {pos + 1} of "
                                                    f"{len(order)} ({who})", "device", (), draw_index=pos,
                                                    round_id=r.round_id, colour=str(r.deck.back_colour),
                                                    deck_id=r.deck.deck_id))
                    r.prompted = pos + 1
                    self.dealer.draw_card()
                self._take_card(r, target)
            self.console.expect(None)
            self._deal_complete()
            counts = {s: len(h) for s, h in r.hands.items()}
            if any(n != 3 for n in counts.values()) or len(r.dealer) != 3:
                raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"cards per seat {counts}, dealer {len(r.dealer)}: "
                                       "misdeal")
            self._step_round(r, "dealing_done")
            self._check_void(r)
        if r.machine.state == "decisions":
            for s in r.wagers:
                if s not in r.decisions:
                    try:
                        r.decisions[s] = self.decide(s, list(r.hands[s]))
                    except VoidArrived as arrived:
                        self._carry_out_void(r, arrived.command)
                    cmd = getattr(self.decide, "last", None)
                    if cmd is not None:  # a person entered it: journaled with who
                        self._record("console", action="decide", seat=s, decision=r.decisions[s].value,
                                     **self._by(cmd))
            # The last decision is in: nothing a person sends now is for the steps to come
            # (the reveal, the settlement), so what was held since is answered, not taken
            # later as a collect confirmed before the payouts are shown.
            self.console.expect(None)
            self._check_void(r)
            self._deal_complete()  # a card drawn while the seats decided is still one too many
            # Every seat's cards are published now: no wager depends on them any more (816a.1).
            self._step_round(r, "decisions_done", decisions={str(s): d.value for s, d in r.decisions.items()},
                             hands={str(s): [str(c) for c in h] for s, h in r.hands.items()})
            self._check_void(r)
        # dealer_reveal: the outcome is known from here; a void now needs a second supervisor.
        value = evaluate(r.dealer, self.profile)
        qualifies = dealer_qualifies(value)
        # The reveal discloses the round's seal key: every card sealed in the journal, and the
        # opening of every commitment published at deal time, can be checked by anyone now.
        self._record("round", step="dealer_reveal", number=r.number, dealer_hand=[str(c) for c in r.dealer],
                     dealer_qualifies=qualifies,
                     seal_key=self.journal.seal_key(r.round_id).hex() if self.journal else None)
        log.info("dealer_reveal", dealer_hand=[str(c) for c in r.dealer], dealer_value=value.describe(),
                 dealer_qualifies=qualifies)
        self._publish("dealer_revealed", dealer_hand=[str(c) for c in r.dealer], dealer_qualifies=qualifies,
                      hands={str(s): [str(c) for c in h] for s, h in r.hands.items()},
                      decisions={str(s): d.value for s, d in r.decisions.items()})
        self._check_void(r)
        for s, w in r.wagers.items():
            r.results[s] = settle_seat(w, r.decisions[s], r.hands[s], r.dealer, self.tables, self.profile)
        # Results are recorded before they are posted (58 Pa. Code 816a.1).
        # The results are recorded next, and a void is refused from then on (816a.1): a void
        # accepted up to this instant is carried out (held for a second supervisor), never
        # dropped after its "accepted".
        pending = self.console.close_voids(VoidPolicy(r.round_id, f"round {r.round_id} is settled: its results "
                                                                  "stand (58 Pa. Code 816a.1)"))
        if pending is not None:
            self._carry_out_void(r, pending)
        self._step_round(r, "settle", results={str(s): st.to_record() for s, st in r.results.items()})
        log.info("settled", net_cents={f"seat{s}": st.net for s, st in r.results.items()})
        self._publish("round_settled", net_cents={str(s): st.net for s, st in r.results.items()},
                      results={str(s): st.to_dict() for s, st in r.results.items()},
                      dealer_hand=[str(c) for c in r.dealer], number=r.number)
        if not self.auto_dealer:
            cmd = self._wait_person(("confirm_collect",), "the dealer to confirm the collect (pay the round first)")
            self._record("console", action="confirm_collect", **self._by(cmd))
            cmd.answer(ok=True, round_id=r.round_id)
        self._collect(r)
        with self._batch():
            # One entry for the close (issue 18): "closed" is journaled, then the step made,
            # as a void's close already was.
            self._record("round", step="closed", number=r.number)
            r.machine.step("close")
            self._set_void_policy()
            self.rounds_played += 1
            self.checkpoint()
        seats = [SeatResult(s, r.hands[s], r.decisions[s], r.results[s]) for s in r.wagers]
        return RoundResult(r.number, r.round_id, r.deck.deck_id, r.deck.back_colour, list(r.dealer), qualifies,
                           seats, list(r.reads))

    def _drawn_since_load(self) -> int:
        """How many cards have left the shoe since it was loaded (its own count)."""
        try:
            return self.DECK_SIZE - self.shoe.status().cards
        except LinkError as exc:
            raise DeviceFault(f"cannot read the shoe's count: {exc}") from exc

    def _drain(self, early: bool = False) -> None:
        """Take every device event already delivered, without waiting. A card event
        here is out of turn: drawn before betting closed (``early``), or beyond the
        deal. Either holds the round."""
        while True:
            try:
                ev = self._next_event(0, "cards out of turn")
            except DeviceTimeout:
                return
            msg = ev.message
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                if not early:
                    self._stray_card(ev)  # raises: a card beyond the deal
                if isinstance(msg, CardDrawn):
                    self._card_entry(ev, msg.card, None, early=True)
                self._record("incident", what="card drawn before betting closed", draw_index=msg.draw_index)
                raise CustodyViolation(Rule.CARD_DRAWN_EARLY, f"draw {msg.draw_index} before betting closed")
            self._apply(msg)

    def _no_early_cards(self, r: _Round) -> None:
        """A card drawn while bets are still open is an incident that holds the round."""
        self._drain(early=True)

    def _deal_complete(self) -> None:
        """The deal is complete when its cards are read; a card beyond it is a misdeal,
        found without waiting on a timer (issue 18): by a card event already here, or
        by the shoe's own count, which says how many cards left it (SPEC §4.3). The
        events of cards the shoe let out are then waited for (the shoe sends them)
        and journaled, so none is left to surface in a later round."""
        self._drain()
        try:
            held = self.shoe.status().cards
        except LinkError as exc:
            raise DeviceFault(f"cannot read the shoe's count: {exc}") from exc
        out = self.DECK_SIZE - held
        if out <= self._next_draw:
            return
        self._record("incident", what="card drawn beyond the deal", shoe_holds=held, reads=self._next_draw)
        reads = self._next_draw
        self._await_cards(out, extra=True)
        raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"the shoe holds {held} cards: {out} left it but "
                               f"{reads} were read in the deal: a card beyond the deal, misdeal")

    def _cards_in_flight(self, flag: str) -> None:
        """Before the cards are collected: take in the events of cards the shoe let out
        that it has not reported yet (its own count says how many), so none surfaces
        in a later round as a card drawn with no round in progress."""
        if not self._links[self._shoe_name].alive:
            return  # the shoe is away: not asked (a void is carried out now); its cards arrive later, as late cards
        try:
            out = self.DECK_SIZE - self.shoe.status().cards
        except LinkError:
            return  # the shoe is away: what it holds arrives after it comes back, as a late card
        if out > self._next_draw:
            self._await_cards(out, **{flag: True})

    def _await_cards(self, out: int, **flags: Any) -> None:
        """Wait (within the link's event timeout, a deadline the device keeps) for the card
        events up to ``out`` cards drawn since the load; journal each, dealt to nobody."""
        deadline = self.timing.clock.monotonic() + self.timing.event_timeout_s
        while self._next_draw < out:
            remaining = deadline - self.timing.clock.monotonic()
            if remaining <= 0:
                return
            try:
                ev = self._next_event(remaining, "the events of the cards the shoe let out")
            except DeviceTimeout:
                return
            msg = ev.message
            if isinstance(msg, CardDrawn):
                self._card_entry(ev, msg.card, None, **flags)
            elif isinstance(msg, CardUnreadable):
                self._next_draw = msg.draw_index + 1
            else:
                self._apply(msg)

    def _collect(self, r: _Round) -> None:
        """Collect into the discard rack; refused while the other deck's cards are
        still there, until the shuffler reports that deck loaded (issue 5)."""
        while True:
            try:
                self.custody.collect()
                break
            except CustodyViolation as v:
                if v.rule is not Rule.TWO_DECKS_IN_DISCARD_RACK:
                    raise
                self._violation(v)
                log.warning("collect_refused", detail=mask_cards(v.detail))
                self._expect(DeckInserted, self.timing.event_timeout_s, "the other deck loaded into the shuffler")
        with self._batch():
            self._step_round(r, "collect")
            self._op("collect")
        self.dealer.collect()
        log.info("collected", places=self.custody.places())

    def _take_card(self, r: _Round, target: int) -> None:
        ev = self._expect(CardDrawn, self._dealer_wait_s, "a card from the shoe", cards=True)
        msg = ev.message
        gap = self._check_draw(ev)
        if gap is not None:  # never a shifted deal: the card goes to nobody, the round is held
            if isinstance(msg, CardDrawn):
                self._card_entry(ev, msg.card, None, gap=True)
            else:
                self._next_draw = msg.draw_index + 1
            self._violation(gap)
            raise gap
        if isinstance(msg, CardUnreadable):
            card, manual = self._manual_card(r, msg), True
            self._next_draw = msg.draw_index + 1
        else:
            card, manual = msg.card, False
        colour = msg.back_colour
        try:
            self.custody.on_card_read(card, colour)
        except CustodyViolation as v:
            self._card_entry(ev, card, None, refused=v.rule.value, **({"manual": True} if manual else {}))
            self._violation(v)
            raise
        read = CardRead(msg.draw_index, card, colour, manual)
        with self._lock:
            r.reads.append(read)
            if target == 0:
                r.dealer.append(card)
            else:
                r.hands[target].append(card)
        self.cards_read += 1
        self._card_entry(ev, card, target, **({"manual": True} if manual else {}))
        # Sealed (816a.1): no card face in any log line or public event before the reveal.
        if target == 0:
            log.info("card_read", to="dealer", draw_index=msg.draw_index)
            self._publish("card_dealt", to="dealer", draw_index=msg.draw_index)
        else:
            log.info("card_read", to=f"seat{target}", draw_index=msg.draw_index)
            self._publish("card_dealt", to=f"seat{target}", seat=target, draw_index=msg.draw_index)
            self._publish("seat_card", audience=f"seat:{target}", seat=target, draw_index=msg.draw_index,
                          card=str(card))

    def _manual_card(self, r: _Round, msg: CardUnreadable) -> Card:
        """The shoe could not read a card: a supervisor enters it (issue 5)."""
        self._record("incident", what="card unreadable", draw_index=msg.draw_index)
        log.warning("card_unreadable", draw_index=msg.draw_index)
        def check(cmd: Command) -> dict[str, Any] | None:
            try:
                Card.parse(str(cmd.args.get("card", "")))
            except ValueError as exc:
                return {"code": "bad_request", "error": str(exc)}
            return None

        while True:
            cmd = self._wait_person(("confirm_card",), f"a supervisor to enter unreadable card {msg.draw_index + 1} "
                                    "(read it off the layout)", role="supervisor", draw_index=msg.draw_index,
                                    check=check)
            try:
                card = Card.parse(str(cmd.args.get("card", "")))
            except ValueError as exc:
                cmd.answer(ok=False, error=str(exc))
                continue
            # The card may be the dealer's: its face is sealed until the reveal (816a.1).
            self._record("supervisor", action="confirm_card", supervisor=cmd.person,
                         draw_index=msg.draw_index, sealed={"card": str(card)} if self.journal else None,
                         **self._by(cmd))
            cmd.answer(ok=True, card=str(card))
            return card


def journaled_message(msg: Message) -> dict[str, Any]:
    """A device message as its ``device_event`` entry holds it: :func:`message_to_dict`,
    except that a ``DeckVerified`` names the cards ``missing`` from the 52 instead of
    every card ``present`` (the same set; an empty list for a whole deck, issue 18).
    :func:`table.recovery.apply` reads both forms."""
    d = message_to_dict(msg)
    if isinstance(msg, DeckVerified):
        d["missing"] = sorted(set(range(52)) - set(d.pop("present")))
    return d


def _wager_dict(wagers: dict[int, Wagers]) -> dict[str, dict[str, int]]:
    """Each seat's wagers as journaled: only the wagers placed (zero amounts left out)."""
    return {str(s): {k: v for k, v in dataclasses.asdict(w).items() if v} for s, w in wagers.items()}


class ConsoleWake:
    """The marker a console puts in the event queue: a void was accepted (carry it out now)."""


class JournalTampered(TableError):
    """Entries after the last signed checkpoint were changed while the controller was
    down (their MACs do not hold): the controller refuses to resume and sign over them."""
