"""The wager kinds a seat may place before the deal, described once.

One :class:`WagerKind` per kind (ante, Pair Plus, Six Card Bonus, progressive):
its key (the journal's and the wire's word), the words people use, the
paytable slot it is paid from, whether it needs an ante, the terminal's
prefix, the default limits, the option of ``tablectl run`` that sets its fixed
bet, and the rule that settles it. Everything that lists the kinds derives the
list from here, in this order: the limits and the bet book (:mod:`table.bets`),
the config's ``[limits.KIND]`` and ``[paytables]`` keys (:mod:`table.config`),
the API schema, the terminal's ``b`` command, the simulated players, the
``in_force`` record, the reports' columns and the screens (which are served
:func:`to_json`).

The settlement math of each kind stays with the game rules
(:mod:`table.rules.settlement`); :attr:`WagerKind.settled_by` names the function
and :attr:`WagerKind.rule` the section.

A kind is added by one :func:`register` call (the built-in ones are below); it
must happen before anything reads the table (the CLI's options, the config's
sections and the API schema are built from it when their modules are imported),
so :func:`register` refuses once the table has been read
(:class:`KindsError`). docs/architecture.md ("A new wager") says which files a
real new kind touches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")
#: words a kind's key may not take: the results of the ante (the play wager and the ante
#: bonus, 649a.11, 649a.12(b)), place_bets's other arguments, and the ante bonus's slot
RESERVED = frozenset({"play", "ante_bonus", "seat", "all_seats", "empty", "same_as_last", "table_minimum"})
_PREFIX_RE = re.compile(r"^[a-z0-9]{1,3}\Z")


class KindsError(ValueError):
    """A wager kind that cannot join the table: a key, prefix or option already
    taken, a malformed field, or a registration after the table was read."""


@dataclass(frozen=True)
class WagerKind:
    """One wager kind a seat may place before the deal.

    ``key``: the journal's and the wire's word (``"pair_plus"``), ``[a-z][a-z0-9_]*``;
    ``label``: as people say it in a sentence (``"Pair Plus"``); ``spot``: its name on
    the betting spot of a screen (``"Pair Plus"``, ``"Six Card"``); ``short``: the
    screen's short form (``"PP"``); ``prefix``: the terminal's (``pp`` in ``b 3 pp10``);
    ``paytable_slot``: the ``[paytables]`` key and
    :class:`~table.rules.settlement.Tables` slot it is paid from (``None``: the ante,
    always taken); ``paytable_hand``: the hand its paytable reads (``"three_card"`` or
    ``"six_card"``) and ``paytable_forms``: the payout forms its paytable may use
    (:mod:`table.rules.paytables`); ``needs_ante``: refused without an ante
    (58 Pa. Code 649a.7); ``route``: a way into the round alone (the ante, Pair Plus:
    649a.7); ``default_limit``: ``(minimum, maximum, chip)`` cents when the config sets
    none; ``fixed_option``: the ``tablectl run`` option (without ``--``) whose cents
    the fixed bet places on this kind (several kinds may share one);
    ``example_dollars``: the amount of the terminal help's example (``pp10``);
    ``player_odds``: how often a simulated player adds it beside the ante, one of these
    chances drawn per player (:mod:`table.players`);
    ``fixed_default``: that option's default cents; ``describe``: one line for the API
    schema; ``settled_by``: the function of :mod:`table.rules.settlement` that settles
    it; ``rule``: the section that function applies."""

    key: str
    label: str
    spot: str
    short: str
    prefix: str
    paytable_slot: str | None
    needs_ante: bool
    route: bool
    default_limit: tuple[int, int, int]
    fixed_option: str
    fixed_default: int
    describe: str
    settled_by: str
    rule: str
    paytable_hand: str = "three_card"
    paytable_forms: tuple[str, ...] = ("to",)
    example_dollars: int = 5
    player_odds: tuple[float, ...] = (0.0, 0.3)

    def __post_init__(self) -> None:
        if not _KEY_RE.match(self.key):
            raise KindsError(f"wager kind key {self.key!r} must be [a-z][a-z0-9_]*, at most 32 characters")
        if self.key in RESERVED or self.paytable_slot in RESERVED:
            raise KindsError(f"{self.key}: its key and paytable slot may not be one of {', '.join(sorted(RESERVED))}")
        if not _PREFIX_RE.match(self.prefix):
            raise KindsError(f"{self.key}: terminal prefix {self.prefix!r} must be 1 to 3 letters or digits")
        if self.paytable_slot is not None and not _KEY_RE.match(self.paytable_slot):
            raise KindsError(f"{self.key}: paytable slot {self.paytable_slot!r} must be [a-z][a-z0-9_]*")
        if self.paytable_hand not in ("three_card", "six_card"):
            raise KindsError(f"{self.key}: paytable_hand must be three_card or six_card")
        low, high, chip = self.default_limit
        if not 1 <= chip <= low <= high or low % chip or high % chip:
            raise KindsError(f"{self.key}: default_limit {self.default_limit!r} is no table's limit")

    @property
    def paytable_option(self) -> str:
        """The command line's option naming its paytable: ``--pair-plus``, ``--six-card``."""
        return "--" + self.key.replace("_", "-")

    def to_json(self) -> dict[str, Any]:
        """What a screen needs of the kind: ``key``, ``label``, ``spot``, ``short``,
        ``paytable_slot``, ``needs_ante``, ``route``. Not the terminal's prefix: ``6c`` would
        read as a card to whoever checks that no card is in a message before its time."""
        return {"key": self.key, "label": self.label, "spot": self.spot, "short": self.short,
                "paytable_slot": self.paytable_slot, "needs_ante": self.needs_ante, "route": self.route}


_KINDS: list[WagerKind] = []
_read = False


def register(kind: WagerKind) -> WagerKind:
    """Add ``kind`` after the kinds already registered (its place is the order
    everything shows and checks it in). Raises :class:`KindsError` for a key,
    prefix or paytable slot already taken (the terminal reads the longest prefix
    first), or once anything has read the table (the derived options and schemas are
    built then)."""
    if _read:
        raise KindsError(f"wager kind {kind.key!r} registered after the kinds were read: register it before "
                         "importing the modules derived from table.rules.kinds")
    for k in _KINDS:
        if k.key == kind.key:
            raise KindsError(f"wager kind {kind.key!r} is already registered")
        if k.prefix == kind.prefix:
            raise KindsError(f"{kind.key}: terminal prefix {kind.prefix!r} is {k.key}'s")
        if kind.paytable_slot is not None and k.paytable_slot == kind.paytable_slot:
            raise KindsError(f"{kind.key}: paytable slot {kind.paytable_slot!r} is {k.key}'s")
    _KINDS.append(kind)
    return kind


_cache: tuple[tuple[WagerKind, ...], tuple[str, ...]] | None = None
_sides: tuple[WagerKind, ...] | None = None


def kinds() -> tuple[WagerKind, ...]:
    """Every registered kind, the ante first, in the order they are checked and shown.
    From the first read on the table is closed to :func:`register`."""
    global _read, _cache
    _read = True
    if _cache is None:
        _cache = (tuple(_KINDS), tuple(k.key for k in _KINDS))
    return _cache[0]


def keys() -> tuple[str, ...]:
    """The kinds' keys: ``("ante", "pair_plus", "six_card", "progressive", ...)``."""
    kinds()
    assert _cache is not None
    return _cache[1]


def side_kinds() -> tuple[WagerKind, ...]:
    """The kinds paid from a paytable of their own (all but the ante)."""
    global _sides
    if _sides is None:  # the table is closed once read: settlement asks for these at every seat
        _sides = tuple(k for k in kinds() if k.paytable_slot is not None)
    return _sides


def of(key: str) -> WagerKind:
    """The kind whose key is ``key``; raises ``KeyError``."""
    for k in kinds():
        if k.key == key:
            return k
    raise KeyError(key)


def labels() -> dict[str, str]:
    """key -> label, for messages to people."""
    return {k.key: k.label for k in kinds()}


def paytable_slots() -> dict[str, str]:
    """key -> paytable slot of each side kind."""
    return {k.key: k.paytable_slot for k in kinds() if k.paytable_slot is not None}


def to_json() -> list[dict[str, Any]]:
    """The table as the screens read it (:meth:`WagerKind.to_json` of each kind, in order)."""
    return [k.to_json() for k in kinds()]


# The kinds of 58 Pa. Code 649a: the two routes into a round are the ante and Pair Plus
# alone (649a.7); the play wager is not placed before the deal: it equals the ante and is
# made when the player plays (649a.11), so it is no kind of this table.
ANTE = register(WagerKind(
    key="ante", label="ante", spot="Ante", short="Ante", prefix="a", paytable_slot=None,
    needs_ante=False, route=True, default_limit=(100, 100_000, 100), fixed_option="ante-cents",
    fixed_default=1000, describe="the ante in cents (the play wager equals it, 649a.7); 0: none",
    settled_by="_ante_and_play", rule="58 Pa. Code 649a.11, 649a.12(a)-(c)", example_dollars=25))
PAIR_PLUS = register(WagerKind(
    key="pair_plus", label="Pair Plus", spot="Pair Plus", short="PP", prefix="pp", paytable_slot="pair_plus",
    needs_ante=False, route=True, default_limit=(100, 100_000, 100), fixed_option="side-cents",
    fixed_default=500, describe="Pair Plus in cents; alone (no ante) it is a route into the round",
    settled_by="_side_wagers", rule="58 Pa. Code 649a.12(d), 649a.11(b)(1)", example_dollars=10,
    player_odds=(0.0, 0.3, 0.6, 0.9)))
SIX_CARD = register(WagerKind(
    key="six_card", label="Six Card Bonus", spot="Six Card", short="6 Card", prefix="6c",
    paytable_slot="six_card_bonus", needs_ante=True, route=False, default_limit=(100, 100_000, 100),
    fixed_option="side-cents", fixed_default=500, describe="Six Card Bonus in cents (needs an ante)",
    settled_by="_side_wagers", rule="58 Pa. Code 649a.12(f), 649b.5(b)", paytable_hand="six_card",
    paytable_forms=("to", "flat"), player_odds=(0.0, 0.2, 0.5)))
PROGRESSIVE = register(WagerKind(
    key="progressive", label="progressive", spot="Progressive", short="Prog", prefix="pr",
    paytable_slot="progressive", needs_ante=True, route=False, default_limit=(100, 100, 100),
    fixed_option="progressive-cents", fixed_default=100,
    describe="the progressive wager in cents (needs an ante)", settled_by="_side_wagers",
    rule="58 Pa. Code 649a.12(e)", paytable_forms=("to", "for", "meter"), example_dollars=1,
    player_odds=(0.0, 0.0, 0.3, 0.8)))
