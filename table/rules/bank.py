"""California player-dealer bank (California Bureau of Gambling Control, Three
Card Poker standards of play, "Standards of play", reference 000).

In California the house does not bank: one player, the player-dealer, pays the
winners and collects from the losers, but only to the extent of the wagers its
bank covers; and it banks at most two consecutive hands before the bank is
offered clockwise around the table.

Readings this module makes where the text is silent (docs/rules-profiles.md):

* Each seat is first settled exactly as at a house-banked table
  (:func:`table.rules.settlement.settle_seat`); its net is what it is owed by,
  or owes to, the bank.
* The bank covers the seats' hands in clockwise order from the player-dealer's
  left while its stake lasts. What a hand puts at risk is fixed when the wagers
  are placed, before the cards are seen: the ante, the play wager it may add
  (equal to the ante) and its bonus bets (:func:`hand_at_risk`; for a seat given
  as a bare net, that net's size). A seat is covered when that fits in what is
  left of the bank; a seat too large to cover is skipped, not the seats after
  it. So a seat's decision never changes whether it is covered. Only covered
  seats are in action: the bank collects from the covered losers and pays the covered
  winners; an uncovered seat's wagers are returned (net 0), win or lose.
* The covered winners are paid, clockwise, from the bank's stake plus its
  collections; what that still cannot pay (a bonus beyond the stake) is
  ``unpaid``, and the seat's own wagers are returned in full, so a seat never
  loses because the bank ran short.
* When the player-dealer has banked its two hands and every other seat
  declines the offered bank, the offer has been made and it may keep banking
  (its count restarts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from . import kinds
from .wagers import SeatSettlement, SettlementError, show


class BankError(SettlementError):
    """An impossible bank: a negative stake, an unknown seat, too many places."""


def clockwise_from(start: int, seats: Iterable[int]) -> list[int]:
    """``seats`` in clockwise order beginning with the first seat after ``start``.

    Seats are numbered clockwise (1, 2, ... around the table), so this sorts by
    distance from ``start`` going up and wrapping; ``start`` itself, if listed,
    comes last.
    """
    ss = sorted(set(seats))
    if not ss:
        return []
    top = max(ss + [start])
    return sorted(ss, key=lambda s: (s - start - 1) % (top + 1))


@dataclass(frozen=True)
class BankSeat:
    """One seat after the bank: ``owed`` is its house-banked net (cents, + won,
    - lost), ``net`` what it actually wins or loses, ``unpaid`` what the bank
    could not cover (``owed - net`` for a winner, else 0)."""

    seat: int
    owed: int
    net: int
    unpaid: int
    covered: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"seat": self.seat, "owed": self.owed, "net": self.net, "unpaid": self.unpaid}


@dataclass(frozen=True)
class BankSettlement:
    """A round's player-dealer settlement, all in cents.

    ``stake``: the bank the player-dealer put up; ``collected``: from losing
    seats; ``paid``: to winning seats; ``seats``: a :class:`BankSeat` per seat in
    the order paid. :attr:`player_dealer_net` is ``collected - paid``.
    """

    player_dealer_seat: int
    stake: int
    collected: int
    paid: int
    seats: tuple[BankSeat, ...]

    @property
    def player_dealer_net(self) -> int:
        """The player-dealer's net for the round in cents."""
        return self.collected - self.paid

    def seat(self, seat: int) -> BankSeat:
        """The :class:`BankSeat` of ``seat``; raises :class:`BankError` if absent."""
        for s in self.seats:
            if s.seat == seat:
                return s
        raise BankError(f"seat {seat} took no part in this bank")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "player_dealer_seat": self.player_dealer_seat,
            "stake": self.stake,
            "collected": self.collected,
            "paid": self.paid,
            "player_dealer_net": self.player_dealer_net,
            "seats": [s.to_dict() for s in self.seats],
        }


def hand_at_risk(settlement: SeatSettlement) -> int:
    """The cents a seat's hand puts to the bank, fixed when the wagers are placed and
    before any decision: the ante, the play wager the seat may add (equal to the
    ante, 649a.11), and the bonus bets (Pair Plus, Six Card Bonus, progressive).

    California standards of play: the player-dealer banks "the hand (including
    bonus bets)" (docs/rules-profiles.md). Counting the play wager whether or not
    the seat then plays keeps its coverage the same either way: a seat cannot fall
    out of action, nor into it, by its own decision.
    """
    stakes = {r.wager: r.stake for r in settlement.results}
    ante = stakes.get("ante", 0)
    return 2 * ante + sum(stakes.get(k.key, 0) for k in kinds.side_kinds())


def settle_bank(
    player_dealer_seat: int,
    bank_cents: int,
    seats: Sequence[tuple[int, SeatSettlement | int]],
) -> BankSettlement:
    """Settle a round against a player-dealer's bank of ``bank_cents``.

    ``seats``: ``(seat number, SeatSettlement or net cents)`` for each playing
    seat (not the player-dealer). The bank covers seats clockwise from its left
    while its stake lasts; covered losers are collected and covered winners paid,
    uncovered seats' wagers are returned (California standards of play: the
    player-dealer pays and collects only to the extent of the wagers it covers).
    Raises :class:`BankError` for a negative bank, a seat number that is not a
    whole number from 1, or the player-dealer listed as a playing seat.
    """
    if isinstance(bank_cents, bool) or not isinstance(bank_cents, int) or bank_cents < 0:
        raise BankError(f"bank must be a non-negative number of cents, got {show(bank_cents)}")
    for num in [player_dealer_seat] + [n for n, _ in seats]:
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise BankError(f"seat numbers are whole numbers from 1, got {show(num)}")
    owed: dict[int, int] = {}
    at_risk: dict[int, int] = {}
    for num, st in seats:
        if num == player_dealer_seat:
            raise BankError(f"seat {num} is the player-dealer and cannot also play against the bank")
        if num in owed:
            raise BankError(f"seat {num} listed twice")
        if isinstance(st, SeatSettlement):
            owed[num] = st.net
            at_risk[num] = hand_at_risk(st)
        else:
            owed[num] = int(st)
            at_risk[num] = abs(int(st))
    # Cover clockwise while the stake lasts; only covered wagers are in action.
    order = clockwise_from(player_dealer_seat, owed)
    room = bank_cents
    covered = set()
    for num in order:
        if at_risk[num] <= room:
            covered.add(num)
            room -= at_risk[num]
    collected = sum(-owed[n] for n in covered if owed[n] < 0)
    available = bank_cents + collected
    paid = 0
    result = []
    for num in order:
        n = owed[num]
        if num not in covered:
            result.append(BankSeat(num, n, 0, 0, covered=False))  # returned: not in action
            continue
        if n <= 0:
            result.append(BankSeat(num, n, n, 0))
            continue
        pay = min(n, available)
        available -= pay
        paid += pay
        result.append(BankSeat(num, n, pay, n - pay))
    return BankSettlement(player_dealer_seat, bank_cents, collected, paid, tuple(result))


class BankRotation:
    """Who banks next: at most ``max_consecutive`` (California: two) consecutive
    hands, then the bank is offered clockwise (California standards of play).

    ``seats``: the occupied places, numbered clockwise; ``banker``: the current
    player-dealer. Raises :class:`BankError` if ``banker`` is not seated or more
    than ``max_places`` places are given.
    """

    def __init__(self, seats: Sequence[int], banker: int, max_consecutive: int = 2, max_places: int | None = 8):
        if max_places is not None and len(set(seats)) > max_places:
            raise BankError(f"at most {max_places} places including the player-dealer, got {len(set(seats))}")
        if banker not in seats:
            raise BankError(f"banker seat {banker} is not at the table")
        self.seats = sorted(set(seats))
        self.banker = banker
        self.max_consecutive = max_consecutive
        self.consecutive = 0

    def hand_banked(self) -> None:
        """Record that the current player-dealer banked one more hand."""
        self.consecutive += 1

    @property
    def must_offer(self) -> bool:
        """True once the player-dealer has banked ``max_consecutive`` hands in a row."""
        return self.consecutive >= self.max_consecutive

    def offer_order(self) -> list[int]:
        """The other seats in the clockwise order the bank is offered to."""
        return [s for s in clockwise_from(self.banker, self.seats) if s != self.banker]

    def next_banker(self, accepts: Callable[[int], bool]) -> int:
        """The player-dealer for the next hand.

        While :attr:`must_offer` is false the banker stays. Otherwise the bank is
        offered clockwise; ``accepts(seat)`` is asked in turn and the first seat
        to accept becomes the player-dealer. If every seat declines, the current
        player-dealer keeps the bank (the offer was made). Either way the
        consecutive count restarts.
        """
        if not self.must_offer:
            return self.banker
        for s in self.offer_order():
            if accepts(s):
                self.banker = s
                break
        self.consecutive = 0
        return self.banker
