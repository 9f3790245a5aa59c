"""The table controller: drives the shuffler and shoe through each round.

One thread (the caller's) feeds both machines: it prompts the dealer for a
physical action, then consumes device events from the one queue both links
share, in arrival order, feeding each to the deck custody machine. The same
code runs a real table (a console dealer) and a simulated one (the virtual
dealer of ``simulators``).

Procedure per round (58 Pa. Code 649a.3(b), 649a.11, 649a.12; CA TCP
standards of play): the deck in the shoe is dealt 3 cards to each seat and 3
to the dealer, one at a time in turn; each seat plays or folds; the dealer's
hand is revealed only after every decision (816a.1); the round is settled,
then collected into the discard rack. Between rounds the verified deck comes
out of the shuffler into the shoe and the deck just played goes from the
discard rack into the shuffler to be shuffled and verified.
"""

from __future__ import annotations

import queue
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol

import structlog

from devices import CardShoe, Shuffler
from firmware_bridge.errors import LinkError
from firmware_bridge.link import DeviceEvent, LinkNotice
from protocols.cards import BackColour, Card
from protocols.messages import (
    CardDrawn,
    CardUnreadable,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    Message,
    ShoeEmpty,
    ShoeLoaded,
    ShufflerFault,
)

from .custody import CustodyViolation, Deck, DeckCustody
from .round import RoundMachine
from .rules.hands import dealer_qualifies, evaluate
from .rules.profiles import PENNSYLVANIA, RulesProfile
from .rules.settlement import Decision, SeatSettlement, Wagers, settle_seat
from .rules.strategy import plays_q64

log = structlog.get_logger("table")


class Dealer(Protocol):
    """The physical actions the controller asks of the dealer (a person at a real
    table, :class:`simulators.table.VirtualDealer` on a simulated one)."""

    def insert_deck(self, colour: BackColour) -> None: ...

    def take_from_shuffler(self) -> None: ...

    def load_shoe(self, colour: BackColour) -> None: ...

    def draw_card(self) -> None: ...

    def collect(self) -> None: ...


class TableError(Exception):
    """Base of the controller's errors; the message says what the operator must do."""


class DeviceTimeout(TableError, TimeoutError):
    """A device did not report what the procedure expected in time."""


class DeviceFault(TableError):
    """A device reported a fault (jam, door open, shoe empty) or its link failed."""


class RoundHeld(TableError):
    """The round is held for a supervisor; ``violation`` is the custody rule broken."""

    def __init__(self, round_id: str, violation: CustodyViolation) -> None:
        super().__init__(f"round {round_id} held for a supervisor: {violation}")
        self.round_id = round_id
        self.violation = violation


@dataclass(frozen=True)
class TableTiming:
    """How long the controller waits for device events (s)."""

    event_timeout_s: float = 10.0
    shuffle_timeout_s: float = 180.0


@dataclass
class CardRead:
    """One card as the shoe read it."""

    draw_index: int
    card: Card
    back_colour: BackColour


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


Decide = Callable[[int, list[Card]], Decision]


def q64_player(seat: int, cards: list[Card]) -> Decision:
    """The simulated player: play with Q-6-4 or better, else fold."""
    return Decision.PLAY if plays_q64(cards) else Decision.FOLD


class TableController:
    """Runs rounds on one table.

    ``events``: the queue both drivers' links deliver into. ``seats``: 1..7
    player positions. ``ante_cents``: each seat's ante (the play wager equals it).
    ``tables``: the selected paytables, passed to ``settle_seat``.
    Raises :class:`RoundHeld`, :class:`DeviceTimeout`, :class:`DeviceFault`.
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
        tables: object,
        profile: RulesProfile = PENNSYLVANIA,
        decide: Decide = q64_player,
        timing: TableTiming | None = None,
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
        self.tables = tables
        self.profile = profile
        self.decide = decide
        self.timing = timing or TableTiming()
        self.rounds_played = 0
        self.cards_read = 0
        self._shuffler_colour = BackColour.NONE

    # -- events ---------------------------------------------------------------------

    def _expect(self, kind: type[Message], timeout_s: float, what: str) -> Message:
        """Consume events until one of ``kind`` arrives; feed every event to custody."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                ev = self.events.get(timeout=max(0.0, remaining)) if remaining > 0 else self.events.get_nowait()
            except queue.Empty:
                for drv in (self.shuffler, self.shoe):
                    if not drv.link.alive:
                        raise DeviceFault(f"{drv.link.name} link lost while waiting for {what}") from None
                raise DeviceTimeout(f"no {kind.__name__} within {timeout_s:g} s while waiting for {what}") from None
            msg = ev.message
            if isinstance(msg, LinkNotice):
                if msg.kind in ("identity_changed", "handshake_refused"):
                    raise DeviceFault(f"{ev.source}: {msg.detail}; a supervisor must inspect the device")
                log.warning("link_notice", source=ev.source, notice=msg.kind, detail=msg.detail)
                continue
            log.debug("device_event", source=ev.source, message=type(msg).__name__)
            if isinstance(msg, ShufflerFault):
                self.custody.on_shuffle_fault(self._shuffler_colour)
                raise DeviceFault(f"shuffler fault: {msg.code.name.lower()}; clear it and restart the shuffle")
            if isinstance(msg, ShoeEmpty):
                raise DeviceFault(f"shoe empty after {msg.draws} draws")
            if isinstance(msg, CardUnreadable):
                raise DeviceFault(f"shoe could not read draw {msg.draw_index}: re-draw or enter it manually")
            if isinstance(msg, kind):
                return msg
            log.warning("unexpected_event", source=ev.source, message=type(msg).__name__, waiting_for=what)

    # -- deck movements -------------------------------------------------------------------

    def _shuffle_in(self, colour: BackColour) -> Deck:
        """Insert the ``colour`` deck in the shuffler, shuffle and verify it."""
        self.dealer.insert_deck(colour)
        ins = self._expect(DeckInserted, self.timing.event_timeout_s, f"the {colour} deck in the shuffler")
        self.custody.on_deck_inserted(ins.back_colour)
        self._shuffler_colour = ins.back_colour
        self.shuffler.shuffle()
        self.custody.on_shuffle_started(ins.back_colour)
        ver = self._expect(DeckVerified, self.timing.shuffle_timeout_s, f"verification of the {colour} deck")
        deck = self.custody.on_deck_verified(ver)
        log.info("deck_verified", deck_id=deck.deck_id, back_colour=str(colour), places=self.custody.places())
        return deck

    def _to_shoe(self, colour: BackColour) -> Deck:
        """Take the verified ``colour`` deck out of the shuffler and load it in the shoe."""
        self.dealer.take_from_shuffler()
        dlv = self._expect(DeckDelivered, self.timing.event_timeout_s, f"the {colour} deck out of the shuffler")
        self.custody.on_deck_delivered(dlv.back_colour)
        self.dealer.load_shoe(colour)
        ld = self._expect(ShoeLoaded, self.timing.event_timeout_s, f"the {colour} deck in the shoe")
        deck = self.custody.on_shoe_loaded(ld.back_colour)
        log.info("shoe_loaded", deck_id=deck.deck_id, back_colour=str(ld.back_colour), places=self.custody.places())
        return deck

    def prepare(self) -> None:
        """Open the table: shuffle and verify the first deck, load it, then shuffle and
        verify the second, so no round starts before the other deck is verified."""
        first, second = list(self.custody.decks)
        self._shuffle_in(first)
        self._to_shoe(first)
        self._shuffle_in(second)

    def rotate_decks(self) -> None:
        """Between rounds: the verified deck goes to the shoe, the deck just played
        goes from the discard rack into the shuffler (649a.3(b))."""
        played = self.custody.last_played
        if played is None:
            raise TableError("no round has been played yet")
        nxt = self.custody.other(played)
        self._to_shoe(nxt.back_colour)
        self._shuffle_in(played.back_colour)

    # -- a round ---------------------------------------------------------------------

    def play_round(self) -> RoundResult:
        """Deal, decide, reveal, settle and collect one round. Raises :class:`RoundHeld`
        on a custody violation, :class:`DeviceTimeout` / :class:`DeviceFault` on devices."""
        if self.custody.last_played is not None:
            self.rotate_decks()
        number = self.rounds_played + 1
        round_id = f"r{number:05d}-{uuid.uuid4().hex[:8]}"
        rm = RoundMachine(round_id)
        deck = self.custody.start_round()
        structlog.contextvars.bind_contextvars(round_id=round_id, deck_id=deck.deck_id)
        try:
            return self._play(number, round_id, rm, deck)
        except CustodyViolation as v:
            rm.hold_for_supervisor(str(v))
            log.error("round_held", rule=v.rule.value, detail=v.detail, citation=v.citation)
            raise RoundHeld(round_id, v) from v
        except LinkError as exc:
            raise DeviceFault(f"device link failed: {exc}") from exc
        finally:
            structlog.contextvars.unbind_contextvars("round_id", "deck_id")

    def _play(self, number: int, round_id: str, rm: RoundMachine, deck: Deck) -> RoundResult:
        log.info("round_open", number=number, back_colour=str(deck.back_colour), seats=self.seats)
        wagers = {s: Wagers(ante=self.ante_cents) for s in range(1, self.seats + 1)}
        rm.step("close_bets")
        log.info("bets_closed", antes_cents=[w.ante for w in wagers.values()])
        rm.step("start_dealing")
        hands: dict[int, list[Card]] = {s: [] for s in wagers}
        dealer_hand: list[Card] = []
        reads: list[CardRead] = []
        order = list(wagers) + [0]  # seats 1..K, then the dealer (0), three times
        for _ in range(3):
            for target in order:
                self.dealer.draw_card()
                ev = self._expect(CardDrawn, self.timing.event_timeout_s, "a card from the shoe")
                self.custody.on_card_read(ev.card, ev.back_colour)
                reads.append(CardRead(ev.draw_index, ev.card, ev.back_colour))
                self.cards_read += 1
                if target == 0:
                    dealer_hand.append(ev.card)
                    log.info("card_read", to="dealer", draw_index=ev.draw_index)  # sealed: no face (816a.1)
                else:
                    hands[target].append(ev.card)
                    log.info("card_read", to=f"seat{target}", draw_index=ev.draw_index, card=str(ev.card))
        rm.step("dealing_done")
        decisions = {s: self.decide(s, hands[s]) for s in wagers}
        log.info("decisions", decisions={f"seat{s}": d.value for s, d in decisions.items()})
        rm.step("decisions_done")
        dealer_value = evaluate(dealer_hand, self.profile)
        qualifies = dealer_qualifies(dealer_value)
        log.info("dealer_reveal", dealer_hand=[str(c) for c in dealer_hand],
                 dealer_value=dealer_value.describe(), dealer_qualifies=qualifies)
        rm.step("settle")
        seats = []
        for s, w in wagers.items():
            st = settle_seat(w, decisions[s], hands[s], dealer_hand, self.tables, self.profile)
            seats.append(SeatResult(s, hands[s], decisions[s], st))
        log.info("settled", net_cents={f"seat{r.seat}": r.net_cents for r in seats})
        rm.step("collect")
        self.custody.collect()
        self.dealer.collect()
        log.info("collected", places=self.custody.places())
        rm.step("close")
        self.rounds_played = number
        return RoundResult(number, round_id, deck.deck_id, deck.back_colour, dealer_hand, qualifies, seats, reads)
