"""Play strategies for the ante/play decision.

The simulated player of the round runner plays with Q-6-4 or better and folds
below it. :mod:`table.rules.report` finds the optimal strategy for each ante
bonus paytable by enumeration; for the shipped paytables it is this one.
"""

from __future__ import annotations

from typing import Callable, Iterable

from protocols.cards import Card

from .hands import HandCategory, evaluate
from .profiles import PENNSYLVANIA, RulesProfile
from .wagers import Decision

#: Ranking key of Q-6-4 offsuit, the weakest hand the Q-6-4 rule plays.
Q64_KEY = (HandCategory.HIGH_CARD, 12, 6, 4)


def plays_q64(cards: Iterable[Card | str], profile: RulesProfile = PENNSYLVANIA) -> bool:
    """True when the player should make the play wager: queen-six-four or better.

    ``cards``: the player's three cards. Every pair or better plays; a high-card
    hand plays when it ranks at or above Q-6-4. Raises
    :class:`~table.rules.hands.HandError` for anything but three distinct cards.
    """
    return evaluate(cards, profile).key >= Q64_KEY


#: A seat's play/fold decision: ``decide(seat, cards) -> Decision`` (a simulated
#: player, or the dealer entering each player's choice at the console).
Decide = Callable[[int, list[Card]], Decision]


def q64_player(seat: int, cards: list[Card]) -> Decision:
    """The simulated player: play with Q-6-4 or better, else fold."""
    return Decision.PLAY if plays_q64(cards) else Decision.FOLD
