"""Paytables as data: the loader for the shipped TOML files and operators' own.

Every filed option is one TOML file in this package (shipped) or an operator's
file given by path. A file looks like::

    name = "pa-649a12b-1"              # stable name, [a-z0-9-]
    kind = "ante_bonus"                # ante_bonus | pair_plus | six_card_bonus | progressive
    title = "..."                      # one line for humans
    citation = "58 Pa. Code 649a.12(b) ..."   # where the figures come from (required)
    section = "649a.12(b)"             # optional: checks each line against the
                                       # figures that section licenses (LICENSED)
    expires = "2028-08-23"             # optional: temporary regulations (649b)

    [pays]                             # line = odds
    straight_flush = 5                 # an integer N means N to 1
    three_of_a_kind = 4
    straight = 1

A line's payout is an integer (N to 1) or an inline table:
``{ for_one = N }`` (N for 1: the wager is not returned on top),
``{ meter_percent = P }`` (P % of the progressive meter, progressive only) or
``{ flat_cents = C }`` (a flat amount in cents, Six Card Bonus only, 649a.12(f)
Paytable E). Odds are always whole numbers, settlement is in whole cents.

Line names, three-card kinds (ante bonus, Pair Plus, progressive):
``mini_royal_spades``, ``mini_royal`` (suited A-K-Q; the spades line wins over
the any-suit line for spades), ``straight_flush``, ``three_of_a_kind``,
``straight``, ``flush``, ``pair``. Six Card Bonus: ``six_card_royal_diamonds``,
``six_card_royal``, ``royal_flush``, ``straight_flush``, ``four_of_a_kind``,
``full_house``, ``flush``, ``straight``, ``three_of_a_kind``.

Rules enforced at load (each error names the file and line):
unknown keys or lines, payouts that are not positive whole numbers, payout
forms a kind does not allow, a ``section`` whose licensed figures the file
departs from, and the mini-royal floors of 58 Pa. Code 649a.12(g): a mini-royal
line an operator adds pays at least 40 to 1 on Pair Plus and at least 5 to 1 on
an ante bonus paytable.

Naming scheme of shipped files: ``pa-<section without dots or brackets>-<n>``,
``n`` counting the tables of that section in the order the cited text lists
them (``pa-649a12b-1`` is the first table of 649a.12(b)); the regulation's own
letter, where the reference gives it, is the ``label``. See
docs/rules-profiles.md for the list.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .. import kinds as _wager_kinds

if TYPE_CHECKING:  # pragma: no cover
    from ..hands import HandValue, SixCardHand


THREE_CARD_LINES = (
    "mini_royal_spades",
    "mini_royal",
    "straight_flush",
    "three_of_a_kind",
    "straight",
    "flush",
    "pair",
)
SIX_CARD_LINES = (
    "six_card_royal_diamonds",
    "six_card_royal",
    "royal_flush",
    "straight_flush",
    "four_of_a_kind",
    "full_house",
    "flush",
    "straight",
    "three_of_a_kind",
)
_HANDS = {"three_card": THREE_CARD_LINES, "six_card": SIX_CARD_LINES}
#: the paytable kinds: the ante bonus (paid on the ante) and each side wager kind's slot
#: (:mod:`table.rules.kinds`: the hand its paytable reads and the payout forms it may use)
KINDS: tuple[str, ...] = ("ante_bonus",) + tuple(k.paytable_slot for k in _wager_kinds.side_kinds()
                                                   if k.paytable_slot)
LINES_BY_KIND: dict[str, tuple[str, ...]] = {
    "ante_bonus": THREE_CARD_LINES,
    **{k.paytable_slot: _HANDS[k.paytable_hand] for k in _wager_kinds.side_kinds() if k.paytable_slot},
}
FORMS_BY_KIND: dict[str, tuple[str, ...]] = {
    "ante_bonus": ("to",),
    **{k.paytable_slot: k.paytable_forms for k in _wager_kinds.side_kinds() if k.paytable_slot},
}

#: Mini-royal floors, 58 Pa. Code 649a.12(g) (reference 004): odds N to 1.
MINI_ROYAL_FLOORS = {"pair_plus": 40, "ante_bonus": 5}

#: The figures the reference text (004) gives for each licensed section, line by
#: line: a file that names one of these ``section``s must pay every line at one
#: of these figures, in this form. ``("to", n)`` is n to 1, ``("for", n)`` n
#: for 1, ``("meter", p)`` p % of the meter. Lines missing here are not pinned
#: by the text and are not checked.
LICENSED: dict[str, dict[str, tuple[tuple[str, int], ...]]] = {
    "649a.12(b)": {
        "straight_flush": (("to", 5), ("to", 4)),
        "three_of_a_kind": (("to", 4), ("to", 3)),
        "straight": (("to", 1),),
    },
    "649a.12(c)": {
        "mini_royal_spades": (("to", 50),),
        "mini_royal": (("to", 5), ("to", 50), ("to", 10)),
        "straight_flush": (("to", 4), ("to", 8), ("to", 6)),
        "three_of_a_kind": (("to", 3), ("to", 6)),
        "straight": (("to", 1),),
    },
    "649b.4(b)": {
        "straight_flush": (("to", 6),),
        "three_of_a_kind": (("to", 5),),
        "straight": (("to", 1),),
    },
    "649a.12(d)": {
        "straight_flush": (("to", 35), ("to", 40)),
        "three_of_a_kind": (("to", 25), ("to", 30)),
        "straight": (("to", 5), ("to", 6)),
        "flush": (("to", 3), ("to", 4)),
        "pair": (("to", 1),),
    },
    "649a.12(f)": {
        "royal_flush": (("to", 1000),),
        "straight_flush": (("to", 200),),
        "four_of_a_kind": (("to", 50), ("to", 100)),
        "full_house": (("to", 20), ("to", 25)),
        "flush": (("to", 15), ("to", 20)),
        "straight": (("to", 9), ("to", 10)),
        "three_of_a_kind": (("to", 5), ("to", 7), ("to", 8)),
        "six_card_royal_diamonds": (("flat", 100_000_000),),
        "six_card_royal": (("flat", 10_000_000),),
    },
    "649b.5(b)": {
        "six_card_royal": (("to", 20_000),),
    },
    "649a.12(e)": {
        "mini_royal_spades": (("meter", 100),),
        "mini_royal": (("for", 500),),
    },
}

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*\Z")
_TOP_KEYS = {"name", "kind", "title", "citation", "section", "label", "expires", "notes", "pays"}


class PaytableError(ValueError):
    """A paytable that cannot be found or is invalid.

    ``path`` and ``line`` (1-based, or ``None`` when not known) say where; both
    are in the message as ``file:line: ...``.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class Payout:
    """One paytable line's payout.

    ``form``: ``"to"`` (N to 1: the wager is returned and N times it paid),
    ``"for"`` (N for 1: N times the wager in total, so N - 1 net),
    ``"meter"`` (``value`` % of the progressive meter, in place of the wager) or
    ``"flat"`` (``value`` cents paid, wager returned).
    """

    form: str
    value: int

    def __str__(self) -> str:
        if self.form == "to":
            return f"{self.value} to 1"
        if self.form == "for":
            return f"{self.value} for 1"
        if self.form == "meter":
            return f"{self.value}% of meter"
        return f"${self.value // 100:,}.{self.value % 100:02d} flat"

    def net_cents(self, wager_cents: int, meter_cents: int | None = None) -> int:
        """The player's net win in cents for ``wager_cents`` at this payout.

        ``meter_cents`` is required for a ``meter`` payout (raises
        :class:`PaytableError` without it). Integer arithmetic only; a meter
        percentage that does not divide evenly is rounded down to the cent.
        """
        if self.form == "to":
            return wager_cents * self.value
        if self.form == "for":
            return wager_cents * (self.value - 1)
        if self.form == "flat":
            return self.value
        if meter_cents is None:
            raise PaytableError("a meter payout needs the progressive meter amount")
        return meter_cents * self.value // 100 - wager_cents


@dataclass(frozen=True)
class Paytable:
    """One filed paytable.

    Fields: ``name`` (stable name), ``kind`` (one of :data:`KINDS`),
    ``title``, ``citation`` (where the figures come from), ``section`` (the
    licensing section whose figures were checked, or ``None``), ``label`` (the
    regulation's own letter where known), ``expires`` (ISO date for temporary
    regulations, or ``None``), ``notes``, ``lines`` (line name ->
    :class:`Payout`, best line first), ``source`` (file it was read from).
    """

    name: str
    kind: str
    title: str
    citation: str
    lines: Mapping[str, Payout]
    section: str | None = None
    label: str | None = None
    expires: str | None = None
    notes: str = ""
    source: str = ""

    def odds(self, line: str) -> int | None:
        """The N of an ``N to 1`` line, or ``None`` when the line is absent or not N to 1."""
        p = self.lines.get(line)
        return p.value if p is not None and p.form == "to" else None

    def line_for(self, hand: "HandValue | SixCardHand") -> str | None:
        """The line of this paytable that pays ``hand``, or ``None`` when none does.

        ``hand``: a three-card :class:`~table.rules.hands.HandValue` (ante bonus,
        Pair Plus, progressive) or a :class:`~table.rules.hands.SixCardHand`
        (Six Card Bonus). A suited A-K-Q takes ``mini_royal_spades`` (spades) or
        ``mini_royal`` where listed and otherwise the straight flush line
        (58 Pa. Code 649a.12(c), (g): the line exists only where the paytable
        lists it); a six-card royal takes ``six_card_royal_diamonds`` (diamonds),
        ``six_card_royal``, then ``royal_flush``, then ``straight_flush``.
        Raises :class:`PaytableError` when the hand's kind does not fit the
        paytable's kind.
        """
        from protocols.cards import Suit

        from ..hands import HandValue, SixCardCategory, SixCardHand

        if isinstance(hand, SixCardHand):
            if LINES_BY_KIND.get(self.kind) is not SIX_CARD_LINES:
                raise PaytableError(f"{self.name} is a {self.kind} paytable, not a Six Card Bonus one")
            chain: list[str] = []
            c = hand.category
            if c is SixCardCategory.SIX_CARD_ROYAL:
                if hand.suit == Suit.DIAMONDS:
                    chain.append("six_card_royal_diamonds")
                chain += ["six_card_royal", "royal_flush", "straight_flush"]
            elif c is SixCardCategory.ROYAL_FLUSH:
                chain += ["royal_flush", "straight_flush"]
            elif c is not SixCardCategory.NOTHING:
                chain.append(c.name.lower())
        elif isinstance(hand, HandValue):
            if LINES_BY_KIND.get(self.kind) is SIX_CARD_LINES:
                raise PaytableError(f"{self.name} is a Six Card Bonus paytable; it needs six cards")
            chain = []
            if hand.mini_royal:
                if all(card.suit == Suit.SPADES for card in hand.cards):
                    chain.append("mini_royal_spades")
                chain += ["mini_royal", "straight_flush"]
            elif hand.category.name != "HIGH_CARD":
                chain.append(hand.category.name.lower())
        else:
            raise PaytableError(f"cannot pay {hand!r}: not a hand value")
        for line in chain:
            if line in self.lines:
                return line
        return None

    @property
    def has_mini_royal(self) -> bool:
        """True when the paytable lists a suited A-K-Q line (649a.12(c), (e), (g))."""
        return "mini_royal" in self.lines or "mini_royal_spades" in self.lines


def _line_of(text: str, key: str, section: str | None) -> int | None:
    """1-based line of ``key = ...`` inside ``[section]`` (top level when ``None``)."""
    current: str | None = None
    pat = re.compile(r'^\s*["\']?' + re.escape(key) + r'["\']?\s*=')
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")
    for i, raw in enumerate(text.splitlines(), 1):
        m = header.match(raw)
        if m:
            current = m.group(1).strip('"\'')
            if section is not None and current == section and key == "":
                return i
            continue
        if current == section and pat.match(raw):
            return i
    return None


def _parse_payout(kind: str, line: str, raw: object, err) -> Payout:
    if isinstance(raw, bool):
        raise err(f"line {line!r}: payout must be a whole number, got {raw!r}")
    if isinstance(raw, int):
        form, value = "to", raw
    elif isinstance(raw, dict) and len(raw) == 1:
        (k, value), = raw.items()
        forms = {"to_one": "to", "for_one": "for", "meter_percent": "meter", "flat_cents": "flat"}
        if k not in forms:
            raise err(f"line {line!r}: unknown payout form {k!r}; use one of {', '.join(forms)}")
        form = forms[k]
        if isinstance(value, bool) or not isinstance(value, int):
            raise err(f"line {line!r}: {k} must be a whole number, got {value!r}")
    else:
        raise err(
            f"line {line!r}: payout must be N (N to 1) or one of "
            "{ for_one = N }, { meter_percent = P }, { flat_cents = C }"
        )
    if value < 1:
        raise err(f"line {line!r}: payout must be at least 1, got {value}")
    if form == "for" and value < 2:
        raise err(f"line {line!r}: '1 for 1' returns the wager only; use at least 2 for 1")
    if form not in FORMS_BY_KIND[kind]:
        raise err(f"line {line!r}: a {kind} paytable cannot pay {form!r} payouts")
    return Payout(form, value)


def parse_paytable(text: str, source: str | Path = "<string>") -> Paytable:
    """Parse and validate one paytable's TOML ``text``; ``source`` names it in errors.

    Raises :class:`PaytableError` naming ``source`` and the line for malformed
    TOML (from ``tomllib``), unknown or missing keys, bad payouts, departures
    from the licensed figures of ``section`` and mini-royal lines below the
    58 Pa. Code 649a.12(g) floors.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise PaytableError(f"not valid TOML: {e}", source, int(m.group(1)) if m else None) from None

    def err_at(key: str, section: str | None = None):
        def make(msg: str) -> PaytableError:
            return PaytableError(msg, source, _line_of(text, key, section))

        return make

    for k in data:
        if k not in _TOP_KEYS:
            raise err_at(k)(f"unknown key {k!r}; allowed: {', '.join(sorted(_TOP_KEYS))}")
    for k in ("name", "kind", "citation", "pays"):
        if k not in data:
            raise PaytableError(f"missing required key {k!r}", source, None)
    for k in ("name", "kind", "title", "citation", "section", "label", "expires", "notes"):
        if k in data and not isinstance(data[k], str):
            raise err_at(k)(f"{k!r} must be a string")
    name = data["name"]
    if not _NAME_RE.match(name):
        raise err_at("name")(f"name {name!r} must be lower-case letters, digits and '-'")
    kind = data["kind"]
    if kind not in KINDS:
        raise err_at("kind")(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    if not data["citation"].strip():
        raise err_at("citation")("citation must name the regulation section the figures come from")
    pays = data["pays"]
    if not isinstance(pays, dict) or not pays:
        raise err_at("pays")("[pays] must be a table with at least one line")
    allowed = LINES_BY_KIND[kind]
    lines: dict[str, Payout] = {}
    for line, raw in pays.items():
        err = err_at(line, "pays")
        if line not in allowed:
            raise err(f"unknown line {line!r} for a {kind} paytable; allowed: {', '.join(allowed)}")
        lines[line] = _parse_payout(kind, line, raw, err)
    section = data.get("section")
    _check_figures(kind, section, lines, err_at)
    order = {ln: i for i, ln in enumerate(allowed)}
    ordered = dict(sorted(lines.items(), key=lambda kv: order[kv[0]]))
    return Paytable(
        name=name,
        kind=kind,
        title=data.get("title", name),
        citation=data["citation"],
        lines=ordered,
        section=section,
        label=data.get("label"),
        expires=data.get("expires"),
        notes=data.get("notes", ""),
        source=str(source),
    )


def _check_figures(kind: str, section: str | None, lines: dict[str, Payout], err_at: Any) -> None:
    """The payouts against the rules: mini-royal lines at or above the 58 Pa. Code
    649a.12(g) floors, and every line one of the figures ``section`` licenses.
    ``err_at(key, table)`` makes the :class:`PaytableError` naming the line."""
    # 58 Pa. Code 649a.12(g): mini-royal floors where an operator adds the line.
    floor = MINI_ROYAL_FLOORS.get(kind)
    if floor is not None:
        for line in ("mini_royal_spades", "mini_royal"):
            p = lines.get(line)
            if p is not None and p.value < floor:
                raise err_at(line, "pays")(
                    f"line {line!r} pays {p}, below the 58 Pa. Code 649a.12(g) floor of "
                    f"{floor} to 1 for a mini royal on a {kind} paytable"
                )
    if section is not None:
        if section not in LICENSED:
            raise err_at("section")(
                f"no licensed figures known for section {section!r}; known: {', '.join(LICENSED)}"
            )
        for line, p in lines.items():
            figures = LICENSED[section].get(line)
            if figures is not None and (p.form, p.value) not in figures:
                shown = " or ".join(str(Payout(f, v)) for f, v in figures)
                raise err_at(line, "pays")(
                    f"line {line!r} pays {p}, but 58 Pa. Code {section} licenses {shown}"
                )


def _shipped_files() -> list[tuple[str, str]]:
    root = resources.files(__name__)
    return sorted((p.name, p.read_text(encoding="utf-8")) for p in root.iterdir() if p.name.endswith(".toml"))


_CACHE: dict[str, Paytable] | None = None


def _shipped() -> dict[str, Paytable]:
    global _CACHE
    if _CACHE is None:
        tables: dict[str, Paytable] = {}
        for fname, text in _shipped_files():
            pt = parse_paytable(text, f"table/rules/paytables/{fname}")
            if pt.name in tables:
                raise PaytableError(f"duplicate paytable name {pt.name!r}", pt.source, _line_of(text, "name", None))
            tables[pt.name] = pt
        _CACHE = tables
    return _CACHE


def list_paytables(kind: str | None = None) -> list[Paytable]:
    """The shipped paytables, optionally of one ``kind``, sorted by kind then name."""
    if kind is not None and kind not in KINDS:
        raise PaytableError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(
        (p for p in _shipped().values() if kind is None or p.kind == kind),
        key=lambda p: (order[p.kind], p.name),
    )


#: the rule a paytable named by a path follows (docs/settlement.md, docs/rules-profiles.md)
TOML_RULE = "a paytable file's name ends in .toml (a shipped name has neither '/' nor .toml)"


def load_paytable(name_or_path: str | Path | Paytable, base_dir: str | Path | None = None) -> Paytable:
    """Return a paytable by shipped name (``"pa-649a12b-1"``) or from a TOML file path.

    A value ending in ``.toml`` or containing a path separator is read as a
    file (relative to ``base_dir`` when given, as given when absolute); anything
    else is a shipped name. A paytable file's name ends in ``.toml``: a path
    that does not (``"sub/pp.txt"``, ``"/etc/passwd"``: a typo, or a file that
    is no paytable) is refused before anything is read. A :class:`Paytable`
    passes through. Raises :class:`PaytableError` for an unknown name (listing
    the shipped names), a file name not ending in ``.toml``, an unreadable file,
    or an invalid one (naming the file and line).
    """
    if isinstance(name_or_path, Paytable):
        return name_or_path
    s = str(name_or_path)
    if isinstance(name_or_path, Path) or s.endswith(".toml") or "/" in s or "\\" in s:
        if not s.endswith(".toml"):
            raise PaytableError(f"not a paytable file name: {TOML_RULE}", s)
        path = Path(s)
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise PaytableError(f"cannot read paytable file: {e.strerror or e}", path) from None
        return parse_paytable(text, path)
    tables = _shipped()
    if s in tables:
        return tables[s]
    raise PaytableError(f"unknown paytable {s!r} (a paytable is a shipped name or a .toml file); "
                        f"shipped: {', '.join(sorted(tables))}")
