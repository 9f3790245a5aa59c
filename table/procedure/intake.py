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
from typing import Any, Callable

import structlog

from devices.contract import Capabilities, DeviceEvent, LinkError, LinkNotice, RefusedEvent
from devices.plugins import describe
from protocols.cards import BackColour, Card
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
from ..journal import b64, fresh_seal_nonce
from ..sealing import commitment, mask_cards
from .shoe_count import ShoeCountChecks
from .state import TableDevices, TableState

log = structlog.get_logger("table")


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


class DeviceIntake(ShoeCountChecks):
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
        return driver.capabilities

    def numbered(self, ev: DeviceEvent) -> DeviceEvent:
        """A shoe card event as the table numbers it. A shoe without a per-card draw
        index (``draw_index`` missing, docs/drivers.md) is numbered by the table: the
        next read since the load (``next_draw``, restored from the journal after a
        restart), whatever number its driver gave; a full shoe's own index is kept
        (SPEC §4.3). Returns ``ev`` itself or a copy with that ``draw_index``."""
        if ev.source != self.d.shoe_name or self.capabilities(ev.source).draw_index:
            return ev
        mine = self.t.next_draw % 256
        if ev.message.draw_index == mine:
            return ev
        return dataclasses.replace(ev, message=dataclasses.replace(ev.message, draw_index=mine))

    def wake(self) -> None:
        """Wake the controller from a device wait: a void was accepted (Console.wake)."""
        try:
            self.d.events.put_nowait(DeviceEvent("console", ConsoleWake(), time.monotonic()))
        except queue.Full:
            pass  # events are waiting: the controller reads them, and checks the void at each step

    # -- the next event --------------------------------------------------------------------

    def next_event(self, timeout_s: float, what: str) -> DeviceEvent:
        """The next device event, journaled then answered; link notices and refused
        events are handled here. A ``CardDrawn`` is returned unjournaled: the caller
        journals it where it goes (:meth:`card_entry`), then answers it. Raises
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
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                ev = self.numbered(ev)  # a shoe without a draw index: the table's number
                msg = ev.message
            if isinstance(msg, CardDrawn):
                return ev
            self.t.record("device_event", source=ev.source, dseq=ev.seq, message=journaled_message(msg))
            self.t.cursor.journaled(ev.source, ev.seq)
            self.answer(ev)
            log.debug("device_event", source=ev.source, message=type(msg).__name__)
            if isinstance(msg, ShoeLoaded) and ev.source == self.d.shoe_name:
                self._count_due = None
                self.t.next_draw = 0
                self.t.in_flight_round = None
            return ev

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

    # -- cards -----------------------------------------------------------------------------

    def card_entry(self, ev: DeviceEvent, card: Card, to: int | None, *, round_id: str | None = None,
                   **flags: Any) -> None:
        """Journal one card the shoe read (sealed until the reveal, with a commitment
        to it), then answer the shoe. ``to``: 0 the dealer, 1..7 a seat,
        None a card dealt to nobody (``flags`` say why: ``late``, ``early``,
        ``extra``, ``refused`` with the rule, ``gap``)."""
        t = self.t
        msg = ev.message
        r = t.round
        rid = round_id or (r.round_id if r is not None else t.held.round_id if t.held is not None else None)
        body: dict[str, Any] = {"dseq": ev.seq, "draw_index": msg.draw_index, "to": to,
                                "back_colour": str(msg.back_colour), **flags}
        if ev.source != "shoe":  # "shoe" is the default a reader assumes (journal format 3)
            body["source"] = ev.source
        if t.journal is not None:
            # The commitment's nonce comes from the sealed blob's fresh nonce and the round's
            # seal key (journal.commit_nonce): secret while the face is sealed, opened with it.
            seal_nonce = fresh_seal_nonce()
            nonce = t.journal.commit_nonce(rid, seal_nonce)
            body["commit"] = b64(bytes.fromhex(commitment(t.table_id, rid, msg.draw_index, str(card), nonce)))
            t.record("card_read", round_id=rid, sealed={"card": str(card)}, seal_nonce=seal_nonce, **body)
        t.cursor.journaled(ev.source, ev.seq)
        self.answer(ev)
        if ev.source == self.d.shoe_name:
            t.next_draw = msg.draw_index + 1
            if self._count_due is not None and t.next_draw >= self._count_out:
                self._count_due = None  # every card the rebooted shoe counted out has come

    def check_draw(self, ev: DeviceEvent) -> CustodyViolation | None:
        """Every card accounted for: per shoe load the draw index runs 0, 1, 2 ... with
        no gap (SPEC §4.3); a gap means a card left the shoe unreported."""
        index = ev.message.draw_index
        expected = self.t.next_draw % 256
        if ev.source == self.d.shoe_name and index != expected:
            # Counted as people count, from 1 (the draw index itself counts from 0, SPEC §4.3).
            return CustodyViolation(Rule.CARD_UNACCOUNTED, f"the shoe's card {index + 1} (draw index {index}) "
                                    f"follows card {expected}: {(index - expected) % 256} card(s) left the shoe "
                                    "unrecorded")
        return None

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
        if st.state is DeviceState.IDLE or not st.cards or st.back_colour is BackColour.NONE:
            return None
        return st.back_colour

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

    def expect(self, kind: type[Message], timeout_s: float, what: str, *, cards: bool = False) -> Any:
        """Consume events (applying each to custody) until one of ``kind`` arrives.
        ``cards``: return card events (the deal); otherwise a card is a stray, handled
        by :meth:`stray_card`. Returns the :class:`DeviceEvent` for a card, else the
        message. With ``cards`` and a shoe that cannot resend (docs/drivers.md,
        "Capabilities") the wait is cut in :attr:`LOST_EVENT_CHECK_S` slices, each
        quiet one followed by :meth:`lost_card_check` (raises :class:`CustodyViolation`
        when the shoe let a card out whose event never came)."""
        clock = self.d.timing.clock
        deadline = clock.monotonic() + timeout_s
        watch = cards and not self.capabilities(self.d.shoe_name).resend
        suspect = False  # the shoe's count was ahead once: a second quiet slice confirms the loss
        while True:
            if watch:
                left = deadline - clock.monotonic()
                try:
                    ev = self.next_event(max(0.0, min(self.LOST_EVENT_CHECK_S, left)), what)
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
                    ev = self._next_card_or_count(ends, what, cards)
                    suspect = False
                except DeviceTimeout:
                    if not dealing:
                        raise
                    last = clock.monotonic() >= deadline
                    suspect = self.lost_card_check(confirm=suspect or last,
                                                   why=f"its event did not come within {quiet:g} s, twice")
                    if last:
                        raise
                    continue
            msg = ev.message
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                if cards and self.t.round is not None:
                    return ev
                self.stray_card(ev)
                continue
            self.apply_journaled(msg)
            if isinstance(msg, kind):
                return msg

    def _next_card_or_count(self, deadline: float, what: str, cards: bool) -> DeviceEvent:
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
                self.lost_card_check(confirm=True, why="the shoe rebooted during the round")  # raises on a loss
                if clock.monotonic() >= deadline:
                    raise

    def lost_card_check(self, confirm: bool, why: str = "the shoe cannot resend") -> bool:
        """A shoe that cannot resend, quiet while a card is awaited: whether its own
        count says more cards left it since the load than the table took in. The first
        time (``confirm`` False) that only returns True: the event may be on the wire
        still. Ahead again after another quiet slice (``confirm``), the event of one
        card was lost on its way (a garbled line: nothing brings it back, docs/drivers.md
        "Capabilities"): journals an incident and the violation and raises
        :class:`CustodyViolation` (``card_unaccounted``), so the round is held, never
        dealt on. A shoe that does not answer is left to the wait's own timeout."""
        if not self.d.links[self.d.shoe_name].alive:
            return False
        try:
            held = self.counted(self.d.shoe.status().cards)
        except LinkError:
            return False
        out, reads = self.DECK_SIZE - held, self.t.next_draw
        if out <= reads or not confirm:
            return out > reads
        t = self.t
        t.record("incident", what=f"card event lost: {why}", shoe_holds=held, reads=reads)
        log.error("card_event_lost", shoe_holds=held, reads=reads)
        v = CustodyViolation(Rule.CARD_UNACCOUNTED, f"the shoe holds {held} cards: {out} left it since the load "
                             f"but {reads} reached the table, and the lost event cannot come back ({why}): "
                             "void the round (misdeal)")
        t.violation(v)
        raise v

    def stray_card(self, ev: DeviceEvent) -> None:
        """A card event when no card is being dealt: read after a restart for the held
        round (taken into its custody), or drawn with no round (an incident), or
        drawn while the round is past its deal (one too many: a misdeal)."""
        t = self.t
        msg = ev.message
        if t.round is not None:  # past the deal: a card beyond it
            if isinstance(msg, CardDrawn):
                self.card_entry(ev, msg.card, None, extra=True)
            t.record("incident", what="card drawn beyond the deal", draw_index=msg.draw_index)
            raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"card {msg.draw_index + 1} drawn (draw index {msg.draw_index}) beyond the 3 cards to each seat "
                                   "and the dealer: misdeal")
        if t.held is not None and isinstance(msg, CardDrawn):
            self.late_card(ev)  # drawn for the held round before a restart
            return
        if t.held is None and t.in_flight_round is not None and ev.source == self.d.shoe_name:
            self._voided_late_card(ev)  # drawn for a round voided while the shoe was away
            return
        if isinstance(msg, CardDrawn):
            self.stray_entry(ev)
        t.record("incident", what="card drawn with no round in progress", draw_index=msg.draw_index)
        raise DeviceFault("a card was drawn with no round in progress: incident recorded")

    def stray_entry(self, ev: DeviceEvent) -> None:
        """Journal a card read with no round in progress, dealt to nobody; custody
        counts it out of the deck in the shoe (a later read of it is a duplicate).
        Read twice already: the duplicate is recorded as a violation; the caller
        goes on as for any stray (an incident, no round to hold)."""
        msg = ev.message
        try:
            self.t.custody.on_card_read_between_rounds(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self.card_entry(ev, msg.card, None, stray=True, refused=v.rule.value)
            self.t.violation(v)
            return
        self.card_entry(ev, msg.card, None, stray=True)

    def late_card(self, ev: DeviceEvent) -> None:
        """A card read that arrived after a restart, for the round now held."""
        msg = ev.message
        try:
            self.t.custody.on_card_read(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self.card_entry(ev, msg.card, None, late=True, refused=v.rule.value)
            self.t.violation(v)
            return
        self.t.cards_read += 1
        self.card_entry(ev, msg.card, None, late=True)

    def _voided_late_card(self, ev: DeviceEvent) -> None:
        """A card the shoe read for a round voided while it was away (its event arrives once
        the shoe is back): journaled with that round, dealt to nobody; the round's cards
        are collected already, so nothing is held (a gap in the draws is recorded)."""
        msg = ev.message
        gap = {"gap": True} if self.check_draw(ev) is not None else {}
        if isinstance(msg, CardDrawn):
            self.card_entry(ev, msg.card, None, round_id=self.t.in_flight_round, late=True, voided=True, **gap)
        else:
            self.t.next_draw = msg.draw_index + 1
        log.warning("card_after_void", draw_index=msg.draw_index, **gap)

    # -- what the devices already delivered ---------------------------------------------------

    def take_in_delivered(self) -> None:
        """At start-up: take in the events the devices have already delivered (sent but
        never journaled and ACKed before a restart). Nothing waits here: an event
        still on its way is taken by the step that waits for it."""
        t = self.t
        while True:
            try:
                ev = self.next_event(0, "events held by the devices")
            except DeviceTimeout:
                return
            msg = ev.message
            if isinstance(msg, CardDrawn):
                if t.held is not None:
                    self.late_card(ev)
                else:
                    self.stray_entry(ev)
                    t.record("incident", what="card read after a restart with no round in progress",
                             draw_index=msg.draw_index)
            elif isinstance(msg, CardUnreadable):
                t.record("incident", what="card unreadable after a restart", draw_index=msg.draw_index)
            else:
                self.apply_journaled(msg)

    def drain(self, early: bool = False) -> None:
        """Take every device event already delivered, without waiting. A card event
        here is out of turn: drawn before betting closed (``early``), or beyond the
        deal. Either holds the round (raises :class:`CustodyViolation`)."""
        while True:
            try:
                ev = self.next_event(0, "cards out of turn")
            except DeviceTimeout:
                return
            msg = ev.message
            if isinstance(msg, (CardDrawn, CardUnreadable)):
                if not early:
                    self.stray_card(ev)  # raises: a card beyond the deal
                if isinstance(msg, CardDrawn):
                    self.card_entry(ev, msg.card, None, early=True)
                self.t.record("incident", what="card drawn before betting closed", draw_index=msg.draw_index)
                raise CustodyViolation(Rule.CARD_DRAWN_EARLY, f"card {msg.draw_index + 1} drawn (draw index {msg.draw_index}) "
                                       "before betting closed")
            self.apply(msg)

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
                ev = self.next_event(remaining, "the events of the cards the shoe let out")
            except DeviceTimeout:
                return
            msg = ev.message
            if isinstance(msg, CardDrawn):
                self.card_entry(ev, msg.card, None, **flags)
            elif isinstance(msg, CardUnreadable):
                self.t.next_draw = msg.draw_index + 1
            else:
                self.apply(msg)
