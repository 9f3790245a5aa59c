"""place_bets on the front doors (issue 23): the control socket (the one dispatcher every
transport uses), the terminal's short form, refusals with their codes, and the bets_closed
event carrying the wagers as frozen."""

from __future__ import annotations

import io
import re
import json
import threading
import time

import jsonschema
import pytest

from event_checks import SCHEMAS, assert_valid
from table.bets import BetBook, BetRefused, Limit, TableLimits
from table.console import Command, Console
from table.events import derive
from table.interfaces.api_schema import ACTIONS, TABLE_CODES
from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.terminal import KeyConsole, parse_bet_args, parse_key_line
from table.roles import PERMISSIONS, Role
from table.rules.settlement import Wagers

LIMITS = TableLimits(ante=Limit(500, 50_000, 500), pair_plus=Limit(500, 10_000, 500),
                     six_card=Limit(500, 2_500, 500), progressive=Limit(100, 100, 100))


class BettingTable:
    """A stand-in for the round's betting step, as the controller runs it: waits for
    place_bets or close_bets on the console, answers each bet from the book, and closes
    the bets when asked (refused while no seat is in play)."""

    def __init__(self, console: Console, book: BetBook) -> None:
        self.console, self.book = console, book
        self.frozen: dict[int, Wagers] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            cmd = self.console.wait(("place_bets", "close_bets"), "the dealer to place bets, then close them",
                                    action="place_bets", voids=False)
            if cmd.action == "place_bets":
                cmd.answer(**self.book.apply(cmd.args))
                continue
            try:
                self.frozen = self.book.freeze()
            except BetRefused as exc:
                cmd.answer(**exc.to_answer())
                continue
            cmd.answer(ok=True, seats=list(self.frozen))
            self.console.expect(None)  # dealing: nothing a person does now
            return

    def finish(self) -> None:
        """Close the bets if the test left them open (the thread ends)."""
        if self.thread.is_alive():
            if not self.book.seats_in_play:
                self.console.submit(Command("place_bets", {"seat": 1, "ante": 500}, lambda r: None))
            self.console.submit(Command("close_bets", {}, lambda r: None))
        self.thread.join(10)


@pytest.fixture
def table(tmp_path):
    console = Console()
    sock = ControlSocket(tmp_path / "ctl.sock", console)
    t = BettingTable(console, BetBook(LIMITS, 6))
    deadline = time.monotonic() + 10
    while console.expectation is None and time.monotonic() < deadline:  # the wait has begun
        time.sleep(0.01)
    yield sock.path, t
    t.finish()
    sock.close()


def test_bets_are_placed_and_closed_over_the_control_socket(table):
    path, t = table
    ok = send(path, {"action": "place_bets", "seat": 3, "ante": 2_500, "pair_plus": 1_000, "six_card": 500,
                     "progressive": 100})
    assert ok == {"ok": True, "seats": {"3": {"ante": 2_500, "pair_plus": 1_000, "six_card": 500, "progressive": 100}},
                  "in_play": [3]}
    assert send(path, {"action": "place_bets", "seat": 5, "pair_plus": 500})["in_play"] == [3, 5]
    assert send(path, {"action": "place_bets", "seat": 5, "empty": True})["in_play"] == [3]
    assert send(path, {"action": "close_bets"}) == {"ok": True, "seats": [3]}
    t.thread.join(10)
    assert t.frozen == {3: Wagers(2_500, 1_000, 500, 100)}
    # closed: the table no longer waits for bets (816a.1: final)
    late = send(path, {"action": "place_bets", "seat": 3, "ante": 50_000})
    assert late["ok"] is False and late["code"] == "not_expected"


@pytest.mark.parametrize("request_, code, seat, wager, limit", [
    ({"seat": 2, "ante": 400}, "below_minimum", 2, "ante", 500),
    ({"seat": 2, "ante": 60_000}, "above_maximum", 2, "ante", 50_000),
    ({"seat": 2, "ante": 2_600}, "not_chip_multiple", 2, "ante", 500),
    ({"seat": 2, "pair_plus": 500, "six_card": 500}, "needs_ante", 2, "six_card", None),
    ({"seat": 2, "pair_plus": 500, "progressive": 100}, "needs_ante", 2, "progressive", None),
    ({"seat": 7, "ante": 500}, "no_such_seat", None, None, None),  # the layout has 6 seats
    ({"seat": 2}, "no_wager", 2, None, None),
    ({"all_seats": True, "same_as_last": True}, "no_last_round", None, None, None),
])
def test_each_refusal_carries_its_code_and_names_seat_wager_and_limit(table, request_, code, seat, wager, limit):
    path, _ = table
    r = send(path, {"action": "place_bets", **request_})
    assert r["ok"] is False and r["code"] == code, r
    assert r.get("seat") == seat and r.get("wager") == wager and r.get("limit_cents") == limit
    assert code in TABLE_CODES
    if seat is not None:
        assert r["error"].startswith(f"seat {seat}: ")
    if limit is not None:
        assert f"${limit // 100:,}" in r["error"]
    # the reply is what the published schema says a reply is
    schema = json.loads((SCHEMAS / "api-reply-v1.schema.json").read_text())
    jsonschema.validate(r, schema)


def test_closing_with_no_seat_in_play_is_refused_and_betting_goes_on(table):
    path, t = table
    r = send(path, {"action": "close_bets"})
    assert r["ok"] is False and r["code"] == "no_seat_in_play"
    assert send(path, {"action": "place_bets", "all_seats": True, "table_minimum": True})["in_play"] == [1, 2, 3, 4,
                                                                                                         5, 6]
    assert send(path, {"action": "close_bets"})["ok"] is True
    t.thread.join(10)
    assert t.frozen == {s: Wagers(500) for s in range(1, 7)}


@pytest.mark.parametrize("bad", [
    {"seat": 8, "ante": 500}, {"seat": 2, "ante": -1}, {"seat": 2, "ante": "500"}, {"seat": 2, "ante": 5.5},
    {"seat": 2, "empty": False}, {"seat": 2, "pair_plus": 100_000_001}, {"seat": 2, "tip": 100},
])
def test_arguments_that_break_the_schema_never_reach_the_table(table, bad):
    path, t = table
    r = send(path, {"action": "place_bets", **bad})
    assert r["ok"] is False and r["code"] == "bad_request", r
    assert t.book.seats_in_play == ()


def test_the_core_checks_the_arguments_and_the_role_itself():
    """A front door that forgot the schema (or an in-process caller) is still refused by the console."""
    console = Console()
    answers: list[dict] = []
    from table.roles import Actor
    for args in ({"ante": 500}, {"seat": 1, "all_seats": True}, {"seat": True, "ante": 500},
                 {"seat": 1, "ante": 5.0}, {"seat": 1, "bogus": 1}):
        console.submit(Command("place_bets", dict(args), answers.append, Actor("D-1", Role.DEALER)))
    assert [a["code"] for a in answers] == ["bad_request"] * 5
    console.submit(Command("place_bets", {"seat": 1, "ante": 500}, answers.append, Actor("P-1", Role.PIT)))
    assert answers[-1]["code"] == "forbidden"
    assert PERMISSIONS["place_bets"] == frozenset({Role.DEALER, Role.SUPERVISOR})
    assert ACTIONS["place_bets"].kind == "command"


# -- the terminal's short form -------------------------------------------------------------------


@pytest.mark.parametrize("line, args", [
    ("b 3 a25 pp10 6c5 pr1", {"seat": 3, "ante": 2_500, "pair_plus": 1_000, "six_card": 500, "progressive": 100}),
    ("b 1 a12.50", {"seat": 1, "ante": 1_250}),
    ("B 2 PP5", {"seat": 2, "pair_plus": 500}),
    ("b 3 -", {"seat": 3, "empty": True}),
    ("b 3 =", {"seat": 3, "same_as_last": True}),
    ("b 4 min", {"seat": 4, "table_minimum": True}),
    ("b * min", {"all_seats": True, "table_minimum": True}),
    ("b * =", {"all_seats": True, "same_as_last": True}),
    ("b * -", {"all_seats": True, "empty": True}),
])
def test_the_terminal_short_form(line, args):
    cmd = parse_key_line(line, "S-1")
    assert cmd is not None and cmd.action == "place_bets" and cmd.args == args


@pytest.mark.parametrize("line, words", [
    ("b", "say which seat"), ("b x a25", "not a seat"), ("b 3", "say what seat 3 bets"),
    ("b 3 a2.555", "not an amount in dollars"), ("b 3 q5", "a wager is a25"), ("b 3 a5 a10", "given twice"),
    ("b * a25", "b * takes -, = or min"),
])
def test_the_short_form_says_what_is_wrong(line, words):
    assert parse_key_line(line, "S-1") is None
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_bet_args(line.split()[1:])


def test_a_dealer_bets_at_the_terminal(table):
    path, t = table
    lines = io.StringIO("b 3 a25 pp10\nb 2 pp5 6c5\nb 9 a5\nb 3 q\nb 5 pp5\nc\n")
    out = io.StringIO()
    KeyConsole(t.console, "S-1", lines, out)
    t.thread.join(20)
    assert t.frozen == {3: Wagers(2_500, 1_000), 5: Wagers(0, 500)}
    deadline = time.monotonic() + 10
    while "close bets: done" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    text = out.getvalue()
    assert "<<< bets: seat 3 ante $25, Pair Plus $10 (in play: 3)" in text
    assert "<<< place bets refused: seat 2: a Six Card Bonus wager needs an ante" in text
    assert "<<< place bets refused: seat 9 is not at this table" in text
    assert "<<< place bets: 'q': a wager is a25" in text
    assert "<<< bets: seat 5 Pair Plus $5 (in play: 3, 5)" in text
    prompt = ">>> Dealer: the table waits for the dealer to place bets, then close them: b SEAT a25 pp10"
    assert text.count(prompt) == 1  # said once, not after every seat


# -- the bets_closed event -------------------------------------------------------------------------


def test_bets_closed_publishes_the_seats_in_play_and_their_wagers():
    body = {"step": "close_bets", "number": 4, "wagers": {"5": {"pair_plus": 500}, "2": {"ante": 2_500,
                                                                                         "progressive": 100}}}
    ev = derive(9, 30, "2026-12-01T22:00:00.000000+00:00", "round", "r00004-abcdef12", body, "t1",
                lambda rid: []).event
    assert ev["type"] == "bets_closed"
    assert ev["data"] == {"number": 4, "seats": [2, 5],
                          "wagers": {"2": {"ante": 2_500, "pair_plus": 0, "six_card": 0, "progressive": 100},
                                     "5": {"ante": 0, "pair_plus": 500, "six_card": 0, "progressive": 0}}}
    assert_valid([ev])
    old = derive(9, 30, "2026-12-01T22:00:00.000000+00:00", "round", "r1", {"step": "close_bets", "number": 4},
                 "t1", lambda rid: []).event
    assert old["data"] == {"number": 4}  # an older journal's entry: still valid
    assert_valid([old])


def test_decisions_final_shows_a_pair_plus_only_seats_cards_with_no_decision():
    body = {"step": "decisions_done", "number": 4, "decisions": {"1": "play"},
            "hands": {"1": ["As", "Kd", "2c"], "5": ["7h", "7d", "Qs"]}}
    ev = derive(12, 40, "2026-12-01T22:00:00.000000+00:00", "round", "r00004-abcdef12", body, "t1",
                lambda rid: []).event
    assert ev["data"]["seats"] == {"1": {"decision": "play", "cards": ["As", "Kd", "2c"]},
                                   "5": {"decision": None, "cards": ["7h", "7d", "Qs"]}}
    assert_valid([ev])
