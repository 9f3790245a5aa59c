"""Wagers as placed: the table's limits, and each seat's bets for the round being opened.

A real table is not a constant: players sit down and leave, each bets what they
like within the table's limits, and the dealer deals only to the seats that bet.
This module is the core's book of those bets:

* :class:`TableLimits`: per wager kind (``ante``, ``pair_plus``, ``six_card``,
  ``progressive``) a minimum, a maximum and the smallest chip, in cents. The
  table's ``[limits]`` config (:mod:`table.config`) builds one; without it the
  documented defaults (:data:`DEFAULT_LIMITS`) apply, which accept what the
  fixed-bet options always placed (``--ante-cents 1000``, ``--side-cents 500``,
  ``--progressive-cents 100``). 58 Pa. Code 816a.1 has the table minimum and
  maximum posted before play; this is where the table knows them.
* :class:`BetBook`: each seat's :class:`~table.rules.wagers.Wagers` for the round
  being opened, set seat by seat while bets are open (:meth:`BetBook.place`,
  :meth:`~BetBook.clear`, :meth:`~BetBook.same_as_last`,
  :meth:`~BetBook.table_minimum`, or the ``place_bets`` command's arguments,
  :meth:`~BetBook.apply`), then frozen when bets close (:meth:`~BetBook.freeze`):
  from then on no wager changes (816a.1: no outcome may be known before the
  wager it decides is final).
* :class:`BetRefused`: a bet the table does not take, naming the seat, the wager,
  the limit and the rule, with a machine-readable :attr:`~BetRefused.code`
  (:data:`REFUSAL_CODES`).

The two routes into a round (58 Pa. Code 649a.7): an ante (the play wager, equal
to it, follows when the player plays, 649a.11) with any side wagers beside it, or
Pair Plus alone against its paytable. A Six Card Bonus or progressive wager needs an
ante. A side wager is taken only when its paytable is in play (:func:`offered_kinds`).

All amounts are ``int`` cents; nothing here uses floats. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .rules import kinds as _kinds
from .rules.wagers import MAX_WAGER_CENTS, Wagers

#: the wager kinds a seat may place before the deal, in the order they are checked and shown
#: (:mod:`table.rules.kinds`)
WAGER_KINDS = _kinds.keys()
#: each kind in words, for messages to people
LABELS = _kinds.labels()
#: the paytable slot (``[paytables]`` key, :class:`~table.rules.settlement.Tables` slot) each side wager needs
PAYTABLE_SLOT = _kinds.paytable_slots()

RULE_ROUTES = "58 Pa. Code 649a.7"
RULE_FINAL = "58 Pa. Code 816a.1"
RULE_LIMITS = "[limits] (58 Pa. Code 816a.1: the table minimum and maximum are posted)"

#: code -> what it means; every :class:`BetRefused` carries one (docs/round-procedure.md)
REFUSAL_CODES = {
    "no_such_seat": "the seat is not one of the table's layout ([table] seats)",
    "not_an_amount": "an amount is not a whole, non-negative number of cents",
    "not_offered": "the wager's paytable is not in play at this table ([paytables])",
    "below_minimum": "the amount is below the table minimum for that wager",
    "above_maximum": "the amount is above the table maximum for that wager",
    "not_chip_multiple": "the amount is not a multiple of the smallest chip",
    "needs_ante": "a Six Card Bonus or progressive wager needs an ante (649a.7)",
    "no_wager": "the request names no amount and no way to set the seat (empty, same as last, table minimum)",
    "no_last_round": "there is no earlier round whose bets could be repeated",
    "bets_closed": "bets are closed for this round (816a.1): no wager changes now",
    "no_seat_in_play": "no seat has a wager: a round needs at least one seat in play",
}


def money(cents: int) -> str:
    """``2550`` -> ``"$25.50"`` (``"$25"`` for whole dollars), for messages to people."""
    sign = "-" if cents < 0 else ""
    d, c = divmod(abs(cents), 100)
    return f"{sign}${d:,}" if c == 0 else f"{sign}${d:,}.{c:02d}"


class LimitsError(ValueError):
    """A set of limits that cannot be a table's: ``key`` names the field
    (``"ante.maximum_cents"``), the message the rule it breaks."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class BetRefused(ValueError):
    """A bet the table does not take.

    ``code``: one of :data:`REFUSAL_CODES`; ``seat``: the seat (``None`` for the
    whole table); ``wager``: the wager kind (``"ante"``, ``"pair_plus"``,
    ``"six_card"``, ``"progressive"``; ``None`` when no one wager is at fault);
    ``limit``: the limit broken in cents (``None`` when there is none); ``rule``:
    the rule or config key applied. ``str(exc)`` names the seat, the wager and the
    limit for a person."""

    def __init__(self, code: str, message: str, *, seat: int | None = None, wager: str | None = None,
                 limit: int | None = None, rule: str = "") -> None:
        super().__init__(message)
        self.code, self.seat, self.wager, self.limit, self.rule = code, seat, wager, limit, rule

    def to_answer(self) -> dict[str, Any]:
        """The refusal as a command's answer (``ok: false``, ``code``, ``error``, and
        ``seat``/``wager``/``limit_cents``/``rule`` when known)."""
        d: dict[str, Any] = {"ok": False, "code": self.code, "error": str(self)}
        for k, v in (("seat", self.seat), ("wager", self.wager), ("limit_cents", self.limit), ("rule", self.rule)):
            if v is not None and v != "":
                d[k] = v
        return d


@dataclass(frozen=True)
class Limit:
    """One wager kind's limits, in cents: ``minimum_cents`` and ``maximum_cents``
    (inclusive; equal for a fixed-amount wager such as most progressives) and
    ``chip_cents``, the smallest chip: every amount is a multiple of it. Raises
    :class:`LimitsError` (keys ``minimum_cents``, ``maximum_cents``, ``chip_cents``)
    for a chip below 1 cent, a minimum below one chip, a maximum below the minimum
    or above :data:`~table.rules.wagers.MAX_WAGER_CENTS`, or a minimum or maximum
    that is not a multiple of the chip (no bet could be placed at it)."""

    minimum_cents: int
    maximum_cents: int
    chip_cents: int = 100

    def __post_init__(self) -> None:
        for k in ("minimum_cents", "maximum_cents", "chip_cents"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int):
                raise LimitsError(k, f"must be a whole number of cents, got {v!r}")
        if not 1 <= self.chip_cents <= MAX_WAGER_CENTS:
            raise LimitsError("chip_cents", f"{self.chip_cents} is out of range; allowed: 1..{MAX_WAGER_CENTS}")
        if self.minimum_cents < self.chip_cents:
            raise LimitsError("minimum_cents", f"{self.minimum_cents} is below one chip ({self.chip_cents} cents); "
                                               "a bet is at least one chip")
        if self.maximum_cents < self.minimum_cents:
            raise LimitsError("maximum_cents", f"{self.maximum_cents} is below minimum_cents ({self.minimum_cents})")
        if self.maximum_cents > MAX_WAGER_CENTS:
            raise LimitsError("maximum_cents", f"{self.maximum_cents} is above the {MAX_WAGER_CENTS:,}-cent "
                                               "limit on any single wager")
        for k in ("minimum_cents", "maximum_cents"):
            if getattr(self, k) % self.chip_cents:
                raise LimitsError(k, f"{getattr(self, k)} is not a multiple of chip_cents ({self.chip_cents}): "
                                     "no bet could be placed at it")

    def to_dict(self) -> dict[str, int]:
        return {"minimum_cents": self.minimum_cents, "maximum_cents": self.maximum_cents,
                "chip_cents": self.chip_cents}


class TableLimits:
    """The table's limits per wager kind (see :class:`Limit`): ``TableLimits(ante=Limit(..),
    pair_plus=Limit(..))``, one keyword per kind of :mod:`table.rules.kinds`, read back as
    attributes (``limits.ante``) or with :meth:`of`. A kind left out keeps its default,
    :attr:`~table.rules.kinds.WagerKind.default_limit` (a config without ``[limits]``;
    docs/bets.md): a $1 chip (100 cents) on every wager; ante, Pair Plus and Six Card Bonus
    $1..$1,000 (100..100,000 cents); progressive a fixed $1 (100 cents). They take what the
    fixed-bet options of ``tablectl run`` place by default (``--ante-cents 1000``,
    ``--side-cents 500``, ``--progressive-cents 100``). Raises ``TypeError`` for a kind not
    registered or a value that is not a :class:`Limit`. Immutable; equal when every limit is."""

    __slots__ = ("_limits",)
    _limits: dict[str, Limit]

    def __init__(self, **given: Limit) -> None:
        unknown = [k for k in given if k not in WAGER_KINDS]
        if unknown:
            raise TypeError(f"unknown wager kind {unknown[0]!r}; allowed: {', '.join(WAGER_KINDS)}")
        for k, v in given.items():
            if not isinstance(v, Limit):
                raise TypeError(f"{k}: a Limit, got {v!r}")
        object.__setattr__(self, "_limits", {k.key: given.get(k.key) or Limit(*k.default_limit)
                                             for k in _kinds.kinds()})

    def __getattr__(self, name: str) -> Limit:
        if name.startswith("_") or name not in WAGER_KINDS:
            raise AttributeError(name)
        return self._limits[name]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TableLimits are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TableLimits) and self._limits == other._limits

    def __hash__(self) -> int:
        return hash(tuple(self._limits.items()))

    def __repr__(self) -> str:
        return "TableLimits(" + ", ".join(f"{k}={v!r}" for k, v in self._limits.items()) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_limits_from, (dict(self._limits),))

    def of(self, kind: str) -> Limit:
        """The :class:`Limit` of wager ``kind`` (one of :data:`WAGER_KINDS`); ``KeyError`` otherwise."""
        return self._limits[kind]

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{"ante": {"minimum_cents": .., "maximum_cents": .., "chip_cents": ..}, ...}``."""
        return {k: self.of(k).to_dict() for k in WAGER_KINDS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Mapping[str, int]], chip_cents: int | None = None) -> "TableLimits":
        """From ``{"ante": {"minimum_cents": .., "maximum_cents": .., "chip_cents": ..}, ...}``
        (``[limits]``): a kind given without its own ``chip_cents`` takes ``chip_cents``
        (the table-wide chip; else 100); a kind left out keeps its default whole.
        Raises :class:`LimitsError` with ``key`` ``"KIND.FIELD"``."""
        kw: dict[str, Limit] = {}
        for kind, raw in d.items():
            if kind not in WAGER_KINDS:
                raise LimitsError(kind, f"unknown wager kind; allowed: {', '.join(WAGER_KINDS)}")
            chip = raw.get("chip_cents", chip_cents if chip_cents is not None else 100)
            try:
                kw[kind] = Limit(raw["minimum_cents"], raw["maximum_cents"], chip)
            except KeyError as exc:
                raise LimitsError(f"{kind}.{exc.args[0]}", "missing required key") from None
            except LimitsError as exc:
                raise LimitsError(f"{kind}.{exc.key}", str(exc)) from None
        return cls(**kw)


def _limits_from(limits: Mapping[str, Limit]) -> TableLimits:
    return TableLimits(**limits)


#: the limits of a table whose config sets none (see :class:`TableLimits`)
DEFAULT_LIMITS = TableLimits()


def offered_kinds(tables: Any) -> tuple[str, ...]:
    """The wager kinds a table takes, from its :class:`~table.rules.settlement.Tables`:
    ``ante`` always, each side wager when its paytable is in play (a wager with no
    paytable could not be settled)."""
    return tuple(k for k in WAGER_KINDS
                 if k not in PAYTABLE_SLOT or _paytable_in(tables, PAYTABLE_SLOT[k]) is not None)


def _paytable_in(tables: Any, slot: str) -> Any:
    slot_of = getattr(tables, "slot", None)
    return slot_of(slot) if callable(slot_of) else getattr(tables, slot, None)


def wagers_dict(w: Wagers | None) -> dict[str, int]:
    """``Wagers`` -> ``{"ante": .., "pair_plus": .., "six_card": .., "progressive": ..}``, every
    kind of :data:`WAGER_KINDS` (zeros for ``None``)."""
    return w.amounts() if w is not None else {k: 0 for k in WAGER_KINDS}


class BetBook:
    """Each seat's wagers for the round being opened, placed while bets are open.

    ``limits``: the table's :class:`TableLimits`; ``seats``: the layout, a seat
    count (seats ``1..N``, as ``[table] seats``) or the seat numbers;
    ``offered``: the wager kinds taken (:func:`offered_kinds`; default all);
    ``last``: the previous round's frozen wagers (for :meth:`same_as_last`; after a
    restart, from the journal's last ``close_bets`` entry).

    A seat with no wager is empty and is not dealt. :meth:`freeze` closes the
    bets (58 Pa. Code 816a.1); :meth:`open_round` opens the next round's book,
    the frozen bets becoming "last round". Not thread-safe: the controller's
    thread owns it (commands reach it through the console's queue)."""

    def __init__(self, limits: TableLimits = DEFAULT_LIMITS, seats: int | Iterable[int] = 7, *,
                 offered: Iterable[str] = WAGER_KINDS, last: Mapping[int, Wagers] | None = None) -> None:
        self.limits = limits
        layout = range(1, seats + 1) if isinstance(seats, int) else seats
        self.layout: tuple[int, ...] = tuple(sorted({int(s) for s in layout}))
        if not self.layout or not all(1 <= s <= 7 for s in self.layout):
            raise ValueError(f"a layout is seats 1..7, got {self.layout!r}")
        self.offered: tuple[str, ...] = tuple(k for k in WAGER_KINDS if k in set(offered))
        if not any(_kinds.of(k).route for k in self.offered):
            raise ValueError("a table takes an ante or Pair Plus (649a.7)")
        self._bets: dict[int, Wagers] = {}
        self._last: dict[int, Wagers] | None = dict(last) if last is not None else None
        self._frozen: dict[int, Wagers] | None = None

    # -- reading -----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """True until :meth:`freeze`."""
        return self._frozen is None

    @property
    def seats_in_play(self) -> tuple[int, ...]:
        """The seats with a wager, in seat order (the order they are dealt)."""
        return tuple(sorted(self._bets))

    @property
    def wagers(self) -> dict[int, Wagers]:
        """A copy of seat -> :class:`Wagers` for the seats in play."""
        return dict(sorted(self._bets.items()))

    @property
    def last(self) -> dict[int, Wagers] | None:
        """The previous round's wagers (``None`` before the first round)."""
        return None if self._last is None else dict(self._last)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for a status: ``open``, ``layout``, ``offered``, ``limits``,
        ``seats`` (seat -> amounts, in play only), ``last`` (the same, or ``None``) and
        ``kinds``, the wager kinds' table the screens draw the spots from
        (:func:`table.rules.kinds.to_json`)."""
        def amounts(book: Mapping[int, Wagers]) -> dict[str, dict[str, int]]:
            return {str(s): wagers_dict(w) for s, w in sorted(book.items())}

        return {"open": self.is_open, "layout": list(self.layout), "offered": list(self.offered),
                "limits": self.limits.to_dict(), "seats": amounts(self._bets),
                "last": None if self._last is None else amounts(self._last), "kinds": _kinds.to_json()}

    # -- checks ------------------------------------------------------------------------------

    def _seat(self, seat: Any) -> int:
        if isinstance(seat, bool) or not isinstance(seat, int) or seat not in self.layout:
            raise BetRefused("no_such_seat", f"seat {seat!r} is not at this table; its seats are "
                                             f"{', '.join(map(str, self.layout))}", rule="[table] seats")
        return seat

    def _open(self, seat: int | None = None) -> None:
        if self._frozen is not None:
            raise BetRefused("bets_closed", "bets are closed for this round: no wager changes once an outcome "
                                            f"can be known ({RULE_FINAL})", seat=seat, rule=RULE_FINAL)

    def check(self, seat: int, **given: Any) -> Wagers | None:
        """The :class:`Wagers` these amounts make for ``seat`` (``None``: all zero, the
        seat empty), without placing them; ``given``: kind -> cents (``ante=2500,
        pair_plus=1000``; a kind left out is 0). Raises :class:`BetRefused`:
        ``no_such_seat``, ``not_an_amount``, ``not_offered``, ``below_minimum``,
        ``above_maximum``, ``not_chip_multiple``, ``needs_ante`` (checked in that order,
        wager by wager in :data:`WAGER_KINDS` order); ``TypeError`` for a kind not
        registered."""
        seat = self._seat(seat)
        unknown = [k for k in given if k not in WAGER_KINDS]
        if unknown:
            raise TypeError(f"unknown wager kind {unknown[0]!r}; allowed: {', '.join(WAGER_KINDS)}")
        amounts = {k: given.get(k, 0) for k in WAGER_KINDS}
        for kind in WAGER_KINDS:
            v, label = amounts[kind], LABELS[kind]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise BetRefused("not_an_amount", f"seat {seat}: the {label} must be a whole number of cents, "
                                                  f"0 or more; got {str(v)[:20]!r}", seat=seat, wager=kind)
            if not v:
                continue
            if kind not in self.offered:
                raise BetRefused("not_offered", f"seat {seat}: this table takes no {label} wager (no {label} "
                                                "paytable in play)", seat=seat, wager=kind,
                                 rule=f"[paytables] {PAYTABLE_SLOT.get(kind, kind)}")
            lim = self.limits.of(kind)
            key = f"[limits.{kind}]"
            if v < lim.minimum_cents:
                raise BetRefused("below_minimum", f"seat {seat}: {label} {money(v)} is below the table minimum of "
                                                  f"{money(lim.minimum_cents)}", seat=seat, wager=kind,
                                 limit=lim.minimum_cents, rule=f"{key} minimum_cents")
            if v > lim.maximum_cents:
                raise BetRefused("above_maximum", f"seat {seat}: {label} {money(v)} is above the table maximum of "
                                                  f"{money(lim.maximum_cents)}", seat=seat, wager=kind,
                                 limit=lim.maximum_cents, rule=f"{key} maximum_cents")
            if v % lim.chip_cents:
                raise BetRefused("not_chip_multiple", f"seat {seat}: {label} {money(v)} is not a multiple of the "
                                                      f"smallest chip, {money(lim.chip_cents)}", seat=seat,
                                 wager=kind, limit=lim.chip_cents, rule=f"{key} chip_cents")
        if not amounts["ante"]:
            # 649a.7: without an ante a seat competes only against the Pair Plus paytable.
            for kind in WAGER_KINDS:
                if _kinds.of(kind).needs_ante and amounts[kind]:
                    raise BetRefused("needs_ante", f"seat {seat}: a {LABELS[kind]} wager needs an ante; without "
                                                   f"one a seat bets Pair Plus alone ({RULE_ROUTES})", seat=seat,
                                     wager=kind, rule=RULE_ROUTES)
        if not any(amounts.values()):
            return None
        return Wagers(**amounts)

    # -- placing -----------------------------------------------------------------------------

    def place(self, seat: int, **amounts: int) -> Wagers | None:
        """Set ``seat``'s wagers for this round (``amounts``: kind -> cents, as
        :meth:`check`), replacing what it had.
        All zero: the seat is empty (returns ``None``). Raises :class:`BetRefused`
        (:meth:`check`'s codes, and ``bets_closed`` after :meth:`freeze`); a refused
        bet leaves the seat as it was."""
        self._open(seat if isinstance(seat, int) else None)
        w = self.check(seat, **amounts)
        self._set(seat, w)
        return w

    def _set(self, seat: int, w: Wagers | None) -> None:
        if w is None:
            self._bets.pop(seat, None)
        else:
            self._bets[seat] = w

    def clear(self, seat: int) -> None:
        """``seat`` is empty this round (not dealt). Raises :class:`BetRefused`
        (``no_such_seat``, ``bets_closed``)."""
        self._open(seat if isinstance(seat, int) else None)
        self._set(self._seat(seat), None)

    def _same_as_last(self, seat: int) -> Wagers | None:
        seat = self._seat(seat)
        if self._last is None:
            raise BetRefused("no_last_round", f"seat {seat}: there is no earlier round to repeat", seat=seat)
        w = self._last.get(seat)
        return None if w is None else self.check(seat, **wagers_dict(w))

    def same_as_last(self, seat: int) -> Wagers | None:
        """``seat`` bets what it bet last round (empty if it was), checked against today's
        limits. Raises :class:`BetRefused` (``no_last_round`` before any round closed,
        a limit the old bet now breaks, ``no_such_seat``, ``bets_closed``)."""
        self._open(seat if isinstance(seat, int) else None)
        w = self._same_as_last(seat)
        self._set(seat, w)
        return w

    def table_minimum(self, seat: int) -> Wagers:
        """``seat`` bets the table minimum: the ante's minimum, no side wager (or, on a
        table that takes no ante, Pair Plus at its minimum). Raises :class:`BetRefused`
        (``no_such_seat``, ``bets_closed``)."""
        self._open(seat if isinstance(seat, int) else None)
        w = self._minimum(seat)
        self._set(seat, w)
        return w

    def _minimum(self, seat: int) -> Wagers:
        kind = next(k for k in self.offered if _kinds.of(k).route)
        w = self.check(seat, **{kind: self.limits.of(kind).minimum_cents})
        assert w is not None
        return w

    def restore(self, wagers: Mapping[int, Wagers]) -> None:
        """Put back bets accepted before (a restart replays them from the journal, or the
        operator's fixed bet of ``--ante-cents``): set as they were, not checked again
        against today's limits; seats outside the layout are left out. Raises
        :class:`BetRefused` ``bets_closed`` after :meth:`freeze`."""
        self._open()
        self._bets = {int(s): w for s, w in sorted(wagers.items()) if int(s) in self.layout}

    def freeze(self) -> dict[int, Wagers]:
        """Close the bets (58 Pa. Code 816a.1: final from now): seat -> :class:`Wagers` of
        the seats in play, in seat order. Raises :class:`BetRefused` ``no_seat_in_play``
        when no seat has a wager (the bets stay open) and ``bets_closed`` when already
        frozen."""
        self._open()
        if not self._bets:
            raise BetRefused("no_seat_in_play", "no seat has a wager: place at least one seat's bet before "
                                                "closing bets", rule=RULE_ROUTES)
        self._frozen = self.wagers
        return dict(self._frozen)

    def open_round(self) -> None:
        """Open the next round's book: every seat empty, the frozen bets (if any) kept
        as last round's for :meth:`same_as_last`."""
        if self._frozen is not None:
            self._last = self._frozen
        self._frozen = None
        self._bets = {}

    # -- the place_bets command -----------------------------------------------------------

    def apply(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Carry out a ``place_bets`` command's arguments and return its answer (never raises
        :class:`BetRefused`: a refusal is the answer, :meth:`BetRefused.to_answer`).

        ``args``: ``seat`` (one seat) or ``all_seats: true`` (every seat of the layout,
        all or nothing), and one of: the amounts, one key per kind of :data:`WAGER_KINDS`
        (``ante``, ``pair_plus``, ``six_card``, ``progressive``; cents, absent = 0; all zero = empty), ``empty: true``,
        ``same_as_last: true``, ``table_minimum: true``. Answer:
        ``{"ok": true, "seats": {"3": {"ante": .., ...} | null}, "in_play": [..]}``."""
        modes = [m for m in ("empty", "same_as_last", "table_minimum") if args.get(m) is True]
        has_amounts = any(k in args for k in WAGER_KINDS)
        seat_arg = args.get("seat")
        try:
            if len(modes) + has_amounts > 1:
                raise BetRefused("no_wager", "give either amounts or one of empty, same_as_last, table_minimum",
                                 seat=seat_arg if isinstance(seat_arg, int) else None)
            if args.get("all_seats") is True:
                if seat_arg is not None:
                    raise BetRefused("no_such_seat", "give seat or all_seats, not both")
                seats = self.layout
            else:
                seats = (self._seat(seat_arg),)
            self._open(seats[0] if len(seats) == 1 else None)
            if not modes and not has_amounts:
                raise BetRefused("no_wager", f"seat {seats[0]}: say what to bet (amounts in cents), or empty, "
                                             "same_as_last or table_minimum", seat=seats[0])
            if args.get("all_seats") is True and self._last is None and modes == ["same_as_last"]:
                raise BetRefused("no_last_round", "there is no earlier round to repeat")
            new: dict[int, Wagers | None] = {}
            for s in seats:  # every seat checked before any changes: all or nothing
                if modes == ["empty"]:
                    new[s] = None
                elif modes == ["same_as_last"]:
                    new[s] = self._same_as_last(s)
                elif modes == ["table_minimum"]:
                    new[s] = self._minimum(s)
                else:
                    new[s] = self.check(s, **{k: args.get(k, 0) for k in WAGER_KINDS})
        except BetRefused as exc:
            return exc.to_answer()
        for s, w in new.items():
            self._set(s, w)
        return {"ok": True, "seats": {str(s): (None if w is None else wagers_dict(w)) for s, w in new.items()},
                "in_play": list(self.seats_in_play)}


# -- the money check: every wager placed is settled or returned, nothing lost or created --------


@dataclass
class WagerLedger:
    """What the journal says of the wagers of its rounds (the soak's counting).

    ``rounds``: rounds ended (settled or voided); ``placed_cents``: the wagers frozen at
    close_bets of those rounds (ante and side wagers; the play wager is made later);
    ``settled_cents``: the stakes of those wagers in the settlements; ``returned_cents``:
    what voids returned of them; ``open_rounds``: rounds not ended when the journal
    stops; ``problems``: one line per seat whose wagers do not balance (a wager settled
    that was never placed, or placed and neither settled nor returned)."""

    rounds: int = 0
    placed_cents: int = 0
    settled_cents: int = 0
    returned_cents: int = 0
    open_rounds: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing lost or created, and at least one round ended (an empty journal proves
        nothing)."""
        return self.rounds > 0 and not self.problems and \
            self.placed_cents == self.settled_cents + self.returned_cents

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "placed_cents": self.placed_cents, "settled_cents": self.settled_cents,
                "returned_cents": self.returned_cents, "open_rounds": self.open_rounds,
                "problems": list(self.problems[:50]), "ok": self.ok}


def wager_ledger(entries: Iterable[Any]) -> WagerLedger:
    """Balance each ended round's wagers from journal ``entries`` (objects with ``kind``,
    ``round_id`` and ``body``, as :meth:`table.journal.Journal.entries` yields them):
    the wagers as frozen (the round's ``close_bets`` entry, or its ``open`` entry in a
    journal from before bets were placed) against the stakes settled (``settle``:
    each seat's ``ante``, ``pair_plus``, ``six_card``, ``progressive`` results) or what a
    void returned (``voided``: ``returned_cents``, which also counts a play wager once
    the seat played, so it may exceed the frozen total by exactly the ante)."""
    led = WagerLedger()
    frozen: dict[str, dict[str, dict[str, int]]] = {}
    for e in entries:
        if e.kind != "round" or not e.round_id:
            continue
        step, body, rid = e.body.get("step"), e.body, e.round_id
        if step == "open":
            frozen[rid] = {str(s): dict(w) for s, w in (body.get("wagers") or {}).items()}
        elif step == "close_bets" and "wagers" in body:
            frozen[rid] = {str(s): dict(w) for s, w in body["wagers"].items()}
        elif step == "settle" and rid in frozen:
            placed = frozen.pop(rid)
            led.rounds += 1
            results = body.get("results") or {}
            for seat in sorted(set(placed) | set(results), key=int):
                want = {k: int(placed.get(seat, {}).get(k, 0)) for k in WAGER_KINDS}
                got = {k: 0 for k in WAGER_KINDS}
                for w in (results.get(seat) or {}).get("wagers", []):
                    if w.get("wager") in got:
                        got[w["wager"]] += int(w.get("stake", 0))
                led.placed_cents += sum(want.values())
                led.settled_cents += sum(got.values())
                if want != got:
                    led.problems.append(f"round {rid} seat {seat}: placed {want}, settled {got}")
        elif step == "voided" and rid in frozen:
            placed = frozen.pop(rid)
            led.rounds += 1
            returned = {str(s): int(v) for s, v in (body.get("returned_cents") or {}).items()}
            for seat in sorted(set(placed) | set(returned), key=int):
                want = sum(int(v) for k, v in placed.get(seat, {}).items() if k in WAGER_KINDS)
                back = returned.get(seat, 0)
                ante = int(placed.get(seat, {}).get("ante", 0))
                led.placed_cents += want
                led.returned_cents += min(back, want)
                if not (back == want or (ante and back == want + ante)):
                    led.problems.append(f"round {rid} seat {seat}: placed {want} cents, the void returned {back}")
    led.open_rounds = len(frozen)
    return led
