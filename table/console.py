"""The console's command queue: dealer and supervisor commands, from every source, in order.

A :class:`Command` comes from the control socket, a terminal key, the Python
API or any other front door (``table/interfaces/``); :class:`Console` queues
them for the controller's one thread, which takes each where the procedure
waits for it (``docs/console.md``). A void is kept for the round's next step
boundary, where the controller honours it.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from protocols.cards import Card

from .errors import SupervisorRequired
from .roles import Actor
from .rules.settlement import Decision
from .rules.strategy import Decide


@dataclass
class Command:
    """One dealer or supervisor command (from the control socket or a key).

    ``action``: ``close_bets``, ``confirm_collect``, ``void`` (args ``reason``,
    ``supervisor``), ``register_deck`` (``colour``, ``deck_id``, ``supervisor``),
    ``confirm_card`` (``card``, ``supervisor``), ``status``.
    ``reply`` is called once with a JSON-ready dict.
    """

    action: str
    args: dict[str, Any] = field(default_factory=dict)
    reply: Callable[[dict[str, Any]], None] | None = None
    #: who gave it (:mod:`table.roles`); None for an in-process caller holding the controller
    actor: Actor | None = None
    #: the front door's request id, echoed in the reply
    request_id: str | int | None = None

    def answer(self, **result: Any) -> None:
        if self.reply is not None:
            self.reply(result)


class Console:
    """The queue of dealer and supervisor commands, from every source, in order.

    ``attached``: True when some source (a control socket, a terminal) can
    answer; without one, a step that needs a supervisor raises
    :class:`SupervisorRequired` instead of waiting for ever.
    """

    DEALER_ACTIONS = ("close_bets", "confirm_collect", "decide")
    SUPERVISOR_ACTIONS = ("void", "register_deck", "confirm_card", "acknowledge_incident")

    def __init__(self) -> None:
        self._q: queue.Queue[Command] = queue.Queue()
        self._voids: list[Command] = []  # a void waits for the round's next step boundary
        self._voids_lock = threading.Lock()
        self.attached = False
        self.status: Callable[[], dict[str, Any]] = lambda: {}

    def submit(self, cmd: Command) -> None:
        """Queue a command (thread-safe); ``status`` is answered at once."""
        if cmd.action == "status":
            cmd.answer(ok=True, **self.status())
            return
        if cmd.action not in self.DEALER_ACTIONS + self.SUPERVISOR_ACTIONS:
            cmd.answer(ok=False, error=f"unknown action {cmd.action!r}; allowed: status, "
                                       + ", ".join(self.DEALER_ACTIONS + self.SUPERVISOR_ACTIONS))
            return
        self._q.put(cmd)

    def take_void(self) -> Command | None:
        """A void the supervisor sent while the round was running, if any (non-blocking)."""
        while True:
            try:
                cmd = self._q.get_nowait()
            except queue.Empty:
                break
            if cmd.action == "void":
                with self._voids_lock:
                    self._voids.append(cmd)
            else:
                self._q.put(cmd)  # not ours to answer now; put back for the step that waits
                break
        with self._voids_lock:
            return self._voids.pop(0) if self._voids else None

    def refuse_voids(self, why: str) -> None:
        """Answer every void still pending (sent when no round could take it)."""
        while True:
            cmd = self.take_void()
            if cmd is None:
                return
            cmd.answer(ok=False, error=why)

    def wait(self, actions: tuple[str, ...], what: str, timeout_s: float | None = None) -> Command:
        """The next command among ``actions``; others are answered as not expected now
        (a ``void`` is kept for the round's next step, where it is honoured)."""
        if not self.attached:
            raise SupervisorRequired(f"{what}: no console or control socket is attached to ask")
        if "void" in actions:
            with self._voids_lock:
                if self._voids:
                    return self._voids.pop(0)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                cmd = self._q.get(timeout=remaining)
            except queue.Empty:
                raise SupervisorRequired(f"{what}: nobody answered within {timeout_s:g} s") from None
            if cmd.action in actions:
                return cmd
            if cmd.action == "void":
                with self._voids_lock:
                    self._voids.append(cmd)
                continue
            cmd.answer(ok=False, error=f"{cmd.action} is not expected now; the table waits for {what}")



def console_decisions(console: "Console") -> Decide:
    """Players' decisions at a real table, as the dealer enters them on the console:
    ``{"action": "decide", "seat": 2, "decision": "fold"}`` (or the key ``p 2`` / ``f 2``).
    The dealer asks each seat in turn (649a.11), so the table waits for that seat."""

    def decide(seat: int, cards: list[Card]) -> Decision:
        while True:
            cmd = console.wait(("decide",), f"seat {seat}'s decision (play or fold)")
            if cmd.args.get("seat") != seat:
                cmd.answer(ok=False, error=f"the table waits for seat {seat}'s decision")
                continue
            try:
                decision = Decision.parse(cmd.args.get("decision", ""))
            except ValueError as exc:
                cmd.answer(ok=False, error=str(exc))
                continue
            cmd.answer(ok=True, seat=seat, decision=decision.value)
            return decision

    return decide

