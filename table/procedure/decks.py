"""The deck procedure: two decks moving shuffler -> shoe -> discard rack.

Between rounds the verified deck comes out of the shuffler into the shoe and
the deck just played goes from the discard rack into the shuffler to be
shuffled and counted (58 Pa. Code 649a.3(b); California TCP standards of
play: two decks of different back colours, alternating every round). A deck
whose count is wrong is out of service until a supervisor registers its
replacement (COMAR 36.05.03.27 C). After a restart the devices' own status
says which steps were already done; what they did with no record is adopted
as an incident.

May touch: custody (through the devices' events, :mod:`table.procedure.intake`),
the dealer (physical prompts), the console's expectation, the shuffler's and
shoe's status and the shuffle command. Never a round's cards or wagers.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import structlog

from firmware_bridge.errors import LinkError
from protocols.cards import BackColour
from protocols.messages import DeckDelivered, DeckInserted, DeckVerified, DeviceState, Message, ShoeLoaded

from ..console import Command, Console, Expectation
from ..custody import CustodyViolation, Deck, DeckPlace as P, Rule
from ..errors import DeviceFault, DeviceTimeout, ShufflerStopped, TableError
from ..sealing import mask_cards
from .device_faults import RideThrough
from .intake import DeviceIntake, journaled_message
from .state import TableDevices, TableState, by

log = structlog.get_logger("table")

#: ``wait_person(accepts, what, **kw) -> Command``: a person's command (the holds part's, so a
#: void accepted meanwhile is carried out)
WaitPerson = Callable[..., Command]


#: the custody rules a deck step between rounds can break by a dealer's slip, answered by
#: counting the decks again (:meth:`DeckProcedure._recount`) rather than stopping the table
RECOUNTED_RULES = frozenset({Rule.OUT_OF_ORDER, Rule.DECK_NOT_VERIFIED, Rule.SHOE_LOADED_WITH_DECK_JUST_PLAYED})
#: the custody rules broken between rounds that hold the table for a supervisor before any deck
#: moves again (:meth:`DeckProcedure._hold_table`): cards on the table that belong to no verified
#: deck (a second deck of one colour; a shoe holding more than the deck loaded into it)
HELD_RULES = frozenset({Rule.SECOND_DECK, Rule.FOREIGN_CARD})


class DeckProcedure:
    """Moves the decks until the table is ready for a round (:meth:`advance`)."""

    #: how often the shoe's status is read while the dealer empties it (it sends no event for that)
    SHOE_CLEAR_POLL_S = 0.25
    #: a bound on the steps one :meth:`advance` takes (a loop that never settles is a fault)
    MAX_STEPS = 40

    def __init__(self, state: TableState, devices: TableDevices, intake: DeviceIntake, console: Console,
                 wait_person: WaitPerson, faults: RideThrough | None = None) -> None:
        self.t = state
        self.d = devices
        self.intake = intake
        self.console = console
        self.wait_person = wait_person
        #: a start without the journal (none kept, or an empty one): the only time the shoe's own
        #: word for a deck loaded is adopted (then the deck is counted again before it is dealt);
        #: cleared once the table is first ready, and by any recount or hold in this process
        self.start_unjournaled = state.journal is None or state.journal.last_seq == 0
        self.faults = faults or RideThrough(state, devices, intake, console)

    def advance(self) -> None:
        """Move the decks until the table is ready for a round: a verified deck in
        the shoe, not the one played last, and the other deck verified in the
        shuffler (649a.3(b)). Works from any custody state, so it also finishes
        a procedure a restart interrupted. A deck out of service is taken out of
        the shuffler, then a supervisor registers its replacement (COMAR 36.05.03.27 C).
        Raises :class:`TableError` when custody cannot reach a ready state."""
        stops = 0
        for _ in range(self.MAX_STEPS):
            try:
                if self._advance_step():
                    return
            except CustodyViolation as v:
                self._between_rounds(v)
            except ShufflerStopped as exc:
                stops += 1
                if stops > 3 and not self.console.attached:
                    raise
                log.warning("shuffle_repeated", reason=str(exc), attempt=stops)
                # a jam or the door (SPEC §4.2): the shuffle is asked again once the shuffler is clear
                self.faults.until_clear("shuffler", str(exc), "the shuffle to be asked again")
        raise TableError(f"the decks did not reach a ready state: {self.t.custody.places()}")

    def _advance_step(self) -> bool:
        """One step of :meth:`advance`; True once the table is ready."""
        c = self.t.custody
        out = self.t.deck_in(P.OUT_OF_SERVICE)
        if out is not None:
            if self._shuffler_holds(out.back_colour):
                self._step("take_from_shuffler", out.back_colour, DeckDelivered,
                           f"the out-of-service {out.back_colour} deck {out.deck_id} out of the shuffler")
                return False
            self._replace_deck(out)
            return False
        in_shuffler = self.t.deck_in(P.IN_SHUFFLER, P.SHUFFLING, P.VERIFIED)
        in_shoe = self.t.deck_in(P.DELIVERED, P.IN_SHOE, P.IN_PLAY)
        if (in_shoe is not None and in_shoe.place is P.IN_SHOE and in_shoe is not c.last_played
                and in_shuffler is not None and in_shuffler.place is P.VERIFIED):
            self.console.expect(None)
            self.start_unjournaled = False  # from here a deck reaches the shoe only from the shuffler's delivery
            return True
        if in_shoe is not None and in_shoe.place is P.IN_PLAY:
            raise TableError(f"deck {in_shoe.deck_id} still has a round's cards out; resolve the held round")
        if in_shuffler is not None and in_shuffler.place is P.SHUFFLING:
            self.await_verification(in_shuffler)
        elif in_shuffler is not None and in_shuffler.place is P.IN_SHUFFLER:
            self._shuffle(in_shuffler)
        elif in_shoe is not None and in_shoe.place is P.DELIVERED:
            self._step("load_shoe", in_shoe.back_colour, ShoeLoaded, f"the {in_shoe.back_colour} deck in the shoe")
        elif in_shuffler is not None and in_shoe is None and in_shuffler is not c.last_played:
            self._step("take_from_shuffler", in_shuffler.back_colour, DeckDelivered,
                       f"the {in_shuffler.back_colour} deck out of the shuffler")
        elif in_shuffler is None:
            self._insert_next(in_shoe)
        else:
            raise TableError(f"deck custody is stuck at {c.places()}; a supervisor must inspect the table")
        return False

    def take_in(self, step: Callable[[], None]) -> None:
        """Run ``step`` (events the devices delivered before the table opened) as a step of
        :meth:`advance`: a custody violation found holds the table or recounts the decks, as
        there, never raised out of the start (58 Pa. Code 649a.3(b); COMAR 36.05.03.27 C)."""
        try:
            step()
        except CustodyViolation as v:
            self._between_rounds(v)

    def _between_rounds(self, v: CustodyViolation) -> None:
        if self.t.round is not None or v.rule not in RECOUNTED_RULES | HELD_RULES:
            raise v  # a round is out, or the rule is neither's: not a step between rounds
        (self._hold_table if v.rule in HELD_RULES else self._recount)(v)

    def _recount(self, v: CustodyViolation) -> None:
        """A deck step out of order between rounds (a dealer's slip: a deck put back into the
        shuffler, the shoe loaded again): the rule broken is already journaled; it is an
        incident, and instead of stopping the table every deck not in play goes round again
        through the shuffler, found where it is from the devices' status and counted before
        it is dealt (:meth:`~table.custody.DeckCustody.recount`, journaled as the custody
        step ``recount``, replayed after a restart). The incident stands until a supervisor
        acknowledges it."""
        text = (f"a deck step out of order ({v.rule.value.replace('_', ' ')}: {mask_cards(v.detail)}): every deck "
                "not in play is counted again in the shuffler before it is dealt")
        self.console.expect(None)  # the step the slip broke is no longer asked for
        with self.t.batch():
            self.t.op("recount", rule=v.rule.value)
            self.t.custody.recount()
            self.t.record("incident", what=text)
        self.start_unjournaled = False
        log.error("deck_custody_recount", rule=v.rule.value, detail=mask_cards(v.detail))
        self.t.alarms.sound("incident", text)
        self.t.publish("incident", what=text)

    def _hold_table(self, v: CustodyViolation) -> None:
        """Cards on the table that belong to no verified deck, found between rounds (a second
        deck of one colour: one counted in the shuffler while the shoe holds cards of its
        colour; a shoe holding more cards than the deck loaded into it): the violation is
        already journaled. Every deck not in play goes off the table (custody step
        ``recount``, journaled with the incident, as :meth:`_recount`), and the table is
        held: no deck moves and no round is dealt until a supervisor acknowledges the
        incident (``acknowledge_incident``, journaled with who), having taken the cards
        that are not the table's off it (58 Pa. Code 649a.3(b): the table's two decks;
        COMAR 36.05.03.27 C: a deck is dealt only as the shuffler counted it). Then each
        deck is found from the devices' status and counted again in the shuffler; cards
        still there are found again, and held again."""
        what = ("a second deck of one colour on the table" if v.rule is Rule.SECOND_DECK
                else "the shoe holds more cards than the deck loaded into it")
        text = (f"custody violation: {what} ({mask_cards(v.detail)}); the table is held: a supervisor takes the "
                "cards that are not the table's off it, then every deck not in play is counted again in the shuffler")
        self.console.expect(None)
        with self.t.batch():
            self.t.op("recount", rule=v.rule.value)
            self.t.custody.recount()
            self.t.record("incident", what=text, rule=v.rule.value, held=True)
        self.start_unjournaled = False
        log.error("deck_custody_held", rule=v.rule.value, detail=mask_cards(v.detail))
        self.t.alarms.sound("incident", text, key="custody_hold")
        self.t.publish("incident", what=text)
        cmd = self.wait_person(("acknowledge_incident",), f"a supervisor to acknowledge the custody violation "
                               f"({v.rule.value.replace('_', ' ')}) once the cards that are not the table's are off "
                               "it; the decks are then counted again", role="supervisor")
        self.t.record("supervisor", action="acknowledge_incident", supervisor=cmd.person, rule=v.rule.value,
                      **by(cmd))
        self.t.alarms.take_incidents("custody_hold")
        cmd.answer(ok=True, acknowledged=v.rule.value)

    def _insert_next(self, in_shoe: Deck | None) -> None:
        """The shuffler is empty: the deck from the discard rack (or off the table) goes in;
        one the shuffler already holds (a restart) is that one."""
        c = self.t.custody
        ready = [d for d in c.decks.values() if d.place in (P.IN_DISCARD_RACK, P.OFF_TABLE) and d is not in_shoe]
        inside = self._shuffler_colour() if ready else None
        if inside is None and len(ready) > 1:
            # Not the colour the shoe shows (after a recount, the deck played may still be in it):
            # that deck is cleared from the shoe when the other is loaded, and counted after it.
            shoe = self.intake.shoe_colour()
            ready.sort(key=lambda d: d.back_colour == shoe)
        nxt = next((d for d in ready if d.back_colour == inside), ready[0] if ready else None)
        if nxt is None:
            raise TableError(f"no deck can go into the shuffler: {c.places()}")
        self._step("insert_deck", nxt.back_colour, DeckInserted, f"the {nxt.back_colour} deck in the shuffler")

    # -- the devices' own word ---------------------------------------------------------------

    def _shuffler_colour(self) -> BackColour | None:
        """The back colour of the deck the shuffler holds (its own status), None when empty."""
        st = self.faults.call("shuffler", self.d.shuffler.status, "the shuffler's status")
        return None if st.state is DeviceState.IDLE else st.back_colour

    def _device_status(self, action: str, colour: BackColour) -> str:
        """Whether a device already shows ``action`` done (after a restart, or a dealer
        ahead of the prompt): ``"done"``, ``"todo"``, ``"stub"`` (the shoe still holds the
        stub of a deck the table collected: out it comes before the next deck is loaded),
        or ``"occupied"`` (the shoe holds a deck the table has no record of). For a deck
        put in, the device must hold a deck of ``colour`` (the previous deck's stub left
        in the shoe is not the next deck loaded)."""
        which = "shoe" if action == "load_shoe" else "shuffler"
        links = self.d.links
        if not links[self.d.shoe_name if which == "shoe" else self.d.shuffler_name].alive:
            self._expect_reconnect(which)  # said now: the status request waits for the link to come back
        try:
            return self._device_status_of(action, colour)
        finally:
            exp = self.console.expectation
            if exp is not None and exp.action == "reconnect" and (links[self.d.shuffler_name].alive
                                                                   and links[self.d.shoe_name].alive):
                self.console.expect(None)  # the device is back: the step says what it waits for now

    def _device_status_of(self, action: str, colour: BackColour) -> str:
        which = "shoe" if action == "load_shoe" else "shuffler"
        status = self.d.shoe.status if which == "shoe" else self.d.shuffler.status
        try:
            st = self.faults.call(which, status, f"the {which}'s status")
            if action == "take_from_shuffler":
                return "done" if st.state is DeviceState.IDLE else "todo"
            if action in ("insert_deck", "load_shoe"):
                if st.state is DeviceState.IDLE:
                    return "todo"
                if st.back_colour == colour:
                    return "done"
                if action == "load_shoe":
                    # The stub of a deck the table collected is taken out before the next deck goes in
                    # (the shoe takes a deck only when empty); a deck it has no record of on the table
                    # (a restart without the journal) is an incident.
                    known = next((d for d in self.t.custody.decks.values() if d.back_colour == st.back_colour),
                                 None)
                    if known is None or known.place is P.OFF_TABLE:
                        return "occupied"
                    return "stub"
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

    # -- one physical step --------------------------------------------------------------------

    def _step(self, action: str, colour: BackColour, expect: type[Message], what: str) -> None:
        """Journal the prompt, ask the dealer, wait for the device to confirm.

        When the device already shows the action done (a restart came between the
        action and its record) its event is on its way, resent within the device's
        retransmit schedule (SPEC §6.3); when none comes in that time the event was
        taken before the restart by a controller that kept no journal: the table
        adopts what the device reports (journaled as an incident) and goes on."""
        status = self._device_status(action, colour)
        deck_id = self.t.custody.deck(colour).deck_id
        if status == "occupied":  # the shoe holds another deck, of which the table has no record
            self._clear_shoe(colour)
        elif status == "stub":  # the last deck's stub is still in the shoe: out first, then the load
            self._take_stub(colour)
        elif status == "done":
            device = "shoe" if action == "load_shoe" else "shuffler"
            # A device that cannot resend (docs/drivers.md, "Capabilities") brings nothing back:
            # only an event already delivered is taken; else the device's word is adopted at once.
            source = self.d.shoe_name if device == "shoe" else self.d.shuffler_name
            window = self.d.resend_window_s if self.intake.capabilities(source).resend else 0.0
            # Said as it is: the device shows the step done and its report has not come in (after a
            # restart, or a dealer ahead of the prompt); no restart is claimed that did not happen.
            self.console.expect(Expectation(
                "device_record", f"the {device}'s own report of {what}: the {device} shows it done already, "
                f"and the table waits {window:g} s for its report, else it takes the {device}'s word", "device",
                colour=str(colour), deck_id=deck_id))
            try:
                self.intake.expect(expect, window, what)
            except DeviceTimeout:
                if action == "load_shoe" and not self.start_unjournaled:
                    self.console.expect(None)
                    # The shoe shows the colour but no load of the deck the shuffler delivered was
                    # seen (nor resent): its word is not taken while the process runs with its record.
                    v = self.t.custody.second_deck(colour, f"the shoe (which shows a {colour} deck the table "
                                                           f"did not see loaded)")
                    self.t.violation(v)
                    raise v from None
                self._adopt(action, colour, what)
            self.console.expect(None)
            if action == "load_shoe":
                self._check_load()
            return
        self.t.record("prompt", action=action, colour=str(colour))
        r = self.t.round
        self.console.expect(Expectation(action, f"the dealer to put {what}" if action != "take_from_shuffler"
                                        else f"the dealer to take {what}", "device", (),
                                        round_id=r.round_id if r else None, colour=str(colour), deck_id=deck_id))
        args = () if action == "take_from_shuffler" else (colour,)
        getattr(self.d.dealer, action)(*args)
        self._await_step(action, colour, expect, what)
        if action == "load_shoe":
            self._check_load()

    def _await_step(self, action: str, colour: BackColour, expect: type[Message], what: str) -> None:
        """Wait for the event confirming the dealer's ``action`` (within ``dealer_wait_s``), in
        slices of the device's resend window. A device that shows the action done through two
        quiet slices had its event lost in a power cycle between the action and the table's
        answer (SPEC §6.5: unacknowledged events do not survive it): the table takes the step
        from the device's status (:meth:`_from_status`) and goes on. Raises
        :class:`DeviceTimeout` past ``dealer_wait_s``."""
        clock = self.d.timing.clock
        wait = self.d.dealer_wait_s
        deadline = clock.monotonic() + wait
        window = max(self.d.resend_window_s, 0.5)
        seen_done = False
        while True:
            left = deadline - clock.monotonic()
            try:
                self.intake.expect(expect, max(0.0, min(window, left)), what)
                return
            except DeviceTimeout:
                pass
            except DeviceFault as exc:
                if not self._away(exc, what):
                    raise
                deadline = clock.monotonic() + wait  # the time a device was away is not the dealer's
                continue
            done = self._device_status_of(action, colour) == "done"
            if done and seen_done and self._from_status(action, colour, what):
                return
            seen_done = done
            if done:  # the dealer did it: one more resend window for its event before the status is taken
                deadline = max(deadline, clock.monotonic() + window)
            elif left <= window:
                raise DeviceTimeout(f"nothing within {wait:g} s while waiting for {what}")

    def _away(self, exc: DeviceFault, what: str) -> bool:
        """A wait ended because a device's link is down (a pulled cable, a power cycle):
        waited out until it answers again (:meth:`RideThrough.wait_out`), then the caller
        reconciles from its status. False when every link is up (another fault: raised)."""
        away = [name for name, link in self.d.links.items() if not link.alive]
        if not away:
            return False
        which = "shoe" if away[0] == self.d.shoe_name else "shuffler"
        self.faults.wait_out(which, exc, what)
        return True

    def _from_status(self, action: str, colour: BackColour, what: str) -> bool:
        """The device's event for ``action`` was lost in a power cycle (its status shows the
        step done, and no resend came): the step is taken from the status, journaled as an
        incident and a ``device_event`` of source ``status`` (replayed after a restart as
        any), and custody goes on. What the status cannot prove is counted again: a deck
        put into the shuffler is counted by its shuffle; a deck taken out of it was
        verified there; the shoe's load is taken only with its count of a whole deck.
        Returns False when the status proves nothing (the wait goes on)."""
        if action == "load_shoe":
            st = self.faults.call("shoe", self.d.shoe.status, "the shoe's status")
            if st.cards != self.intake.DECK_SIZE:
                return False  # not provable from the status: the wait goes on
        msg = {"insert_deck": DeckInserted(colour), "take_from_shuffler": DeckDelivered(colour),
               "load_shoe": ShoeLoaded(colour)}[action]
        device = "shoe" if action == "load_shoe" else "shuffler"
        text = (f"the {device}'s event for {what} was lost (a power cycle before the table answered it): "
                f"taken from the {device}'s status")
        with self.t.batch():
            self.t.record("incident", what=text)
            self.t.record("device_event", source="status", message=journaled_message(msg))
        log.warning("device_event_from_status", action=action, back_colour=str(colour))
        self.t.alarms.sound("incident", text)
        self.t.publish("incident", what=text)
        if action == "load_shoe":  # a deck loaded: the draws count from it, as its event would have set
            self.t.next_draw = 0
            self.t.in_flight_round = None
        self.intake.apply(msg)
        return True

    def _check_load(self) -> None:
        """At the load the shoe holds one deck of 52, no more (58 Pa. Code 649a.3; COMAR
        36.05.03.27 C): more is cards that did not come from the shuffler's count, and
        the table is held (:meth:`_hold_table`). A deck the shoe's word was adopted for
        is counted again anyway. Fewer is found at the end of the deal, as a card out."""
        deck = self.t.deck_in(P.IN_SHOE)
        if deck is None:
            return  # the load was adopted and the deck sent round the shuffler again
        # A shoe that does not answer now is asked again before the first card.
        self.intake.check_not_more(self.intake.DECK_SIZE - self.t.next_draw, "at the load", required=False)

    def _clear_shoe(self, wanted: BackColour) -> None:
        """The shoe holds a deck the table has no record of (a restart without the journal,
        or a stub left in it): an incident; the dealer is asked to take it out into the
        discard rack (it is counted in the shuffler before it is dealt), and the table
        waits until the shoe is empty. The shoe sends no event when emptied, so its
        status is read every :attr:`SHOE_CLEAR_POLL_S` until then."""
        found = self.faults.call("shoe", self.d.shoe.status, "the shoe's status").back_colour
        text = (f"the shoe holds a {found} deck the table has no record of loading: it goes to the discard rack, "
                f"and through the shuffler to be counted before it is dealt")
        self.t.record("incident", what=text)
        log.warning("shoe_holds_unknown_deck", back_colour=str(found))
        self.t.alarms.sound("incident", text)
        self.t.publish("incident", what=text)
        deck = next((d for d in self.t.custody.decks.values() if d.back_colour == found), None)
        self.console.expect(Expectation("collect", f"the dealer to take the {found} deck out of the shoe and put it "
                                        f"in the discard rack, before the {wanted} deck is loaded", "device", (),
                                        colour=str(found), deck_id=deck.deck_id if deck else None))
        self._second_deck_check(found)
        self.d.dealer.collect()
        self._await_empty_shoe(f"the {found} deck", found)

    def _take_stub(self, wanted: BackColour) -> None:
        """The shoe still holds the stub of the last deck dealt (the table collected its round:
        the deck is in the discard rack by its record), and a shoe takes a deck only when
        empty. The table waits for the dealer to take the stub out into the discard rack
        (``waiting_for``: ``unload_shoe``, what every screen and the terminal say), then
        prompts the next deck's load. Not an incident: it is the collect's last step, which
        a dealer's hands (:meth:`Dealer.collect`) do on a simulated table. The shoe sends no
        event when emptied, so its status is read every :attr:`SHOE_CLEAR_POLL_S`."""
        try:
            found = self.d.shoe.status().back_colour
        except LinkError as exc:
            raise self._device_away("shoe", exc) from exc
        deck = next((d for d in self.t.custody.decks.values() if d.back_colour == found), None)
        self.t.record("prompt", action="unload_shoe", colour=str(found))
        self.console.expect(Expectation("unload_shoe", f"the dealer to take the {found} deck's stub out of the shoe "
                                        f"and put it in the discard rack, before the {wanted} deck is loaded",
                                        "device", (), colour=str(found), deck_id=deck.deck_id if deck else None))
        log.info("shoe_holds_stub", back_colour=str(found))
        self._second_deck_check(found)
        self.d.dealer.collect()
        self._await_empty_shoe(f"the {found} deck's stub", found)

    def _await_empty_shoe(self, what: str, colour: BackColour | None = None) -> None:
        """Wait (by the shoe's status; it sends no event for it) until the shoe is empty.
        A deck of the stub's ``colour`` put into the shuffler meanwhile, while the shoe still
        holds cards of that colour, is a second deck of one colour on the table (its
        ``DeckInserted`` waits in the queue for the step that asks for it, when the shoe
        would show the next deck): journaled and raised as :class:`CustodyViolation`, which
        holds the table (58 Pa. Code 649a.3(b); COMAR 36.05.03.27 C). Raises
        :class:`DeviceTimeout` after the dealer's wait."""
        deadline = time.monotonic() + self.d.dealer_wait_s
        while True:
            if colour is not None:
                empty = self._second_deck_check(colour)
            else:
                empty = self.faults.call("shoe", self.d.shoe.status, "the shoe's status").state is DeviceState.IDLE
            if empty:
                break
            if time.monotonic() > deadline:
                raise DeviceTimeout(f"the shoe still holds {what} after {self.d.dealer_wait_s:g} s")
            time.sleep(self.SHOE_CLEAR_POLL_S)
        self.console.expect(None)

    def _second_deck_check(self, colour: BackColour) -> bool:
        """A ``DeckInserted`` of ``colour`` waiting in the queue, and then the shoe's status
        still showing cards (those of ``colour``, the stub): the deck went into the shuffler
        with them in the shoe, a second deck of one colour (journaled; raises
        :class:`CustodyViolation`, 58 Pa. Code 649a.3(b), COMAR 36.05.03.27 C). The queue
        is looked at first: an insert made after the stub came out finds the shoe empty
        here, and is the next step's to take. The shuffler's status is asked too: a deck of
        ``colour`` it holds is one whether or not its event has crossed the link yet (the
        event may be on its way when the queue is looked at). Returns whether the shoe is
        empty."""
        inserted = self._insert_waiting(colour) or self._shuffler_holds(colour)
        empty = self.faults.call("shoe", self.d.shoe.status, "the shoe's status").state is DeviceState.IDLE
        if inserted and not empty:
            v = self.t.custody.second_deck(colour, "the shoe")
            self.t.violation(v)
            raise v
        return empty

    def _shuffler_holds(self, colour: BackColour) -> bool:
        """Whether the shuffler's status shows a deck of ``colour`` in it."""
        st = self.faults.call("shuffler", self.d.shuffler.status, "the shuffler's status")
        return st.state is not DeviceState.IDLE and st.back_colour == colour

    def _insert_waiting(self, colour: BackColour) -> bool:
        """Whether a ``DeckInserted`` of ``colour`` from the shuffler waits in the event queue
        (looked at, not taken: the step that asks for the deck takes it)."""
        q = self.d.events
        with q.mutex:
            return any(ev.source == self.d.shuffler_name and isinstance(ev.message, DeckInserted)
                       and ev.message.back_colour == colour for ev in q.queue)

    def _adopt(self, action: str, colour: BackColour, what: str) -> None:
        """A device shows ``action`` done but its event was taken by an earlier controller
        with no record (a restart without the journal): custody takes the device's word,
        and a deck found in the shuffler is counted again before it is dealt. The shoe's
        word (``load_shoe``) is taken only at a start without the journal
        (:attr:`start_unjournaled`), and then the deck goes round the shuffler again
        (custody step ``recount``) before it is dealt: a deck reaches the shoe only from
        the shuffler's verified delivery while the process runs."""
        deck = self.t.custody.deck(colour)
        msg = {"insert_deck": DeckInserted(colour), "take_from_shuffler": DeckDelivered(colour),
               "load_shoe": ShoeLoaded(colour)}[action]
        text = {"insert_deck": f"the shuffler holds the {colour} deck from before the restart: it is counted again",
                "take_from_shuffler": f"the {colour} deck is already out of the shuffler",
                "load_shoe": f"the shoe already holds the {colour} deck"}[action]
        with self.t.batch():
            self.t.record("incident", what=f"no record of {what}: {text}")
            self.t.record("device_event", source="adopted", message=journaled_message(msg))
        log.warning("device_state_adopted", action=action, deck_id=deck.deck_id, detail=text)
        self.t.alarms.sound("incident", f"no record of {what}: {text}")
        self.t.publish("incident", what=text)
        self.intake.apply_journaled(msg)
        if action == "load_shoe":
            # The shoe's word says where the deck is, not that it is the deck the shuffler
            # counted: it goes round the shuffler again before it is dealt.
            with self.t.batch():
                self.t.op("recount", rule="adopted_load")
                self.t.custody.recount()
                self.t.record("incident", what=f"the {colour} deck found in the shoe is counted again in the "
                                                "shuffler before it is dealt")
            self.start_unjournaled = False

    # -- shuffle and count ------------------------------------------------------------------------

    def _shuffle(self, deck: Deck) -> None:
        # The command entry is the custody step (start_shuffle) too: journal, then act.
        self.t.record("command", command="shuffle", colour=str(deck.back_colour))
        self.t.custody.on_shuffle_started(deck.back_colour)
        shuffling = Expectation("shuffle", f"the shuffler to count the {deck.back_colour} deck", "device",
                                colour=str(deck.back_colour), deck_id=deck.deck_id)
        self.console.expect(shuffling)
        self._ask_shuffle(deck)
        self.console.expect(shuffling)
        self.await_verification(deck, after_restart=False)

    def _ask_shuffle(self, deck: Deck) -> None:
        """Send ``Shuffle``, asked again once a door is closed, a jam cleared or the link back
        (:class:`~table.procedure.device_faults.RideThrough`); notes the shuffler's boot, so
        a power cycle that loses the shuffle is told (SPEC §6.5)."""
        self.faults.call("shuffler", self.d.shuffler.shuffle, f"the shuffle of the {deck.back_colour} deck")
        self._shuffle_boot = self.d.ident(self.d.shuffler_name)

    def await_verification(self, deck: Deck, after_restart: bool = True) -> None:
        """Wait for the shuffler's count of ``deck``. After a restart the journal may
        say "shuffling" for a command that never reached the shuffler: its status
        (still holding an unshuffled deck) tells, and the shuffle is sent again. A
        count that is wrong puts the deck out of service (an alarm; :meth:`advance`
        has it taken out and replaced)."""
        if after_restart:
            state = self.faults.call("shuffler", self.d.shuffler.status, "the shuffler's status").state
            if state is DeviceState.HAS_DECK:
                self.t.record("command", command="shuffle", colour=str(deck.back_colour), repeated=True)
                self._ask_shuffle(deck)
        try:
            self._await_count(deck)
        except CustodyViolation as v:
            if v.rule is not Rule.DECK_INCOMPLETE:
                raise
            log.error("deck_failed_verification", deck_id=deck.deck_id, detail=mask_cards(v.detail))
            self.t.alarms.sound("out_of_service", f"deck {deck.deck_id} ({deck.back_colour}) is out of service: "
                                           f"{mask_cards(v.detail)}", key=f"oos:{deck.back_colour}")
            return
        log.info("deck_verified", deck_id=deck.deck_id, places=self.t.custody.places())

    def _await_count(self, deck: Deck) -> None:
        """Wait for ``DeckVerified`` within the shuffle timeout, in slices of the device's
        resend window: a quiet slice after the shuffler rebooted (a new boot id since the
        shuffle was sent) or with the deck still unshuffled inside (``HAS_DECK``) means
        the shuffle, or its count, was lost in a power cycle (SPEC §6.5): it is asked
        again, journaled (``command`` ``shuffle`` ``repeated``, ``lost``). Raises
        :class:`DeviceTimeout` past ``shuffle_timeout_s``."""
        clock = self.d.timing.clock
        what = f"verification of the {deck.back_colour} deck"
        deadline = clock.monotonic() + self.d.timing.shuffle_timeout_s
        window = max(self.d.resend_window_s, 0.5)
        while True:
            left = deadline - clock.monotonic()
            try:
                self.intake.expect(DeckVerified, max(0.0, min(window, left)), what)
                return
            except DeviceTimeout:
                if left <= window:
                    raise DeviceTimeout(f"nothing within {self.d.timing.shuffle_timeout_s:g} s while waiting "
                                        f"for {what}") from None
            except ShufflerStopped:
                raise
            except DeviceFault as exc:
                if not self._away(exc, what):
                    raise
            st = self.faults.call("shuffler", self.d.shuffler.status, "the shuffler's status")
            rebooted = getattr(self, "_shuffle_boot", None) not in (None, self.d.ident(self.d.shuffler_name))
            if st.state is DeviceState.HAS_DECK or (rebooted and st.state is DeviceState.READY):
                why = "the shuffler restarted" if rebooted else "the shuffler holds the deck unshuffled"
                with self.t.batch():
                    self.t.record("incident", what=f"the shuffle of the {deck.back_colour} deck was lost ({why}): "
                                                   "it is asked again")
                    self.t.record("command", command="shuffle", colour=str(deck.back_colour), repeated=True,
                                  lost=why)
                log.warning("shuffle_lost", deck_id=deck.deck_id, why=why)
                self._ask_shuffle(deck)

    def _replace_deck(self, out: Deck) -> None:
        """A deck failed verification (and is out of the shuffler): it stays out until a
        supervisor registers a replacement (COMAR 36.05.03.27 C)."""
        log.error("deck_out_of_service", deck_id=out.deck_id, back_colour=str(out.back_colour))
        custody = self.t.custody

        def check(cmd: Command) -> dict[str, Any] | None:
            deck_id = str(cmd.args.get("deck_id") or "").strip()
            if not deck_id:
                return {"code": "bad_request", "error": "register_deck needs deck_id"}
            colour = cmd.args.get("colour")
            if colour is not None and str(colour).lower() != str(out.back_colour):
                return {"code": "refused", "error": f"the deck out of service has {out.back_colour} backs, "
                                                    f"not {colour}"}
            if any(d.deck_id == deck_id for d in custody.decks.values()):
                return {"code": "refused", "error": f"deck id {deck_id!r} is already in use"}
            return None

        cmd = self.wait_person(("register_deck",), f"a supervisor to register a replacement for deck "
                               f"{out.deck_id} ({out.back_colour})", role="supervisor", check=check)
        deck_id = str(cmd.args.get("deck_id") or "").strip()
        try:
            new = custody.replace_deck(out.back_colour, deck_id)
        except (ValueError, CustodyViolation) as exc:
            cmd.answer(ok=False, code="refused", error=str(exc))
            return
        self.t.record("supervisor", action="register_deck", supervisor=cmd.person, new_deck_id=deck_id,
                      replaces=out.deck_id, colour=str(out.back_colour), **by(cmd))
        self.t.alarms.clear(f"oos:{out.back_colour}")
        cmd.answer(ok=True, deck_id=new.deck_id, replaces=out.deck_id)
