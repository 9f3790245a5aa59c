"""A draw-index gap on its own (issue 24, point 8: not tried in the attack run).

The shoe numbers its draws 0, 1, 2 ... (SPEC §4.3). Here its counter skips one
index while no card is missing: the cards are all there, in order, but index 2
is never reported. A gap means the table cannot prove which card went where,
so the round is held for a supervisor, and no card is shifted into the skipped
place: the card reported after the gap is recorded and dealt to nobody (the
dealer's first card is not handed to the next seat in the deal order).
"""

from __future__ import annotations

import pytest

from table.custody import Rule
from table.errors import RoundHeld

from test_controller import table
from test_integrity import AtDraw, _dealt_to


def test_a_skipped_draw_index_alone_holds_the_round_and_shifts_no_card(tmp_path):
    def skip_index(sim):
        with sim.shoe.lock:  # the shoe's counter jumps; no card leaves it unreported
            sim.shoe.draws += 1
    with table(tmp_path, dealer=lambda s: AtDraw(s, 3, skip_index)) as (ctl, sim, console, journal):
        ctl.prepare()
        cards_before = len(sim.shoe.cards)
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.CARD_UNACCOUNTED
        assert ctl.held is not None
        dealt = _dealt_to(journal)
        # Draws 0 and 1 went to seats 1 and 2; index 2 was skipped; the card reported as 3
        # (the physical third card) is recorded and dealt to nobody, nothing after it.
        assert dealt[:2] == [(0, 1), (1, 2)] and 2 not in [d for d, _ in dealt]
        assert [(d, t) for d, t in dealt if d >= 3] == [(3, None)]
        assert len(sim.shoe.cards) == cards_before - 3  # three cards left the shoe, three recorded
        assert len(dealt) == 3
