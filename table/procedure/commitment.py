"""The deal follows the shuffle: the shuffler's commitment opened and checked before settlement.

protocols/SPEC.md §4.2.1: the shuffler commits to the order of each deck it
verifies (a salted SHA-256 in ``DeckVerified``; custody keeps it on the deck,
``Deck.commitment``, and the journal has it in the ``device_event`` entry).
Once the round dealt from that deck is decided and revealed, and before it is
settled, :meth:`ShuffleCommitment.check` asks the shuffler to open it and
checks that

* the opening hashes to the commitment the deck was verified with;
* the cards the shoe read, by draw index since the load, are the first cards
  of the committed order (``order[draw_index]``).

A substituted deck ("cold deck": the right back colour, an order someone
chose), cards added on top of the shoe and a card slipped back all break
the second check: the round is held (:class:`CustodyViolation`
``deal_not_the_shuffle``, 58 Pa. Code 649a.3(b): only the deck shuffled and
verified in the device is dealt; 816a.1: results verified before they are
posted) and never settled. The opening is journaled (kind
``shuffle_opening``, after the reveal: every card of the round is public by
then) and published as ``shuffle_opened`` beside the round's card openings.
The host learns the order only after the decisions, and the deck is
collected and shuffled again before it is dealt again (one deck, one round:
649a.3(b)): no order is known while it can matter.

A shuffler without the ``commitment`` capability (a SPEC 1.0 shuffler, a
plugin driver that does not declare it) is checked by back colour and counts
alone; :func:`residual_risk` is what the table says about it at start, in
``tablectl config check`` and in docs/drivers.md.

May touch: the journal (``shuffle_opening``, the violation), the shuffler's
``open_shuffle``. Never moves a deck or a card.
"""

from __future__ import annotations

from typing import Any

import structlog

from devices.contract import Capabilities
from firmware_bridge.errors import LinkError, RequestRefused
from protocols.cards import Card
from protocols.messages import NakCode, ShuffleOpening

from ..custody import CustodyViolation, Rule
from ..errors import DeviceFault
from .intake import DeviceIntake
from .state import RoundInPlay, TableDevices, TableState

log = structlog.get_logger("table")

#: what a table whose shuffler cannot commit to its order gives up (docs/drivers.md, "Capabilities")
RESIDUAL_RISK = ("the shuffler does not commit to its shuffles (SPEC §4.2.1): nothing proves the deck dealt is "
                 "the deck it verified, in its order. A substituted deck of the same back colour in an order "
                 "someone chose (a cold deck) or cards stacked on top of the shoe are found only when a card "
                 "of another colour or a card twice in one round shows")


def has_commitment(caps: Capabilities, shuffler: Any) -> bool:
    """Whether the table checks the shuffle commitment with this shuffler: its driver
    declares the capability and gives ``open_shuffle`` (docs/drivers.md)."""
    return bool(caps.commitment) and callable(getattr(shuffler, "open_shuffle", None))


def residual_risk(caps: Capabilities, shuffler: Any = None) -> str | None:
    """:data:`RESIDUAL_RISK` for a shuffler without the commitment (``shuffler`` None: judge
    by the declared capabilities alone, as ``config check`` does), else None."""
    if not caps.commitment or (shuffler is not None and not has_commitment(caps, shuffler)):
        return RESIDUAL_RISK
    return None


def compare(opening: ShuffleOpening, commitment: bytes, reads: list[tuple[int, Card]]) -> str | None:
    """What is wrong with ``opening`` for a deck verified with ``commitment`` whose shoe
    read ``reads`` (``(draw_index, card)``, in deal order), or None when the deal followed
    the shuffle (SPEC §4.2.1). The text may name cards (journal it sealed or masked)."""
    if opening.commitment() != commitment:
        return (f"the shuffler's opening does not hash to the commitment of the deck's verification "
                f"({opening.commitment().hex()[:16]}... for {commitment.hex()[:16]}...): not the shuffle it "
                "committed to")
    for draw_index, card in reads:
        if not 0 <= draw_index < len(opening.order):
            return f"card {draw_index + 1} read from a deck of 52: more cards left the shoe than the deck has"
        committed = Card.from_index(opening.order[draw_index])
        if card != committed:
            return (f"card {draw_index + 1} out of the shoe was {card}, but the shuffle put {committed} there: "
                    "the cards dealt are not the verified deck in its shuffled order (a substituted or stacked "
                    "deck, cards added on top, or a card slipped back)")
    return None


class ShuffleCommitment:
    """Opens and checks the shuffle commitment of the deck a round was dealt from.

    ``state``, ``devices``, ``intake``: the procedure's shared parts
    (:mod:`table.procedure.state`)."""

    def __init__(self, state: TableState, devices: TableDevices, intake: DeviceIntake) -> None:
        self.t = state
        self.d = devices
        self.intake = intake

    def check(self, r: RoundInPlay) -> None:
        """Round ``r`` is decided and revealed: open its deck's commitment and check the
        deal against it, before settlement (SPEC §4.2.1). Returns when it holds, or when
        the shuffler cannot commit (the risk said at start). Raises
        :class:`CustodyViolation` (journaled; the round is held, never settled) when the
        deal did not follow the shuffle, the deck carries no commitment from a committing
        shuffler, or the shuffler will not open the deck it delivered;
        :class:`DeviceFault` when the shuffler cannot be asked (the round is held and
        asked again when released)."""
        caps = self.intake.capabilities(self.d.shuffler_name)
        if not has_commitment(caps, self.d.shuffler):
            return
        deck = r.deck
        reads = [(c.draw_index, c.card) for c in r.reads]
        if not deck.commitment:
            self._violation(r, None, f"deck {deck.deck_id} ({deck.back_colour}) was dealt with no shuffle "
                                     "commitment from a shuffler that makes them: it was not verified by this "
                                     "shuffler's last count")
        try:
            opening = self.d.shuffler.open_shuffle(deck.commitment)
        except RequestRefused as exc:
            if exc.code == NakCode.UNKNOWN_COMMITMENT:
                self._violation(r, None, f"the shuffler will not open the commitment of deck {deck.deck_id} "
                                         f"({deck.back_colour}): it is not the deck it delivered last")
            raise DeviceFault(f"the shuffler refused to open the shuffle of deck {deck.deck_id}: {exc}") from exc
        except LinkError as exc:
            raise DeviceFault(f"cannot ask the shuffler to open the shuffle of deck {deck.deck_id}: {exc}") from exc
        if not isinstance(opening, ShuffleOpening):
            raise DeviceFault(f"the shuffler's driver gave {type(opening).__name__}, not a ShuffleOpening")
        problem = compare(opening, deck.commitment, reads)
        self._journal(r, opening, problem is None, len(reads))
        if problem is not None:
            self._violation(r, opening, problem)
        log.info("shuffle_opened", deck_id=deck.deck_id, cards_checked=len(reads))

    def _journal(self, r: RoundInPlay, opening: ShuffleOpening, matched: bool, checked: int) -> None:
        """The opening in the clear: the round's cards are revealed by now (816a.1), and the
        deck's undealt cards are dealt no more before it is shuffled again."""
        self.t.record("shuffle_opening", deck=r.deck.deck_id, back_colour=str(r.deck.back_colour),
                      commitment=r.deck.commitment.hex(), salt=opening.salt.hex(),
                      order=[str(c) for c in opening.cards], cards_checked=checked, matched=matched)

    def _violation(self, r: RoundInPlay, opening: ShuffleOpening | None, detail: str) -> None:
        v = CustodyViolation(Rule.DEAL_NOT_THE_SHUFFLE, detail)
        self.t.violation(v)
        log.error("deal_not_the_shuffle", deck_id=r.deck.deck_id, opened=opening is not None)
        raise v

