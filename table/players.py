"""Simulated players: seeded people who sit down, bet like people within the table's limits, and leave.

A simulated table (``tablectl run --simulate``, the soak, the benches, the people
bench) needs rounds that look like a real table's: seats empty and
full, stakes that vary, some players betting Pair Plus alone (58 Pa. Code 649a.7),
Six Card Bonus and progressive wagers only beside an ante and only where their
paytables are in play. :class:`SimulatedPlayers` makes each round's bets from one
seed (the same seed, the same rounds), every bet within :class:`~table.bets.TableLimits`
in whole chips; :class:`FixedPlayers` is the old fixed bet (``--ante-cents``,
``--side-cents``) on every seat, with the same interface.

Either is handed to the bet book each round (:meth:`SimulatedPlayers.place`), so
the simulated bets pass the same checks as a dealer's (:class:`~table.bets.BetBook`).
Core: no I/O, no clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Mapping

from .bets import DEFAULT_LIMITS, WAGER_KINDS, BetBook, TableLimits, wagers_dict
from .rules import kinds as _kinds
from .rules.wagers import Wagers

#: the side wagers (table.rules.kinds): every kind paid from a paytable of its own
SIDE_KINDS = tuple(k.key for k in _kinds.side_kinds())
#: the side wager a player may bet alone, without an ante (Pair Plus, 649a.7)
_ALONE = next((k.key for k in _kinds.side_kinds() if k.route), None)

#: how a player's stake relates to the table minimum: multiples a player picks from
_STAKE_STEPS = (1, 1, 1, 2, 2, 3, 5, 10)


@dataclass
class _Player:
    """One simulated player: their usual ante (cents), whether they bet Pair Plus alone,
    how often they add each side wager (0..1), and how much their bet varies."""

    ante: int
    pair_plus_only: bool
    side_odds: dict[str, float]
    swing: float


class SimulatedPlayers:
    """Seeded players at a table (see the module docstring).

    ``seed``: any int (the same seed, the same sequence of rounds); ``limits``: the
    table's :class:`TableLimits`; ``seats``: the layout, a count (``1..N``) or seat
    numbers; ``side_kinds``: the side wagers whose paytables are in play (a subset
    of :data:`SIDE_KINDS`: ``pair_plus``, ``six_card``, ``progressive``; e.g. from
    :func:`table.bets.offered_kinds`). ``occupancy`` (0..1): how full the table
    starts; ``leave``/``arrive``: the chance per round that a player leaves, or
    that an empty seat is taken.

    :meth:`next_round` returns seat -> :class:`Wagers` for the seats in play, at
    least one seat always, each within the limits in whole chips. Raises
    ``ValueError`` for a layout outside 1..7 or an unknown side wager kind."""

    def __init__(self, seed: int, limits: TableLimits = DEFAULT_LIMITS, seats: int | Iterable[int] = 6,
                 side_kinds: Iterable[str] = SIDE_KINDS, *, occupancy: float = 0.7, leave: float = 0.12,
                 arrive: float = 0.3) -> None:
        self.rng = random.Random(seed)
        self.limits = limits
        layout = range(1, seats + 1) if isinstance(seats, int) else seats
        self.layout = tuple(sorted({int(s) for s in layout}))
        if not self.layout or not all(1 <= s <= 7 for s in self.layout):
            raise ValueError(f"a layout is seats 1..7, got {self.layout!r}")
        kinds = tuple(side_kinds)
        unknown = [k for k in kinds if k not in SIDE_KINDS]
        if unknown:
            raise ValueError(f"unknown side wager {unknown[0]!r}; allowed: {', '.join(SIDE_KINDS)}")
        self.side_kinds = tuple(k for k in SIDE_KINDS if k in kinds)
        self.leave, self.arrive = leave, arrive
        self.players: dict[int, _Player] = {}
        for s in self.layout:
            if self.rng.random() < occupancy:
                self.players[s] = self._new_player()
        self.rounds = 0

    def _stake(self, kind: str, base: int | None = None) -> int:
        """An amount of ``kind`` in whole chips within its limits: ``base`` (or a multiple
        of the minimum) rounded to the chip and clamped to ``minimum..maximum``."""
        lim = self.limits.of(kind)
        want = base if base is not None else lim.minimum_cents * self.rng.choice(_STAKE_STEPS)
        want = max(lim.minimum_cents, min(lim.maximum_cents, want))
        return max(lim.minimum_cents, want // lim.chip_cents * lim.chip_cents)

    def _new_player(self) -> _Player:
        pp_only = _ALONE in self.side_kinds and self.rng.random() < 0.12
        odds = {k.key: self.rng.choice(k.player_odds) for k in _kinds.side_kinds()}
        return _Player(ante=self._stake("ante"), pair_plus_only=pp_only,
                       side_odds={k: v for k, v in odds.items() if k in self.side_kinds},
                       swing=self.rng.choice((0.0, 0.25, 0.5, 1.0)))

    def _between_rounds(self) -> None:
        for s in self.layout:
            if s in self.players:
                if self.rng.random() < self.leave:
                    del self.players[s]
            elif self.rng.random() < self.arrive:
                self.players[s] = self._new_player()
        if not self.players:  # a table with nobody at it deals no round: someone sits down
            self.players[self.rng.choice(self.layout)] = self._new_player()

    def _bet(self, p: _Player) -> Wagers:
        if p.pair_plus_only:
            assert _ALONE is not None
            return Wagers(**{_ALONE: self._stake(_ALONE, p.ante)})
        base = p.ante
        if p.swing and self.rng.random() < p.swing:  # pressing or pulling back after the last hand
            base = int(base * self.rng.choice((0.5, 2, 1.5, 3)))
        amounts = {"ante": self._stake("ante", base)}
        for kind, odds in p.side_odds.items():
            if self.rng.random() < odds:
                amounts[kind] = self._stake(kind, None if kind != _ALONE else max(base // 2, 1))
        return Wagers(**amounts)

    def next_round(self) -> dict[int, Wagers]:
        """The next round's bets: seat -> :class:`Wagers`, in seat order, at least one seat."""
        if self.rounds:
            self._between_rounds()
        elif not self.players:
            self.players[self.rng.choice(self.layout)] = self._new_player()
        self.rounds += 1
        return {s: self._bet(p) for s, p in sorted(self.players.items())}

    def place(self, book: BetBook) -> dict[int, Wagers]:
        """Place :meth:`next_round`'s bets in ``book`` (an open :class:`BetBook`), each
        through the book's own checks, and return them. Raises
        :class:`~table.bets.BetRefused` if the book refuses one (its limits or layout
        are not those these players were made for)."""
        bets = self.next_round()
        for seat, w in bets.items():
            book.place(seat, **wagers_dict(w))
        return bets


class FixedPlayers:
    """The fixed bet of ``tablectl run --ante-cents`` (and ``--side-cents``,
    ``--progressive-cents``): the same :class:`Wagers` on every seat of the layout,
    every round. ``side_wagers``: ``{"pair_plus": 500, ...}``."""

    def __init__(self, ante_cents: int, seats: int | Iterable[int], side_wagers: Mapping[str, int] | None = None) -> None:
        layout = range(1, seats + 1) if isinstance(seats, int) else seats
        self.layout = tuple(sorted({int(s) for s in layout}))
        extra = {k: v for k, v in (side_wagers or {}).items() if k in WAGER_KINDS and k != "ante"}
        self.wagers = Wagers(ante=ante_cents, **extra)

    def next_round(self) -> dict[int, Wagers]:
        return {s: self.wagers for s in self.layout}

    def place(self, book: BetBook) -> dict[int, Wagers]:
        """The fixed bet on every seat: the operator's own (``--ante-cents``), put in the
        book as it is, not judged against the default limits of a table that sets none."""
        bets = self.next_round()
        book.restore(bets)
        return bets
