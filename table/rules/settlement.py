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
  forfeit it (649a.11(b)(3), as the project brief reads that provision).

Every amount is an ``int`` number of cents; nothing here uses floats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from protocols.cards import Card

from .bank import settle_bank
from .hands import dealer_qualifies, evaluate, six_card_hand
from .paytables import Paytable, PaytableError, load_paytable
from .profiles import PENNSYLVANIA, RulesProfile, get_profile
from .wagers import (Decision, Outcome, SeatSettlement, SettlementError, WagerResult, Wagers, _cents,  # noqa: F401
                     hand_to_dict)


@dataclass(frozen=True)
class Tables:
    """The paytables a table has filed, bundled for settlement.

    ``ante_bonus`` is required; ``pair_plus``, ``six_card_bonus`` and
    ``progressive`` are needed only when a seat places that wager.
    ``progressive_meter_cents`` is the meter amount at the round (needed when a
    meter line pays). Raises :class:`SettlementError` when a paytable's kind
    does not fit its slot.
    """

    ante_bonus: Paytable
    pair_plus: Paytable | None = None
    six_card_bonus: Paytable | None = None
    progressive: Paytable | None = None
    progressive_meter_cents: int | None = None

    def __post_init__(self) -> None:
        for slot in ("ante_bonus", "pair_plus", "six_card_bonus", "progressive"):
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
            _cents("progressive_meter_cents", self.progressive_meter_cents)

    @classmethod
    def load(
        cls,
        ante_bonus: str | Paytable,
        pair_plus: str | Paytable | None = None,
        six_card_bonus: str | Paytable | None = None,
        progressive: str | Paytable | None = None,
        progressive_meter_cents: int | None = None,
        base_dir: str | Path | None = None,
    ) -> "Tables":
        """Build from shipped names or file paths (see :func:`load_paytable`);
        raises :class:`~table.rules.paytables.PaytableError` for a bad table."""

        def ld(x):
            return None if x is None else load_paytable(x, base_dir=base_dir)

        return cls(ld(ante_bonus), ld(pair_plus), ld(six_card_bonus), ld(progressive), progressive_meter_cents)


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
            f"{wager}: line {line!r} of {table.name} pays {p} but no progressive meter amount was given"
        ) from None
    return WagerResult(wager, stake, Outcome.WIN, amount, rule, line, str(p))


def settle_seat(
    wagers: Wagers,
    decision: Decision | str,
    seat_cards: Sequence[Card | str],
    dealer_cards: Sequence[Card | str],
    tables: Tables,
    profile: RulesProfile = PENNSYLVANIA,
) -> SeatSettlement:
    """Settle every wager of one seat against the dealer's hand.

    ``wagers``: :class:`Wagers` in cents; ``decision``: :class:`Decision` (or
    ``"play"``/``"fold"``); ``seat_cards``/``dealer_cards``: three cards each;
    ``tables``: the filed paytables (:class:`Tables`); ``profile``: the rules
    profile ranking the hands. Returns a :class:`SeatSettlement` whose amounts
    are int cents.

    Raises :class:`SettlementError` for a card held twice, a play wager with no
    ante, or a wager whose paytable is not in ``tables``.
    """
    decision = Decision.parse(decision)
    seat = _cards(seat_cards, "seat")
    dealer = _cards(dealer_cards, "dealer")
    if set(seat) & set(dealer):
        raise SettlementError(f"card dealt twice: {', '.join(sorted(str(c) for c in set(seat) & set(dealer)))}")
    if not isinstance(wagers, Wagers):
        raise SettlementError(f"wagers must be Wagers, got {wagers!r}")
    for slot, amount in (("pair_plus", wagers.pair_plus), ("six_card_bonus", wagers.six_card), ("progressive", wagers.progressive)):
        if amount and getattr(tables, slot) is None:
            raise SettlementError(f"a {slot} wager was placed but no {slot} paytable was selected")
    if wagers.ante == 0 and decision is Decision.PLAY:
        raise SettlementError("a play wager needs an ante (the play wager equals the ante, 649a.11)")

    player = evaluate(seat, profile)
    dealer_v = evaluate(dealer, profile)
    qualifies = dealer_qualifies(dealer_v)
    meter = tables.progressive_meter_cents
    out: list[WagerResult] = []
    ante = wagers.ante
    plays = decision is Decision.PLAY

    if ante and not plays:
        # 649a.11(b)(1): a fold forfeits the ante, and with it any Pair Plus wager.
        out.append(WagerResult("ante", ante, Outcome.LOSE, -ante, "649a.11(b)(1) fold forfeits the ante"))
        if wagers.pair_plus:
            out.append(
                WagerResult("pair_plus", wagers.pair_plus, Outcome.LOSE, -wagers.pair_plus,
                            "649a.11(b)(1) fold forfeits the Pair Plus wager")
            )
    elif ante:
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
                      f"{tables.ante_bonus.section or '649a.12(b)'} ante bonus, paid whenever the player plays", meter)
        if bonus is not None:
            out.append(bonus)

    if wagers.pair_plus and (plays or not ante):
        # 649a.12(d): Pair Plus is paid on the player's hand whatever the dealer holds.
        pp = wagers.pair_plus
        won = _paid("pair_plus", pp, tables.pair_plus, player, "649a.12(d) Pair Plus on the player's hand", meter)
        out.append(won or WagerResult("pair_plus", pp, Outcome.LOSE, -pp, "649a.12(d) Pair Plus: below a pair"))

    six = None
    if wagers.six_card:
        # 649a.12(f), 649b.5(b); a fold does not forfeit it (649a.11(b)(3)).
        six = six_card_hand(seat + dealer)
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

    return SeatSettlement(decision, player, dealer_v, qualifies, tuple(out), six)


# --------------------------------------------------------------------------
# A whole round, as read by ``tablectl settle ROUND.json`` (docs/settlement.md).


@dataclass(frozen=True)
class SeatRound:
    """One seat's input: ``seat`` number, ``wagers``, ``decision``, ``cards``."""

    seat: int
    wagers: Wagers
    decision: Decision
    cards: tuple[Card, Card, Card]


@dataclass(frozen=True)
class Round:
    """One round's input: the dealer's cards, the seats, the paytables, the profile.

    ``player_dealer_seat`` and ``bank_cents`` are used only under a profile with
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
        anything malformed, including a card appearing twice in the round.
        """
        if not isinstance(data, Mapping):
            raise SettlementError("a round must be a JSON object")
        known = {"profile", "paytables", "progressive_meter_cents", "dealer", "seats",
                 "player_dealer_seat", "bank_cents", "round_id", "comment"}
        extra = set(data) - known
        if extra:
            raise SettlementError(f"unknown round keys: {', '.join(sorted(extra))}")
        try:
            prof = get_profile(profile or data.get("profile", "pennsylvania"))
        except ValueError as e:
            raise SettlementError(str(e)) from None
        pts = data.get("paytables")
        if not isinstance(pts, Mapping) or "ante_bonus" not in pts:
            raise SettlementError("'paytables' must name at least 'ante_bonus'")
        bad = set(pts) - {"ante_bonus", "pair_plus", "six_card_bonus", "progressive"}
        if bad:
            raise SettlementError(f"unknown paytable slots: {', '.join(sorted(bad))}")
        tables = Tables.load(
            pts["ante_bonus"], pts.get("pair_plus"), pts.get("six_card_bonus"), pts.get("progressive"),
            data.get("progressive_meter_cents"), base_dir=base_dir,
        )
        dealer = tuple(_cards(_card_list(data.get("dealer"), "dealer"), "dealer"))
        seats_raw = data.get("seats")
        if not isinstance(seats_raw, list) or not seats_raw:
            raise SettlementError("'seats' must be a non-empty list")
        seats = []
        for i, s in enumerate(seats_raw):
            if not isinstance(s, Mapping):
                raise SettlementError(f"seats[{i}] must be an object")
            extra = set(s) - {"seat", "wagers", "decision", "cards"}
            if extra:
                raise SettlementError(f"seats[{i}]: unknown keys {', '.join(sorted(extra))}")
            num = s.get("seat", i + 1)
            if isinstance(num, bool) or not isinstance(num, int):
                raise SettlementError(f"seats[{i}]: 'seat' must be an integer")
            w = s.get("wagers")
            if not isinstance(w, Mapping):
                raise SettlementError(f"seat {num}: 'wagers' must be an object of cents")
            wbad = set(w) - {"ante", "pair_plus", "six_card", "progressive"}
            if wbad:
                raise SettlementError(f"seat {num}: unknown wagers {', '.join(sorted(wbad))}")
            try:
                wagers = Wagers(**{k: w.get(k, 0) for k in ("ante", "pair_plus", "six_card", "progressive")})
            except SettlementError as e:
                raise SettlementError(f"seat {num}: {e}") from None
            dec = s.get("decision", "fold" if wagers.ante == 0 else None)
            if dec is None:
                raise SettlementError(f"seat {num}: 'decision' (play or fold) is required with an ante")
            cards = tuple(_cards(_card_list(s.get("cards"), f"seat {num}"), f"seat {num}"))
            seats.append(SeatRound(num, wagers, Decision.parse(dec), cards))
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
        if bank is not None:
            _cents("bank_cents", bank)
        if prof.max_places is not None:
            places = len(seats) + (1 if pd is not None and pd not in nums else 0)
            if places > prof.max_places:
                raise SettlementError(
                    f"{prof.name}: at most {prof.max_places} places including the player-dealer, got {places}"
                )
        return cls(dealer, tuple(seats), tables, prof, pd, bank)

    @classmethod
    def from_file(cls, path: str | Path, profile: str | RulesProfile | None = None) -> "Round":
        """Read a round JSON file; paytable paths in it are relative to its folder."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise SettlementError(f"{p}: cannot read: {e.strerror or e}") from None
        except json.JSONDecodeError as e:
            raise SettlementError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from None
        return cls.from_dict(data, base_dir=p.parent, profile=profile)


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
        (s, settle_seat(s.wagers, s.decision, s.cards, rnd.dealer, rnd.tables, rnd.profile)) for s in rnd.seats
    ]
    dealer_v = evaluate(rnd.dealer, rnd.profile)
    t = rnd.tables
    out: dict[str, Any] = {
        "profile": rnd.profile.name,
        "paytables": {
            k: getattr(t, k).name for k in ("ante_bonus", "pair_plus", "six_card_bonus", "progressive")
            if getattr(t, k) is not None
        },
        "dealer": {**hand_to_dict(dealer_v), "qualifies": dealer_qualifies(dealer_v)},
        "seats": [{"seat": s.seat, **st.to_dict()} for s, st in settled],
        "total_net": sum(st.net for _, st in settled),
    }
    if t.progressive_meter_cents is not None:
        out["progressive_meter_cents"] = t.progressive_meter_cents
    if rnd.profile.player_dealer_bank:
        if rnd.player_dealer_seat is None or rnd.bank_cents is None:
            raise SettlementError(
                f"profile {rnd.profile.name}: a player-dealer banks the game; give "
                "'player_dealer_seat' and 'bank_cents'"
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
