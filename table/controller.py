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
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import structlog

from devices import CardShoe, Shuffler
from firmware_bridge.errors import LinkError
from firmware_bridge.link import DeviceEvent, LinkNotice
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

from . import recovery
from .console import Console
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
from .journal import Journal
from .round import RoundMachine
from .rules.hands import dealer_qualifies, evaluate
from .rules.profiles import PENNSYLVANIA, RulesProfile
from .rules.settlement import Decision, SeatSettlement, Tables, Wagers, settle_seat
from .rules.strategy import Decide, q64_player
from .sealing import mask_cards

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
    settle_s: float = 0.5  # at start-up, for events the devices still hold for us
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
    transition is written before it is acted on (None: keep no record).
    ``console``: dealer/supervisor commands; ``auto_dealer``: the dealer's own
    confirmations (close bets, collect) need no command (a simulated table).
    Raises :class:`RoundHeld`, :class:`DeviceTimeout`, :class:`DeviceFault`,
    :class:`SupervisorRequired`.
    """

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
    ) -> None:
        if not 1 <= seats <= 7:
            raise ValueError(f"seats must be 1..7, got {seats}")
        if ante_cents <= 0:
            raise ValueError("ante_cents must be positive")
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
        self.console = console or Console()
        self.console.status = self.status
        self.auto_dealer = auto_dealer
        self.rounds_played = 0
        self.rounds_opened = 0
        self.cards_read = 0
        self.held: dict[str, Any] | None = None
        self._open_round_id: str | None = None
        self._round: _Round | None = None
        self._subscribers: list[Callable[[TableEvent], None]] = []
        self._lock = threading.Lock()
        self._links = {shuffler.link.name: shuffler.link, shoe.link.name: shoe.link}

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
        """Table status for the console and the control socket (nothing sealed)."""
        r = self._round
        return {
            "places": self.custody.places(),
            "rounds_played": self.rounds_played,
            "round": {"round_id": r.round_id, "state": r.machine.state} if r else None,
            "held": self.held,
            "violations": len(self.custody.violations),
        }

    # -- journal, events, acks -------------------------------------------------------------

    def _publish(self, kind: str, audience: str = "table", **data: Any) -> None:
        ev = TableEvent(kind, self._round.round_id if self._round else None, data, audience)
        for cb in self._subscribers:
            try:
                cb(ev)
            except Exception:  # noqa: BLE001 - a subscriber's bug must not stop the table
                log.exception("subscriber_failed", kind=kind)

    def _record(self, kind: str, **body: Any) -> None:
        if self.journal is not None:
            r = self._round
            self.journal.append(kind, round_id=r.round_id if r else body.pop("round_id", None),
                                deck_id=r.deck.deck_id if r else None, **body)

    def _record_custody(self, trigger: str) -> None:
        self._record("custody", trigger=trigger, snapshot=self.custody.snapshot())

    def _violation(self, v: CustodyViolation) -> None:
        self._record("violation", rule=v.rule.value, detail=v.detail, citation=v.citation)

    def _next_event(self, timeout_s: float, what: str) -> DeviceEvent:
        """The next device event, journaled then ACKed. Link notices are handled here."""
        clock = self.timing.clock
        deadline = clock.monotonic() + timeout_s
        while True:
            remaining = deadline - clock.monotonic()
            try:
                ev = self.events.get(timeout=clock.real_s(remaining)) if remaining > 0 else self.events.get_nowait()
            except queue.Empty:
                for link in self._links.values():
                    if not link.alive:
                        raise DeviceFault(f"{link.name} link down while waiting for {what}") from None
                raise DeviceTimeout(f"nothing within {timeout_s:g} s while waiting for {what}") from None
            msg = ev.message
            if isinstance(msg, LinkNotice):
                self._record("link", source=ev.source, notice=msg.kind, detail=msg.detail)
                if msg.kind in ("identity_changed", "handshake_refused"):
                    raise DeviceFault(f"{ev.source}: {msg.detail}; a supervisor must inspect the device")
                if msg.kind == "device_rebooted" and self._round is not None and ev.source == "shoe":
                    raise DeviceFault("the shoe rebooted during the round: card reads may be missing")
                log.warning("link_notice", source=ev.source, notice=msg.kind, detail=msg.detail)
                continue
            link = self._links.get(ev.source)
            ident = link.identity if link else None
            self._record("device_event", source=ev.source, serial=ident.serial_number if ident else None,
                         boot_id=ev.boot_id, seq=ev.seq, message=message_to_dict(msg))
            if link is not None:
                link.acknowledge(ev)
            log.debug("device_event", source=ev.source, message=type(msg).__name__)
            return ev

    def _apply(self, msg: Message) -> Deck | None:
        """Feed one non-card device event to custody; journal the new custody."""
        c = self.custody
        if isinstance(msg, DeckInserted):
            deck = c.on_deck_inserted(msg.back_colour)
        elif isinstance(msg, DeckVerified):
            try:
                deck = c.on_deck_verified(msg)
            except CustodyViolation as v:
                self._violation(v)
                self._record_custody("fail_verification")
                raise
        elif isinstance(msg, DeckDelivered):
            deck = c.on_deck_delivered(msg.back_colour)
        elif isinstance(msg, ShoeLoaded):
            deck = c.on_shoe_loaded(msg.back_colour)
        elif isinstance(msg, ShufflerFault):
            shuffling = [d for d in c.decks.values() if d.place is P.SHUFFLING]
            if shuffling:
                c.on_shuffle_fault(shuffling[0].back_colour)
                self._record_custody("shuffle_fault")
            self._record("incident", what=f"shuffler fault: {msg.code.name.lower()}")
            raise ShufflerStopped(f"shuffler fault: {msg.code.name.lower()}; clear it, then the shuffle is repeated")
        elif isinstance(msg, ShoeEmpty):
            raise DeviceFault(f"the shoe is empty after {msg.draws} draws")
        else:
            return None
        self._record_custody(type(msg).__name__)
        return deck

    def _expect(self, kind: type[Message], timeout_s: float, what: str) -> Message:
        """Consume events (applying each to custody) until one of ``kind`` arrives."""
        while True:
            ev = self._next_event(timeout_s, what)
            msg = ev.message
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                if self._round is None:
                    if self.held is not None and isinstance(msg, CardDrawn):
                        self._late_card(msg)  # drawn for the held round before a restart
                        continue
                    self._record("incident", what="card drawn with no round in progress",
                                 message=message_to_dict(msg))
                    raise DeviceFault("a card was drawn with no round in progress: incident recorded")
                return msg
            try:
                self._apply(msg)
            except CustodyViolation as v:
                if v.rule is not Rule.DECK_INCOMPLETE:
                    self._violation(v)
                raise
            if isinstance(msg, kind):
                return msg

    # -- start-up and recovery -------------------------------------------------------------

    resume_hook = staticmethod(recovery.resume_hook)

    def recover(self) -> None:
        """Restore custody and counts from the journal (:mod:`table.recovery`); hold a
        round found in progress for a supervisor, never resume it silently."""
        j = self.journal
        if j is None or j.last_seq == 0:
            if j is not None:
                self._record("decks_registered", decks=self.custody.snapshot()["decks"], seats=self.seats)
            return
        restored = recovery.restore(j, self.custody, self._record)
        self.custody = restored.custody
        self._open_round_id = restored.open_round_id
        self.rounds_played, self.rounds_opened = restored.rounds_played, restored.rounds_opened
        self.cards_read = restored.cards_read
        if restored.held is not None:
            self.held = h = restored.held
            j.append("round", round_id=h["round_id"], deck_id=h["deck_id"], step="held", reason=h["reason"],
                     settled=h["settled"])
            log.error("round_held", round_id=h["round_id"], reason=h["reason"], settled=h["settled"])
        self._record("restart", places=self.custody.places(), rounds_played=self.rounds_played)
        log.info("recovered", places=self.custody.places(), rounds_played=self.rounds_played,
                 held=self.held is not None)

    def prepare(self) -> None:
        """Open the table: restore from the journal, take in what the devices held,
        resolve a held round (a supervisor), move the decks until ready."""
        self.recover()
        self.settle_devices()
        if self.held is not None:
            self.resolve_held()
        self.advance()
        if self.journal is not None and self.journal.last("table_open") is None:
            # The table opens only now: the first deck is verified and in the shoe (issue 5).
            self._record("table_open", places=self.custody.places())

    def settle_devices(self) -> None:
        """At start-up: take in the events the devices still hold for us (sent but
        never journaled and ACKed before a restart), then check their status."""
        deadline = time.monotonic() + self.timing.settle_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                ev = self._next_event(remaining, "events held by the devices")
            except DeviceTimeout:
                break
            msg = ev.message
            if isinstance(msg, CardDrawn):
                self._late_card(msg)
            elif isinstance(msg, CardUnreadable):
                self._record("incident", what="card unreadable after a restart", message=message_to_dict(msg))
            else:
                try:
                    self._apply(msg)
                except CustodyViolation as v:
                    self._violation(v)
                    raise

    def _late_card(self, msg: CardDrawn) -> None:
        """A card read that arrived after a restart, for the round now held."""
        try:
            self.custody.on_card_read(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self._violation(v)
            return
        self.cards_read += 1
        self._record("card_read", round_id=(self.held or {}).get("round_id"), card=str(msg.card),
                     back_colour=str(msg.back_colour), draw_index=msg.draw_index, to=None, late=True,
                     snapshot=self.custody.snapshot())

    # -- deck movements ----------------------------------------------------------------------

    def _in(self, *places: DeckPlace) -> Deck | None:
        return next((d for d in self.custody.decks.values() if d.place in places), None)

    def advance(self) -> None:
        """Move the decks until the table is ready for a round: a verified deck in
        the shoe, not the one played last, and the other deck verified in the
        shuffler (649a.3(b)). Works from any custody state, so it also finishes
        a procedure a restart interrupted."""
        stops = 0
        for _ in range(40):
            c = self.custody
            out = self._in(P.OUT_OF_SERVICE)
            if out is not None:
                self._replace_deck(out)
                continue
            in_shuffler = self._in(P.IN_SHUFFLER, P.SHUFFLING, P.VERIFIED)
            in_shoe = self._in(P.DELIVERED, P.IN_SHOE, P.IN_PLAY)
            if (in_shoe is not None and in_shoe.place is P.IN_SHOE and in_shoe is not c.last_played
                    and in_shuffler is not None and in_shuffler.place is P.VERIFIED):
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
                nxt = next((d for d in c.decks.values() if d.place in (P.IN_DISCARD_RACK, P.OFF_TABLE)
                            and d is not in_shoe), None)
                if nxt is None:
                    raise TableError(f"no deck can go into the shuffler: {c.places()}")
                self._step("insert_deck", nxt.back_colour, DeckInserted, f"the {nxt.back_colour} deck in the shuffler")
            else:
                raise TableError(f"deck custody is stuck at {c.places()}; a supervisor must inspect the table")
        raise TableError(f"the decks did not reach a ready state: {self.custody.places()}")

    def _step(self, action: str, colour: BackColour, expect: type[Message], what: str) -> None:
        """Journal the prompt, ask the dealer, wait for the device to confirm."""
        status = self._device_status(action, colour)
        if status == "done":  # done before a restart; its event is still on its way
            self._expect(expect, self.timing.event_timeout_s, what)
            return
        self._record("prompt", action=action, colour=str(colour))
        args = () if action == "take_from_shuffler" else (colour,)
        getattr(self.dealer, action)(*args)
        self._expect(expect, self._dealer_wait_s, what)

    @property
    def _dealer_wait_s(self) -> float:
        """How long a dealer's action may take before the table gives up on it."""
        return self.timing.event_timeout_s if self.auto_dealer else self.timing.dealer_timeout_s

    def _device_status(self, action: str, colour: BackColour) -> str:
        """Whether a device already shows ``action`` done (after a restart): for a
        deck put in, the device must hold a deck of ``colour`` (the previous deck's
        stub left in the shoe is not the next deck loaded)."""
        try:
            if action == "take_from_shuffler":
                return "done" if self.shuffler.status().state is DeviceState.IDLE else "todo"
            if action in ("insert_deck", "load_shoe"):
                st = (self.shuffler if action == "insert_deck" else self.shoe).status()
                return "done" if st.state is not DeviceState.IDLE and st.back_colour == colour else "todo"
        except LinkError as exc:
            raise DeviceFault(f"cannot read device status: {exc}") from exc
        return "todo"

    def _shuffle(self, deck: Deck) -> None:
        self._record("command", command="shuffle", colour=str(deck.back_colour))
        self.custody.on_shuffle_started(deck.back_colour)
        self._record_custody("start_shuffle")
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
            log.error("deck_failed_verification", deck_id=deck.deck_id, detail=v.detail)
            return  # out of service now: advance() asks a supervisor for a replacement
        log.info("deck_verified", deck_id=deck.deck_id, places=self.custody.places())

    def _replace_deck(self, out: Deck) -> None:
        """A deck failed verification: it stays out until a supervisor registers a
        replacement (issue 5; COMAR 36.05.03.27 C)."""
        log.error("deck_out_of_service", deck_id=out.deck_id, back_colour=str(out.back_colour))
        cmd = self.console.wait(("register_deck",), f"a supervisor to register a replacement for deck {out.deck_id}")
        supervisor = cmd.args.get("supervisor")
        deck_id = str(cmd.args.get("deck_id") or "").strip()
        if not supervisor or not deck_id:
            cmd.answer(ok=False, error="register_deck needs deck_id and supervisor")
            return
        try:
            new = self.custody.replace_deck(out.back_colour, deck_id)
        except (ValueError, CustodyViolation) as exc:
            cmd.answer(ok=False, error=str(exc))
            return
        self._record("supervisor", action="register_deck", supervisor=supervisor, new_deck_id=deck_id,
                     replaces=out.deck_id, colour=str(out.back_colour))
        self._record_custody("register_deck")
        cmd.answer(ok=True, deck_id=new.deck_id)

    # -- rounds ------------------------------------------------------------------------------

    def resolve_held(self) -> None:
        """Resolve a held round. Before settlement a supervisor voids it (misdeal):
        every wager placed is returned and recorded per seat, and the cards are
        collected. A round already settled keeps its results (they were recorded
        and posted, 816a.1): only its collect is finished, once the dealer (or a
        simulated table) confirms it."""
        held = self.held
        if held is None:
            return
        rid = held["round_id"]
        j = self.journal
        if held.get("settled"):
            if not self.auto_dealer:
                self.console.wait(("confirm_collect",), f"the dealer to collect settled round {rid}").answer(ok=True)
            self._collect_after_void(rid)
            j and j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="closed",
                           number=held.get("number"), completed_after_restart=True)
            self.held = None
            return
        cmd = self.console.wait(("void",), f"a supervisor to void held round {rid}")
        reason, supervisor = str(cmd.args.get("reason") or "").strip(), cmd.args.get("supervisor")
        if not reason or not supervisor:
            cmd.answer(ok=False, error="void needs a reason and a supervisor")
            return self.resolve_held()
        j and j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="voided", reason=reason,
                       supervisor=supervisor, wagers="returned", returned_cents=self._placed(rid))
        self._collect_after_void(rid)
        j and j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="closed",
                       number=held.get("number"), voided=True)
        self.held = None
        cmd.answer(ok=True, round_id=rid, voided=True)
        self._publish("round_voided", round_id=rid, reason=reason)

    def _placed(self, round_id: str) -> dict[str, int]:
        """Cents each seat had placed in ``round_id`` (ante, side wagers, and the play
        wager once decided), from the journal: what a void returns."""
        if self.journal is None:
            return {}
        placed: dict[str, int] = {}
        for e in self.journal.entries("round"):
            if e.round_id != round_id:
                continue
            if e.body.get("step") == "open":
                placed = {s: sum(w.values()) for s, w in e.body["wagers"].items()}
                antes = {s: w["ante"] for s, w in e.body["wagers"].items()}
            elif e.body.get("step") == "decisions_done":
                for s, d in e.body.get("decisions", {}).items():
                    if d == "play":
                        placed[s] += antes[s]
        return placed

    def _check_void(self, r: _Round) -> None:
        """Honour a supervisor's void sent while the round runs (any time before settle)."""
        cmd = self.console.take_void()
        if cmd is None:
            return
        reason, supervisor = str(cmd.args.get("reason") or "").strip(), cmd.args.get("supervisor")
        if not reason or not supervisor:
            cmd.answer(ok=False, error="void needs a reason and a supervisor")
            return
        self._record("round", step="voided", number=r.number, reason=reason, supervisor=supervisor,
                     wagers="returned", returned_cents=self._placed(r.round_id))
        r.machine.void_by_supervisor(reason)
        self._collect_after_void(r.round_id)
        r.machine.step("close")
        self._record("round", step="closed", number=r.number, voided=True)
        cmd.answer(ok=True, round_id=r.round_id, voided=True)
        self._publish("round_voided", reason=reason)
        raise RoundVoided(r.round_id, reason)

    def _collect_after_void(self, round_id: str) -> None:
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
            self._record_custody("collect after void")
        self.dealer.collect()

    def play_round(self) -> RoundResult:
        """Deal, decide, reveal, settle and collect one round. Raises :class:`RoundHeld`
        on a custody violation (the round then waits for a supervisor),
        :class:`DeviceTimeout` / :class:`DeviceFault` on devices."""
        if self.held is not None:
            self.resolve_held()
        self.advance()
        number = self.rounds_opened + 1
        self.rounds_opened = number
        round_id = f"r{number:05d}-{uuid.uuid4().hex[:8]}"
        deck = self.custody.start_round()
        wagers = {s: Wagers(ante=self.ante_cents, **self.side_wagers) for s in range(1, self.seats + 1)}
        r = _Round(number, round_id, deck, RoundMachine(round_id), wagers, hands={s: [] for s in wagers})
        with self._lock:
            self._round = r
        self._record_custody("start_round")
        structlog.contextvars.bind_contextvars(round_id=round_id, deck_id=deck.deck_id)
        try:
            return self._play(r)
        except CustodyViolation as v:
            self._hold(r, str(v))
            raise RoundHeld(round_id, v) from v
        except (DeviceFault, DeviceTimeout) as exc:
            self._hold(r, str(exc))
            raise
        except LinkError as exc:
            self._hold(r, str(exc))
            raise DeviceFault(f"device link failed: {exc}") from exc
        finally:
            structlog.contextvars.unbind_contextvars("round_id", "deck_id")
            with self._lock:
                self._round = None

    def _hold(self, r: _Round, reason: str) -> None:
        if r.machine.state in ("closed", "held", "voided"):
            return
        self._record("round", step="held", reason=reason, number=r.number,
                     settled=r.machine.state in ("settle", "collect"))
        r.machine.hold_for_supervisor(reason)
        settled = r.machine.state in ("settle", "collect")
        self.held = {"round_id": r.round_id, "deck_id": r.deck.deck_id, "reason": mask_cards(reason),
                     "number": r.number, "settled": settled}
        log.error("round_held", reason=mask_cards(reason))  # the journal has the faces
        self._publish("round_held", reason=mask_cards(reason))

    def _step_round(self, r: _Round, trigger: str, **body: Any) -> None:
        """Journal a round transition, then make it (journal before act)."""
        self._record("round", step=trigger, number=r.number, **body)
        r.machine.step(trigger)

    def _play(self, r: _Round) -> RoundResult:
        log.info("round_open", number=r.number, back_colour=str(r.deck.back_colour), seats=self.seats)
        self.console.refuse_voids("no round was in progress when the void was sent")
        self._record("round", step="open", number=r.number,
                     wagers={str(s): dataclasses.asdict(w) for s, w in r.wagers.items()})
        self._publish("round_opened", number=r.number, seats=self.seats, back_colour=str(r.deck.back_colour))
        if not self.auto_dealer:
            self.console.wait(("close_bets",), "the dealer to close bets").answer(ok=True)
        self._no_early_cards(r)
        self._check_void(r)
        self._step_round(r, "close_bets")
        self._step_round(r, "start_dealing")
        order = list(r.wagers) + [0]  # seats 1..K, then the dealer (0), three times
        for _ in range(3):
            for target in order:
                self._check_void(r)
                self._record("prompt", action="draw_card", to=target)
                self.dealer.draw_card()
                self._take_card(r, target)
        self._no_extra_cards()
        counts = {s: len(h) for s, h in r.hands.items()}
        if any(n != 3 for n in counts.values()) or len(r.dealer) != 3:
            raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"cards per seat {counts}, dealer {len(r.dealer)}: misdeal")
        self._step_round(r, "dealing_done")
        self._check_void(r)
        for s in r.wagers:
            r.decisions[s] = self.decide(s, list(r.hands[s]))
        self._step_round(r, "decisions_done", decisions={str(s): d.value for s, d in r.decisions.items()})
        self._check_void(r)
        value = evaluate(r.dealer, self.profile)
        qualifies = dealer_qualifies(value)
        self._record("round", step="dealer_reveal", number=r.number, dealer_hand=[str(c) for c in r.dealer],
                     dealer_qualifies=qualifies)
        log.info("dealer_reveal", dealer_hand=[str(c) for c in r.dealer], dealer_value=value.describe(),
                 dealer_qualifies=qualifies)
        self._publish("dealer_revealed", dealer_hand=[str(c) for c in r.dealer], dealer_qualifies=qualifies,
                      hands={str(s): [str(c) for c in h] for s, h in r.hands.items()},
                      decisions={str(s): d.value for s, d in r.decisions.items()})
        for s, w in r.wagers.items():
            r.results[s] = settle_seat(w, r.decisions[s], r.hands[s], r.dealer, self.tables, self.profile)
        # Results are recorded before they are posted (58 Pa. Code 816a.1).
        self._step_round(r, "settle", results={str(s): st.to_dict() for s, st in r.results.items()})
        self.console.refuse_voids(f"round {r.round_id} is settled: its results stand (58 Pa. Code 816a.1)")
        log.info("settled", net_cents={f"seat{s}": st.net for s, st in r.results.items()})
        self._publish("round_settled", net_cents={str(s): st.net for s, st in r.results.items()})
        if not self.auto_dealer:
            self.console.wait(("confirm_collect",), "the dealer to confirm the collect").answer(ok=True)
        self._step_round(r, "collect")
        self._collect(r)
        self._step_round(r, "close")
        self._record("round", step="closed", number=r.number)
        self.console.refuse_voids(f"round {r.round_id} is settled: its results stand (58 Pa. Code 816a.1)")
        self.rounds_played += 1
        seats = [SeatResult(s, r.hands[s], r.decisions[s], r.results[s]) for s in r.wagers]
        return RoundResult(r.number, r.round_id, r.deck.deck_id, r.deck.back_colour, list(r.dealer), qualifies,
                           seats, list(r.reads))

    def _no_early_cards(self, r: _Round) -> None:
        """A card drawn while bets are still open is an incident that holds the round."""
        while True:
            try:
                ev = self._next_event(0, "cards drawn early")
            except DeviceTimeout:
                return
            if isinstance(ev.message, (CardDrawn, CardUnreadable)):
                self._record("incident", what="card drawn before betting closed",
                             message=message_to_dict(ev.message))
                raise CustodyViolation(Rule.CARD_DRAWN_EARLY, f"draw {ev.message.draw_index} before betting closed")
            self._apply(ev.message)

    def _no_extra_cards(self) -> None:
        """A card drawn beyond the deal (a seat given a wrong number of cards) is a misdeal."""
        while True:
            try:  # device events come one at a time: give a straggler a moment to arrive
                ev = self._next_event(min(0.05, self.timing.event_timeout_s), "extra cards")
            except DeviceTimeout:
                return
            if isinstance(ev.message, (CardDrawn, CardUnreadable)):
                self._record("incident", what="card drawn beyond the deal", message=message_to_dict(ev.message))
                raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"draw {ev.message.draw_index} beyond the 3 cards "
                                       "to each seat and the dealer: misdeal")
            self._apply(ev.message)

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
        self._record_custody("collect")
        self.dealer.collect()
        log.info("collected", places=self.custody.places())

    def _take_card(self, r: _Round, target: int) -> None:
        ev = self._expect(CardDrawn, self._dealer_wait_s, "a card from the shoe")
        if isinstance(ev, CardUnreadable):
            card, colour, manual = self._manual_card(r, ev), ev.back_colour, True
            index = ev.draw_index
        else:
            card, colour, manual, index = ev.card, ev.back_colour, False, ev.draw_index
        try:
            self.custody.on_card_read(card, colour)
        except CustodyViolation as v:
            self._violation(v)
            self._record_custody("card_read refused")
            raise
        read = CardRead(index, card, colour, manual)
        with self._lock:
            r.reads.append(read)
            if target == 0:
                r.dealer.append(card)
            else:
                r.hands[target].append(card)
        self.cards_read += 1
        # One entry for the read and the custody it leaves: a crash cannot split them.
        self._record("card_read", card=str(card), back_colour=str(colour), draw_index=index,
                     to=target, manual=manual, snapshot=self.custody.snapshot())
        if target == 0:
            log.info("card_read", to="dealer", draw_index=index)  # sealed: no face (816a.1)
            self._publish("card_dealt", to="dealer", draw_index=index)  # no face either
        else:
            log.info("card_read", to=f"seat{target}", draw_index=index, card=str(card))
            self._publish("card_dealt", to=f"seat{target}", seat=target, draw_index=index)  # no face
            self._publish("seat_card", audience=f"seat:{target}", seat=target, draw_index=index, card=str(card))

    def _manual_card(self, r: _Round, ev: CardUnreadable) -> Card:
        """The shoe could not read a card: a supervisor enters it (issue 5)."""
        self._record("incident", what="card unreadable", draw_index=ev.draw_index)
        log.warning("card_unreadable", draw_index=ev.draw_index)
        while True:
            cmd = self.console.wait(("confirm_card",), f"a supervisor to enter unreadable card {ev.draw_index}")
            try:
                card = Card.parse(str(cmd.args.get("card", "")))
            except ValueError as exc:
                cmd.answer(ok=False, error=str(exc))
                continue
            if not cmd.args.get("supervisor"):
                cmd.answer(ok=False, error="confirm_card needs a supervisor")
                continue
            self._record("supervisor", action="confirm_card", supervisor=cmd.args["supervisor"],
                         card=str(card), draw_index=ev.draw_index)
            cmd.answer(ok=True, card=str(card))
            return card
