"""The shoe's count as a custody fact (docs/deck-custody.md): the checks
:class:`~table.procedure.intake.DeviceIntake` makes of what the shoe says it holds, at
the load, before the first card and at the deal's end (58 Pa. Code 649a.3; COMAR
36.05.03.27 C; SPEC §4.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from devices.contract import LinkError

from ..custody import CustodyViolation, Rule
from ..errors import DeviceFault

if TYPE_CHECKING:
    from .state import TableDevices, TableState

log = structlog.get_logger("table")


class ShoeCountChecks:
    """What the shoe's count may be, and what more or an impossible count does. Mixed into
    :class:`~table.procedure.intake.DeviceIntake`, which holds ``t`` (the table's state)
    and ``d`` (its devices)."""

    DECK_SIZE = 52
    t: "TableState"
    d: "TableDevices"

    def shoe_count(self) -> int:
        """How many cards the shoe holds now (its own status), checked by :meth:`counted`.
        Raises :class:`DeviceFault` when the shoe does not answer or its count is
        impossible, :class:`CustodyViolation` when it says more than a deck."""
        try:
            cards = self.d.shoe.status().cards
        except LinkError as exc:
            raise DeviceFault(f"cannot read the shoe's count: {exc}") from exc
        return self.counted(cards)

    def counted(self, cards: object) -> int:
        """The shoe's count of cards held (``StatusReply.cards``) as a custody fact, never a
        number computed with blindly: a whole number 0..52 is returned (a shoe holds
        at most one deck: SPEC §4.3; 58 Pa. Code 649a.3, one 52-card deck in play).
        Negative, or not a whole number: an impossible count, a device fault (journaled
        as an incident; raises :class:`DeviceFault`). Over 52: more cards than a deck,
        so cards of no verified deck are in the shoe, or its count cannot be trusted;
        either way nothing is dealt or settled on it: journaled as an incident and the
        violation ``foreign_card``, raises :class:`CustodyViolation` (a hold a
        supervisor can only void, never release; COMAR 36.05.03.27 C)."""
        if isinstance(cards, bool) or not isinstance(cards, int) or cards < 0:
            text = f"{cards!r}"[:40]
            self.t.record("incident", what="impossible count from the shoe", shoe_holds=text)
            log.error("shoe_count_impossible", shoe_holds=text)
            raise DeviceFault(f"the shoe reported {text} cards held: an impossible count (a shoe holds 0 to "
                              f"{self.DECK_SIZE} cards, SPEC §4.3), a device fault; have the shoe checked")
        if cards > self.DECK_SIZE:
            self.t.record("incident", what="impossible count from the shoe: more cards than a deck", shoe_holds=cards)
            log.error("shoe_count_over_a_deck", shoe_holds=cards)
            v = CustodyViolation(Rule.FOREIGN_CARD, f"the shoe holds {cards} cards, more than one deck of "
                                 f"{self.DECK_SIZE}: cards of no verified deck are in the shoe (or its count is "
                                 "faulty); nothing is dealt or settled on it")
            self.t.violation(v)
            raise v
        return cards

    def check_not_more(self, should: int, when: str, *, required: bool = True) -> int | None:
        """The shoe's count at a custody point (``when``: at the load, before the first
        card, at the end of the deal): it must hold no more than ``should`` cards (52
        at the load, 52 less the cards read since the load after). More is cards put
        into the shoe that did not come from the shuffler's verified delivery (cards
        added on top, a card slipped back): journaled as an incident and the violation
        ``foreign_card``; raises :class:`CustodyViolation`, which holds the round (58
        Pa. Code 649a.3: one 52-card deck in play; COMAR 36.05.03.27 C: a deck is dealt
        only as counted). Fewer is left to the caller (cards out not yet reported, or a
        card beyond the deal). Returns the count; raises as :meth:`shoe_count`
        (:class:`DeviceFault` when the shoe does not answer), or returns None then when
        not ``required`` (the next custody point asks again)."""
        try:
            held: int = self.d.shoe.status().cards  # StatusReply.cards: a driver that sends else is caught below
        except LinkError as exc:
            if not required:
                log.warning("shoe_count_not_read", when=when, error=str(exc)[:200])
                return None
            raise DeviceFault(f"cannot read the shoe's count: {exc}") from exc
        if isinstance(held, bool) or not isinstance(held, int) or held < 0:
            self.counted(held)  # raises: an impossible count is a device fault
        if held <= should:
            return held
        extra = held - should
        over = f", more than one deck of {self.DECK_SIZE}" if held > self.DECK_SIZE else ""
        self.t.record("incident", what=f"the shoe holds more cards than it should {when}{over}", shoe_holds=held,
                      should_hold=should)
        log.error("shoe_holds_more", when=when, shoe_holds=held, should_hold=should)
        v = CustodyViolation(Rule.FOREIGN_CARD, f"{when} the shoe holds {held} cards{over} where it should hold "
                             f"{should} (52 less the {self.DECK_SIZE - should} read since the load): {extra} card(s) "
                             "in the shoe that did not come from the shuffler's count")
        self.t.violation(v)
        raise v

