"""Device intake: every device event journaled, answered, and checked for its device
and its place in the draw order.

One thread (the controller's) consumes the one queue both links deliver into,
in arrival order. Each event is written to the journal before anything is done
with it and ACKed to the device only then, so a controller killed at any point
gets the event again after restart (SPEC §6.3). Link notices (down, up,
rebooted, another device) and events the link refused are handled here.

Every card accounted for: per shoe load the draw index runs 0, 1,
2 ... with no gap (SPEC §4.3); a gap, a card event the host had to refuse, or
a card with no round to go to is journaled (its face sealed, with a commitment
to it) and raises, so the caller holds the round: a card is never shifted onto
the next seat.

One path for a card: every card event taken off the queue is a
:class:`~table.procedure.card_path.CardEvent` and goes through
:meth:`~table.procedure.card_path.CardPath.take_card` (:mod:`table.procedure.card_path`,
mixed in here), which says by what the table is doing (``CardMoment``) where it
goes: to the deal, or to one of the small named steps after it (drawn early,
beyond the deal, late for a held round, after a void, with no round, delivered
before a restart's start, let out before a collect).

A shoe whose driver declares a capability missing (docs/drivers.md,
"Capabilities") gets the table's fallback here: without ``draw_index`` the
table numbers the shoe's reads itself (:meth:`DeviceIntake.numbered`: no gap
can show, the shoe's count at the end of the deal is the check); without
``resend`` a card the dealer drew whose event does not come is looked for in
the shoe's count (:meth:`DeviceIntake.expect`): a lost event holds the round
at once instead of waiting for a resend that never comes.

May touch: the links (acknowledge, health, identity), the event queue, custody
(each non-card event is applied as :func:`table.recovery.apply` replays it),
the journal through :class:`~table.procedure.state.TableState`. Never asks a
person for anything: the parts above do.
"""

from __future__ import annotations

import dataclasses
import queue
import time
from typing import Any, Callable, TypeVar, cast

import structlog

from devices.contract import Capabilities, DeviceEvent, LinkError, LinkNotice, RefusedEvent
from devices.plugins import describe
from protocols.cards import BackColour
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

from ..custody import CustodyViolation, Deck, DeckPlace as P, Rule
from ..errors import DeviceFault, DeviceTimeout, ShufflerStopped
from ..sealing import mask_cards
from .card_path import CardEvent, CardMoment, CardPath
from .shoe_count import ShoeCountChecks
from .state import TableDevices, TableState

log = structlog.get_logger("table")

M = TypeVar("M")


class ConsoleWake:
    """The marker a console puts in the event queue: a void was accepted (carry it out now)."""


def journaled_message(msg: Message) -> dict[str, Any]:
    """A device message as its ``device_event`` entry holds it: :func:`message_to_dict`,
    except that a ``DeckVerified`` names the cards ``missing`` from the 52 instead of
    every card ``present`` (the same set; an empty list for a whole deck).
    :func:`table.recovery.apply` reads both forms."""
    d = message_to_dict(msg)
    if isinstance(msg, DeckVerified):
        d["missing"] = sorted(set(range(52)) - set(d.pop("present")))
    return d


class DeviceIntake(CardPath, ShoeCountChecks):
    """Takes the devices' events off the shared queue, journals and answers each.

    ``on_wake``: called when a console's void wakes a device wait (the holds part
    carries the void out then); set by the conductor once the parts exist.
    """

    #: cards in a verified deck: what the shoe holds when it is loaded (SPEC §4.2)
    DECK_SIZE = 52

    def __init__(self, state: TableState, devices: TableDevices) -> None:
        self.t = state
        self.d = devices
        self.on_wake: Callable[[], None] = lambda: None
        self._links_down: dict[str, float] = {}  # link name -> when it went down (monotonic s)
        #: after a shoe reboot in the deal: when (table clock) its count is asked again
        self._count_due: float | None = None
        self._count_out = 0

    # -- answering and identity ------------------------------------------------------------

    def answer(self, ev: DeviceEvent) -> None:
        """ACK (or NAK, for a refused event) a device event once it is journaled."""
        j = self.t.journal
        if j is not None and j.in_batch:
            raise RuntimeError("a device event is answered only once its entry is durable, never inside a batch")
        link = self.d.links.get(ev.source)
        if link is not None:
            link.acknowledge(ev)

    def identify(self, source: str) -> None:
        """Journal which device a link speaks to (its boot id: the cursor's key)."""
        ident = self.d.links[source].identity
        if ident is None:
            return
        self.t.cursor.identified(source, ident.serial_number, ident.boot_id)
        # a driver other than the SPEC's, or a device lacking a capability, is on the record
        # beside its identity: custody then rests on a fallback (docs/drivers.md, "Capabilities")
        about = describe(self.d.shuffler if source == self.d.shuffler_name else self.d.shoe)
        extra = about if about["driver"] != "spec" or about["missing"] else {}
        self.t.record("device", source=source, serial=ident.serial_number, boot_id=ident.boot_id,
                      firmware=ident.firmware_version, **extra)

    def capabilities(self, source: str) -> Capabilities:
        """What the device behind link ``source`` provides: its driver's declaration
        (:class:`devices.contract.Capabilities`, checked when the driver was taken in,
        ``device_faults.guarded``; docs/drivers.md, "Capabilities")."""
        driver = self.d.shuffler if source == self.d.shuffler_name else self.d.shoe
        capabilities: Capabilities = driver.capabilities  # checked when the driver was taken in (guarded)
        return capabilities

    def numbered(self, ev: DeviceEvent, msg: CardDrawn | CardUnreadable) -> CardEvent:
        """A card event (``msg`` is ``ev.message``) as the table numbers it. A shoe without a
        per-card draw index (``draw_index`` missing, docs/drivers.md) is numbered by the
        table: the next read since the load (``next_draw``, restored from the journal after
        a restart), whatever number its driver gave; a full shoe's own index is kept
        (SPEC §4.3). Returns ``ev`` as a :class:`CardEvent`, or a copy with that ``draw_index``."""
        if ev.source != self.d.shoe_name or self.capabilities(ev.source).draw_index:
            return CardEvent(ev, msg)
        mine = self.t.next_draw % 256
        if msg.draw_index == mine:
            return CardEvent(ev, msg)
        msg = dataclasses.replace(msg, draw_index=mine)
        return CardEvent(dataclasses.replace(ev, message=msg), msg)

    def wake(self) -> None:
        """Wake the controller from a device wait: a void was accepted (Console.wake)."""
        try:
            # the marker shares the devices' queue so one wait sees both; it is never a device's
            # message, and next_event takes it off before anything reads one (hence the cast)
            wake = cast(Message, ConsoleWake())
            self.d.events.put_nowait(DeviceEvent("console", wake, time.monotonic()))
        except queue.Full:
            pass  # events are waiting: the controller reads them, and checks the void at each step

    # -- the next event --------------------------------------------------------------------

    def next_event(self, timeout_s: float, what: str) -> CardEvent | Message:
        """The next device event, journaled then answered; link notices and refused
        events are handled here. Returns the message, or a :class:`CardEvent` for a
        card: a ``CardDrawn`` unjournaled (:meth:`take_card` journals it where it goes,
        :meth:`card_entry`, then answers it), a ``CardUnreadable`` journaled. Raises
        :class:`DeviceTimeout` when nothing came within ``timeout_s`` (on the table's
        clock), :class:`DeviceFault` when a link is down past its reconnect wait."""
        clock = self.d.timing.clock
        deadline = clock.monotonic() + timeout_s
        while True:
            now = time.monotonic()  # the link's deadlines are real time; the event's is on the clock
            due = self._count_due  # a shoe reboot's count is due: the wait ends then (_next_card_or_count)
            ends = deadline if due is None or self.t.round is None else min(deadline, due)
            remaining = clock.real_s(ends - clock.monotonic())  # real seconds
            down = self._link_down_deadline()
            if down is not None and self.t.round is not None:
                if now >= down[1]:  # a round whose device stays away is held within the link's timeout
                    raise DeviceFault(f"the {down[0]} link has been down for more than "
                                      f"{self.d.links[down[0]].config.reconnect_wait_s:g} s while waiting for {what}")
                remaining = min(remaining, down[1] - now)
            try:
                ev = self.d.events.get(timeout=remaining) if remaining > 0 else self.d.events.get_nowait()
            except queue.Empty:
                if down is not None and self.t.round is not None and clock.monotonic() < ends:
                    continue  # the link's own deadline: checked at the top
                for link in self.d.links.values():
                    if not link.alive:
                        raise DeviceFault(f"{link.name} link down while waiting for {what}") from None
                raise DeviceTimeout(f"nothing within {timeout_s:g} s while waiting for {what}") from None
            msg = ev.message
            if isinstance(msg, ConsoleWake):  # a void was accepted: carried out within this device step
                self.on_wake()
                continue
            if isinstance(msg, LinkNotice):
                self._on_notice(ev, msg)
                continue
            if isinstance(msg, RefusedEvent):
                self._on_refused(ev, msg)
                continue
            card: CardEvent | None = None
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                card = self.numbered(ev, msg)  # a shoe without a draw index: the table's number
                if isinstance(card.message, CardDrawn):
                    return card
                ev, msg = card.event, card.message
            self.t.record("device_event", source=ev.source, dseq=ev.seq, message=journaled_message(msg))
            self.t.cursor.journaled(ev.source, ev.seq)
            self.answer(ev)
            log.debug("device_event", source=ev.source, message=type(msg).__name__)
            if isinstance(msg, ShoeLoaded) and ev.source == self.d.shoe_name:
                self._count_due = None
                self.t.next_draw = 0
                self.t.in_flight_round = None
            return card if card is not None else msg

    def _link_down_deadline(self) -> tuple[str, float] | None:
        """The link down the longest and when its timeout (``reconnect_wait_s``) ends."""
        if not self._links_down:
            return None
        name, since = min(self._links_down.items(), key=lambda kv: kv[1])
        return name, since + self.d.links[name].config.reconnect_wait_s

    def _on_notice(self, ev: DeviceEvent, msg: LinkNotice) -> None:
        self.t.record("link", source=ev.source, notice=msg.kind, detail=mask_cards(msg.detail))
        if msg.kind == "link_down":
            self._links_down.setdefault(ev.source, time.monotonic())
            self.t.alarms.sound("device_down", f"the {ev.source} link is down: {mask_cards(msg.detail)}",
                         key=f"down:{ev.source}")
        elif msg.kind in ("link_up", "device_rebooted"):
            self._links_down.pop(ev.source, None)
            self.t.alarms.clear(f"down:{ev.source}")
        if msg.kind in ("link_up", "device_rebooted"):
            self.identify(ev.source)
        if msg.kind in ("identity_changed", "handshake_refused"):
            raise DeviceFault(f"{ev.source}: {msg.detail}; a supervisor must inspect the device")
        if msg.kind == "device_rebooted" and self.t.round is not None and ev.source == self.d.shoe_name:
            self.reconcile_shoe_reboot()
        log.warning("link_notice", source=ev.source, notice=msg.kind, detail=mask_cards(msg.detail))

    def reconcile_shoe_reboot(self) -> None:
        """The shoe power-cycled during a round: the events it had not had answered are lost
        (SPEC §6.5), its cards and its count are not. Its count is read: every card that left
        it since the load reached the table (``52 - held == reads``): the round goes on,
        journaled (``device_fault`` ``reconciled``). More left than arrived: the events of
        cards drawn after the reboot are still on their way, so the card wait
        (:meth:`expect`) gives them one resend window, then asks the count again
        (:meth:`lost_card_check`): a read lost in the power cycle cannot be proven, and the
        round is held for a supervisor (never dealt on). A shoe that does not answer its
        status holds the round as a device fault."""
        t = self.t
        try:
            held = self.d.shoe.status().cards
        except LinkError as exc:
            raise DeviceFault(f"the shoe rebooted during the round and does not answer its status ({exc})") from exc
        out, reads = self.DECK_SIZE - held, t.next_draw
        step = "reconciled" if out == reads else "counting"
        t.record("device_fault", step=step, source="shoe", reason="the shoe rebooted during the round",
                 shoe_holds=held, reads=reads)
        log.warning("shoe_reboot_counted", shoe_holds=held, reads=reads)
        if out != reads:
            self._count_due = self.d.timing.clock.monotonic() + self.d.resend_window_s
            self._count_out = out

    def _on_refused(self, ev: DeviceEvent, msg: RefusedEvent) -> None:
        """A device event the link refused (undecodable, or not from this kind of device,
        SPEC §4.5, §6.3): journaled as an incident, then NAKed. A card the shoe could
        not report leaves a card unaccounted for: the round is held (never a shifted
        deal); an unreadable count puts the deck being shuffled out of service."""
        t = self.t
        what = f"{ev.source} sent {msg.name}, refused: {msg.reason.replace('_', ' ')}"
        sealed = {"detail": msg.detail, "payload": msg.payload.hex()} if t.journal is not None else None
        t.record("incident", what=what, source=ev.source, dseq=ev.seq, type=msg.type, sealed=sealed)
        t.cursor.journaled(ev.source, ev.seq)
        self.answer(ev)
        log.error("event_refused", source=ev.source, message=msg.name, reason=msg.reason)
        if msg.reason == "undecodable" and msg.type == DeckVerified.TYPE and ev.source == self.d.shuffler_name:
            deck = t.deck_in(P.SHUFFLING, P.IN_SHUFFLER)
            if deck is not None:
                with t.batch():
                    t.op("fail_verification", colour=str(deck.back_colour))
                    t.custody.take_out_of_service(deck.back_colour)
                v = CustodyViolation(Rule.DECK_INCOMPLETE, f"the shuffler's count of deck {deck.deck_id} "
                                     f"({deck.back_colour}) could not be read: out of service")
                t.violation(v)
                raise v
        if t.round is None:
            if msg.type in (CardDrawn.TYPE, CardUnreadable.TYPE) and ev.source == self.d.shoe_name:
                raise DeviceFault(f"{what}: a card left the shoe with no round in progress")
            return
        if msg.reason == "wrong_device":
            raise CustodyViolation(Rule.EVENT_FROM_WRONG_DEVICE, f"{msg.name} arrived on the {ev.source}'s link")
        raise CustodyViolation(Rule.CARD_UNACCOUNTED if ev.source == self.d.shoe_name
                               else Rule.EVENT_FROM_WRONG_DEVICE,
                               f"the {ev.source} sent {msg.name} that could not be decoded: "
                               f"a card may have left the shoe unrecorded")

    def apply(self, msg: Message) -> Deck | None:
        """Feed one non-card device event to custody (already journaled: the replay of
        :func:`table.recovery.apply` does the same). Raises :class:`CustodyViolation`
        (journaled), :class:`ShufflerStopped` on a shuffler fault, :class:`DeviceFault`
        on an empty shoe."""
        t = self.t
        c = t.custody
        if isinstance(msg, DeckInserted):
            in_shoe = self.shoe_colour()
            try:
                deck = c.on_deck_inserted(msg.back_colour)
            except CustodyViolation as v:
                if in_shoe is not None and in_shoe == msg.back_colour and v.rule is Rule.OUT_OF_ORDER:
                    raise c.second_deck(msg.back_colour, "the shoe") from v
                raise
            if in_shoe is not None and in_shoe == msg.back_colour:
                raise c.second_deck(msg.back_colour, "the shoe")
            return deck
        if isinstance(msg, DeckVerified):
            try:
                deck = c.on_deck_verified(msg)
            except CustodyViolation as v:
                t.violation(v)
                raise
            in_shoe = self.shoe_colour()
            if in_shoe is not None and in_shoe == msg.back_colour:
                raise c.second_deck(msg.back_colour, "the shoe")
            if deck.commitment:  # public before any card of it is dealt (SPEC §4.2.1): shuffle_committed
                t.record("shuffle_commitment", deck=deck.deck_id, back_colour=str(deck.back_colour),
                         commitment=deck.commitment.hex())
            return deck
        if isinstance(msg, DeckDelivered):
            return c.on_deck_delivered(msg.back_colour)
        if isinstance(msg, ShoeLoaded):
            return c.on_shoe_loaded(msg.back_colour)
        if isinstance(msg, ShufflerFault):
            shuffling = [d for d in c.decks.values() if d.place is P.SHUFFLING]
            if shuffling:
                c.on_shuffle_fault(shuffling[0].back_colour)
            t.record("incident", what=f"shuffler fault: {msg.code.name.lower()}")
            raise ShufflerStopped(f"shuffler fault: {msg.code.name.lower()}; clear it, then the shuffle is repeated")
        if isinstance(msg, ShoeEmpty):
            raise DeviceFault(f"the shoe is empty after {msg.draws} draws")
        return None

    def shoe_colour(self) -> BackColour | None:
        """The back colour of the cards the shoe holds (its own status), None when it holds
        none or does not answer (a deck counted then is checked again at the load and
        before the first card). The shoe's word is the only sight the table has of a
        deck it did not load: a deck counted in the shuffler while the shoe holds cards
        of its colour is a second deck of one colour (:meth:`DeckCustody.second_deck`)."""
        if not self.d.links[self.d.shoe_name].alive:
            return None
        try:
            st = self.d.shoe.status()
        except LinkError:
            return None
        colour: BackColour = st.back_colour  # StatusReply.back_colour (the guarded driver's reply)
        if st.state is DeviceState.IDLE or not st.cards or colour is BackColour.NONE:
            return None
        return colour

    def apply_journaled(self, msg: Message) -> None:
        """:meth:`apply`, journaling the violation it raises unless it is a deck found
        incomplete (already journaled by custody's own step)."""
        try:
            self.apply(msg)
        except CustodyViolation as v:
            if v.rule is not Rule.DECK_INCOMPLETE:
                self.t.violation(v)
            raise

    #: a shoe that cannot resend: how long the table waits for a card's event before it
    #: asks the shoe's count whether the card already left (s, on the table's clock)
    LOST_EVENT_CHECK_S = 0.5

    def expect(self, kind: type[M], timeout_s: float, what: str) -> M:
        """Consume events (applying each to custody) until one of ``kind`` arrives;
        returns it. No card is awaited: a card event meanwhile is a stray
        (:meth:`take_card`). Raises :class:`DeviceTimeout`, :class:`DeviceFault`,
        :class:`CustodyViolation`."""
        got = self._wait(kind, timeout_s, what, CardMoment.NONE_DUE)
        if isinstance(got, CardEvent):  # take_card hands a card back to the deal only
            raise RuntimeError("a card was handed back while none was awaited")
        return got

    def expect_card(self, timeout_s: float, what: str) -> CardEvent:
        """Consume events (applying each to custody) until the shoe's next card arrives
        for the deal (:attr:`CardMoment.DEAL`); returns it, unjournaled (the deal
        journals it where it goes, :meth:`card_entry`). With a shoe that cannot resend
        (docs/drivers.md, "Capabilities") the wait is cut in :attr:`LOST_EVENT_CHECK_S`
        slices, each quiet one followed by :meth:`lost_card_check` (raises
        :class:`CustodyViolation` when the shoe let a card out whose event never came)."""
        got = self._wait(_NoMessage, timeout_s, what, CardMoment.DEAL)
        if not isinstance(got, CardEvent):  # no event is a _NoMessage
            raise RuntimeError("the deal's wait ended without a card")
        return got

    def _wait(self, kind: type[M], timeout_s: float, what: str, moment: CardMoment) -> M | CardEvent:
        """The wait of :meth:`expect` and :meth:`expect_card`: every card event meanwhile
        goes through :meth:`take_card` at ``moment``; the first one it hands back, or the
        first message of ``kind``, is returned."""
        clock = self.d.timing.clock
        deadline = clock.monotonic() + timeout_s
        cards = moment is CardMoment.DEAL
        watch = cards and not self.capabilities(self.d.shoe_name).resend
        suspect = False  # the shoe's count was ahead once: a second quiet slice confirms the loss
        overtime = False  # deferred once past the deadline: the next count is final (no deferral)
        while True:
            got: CardEvent | Message
            if watch:
                left = deadline - clock.monotonic()
                try:
                    got = self.next_event(max(0.0, min(self.LOST_EVENT_CHECK_S, left)), what)
                    suspect = False
                except DeviceTimeout as exc:
                    if left <= self.LOST_EVENT_CHECK_S:
                        raise DeviceTimeout(f"nothing within {timeout_s:g} s while waiting for {what}") from exc
                    suspect = self.lost_card_check(confirm=suspect)
                    continue
            else:
                # Even a shoe that resends can lose an event in a power cut or a fault of its own
                # (SPEC §6.5): while a card is awaited, each quiet stretch of the shoe's resend
                # window asks its count; ahead of the reads twice running, a card left it whose
                # event will not come (held: card_unaccounted); else the dealer has not drawn yet.
                dealing = cards and self.t.round is not None
                quiet = max(self.d.resend_window_s, 1.0)
                ends = min(deadline, clock.monotonic() + quiet) if dealing else deadline
                try:
                    got = self._next_card_or_count(ends, what, cards)
                    suspect = False
                except DeviceTimeout:
                    if not dealing:
                        raise
                    last = clock.monotonic() >= deadline
                    suspect = self.lost_card_check(confirm=suspect or last, defer=not overtime,
                                                   why=f"its event did not come within {quiet:g} s, twice")
                    if last and not suspect:  # (suspect at the last: delivered events are taken in first)
                        raise
                    # Past the deadline the events delivered are taken in once, then the count is
                    # final: a device that delivers an event with every count (a notice, a stray)
                    # would otherwise be deferred to for ever, the round neither held nor timed out.
                    overtime = overtime or last
                    continue
            if isinstance(got, CardEvent):
                card = self.take_card(got, moment)
                if card is not None:
                    return card
                continue
            self.apply_journaled(got)
            if isinstance(got, kind):
                return got

    def _next_card_or_count(self, deadline: float, what: str, cards: bool) -> CardEvent | Message:
        """:meth:`next_event` until ``deadline`` (table clock); after a shoe reboot in the deal
        (``_count_due``, :meth:`reconcile_shoe_reboot`) the shoe's count is asked once its
        resend window is over: a card that left it with no event holds the round."""
        clock = self.d.timing.clock
        while True:
            due = self._count_due
            ends = deadline if due is None or not cards else min(deadline, due)
            try:
                return self.next_event(max(0.0, ends - clock.monotonic()), what)
            except DeviceTimeout:
                if self._count_due is None or not cards or self.t.round is None:  # (set during the wait)
                    raise
                self._count_due = None
                if self.lost_card_check(confirm=True, why="the shoe rebooted during the round"):  # raises on a loss
                    # events were delivered: taken in at once, counted again after a quiet slice (a
                    # device delivering an event with every count never has it asked with no wait)
                    self._count_due = clock.monotonic() + self.LOST_EVENT_CHECK_S
                if clock.monotonic() >= deadline:
                    raise

    def lost_card_check(self, confirm: bool, why: str = "the shoe cannot resend", defer: bool = True) -> bool:
        """A shoe that cannot resend, quiet while a card is awaited: whether its own
        count says more cards left it since the load than the table took in. The first
        time (``confirm`` False) that only returns True: the event may be on the wire
        still. Ahead again after another quiet slice (``confirm``), the event of one
        card was lost on its way (a garbled line: nothing brings it back, docs/drivers.md
        "Capabilities"): journals an incident and the violation and raises
        :class:`CustodyViolation` (``card_unaccounted``), so the round is held, never
        dealt on. Events already delivered (on the queue, not yet taken in) when the count
        is read are taken in first: the loss is not declared then (returns True, still
        suspect), so a late event is never taken for a lost one; with ``defer`` False (the
        wait's deadline passed and its delivered events were taken in once) the count is
        final, events on the queue or not. A shoe that does not answer is left to the
        wait's own timeout."""
        if not self.d.links[self.d.shoe_name].alive:
            return False
        try:
            held = self.counted(self.d.shoe.status().cards)
        except LinkError:
            return False
        out, reads = self.DECK_SIZE - held, self.t.next_draw
        if out <= reads or not confirm:
            return out > reads
        if defer and not self.d.events.empty():
            # An event delivered while the count was asked (its way from the device runs on real
            # time: a loaded host, a driver's process) is taken in before any card is declared
            # lost: the wait takes it, then counts again after its quiet slices (still suspect).
            log.info("lost_card_check_deferred", shoe_holds=held, reads=reads)
            return True
        t = self.t
        t.record("incident", what=f"card event lost: {why}", shoe_holds=held, reads=reads)
        log.error("card_event_lost", shoe_holds=held, reads=reads)
        v = CustodyViolation(Rule.CARD_UNACCOUNTED, f"the shoe holds {held} cards: {out} left it since the load "
                             f"but {reads} reached the table, and the lost event cannot come back ({why}): "
                             "void the round (misdeal)")
        t.violation(v)
        raise v

    # -- what the devices already delivered ---------------------------------------------------

    def take_in_delivered(self) -> None:
        """At start-up: take in the events the devices have already delivered (sent but
        never journaled and ACKed before a restart). Nothing waits here: an event
        still on its way is taken by the step that waits for it."""
        while True:
            try:
                got = self.next_event(0, "events held by the devices")
            except DeviceTimeout:
                return
            if isinstance(got, CardEvent):
                self.take_card(got, CardMoment.AT_START)
            else:
                self.apply_journaled(got)

    def drain(self, early: bool = False) -> None:
        """Take every device event already delivered, without waiting. A card event
        here is out of turn: drawn before betting closed (``early``), or beyond the
        deal. Either holds the round (raises :class:`CustodyViolation`)."""
        while True:
            try:
                got = self.next_event(0, "cards out of turn")
            except DeviceTimeout:
                return
            if isinstance(got, CardEvent):  # raises: drawn early, or beyond the deal
                self.take_card(got, CardMoment.BETS_OPEN if early else CardMoment.NONE_DUE)
            else:
                self.apply(got)

    def cards_in_flight(self, flag: str) -> None:
        """Before the cards are collected: take in the events of cards the shoe let out
        that it has not reported yet (its own count says how many), so none surfaces
        in a later round as a card drawn with no round in progress."""
        if not self.d.links[self.d.shoe_name].alive:
            return  # the shoe is away: not asked (a void is carried out now); its cards arrive later, as late cards
        try:
            cards = self.d.shoe.status().cards
        except LinkError:
            return  # the shoe is away: what it holds arrives after it comes back, as a late card
        if isinstance(cards, bool) or not isinstance(cards, int) or not 0 <= cards <= self.DECK_SIZE:
            # an impossible count says nothing about cards in flight: none is waited for (the
            # round is being voided or collected; the count's own checks hold the next round)
            self.t.record("incident", what="impossible count from the shoe", shoe_holds=f"{cards!r}"[:40])
            return
        out = self.DECK_SIZE - cards
        if out > self.t.next_draw:
            self.await_cards(out, **{flag: True})

    def await_cards(self, out: int, **flags: Any) -> None:
        """Wait (within the link's event timeout, a deadline the device keeps) for the card
        events up to ``out`` cards drawn since the load; journal each, dealt to nobody."""
        clock = self.d.timing.clock
        deadline = clock.monotonic() + self.d.timing.event_timeout_s
        while self.t.next_draw < out:
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                return
            try:
                got = self.next_event(remaining, "the events of the cards the shoe let out")
            except DeviceTimeout:
                return
            if isinstance(got, CardEvent):
                self.take_card(got, CardMoment.LET_OUT, **flags)
            else:
                self.apply(got)


class _NoMessage:
    """No message is of this type: :meth:`DeviceIntake.expect_card` waits for a card only."""
