"""State diagrams of the table's machines, exported as mermaid (no graphviz needed).

The machines' own definitions (``DECK_TRANSITIONS``, ``ROUND_TRANSITIONS``)
are drawn by ``transitions``' mermaid engine into ``docs/``; a test fails
when the committed files are stale. Regenerate with
``python -m table.diagrams --write``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from transitions.extensions import GraphMachine

from .custody import DECK_STATES, DECK_TRANSITIONS
from .round import ROUND_STATES, ROUND_TRANSITIONS

DOCS = Path(__file__).resolve().parent.parent / "docs"

MACHINES = {
    "deck-custody.md": ("Deck custody (one machine per deck)", DECK_STATES, DECK_TRANSITIONS, "off_table",
                        "Where a deck is. Table-wide rules across the two decks (alternation, one deck in the "
                        "discard rack, the other deck verified before a round) are in `table/custody.py`. "
                        "`recount`: a deck step out of order between rounds (a dealer's slip: a deck put back "
                        "into the shuffler, the shoe loaded again) is journaled as the rule broken and an "
                        "incident, and every deck not in play goes off the table, to be found from the "
                        "devices' status and counted again in the shuffler before it is dealt; the table "
                        "does not stop (`table/procedure/decks.py`)."),
    "round-procedure.md": ("Round procedure", ROUND_STATES, ROUND_TRANSITIONS, "open_for_bets",
                           "One round. Bets are placed while it is open for bets and frozen at `close_bets`; only "
                           "the seats with a wager are dealt ([bets.md](bets.md)). The dealer's hand is sealed "
                           "until `decisions_done` (58 Pa. Code 816a.1); `void` is a supervisor's, with a "
                           "reason, before settle. Between `dealer_reveal` and `settle` the shuffler opens the "
                           "commitment it made when it verified the round's deck and the cards read must be the "
                           "first cards of that order by draw index; if not (a substituted or stacked deck, cards "
                           "added on top, a card slipped back) the round is held as `deal_not_the_shuffle` and "
                           "never settled (protocols/SPEC.md §4.2.1, `table/procedure/commitment.py`)."),
}


#: hand-written sections after a machine's diagram (the rules around the machine, in prose)
AFTER = {
    "deck-custody.md": """
## The shoe's count is a custody fact

The shoe's own count of the cards it holds (`StatusReply` *cards held*, SPEC §4.3) is
compared with what custody says it must hold at three points. Only a verified deck of 52
is ever loaded, and every card read since the load is in the journal, so the count must
be exactly 52 less the reads (58 Pa. Code 649a.3: one 52-card deck in play; COMAR
36.05.03.27 C: a deck is dealt only as the shuffler counted it).

| when | the shoe must hold | more (cards that did not come from the shuffler's count) | fewer | code |
| --- | --- | --- | --- | --- |
| at the load (`ShoeLoaded`) | 52, no more (less the cards read since, if any) | incident `the shoe holds more cards than it should at the load`, violation `foreign_card`; no round yet, so the table is held for a supervisor (below) | found at the end of the deal, as a card out | `DeckProcedure._check_load` |
| before the first card | 52 less the cards read since the load (a card drawn between rounds counts) | incident `... before the first card`, violation `foreign_card`: the round is held, not one card dealt | found at the end of the deal | `RoundPlay._deal` |
| at the deal's end, and again once the decisions are in | exactly 52 less the reads | incident `... at the end of the deal`, violation `foreign_card`: the round is held before the reveal (cards put on top, a card put back) | a card beyond the deal (misdeal, `wrong_card_count`) or, for a shoe that does not number its draws, `card_unaccounted`, as before | `RoundPlay._deal_complete` |

A held round is never settled: a `foreign_card` hold is a broken rule, which a supervisor
voids (every wager returned) and cannot release.

**An impossible count is not a number.** A shoe holds 0 to 52 cards (docs/drivers.md,
`status()`): a negative count, or one that is not a whole number (a driver's), is a device
fault (incident `impossible count from the shoe`, the round held for the device; released,
the count is asked again before anything is dealt); over 52 is more cards than any one
deck, held as foreign cards as above (`DeviceIntake.counted`, `check_not_more` in
`table/procedure/intake.py`).

## A deck reaches the shoe only from the shuffler's verified delivery

- **A second deck of one colour** holds the table for a supervisor: a deck counted in the
  shuffler (`DeckInserted`, `DeckVerified`) while the shoe's own status shows cards of its
  colour (the deck just played left in it, a stub, a deck loaded behind the table's back)
  is the violation `second_deck_of_one_colour` (58 Pa. Code 649a.3(b): the table's two
  decks, of different back colours; COMAR 36.05.03.27 C). The table journals it, sends
  every deck not in play off the table (`recount`), and deals nothing until a supervisor
  acknowledges the incident (`acknowledge_incident`, journaled with the rule), having taken
  the cards that are not the table's off it. Then each deck is found from the devices'
  status and counted again; cards still there are found again and held again. A shoe
  holding more than its deck at the load is held the same way.
- **The shoe's own word is adopted only at a start without the journal** (none kept, or an
  empty one), before the table is first ready: a restart with the journal gets the shoe's
  `ShoeLoaded` resent (SPEC §6.3), and a shoe that shows the colour asked for with no load
  seen is a second deck of that colour, held as above. A load adopted at such a start is
  counted again: the deck goes off the table (`recount`) and round the shuffler before it
  is dealt.
- After a recount the table asks first for the deck whose colour the shoe does not show;
  the deck in the shoe is cleared into the discard rack when the other is loaded, and
  counted after it.
""",
}


def render(title: str, states: list, transitions: list, initial: str) -> str:
    """The mermaid ``stateDiagram-v2`` text of one machine definition."""

    class _Model:
        pass

    model = _Model()
    GraphMachine(model=model, states=states, transitions=transitions, initial=initial, auto_transitions=False,
                 graph_engine="mermaid", title=title, show_conditions=True)
    text = model.get_graph().draw(None)
    # transitions writes the title bare inside the front matter; mermaid wants `title:`.
    return text.replace(f"---\n{title}\n---", f"---\ntitle: {title}\n---", 1)


def documents() -> dict[str, str]:
    """File name in ``docs/`` → its full markdown text."""
    out = {}
    for name, (title, states, transitions, initial, note) in MACHINES.items():
        body = render(title, states, transitions, initial).rstrip("\n")
        out[name] = (f"# {title}\n\n{note}\n\nGenerated by `python -m table.diagrams --write` from the "
                     f"machine's definition; do not edit by hand.\n\n```mermaid\n{body}\n```\n"
                     + AFTER.get(name, ""))
    return out


def main(argv: list[str]) -> int:
    docs = documents()
    if argv == ["--write"]:
        DOCS.mkdir(exist_ok=True)
        for name, text in docs.items():
            (DOCS / name).write_text(text)
        return 0
    stale = [n for n, t in docs.items() if not (DOCS / n).exists() or (DOCS / n).read_text() != t]
    print("stale: " + ", ".join(stale) if stale else "diagrams up to date")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
