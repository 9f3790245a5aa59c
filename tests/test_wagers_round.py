"""Wagers as placed, through the real round (issue 23): the dealer places each seat's bets
on the console within the table's limits, closes them, and only the seats with a wager
are dealt; the settlement equals ``tablectl settle`` on the same round; a refusal names
the seat, the wager and the limit; a restart mid-round keeps the bets as placed; a
simulated table's players vary their bets, leave seats empty and bet Pair Plus alone."""

from __future__ import annotations

import json
import subprocess
import threading
from contextlib import contextmanager

import pytest

from protocols.cards import BackColour
from simulators.table import SimulatedTable
from table.bets import Limit, TableLimits
from table.console import Command, Console, console_decisions
from table.controller import TableTiming
from table.errors import DeviceTimeout, RoundVoided
from table.journal import Journal, verify
from table.keys import generate
from table.rules.settlement import Tables
from table.rules.strategy import q64_player
from table.players import SimulatedPlayers

from console_helpers import tablectl
from tables import assembled

RED, BLUE = BackColour.RED, BackColour.BLUE
KEY = generate()
LIMITS = TableLimits(ante=Limit(500, 50_000, 500), pair_plus=Limit(500, 10_000, 500),
                     six_card=Limit(500, 2_500, 500), progressive=Limit(100, 100, 100))
PAYTABLES = {"ante_bonus": "pa-649a12b-1", "pair_plus": "example-pp-649a12d",
             "six_card_bonus": "example-6cb-649a12f-e"}


def tables() -> Tables:
    return Tables.load(PAYTABLES["ante_bonus"], pair_plus=PAYTABLES["pair_plus"],
                       six_card_bonus=PAYTABLES["six_card_bonus"])


@contextmanager
def betting_table(tmp_path, *, seats=7, seed=11, journal_path=None, sim=None, dealer=None, wait_s=86_400.0,
                  limits=LIMITS, ante_cents=1000, auto_dealer=False, players=None):
    """A real-table controller (the dealer's confirmations on the console) on emulated devices."""
    own = sim is None
    ctx = SimulatedTable((RED, BLUE), seed=seed) if own else None
    sim = ctx.__enter__() if own else sim
    journal = Journal(journal_path or tmp_path / "journal.sqlite3", key=KEY, table_id="t-wagers")
    console = Console()
    console.attached = True
    table = assembled(sim, journal, dealer=dealer, console=console, auto_dealer=auto_dealer,
                      decide=console_decisions(console) if not auto_dealer else q64_player, players=players,
                      seats=seats, ante_cents=ante_cents, tables=tables(), limits=limits,
                      timing=TableTiming(event_timeout_s=5, dealer_timeout_s=wait_s))
    try:
        yield table.controller, sim, console, journal
    finally:
        table.close()
        journal.close()
        if own:
            ctx.__exit__(None, None, None)


class Dealer:
    """The dealer at the console: answers what the table waits for, from a plan of bets
    and decisions; keeps every reply."""

    def __init__(self, console: Console, bets: list[dict], decisions: dict[int, str]) -> None:
        self.console, self.bets, self.decisions = console, list(bets), decisions
        self.replies: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        console.on_expectation(self.on_wait)

    def send(self, action: str, args: dict) -> None:
        self.console.submit(Command(action, args, lambda r, a=action: self.replies.append((a, r))))

    def on_wait(self, exp) -> None:
        if exp is None:
            return
        with self.lock:
            if exp.action == "place_bets" and "place_bets" in exp.accepts:
                if self.bets:
                    self.send("place_bets", self.bets.pop(0))
                else:
                    self.send("close_bets", {})
            elif exp.action == "decide":
                self.send("decide", {"seat": exp.seat, "decision": self.decisions[exp.seat]})
            elif exp.action == "confirm_collect":
                self.send("confirm_collect", {})


BETS = [{"seat": 1, "ante": 2_500, "pair_plus": 1_000},
        {"seat": 3, "pair_plus": 1_500},                                    # Pair Plus alone (649a.7)
        {"seat": 4, "ante": 500, "six_card": 500},
        {"seat": 6, "ante": 10_000},
        {"seat": 7, "ante": 500},
        {"seat": 7, "empty": True}]                                         # sat down, then left


def test_a_round_with_varied_bets_and_empty_seats_settles_as_tablectl_settle_does(tmp_path):
    with betting_table(tmp_path) as (ctl, sim, console, journal):
        dealer = Dealer(console, BETS, {1: "play", 4: "fold", 6: "play"})
        ctl.prepare()
        result = ctl.play_round()
    assert [s.seat for s in result.seats] == [1, 3, 4, 6]  # only the seats with a wager were dealt
    assert len(result.reads) == 3 * 5  # four seats and the dealer, three cards each
    assert next(s for s in result.seats if s.seat == 3).decision is None  # no decision to make
    assert all(r["ok"] for _, r in dealer.replies), dealer.replies
    assert [a for a, _ in dealer.replies].count("decide") == 3  # seats 1, 4, 6: not the Pair Plus-only seat
    # The same round, as a supervisor's dispute file: tablectl settle gives the same money.
    stakes = {1: {"ante": 2_500, "pair_plus": 1_000}, 3: {"pair_plus": 1_500}, 4: {"ante": 500, "six_card": 500},
              6: {"ante": 10_000}}
    round_file = tmp_path / "round.json"
    round_file.write_text(json.dumps({
        "paytables": PAYTABLES,
        "dealer": [str(c) for c in result.dealer_hand],
        "seats": [{"seat": s.seat, "cards": [str(c) for c in s.cards], "wagers": stakes[s.seat],
                   **({"decision": s.decision.value} if s.decision is not None else {})} for s in result.seats],
    }))
    out = subprocess.run(tablectl() + ["settle", str(round_file)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    settled = {s["seat"]: s["net"] for s in json.loads(out.stdout)["seats"]}
    assert settled == {s.seat: s.net_cents for s in result.seats}
    # the journal froze the bets before the first card, and the stream published them (816a.1)
    steps = [e.body for e in journal_entries(tmp_path, "round")]
    closed = next(b for b in steps if b.get("step") == "close_bets")
    assert closed["wagers"] == {str(s): w for s, w in stakes.items()}
    assert verify(tmp_path / "journal.sqlite3", public_keys=(KEY.public,)).ok


def journal_entries(tmp_path, kind):
    with Journal(tmp_path / "journal.sqlite3", key=KEY, table_id="t-wagers") as j:
        return list(j.entries(kind))


@pytest.mark.parametrize("bet, code, text", [
    ({"seat": 2, "ante": 400}, "below_minimum", "seat 2: ante $4 is below the table minimum of $5"),
    ({"seat": 2, "ante": 60_000}, "above_maximum", "seat 2: ante $600 is above the table maximum of $500"),
    ({"seat": 2, "ante": 2_600}, "not_chip_multiple", "seat 2: ante $26 is not a multiple of the smallest chip, $5"),
    ({"seat": 2, "pair_plus": 500, "six_card": 500}, "needs_ante", "seat 2: a Six Card Bonus wager needs an ante"),
    ({"seat": 8, "ante": 500}, "no_such_seat", "seat 8 is not at this table"),
])
def test_each_refused_bet_names_seat_wager_and_limit_and_the_table_goes_on_taking_bets(tmp_path, bet, code, text):
    with betting_table(tmp_path, seats=7) as (ctl, sim, console, journal):
        dealer = Dealer(console, [bet, {"seat": 1, "ante": 500}], {1: "fold"})
        ctl.prepare()
        result = ctl.play_round()
    refused = [r for a, r in dealer.replies if a == "place_bets" and not r["ok"]]
    assert len(refused) == 1 and refused[0]["code"] == code and text in refused[0]["error"], refused
    assert [s.seat for s in result.seats] == [1]


def test_closing_bets_with_no_seat_in_play_is_refused(tmp_path):
    with betting_table(tmp_path) as (ctl, sim, console, journal):
        answers: list[dict] = []
        state = {"asked": 0}

        def on_wait(exp):
            if exp is None or exp.action not in ("place_bets", "decide", "confirm_collect"):
                return
            if exp.action == "place_bets":
                state["asked"] += 1
                if state["asked"] == 1:
                    console.submit(Command("close_bets", {}, answers.append))  # nobody has bet
                elif state["asked"] == 2:
                    console.submit(Command("place_bets", {"seat": 2, "ante": 500}, answers.append))
                else:
                    console.submit(Command("close_bets", {}, answers.append))
            elif exp.action == "decide":
                console.submit(Command("decide", {"seat": exp.seat, "decision": "fold"}, answers.append))
            else:
                console.submit(Command("confirm_collect", {}, answers.append))

        console.on_expectation(on_wait)
        ctl.prepare()
        result = ctl.play_round()
    assert answers[0]["ok"] is False and answers[0]["code"] == "no_seat_in_play"
    assert [s.seat for s in result.seats] == [2]


class StoppingDealer:
    """The dealer's hands, who stop drawing after ``n`` cards (the round then waits, and is held)."""

    def __init__(self, hands, n: int) -> None:
        self.hands, self.n = hands, n

    def __getattr__(self, name):
        return getattr(self.hands, name)

    def draw_card(self) -> None:
        if self.n > 0:
            self.n -= 1
            self.hands.draw_card()


def test_a_restart_mid_round_keeps_the_bets_as_placed(tmp_path):
    """The dealer stops mid-deal, the round is held and the controller stops; the restarted
    table holds the round; a supervisor releases it and it settles the bets frozen before."""
    jpath = tmp_path / "journal.sqlite3"
    with SimulatedTable((RED, BLUE), seed=5) as sim:
        with betting_table(tmp_path, journal_path=jpath, sim=sim, dealer=StoppingDealer(sim.dealer, 2),
                           wait_s=1.0) as (ctl, _, console, journal):
            Dealer(console, [{"seat": 2, "ante": 1_500, "pair_plus": 500}, {"seat": 5, "pair_plus": 2_000}], {})
            ctl.prepare()
            with pytest.raises(DeviceTimeout):  # nothing from the shoe: held for a supervisor
                ctl.play_round()
        with betting_table(tmp_path, journal_path=jpath, sim=sim) as (ctl, _, console, journal):
            def supervisor(exp):
                if exp is not None and "release_hold" in exp.accepts:
                    console.submit(Command("release_hold", {"supervisor": "S-1"}))

            console.on_expectation(supervisor)
            Dealer(console, [], {2: "play"})
            ctl.prepare()
            assert ctl.held is not None and ctl.held.placed == {"2": 2_000, "5": 2_000}
            result = ctl.play_round()
    assert [s.seat for s in result.seats] == [2, 5]
    stakes = {s.seat: {w.wager: w.stake for w in s.settlement.results} for s in result.seats}
    assert stakes[2]["ante"] == 1_500 and stakes[2]["pair_plus"] == 500 and stakes[5] == {"pair_plus": 2_000}
    assert verify(jpath, public_keys=(KEY.public,)).ok


def test_a_simulated_table_shows_varied_stakes_empty_seats_and_pair_plus_alone():
    out = subprocess.run(tablectl() + ["run", "--simulate", "--rounds", "12", "--seats", "7", "--seed", "3",
                                       "--pair-plus", "example-pp-649a12d", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rounds = json.loads(out.stdout)["rounds"]
    antes = {w["stake"] for r in rounds for s in r["seats"] for w in s["wagers"] if w["wager"] == "ante"}
    assert len(antes) >= 3  # players bet what they like
    assert any(len(r["seats"]) < 7 for r in rounds)  # empty seats are not dealt
    pp_only = [s for r in rounds for s in r["seats"] if s["decision"] is None]
    assert pp_only and all({w["wager"] for w in s["wagers"]} == {"pair_plus"} for s in pp_only)


class Killed(BaseException):
    """The controller stops at this instant (as at a power cut): nothing after it runs."""


def release(console: Console) -> None:
    console.on_expectation(lambda exp: exp is not None and "release_hold" in exp.accepts
                           and console.submit(Command("release_hold", {"supervisor": "S-1"})))


def test_a_simulated_table_stopped_while_bets_are_open_plays_the_released_round_with_its_bets(tmp_path):
    """Review: a simulated table stopped between the round's open and its close_bets; the
    released round is dealt to the seats its players bet on, not left open in the journal."""
    jpath = tmp_path / "journal.sqlite3"
    with SimulatedTable((RED, BLUE), seed=5) as sim:
        players = SimulatedPlayers(3, LIMITS, 7, ("pair_plus", "six_card"))
        with betting_table(tmp_path, journal_path=jpath, sim=sim, auto_dealer=True, players=players) as (
                ctl, _, console, journal):
            ctl.prepare()
            stop = {"opened": None}

            def on_event(ev):
                if ev.kind == "round_opened":
                    stop["opened"] = ev.round_id
                    raise Killed  # journaled "open": the table stops before close_bets
            ctl.subscribe(on_event)
            with pytest.raises(Killed):
                ctl.play_round()
        opened = [e.body for e in journal_entries(tmp_path, "round") if e.body.get("step") == "open"][-1]
        with betting_table(tmp_path, journal_path=jpath, sim=sim, auto_dealer=True,
                           players=SimulatedPlayers(4, LIMITS, 7, ())) as (ctl, _, console, journal):
            release(console)
            ctl.prepare()
            result = ctl.play_round()
    assert result.round_id == stop["opened"]
    assert {str(s.seat) for s in result.seats} == set(opened["wagers"])
    assert verify(jpath, public_keys=(KEY.public,)).ok


@pytest.mark.parametrize("ante", [50, 150, 200_000])
def test_a_fixed_bet_outside_the_default_limits_is_dealt_on_a_table_that_sets_none(tmp_path, ante):
    """Review: an old client that only closes bets on a table with no [limits], and a fixed
    --ante-cents the default limits would refuse: the fixed bet on every seat, as before."""
    with betting_table(tmp_path, seats=3, limits=None, ante_cents=ante) as (ctl, sim, console, journal):
        answers: list[dict] = []

        def on_wait(exp):
            if exp is None:
                return
            if exp.action == "close_bets":
                console.submit(Command("close_bets", {}, answers.append))
            elif exp.action == "decide":
                console.submit(Command("decide", {"seat": exp.seat, "decision": "fold"}))
            elif exp.action == "confirm_collect":
                console.submit(Command("confirm_collect", {}))
        console.on_expectation(on_wait)
        ctl.prepare()
        result = ctl.play_round()
    assert answers[0]["ok"] and [s.seat for s in result.seats] == [1, 2, 3]
    assert {s.settlement.results[0].stake for s in result.seats} == {ante}
    out = subprocess.run(tablectl() + ["run", "--simulate", "--rounds", "1", "--seats", "2", "--seed", "1",
                                       "--ante-cents", str(ante)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_a_void_after_a_stop_while_bets_are_open_returns_the_bets_placed(tmp_path):
    """Review: the table stops after two bets are placed, before close_bets; after the restart
    a supervisor voids the held round, and the journal returns what was on the layout."""
    jpath = tmp_path / "journal.sqlite3"
    with SimulatedTable((RED, BLUE), seed=5) as sim:
        with betting_table(tmp_path, journal_path=jpath, sim=sim) as (ctl, _, console, journal):
            asked = {"n": 0}

            def third(exp):
                if exp is not None and exp.action == "place_bets":
                    asked["n"] += 1
                    if asked["n"] == 3:  # both bets answered: stop instead of closing
                        raise Killed
            console.on_expectation(third)  # told before the dealer, who would close bets now
            Dealer(console, [{"seat": 2, "ante": 1_500, "pair_plus": 500}, {"seat": 5, "pair_plus": 2_000}], {})
            ctl.prepare()
            with pytest.raises(Killed):
                ctl.play_round()
        with betting_table(tmp_path, journal_path=jpath, sim=sim) as (ctl, _, console, journal):
            console.on_expectation(lambda exp: exp is not None and exp.action == "void" and console.submit(
                Command("void", {"supervisor": "S-1", "reason": "stopped during betting"})))
            ctl.prepare()
            assert ctl.held is not None and ctl.held.placed == {"2": 2_000, "5": 2_000}
            with pytest.raises(RoundVoided):
                ctl.play_round()
    voided = [e.body for e in journal_entries(tmp_path, "round") if e.body.get("step") == "voided"]
    assert voided[0]["returned_cents"] == {"2": 2_000, "5": 2_000}
