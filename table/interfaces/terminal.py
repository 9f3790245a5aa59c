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

import getpass
import shlex
import sys
import threading
from typing import IO, Any, Callable

from protocols.cards import BackColour
from table.bets import money
from table.console import Command, Console, Expectation
from table.roles import Actor, Role
from table.rules import kinds


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


#: the short form's example (``a25 pp10 6c5 pr1``), one word per wager kind (table.rules.kinds)
BET_EXAMPLE = " ".join(f"{k.prefix}{k.example_dollars}" for k in kinds.kinds())

KEYS_HELP = """console commands (type a line, then Enter):
  s                      the table's state in words
  b SEAT """ + BET_EXAMPLE + "  seat SEAT's bets in dollars: " + ", ".join(k.label for k in kinds.kinds()) + """ (dealer)
  b SEAT - / = / min     seat SEAT empty / same as last round / the table minimum (SEAT * : every seat)
  c                      close bets (dealer)
  p SEAT / f SEAT        seat SEAT plays / folds (dealer)
  k                      confirm the collect, once the round is paid (dealer)
  d                      training (run --simulate --pace person): do the physical step prompted (deal the card)
  v REASON...            void the round (supervisor)
  x NAME                 a second supervisor NAME confirms a void (after the decisions): asks NAME's PIN
  l                      release a held round: it goes on where it stood (supervisor)
  r DECK_ID              register a replacement deck (supervisor)
  m CARD [N]             enter unreadable card N as the prompt counts it, e.g. m Qs 4 (supervisor); without N,
                         the card the last prompt shown names (refused if none did, or the table waits for another)
  a                      acknowledge the table's incidents (supervisor)
the gaming day (the dealer named and the supervisor each give their PIN, not echoed; COMAR 36.05.03.10):
  open DEALER 25:40 5:100 1:200      open the table: the opening inventory, dollars:chips per denomination
  shift DEALER OPENER 25:40 5:100    shift change: the closer's count; OPENER the incoming dealer (PIN too)
  fill DEALER 500 / credit DEALER 200   chips brought to / taken from the table, in dollars
  close DEALER 25:42 5:96 1:200      close the table: the closing inventory
  drop DEALER 2026-12-01 900         the count's drop of that gaming day, in dollars (after the close)"""

#: what to type for each command the table can wait for (the prompt's second half)
KEY_FOR = {
    "place_bets": "b SEAT a25 pp10 (or b SEAT - / = / min) to bet", "close_bets": "press c", "confirm_collect": "press k", "dealer_hands": "press d (training: the dealer's hands)", "decide": "p {seat} to play / f {seat} to fold",
    "void": "v REASON to void it", "confirm_void": "x NAME (a second supervisor) to confirm the void",
    "release_hold": "l to release it", "register_deck": "r NEW_DECK_ID to register the replacement",
    "confirm_card": "m CARD (e.g. m Qs) to enter it", "acknowledge_incident": "a to acknowledge",
    "table_procedure": "open DEALER 25:40 5:100 ... (the opening inventory)",
}

#: the physical steps whose prompt is what the table waits for (no Dealer method prompts them)
TABLE_SAYS = frozenset({"unload_shoe"})

#: the terminal's words for the gaming day's procedures (:func:`parse_procedure`)
PROCEDURE_WORDS = {"open": "open", "shift": "shift_change", "fill": "fill", "credit": "credit", "close": "close",
                   "drop": "drop"}


def parse_inventory(words: list[str]) -> dict[str, int]:
    """``["25:40", "0.25:100"]`` (dollars:chips) -> ``{"2500": 40, "25": 100}`` (cents as text).
    Raises ``ValueError`` naming the word."""
    if not words:
        raise ValueError("give the inventory: dollars:chips per denomination, e.g. 25:40 5:100 1:200")
    inv: dict[str, int] = {}
    for word in words:
        denom, colon, chips = word.partition(":")
        if not colon or not chips.isdigit() or len(chips) > 6:
            raise ValueError(f"{word!r}: a line of the inventory is dollars:chips, e.g. 25:40")
        cents = str(_dollars(denom, f"denomination {denom!r}"))
        if cents in inv:
            raise ValueError(f"denomination {denom} is given twice")
        inv[cents] = int(chips)
    return inv


def parse_procedure(line: str) -> tuple[str, str, dict[str, Any]]:
    """One gaming-day line (see :data:`KEYS_HELP`) -> ``(procedure, dealer, slip)``.
    Raises ``ValueError`` saying what is wrong in it."""
    parts = shlex.split(line.strip())
    word, rest = parts[0].lower(), parts[1:]
    procedure = PROCEDURE_WORDS[word]
    if not rest:
        raise ValueError(f"name the dealer who signs: {word} DEALER ...")
    dealer, rest = rest[0], rest[1:]
    if procedure in ("open", "close"):
        return procedure, dealer, {"inventory": parse_inventory(rest)}
    if procedure == "shift_change":
        if not rest:
            raise ValueError("name the incoming dealer: shift DEALER OPENER 25:40 ...")
        return procedure, dealer, {"opener": rest[0], "inventory": parse_inventory(rest[1:])}
    if procedure == "drop":
        if len(rest) != 2:
            raise ValueError("drop DEALER YYYY-MM-DD DOLLARS: the gaming day counted and its drop")
        return procedure, dealer, {"gaming_day": rest[0], "amount": _dollars(rest[1], "the drop")}
    if len(rest) != 1:
        raise ValueError(f"{word} DEALER DOLLARS: the amount in dollars, e.g. {word} D-4 500")
    return procedure, dealer, {"amount": _dollars(rest[0], f"the {word}")}


#: the short form's wager prefixes (``b 3 a25 pp10 6c5 pr1``), longest first (table.rules.kinds)
BET_PREFIXES = tuple((k.prefix, k.key) for k in sorted(kinds.kinds(), key=lambda k: -len(k.prefix)))


def _dollars(text: str, what: str) -> int:
    """``"25"`` -> 2500 cents, ``"12.50"`` -> 1250; raises ``ValueError`` naming ``what``."""
    whole, dot, frac = text.partition(".")
    if not whole.isdigit() or len(whole) > 7 or (dot and not (frac.isdigit() and len(frac) <= 2)):
        raise ValueError(f"{what}: {text!r} is not an amount in dollars (e.g. 25 or 12.50)")
    return int(whole) * 100 + (int(frac.ljust(2, "0")) if dot else 0)


def parse_bet_args(rest: list[str]) -> dict[str, Any]:
    """The words after ``b`` to a ``place_bets`` command's arguments (docs/console.md):
    ``3 a25 pp10 6c5 pr1`` (amounts in dollars, cents after a point: ``a12.50``),
    ``3 -`` (empty), ``3 =`` (same as last round), ``3 min`` (the table minimum); ``*``
    instead of a seat: every seat. Raises ``ValueError`` saying what is wrong."""
    if not rest:
        raise ValueError(f"say which seat: b SEAT {BET_EXAMPLE}, b SEAT -, b SEAT =, b SEAT min (SEAT * : every seat)")
    seat, words = rest[0], rest[1:]
    args: dict[str, Any] = {}
    if seat == "*":
        args["all_seats"] = True
    elif seat.isdigit() and len(seat) <= 2:
        args["seat"] = int(seat)
    else:
        raise ValueError(f"{seat!r} is not a seat: give its number (1..7) or * for every seat")
    if not words:
        raise ValueError(f"say what seat {seat} bets: {BET_EXAMPLE}, - (empty), = (same as last round), min")
    if len(words) == 1 and words[0].lower() in ("-", "=", "min"):
        args[{"-": "empty", "=": "same_as_last", "min": "table_minimum"}[words[0].lower()]] = True
        return args
    if "all_seats" in args:
        raise ValueError("b * takes -, = or min; give amounts seat by seat")
    for word in words:
        low = word.lower()
        for prefix, kind in BET_PREFIXES:
            if low.startswith(prefix) and low[len(prefix):]:
                if kind in args:
                    raise ValueError(f"{kind.replace('_', ' ')} is given twice")
                args[kind] = _dollars(low[len(prefix):], kind.replace("_", " "))
                break
        else:
            raise ValueError(f"{word!r}: a wager is " + ", ".join(f"{k.prefix}{k.example_dollars} ({k.label})"
                                                                  for k in kinds.kinds()) + ", in dollars")
    return args


def describe_bets(result: dict) -> str:
    """A ``place_bets`` answer in words: each seat's wagers and the seats now in play."""
    names = kinds.labels()
    parts = []
    for seat, w in sorted((result.get("seats") or {}).items(), key=lambda kv: int(kv[0])):
        if not w or not any(w.values()):
            parts.append(f"seat {seat} empty")
        else:
            parts.append(f"seat {seat} " + ", ".join(f"{names.get(k, k)} {money(v)}"
                                                     for k, v in w.items() if v))
    in_play = result.get("in_play")
    tail = f" (in play: {', '.join(map(str, in_play)) or 'none'})" if in_play is not None else ""
    return "; ".join(parts) + tail


#: the terminal's supervisor actions besides void and confirm_void, each proved by the PIN of
#: the terminal's supervisor when there is a people file
PROVEN_ACTIONS = ("release_hold", "register_deck", "confirm_card", "acknowledge_incident")


def prompt_for(exp: Expectation) -> str | None:
    """The line a terminal prints when the table starts waiting for ``exp`` (None: a
    physical action the dealer's own prompt already names). A physical step no dealer's
    prompt names (the last deck's stub out of the shoe) is said in the table's words."""
    if exp.role == "device" and exp.action in TABLE_SAYS:
        return f"Dealer: the table waits for {exp.what}."
    if not exp.accepts:
        return None
    # (a procedure taken while bets are open is not what the table waits for: not prompted then)
    keys = " or ".join(KEY_FOR[a].format(seat=exp.seat) for a in exp.accepts
                       if a in KEY_FOR and (a != "table_procedure" or exp.action == a))
    who = "Supervisor" if exp.role == "supervisor" else "Dealer"
    return f"{who}: the table waits for {exp.what}: {keys}"


def parse_key_line(line: str, supervisor: str) -> Command | None:
    """One terminal line to a command (see :data:`KEYS_HELP`); None for a blank or unknown line.
    The command carries the terminal's actor: the person running ``tablectl run`` at the
    table (``supervisor``), as a supervisor (a dealer's actions are a supervisor's too)."""
    try:
        parts = shlex.split(line.strip())
    except ValueError:
        return None
    if not parts:
        return None
    key, rest = parts[0].lower(), parts[1:]
    actor = Actor(supervisor, Role.SUPERVISOR, source="terminal")
    if key == "s":
        return Command("status", actor=actor)
    if key == "b":
        try:
            return Command("place_bets", parse_bet_args(rest), actor=actor)
        except ValueError:
            return None  # KeyConsole says why (bet_line_problem)
    if key == "c":
        return Command("close_bets", actor=actor)
    if key == "k":
        return Command("confirm_collect", actor=actor)
    if key == "d":  # training (--pace person): the dealer's hands do the step prompted
        return Command("dealer_hands", actor=actor)
    if key in ("p", "f") and rest and rest[0].isdigit():
        return Command("decide", {"seat": int(rest[0]), "decision": "play" if key == "p" else "fold"}, actor=actor)
    if key == "v" and rest:
        return Command("void", {"reason": " ".join(rest), "supervisor": supervisor}, actor=actor)
    if key == "x":
        # As the terminal's own person: a typed name proves nothing (KeyConsole asks the
        # named supervisor's PIN and only then acts as them; the core refuses a void
        # confirmed by the supervisor who asked it: the two-person rule).
        return Command("confirm_void", {"supervisor": supervisor}, actor=actor)
    if key == "l":
        return Command("release_hold", {"supervisor": supervisor}, actor=actor)
    if key == "r" and rest:
        return Command("register_deck", {"deck_id": rest[0], "supervisor": supervisor}, actor=actor)
    if key == "m" and rest:
        args: dict = {"card": rest[0], "supervisor": supervisor}
        if len(rest) > 1 and rest[1].isdigit() and int(rest[1]) >= 1:  # the card's number, counted from 1
            args["draw_index"] = int(rest[1]) - 1
        return Command("confirm_card", args, actor=actor)
    if key == "a":
        return Command("acknowledge_incident", {"supervisor": supervisor}, actor=actor)
    return None


def _money(cents: int) -> str:
    sign = "+" if cents > 0 else "-" if cents < 0 else " "
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def describe_status(st: dict) -> str:
    """The table's status (``TableController.status()``) in words, a few lines."""
    lines = []
    r = st.get("round")
    if r:
        lines.append(f"round {r.get('number')} ({r.get('round_id')}): {str(r.get('state', '')).replace('_', ' ')}, "
                     f"deck {r.get('deck_id')} ({r.get('back_colour')})")
        for seat, info in sorted((r.get("seats") or {}).items(), key=lambda kv: int(kv[0])):
            wagers = ", ".join(f"{k.replace('_', ' ')} {_money(v).strip()}" for k, v in info.get("wagers", {}).items())
            decision = info.get("decision") or "to decide"
            lines.append(f"  seat {seat}: {wagers}; {info.get('cards', 0)} card(s); {decision}")
    else:
        lines.append(f"no round in progress ({st.get('rounds_played', 0)} played)")
    held = st.get("held")
    if held:
        lines.append(f"HELD: round {held.get('round_id')}: {held.get('reason')}"
                     + (" (settled: results stand)" if held.get("settled") else ""))
    places = {"off_table": "off the table", "in_shuffler": "in the shuffler (not counted)",
              "shuffling": "being counted in the shuffler", "verified": "verified in the shuffler",
              "delivered": "out of the shuffler", "in_shoe": "in the shoe", "in_play": "in play",
              "in_discard_rack": "in the discard rack", "out_of_service": "OUT OF SERVICE"}
    decks = "; ".join(f"{d['deck_id']} ({d['back_colour']}) {places.get(d['place'], d['place'])}"
                      for d in st.get("decks", []))
    if decks:
        lines.append(f"decks: {decks}")
    links = "; ".join(f"{name} {'up' if l.get('up') else 'DOWN'}" + (f" ({l['serial']})" if l.get("serial") else "")
                      for name, l in (st.get("links") or {}).items())
    if links:
        lines.append(f"links: {links}")
    w = st.get("waiting_for")
    lines.append(f"waiting for: {w['what']}" if w else "waiting for: nothing from a person")
    for a in st.get("alarms", []):
        lines.append(f"ALARM ({a['kind'].replace('_', ' ')}): {a['text']}")
    return "\n".join(lines)


def payout_lines(number: int | None, results: dict, dealer_hand: list[str]) -> list[str]:
    """The round's payouts, seat by seat, with each hand's name and each wager's outcome,
    as the dealer pays them before the collect (amounts in currency units)."""
    out = [f"round {number}: dealer {' '.join(dealer_hand)}; pay:"]
    for seat, res in sorted(results.items(), key=lambda kv: int(kv[0])):
        hand = res.get("hand", {}).get("text") or res.get("hand", {}).get("category", "")
        wagers = ", ".join(f"{w['wager'].replace('_', ' ')} {_money(w['amount']).strip()}"
                           + (f" ({w['line']} {w['payout']})" if w.get("line") else "")
                           for w in res.get("wagers", []))
        out.append(f"  seat {seat} {hand}, {res.get('decision')}: {wagers}; net {_money(res.get('net', 0)).strip()}")
    return out


class KeyConsole:
    """The terminal console: reads the lines a dealer or supervisor types, prompts for each
    action the table waits for, says the table's state in words (``s``) and each round's
    payouts before the collect (:meth:`follow`). Answers on ``out``."""

    def __init__(self, console: Console, supervisor: str, inp: IO[str], out: IO[str], *,
                 pin_check: Callable[[str, str], Actor] | None = None,
                 read_pin: Callable[[str], str] | None = None) -> None:
        """``pin_check(person, pin)``: the people file's check (:func:`pin_checker`),
        returning the person's :class:`~table.roles.Actor` or raising; without it a
        second supervisor cannot confirm at this terminal (``x``) and is told where to.
        ``read_pin(prompt)``: reads a PIN without echo (default: :func:`getpass.getpass`
        on a terminal, else the next input line)."""
        self.console, self.supervisor, self.inp, self.out = console, supervisor, inp, out
        self.pin_check = pin_check
        self.read_pin = read_pin or self._read_pin
        self._card_shown: int | None = None  # the unreadable card the last prompt asked for (_prompt)
        console.attached = True
        print(KEYS_HELP, file=out, flush=True)
        console.on_expectation(self._prompt)
        self._thread = threading.Thread(target=self._run, name="console-keys", daemon=True)
        self._thread.start()

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _prompt(self, exp: Expectation | None) -> None:
        if exp is not None:
            # The card an `m CARD` line is for: the unreadable card the last prompt shown named
            # (None once a prompt asks for anything else). Kept while the table is between
            # steps (exp None), so a line typed twice still names the card it was typed for.
            self._card_shown = exp.draw_index if exp.action == "confirm_card" else None
            line = prompt_for(exp)
            # The table waits again for the same after each bet: say it once, not after every seat.
            if line and line != getattr(self, "_last_prompt", None):
                self._last_prompt = line
                self._say(f">>> {line}")

    def follow(self, controller, *, payouts: bool = True) -> None:
        """Print what the table does that the dealer acts on: payouts before the collect
        (``payouts``; off where nobody pays by hand, a simulated table, whose round lines
        say the same), holds and voids (``controller``: the
        :class:`~table.controller.TableController`)."""
        self._payouts = payouts
        controller.subscribe(self._on_table_event)

    def _on_table_event(self, ev) -> None:
        if ev.kind == "round_settled" and "results" in ev.data and getattr(self, "_payouts", True):
            for line in payout_lines(ev.data.get("number"), ev.data["results"], ev.data.get("dealer_hand", [])):
                self._say(line)
        elif ev.kind == "round_held":
            self._say(f"!!! round held: {ev.data.get('reason')}")
        elif ev.kind == "round_voided":
            self._say(f"!!! round voided: {ev.data.get('reason')}; wagers returned")
        elif ev.kind == "incident":
            self._say(f"!!! incident: {ev.data.get('what')}")
        elif ev.kind == "device_fault":  # docs/device-faults.md: what to do, said at the terminal too
            self._say(f"!!! the {ev.data.get('source')}: {ev.data.get('reason')}: the table waits for "
                      f"{ev.data.get('waiting_for')}")
        elif ev.kind == "device_back":
            self._say(f"the {ev.data.get('source')} answers again: the table goes on")

    def _reply(self, action: str, result: dict) -> None:
        if action == "status":
            self._say(describe_status(result))
        elif action == "place_bets" and result.get("ok"):
            self._say(f"<<< bets: {describe_bets(result)}")
        elif result.get("ok"):
            what = result.get("what") or ", ".join(f"{k} {v}" for k, v in result.items()
                                                   if k not in ("ok", "accepted", "id"))
            self._say(f"<<< {action.replace('_', ' ')}: done" + (f" ({what})" if what else ""))
        else:
            said = action.replace('_', ' ')
            error = str(result.get("error", "refused"))
            self._say(f"<<< {said} refused: {error.removeprefix(f'{said} refused: ')}")  # not "void refused: void refused"

    def _read_pin(self, prompt: str) -> str:
        isatty = getattr(self.inp, "isatty", None)
        if isatty is not None and isatty():
            return getpass.getpass(prompt, stream=self.out)
        self.out.write(prompt)
        self.out.flush()
        return self.inp.readline().rstrip("\r\n")

    def _second_supervisor(self, line: str) -> Command | None:
        """``x NAME``: the second supervisor of the two-person rule, proved by NAME's PIN
        (the people file), never by a typed name alone: whoever is at the keyboard
        could type anyone's."""
        try:
            name = " ".join(shlex.split(line.strip())[1:]).strip()
        except ValueError:
            name = ""
        if not name:
            self._say("<<< confirm void: say who confirms: x NAME")
            return None
        if self.pin_check is None:
            self._say("<<< confirm void refused: this terminal cannot tell who types (no people file); the second "
                      "supervisor confirms on their own signed-in screen or control-socket account")
            return None
        actor = self._proven_supervisor(name, "confirm void")
        return None if actor is None else Command("confirm_void", {"supervisor": actor.person}, actor=actor)

    def _proven_void(self, cmd: Command) -> Command | None:
        """``v REASON``: the void asked by the terminal's supervisor, proved by their PIN
        when the people file can (the two-person rule: a void after the decisions is
        asked by one supervisor and confirmed by another, and a name typed at
        ``tablectl run --supervisor`` proves nobody, so ``x`` with one's own PIN would
        otherwise confirm one's own void). Without a people file the terminal cannot
        tell who types: a void that needs a second supervisor is refused here."""
        if self.pin_check is None:
            if self.console.void_policy.needs_second:
                self._say("<<< void refused: the decisions are final, so the void needs two supervisors each "
                          "proved, and this terminal cannot tell who types (no people file); ask on a signed-in "
                          "screen or control-socket account")
                return None
            return cmd
        actor = self._proven_supervisor(self.supervisor, "void")
        return None if actor is None else Command("void", {**cmd.args, "supervisor": actor.person}, actor=actor)

    def _proven_supervisor(self, name: str, what: str) -> Actor | None:
        """``name``'s PIN asked and checked (``pin_check``): the supervisor it proves, or
        None after saying why ``what`` is refused (a wrong PIN, a lock-out, not a supervisor)."""
        return self._proven_as(name, Role.SUPERVISOR, what)

    def _proven_as(self, name: str, role: Role, what: str, label: str | None = None,
                   rule: str | None = None) -> Actor | None:
        """``name`` proved by the PIN asked here (without echo) as a person of ``role``, or
        None after saying why ``what`` is refused (a wrong PIN, a lock-out, another role);
        ``label`` names them in the prompt and the refusal (e.g. "incoming dealer")."""
        assert self.pin_check is not None
        try:
            actor = self.pin_check(name, self.read_pin(f"PIN for {name} ({label}): " if label else f"PIN for {name}: "))
        except Exception as exc:  # noqa: BLE001 - a wrong PIN, a lock-out, an unreadable people file
            self._say(f"<<< {what} refused: " + (f"the {label}: " if label else "") + str(exc))
            return None
        if actor.role is not role:
            self._say(f"<<< {what} refused: {name} is not a {role.value}" + (f"; {rule}" if rule else ""))
            return None
        return actor

    def _table_procedure(self, line: str) -> Command | None:
        """A gaming-day line: the slip signed by the dealer it names and the terminal's
        supervisor, each proved by their PIN (asked without echo; COMAR 36.05.03.10: two
        people). Without a people file nobody can be proved here: refused, saying where."""
        try:
            procedure, dealer, slip = parse_procedure(line)
        except ValueError as exc:
            self._say(f"<<< table procedure: {exc}")
            return None
        said = procedure.replace("_", " ")
        if self.pin_check is None:
            self._say(f"<<< {said} refused: this terminal cannot tell who types (no people file); the dealer and "
                      "the supervisor sign on the supervisor's screen or the control socket")
            return None
        signer = self._proven_as(dealer, Role.DEALER, said, "dealer", "the slip is countersigned by a dealer")
        if signer is None:
            return None
        if procedure == "shift_change":  # the incoming dealer takes the inventory over: they sign too
            opener = slip["opener"]
            if opener == signer.person:
                self._say(f"<<< {said} refused: {opener} cannot hand the shift over to themself")
                return None
            if self._proven_as(opener, Role.DEALER, said, "incoming dealer", "a shift is taken over by a dealer") is None:
                return None
        actor = self._proven_supervisor(self.supervisor, said)
        if actor is None:
            return None
        return Command("table_procedure", {"procedure": procedure, "slip": slip, "dealer": signer.person,
                                           "supervisor": actor.person}, actor=actor)

    def _procedure_reply(self, result: dict) -> None:
        if not result.get("ok"):
            self._reply("table_procedure", result)
            return
        b = result.get("slip", {})
        what = (f"total {money(b['total'])}" if "total" in b else f"{money(b.get('amount', 0))}"
                + (f" for {b['gaming_day']}" if "gaming_day" in b else ""))
        self._say(f"<<< {b.get('procedure', '').replace('_', ' ')}: slip {b.get('slip')} signed by "
                  f"{b.get('dealer')} and {b.get('supervisor')} ({what})")

    def _run(self) -> None:
        for line in self.inp:
            if line.strip().split(" ", 1)[0].lower() in PROCEDURE_WORDS:
                cmd = self._table_procedure(line)
                if cmd is not None:
                    cmd.reply = lambda result: self._procedure_reply(result)
                    self.console.submit(cmd)
                continue
            if line.strip()[:1].lower() == "x" and line.strip()[1:2] in ("", " ", "\t"):
                cmd = self._second_supervisor(line)
                if cmd is not None:
                    cmd.reply = lambda result, a=cmd.action: self._reply(a, result)
                    cmd.done = cmd.reply
                    self.console.submit(cmd)
                continue
            cmd = parse_key_line(line, self.supervisor)
            if cmd is None and line.strip()[:2].lower() in ("b", "b ", "b\t"):
                try:
                    parse_bet_args(shlex.split(line.strip())[1:])
                except ValueError as exc:
                    self._say(f"<<< place bets: {exc}")
                    continue
            if cmd is None:
                if line.strip():
                    self._say(KEYS_HELP)
                continue
            if cmd.action == "confirm_card" and "draw_index" not in cmd.args:
                # The card is for the one the last prompt shown named (taken before the PIN is
                # asked), not for whatever the table waits for when the line is read: a line
                # typed twice is refused for the next unreadable card, never taken as its face,
                # also when it arrives while the table is between steps.
                shown = self._card_shown
                if shown is None:
                    self._say(f"<<< confirm card refused: no unreadable card is asked for on this terminal now; "
                              f"to enter one, name it as its prompt counts it: m {cmd.args['card']} N")
                    continue
                cmd.args["draw_index"] = shown
            if cmd.action == "void":
                cmd = self._proven_void(cmd)
                if cmd is None:
                    continue
            elif cmd.action in PROVEN_ACTIONS and self.pin_check is not None:
                # Every supervisor action at the terminal is a person's, proved:
                # the --supervisor name is typed, and anyone at the keyboard could type it.
                actor = self._proven_supervisor(self.supervisor, cmd.action.replace("_", " "))
                if actor is None:
                    continue
                cmd = Command(cmd.action, {**cmd.args, "supervisor": actor.person}, actor=actor)
            cmd.reply = lambda result, a=cmd.action: self._reply(a, result)
            cmd.done = lambda result, a=cmd.action: self._reply(a, result)
            self.console.submit(cmd)


def pin_checker(auth: Any, *, source: str = "terminal", origin: str = "table") -> Callable[[str, str], Actor]:
    """``(person, pin) -> Actor`` from an :class:`~table.interfaces.auth.Authenticator`:
    the same Argon2id check and lock-outs as a sign-in on the web, with no session
    left behind. ``source``: the front door asking (``terminal``, ``control-socket``);
    ``origin``: whose failure count it uses (the terminal is at the table: ``table``;
    the control socket ``other``, so guesses there never lock anyone out at the
    table's own screens). Raises ``PermissionError`` (unknown person or wrong PIN),
    :class:`~table.interfaces.auth.SignInLocked`."""

    def check(person: str, pin: str) -> Actor:
        return auth.check_pin(person, pin, address=source, source=source, origin=origin)

    check.people = auth.people  # type: ignore[attr-defined]  # who is a person (the count room's ids)
    check.end_sessions = auth.end_sessions  # type: ignore[attr-defined]  # a shift handed over
    return check

