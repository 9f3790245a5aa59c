"""The dealer at a real table: prompts on the terminal (or the log), device events confirm.

For each physical action the controller prints a prompt; the device's own
event (deck inserted, card drawn...) confirms it, so no key press is needed.
What no device sees (bets closed, the collect, each player's decision) the
dealer confirms on the console (docs/console.md). Nothing here reads stdin,
so the same code runs under systemd.
"""

from __future__ import annotations

import sys
from typing import IO

from protocols.cards import BackColour


class ConsoleDealer:
    """Prompts a human dealer on ``out`` (default stderr); the devices' events confirm."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stderr

    def _say(self, text: str) -> None:
        print(f">>> {text}", file=self.out, flush=True)

    def insert_deck(self, colour: BackColour) -> None:
        self._say(f"Put the {colour} deck into the shuffler.")

    def take_from_shuffler(self) -> None:
        self._say("Take the shuffled deck out of the shuffler.")

    def load_shoe(self, colour: BackColour) -> None:
        self._say(f"Load the {colour} deck into the shoe.")

    def draw_card(self) -> None:
        self._say("Draw the next card.")

    def collect(self) -> None:
        self._say("Collect the round's cards and the shoe's stub into the discard rack.")
