"""Settlement of every wager of one seat, and of a whole round, in whole cents.

The rules, each cited where the code applies it:

* Ante and play wager (58 Pa. Code 649a.11, 649a.12(a); California standards
  of play): the play wager equals the ante. If the dealer does not qualify
  (below queen high) the ante is paid 1 to 1 and the play wager is returned (a
  push). If the dealer qualifies the better hand wins: the player's ante and
  play wager are paid 1 to 1, or both lose; equal hands push both.
* Ante bonus (649a.12(b), (c); 649b.4(b)): paid on the ante at the selected
  paytable's odds whenever the player makes the play wager, whatever the
  dealer holds and whether or not the player beats the dealer.
* Pair Plus (649a.12(d)): paid on the player's own three cards against its
  paytable, whatever the dealer holds, but forfeited with the ante when the
  player folds (649a.11(b)(1)). A Pair Plus-only player (no ante, 649a.7) has
  no decision to make and is always settled.
* Six Card Bonus (649a.12(f), 649b.5(b)): the best five-card hand of the
  player's three cards and the dealer's three; a fold does not forfeit it
  (649a.11(b)(3)).
* Progressive (649a.12(e)): paid on the player's three cards; a fold does not
  forfeit it (649a.11(b)(3); docs/decisions/0006-side-wagers-stand-on-a-fold.md).

Every amount is an ``int`` number of cents; nothing here uses floats.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from protocols.cards import Card

from . import kinds
from .bank import settle_bank
from .hands import dealer_qualifies, evaluate, six_card_hand
from .paytables import TOML_RULE, Paytable, PaytableError, load_paytable
from .profiles import PENNSYLVANIA, RulesProfile, get_profile
from .wagers import (MAX_AMOUNT_CENTS, MAX_WAGER_CENTS, Decision, Outcome, SeatSettlement,  # noqa: F401
                     SettlementError, WagerResult, Wagers, _cents, hand_to_dict, show)

#: Seat numbers a round file may use: the places of the largest table in the
#: references (California: eight places including the player-dealer).
SEAT_NUMBERS = range(1, 9)
#: The largest round file ``tablectl settle`` reads, and how deep its JSON may nest.
MAX_ROUND_FILE_BYTES = 1 << 20
MAX_JSON_DEPTH = 16
#: The largest paytable file a round file may name.
MAX_PAYTABLE_FILE_BYTES = 256 << 10


@dataclass(frozen=True)
class Tables:
    """The paytables a table has filed, bundled for settlement.

    ``ante_bonus`` is required; ``pair_plus``, ``six_card_bonus`` and
    ``progressive`` are needed only when a seat places that wager.
    ``progressive_meter_cents`` is the meter amount at the round (needed when a
    meter line pays). ``others``: the paytables of the slots of wager kinds
    registered beyond these (:mod:`table.rules.kinds`), each in the slot its
    ``kind`` names; :meth:`slot` reads any slot alike. Raises
    :class:`SettlementError` when a paytable's kind does not fit its slot.
    """

    ante_bonus: Paytable
    pair_plus: Paytable | None = None
    six_card_bonus: Paytable | None = None
    progressive: Paytable | None = None
    progressive_meter_cents: int | None = None
    others: tuple[Paytable, ...] = ()

    def slot(self, name: str) -> Paytable | None:
        """The paytable in slot ``name`` (``"ante_bonus"`` or a kind's
        :attr:`~table.rules.kinds.WagerKind.paytable_slot`), ``None`` when none is."""
        if name in FIELD_SLOTS:
            return getattr(self, name)  # type: ignore[no-any-return]
        return next((pt for pt in self.others if pt.kind == name), None)

    def __post_init__(self) -> None:
        for pt in self.others:
            if not isinstance(pt, Paytable) or pt.kind in FIELD_SLOTS or pt.kind not in all_slots():
                raise SettlementError(f"others: {show(pt)} is not the paytable of a registered wager kind's slot")
        if len({pt.kind for pt in self.others}) != len(self.others):
            raise SettlementError("others: two paytables for one slot")
        for slot in FIELD_SLOTS:
            pt = getattr(self, slot)
            if pt is None:
                if slot == "ante_bonus":
                    raise SettlementError("an ante bonus paytable is required")
                continue
            if not isinstance(pt, Paytable):
                raise SettlementError(f"{slot} must be a Paytable, got {pt!r}")
            if pt.kind != slot:
                raise SettlementError(f"paytable {pt.name!r} is a {pt.kind} table, not {slot}")
        if self.progressive_meter_cents is not None:
            _cents("progressive_meter_cents", self.progressive_meter_cents, MAX_AMOUNT_CENTS)

    @classmethod
    def load(
        cls,
        ante_bonus: str | Paytable,
        pair_plus: str | Paytable | None = None,
        six_card_bonus: str | Paytable | None = None,
        progressive: str | Paytable | None = None,
        progressive_meter_cents: int | None = None,
        base_dir: str | Path | None = None,
        **others: str | Paytable | None,
    ) -> "Tables":
        """Build from shipped names or file paths (see :func:`load_paytable`);
        ``others``: slot -> name or path for the slots of kinds registered beyond the
        four fields. Raises :class:`~table.rules.paytables.PaytableError` for a bad
        table, :class:`SettlementError` for a slot no kind has."""

        def ld(x):
            return None if x is None else load_paytable(x, base_dir=base_dir)

        unknown = [k for k in others if k not in all_slots() or k in FIELD_SLOTS]
        if unknown:
            raise SettlementError(f"no wager kind is paid from paytable slot {unknown[0]!r}")
        extra = tuple(ld(v) for v in others.values() if v is not None)
        return cls(ld(ante_bonus), ld(pair_plus), ld(six_card_bonus), ld(progressive), progressive_meter_cents,
                   extra)

    @classmethod
    def from_slots(cls, slots: Mapping[str, Paytable | None], progressive_meter_cents: int | None = None) -> "Tables":
        """From slot -> paytable (``ante_bonus`` required; a slot missing or ``None``: no
        paytable there), any slot of :func:`all_slots`. Raises :class:`SettlementError` as
        the constructor does, and for a slot no kind has."""
        unknown = [k for k in slots if k not in all_slots()]
        if unknown:
            raise SettlementError(f"no wager kind is paid from paytable slot {unknown[0]!r}")
        pt = slots.get("ante_bonus")
        if pt is None:
            raise SettlementError("an ante bonus paytable is required")
        return cls(pt, slots.get("pair_plus"), slots.get("six_card_bonus"), slots.get("progressive"),
                   progressive_meter_cents,
                   tuple(p for k, p in slots.items() if k not in FIELD_SLOTS and p is not None))


#: the slots :class:`Tables` names as fields; a registered kind's other slot is in ``others``
FIELD_SLOTS = ("ante_bonus", "pair_plus", "six_card_bonus", "progressive")


def all_slots() -> tuple[str, ...]:
    """Every paytable slot: ``ante_bonus`` and each side kind's (:mod:`table.rules.kinds`)."""
    return ("ante_bonus",) + tuple(k.paytable_slot for k in kinds.side_kinds() if k.paytable_slot)


def _cards(cards: Sequence[Card | str], who: str) -> list[Card]:
    try:
        out = [c if isinstance(c, Card) else Card.parse(c) for c in cards]
    except ValueError as e:
        raise SettlementError(f"{who}: {e}") from None
    if len(out) != 3 or len(set(out)) != 3:
        raise SettlementError(f"{who}: needs three distinct cards, got {[str(c) for c in out]}")
    return out


def _paid(wager: str, stake: int, table: Paytable, hand, rule: str, meter: int | None) -> WagerResult | None:
    line = table.line_for(hand)
    if line is None:
        return None
    p = table.lines[line]
    try:
        amount = p.net_cents(stake, meter)
    except PaytableError:
        raise SettlementError(
            f"progressive_meter_cents: missing: the {wager} wager's line {line!r} of {table.name} pays {p}, "
            "a share of the meter when the round was dealt (649a.12(e))"
        ) from None
    if amount < 0:
        # A meter share paid in place of the wager that is less than the wager: the
        # meter reading cannot be right (a meter starts at its reset amount). Refused,
        # never reported as a win that loses money.
        raise SettlementError(
            f"progressive_meter_cents: the {wager} wager's line {line!r} of {table.name} pays {p}, "
            f"{amount + stake} cents on a meter of {meter} cents, less than the {stake}-cent wager it is paid "
            "in place of: a meter starts at its reset amount, so the reading cannot be right; check it")
    return WagerResult(wager, stake, Outcome.WIN, amount, rule, line, str(p))


def settle_seat(
    wagers: Wagers,
    decision: Decision | str | None,
    seat_cards: Sequence[Card | str],
    dealer_cards: Sequence[Card | str],
    tables: Tables,
    profile: RulesProfile = PENNSYLVANIA,
) -> SeatSettlement:
    """Settle every wager of one seat against the dealer's hand.

    ``wagers``: :class:`Wagers` in cents; ``decision``: :class:`Decision` (or
    ``"play"``/``"fold"``), and ``None`` for a seat with no ante (a Pair
    Plus-only seat has no decision to make, 649a.7); ``seat_cards``/``dealer_cards``: three cards each;
    ``tables``: the filed paytables (:class:`Tables`); ``profile``: the rules
    profile ranking the hands. Returns a :class:`SeatSettlement` whose amounts
    are int cents.

    Raises :class:`SettlementError` for a card held twice, a decision given
    for a seat with no ante (or none for a seat with one), a wager whose
    paytable is not in ``tables``, or a meter line paying less than its wager.
    """
    decision, seat, dealer = _checked(wagers, decision, seat_cards, dealer_cards, tables)
    player = evaluate(seat, profile)
    dealer_v = evaluate(dealer, profile)
    qualifies = dealer_qualifies(dealer_v)
    out = _ante_and_play(wagers, decision, player, dealer_v, qualifies, tables)
    six = six_card_hand(seat + dealer) if wagers.six_card else None
    out += _side_wagers(wagers, decision, player, six, tables)
    return SeatSettlement(decision, player, dealer_v, qualifies, tuple(out), six)

def _checked(wagers: Wagers, decision: Decision | str | None, seat_cards: Sequence[Card | str],
             dealer_cards: Sequence[Card | str], tables: Tables) -> tuple[Decision | None, list[Card], list[Card]]:
    """The inputs of :func:`settle_seat`, checked: the decision parsed (None for a seat
    with no ante, 649a.7), both hands of three cards, no card held twice, a paytable for
    every side wager placed. Raises :class:`SettlementError`."""
    if not isinstance(wagers, Wagers):
        raise SettlementError(f"wagers must be Wagers, got {show(wagers)}")
    if wagers.ante == 0:
        if decision is not None:
            # 649a.7: a Pair Plus-only seat competes only against the paytable; a "fold"
            # or "play" there would be ignored, so it is refused instead.
            raise SettlementError(
                "a seat with no ante has no decision to make (a Pair Plus-only seat, 649a.7): "
                f"got {show(decision if not isinstance(decision, Decision) else decision.value)}; "
                "a play wager needs an ante (the play wager equals the ante, 649a.11)")
    else:
        if decision is None:
            raise SettlementError("a seat with an ante needs a decision, play or fold (649a.11)")
        decision = Decision.parse(decision)
    seat = _cards(seat_cards, "seat")
    dealer = _cards(dealer_cards, "dealer")
    if set(seat) & set(dealer):
        raise SettlementError(f"card dealt twice: {', '.join(sorted(str(c) for c in set(seat) & set(dealer)))}")
    for kind in kinds.side_kinds():
        slot, key = kind.paytable_slot or "", kind.key
        if wagers.amount(key) and tables.slot(slot) is None:
            raise SettlementError(f"wagers.{key}: a {slot} wager was placed but the round names no paytables.{slot} "
                                  "(a side wager is paid only from its filed paytable, 58 Pa. Code 649a.12)")
    return decision, seat, dealer


def _ante_and_play(wagers: Wagers, decision: Decision | None, player: Any, dealer_v: Any, qualifies: bool,
                   tables: Tables) -> list[WagerResult]:
    """The ante, the play wager and the ante bonus against the dealer's hand (649a.11,
    649a.12(a)-(c), 649b.4(b)); a fold forfeits the ante and with it Pair Plus."""
    out: list[WagerResult] = []
    ante = wagers.ante
    if not ante:
        return out
    if decision is not Decision.PLAY:
        # 649a.11(b)(1): a fold forfeits the ante, and with it any Pair Plus wager.
        out.append(WagerResult("ante", ante, Outcome.LOSE, -ante, "649a.11(b)(1) fold forfeits the ante"))
        if wagers.pair_plus:
            out.append(
                WagerResult("pair_plus", wagers.pair_plus, Outcome.LOSE, -wagers.pair_plus,
                            "649a.11(b)(1) fold forfeits the Pair Plus wager")
            )
        return out
    play = ante  # 649a.11: the play wager equals the ante
    if not qualifies:
        # 649a.11: dealer below queen high pays the ante 1 to 1 and returns the play wager.
        out.append(WagerResult("ante", ante, Outcome.WIN, ante, "649a.11 dealer does not qualify: ante paid 1 to 1"))
        out.append(WagerResult("play", play, Outcome.PUSH, 0, "649a.11 dealer does not qualify: play wager returned"))
    elif player > dealer_v:
        # 649a.12(a): winning ante and play wagers are paid 1 to 1.
        out.append(WagerResult("ante", ante, Outcome.WIN, ante, "649a.12(a) player beats a qualifying dealer: 1 to 1"))
        out.append(WagerResult("play", play, Outcome.WIN, play, "649a.12(a) player beats a qualifying dealer: 1 to 1"))
    elif player == dealer_v:
        out.append(WagerResult("ante", ante, Outcome.PUSH, 0, "649a.11 equal hands: push"))
        out.append(WagerResult("play", play, Outcome.PUSH, 0, "649a.11 equal hands: push"))
    else:
        out.append(WagerResult("ante", ante, Outcome.LOSE, -ante, "649a.11 qualifying dealer hand is higher"))
        out.append(WagerResult("play", play, Outcome.LOSE, -play, "649a.11 qualifying dealer hand is higher"))
    # 649a.12(b), (c); 649b.4(b): ante bonus whenever the player plays, whatever the dealer holds.
    bonus = _paid("ante_bonus", ante, tables.ante_bonus, player,
                  f"{tables.ante_bonus.section or '649a.12(b)'} ante bonus, paid whenever the player plays",
                  tables.progressive_meter_cents)
    if bonus is not None:
        out.append(bonus)
    return out


def _side_wagers(wagers: Wagers, decision: Decision | None, player: Any, six: Any,
                 tables: Tables) -> list[WagerResult]:
    """Pair Plus (649a.12(d); lost with a fold), Six Card Bonus (649a.12(f), 649b.5(b))
    and the progressive (649a.12(e)), which stand after a fold (649a.11(b)(3)).
    ``six``: the best five of the seat's and the dealer's six cards (None: no Six Card wager)."""
    meter = tables.progressive_meter_cents
    out: list[WagerResult] = []
    if wagers.pair_plus and (decision is Decision.PLAY or not wagers.ante):
        # 649a.12(d): Pair Plus is paid on the player's hand whatever the dealer holds.
        pp = wagers.pair_plus
        won = _paid("pair_plus", pp, tables.pair_plus, player, "649a.12(d) Pair Plus on the player's hand", meter)
        out.append(won or WagerResult("pair_plus", pp, Outcome.LOSE, -pp, "649a.12(d) Pair Plus: below a pair"))
    if wagers.six_card:
        # 649a.12(f), 649b.5(b); a fold does not forfeit it (649a.11(b)(3)).
        sc = wagers.six_card
        won = _paid("six_card", sc, tables.six_card_bonus, six,
                    "649a.12(f) Six Card Bonus, best five of six; stands after a fold (649a.11(b)(3))", meter)
        out.append(won or WagerResult("six_card", sc, Outcome.LOSE, -sc, "649a.12(f) Six Card Bonus: below three of a kind"))
    if wagers.progressive:
        # 649a.12(e); stands after a fold (649a.11(b)(3)).
        pg = wagers.progressive
        won = _paid("progressive", pg, tables.progressive, player,
                    "649a.12(e) progressive on the player's hand; stands after a fold (649a.11(b)(3))", meter)
        out.append(won or WagerResult("progressive", pg, Outcome.LOSE, -pg, "649a.12(e) progressive: no paying line"))
    return out



# --------------------------------------------------------------------------
# A whole round, as read by ``tablectl settle ROUND.json`` (docs/settlement.md).


@dataclass(frozen=True)
class SeatRound:
    """One seat's input: ``seat`` number, ``wagers``, ``decision`` (``None`` for
    a seat with no ante), ``cards``."""

    seat: int
    wagers: Wagers
    decision: Decision | None
    cards: tuple[Card, Card, Card]


_ROUND_KEYS = ("profile", "paytables", "progressive_meter_cents", "dealer", "seats",
               "player_dealer_seat", "bank_cents", "round_id", "comment")
_SEAT_KEYS = ("seat", "wagers", "decision", "cards")
_WAGER_KEYS = kinds.keys()
_SLOTS = all_slots()


def _seat_number(value: Any, what: str) -> int:
    """A seat number in :data:`SEAT_NUMBERS`: an integer, never a bool or ``8.0``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettlementError(f"{what} must be a whole seat number "
                              f"{SEAT_NUMBERS.start}-{SEAT_NUMBERS.stop - 1}, got {show(value)}")
    if value not in SEAT_NUMBERS:
        raise SettlementError(f"{what} must be {SEAT_NUMBERS.start}-{SEAT_NUMBERS.stop - 1} "
                              f"(a table has at most {SEAT_NUMBERS.stop - 1} places), got {show(value)}")
    return value


def _paytable_ref(slot: str, value: Any, base_dir: str | Path | None) -> str:
    """A paytable named in a round file: a shipped name, or a regular file of at most
    :data:`MAX_PAYTABLE_FILE_BYTES` (never a device, a FIFO or a folder, which a
    hostile round file could name to make the reader hang)."""
    if not isinstance(value, str) or not value.strip():
        raise SettlementError(f"paytables.{slot} must be a paytable name or a .toml file, got {show(value)}")
    if value.endswith(".toml") or "/" in value or "\\" in value:
        if not value.endswith(".toml"):  # a typo, or a file that is no paytable: nothing is read
            raise SettlementError(f"paytables.{slot}: {show(value)} is not a paytable file name: {TOML_RULE}")
        path = Path(value)
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        try:
            st = path.stat()
        except (OSError, ValueError) as e:
            raise SettlementError(f"paytables.{slot}: {show(value)}: cannot read: "
                                  f"{getattr(e, 'strerror', None) or e} (a paytable file is a readable regular "
                                  "file, relative to the round file's folder unless absolute)") from None
        if not stat.S_ISREG(st.st_mode):
            raise SettlementError(f"paytables.{slot}: {show(value)} is not a regular file (a paytable file is a "
                                  "regular file: never a device, a FIFO or a folder)")
        if st.st_size > MAX_PAYTABLE_FILE_BYTES:
            raise SettlementError(f"paytables.{slot}: {show(value)} is {st.st_size} bytes, "
                                  f"more than a paytable's {MAX_PAYTABLE_FILE_BYTES}")
    return value


def _reject_unknown(found: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    extra = [k for k in found if k not in allowed]
    if extra:
        raise SettlementError(f"{where}unknown key{'s' if len(extra) > 1 else ''} "
                              f"{', '.join(show(k) for k in sorted(extra, key=str)[:5])}; "
                              f"allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Round:
    """One round's input: the dealer's cards, the seats, the paytables, the profile.

    ``player_dealer_seat`` and ``bank_cents`` are given only under a profile with
    a player-dealer bank (California, :mod:`table.rules.bank`).
    """

    dealer: tuple[Card, Card, Card]
    seats: tuple[SeatRound, ...]
    tables: Tables
    profile: RulesProfile
    player_dealer_seat: int | None = None
    bank_cents: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: str | Path | None = None,
                  profile: str | RulesProfile | None = None) -> "Round":
        """Build from the JSON form documented in docs/settlement.md.

        ``profile`` overrides the file's ``"profile"``. Raises
        :class:`SettlementError` (or :class:`PaytableError` for a paytable) on
        anything malformed, with a one-line message naming the key: an unknown
        key, a seat number outside 1-8 (or not an integer), a wager outside
        0..:data:`MAX_WAGER_CENTS` cents, a decision for a seat with no ante, a
        Six Card Bonus or progressive wager with no ante, player-dealer keys
        under a house-banked profile, a card appearing twice in the round.
        """
        if not isinstance(data, Mapping):
            raise SettlementError("a round must be a JSON object")
        _reject_unknown(data, _ROUND_KEYS, "round: ")
        for key in ("round_id", "comment"):
            if key in data and not isinstance(data[key], str):
                raise SettlementError(f"{key} must be a string, got {show(data[key])}")
        name = profile if profile is not None else data.get("profile", "pennsylvania")
        if not isinstance(name, (str, RulesProfile)):
            raise SettlementError(f"profile must be a profile name, got {show(name)}")
        try:
            prof = get_profile(name)
        except ValueError as e:
            raise SettlementError(str(e)) from None
        pts = data.get("paytables")
        if not isinstance(pts, Mapping) or "ante_bonus" not in pts:
            raise SettlementError("'paytables' must be an object naming at least 'ante_bonus'")
        _reject_unknown(pts, _SLOTS, "paytables: ")
        refs = {k: _paytable_ref(k, v, base_dir) for k, v in pts.items() if v is not None or k == "ante_bonus"}
        loaded: dict[str, Paytable | None] = {}
        for slot, ref in refs.items():  # each paytable's own problem names its key
            try:
                loaded[slot] = load_paytable(ref, base_dir=base_dir)
            except PaytableError as e:  # still a PaytableError (its path and line kept), now naming the key
                named = PaytableError(f"paytables.{slot}: {e}")
                named.path, named.line = e.path, e.line
                raise named from None
        meter = data.get("progressive_meter_cents")
        if meter is not None:
            _cents("progressive_meter_cents", meter, MAX_AMOUNT_CENTS)
        tables = Tables.from_slots(loaded, meter)
        dealer = tuple(_cards(_card_list(data.get("dealer"), "dealer"), "dealer"))
        seats_raw = data.get("seats")
        if not isinstance(seats_raw, list) or not seats_raw:
            raise SettlementError("'seats' must be a non-empty list")
        if len(seats_raw) > len(SEAT_NUMBERS):
            raise SettlementError(f"'seats' lists {len(seats_raw)} seats; a table has at most {len(SEAT_NUMBERS)}")
        seats = [_seat_round(i, s) for i, s in enumerate(seats_raw)]
        nums = [s.seat for s in seats]
        if len(set(nums)) != len(nums):
            raise SettlementError(f"seat numbers repeat: {nums}")
        seen: dict[Card, str] = {}
        for who, cards in [("dealer", dealer)] + [(f"seat {s.seat}", s.cards) for s in seats]:
            for c in cards:
                if c in seen:
                    raise SettlementError(f"card {c} dealt twice ({seen[c]} and {who})")
                seen[c] = who
        pd = data.get("player_dealer_seat")
        bank = data.get("bank_cents")
        if not prof.player_dealer_bank:
            given = [k for k in ("player_dealer_seat", "bank_cents") if data.get(k) is not None]
            if given:
                raise SettlementError(
                    f"{' and '.join(given)}: profile {prof.name} is banked by the house; a player-dealer "
                    "banks only under the california profiles (docs/rules-profiles.md)")
        if pd is not None:
            _seat_number(pd, "player_dealer_seat")
            if pd in nums:
                raise SettlementError(f"player_dealer_seat {pd} is also listed in 'seats': the player-dealer "
                                      "banks the round and does not play against the bank")
        if bank is not None:
            _cents("bank_cents", bank, MAX_AMOUNT_CENTS)
        if prof.max_places is not None:
            places = len(seats) + (1 if pd is not None else 0)
            if places > prof.max_places:
                raise SettlementError(
                    f"{prof.name}: at most {prof.max_places} places including the player-dealer, got {places}"
                )
        return cls(dealer, tuple(seats), tables, prof, pd, bank)

    @classmethod
    def from_file(cls, path: str | Path, profile: str | RulesProfile | None = None) -> "Round":
        """Read a round JSON file (UTF-8, at most :data:`MAX_ROUND_FILE_BYTES`, nested
        at most :data:`MAX_JSON_DEPTH` deep, no key twice in one object); paytable
        paths in it are relative to its folder. Raises :class:`SettlementError`
        with a one-line message naming the file."""
        p = Path(path)
        try:
            # O_NONBLOCK: a FIFO named as the round file must not hang the reader.
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError) as e:
            raise SettlementError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SettlementError(f"{p}: not a regular file")
            try:
                raw = f.read(MAX_ROUND_FILE_BYTES + 1)
            except OSError as e:
                raise SettlementError(f"{p}: cannot read: {e.strerror or e}") from None
        if len(raw) > MAX_ROUND_FILE_BYTES:
            raise SettlementError(f"{p}: larger than {MAX_ROUND_FILE_BYTES} bytes; a round file is a few kB")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SettlementError(f"{p}: not UTF-8 text (byte {e.start})") from None
        data = parse_round_json(text, str(p))
        try:
            return cls.from_dict(data, base_dir=p.parent, profile=profile)
        except SettlementError as e:
            raise SettlementError(f"{p}: {e}") from None


def _settled_seat(s: SeatRound, rnd: "Round") -> SeatSettlement:
    """One seat of a round, its errors naming the seat (``seats[seat N]``)."""
    try:
        return settle_seat(s.wagers, s.decision, s.cards, rnd.dealer, rnd.tables, rnd.profile)
    except SettlementError as e:
        raise SettlementError(f"seat {s.seat}: {e}") from None


def parse_round_json(text: str, source: str = "<round>") -> Any:
    """Parse round JSON strictly: a key twice in one object, nesting deeper than
    :data:`MAX_JSON_DEPTH`, a number with thousands of digits, ``NaN`` or
    ``Infinity`` are refused. Raises :class:`SettlementError` naming ``source``
    (and the line for a syntax error)."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise SettlementError(f"{source}: key {show(k)} appears twice in one object "
                                      "(which would win is not defined)")
            out[k] = v
        return out

    def constant(name: str) -> Any:
        raise SettlementError(f"{source}: {name} is not a number JSON allows")

    depth = 0
    in_string = escape = False
    for ch in text:  # without recursion: the parser itself would overflow the stack
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise SettlementError(f"{source}: JSON nested deeper than {MAX_JSON_DEPTH} levels; "
                                      "a round file needs 4")
        elif ch in "]}":
            depth -= 1
    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise SettlementError(f"{source}:{e.lineno}: not valid JSON: {e.msg}") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of thousands of digits
        raise SettlementError(f"{source}: not a round: {str(e).split(';')[0]}") from None


def _seat_round(i: int, s: Any) -> SeatRound:
    """``seats[i]`` of a round file."""
    if not isinstance(s, Mapping):
        raise SettlementError(f"seats[{i}] must be an object")
    _reject_unknown(s, _SEAT_KEYS, f"seats[{i}]: ")
    num = _seat_number(s.get("seat", i + 1), f"seats[{i}].seat")
    w = s.get("wagers")
    if not isinstance(w, Mapping):
        raise SettlementError(f"seat {num}: 'wagers' must be an object of cents")
    _reject_unknown(w, _WAGER_KEYS, f"seat {num}: wagers: ")
    try:
        wagers = Wagers(**{k: w.get(k, 0) for k in _WAGER_KEYS})
    except SettlementError as e:
        raise SettlementError(f"seat {num}: {e}") from None
    dec = s.get("decision")
    if wagers.ante == 0:
        if dec is not None:
            raise SettlementError(
                f"seat {num}: 'decision' {show(dec)} given with no ante: a Pair Plus-only seat has no decision "
                "to make (649a.7); leave 'decision' out, or give the ante")
        decision = None
    else:
        if dec is None:
            raise SettlementError(f"seat {num}: 'decision' (play or fold) is required with an ante")
        try:
            decision = Decision.parse(dec)
        except SettlementError as e:
            raise SettlementError(f"seat {num}: {e}") from None
    cards = tuple(_cards(_card_list(s.get("cards"), f"seat {num}"), f"seat {num}"))
    return SeatRound(num, wagers, decision, cards)


def _card_list(value: Any, who: str) -> list[str]:
    if isinstance(value, str):
        return value.replace(",", " ").split()
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return list(value)
    raise SettlementError(f"{who}: cards must be a list like [\"As\", \"Kd\", \"Qh\"]")


def settle_round(rnd: Round) -> dict[str, Any]:
    """Settle every seat of ``rnd`` and return the JSON-ready result.

    Shape: ``{"profile", "paytables", "dealer": {hand, "qualifies"},
    "seats": [{"seat", ...SeatSettlement.to_dict()}], "total_net"}`` and, under a
    player-dealer profile, ``"bank"`` with the California settlement (see
    :func:`table.rules.bank.settle_bank`). Amounts are int cents.
    """
    settled = [
        (s, _settled_seat(s, rnd)) for s in rnd.seats
    ]
    dealer_v = evaluate(rnd.dealer, rnd.profile)
    t = rnd.tables
    out: dict[str, Any] = {
        "profile": rnd.profile.name,
        "paytables": {
            k: pt.name for k in all_slots() if (pt := t.slot(k)) is not None
        },
        "dealer": {**hand_to_dict(dealer_v), "qualifies": dealer_qualifies(dealer_v)},
        "seats": [{"seat": s.seat, **st.to_dict()} for s, st in settled],
        "total_net": sum(st.net for _, st in settled),
    }
    if t.progressive_meter_cents is not None:
        out["progressive_meter_cents"] = t.progressive_meter_cents
    if rnd.profile.player_dealer_bank:
        if rnd.player_dealer_seat is None or rnd.bank_cents is None:
            missing = " and ".join(k for k, v in (("player_dealer_seat", rnd.player_dealer_seat),
                                                  ("bank_cents", rnd.bank_cents)) if v is None)
            raise SettlementError(
                f"{missing}: missing, and profile {rnd.profile.name} needs {'them' if ' and ' in missing else 'it'}: a player-dealer banks the game "
                "(California standards of play, reference 000); give 'player_dealer_seat' (who banks) and "
                "'bank_cents' (the bank)"
            )
        bank = settle_bank(
            rnd.player_dealer_seat, rnd.bank_cents, [(s.seat, st) for s, st in settled]
        )
        out["bank"] = bank.to_dict()
        for entry in out["seats"]:
            b = bank.seat(entry["seat"])
            entry["net_after_bank"] = b.net
        out["total_net"] = sum(b.net for b in bank.seats)
    return out
