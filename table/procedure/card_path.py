"""One path for a card: every card event the intake takes off the devices' queue goes
through :meth:`CardPath.take_card`, which says by what the table is doing
(:class:`CardMoment`) where it goes: to the deal, or to one of the small named
steps after it. Every card accounted for: per shoe load the draw index runs 0, 1,
2 ... with no gap (SPEC §4.3); a card dealt to nobody is journaled (its face
sealed, with a commitment to it, 816a.1) and, where it breaks the deal, raises so
the caller holds the round: a card is never shifted onto the next seat.

May touch: the journal through :class:`~table.procedure.state.TableState`, custody
(the card counted out of its deck), the shoe's link (the card's answer). Never
asks a person for anything, never waits: :class:`~table.procedure.intake.DeviceIntake`
takes the events off the queue and mixes this in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from devices.contract import DeviceEvent
from protocols.cards import Card
from protocols.messages import CardDrawn, CardUnreadable

from ..custody import CustodyViolation, Rule
from ..errors import DeviceFault
from ..journal import b64, fresh_seal_nonce
from ..sealing import commitment

if TYPE_CHECKING:
    from .state import TableDevices, TableState

log = structlog.get_logger("table")


@dataclass(frozen=True)
class CardEvent:
    """A card event of the shoe's, as the intake hands it on: ``message`` (``CardDrawn``,
    or ``CardUnreadable``: a card let out but not read) is ``event.message``, the draw
    index as the table numbers it (:meth:`DeviceIntake.numbered`); ``event`` is what is
    answered once the card is journaled."""

    event: DeviceEvent
    message: CardDrawn | CardUnreadable

    @property
    def source(self) -> str:
        """The link it came on (``"shoe"``; a card on another link is refused by that link)."""
        return self.event.source

    @property
    def draw_index(self) -> int:
        """The card's draw index since the shoe's load (SPEC §4.3)."""
        return self.message.draw_index


class CardMoment(enum.Enum):
    """What the table is doing when a card event arrives, which says where the card goes
    (:meth:`DeviceIntake.take_card`)."""

    #: the deal waits for a card: handed to the deal (a stray when no round is in play)
    DEAL = "deal"
    #: bets are open: a card drawn now is early, and holds the round (816a.1)
    BETS_OPEN = "bets_open"
    #: no card is awaited: beyond the deal (a misdeal), late for a held round, after a void, or with no round
    NONE_DUE = "none_due"
    #: delivered by the devices before the table started (after a restart)
    AT_START = "at_start"
    #: let out by the shoe (its count says so) and awaited before the cards are collected
    LET_OUT = "let_out"


class CardPath:
    """The card steps of :class:`~table.procedure.intake.DeviceIntake` (mixed into it,
    which holds ``t``, the table's state, ``d``, its devices, and the count a shoe
    reboot left due): :meth:`take_card`, the path, and :meth:`card_entry`, the one
    way a card is journaled."""

    t: "TableState"
    d: "TableDevices"
    #: after a shoe reboot in the deal: when (table clock) its count is asked again, and how
    #: many cards it had let out (:meth:`DeviceIntake.reconcile_shoe_reboot`)
    _count_due: float | None
    _count_out: int

    def answer(self, ev: DeviceEvent) -> None:
        """ACK a device event once it is journaled (:meth:`DeviceIntake.answer`)."""
        raise NotImplementedError

    def card_entry(self, card_ev: CardEvent, card: Card, to: int | None, *, round_id: str | None = None,
                   **flags: Any) -> None:
        """Journal one card the shoe read (``card``: its face, or the one a supervisor
        entered; sealed until the reveal, with a commitment to it), then answer the
        shoe. ``to``: 0 the dealer, 1..7 a seat, None a card dealt to nobody (``flags``
        say why: ``late``, ``early``, ``extra``, ``refused`` with the rule, ``gap``)."""
        t = self.t
        ev, msg = card_ev.event, card_ev.message
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

    def check_draw(self, card: CardEvent) -> CustodyViolation | None:
        """Every card accounted for: per shoe load the draw index runs 0, 1, 2 ... with
        no gap (SPEC §4.3); a gap means a card left the shoe unreported."""
        index = card.draw_index
        expected = self.t.next_draw % 256
        if card.source == self.d.shoe_name and index != expected:
            # Counted as people count, from 1 (the draw index itself counts from 0, SPEC §4.3).
            return CustodyViolation(Rule.CARD_UNACCOUNTED, f"the shoe's card {index + 1} (draw index {index}) "
                                    f"follows card {expected}: {(index - expected) % 256} card(s) left the shoe "
                                    "unrecorded")
        return None

    # -- the one path of a card -------------------------------------------------------------

    def take_card(self, card: CardEvent, moment: CardMoment, **flags: Any) -> CardEvent | None:
        """Where a card event goes, by what the table is doing (``moment``): the one path
        every card taken off the queue goes through. Returns the card when the deal takes
        it (:attr:`CardMoment.DEAL` with a round in play: the deal journals it where it
        goes); otherwise journals it here, dealt to nobody, in one of the steps below,
        and returns None or raises: :class:`CustodyViolation` when it holds the round
        (drawn early, beyond the deal), :class:`DeviceFault` for a card drawn with no
        round. ``flags``: what a card let out is journaled with (:attr:`CardMoment.LET_OUT`)."""
        if moment is CardMoment.LET_OUT:
            self._let_out(card, flags)
            return None
        if moment is CardMoment.AT_START:
            self._delivered_at_start(card)
            return None
        if moment is CardMoment.BETS_OPEN:
            self._drawn_early(card)  # raises
        if self.t.round is not None:
            if moment is CardMoment.DEAL:
                return card
            self._beyond_deal(card)  # raises
        if self.t.held is not None and isinstance(card.message, CardDrawn):
            self._late_card(card, card.message)  # drawn for the held round before a restart
            return None
        if self.t.held is None and self.t.in_flight_round is not None and card.source == self.d.shoe_name:
            self._after_void(card)  # drawn for a round voided while the shoe was away
            return None
        self._no_round(card)  # raises
        return None

    def _drawn_early(self, card: CardEvent) -> None:
        """Drawn while bets were open (816a.1): journaled (``early``), an incident, and raises
        :class:`CustodyViolation` (``card_drawn_early``): the round is held."""
        msg = card.message
        if isinstance(msg, CardDrawn):
            self.card_entry(card, msg.card, None, early=True)
        self.t.record("incident", what="card drawn before betting closed", draw_index=msg.draw_index)
        raise CustodyViolation(Rule.CARD_DRAWN_EARLY, f"card {msg.draw_index + 1} drawn (draw index "
                               f"{msg.draw_index}) before betting closed")

    def _beyond_deal(self, card: CardEvent) -> None:
        """Drawn while the round is past its deal: one too many, journaled (``extra``), an
        incident, and raises :class:`CustodyViolation` (``wrong_card_count``, a misdeal)."""
        msg = card.message
        if isinstance(msg, CardDrawn):
            self.card_entry(card, msg.card, None, extra=True)
        self.t.record("incident", what="card drawn beyond the deal", draw_index=msg.draw_index)
        raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"card {msg.draw_index + 1} drawn (draw index "
                               f"{msg.draw_index}) beyond the 3 cards to each seat and the dealer: misdeal")

    def _no_round(self, card: CardEvent) -> None:
        """Drawn with no round in progress: journaled dealt to nobody (:meth:`_stray_entry`),
        an incident, and raises :class:`DeviceFault`."""
        if isinstance(card.message, CardDrawn):
            self._stray_entry(card, card.message)
        self.t.record("incident", what="card drawn with no round in progress", draw_index=card.draw_index)
        raise DeviceFault("a card was drawn with no round in progress: incident recorded")

    def _delivered_at_start(self, card: CardEvent) -> None:
        """Delivered before the table started (sent before a restart, never journaled): a
        card read is the held round's late card, else a stray with an incident; an
        unreadable card is an incident. Nothing raises: start-up goes on."""
        msg = card.message
        if isinstance(msg, CardUnreadable):
            self.t.record("incident", what="card unreadable after a restart", draw_index=msg.draw_index)
        elif self.t.held is not None:
            self._late_card(card, msg)
        else:
            self._stray_entry(card, msg)
            self.t.record("incident", what="card read after a restart with no round in progress",
                          draw_index=msg.draw_index)

    def _let_out(self, card: CardEvent, flags: dict[str, Any]) -> None:
        """A card the shoe's count said it let out, awaited before the cards are collected:
        journaled dealt to nobody with ``flags`` (``extra``, ``voided``); an unreadable
        one moves the draw index on."""
        msg = card.message
        if isinstance(msg, CardDrawn):
            self.card_entry(card, msg.card, None, **flags)
        else:
            self.t.next_draw = msg.draw_index + 1

    def _stray_entry(self, card: CardEvent, msg: CardDrawn) -> None:
        """Journal a card read with no round in progress, dealt to nobody; custody
        counts it out of the deck in the shoe (a later read of it is a duplicate).
        Read twice already: the duplicate is recorded as a violation; the caller
        goes on as for any stray (an incident, no round to hold)."""
        try:
            self.t.custody.on_card_read_between_rounds(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self.card_entry(card, msg.card, None, stray=True, refused=v.rule.value)
            self.t.violation(v)
            return
        self.card_entry(card, msg.card, None, stray=True)

    def _late_card(self, card: CardEvent, msg: CardDrawn) -> None:
        """A card read (``msg``, the card's message) that arrived after a restart, for the
        round now held (``late``)."""
        try:
            self.t.custody.on_card_read(msg.card, msg.back_colour)
        except CustodyViolation as v:
            self.card_entry(card, msg.card, None, late=True, refused=v.rule.value)
            self.t.violation(v)
            return
        self.t.cards_read += 1
        self.card_entry(card, msg.card, None, late=True)

    def _after_void(self, card: CardEvent) -> None:
        """A card the shoe read for a round voided while it was away (its event arrives once
        the shoe is back): journaled with that round, dealt to nobody; the round's cards
        are collected already, so nothing is held (a gap in the draws is recorded)."""
        msg = card.message
        gap = {"gap": True} if self.check_draw(card) is not None else {}
        if isinstance(msg, CardDrawn):
            self.card_entry(card, msg.card, None, round_id=self.t.in_flight_round, late=True, voided=True, **gap)
        else:
            self.t.next_draw = msg.draw_index + 1
        log.warning("card_after_void", draw_index=msg.draw_index, **gap)
