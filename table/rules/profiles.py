"""Rules profiles: the jurisdiction's reading of the game, as named data.

A :class:`RulesProfile` gathers every rule that differs between the
jurisdictions the controller is deployed in, so that no such rule is a buried
constant. Two profiles ship, plus one variant that exists to keep the other
reading of an ambiguous text testable:

``pennsylvania``
    58 Pa. Code Chapters 649a/649b (reference 004). A suited A-K-Q is the top
    straight flush; it is paid on a separate mini-royal line only where the
    selected paytable lists one (649a.12(c), 649a.12(e), 649a.12(g)). The
    house banks every wager.

``california``
    California Bureau of Gambling Control, Three Card Poker standards of play
    (reference 000, "Ranking of Hands" and "Standards of play"). The mini royal
    flush is its own, top-ranked hand; a player-dealer banks the game
    (:mod:`table.rules.bank`); at most eight places including the
    player-dealer ("Number of players in the game").

``california-literal``
    As ``california`` but with the other reading of the suited A-2-3 (see
    :data:`SUITED_A23_READINGS` and docs/rules-profiles.md).

The suited A-2-3 question: the California ranking table names 4-3-2 as the
lowest straight flush while naming A-2-3 the lowest straight. A suited A-2-3
therefore ranks either as the lowest straight flush (the straight-flush
definition read with the straight row's ace-low sequence) or, read literally,
not as a straight flush at all, i.e. as an ace-high flush.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The two readings of a suited A-2-3.
#: ``"straight_flush"``: the lowest straight flush, below 4-3-2 suited.
#: ``"flush"``: an ace-high flush (A-3-2), not a straight flush.
SUITED_A23_READINGS = ("straight_flush", "flush")


class ProfileError(ValueError):
    """An unknown profile name or an impossible profile setting."""


@dataclass(frozen=True)
class RulesProfile:
    """One jurisdiction's rules, as read by this controller.

    Fields:
        name: the profile's stable name (``"pennsylvania"``, ``"california"``...).
        title: a human description with the governing text.
        mini_royal_is_category: when true, a suited A-K-Q evaluates as
            :attr:`~table.rules.hands.HandCategory.MINI_ROYAL`, its own top
            hand (California ranking table); when false it evaluates as the
            highest :attr:`~table.rules.hands.HandCategory.STRAIGHT_FLUSH` and
            only a paytable line can single it out (58 Pa. Code 649a.12(c), (g)).
            Either way a suited A-K-Q outranks every other hand.
        suited_a23: how a suited A-2-3 ranks, one of :data:`SUITED_A23_READINGS`.
        player_dealer_bank: true where a player-dealer banks the game instead of
            the house (California standards of play; :mod:`table.rules.bank`).
        max_places: most places at the table including any player-dealer, or
            ``None`` where the profile sets no number.
        max_consecutive_banks: how many consecutive hands one player-dealer may
            bank before the bank is offered clockwise (California: two).
        citation: the texts the profile follows, by section.

    Raises :class:`ProfileError` when ``suited_a23`` is not a known reading.
    """

    name: str
    title: str
    mini_royal_is_category: bool
    suited_a23: str
    player_dealer_bank: bool
    max_places: int | None
    max_consecutive_banks: int | None
    citation: str

    def __post_init__(self) -> None:
        if self.suited_a23 not in SUITED_A23_READINGS:
            raise ProfileError(
                f"suited_a23 must be one of {SUITED_A23_READINGS}, got {self.suited_a23!r}"
            )


PENNSYLVANIA = RulesProfile(
    name="pennsylvania",
    title="Pennsylvania, 58 Pa. Code Chapters 649a and 649b (house-banked)",
    mini_royal_is_category=False,
    suited_a23="straight_flush",
    player_dealer_bank=False,
    max_places=None,
    max_consecutive_banks=None,
    citation="58 Pa. Code 649a.11, 649a.12, 649b.4, 649b.5 (reference 004)",
)

CALIFORNIA = RulesProfile(
    name="california",
    title="California Bureau of Gambling Control standards of play (player-dealer)",
    mini_royal_is_category=True,
    suited_a23="straight_flush",
    player_dealer_bank=True,
    max_places=8,
    max_consecutive_banks=2,
    citation="California BGC Three Card Poker standards of play: player-dealer, "
    "number of players, ranking of hands (reference 000)",
)

CALIFORNIA_LITERAL = RulesProfile(
    name="california-literal",
    title="California, reading the ranking table's 4-3-2 lowest straight flush literally",
    mini_royal_is_category=True,
    suited_a23="flush",
    player_dealer_bank=True,
    max_places=8,
    max_consecutive_banks=2,
    citation=CALIFORNIA.citation,
)

PROFILES: dict[str, RulesProfile] = {
    p.name: p for p in (PENNSYLVANIA, CALIFORNIA, CALIFORNIA_LITERAL)
}


def get_profile(name: str | RulesProfile) -> RulesProfile:
    """Return the profile named ``name`` (case-insensitive); a profile passes through.

    Raises :class:`ProfileError` naming the known profiles when it is unknown.
    """
    if isinstance(name, RulesProfile):
        return name
    key = str(name).strip().lower()
    try:
        return PROFILES[key]
    except KeyError:
        raise ProfileError(
            f"unknown rules profile {name!r}; known: {', '.join(sorted(PROFILES))}"
        ) from None
