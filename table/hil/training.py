"""Training: a simulated table dealt at a person's pace (``tablectl run --simulate --pace person``).

The emulated devices deal nothing on their own. The controller runs as at a real
table (``auto_dealer`` off): it prompts each physical step and waits, as long as
a person takes, for the devices to report it; the trainee places the bets,
closes them, enters each seat's Play or Fold and confirms the collect, as a
dealer does. The trainee's hands are the ``dealer_hands`` command (a button on
the dealer's screen, ``d`` at the terminal): it does the one physical step the
table waits for (insert, take, load a deck; draw the next card) by sending its
line to the simulated table's control socket (:mod:`simulators.hands`), never
by reaching into the emulators; the table learns of it only from the devices'
events, as ever. The collect, which the trainee confirmed on the screen, is
done by the same hands at once.

The simulated players are the trainee's to enter (bets, then Play or Fold per
seat), as a dealer enters a real table's; the table waits as long as that takes.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from protocols.cards import BackColour

from table.console import Command, Console, Expectation
from table.errors import DeviceFault

#: the table's physical steps the trainee's hands can do, and their control line
STEP_LINES = {"insert_deck": "insert {colour}", "take_from_shuffler": "take", "load_shoe": "load {colour}",
              "draw_card": "draw"}
#: what the dealer's screen and the terminal call each step (the button's words)
STEP_WORDS = {"insert_deck": "put the deck into the shuffler", "take_from_shuffler": "take the deck out of the "
              "shuffler", "load_shoe": "load the deck into the shoe", "draw_card": "deal the next card"}


def send_line(address: tuple[str, int], line: str, timeout_s: float = 5.0) -> str:
    """One line to the simulated table's control socket; its answer after ``ok``.
    Raises :class:`DeviceFault` when refused (``error ...``) or unreachable."""
    try:
        with socket.create_connection(address, timeout=timeout_s) as sock, sock.makefile("rwb") as f:
            f.write(line.encode() + b"\n")
            f.flush()
            reply = f.readline().decode().strip()
    except OSError as exc:
        raise DeviceFault(f"the training table's hands could not '{line}': {exc}") from exc
    if not reply.startswith("ok"):
        raise DeviceFault(f"the training table refused '{line}': {reply[6:] if reply.startswith('error') else reply}")
    return reply[2:].strip()


class TrainingDealer:
    """The controller's ``Dealer`` at a training table: each physical step is the
    trainee's (nothing is done when the table prompts it), except the collect, done
    through the control socket at ``address`` once the trainee confirmed it."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address

    def insert_deck(self, colour: BackColour) -> None:
        """The trainee's step (``dealer_hands``)."""

    def take_from_shuffler(self) -> None:
        """The trainee's step (``dealer_hands``)."""

    def load_shoe(self, colour: BackColour) -> None:
        """The trainee's step (``dealer_hands``)."""

    def draw_card(self) -> None:
        """The trainee's step (``dealer_hands``)."""

    def collect(self) -> None:
        """The round's cards and the shoe's stub into the discard rack (the trainee
        confirmed the collect on the screen)."""
        send_line(self.address, "collect")


class TrainingHands:
    """The ``dealer_hands`` command (the console's ``hands`` hook): does the physical
    step ``console`` waits for through the control socket at ``address``.

    A command may name the step it is for (``step``: ``draw_card``, ...) and, for a
    card, ``draw_index`` (as the status says it, from 0): a double tap, or a press meant
    for a step the table has moved past, is refused, never taken as the next card.
    A step already done and not yet reported by its device is refused too (the
    shoe is reading the card). Answers ``{"ok": true, "step": ..., "done": words}``."""

    def __init__(self, console: Console, address: tuple[str, int]) -> None:
        self.console = console
        self.address = address
        self._lock = threading.Lock()
        self._done: Expectation | None = None

    def can_do(self, exp: Expectation | None) -> bool:
        """Whether ``exp`` is a step these hands do (the status then accepts ``dealer_hands``)."""
        return exp is not None and exp.role == "device" and exp.action in STEP_LINES

    def __call__(self, cmd: Command) -> None:
        with self._lock:
            exp = self.console.expectation
            why = self._refusal(cmd, exp)
            if why is not None:
                cmd.answer(ok=False, code="not_expected", error=why)
                return
            assert exp is not None
            try:
                send_line(self.address, STEP_LINES[exp.action].format(colour=exp.colour))
            except DeviceFault as exc:
                cmd.answer(ok=False, code="refused", error=str(exc))
                return
            self._done = exp
        cmd.answer(ok=True, step=exp.action, done=STEP_WORDS[exp.action],
                   **({"draw_index": exp.draw_index} if exp.draw_index is not None else {}))

    def _refusal(self, cmd: Command, exp: Expectation | None) -> str | None:
        args: dict[str, Any] = cmd.args
        if not self.can_do(exp):
            waits = exp.what if exp is not None else "nothing a person does now"
            return f"no physical step waits for the dealer's hands now; the table waits for {waits}"
        assert exp is not None
        if exp is self._done:
            return (f"{STEP_WORDS[exp.action]}: done already; the table waits for the "
                    f"{'shoe' if exp.action in ('draw_card', 'load_shoe') else 'shuffler'} to report it")
        step = args.get("step")
        if step is not None and step != exp.action:
            return (f"that press was for '{STEP_WORDS.get(step, step)}', but the table waits for {exp.what}: "
                    "press the button it shows now")
        index = args.get("draw_index")
        if exp.action == "draw_card" and index is not None and index != exp.draw_index:
            return (f"that press was for card {index + 1}, but the table waits for card {exp.draw_index + 1}: "
                    "a card is dealt once")
        return None
