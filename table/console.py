"""The console's command queue: dealer and supervisor commands, from every source, answered at once.

A :class:`Command` comes from the control socket, the web console, a terminal
key, the Python API or any other front door (``table/interfaces/``), carrying
the :class:`~table.roles.Actor` who gave it. :class:`Console` is the core's
side of every front door:

* every command gets exactly one answer, at once: carried out (when the table
  was waiting for it: the controller thread takes it as it arrives), refused
  with a reason (a role that may not ask it, a blank reason, a round whose
  results stand), or "not expected now" (naming what the table waits for);
* the table says what it waits for (:class:`Expectation`, :attr:`Console.expectation`),
  so a console prompts for exactly that and a screen shows the one button that
  does it;
* a void is acted on within one device step, not at the next round: accepting
  it wakes the controller from whatever it waits on (:attr:`Console.wake`);
  the void itself is reported by the ``round_voided`` event. Before the
  decisions are final one supervisor voids; after them (the outcome is then
  known) a second supervisor must confirm (the two-person rule, on by
  default); once the results are recorded a void is refused (58 Pa. Code
  816a.1).
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from protocols.cards import Card

from .errors import SupervisorRequired
from .roles import Actor, InvalidArgument, allowed, person_name, reason_text
from .rules import kinds
from .rules.settlement import Decision
from .rules.strategy import Decide


@dataclass
class Command:
    """One dealer or supervisor command (from the control socket, a screen, a key).

    ``action``: ``place_bets`` (``seat`` or ``all_seats``; an amount in cents per wager
    kind of :mod:`table.rules.kinds`, ``ante``, ``pair_plus``, ``six_card``, ``progressive``, or ``empty``/``same_as_last``/``table_minimum``:
    :meth:`table.bets.BetBook.apply`), ``close_bets``, ``confirm_collect``, ``decide`` (``seat``,
    ``decision``), ``void`` (``reason``, ``supervisor``), ``confirm_void``
    (``supervisor``: the second supervisor of the two-person rule),
    ``register_deck`` (``deck_id``, ``supervisor``), ``confirm_card`` (``card``,
    ``supervisor``), ``release_hold`` (``supervisor``, ``reason``),
    ``acknowledge_incident`` (``supervisor``), ``table_procedure`` (``procedure``, ``slip``,
    ``dealer``, ``supervisor``: the gaming day's procedures signed by two people, proven
    by the front door; :mod:`table.procedure.table_day`), ``status``. ``reply`` is called
    exactly once with a JSON-ready dict; ``done``, when given, once more when a
    command accepted for later (a void) has been carried out or has failed.
    """

    action: str
    args: dict[str, Any] = field(default_factory=dict)
    reply: Callable[[dict[str, Any]], None] | None = None
    #: who gave it (:mod:`table.roles`); None for an in-process caller holding the controller
    actor: Actor | None = None
    #: the front door's request id, echoed in the reply
    request_id: str | int | None = None
    #: called once the command accepted for later was carried out (or failed)
    done: Callable[[dict[str, Any]], None] | None = None
    #: for a void: what a void did when the console accepted it (the answer's promise,
    #: kept by the controller even if the round moves on before it acts)
    void_policy: VoidPolicy | None = field(default=None, repr=False, compare=False)
    _answered: bool = field(default=False, repr=False, compare=False)

    def answer(self, **result: Any) -> None:
        """Send the one reply (a second call is ignored: one request, one answer)."""
        if self._answered:
            return
        self._answered = True
        if self.reply is not None:
            self.reply(result)

    def finish(self, **result: Any) -> None:
        """Report what became of a command accepted for later (``done``)."""
        if self.done is not None:
            done, self.done = self.done, None
            done(result)

    @property
    def person(self) -> str | None:
        """Who gave it: the actor's person, else the ``supervisor`` argument."""
        if self.actor is not None:
            return self.actor.person
        v = self.args.get("supervisor")
        return v if isinstance(v, str) else None


@dataclass(frozen=True)
class Expectation:
    """What the table waits for now, for people and screens.

    ``action``: the command (or, with ``role="device"``, the physical action a
    device will report: ``insert_deck``, ``take_from_shuffler``, ``load_shoe``,
    ``draw_card``); ``what``: in words ("the dealer to close bets"); ``role``:
    who does it (``dealer``, ``supervisor``, ``device``); ``accepts``: the
    commands taken now; ``seat``: for ``decide``; ``draw_index``: for
    ``confirm_card``, and for ``draw_card`` the draw the shoe will count (0 for
    the first card since its load); ``round_id``: the round concerned;
    ``colour``: the back colour of the deck a physical step moves (``insert_deck``,
    ``load_shoe``, ``take_from_shuffler``) and ``deck_id`` that deck's id, so a
    screen shows which deck goes where and a bench's hands pick it up."""

    action: str
    what: str
    role: str = "dealer"
    accepts: tuple[str, ...] = ()
    seat: int | None = None
    draw_index: int | None = None
    round_id: str | None = None
    colour: str | None = None
    deck_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"action": self.action, "what": self.what, "role": self.role,
                             "accepts": list(self.accepts)}
        for k in ("seat", "draw_index", "round_id", "colour", "deck_id"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d


@dataclass(frozen=True)
class VoidPolicy:
    """What a void would do now, as the controller says it (updated at each step).

    ``round_id``: the round a void would void (None: no round to void);
    ``refusal``: why a void is refused now ("" when it is not); ``needs_second``:
    a second supervisor must confirm it (decisions are final, the two-person rule)."""

    round_id: str | None = None
    refusal: str = "no round is in progress"
    needs_second: bool = False
    #: the supervisor whose void of this (held) round waits for a second one: their own
    #: void again is refused at once (a different supervisor confirms)
    requested_by: str | None = None



def starting_status() -> dict[str, Any]:
    """The status of a table whose front doors are open but whose controller is not yet
    (a start, a restart finding its devices): the status's shape with nothing in it yet,
    ``starting`` true; never an empty answer a screen cannot read."""
    return {"starting": True, "places": {}, "decks": [], "rounds_played": 0, "round": None, "held": None,
            "violations": 0, "waiting_for": None, "links": {}, "alarms": [], "bets": None, "table_day": None}

class Console:
    """The table's inbox of dealer and supervisor commands (see the module docstring).

    ``attached``: True when some front door (a control socket, a screen, a
    terminal) can answer; without one, a step that needs a person raises
    :class:`SupervisorRequired` instead of waiting for ever. ``two_person_void``:
    a void after the decisions are final needs a second supervisor (default on).
    ``wake``: set by the controller; called when a void is accepted, so it
    acts within one device step. ``status``: the controller's status (for the
    ``status`` command).
    """

    DEALER_ACTIONS = ("place_bets", "close_bets", "confirm_collect", "decide", "dealer_hands")
    SUPERVISOR_ACTIONS = ("void", "confirm_void", "register_deck", "confirm_card", "release_hold",
                          "acknowledge_incident", "table_procedure")
    #: table procedures a simulated table keeps for its next round boundary, at most
    MAX_KEPT_PROCEDURES = 4

    def __init__(self, *, two_person_void: bool = True) -> None:
        self._cv = threading.Condition()
        self._pending: collections.deque[Command] = collections.deque()
        #: commands that came while the controller carried out the one it had just taken
        #: (between two waits): answered when it next says what it waits for
        self._deferred: list[Command] = []
        self._between = False
        self._expect: Expectation | None = None
        self._policy = VoidPolicy()
        self._void: Command | None = None
        #: the round whose void the controller has taken and is carrying out (a second
        #: void of it is refused until the policy says what comes next)
        self._carrying: str | None = None
        self._listeners: list[Callable[[Expectation | None], None]] = []
        self.two_person_void = two_person_void
        self.attached = False
        self.wake: Callable[[], None] | None = None
        #: the controller's handler of an ``acknowledge_incident`` the table is not waiting for
        #: (alarms are acknowledged any time); None: only when waited for
        self.acknowledge: Callable[[Command], None] | None = None
        #: on a simulated table dealt at a person's pace (table.hil.training.TrainingHands):
        #: does the physical step the table waits for (``dealer_hands``); None elsewhere
        self.hands: Any = None
        #: the controller's status; until a controller is attached (the front doors open
        #: before the table has found its devices), :func:`starting_status`
        self.status: Callable[[], dict[str, Any]] = starting_status
        #: a table that deals round after round (a simulated one) keeps a ``table_procedure``
        #: it is not waiting for, and carries it out at the next round boundary
        #: (:meth:`take_procedures`); otherwise one not expected now is refused, saying why
        self.keep_procedures = False
        self._procedures: collections.deque[Command] = collections.deque()

    # -- what the table waits for ------------------------------------------------------------

    @property
    def expectation(self) -> Expectation | None:
        """What the table waits for now (None: nothing a person does)."""
        return self._expect

    def on_expectation(self, callback: Callable[[Expectation | None], None]) -> None:
        """Call ``callback(expectation)`` whenever what the table waits for changes (a
        terminal prompts, a simulated supervisor answers). Runs in the controller's
        thread: keep it short."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[Expectation | None], None]) -> None:
        """Stop calling ``callback`` (see :meth:`on_expectation`)."""
        if callback in self._listeners:
            self._listeners.remove(callback)

    def expect(self, exp: Expectation | None) -> None:
        """Say what the table waits for (the controller; also device steps, for screens).
        Commands deferred since the last wait returned are now taken (this expectation
        accepts them) or refused with what the table waits for instead."""
        with self._cv:
            self._between = False
            deferred, self._deferred = self._deferred, []
            refused = []
            for cmd in deferred:
                why = self._refusal(cmd, exp)
                if why is None:
                    self._pending.append(cmd)
                else:
                    refused.append((cmd, why))
            self._expect = exp
            if deferred:
                self._cv.notify_all()
        for cmd, why in refused:
            cmd.answer(ok=False, code="not_expected", error=why)
        self._tell(exp)

    def waiting_dict(self, exp: Expectation) -> dict[str, Any]:
        """``exp`` for the status (``waiting_for``): on a training table a physical step its
        hands can do also accepts ``dealer_hands``."""
        d = exp.to_dict()
        if self.hands is not None and self.hands.can_do(exp):
            d["accepts"] = [*d["accepts"], "dealer_hands"]
        return d

    def between(self) -> None:
        """The controller is about to say what it waits for (it has just made a step visible,
        such as a round open for bets, and journals it first): a command that comes now
        is held and answered by the next :meth:`expect`, not refused for the gap."""
        with self._cv:
            self._between = True

    def _tell(self, exp: Expectation | None) -> None:
        for cb in list(self._listeners):
            try:
                cb(exp)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the table
                pass

    def set_void_policy(self, policy: VoidPolicy) -> None:
        """The controller says what a void would do now (at each step of the round)."""
        with self._cv:
            if policy != self._policy:
                self._carrying = None
            self._policy = policy
            if policy.refusal and self._void is not None:
                v, self._void = self._void, None
                v.finish(ok=False, error=f"the void was not carried out: {policy.refusal}")

    @property
    def void_policy(self) -> VoidPolicy:
        return self._policy

    def close_voids(self, policy: VoidPolicy) -> Command | None:
        """Set ``policy`` (a stricter one: the results are about to be recorded) and hand
        over the void accepted before it, if any, for the controller to carry out as it
        was promised, instead of refusing it after it was accepted. Atomic with
        :meth:`submit`: a void is either accepted before and returned here, or judged by
        ``policy``."""
        with self._cv:
            self._policy = policy
            self._carrying = None
            return self._take_void()

    # -- front doors ---------------------------------------------------------------------------

    def submit(self, cmd: Command) -> None:
        """Take one command from a front door (thread-safe) and answer it at once."""
        action = cmd.action
        if action == "status":
            cmd.answer(ok=True, **self.status())
            return
        known = self.DEALER_ACTIONS + self.SUPERVISOR_ACTIONS
        if action not in known:
            cmd.answer(ok=False, code="unknown_action",
                       error=f"unknown action {action!r}; allowed: status, " + ", ".join(known))
            return
        if not allowed(cmd.actor, action):
            role = cmd.actor.role.value if cmd.actor else "?"
            cmd.answer(ok=False, code="forbidden", error=f"{action} is not allowed to the {role} role")
            return
        try:
            self._validate(cmd)
        except InvalidArgument as exc:
            cmd.answer(ok=False, code="bad_request", error=f"{action}: {exc}")
            return
        if action == "void":
            self._submit_void(cmd)
            return
        if action == "dealer_hands":
            if self.hands is None:
                cmd.answer(ok=False, code="not_expected", error="dealer_hands is for a simulated table dealt at a "
                           "person's pace (tablectl run --simulate --pace person): here the dealer's own hands "
                           "do the physical steps")
            else:
                self.hands(cmd)
            return
        with self._cv:
            exp = self._expect
            waited = exp is not None and action in exp.accepts
        if action == "acknowledge_incident" and not waited and self.acknowledge is not None:
            self.acknowledge(cmd)
            return
        if action == "table_procedure" and not waited and self.keep_procedures:
            with self._cv:
                kept = len(self._procedures) < self.MAX_KEPT_PROCEDURES
                if kept:
                    self._procedures.append(cmd)
            if not kept:
                cmd.answer(ok=False, code="refused", error="table procedure: others wait for the round to end; "
                                                          "try again after it")
            return
        with self._cv:
            exp = self._expect
            if exp is None and action == "confirm_card" and cmd.args.get("draw_index") is None:
                # No card is asked for now, and the entry does not say which it is for: it was
                # meant for one already entered (a double tap); held over, it would be taken
                # for the next unreadable card. An entry naming its draw is held over
                # and answered by the next wait, as any other command.
                why = ("confirm_card is not expected now: the table asks for no card, and this entry names no "
                       "draw_index (the card it is for): send it with the card the table asks for")
            elif exp is None and self._between and len(self._deferred) < 16:
                # The controller is journaling the step it just made (a command taken, a
                # round opened or settled) and says what it waits for next within that
                # step: a command sent meanwhile is answered then, not refused for the gap
                # (seat 2's decision entered as soon as seat 1's is answered).
                self._deferred.append(cmd)
                return
            else:
                why = self._refusal(cmd, exp)
                if why is None:
                    self._pending.append(cmd)
                    self._cv.notify_all()
        if why is not None:
            cmd.answer(ok=False, code="not_expected", error=why)

    def _refusal(self, cmd: Command, exp: Expectation | None) -> str | None:
        """Why ``cmd`` is not taken while the table waits for ``exp`` (None: it is). Call
        with the lock held."""
        action = cmd.action
        if exp is None or action not in exp.accepts:
            waits = exp.what if exp is not None else "nothing a person does now"
            return f"{action} is not expected now; the table waits for {waits}"
        if action == "decide" and exp.seat is not None and cmd.args.get("seat") != exp.seat:
            return f"the table waits for seat {exp.seat}'s decision"
        if (action == "confirm_card" and cmd.args.get("draw_index") is not None and exp.draw_index is not None
                and cmd.args["draw_index"] != exp.draw_index):
            # A card entry names the draw it is for: one typed twice (or meant for an earlier
            # prompt) is never taken as the face of the next unreadable card.
            return (f"that card was entered for card {cmd.args['draw_index'] + 1}, but the table waits for "
                    f"unreadable card {exp.draw_index + 1}: read that card and enter it")
        if action != "place_bets" and any(p.action == action for p in self._pending):
            # (several seats' bets may queue: each is its own seat's, answered in turn)
            return f"{action} is already being carried out"
        return None

    def _validate(self, cmd: Command) -> None:
        """The table.roles rules: a supervisor's name and a reason are non-blank, bounded,
        printable text; a void needs a reason; a decision is play or fold."""
        a = cmd.args
        if cmd.action in self.SUPERVISOR_ACTIONS:
            name = cmd.person
            if name is None:
                raise InvalidArgument("supervisor is required")
            person_name(name, "supervisor")
            if cmd.actor is None:
                a["supervisor"] = person_name(a["supervisor"], "supervisor")
        if cmd.action == "table_procedure":
            a["dealer"] = person_name(a.get("dealer"), "dealer")
            if not isinstance(a.get("procedure"), str):
                raise InvalidArgument("procedure is required: open, shift_change, fill, credit, close or drop")
            if not isinstance(a.get("slip", {}), dict):
                raise InvalidArgument("slip must be an object (inventory, amount, gaming_day, opener)")
        if cmd.action == "void" or (cmd.action == "release_hold" and a.get("reason") is not None):
            a["reason"] = reason_text(a.get("reason"))
        if cmd.action == "place_bets":
            _check_bet_args(a)
        if cmd.action == "decide":
            if not isinstance(a.get("seat"), int) or isinstance(a.get("seat"), bool):
                raise InvalidArgument("seat must be a whole number")
            try:
                Decision.parse(a.get("decision", ""))
            except ValueError as exc:
                raise InvalidArgument(str(exc)) from None

    def _submit_void(self, cmd: Command) -> None:
        with self._cv:
            policy = self._policy
            if policy.refusal:
                cmd.answer(ok=False, code="refused", error=f"void refused: {policy.refusal}")
                return
            rid = cmd.args.get("round_id")
            if rid is not None and rid != policy.round_id:
                cmd.answer(ok=False, code="refused", error=f"void refused: round {rid} is not the round in "
                                                           f"progress ({policy.round_id})")
                return
            if self._void is not None or self._carrying is not None:
                cmd.answer(ok=False, code="refused", error="a void of this round is already being carried out")
                return
            if policy.requested_by is not None and cmd.person == policy.requested_by:
                cmd.answer(ok=False, code="refused", error=f"void refused: {cmd.person} asked this void already; a "
                                                           "second supervisor must confirm it (two-person rule)")
                return
            cmd.void_policy = policy
            self._void = cmd
            self._cv.notify_all()
        cmd.answer(ok=True, accepted=True, round_id=policy.round_id,
                   what=("a second supervisor must confirm the void (the decisions are final)"
                         if policy.needs_second else "the round is voided now"))
        wake = self.wake
        if wake is not None:
            wake()

    # -- the controller's side ---------------------------------------------------------------

    def take_procedures(self) -> list[Command]:
        """The ``table_procedure`` commands kept for the round boundary (see
        :attr:`keep_procedures`), in the order they came; the caller answers each."""
        with self._cv:
            out = list(self._procedures)
            self._procedures.clear()
        return out

    def take_void(self) -> Command | None:
        """The accepted void, if any (non-blocking), for the controller to carry out."""
        with self._cv:
            return self._take_void()

    def _take_void(self) -> Command | None:
        """The accepted void, handed to the controller: a second void of the round is
        refused while it is carried out (until the policy changes). Lock held."""
        v, self._void = self._void, None
        if v is not None:
            self._carrying = self._policy.round_id
        return v

    def void_handed_on(self) -> None:
        """The void taken is no longer being carried out (it holds the round for a second
        supervisor): voids are judged by the policy again."""
        with self._cv:
            self._carrying = None

    def wait(self, accepts: tuple[str, ...], what: str, timeout_s: float | None = None, *,
             role: str | None = None, action: str | None = None, seat: int | None = None,
             draw_index: int | None = None, round_id: str | None = None, voids: bool = True,
             check: Callable[[Command], dict[str, Any] | None] | None = None) -> Command:
        """Wait for the next command among ``accepts`` and return it (the caller answers
        it). While waiting, :attr:`expectation` says so. ``voids``: an accepted void
        ends the wait and is returned (``action == "void"``: the caller carries it out).
        ``check``: called with each command before it is taken; a dict it returns is the
        command's refusal (``code``, ``error``), answered at once while the table goes on
        waiting, so a person who corrects a mistake at once is never told "not expected
        now". Raises :class:`SupervisorRequired` with no front door attached, or when
        nobody answered within ``timeout_s``."""
        if not self.attached:
            raise SupervisorRequired(f"{what}: no console or control socket is attached to ask")
        who = role or ("dealer" if set(accepts) <= set(self.DEALER_ACTIONS) else "supervisor")
        exp = Expectation(action or accepts[0], what, who, tuple(accepts), seat, draw_index, round_id)
        self.expect(exp)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            with self._cv:
                while True:
                    if voids and self._void is not None:
                        return self._take_void()
                    taken = next((c for c in self._pending if c.action in accepts), None)
                    if taken is not None:
                        self._pending.remove(taken)
                        refused = check(taken) if check is not None else None
                        if refused is None:
                            self._between = True  # until the controller says what it waits for next
                            return taken
                        taken.answer(ok=False, **refused)
                        continue
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise SupervisorRequired(f"{what}: nobody answered within {timeout_s:g} s")
                    self._cv.wait(remaining)
        finally:
            with self._cv:
                left = list(self._pending)
                self._pending.clear()
                if self._between:
                    # A command was taken: the ones queued behind it (bets for the next
                    # seats, then close_bets) are answered by the next expect(), taken
                    # if it accepts them, as if they had come just after this one.
                    room = max(0, 16 - len(self._deferred))
                    self._deferred.extend(left[:room])
                    left = left[room:]
            for cmd in left:
                cmd.answer(ok=False, code="not_expected", error=f"{cmd.action} was not carried out: the table "
                                                                 "no longer waits for it")
            with self._cv:
                cleared = self._expect is exp
                if cleared:
                    self._expect = None  # deferred commands stay deferred: the next expect() answers them
            if cleared:
                self._tell(None)


#: the arguments a place_bets command may carry (table.bets.BetBook.apply): one amount
#: per wager kind (table.rules.kinds) between the seat and the modes
BET_ARGS = ("seat", "all_seats", *kinds.keys(), "empty", "same_as_last", "table_minimum")


def _check_bet_args(a: dict[str, Any]) -> None:
    """The shape of a ``place_bets`` command's arguments (whatever front door it came
    through): known keys only, a seat or ``all_seats``, whole cents, flags ``true``. The
    limits themselves are the bet book's (:class:`table.bets.BetBook`). Raises
    :class:`InvalidArgument`."""
    unknown = sorted(str(k)[:20] for k in a if k not in BET_ARGS)
    if unknown:
        raise InvalidArgument(f"unknown argument {unknown[0]!r}; allowed: {', '.join(BET_ARGS)}")
    seat = a.get("seat")
    if (seat is None) == (a.get("all_seats") is not True):
        raise InvalidArgument("give seat (a whole number) or all_seats: true")
    if seat is not None and (isinstance(seat, bool) or not isinstance(seat, int)):
        raise InvalidArgument("seat must be a whole number")
    for k in kinds.keys():
        v = a.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidArgument(f"{k} must be a whole number of cents, 0 or more")
    for k in ("all_seats", "empty", "same_as_last", "table_minimum"):
        if k in a and a[k] is not True:
            raise InvalidArgument(f"{k} must be true when given")


def console_decisions(console: "Console") -> Decide:
    """Players' decisions at a real table, as the dealer enters them on the console:
    ``{"action": "decide", "seat": 2, "decision": "fold"}`` (or the key ``p 2`` / ``f 2``).
    The dealer asks each seat in turn (649a.11), so the table waits for that seat.
    A void accepted meanwhile is raised as :class:`VoidArrived` for the controller."""

    def decide(seat: int, cards: list[Card]) -> Decision:
        cmd = console.wait(("decide",), f"the dealer to enter seat {seat}'s decision (play or fold)", seat=seat)
        if cmd.action == "void":
            raise VoidArrived(cmd)
        decision = Decision.parse(cmd.args.get("decision", ""))
        cmd.answer(ok=True, seat=seat, decision=decision.value)
        decide.last = cmd
        return decision

    decide.console = console  # type: ignore[attr-defined]  (the controller journals who decided)
    decide.last = None  # type: ignore[attr-defined]
    return decide


class VoidArrived(Exception):
    """A void accepted while the table waited for something else (the controller carries it out)."""

    def __init__(self, command: Command) -> None:
        super().__init__("a void arrived")
        self.command = command
