"""The last deck's stub left in the shoe: a person at a real table collects the round's cards and
may leave the stub in the shoe, and a shoe takes a deck only when empty. The table waits for the
stub to come out (``waiting_for``: ``unload_shoe``, what every screen and the terminal read) before
it prompts the next deck's load: before, it prompted "put the blue deck in the shoe" and the shoe
refused the load ("the shoe still holds cards; unload it first")."""

from __future__ import annotations

import io

from protocols.cards import BackColour
from table.console import Console, Expectation
from table.interfaces.terminal import KeyConsole
from test_controller import kinds, table

RED, BLUE = BackColour.RED, BackColour.BLUE


class StubLeaver:
    """A person's hands on the simulated table: at the collect the round's cards go to the discard
    rack, the shoe's stub stays where it is; the stub comes out only when the table asks for it
    (the shoe emulator's physical side, as a person's hands)."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.collects = 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def collect(self) -> None:
        self.collects += 1
        d = self.sim.dealer
        d.discard_rack += d.on_layout
        d.on_layout = []


def test_the_table_asks_for_the_stub_out_of_the_shoe_before_the_next_deck_is_loaded(tmp_path):
    leaver: list[StubLeaver] = []

    def dealer(sim):
        leaver.append(StubLeaver(sim))
        return leaver[0]

    with table(tmp_path, dealer=dealer) as (ctl, sim, console, journal):
        seen: list[Expectation] = []
        terminal = io.StringIO()
        KeyConsole(console, "S-1", io.StringIO(""), terminal)

        def hands(exp: Expectation | None) -> None:
            if exp is None:
                return
            seen.append(exp)
            if exp.action == "unload_shoe":  # the dealer takes the stub out, as the screen says
                assert sim.shoe.holds_cards()
                sim.dealer.discard_rack += sim.shoe.unload()

        console.on_expectation(hands)
        ctl.prepare()
        first = ctl.play_round()
        assert sim.shoe.holds_cards()  # the person left the stub of the deck just dealt
        second = ctl.play_round()
        assert second.number == first.number + 1
        asked = [(e.action, e.colour) for e in seen]
        stub = asked.index(("unload_shoe", str(first.deck_colour)))
        load = asked.index(("load_shoe", str(second.deck_colour)))
        assert stub < load, asked
        words = seen[stub].what
        assert words == (f"the dealer to take the {first.deck_colour} deck's stub out of the shoe and put it in "
                         f"the discard rack, before the {second.deck_colour} deck is loaded"), words
        assert seen[stub].role == "device"
        # The terminal says it too, in the table's words.
        assert f"the table waits for {words}" in terminal.getvalue(), terminal.getvalue()
        # A step of the collect, not an incident: nothing stands for a supervisor.
        assert not kinds(journal, "incident")
        assert not [a for a in ctl.status()["alarms"] if a["kind"] == "incident"]
        assert {"action": "unload_shoe", "colour": str(first.deck_colour)} in [
            {k: b[k] for k in ("action", "colour")} for b in kinds(journal, "prompt")]
        assert not ctl.custody.violations

