"""The types a settlement is made of, shared by seat settlement and the player-dealer bank.

:class:`Wagers` (what a seat placed), :class:`Decision` (play or fold,
58 Pa. Code 649a.11), :class:`WagerResult` and :class:`SeatSettlement` (how
each wager ended, in whole cents), and :class:`SettlementError`.
:mod:`table.rules.settlement` and :mod:`table.rules.bank` both build on them,
so neither imports the other's internals.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping

from . import kinds
from .hands import HandValue, SixCardHand

#: The largest single wager accepted, in cents ($1,000,000): far above any table's
#: maximum, so only a slip of the keyboard or a hostile file reaches it.
MAX_WAGER_CENTS = 100_000_000
#: The largest bank or progressive meter accepted, in cents ($100,000,000).
MAX_AMOUNT_CENTS = 10_000_000_000


class SettlementError(ValueError):
    """A round or seat that cannot be settled: bad wagers, a missing paytable,
    a card dealt twice, a play wager without an ante, a malformed round file."""


class Decision(enum.Enum):
    """The player's one decision (649a.11): make the play wager or fold."""

    PLAY = "play"
    FOLD = "fold"

    @classmethod
    def parse(cls, value: "str | Decision") -> "Decision":
        """``"play"``/``"fold"`` (any case) to a :class:`Decision`; raises :class:`SettlementError`."""
        if isinstance(value, Decision):
            return value
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            return cls(value.strip().lower())
        except ValueError:
            raise SettlementError(f"decision must be 'play' or 'fold', got {show(value)}") from None


class Outcome(str, enum.Enum):
    """How one wager ended: ``win``, ``lose``, ``push`` (returned after a
    decided contest: a tie, or the play wager when the dealer does not qualify)
    or ``returned`` (handed back with no action, e.g. not covered by a
    California player-dealer's bank)."""

    WIN = "win"
    LOSE = "lose"
    PUSH = "push"
    RETURNED = "returned"


def show(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line error messages
    about input that may be huge (a hostile file)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** limit:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits"  # str() may refuse it
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cents(name: str, value: Any, maximum: int = MAX_WAGER_CENTS) -> int:
    """``value`` when it is a whole number of cents in ``0..maximum``; raises
    :class:`SettlementError` naming ``name`` otherwise (a bool, a float such as
    ``5.0``, a string or a number out of range)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettlementError(f"{name} must be a whole number of cents, got {show(value)}")
    if value < 0:
        raise SettlementError(f"{name} must not be negative, got {show(value)}")
    if value > maximum:
        raise SettlementError(f"{name} of {show(value)} cents is above the {maximum:,}-cent limit")
    return value


class Wagers:
    """One seat's wagers in cents (ints), one amount per wager kind of
    :mod:`table.rules.kinds` (``ante``, ``pair_plus``, ``six_card`` (Six Card Bonus),
    ``progressive``, ...), read as attributes (``w.pair_plus``; a kind not placed is
    0). Positional amounts follow the kinds' order: ``Wagers(2500, 1000)`` is an ante
    of 2500 and Pair Plus 1000. The play wager is not listed: it equals the ante when
    the player plays (649a.11). Immutable, hashable, equal when every amount is.

    A seat enters the round by one of the two routes of 58 Pa. Code 649a.7: an
    ante (with any side wagers beside it), or a Pair Plus wager alone. Raises
    :class:`SettlementError` for a negative or non-integer amount, one above
    :data:`MAX_WAGER_CENTS`, a seat with no wager at all, and a wager whose kind
    needs an ante (Six Card Bonus, progressive) without one; ``TypeError`` for a
    kind not registered."""

    __slots__ = ("_amounts", "_placed")
    _amounts: tuple[tuple[str, int], ...]
    #: the same amounts by kind, for reads (settlement reads them ~20 times a seat)
    _placed: dict[str, int]

    def __init__(self, *amounts: int, **by_kind: int) -> None:
        table = kinds.kinds()
        if len(amounts) > len(table):
            raise TypeError(f"Wagers takes at most {len(table)} amounts, one per wager kind")
        given: dict[str, Any] = {k.key: v for k, v in zip(table, amounts)}
        for key, v in by_kind.items():
            if key in given:
                raise TypeError(f"Wagers got two amounts for {key!r}")
            if key not in {k.key for k in table}:
                raise TypeError(f"Wagers got an unknown wager kind {key!r}; the kinds: "
                                f"{', '.join(k.key for k in table)}")
            given[key] = v
        checked = {k.key: _cents(k.key, given.get(k.key, 0)) for k in table}
        object.__setattr__(self, "_amounts", tuple((k, v) for k, v in checked.items() if v))
        object.__setattr__(self, "_placed", dict(self._amounts))
        if not self.total:
            raise SettlementError("no wager placed: a seat needs an ante or a Pair Plus wager (649a.7)")
        if not checked["ante"]:
            # 649a.7: without an ante a seat competes only against the Pair Plus paytable.
            for k in table:
                if k.needs_ante and checked[k.key]:
                    raise SettlementError(f"a {k.label} wager needs an ante: without one a seat plays only "
                                          "Pair Plus (649a.7)")

    def __getattr__(self, name: str) -> int:
        if name.startswith("_") or name not in kinds.keys():
            raise AttributeError(name)
        return self._placed.get(name, 0)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Wagers are immutable")

    def amount(self, kind: str) -> int:
        """The cents placed on ``kind`` (0 when none)."""
        return self._placed.get(kind, 0)

    def amounts(self) -> dict[str, int]:
        """kind -> cents for every registered kind, zeros included, in the kinds' order."""
        return {k: self._placed.get(k, 0) for k in kinds.keys()}

    def to_record(self) -> dict[str, int]:
        """The journal's form: only the wagers placed (zero amounts left out), in the kinds' order."""
        return dict(self._amounts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wagers) and self._amounts == other._amounts

    def __hash__(self) -> int:
        return hash(self._amounts)

    def __repr__(self) -> str:
        return "Wagers(" + ", ".join(f"{k}={v}" for k, v in self.amounts().items()) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_wagers_from_record, (self.to_record(),))

    @property
    def total(self) -> int:
        """Cents placed before the deal (play wager excluded)."""
        return sum(v for _, v in self._amounts)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Wagers":
        """One seat's wagers as journaled (only the wagers placed; a missing kind is 0).
        Raises :class:`SettlementError` as the constructor does."""
        return cls(**{k: int(record.get(k, 0)) for k in kinds.keys()})


def _wagers_from_record(record: Mapping[str, int]) -> Wagers:
    return Wagers(**record)


@dataclass(frozen=True)
class WagerResult:
    """The settlement of one wager.

    ``wager``: ``"ante"``, ``"play"``, ``"ante_bonus"`` (listed only when a line
    pays), ``"pair_plus"``, ``"six_card"`` or ``"progressive"``; ``stake``:
    cents at risk; ``outcome``: :class:`Outcome`; ``amount``: the seat's net on
    it in cents (positive won, negative lost, 0 push/returned; a ``win`` of 0 only
    for a meter share paid in place of the wager and equal to it: the line hit,
    docs/settlement.md); ``line`` and
    ``payout``: the paytable line and its odds when a paytable paid;
    ``rule``: the section applied.
    """

    wager: str
    stake: int
    outcome: Outcome
    amount: int
    rule: str
    line: str | None = None
    payout: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = {"wager": self.wager, "stake": self.stake, "outcome": self.outcome.value, "amount": self.amount}
        if self.line:
            d["line"] = self.line
            d["payout"] = self.payout
        d["rule"] = self.rule
        return d

    def to_record(self) -> dict[str, Any]:
        """The journal's form: :meth:`to_dict` without ``rule``, the citation the code
        gives every (wager, outcome, line) alike, which the journal need not repeat."""
        d = self.to_dict()
        del d["rule"]
        return d


@dataclass(frozen=True)
class SeatSettlement:
    """One seat's settled round: ``results`` (one :class:`WagerResult` per wager),
    ``decision`` (``None`` for a seat with no ante: a Pair Plus-only seat has
    no decision to make, 649a.7), the hands, whether the dealer qualified, and
    :attr:`net`."""

    decision: Decision | None
    player_hand: HandValue
    dealer_hand: HandValue
    dealer_qualifies: bool
    results: tuple[WagerResult, ...]
    six_card_hand: SixCardHand | None = None

    @property
    def net(self) -> int:
        """The seat's net win (+) or loss (-) for the round, in cents."""
        return sum(r.amount for r in self.results)

    def result(self, wager: str) -> WagerResult | None:
        """The result for ``wager`` (e.g. ``"pair_plus"``), or ``None`` if not placed/paid."""
        for r in self.results:
            if r.wager == wager:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        d: dict[str, Any] = {
            "decision": self.decision.value if self.decision is not None else None,
            "hand": hand_to_dict(self.player_hand),
            "wagers": [r.to_dict() for r in self.results],
            "net": self.net,
        }
        if self.six_card_hand is not None:
            d["six_card_hand"] = self.six_card_hand.category.label
        return d

    def to_record(self) -> dict[str, Any]:
        """The journal's form (a few hundred bytes a seat, not a kilobyte): the
        decision, the hand's category, each wager's stake, outcome, amount (and paytable
        line and payout) and the net. The cards are in the round's ``decisions_done``
        entry; the hand's description, ranking key and each wager's citation follow
        from them and the code."""
        d: dict[str, Any] = {
            "decision": self.decision.value if self.decision is not None else None,
            "hand": {"category": self.player_hand.category.label},
            "wagers": [r.to_record() for r in self.results],
            "net": self.net,
        }
        if self.six_card_hand is not None:
            d["six_card_hand"] = self.six_card_hand.category.label
        return d


def hand_to_dict(v: HandValue) -> dict[str, Any]:
    """JSON-ready form of a hand: cards, category, description and ranking key."""
    return {
        "cards": [str(c) for c in v.cards],
        "category": v.category.label,
        "text": v.describe(),
        "key": [int(x) for x in v.key],
    }
