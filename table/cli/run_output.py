"""What ``tablectl run`` prints: one round at a time, for people and for programs.

Kept apart from the run loop, so the loop only hands each round over as it
settles: :func:`round_lines` (text for a person at a terminal),
:func:`round_to_json` (the ``--json`` form, documented in README "Output"),
:func:`voided_line` (a round a supervisor voided) and :func:`summary_lines`.

The text form names every hand and every wager's outcome, labels money in
dollars (``+$10``, ``-$2.50``; the JSON keeps integer cents), and keeps every
line within :data:`WIDTH` columns, so a round of seven seats fits on an 80x24
screen: a header line and one line per seat, a seat with many side wagers
continuing on a second line indented under its cards.
"""

from __future__ import annotations

import textwrap
from typing import Any, Iterable, Mapping

from table.controller import RoundResult
from table.rules.hands import evaluate
from table.rules.profiles import PENNSYLVANIA, RulesProfile
from table.sealing import mask_cards

#: Columns a text line may take (an 80-column terminal, less one for the cursor).
WIDTH = 79

#: Wager names in the text form (the JSON keeps the settlement's own names): the ante
#: bonus shortened; every other wager, each kind of table.rules.kinds included, is its key
#: with spaces ("pair plus", "six card").
WAGER_LABELS = {"ante_bonus": "bonus"}


def money(cents: int, *, sign: bool = True) -> str:
    """Cents as dollars for people: ``+$10``, ``-$2.50``, ``$0``, ``+$1,250``
    (``sign``: show ``+`` on a gain)."""
    dollars, rest = divmod(abs(cents), 100)
    text = f"${dollars:,}" + (f".{rest:02d}" if rest else "")
    if cents < 0:
        return "-" + text
    return ("+" + text) if sign and cents > 0 else text


def wager_text(w: Mapping[str, Any]) -> str:
    """One wager's outcome: ``ante +$10``, ``play push``, ``bonus +$40``, ``pair plus -$5``
    (``w``: a ``WagerResult.to_dict()``)."""
    label = WAGER_LABELS.get(w["wager"], w["wager"].replace("_", " "))
    outcome = w["outcome"]
    if outcome in ("push", "returned"):
        return f"{label} {outcome}"
    return f"{label} {money(w['amount'])}"


def _hand_label(cards, profile: RulesProfile | None) -> str:
    try:
        return evaluate(list(cards), profile or PENNSYLVANIA).category.label
    except (ValueError, TypeError):  # not three distinct cards: say nothing rather than guess
        return "?"


def round_lines(r: RoundResult, profile: RulesProfile | None = None, width: int = WIDTH) -> list[str]:
    """The text of one settled round: a header (round number, deck, the dealer's hand
    and whether it qualifies) and a line per seat::

        round    2  deck B (blue)  dealer Qc 6d 2c  high card, qualifies
          s1 Td 5c 4c  high card:      fold, ante -$10                         net -$10
          s3 Qd 7d 7h  pair:           ante +$10, play +$10                    net +$20

    ``profile``: the rules profile that ranked the hands (default Pennsylvania's).
    Every line fits in ``width`` columns; a seat whose wagers do not fit on one line
    goes on over a second, indented under its cards."""
    dealer = " ".join(map(str, r.dealer_hand))
    dealer_label = _hand_label(r.dealer_hand, profile)
    q = "qualifies" if r.dealer_qualifies else "does not qualify"
    lines = [f"round {r.number:4d}  deck {r.deck_id} ({r.deck_colour})  dealer {dealer}  {dealer_label}, {q}"]
    for s in r.seats:
        lines += seat_lines(s.seat, s.cards, s.decision.value if s.decision is not None else None,
                            [w.to_dict() for w in s.settlement.results], s.net_cents, profile, width)
    return lines


def seat_lines(seat: int, cards, decision: str | None, wagers: Iterable[Mapping[str, Any]], net: int,
               profile: RulesProfile | None = None, width: int = WIDTH) -> list[str]:
    """One seat's line(s): ``  s3 Qd 7d 7h  pair:  ante +$10, play +$10   net +$20`` (the
    hand, then each wager's outcome); a fold says so before the wagers it lost.
    Wrapped to ``width`` columns."""
    head = f"  s{seat} {' '.join(map(str, cards))}  {_hand_label(cards, profile) + ':':<17}"
    items = [wager_text(w) for w in wagers] or ["no wager"]
    if decision == "fold":
        items.insert(0, "fold")
    tail = f"net {money(net)}"
    indent = " " * 5  # a continuation line starts under the cards, leaving it most of the width
    rows: list[str] = [head]
    for i, item in enumerate(items):  # whole wagers to a line, never one cut in two
        piece = item + ("," if i < len(items) - 1 else "")
        sep = "" if rows[-1] in (head, indent) else " "
        if len(rows[-1]) + len(sep) + len(piece) <= width:
            rows[-1] += sep + piece
        else:
            rows.append(indent + piece)
    if len(rows[-1]) + 2 + len(tail) <= width:
        rows[-1] = f"{rows[-1]:<{width - len(tail)}}{tail}"
    else:
        rows.append(f"{'':<{width - len(tail)}}{tail}")
    return rows


def voided_line(round_id: str, reason: str) -> str:
    """A round a supervisor voided before settlement (wagers returned), with the reason
    (card faces in it masked, as in the public event stream: 816a.1), wrapped to
    :data:`WIDTH` columns (a long reason goes on, indented, never cut)."""
    text = f"round {round_id}  VOIDED by a supervisor: {' '.join(mask_cards(reason).split())}; every wager returned"
    return textwrap.fill(text, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def summary_lines(rounds: int, cards_read: int, violations: int, net_by_seat: Mapping[str, int],
                  voided: int = 0) -> list[str]:
    """The closing lines: counts, then each seat's net and the house's (dollars)."""
    first = f"rounds {rounds}  cards read {cards_read}  custody violations {violations}"
    if voided:
        first += f"  voided {voided}"
    items = ["net by seat:"] + [f"s{s} {money(v)}" for s, v in net_by_seat.items()]
    items.append(f"house {money(-sum(net_by_seat.values()))}")
    rows = [items[0]]
    for item in items[1:]:  # whole items to a line
        if len(rows[-1]) + 2 + len(item) <= WIDTH:
            rows[-1] += "  " + item
        else:
            rows.append("  " + item)
    return [first] + rows


def round_to_json(r: RoundResult) -> dict[str, Any]:
    """The ``--json`` form of one round (documented in README, "Output"): cents as ints."""
    return {
        "number": r.number,
        "round_id": r.round_id,
        "deck_id": r.deck_id,
        "deck_colour": str(r.deck_colour),
        "dealer_hand": [str(c) for c in r.dealer_hand],
        "dealer_qualifies": r.dealer_qualifies,
        "seats": [
            {
                "seat": s.seat,
                "cards": [str(c) for c in s.cards],
                "decision": s.decision.value if s.decision is not None else None,
                "net": s.net_cents,
                "wagers": [w.to_dict() for w in s.settlement.results],
            }
            for s in r.seats
        ],
        "reads": [{"draw_index": c.draw_index, "card": str(c.card), "back_colour": str(c.back_colour)} for c in r.reads],
    }
