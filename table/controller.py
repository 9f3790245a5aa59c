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
import json
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
from .files import read_regular
from .journal import Journal, check_signed, head_path
from .round import RoundMachine
from .rules.hands import dealer_qualifies, evaluate
from .rules.profiles import PENNSYLVANIA, RulesProfile
from .rules.settlement import Decision, SeatSettlement, Tables, Wagers, settle_seat
from .rules.strategy import Decide, q64_player
from .sealing import CARD_FACE, commitment, fresh_nonce, mask_cards

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
        """At shutdown: sign what the journal holds (a clean stop leaves no unsigned tail)."""
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
                self._on_notice(ev, msg)
                continue
            if isinstance(msg, RefusedEvent):
                self._on_refused(ev, msg)
                continue
            if isinstance(msg, CardDrawn):
                return ev
            self._record("device_event", source=ev.source, dseq=ev.seq, message=message_to_dict(msg))
            self.cursor.journaled(ev.source, ev.seq)
            self._answer(ev)
            log.debug("device_event", source=ev.source, message=type(msg).__name__)
            if isinstance(msg, ShoeLoaded) and ev.source == self._shoe_name:
                self._next_draw = 0
            return ev

    def _on_notice(self, ev: DeviceEvent, msg: LinkNotice) -> None:
        self._record("link", source=ev.source, notice=msg.kind, detail=mask_cards(msg.detail))
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

    def _card_entry(self, ev: DeviceEvent, card: Card, to: int | None, **flags: Any) -> None:
        """Journal one card the shoe read (sealed until the reveal, with a commitment
        to it, issue 14), then answer the shoe. ``to``: 0 the dealer, 1..7 a seat,
        None a card dealt to nobody (``flags`` say why: ``late``, ``early``,
        ``extra``, ``refused`` with the rule, ``gap``)."""
        msg = ev.message
        r = self._round
        rid = r.round_id if r is not None else (self.held or {}).get("round_id")
        nonce = fresh_nonce()
        body: dict[str, Any] = {"source": ev.source, "dseq": ev.seq, "draw_index": msg.draw_index, "to": to,
                                "back_colour": str(msg.back_colour), **flags}
        body["commit"] = commitment(self.table_id, rid, msg.draw_index, str(card), nonce)
        self._record("card_read", round_id=rid, sealed={"card": str(card), "nonce": nonce}, **body)
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
        if isinstance(msg, CardDrawn):
            self._card_entry(ev, msg.card, None, stray=True)
        self._record("incident", what="card drawn with no round in progress", draw_index=msg.draw_index)
        raise DeviceFault("a card was drawn with no round in progress: incident recorded")

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
                         settled=h["settled"], number=h["number"])
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
        none is used twice (issue 14)."""
        j = self.journal
        assert j is not None
        seen = list(self.anchors)
        try:
            seen.append(json.loads(read_regular(head_path(j.path), max_bytes=1 << 20)))
        except (OSError, ValueError):
            pass
        keys = {j.key.key_id: j.key.public}
        behind = []
        for cp in seen:
            if not isinstance(cp, dict) or cp.get("table_id") != j.table_id or check_signed(cp, keys) is not None:
                continue  # an anchor that is not this table's own signature proves nothing
            seq = cp.get("seq")
            if not isinstance(seq, int):
                continue
            mine = next(iter(j.entries("checkpoint", since=seq, upto=seq + 1)), None)
            if mine is None or mine.body.get("checkpoint", {}).get("head") != cp.get("head"):
                behind.append(cp)
        if not behind:
            return
        cp = max(behind, key=lambda c: c["seq"])
        what = (f"the journal is behind a signed checkpoint seen off the table (entry {cp['seq']}, "
                f"{cp.get('rounds_opened')} rounds opened): it was cut short or an older copy was put in its place")
        self._record("incident", what=what, anchor_seq=cp["seq"], anchor_head=cp.get("head"), journal_seq=j.last_seq)
        log.error("journal_behind_anchor", anchor_seq=cp["seq"], journal_seq=j.last_seq)
        self._publish("incident", what=what)
        while True:
            cmd = self.console.wait(("acknowledge_incident",),
                                    f"a supervisor to acknowledge that the journal is behind checkpoint {cp['seq']}")
            supervisor = cmd.args.get("supervisor")
            if not supervisor:
                cmd.answer(ok=False, error="acknowledge_incident needs a supervisor")
                continue
            break
        self._record("supervisor", action="acknowledge_incident", supervisor=supervisor, anchor_seq=cp["seq"])
        self.rounds_opened = max(self.rounds_opened, int(cp.get("rounds_opened") or 0))
        cmd.answer(ok=True, acknowledged=cp["seq"])

    def _ident(self, source: str) -> tuple[str, int]:
        ident = self._links[source].identity
        return (ident.serial_number, ident.boot_id) if ident is not None else ("?", 0)

    def prepare(self) -> None:
        """Open the table: restore from the journal, take in what the devices held,
        resolve a held round (a supervisor), move the decks until ready; sign a
        checkpoint."""
        self.recover()
        self.settle_devices()
        if self.held is not None:
            self.resolve_held()
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
                    self._card_entry(ev, msg.card, None, stray=True)
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
        # The command entry is the custody step (start_shuffle) too: journal, then act.
        self._record("command", command="shuffle", colour=str(deck.back_colour))
        self.custody.on_shuffle_started(deck.back_colour)
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
            self._collect_after_void(rid, held.get("deck_id"))
            with self._batch():
                j and j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="closed",
                               number=held.get("number"), completed_after_restart=True)
                self.held = None
                self.checkpoint()
            return
        cmd = self.console.wait(("void",), f"a supervisor to void held round {rid}")
        reason, supervisor = str(cmd.args.get("reason") or "").strip(), cmd.args.get("supervisor")
        if not reason or not supervisor:
            cmd.answer(ok=False, error="void needs a reason and a supervisor")
            return self.resolve_held()
        if j is not None:
            j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="voided", reason=mask_cards(reason),
                     supervisor=supervisor, wagers="returned", returned_cents=held.get("placed", {}),
                     seal_key=j.seal_key(rid).hex())
        self._collect_after_void(rid, held.get("deck_id"))
        with self._batch():
            j and j.append("round", round_id=rid, deck_id=held.get("deck_id"), step="closed",
                           number=held.get("number"), voided=True)
            self.held = None
            self.checkpoint()
        cmd.answer(ok=True, round_id=rid, voided=True)
        self._publish("round_voided", round_id=rid, reason=mask_cards(reason))

    def _check_void(self, r: _Round) -> None:
        """Honour a supervisor's void sent while the round runs (any time before settle)."""
        cmd = self.console.take_void()
        if cmd is None:
            return
        reason, supervisor = str(cmd.args.get("reason") or "").strip(), cmd.args.get("supervisor")
        if not reason or not supervisor:
            cmd.answer(ok=False, error="void needs a reason and a supervisor")
            return
        self._record("round", step="voided", number=r.number, reason=mask_cards(reason), supervisor=supervisor,
                     wagers="returned", returned_cents=self._placed(r),
                     seal_key=self.journal.seal_key(r.round_id).hex() if self.journal else None)
        r.machine.void_by_supervisor(reason)
        self._collect_after_void(r.round_id, r.deck.deck_id)
        with self._batch():
            r.machine.step("close")
            self._record("round", step="closed", number=r.number, voided=True)
            self.checkpoint()
        cmd.answer(ok=True, round_id=r.round_id, voided=True)
        self._publish("round_voided", reason=mask_cards(reason))
        raise RoundVoided(r.round_id, reason)

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
        self.dealer.collect()

    def _batch(self) -> Any:
        """The entries one step of the procedure produces commit together (issue 18).
        Never wait for a device inside one: an event is answered only once durable."""
        return self.journal.batch() if self.journal is not None else contextlib.nullcontext()

    def play_round(self) -> RoundResult:
        """Deal, decide, reveal, settle and collect one round. Raises :class:`RoundHeld`
        on a custody violation (the round then waits for a supervisor),
        :class:`DeviceTimeout` / :class:`DeviceFault` on devices."""
        if self.held is not None:
            self.resolve_held()
        self.advance()
        number = self.rounds_opened + 1
        round_id = f"r{number:05d}-{uuid.uuid4().hex[:8]}"
        deck = self.custody.start_round()
        wagers = {s: Wagers(ante=self.ante_cents, **self.side_wagers) for s in range(1, self.seats + 1)}
        r = _Round(number, round_id, deck, RoundMachine(round_id), wagers, hands={s: [] for s in wagers})
        with self._lock:
            self._round = r
        structlog.contextvars.bind_contextvars(round_id=round_id, deck_id=deck.deck_id)
        try:
            self.console.refuse_voids("no round was in progress when the void was sent")
            with self._batch():
                self._op("start_round")
                self._record("round", step="open", number=number, wagers=_wager_dict(wagers))
            self.rounds_opened = number
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
        settled = r.machine.state in ("settle", "collect")
        sealed = {"reason": reason} if self.journal is not None and CARD_FACE.search(reason) else None
        self._record("round", step="held", reason=mask_cards(reason), number=r.number, settled=settled, sealed=sealed)
        r.machine.hold_for_supervisor(reason)
        self.held = {"round_id": r.round_id, "deck_id": r.deck.deck_id, "reason": mask_cards(reason),
                     "number": r.number, "settled": settled, "placed": self._placed(r)}
        log.error("round_held", reason=mask_cards(reason))  # the journal has the faces, sealed
        self._publish("round_held", reason=mask_cards(reason))

    def _step_round(self, r: _Round, trigger: str, **body: Any) -> None:
        """Journal a round transition, then make it (journal before act)."""
        self._record("round", step=trigger, number=r.number, **body)
        r.machine.step(trigger)

    def _play(self, r: _Round) -> RoundResult:
        log.info("round_open", number=r.number, back_colour=str(r.deck.back_colour), seats=self.seats)
        self._publish("round_opened", number=r.number, seats=self.seats, back_colour=str(r.deck.back_colour))
        if not self.auto_dealer:
            self.console.wait(("close_bets",), "the dealer to close bets").answer(ok=True)
        self._no_early_cards(r)
        self._check_void(r)
        with self._batch():
            self._step_round(r, "close_bets")
            self._step_round(r, "start_dealing")
        order = list(r.wagers) + [0]  # seats 1..K, then the dealer (0), three times
        for _ in range(3):
            for target in order:
                self._check_void(r)
                self.dealer.draw_card()
                self._take_card(r, target)
        self._deal_complete()
        counts = {s: len(h) for s, h in r.hands.items()}
        if any(n != 3 for n in counts.values()) or len(r.dealer) != 3:
            raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"cards per seat {counts}, dealer {len(r.dealer)}: misdeal")
        self._step_round(r, "dealing_done")
        self._check_void(r)
        for s in r.wagers:
            r.decisions[s] = self.decide(s, list(r.hands[s]))
        self._check_void(r)
        self._deal_complete()  # a card drawn while the seats decided is still one too many
        # Every seat's cards are published now: no wager depends on them any more (816a.1).
        self._step_round(r, "decisions_done", decisions={str(s): d.value for s, d in r.decisions.items()},
                         hands={str(s): [str(c) for c in h] for s, h in r.hands.items()})
        self._check_void(r)
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
        for s, w in r.wagers.items():
            r.results[s] = settle_seat(w, r.decisions[s], r.hands[s], r.dealer, self.tables, self.profile)
        # Results are recorded before they are posted (58 Pa. Code 816a.1).
        self._step_round(r, "settle", results={str(s): st.to_dict() for s, st in r.results.items()})
        self.console.refuse_voids(f"round {r.round_id} is settled: its results stand (58 Pa. Code 816a.1)")
        log.info("settled", net_cents={f"seat{s}": st.net for s, st in r.results.items()})
        self._publish("round_settled", net_cents={str(s): st.net for s, st in r.results.items()})
        if not self.auto_dealer:
            self.console.wait(("confirm_collect",), "the dealer to confirm the collect").answer(ok=True)
        self._collect(r)
        with self._batch():
            self._step_round(r, "close")
            self._record("round", step="closed", number=r.number)
            self.rounds_played += 1
            self.checkpoint()
        self.console.refuse_voids(f"round {r.round_id} is settled: its results stand (58 Pa. Code 816a.1)")
        seats = [SeatResult(s, r.hands[s], r.decisions[s], r.results[s]) for s in r.wagers]
        return RoundResult(r.number, r.round_id, r.deck.deck_id, r.deck.back_colour, list(r.dealer), qualifies,
                           seats, list(r.reads))

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
        deadline = self.timing.clock.monotonic() + self.timing.event_timeout_s
        while self._next_draw < out:
            remaining = deadline - self.timing.clock.monotonic()
            if remaining <= 0:
                break
            try:
                ev = self._next_event(remaining, "the events of the cards the shoe let out")
            except DeviceTimeout:
                break
            msg = ev.message
            if isinstance(msg, CardDrawn):
                self._card_entry(ev, msg.card, None, extra=True)
            elif isinstance(msg, CardUnreadable):
                self._next_draw = msg.draw_index + 1
            else:
                self._apply(msg)
        raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"the shoe holds {held} cards: {out} left it but "
                               f"{reads} were read in the deal: a card beyond the deal, misdeal")

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
        while True:
            cmd = self.console.wait(("confirm_card",), f"a supervisor to enter unreadable card {msg.draw_index}")
            try:
                card = Card.parse(str(cmd.args.get("card", "")))
            except ValueError as exc:
                cmd.answer(ok=False, error=str(exc))
                continue
            if not cmd.args.get("supervisor"):
                cmd.answer(ok=False, error="confirm_card needs a supervisor")
                continue
            # The card may be the dealer's: its face is sealed until the reveal (816a.1).
            self._record("supervisor", action="confirm_card", supervisor=cmd.args["supervisor"],
                         draw_index=msg.draw_index, sealed={"card": str(card)} if self.journal else None)
            cmd.answer(ok=True, card=str(card))
            return card


def _wager_dict(wagers: dict[int, Wagers]) -> dict[str, dict[str, int]]:
    """Each seat's wagers as journaled: only the wagers placed (zero amounts left out)."""
    return {str(s): {k: v for k, v in dataclasses.asdict(w).items() if v} for s, w in wagers.items()}


class JournalTampered(TableError):
    """Entries after the last signed checkpoint were changed while the controller was
    down (their MACs do not hold): the controller refuses to resume and sign over them."""
