"""The terminal dealer console: the dealer's prompts, and the keys a dealer or supervisor types.

:class:`ConsoleDealer` is the dealer at a real table: it prompts on the
terminal (or the log), and the device events confirm.

For each physical action the controller prints a prompt; the device's own
event (deck inserted, card drawn...) confirms it, so no key press is needed.
What no device sees (bets closed, the collect, each player's decision) the
dealer confirms on the console (docs/console.md). :class:`ConsoleDealer` reads
nothing, so the same code runs under systemd; :class:`KeyConsole` reads the
lines a dealer or supervisor types at the terminal (:data:`KEYS_HELP`).
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
from typing import IO

from protocols.cards import BackColour
from table.console import Command, Console


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


KEYS_HELP = """console commands (type a line, then Enter):
  s                      status
  c                      close bets (dealer)
  k                      confirm the collect (dealer)
  p SEAT / f SEAT        seat SEAT plays / folds (dealer)
  v REASON...            void the round (supervisor)
  r DECK_ID              register a replacement deck (supervisor)
  m CARD                 enter an unreadable card, e.g. m Qs (supervisor)"""


def parse_key_line(line: str, supervisor: str) -> Command | None:
    """One terminal line to a command (see :data:`KEYS_HELP`); None for a blank or unknown line."""
    parts = shlex.split(line.strip())
    if not parts:
        return None
    key, rest = parts[0].lower(), parts[1:]
    if key == "s":
        return Command("status")
    if key == "c":
        return Command("close_bets")
    if key == "k":
        return Command("confirm_collect")
    if key in ("p", "f") and rest and rest[0].isdigit():
        return Command("decide", {"seat": int(rest[0]), "decision": "play" if key == "p" else "fold"})
    if key == "v" and rest:
        return Command("void", {"reason": " ".join(rest), "supervisor": supervisor})
    if key == "r" and rest:
        return Command("register_deck", {"deck_id": rest[0], "supervisor": supervisor})
    if key == "m" and rest:
        return Command("confirm_card", {"card": rest[0], "supervisor": supervisor})
    return None


class KeyConsole:
    """Reads console lines from a terminal in a thread and answers on ``out``."""

    def __init__(self, console: Console, supervisor: str, inp: IO[str], out: IO[str]) -> None:
        self.console, self.supervisor, self.inp, self.out = console, supervisor, inp, out
        console.attached = True
        print(KEYS_HELP, file=out, flush=True)
        self._thread = threading.Thread(target=self._run, name="console-keys", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for line in self.inp:
            cmd = parse_key_line(line, self.supervisor)
            if cmd is None:
                if line.strip():
                    print(KEYS_HELP, file=self.out, flush=True)
                continue
            cmd.reply = lambda result: print(f"<<< {json.dumps(result)}", file=self.out, flush=True)
            self.console.submit(cmd)
