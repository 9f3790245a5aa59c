"""The table controller: the conductor of the round and deck procedure.

:class:`TableController` owns the table's state and says who does what; each
job is a part of its own under :mod:`table.procedure`:

=================  ====================================================================
part               job
=================  ====================================================================
``state``          what the parts share: custody, the journal, the round in play, the
                   held round, the counts, the alarms; journal-before-act helpers
``intake``         every device event journaled, answered, checked for its device and
                   its draw index (SPEC §4.3, §6.3)
``decks``          the two decks moving shuffler -> shoe -> discard rack (649a.3(b));
                   verification and replacement (COMAR 36.05.03.27 C)
``round_play``     one round from the bets to the collect, its steps in order
                   (649a.11, 649a.12, 816a.1)
``holds``          holds, releases and voids; the two-person rule
``device_faults``  device faults people can fix (jam, door, cable, power cycle, a driver
                   that raises) waited out, said on every screen, journaled, never an exit
``startup``        recovery from the journal, anchors
=================  ====================================================================

One thread (the caller's) feeds both machines: it prompts the dealer for a
physical action, then consumes device events from the one queue both links
share, in arrival order. Each device event is written to the journal before
anything is done with it, and ACKed to the device only then, so a controller
killed at any point gets the event again after restart (SPEC §6.3). The same
code runs a real table (a console dealer) and a simulated one (the virtual
dealer of ``simulators``). On restart, custody is restored from the journal; a
round that was in progress is held for a supervisor, never silently resumed.
"""

from __future__ import annotations

import queue
from typing import Any, Callable

import structlog

from devices import CardShoe, Shuffler
from firmware_bridge.link import DeviceEvent, DeviceIdentity
from protocols.cards import Card

from . import recovery
from .bets import DEFAULT_LIMITS, BetBook, TableLimits, offered_kinds
from .players import FixedPlayers
from .console import Console
from .custody import DeckCustody
from .errors import RoundVoided, Sealed, TableError
from .journal import Journal
from .procedure.day_segments import ArchivePolicy, DaySegments
from .procedure.decks import DeckProcedure
from .procedure.device_faults import RideThrough
from .procedure.holds import Holds, Released, Voided
from .procedure.in_force import InForceRecord
from .procedure.intake import ConsoleWake, DeviceIntake, journaled_message
from .procedure.round_play import Players, RoundPlay
from .procedure.startup import JournalTampered, Startup
from .procedure.table_day import TableDayProcedure
from .procedure.state import (
    CardRead,
    Dealer,
    RoundResult,
    SeatResult,
    SeatView,
    TableDevices,
    TableEvent,
    TableState,
    TableTiming,
    wager_dict,
)
from .rules.profiles import PENNSYLVANIA, RulesProfile
from .rules.settlement import Tables
from .rules.strategy import Decide, q64_player
from .sealing import mask_cards
from .day.segments import ArchiveError

log = structlog.get_logger("table.controller")

__all__ = ["TableController", "TableTiming", "Dealer", "CardRead", "SeatResult", "RoundResult", "SeatView",
           "TableEvent", "JournalTampered", "ConsoleWake", "journaled_message"]


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
    supervisor acknowledges it. ``limits``: the table's limits (``[limits]``; None:
    the documented defaults, and a dealer who closes bets with none placed gets the
    fixed bet on every seat, as before bets were placed). ``players``: who bets on a
    simulated table (:mod:`table.players`; default the fixed bet, ``ante_cents`` and
    ``side_wagers`` on every seat). ``floor``: the :class:`table.floor_anchor.FloorLink` this
    start reports to (None: none; a journal that names one then holds for a supervisor's
    sign-off). ``unconfirmed``: why the floor's notary could not
    confirm the journal's end (``[floor] unreachable = "hold"``): the table then holds
    for a supervisor's acknowledgement before it deals, as for a journal behind an anchor.
    ``day_required``: no round is dealt while the table is closed for the gaming day
    (:meth:`table_procedure` or a front door's ``table_procedure`` command opens it; the
    table waits for it, or raises :class:`~table.day.gaming_day.TableClosed` with no console
    attached). ``in_force``: what the caller knows is in force besides the paytables,
    profile, limits and seats (``gaming_day``, ``floor``, ``drivers``), journaled with
    them at start, at each gaming day's segment and at every change
    (:class:`~table.procedure.in_force.InForceRecord`, docs/journal.md). Raises :class:`RoundHeld`, :class:`DeviceTimeout`,
    :class:`DeviceFault`, :class:`SupervisorRequired`, and
    :class:`~table.journal.JournalWriteError` when the journal cannot be
    written (nothing is then acted on or acknowledged).
    """

    #: cards in a verified deck: what the shoe holds when it is loaded (SPEC §4.2)
    DECK_SIZE = DeviceIntake.DECK_SIZE

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
        day_required: bool = False,
        limits: TableLimits | None = None,
        players: Players | None = None,
        unconfirmed: str | None = None,
        floor: Any = None,
        archive: ArchivePolicy | None = None,
        in_force: dict[str, Any] | None = None,
    ) -> None:
        if not 1 <= seats <= 7:
            raise ValueError(f"seats must be 1..7, got {seats}")
        if ante_cents <= 0:
            raise ValueError("ante_cents must be positive")
        if journal is not None and journal.key is None:
            raise ValueError("the controller's journal needs the table key (it seals cards and signs checkpoints)")
        self.ante_cents = ante_cents
        self.side_wagers = dict(side_wagers or {})
        self.console = console or Console()
        # The table's state and devices, and the parts that act on them (who does what).
        self.state = t = TableState(custody, journal, seats=seats, cursor=cursor or recovery.DeviceCursor())
        self.devices = d = TableDevices(shuffler, shoe, events, dealer, timing or TableTiming(), auto_dealer)
        self.intake = DeviceIntake(t, d)
        self.holds = Holds(t, d, self.intake, self.console)
        self.faults = RideThrough(t, d, self.intake, self.console)  # device faults people fix, waited out
        self.decks = DeckProcedure(t, d, self.intake, self.console, self.holds.wait_person, self.faults)
        # The bets: placed by people within the table's limits, or by the simulated players
        # (the fixed bet of ante_cents and side_wagers unless others are given), 649a.7, 816a.1.
        book = BetBook(limits or DEFAULT_LIMITS, seats, offered=offered_kinds(tables),
                      last=recovery.last_bets(journal))
        # The gaming day's procedures by people; ``day_required``: no round on a closed table.
        self.day = TableDayProcedure(t, required=day_required, console=self.console,
                                     calendar=_calendar_of(archive))
        self.console.keep_procedures = auto_dealer  # rounds back to back: procedures wait for the boundary
        self.rounds = RoundPlay(t, d, self.intake, self.holds, self.console, tables=tables, profile=profile,
                                decide=decide, book=book,
                                players=players or FixedPlayers(ante_cents, seats, self.side_wagers),
                                fixed_when_none=limits is None, day=self.day)
        self.startup = Startup(t, d, self.intake, self.console, list(anchors or []), unconfirmed=unconfirmed,
                               floor=floor)
        # One journal segment a gaming day, archived at the day's close.
        self.segments = DaySegments(t, archive) if archive is not None and journal is not None else None
        #: the table opened (:meth:`prepare` ran to its end): only then does :meth:`close` sign
        self._opened = False
        # What is in force (paytables, meter, profile, limits, ...), journaled: reports price from it.
        self.in_force = InForceRecord(t, current=lambda: (self.rounds.tables, self.rounds.profile),
                                      apply=self._apply_in_force, limits=limits.to_dict() if limits else None,
                                      settings=in_force)
        self.intake.on_wake = lambda: self.holds.check_void(t.round)  # a void accepted: carried out now
        self.console.status = self.status
        self.console.wake = self.intake.wake
        self.console.acknowledge = self.holds.acknowledge
        self._floor_behind: str | None = None  # why the floor went behind (another thread says)

    # -- the table's state, as callers read it ----------------------------------------------------

    custody = property(lambda self: self.state.custody, doc="The two decks (:class:`DeckCustody`).")
    journal = property(lambda self: self.state.journal, doc="The journal (None: none kept).")
    table_id = property(lambda self: self.state.table_id, doc="The table's id (the journal's).")
    seats = property(lambda self: self.state.seats, doc="Player positions in the layout.")
    cursor = property(lambda self: self.state.cursor, doc="The devices' last journaled events.")
    held = property(lambda self: self.state.held,
                    doc="The held round (:class:`~table.round.HeldRound`), None when none is.")
    rounds_played = property(lambda self: self.state.rounds_played, doc="Rounds settled and closed.")
    rounds_opened = property(lambda self: self.state.rounds_opened, doc="Rounds opened (the last number).")
    cards_read = property(lambda self: self.state.cards_read, doc="Cards dealt into rounds (read or entered).")
    events = property(lambda self: self.devices.events, doc="The devices' event queue.")
    shuffler = property(lambda self: self.devices.shuffler)
    shoe = property(lambda self: self.devices.shoe)
    dealer = property(lambda self: self.devices.dealer)
    timing = property(lambda self: self.devices.timing)
    auto_dealer = property(lambda self: self.devices.auto_dealer)
    tables = property(lambda self: self.rounds.tables)
    profile = property(lambda self: self.rounds.profile)

    @property
    def decide(self) -> Decide:
        """Each seat's play or fold (a person's entry, or a strategy); may be replaced."""
        return self.rounds.decide

    @decide.setter
    def decide(self, decide: Decide) -> None:
        self.rounds.decide = decide

    @property
    def anchors(self) -> list[dict[str, Any]]:
        """Signed checkpoints seen off the journal's own files (checked at start-up)."""
        return self.startup.anchors

    @anchors.setter
    def anchors(self, anchors: list[dict[str, Any]]) -> None:
        self.startup.anchors = list(anchors)

    # -- views --------------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[TableEvent], None]) -> None:
        """Call ``callback`` with every :class:`TableEvent` (in the controller's thread)."""
        self.state.subscribers.append(callback)

    def seat_view(self, seat: int) -> SeatView:
        """The current round as ``seat`` may see it: only its own cards; the dealer's
        hand and the result only after every seat has decided (816a.1)."""
        with self.state.lock:
            r = self.state.round
            if r is None:
                raise TableError("no round in progress")
            if not 1 <= seat <= self.seats:
                raise ValueError(f"seat must be 1..{self.seats}, got {seat}")
            # a seat with no wager (yet, while bets are open; or not this round) holds no cards
            revealed = not r.machine.dealer_hand_sealed
            res = r.results.get(seat)
            return SeatView(r.round_id, seat, tuple(r.hands.get(seat, ())), r.decisions.get(seat),
                            tuple(r.dealer) if revealed else None, res.net if res else None)

    def dealer_hand(self) -> list[Card]:
        """The dealer's cards; raises :class:`Sealed` until every seat has decided."""
        with self.state.lock:
            r = self.state.round
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
        t = self.state
        r = t.round
        round_info = None
        if r is not None:
            with t.lock:
                seats = {str(s): {"wagers": wager_dict({s: w})[str(s)], "cards": len(r.hands.get(s, ())),
                                  "decision": r.decisions[s].value if s in r.decisions else None}
                         for s, w in r.wagers.items()}
            round_info = {"round_id": r.round_id, "number": r.number, "state": r.machine.state,
                          "deck_id": r.deck.deck_id, "back_colour": str(r.deck.back_colour),
                          "dealer_cards": len(r.dealer), "seats": seats}
        bets = self.rounds.book.to_dict()
        exp = self.console.expectation
        links = {}
        for name, link in self.devices.links.items():
            ident = link.identity
            links[name] = {"up": link.alive, "state": link.state.value,
                           "serial": ident.serial_number if ident else None,
                           "firmware": ident.firmware_version if ident else None}
        held: dict[str, Any] | None = None
        h = t.held
        if h is not None:
            held = {"round_id": h.round_id, "deck_id": h.deck_id, "reason": h.reason, "number": h.number,
                    "settled": h.settled, "cause": h.cause}
            if h.void_request is not None:
                held["void_requested_by"] = h.void_request.supervisor
                # what the first supervisor wrote, for the second to read before confirming (masked as journaled)
                held["void_reason"] = mask_cards(str(h.void_request.reason or ""))
        return {
            "places": t.custody.places(),
            "decks": [{"deck_id": d.deck_id, "back_colour": str(d.back_colour), "place": d.state}
                      for d in t.custody.decks.values()],
            "rounds_played": t.rounds_played,
            "round": round_info,
            "held": held,
            "violations": len(t.custody.violations),
            "waiting_for": self.console.waiting_dict(exp) if exp is not None else None,
            "links": links,
            "alarms": t.alarms.now(),
            "void_needs_second_supervisor": self.console.void_policy.needs_second,
            "bets": bets,
            # the gaming day: open or closed, the shift, the last slip's number
            "table_day": self.day.status(),
        }

    # -- start-up and shutdown --------------------------------------------------------------------

    @staticmethod
    def resume_hook(journal: Journal | None) -> Callable[[DeviceIdentity], int | None]:
        """For ``DeviceDriver.open(resume=...)``: the SEQ of the last event journaled for a
        device identity in its current boot (:class:`table.recovery.DeviceCursor`). Pass
        the same cursor to the controller: ``TableController(..., cursor=hook.cursor)``."""
        cursor = recovery.device_cursor(journal) if journal is not None else recovery.DeviceCursor()
        return cursor.resume

    def recover(self) -> None:
        """Restore custody and counts from the journal (:class:`~table.procedure.startup.Startup`).
        Raises :class:`JournalTampered`."""
        self.startup.recover()
        self.day.recover()

    def settle_devices(self) -> None:
        """Take in the events the devices already delivered (sent before a restart); a custody
        violation among them holds the table as between rounds (:meth:`DeckProcedure.take_in`)."""
        self.decks.take_in(self.intake.take_in_delivered)

    def prepare(self) -> None:
        """Open the table: restore from the journal, take in what the devices held,
        move the decks until ready; sign a checkpoint. A round held across a restart
        is left for :meth:`play_round`, which has the supervisors resolve it first and
        reports it as any round (its result when released, :class:`RoundVoided`, or a
        hold again), so a caller's round loop sees it like every other round."""
        self.recover()
        # the devices' identities (serial, firmware) with the drivers the caller named
        self.in_force.settings["devices"] = {name: {"serial": i.serial_number, "firmware": i.firmware_version}
                                             if (i := link.identity) is not None else None
                                             for name, link in self.devices.links.items()}
        self.in_force.at_start()
        self.settle_devices()
        if self.state.held is None:
            self.advance()
        if self.journal is not None:
            if self.journal.last("table_open") is None:
                # The table opens only now: the first deck is verified and in the shoe.
                self.state.record("table_open", places=self.custody.places())
            self.checkpoint()
        self._opened = True
        self.roll_day()

    def roll_day(self) -> None:
        """Between rounds: close the gaming day and archive it when the table's clock is past
        the next day's start (:class:`~table.procedure.day_segments.DaySegments`). An
        archive that cannot be written or does not verify leaves the day in the live
        segment (logged; tried again before the next round)."""
        if self.segments is None:
            return
        try:
            if self.segments.roll_if_due() is not None:
                self.in_force.at_start("segment")  # each day's segment names what is in force
        except ArchiveError as exc:
            log.error("gaming_day_not_archived", error=str(exc)[:300])

    def checkpoint(self) -> dict[str, Any] | None:
        """Sign the journal's head now; returns the signed checkpoint, None without a journal."""
        return self.state.checkpoint()

    def close(self) -> None:
        """At shutdown: answer any command still waiting for one (the table stops waiting),
        and sign what the journal holds (a clean stop leaves no unsigned tail). A table that
        never opened (:meth:`prepare` refused to start: a journal behind its head file or
        an anchor, a floor removed without a sign-off) signs nothing: its checkpoint would
        replace the head file with the rolled-back branch's and launder the rollback
        (docs/journal.md, "A start that is refused signs nothing"); what it journaled stays an unsigned tail that
        the next start and ``tablectl audit verify`` still read as behind."""
        self.console.expect(None)
        j = self.journal
        if j is not None and j.last_seq and self._opened:
            last = j.last("checkpoint")
            if last is None or last.seq != j.last_seq:
                self.checkpoint()

    # -- the procedure --------------------------------------------------------------------------------

    def advance(self) -> None:
        """Move the decks until the table is ready for a round (:class:`DeckProcedure`)."""
        self.decks.advance()

    def floor_behind(self, why: str) -> None:
        """The floor's notary went behind what this table holds (``why``, one line; called from
        the broker client's thread by :class:`table.floor_anchor.ReceiptBook`): an alarm at
        once, and the table holds before its next round (:meth:`play_round`)."""
        with self.state.lock:
            self._floor_behind = str(why)[:1000]
        self.state.alarms.sound("incident", f"the floor is behind this table: {why}", key="floor_behind")

    def _hold_if_floor_behind(self) -> None:
        with self.state.lock:
            why, self._floor_behind = self._floor_behind, None
        if why is None:
            return
        self.state.alarms.clear("floor_behind")
        self.holds.hold_table(
            f"the floor is behind this table: {why}",
            "a supervisor to check the floor's database with the floor manager (put back the newest copy, or "
            "have it seeded from the tables' records) and acknowledge the incident", floor_behind=True)

    def play_round(self) -> RoundResult:
        """Deal, decide, reveal, settle and collect one round; a round held before is
        resolved by the supervisors first, and a floor gone behind the table holds it
        before the round opens (:meth:`floor_behind`). Raises :class:`RoundHeld` on a custody
        violation (the round then waits for a supervisor), :class:`DeviceTimeout` /
        :class:`DeviceFault` on devices, :class:`RoundVoided`."""
        if self.state.held is not None:
            outcome = self.holds.resolve()
            if isinstance(outcome, Released):
                return self.rounds.run(outcome.round, resumed=True)
            if isinstance(outcome, Voided):  # reported like a void during the round: a round voided is not dealt
                raise RoundVoided(outcome.round_id, outcome.reason)
        self._hold_if_floor_behind()
        self.roll_day()  # the first round past the gaming day's start opens the next day's segment
        # Procedures kept for the boundary are carried out; a closed table deals no round, it
        # waits for people to open it (TableClosed with nobody to ask; COMAR 36.05.03.10).
        if self.day.between_rounds():
            self.roll_day()  # it waited to be opened (overnight, say): the day may have turned meanwhile
        self.decks.advance()
        return self.rounds.run(self.rounds.open())

    def table_procedure(self, procedure: str, args: dict[str, Any], *, dealer: str, supervisor: str) -> dict[str, Any]:
        """Carry out one of the gaming day's procedures between rounds (open, shift change,
        fill, credit, close, drop: :class:`~table.procedure.table_day.TableDayProcedure`),
        signed by ``dealer`` and ``supervisor`` (two people, proven by the front door).
        Returns the journaled slip; raises :class:`~table.day.gaming_day.ProcedureError`."""
        return self.day.carry_out(procedure, args, dealer=dealer, supervisor=supervisor)

    def resolve_held(self) -> RoundResult | None:
        """Resolve a held round as the supervisors decide (:meth:`Holds.resolve`): a
        released round is played on and its result returned; None when it was voided,
        or, already settled, collected, or when none was held. :meth:`play_round`
        raises a void as :class:`RoundVoided`."""
        outcome = self.holds.resolve()
        return self.rounds.run(outcome.round, resumed=True) if isinstance(outcome, Released) else None

    def change_in_force(self, *, by: dict[str, Any], tables: Tables | None = None,
                        profile: RulesProfile | None = None, limits: TableLimits | None = None) -> dict[str, Any]:
        """A person (``by``: ``{"role", "id"}``) changes the paytables, the rules profile or
        the limits between rounds: journaled naming them before it takes effect
        (:meth:`InForceRecord.change`). Returns the ``in_force`` entry's body. Raises
        :class:`~table.procedure.in_force.InForceChangeRefused`."""
        if limits is not None:
            self.rounds.book.limits = limits
        return self.in_force.change(by=by, tables=tables, profile=profile,
                                    limits=limits.to_dict() if limits is not None else None)

    def set_progressive_meter(self, meter_cents: int, *, by: dict[str, Any]) -> None:
        """A new progressive meter reading (cents) entered by ``by`` between rounds,
        journaled before a round is settled against it (58 Pa. Code 649a.12(e)). Raises
        :class:`~table.procedure.in_force.InForceChangeRefused`."""
        self.in_force.set_meter(meter_cents, by=by)

    def _apply_in_force(self, tables: Tables, profile: RulesProfile) -> None:
        self.rounds.tables, self.rounds.profile = tables, profile
        self.rounds.book.offered = offered_kinds(tables)

    def acknowledge(self, cmd: Any) -> None:
        """A supervisor acknowledges the table's incident alarms (:meth:`Holds.acknowledge`)."""
        self.holds.acknowledge(cmd)


def _calendar_of(archive: ArchivePolicy | None) -> Any:
    """The table's gaming-day calendar: the archive policy's start hour and time zone
    (``[gaming_day]``), else the default (06:00 UTC)."""
    from .day.calendar import Calendar

    return Calendar(archive.start_hour, archive.timezone) if archive is not None else Calendar()
