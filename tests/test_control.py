"""The control socket and terminal keys feed the same console."""

from __future__ import annotations

import os
import threading

from table.interfaces.auth import Authenticator, PeopleFile
from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.terminal import parse_key_line, pin_checker
from table.console import Command, Console, Expectation, VoidPolicy
from table.roles import Actor, Role

from console_helpers import CHEAP


def test_socket_commands_reach_the_console_and_get_answers(tmp_path):
    console = Console()
    console.status = lambda: {"rounds_played": 3}
    os.chmod(tmp_path, 0o700)
    people = PeopleFile(tmp_path / "people.toml")
    people.add("S-1", Role.SUPERVISOR, "590317", hasher=CHEAP)
    auth = Authenticator(tmp_path / "people.toml", hasher=CHEAP)
    sock = ControlSocket(tmp_path / "ctl.sock", console,
                         prove=pin_checker(auth, source="control-socket", origin="other"))
    try:
        assert console.attached
        assert send(sock.path, {"action": "status"}) == {"ok": True, "rounds_played": 3}
        assert send(sock.path, {"action": "dance"})["ok"] is False
        assert "bad request" in send(sock.path, {"no": "action"})["error"]
        # No round: a void is refused at once, saying why (never left waiting for a round).
        refused = send(sock.path, {"action": "void", "reason": "misdeal", "supervisor": "S-1", "pin": "590317"})
        assert refused["ok"] is False and "no round is in progress" in refused["error"]
        # A round in progress: accepted at once; the controller carries it out within a device step.
        console.set_void_policy(VoidPolicy("r00007-abc", ""))
        accepted = send(sock.path, {"action": "void", "reason": "misdeal", "supervisor": "S-1", "pin": "590317"})
        assert accepted["ok"] is True and accepted["accepted"] is True and accepted["round_id"] == "r00007-abc"
        taken = console.take_void()
        assert taken is not None and taken.args == {"reason": "misdeal", "supervisor": "S-1"}  # no PIN passed on
        assert taken.person == "S-1"
    finally:
        sock.close()
    assert not sock.path.exists()


def test_a_command_not_awaited_is_refused_at_once_with_what_the_table_waits_for():
    console = Console()
    console.attached = True
    console.set_void_policy(VoidPolicy("r1", ""))
    answers = []
    got = []
    waiting = threading.Event()
    console.on_expectation(lambda exp: exp is not None and waiting.set())
    t = threading.Thread(target=lambda: got.append(console.wait(("register_deck",), "a supervisor to register a deck")))
    t.start()
    assert waiting.wait(10)
    console.submit(Command("close_bets", reply=answers.append))  # answered now, by the console itself
    assert answers == [{"ok": False, "code": "not_expected",
                        "error": "close_bets is not expected now; the table waits for a supervisor to register a deck"}]
    console.submit(Command("void", {"reason": "x", "supervisor": "S"}, answers.append))
    t.join(10)
    assert got[0].action == "void" and answers[1]["accepted"] is True  # a void ends any wait
    assert console.expectation is None


def test_roles_and_arguments_are_checked_by_the_core_itself():
    console = Console()
    console.set_void_policy(VoidPolicy("r1", ""))
    answers = []
    dealer = Actor("D-4", Role.DEALER, source="test")
    for action, args in (("void", {"reason": "x"}), ("register_deck", {"deck_id": "A2"}),
                         ("confirm_card", {"card": "Qs"})):
        console.submit(Command(action, args, answers.append, actor=dealer))
    assert [a["code"] for a in answers] == ["forbidden"] * 3
    answers.clear()
    for args in ({"reason": " ", "supervisor": "S-1"}, {"reason": "x" * 10_000, "supervisor": "S-1"},
                 {"reason": "misdeal", "supervisor": " "}, {"reason": "misdeal", "supervisor": {"name": "S"}}):
        console.submit(Command("void", dict(args), answers.append))
    assert [a["code"] for a in answers] == ["bad_request"] * 4 and console.take_void() is None


def test_terminal_keys():
    assert parse_key_line("v foreign card seen", "S-2").args == {"reason": "foreign card seen", "supervisor": "S-2"}
    assert parse_key_line("m Qs", "S-2").action == "confirm_card"
    assert parse_key_line("r A2", "S-2").args["deck_id"] == "A2"
    assert parse_key_line("c", "S").action == "close_bets"
    assert parse_key_line("zz", "S") is None and parse_key_line("", "S") is None


def test_a_decision_sent_right_after_the_last_one_is_answered_is_taken_not_refused():
    """The dealer enters seat 2's decision the moment seat 1's is answered: the table is
    still journaling seat 1's (between two waits, no expectation). That command is held
    until the table says what it waits for next, then taken, not refused for the gap."""

    console = Console()
    console.attached = True
    replies: list[dict] = []
    seat1_answered = threading.Event()
    seat1_asked = threading.Event()
    console.on_expectation(lambda exp: exp is not None and exp.seat == 1 and seat1_asked.set())

    def dealer() -> None:
        assert seat1_asked.wait(10)
        console.submit(Command("decide", {"seat": 1, "decision": "play"},
                               lambda r: (replies.append(r), seat1_answered.set())))
        seat1_answered.wait(10)
        # At once: the controller has not asked for seat 2 yet.
        console.submit(Command("decide", {"seat": 2, "decision": "fold"}, replies.append))

    t = threading.Thread(target=dealer)
    t.start()
    # the table asks for seat 1 (a timeout on the wait so that a wrong answer fails, not hangs)
    cmd = console.wait(("decide",), "seat 1's decision", timeout_s=10, seat=1)
    cmd.answer(ok=True, seat=1, decision=cmd.args["decision"])
    first = cmd.args["decision"]
    assert seat1_answered.wait(10)
    t.join(10)  # seat 2's decision is in before the table asks for it
    second = console.wait(("decide",), "seat 2's decision", timeout_s=10, seat=2)  # raises if it was refused
    second.answer(ok=True, seat=2, decision=second.args["decision"])
    assert (first, second.args["decision"]) == ("play", "fold")
    assert replies == [{"ok": True, "seat": 1, "decision": "play"}, {"ok": True, "seat": 2, "decision": "fold"}]


def test_a_command_held_between_two_waits_is_refused_when_the_table_waits_for_something_else():
    console = Console()
    console.attached = True
    replies: list[dict] = []
    console.on_expectation(lambda exp: exp is not None and exp.action == "close_bets"
                           and console.submit(Command("close_bets", {}, replies.append)))
    taken = console.wait(("close_bets",), "the dealer to close bets", timeout_s=10)
    taken.answer(ok=True)
    console.submit(Command("close_bets", {}, replies.append))  # a double tap, between two waits
    assert replies == [{"ok": True}]  # not answered yet: the table has not said what comes next
    console.expect(Expectation("draw_card", "the dealer to draw card 1 of 9", "device", ()))
    assert replies[1]["ok"] is False and replies[1]["code"] == "not_expected"
    assert "draw card 1" in replies[1]["error"]


def test_a_subscribe_before_the_event_stream_is_open_is_busy_not_no_journal():
    """``tablectl run`` opens its front doors before the devices, and the event stream only
    after them: a client subscribing meanwhile is told to try again (``busy``), not that
    the table keeps no journal (found by the people bench, issue 15)."""
    from table.interfaces.dispatch import Channel, Dispatcher
    from table.interfaces.serving import FrontDoorLoop
    from table.roles import Actor, Role

    front = FrontDoorLoop("test-pending")
    try:
        channel = Channel("control-socket", Actor("d", Role.DEALER), push=lambda obj: None)
        starting = Dispatcher(Console(), front, stream_pending=True)
        reply = front.run(starting.answer(channel, {"id": 1, "action": "subscribe"}))
        assert reply["id"] == 1 and reply["code"] == "busy" and "try again" in reply["error"]
        without = Dispatcher(Console(), front)
        reply = front.run(without.answer(channel, {"id": 2, "action": "events"}))
        assert reply["code"] == "bad_request" and "without a journal" in reply["error"]
    finally:
        front.close()


def test_a_command_the_table_refuses_while_it_waits_leaves_it_waiting():
    """A supervisor's mistake (a replacement deck of the wrong colour, a card that is no
    card, the same person confirming their own void) is refused while the table keeps
    waiting: the corrected command sent at once is taken, never "not expected now"
    (found by the people bench, issue 15)."""
    console = Console()
    console.attached = True
    got: list = []

    def table() -> None:
        got.append(console.wait(("register_deck",), "a supervisor to register a replacement", role="supervisor",
                                check=lambda c: {"code": "refused", "error": "wrong colour"}
                                if c.args.get("colour") == "blue" else None))

    t = threading.Thread(target=table)
    t.start()
    try:
        while console.expectation is None:
            threading.Event().wait(0.001)
        s1 = Actor("S-1", Role.SUPERVISOR)
        replies: list = []
        console.submit(Command("register_deck", {"deck_id": "A2", "colour": "blue", "supervisor": "S-1"},
                               replies.append, s1))
        while not replies:
            threading.Event().wait(0.001)
        assert replies[0] == {"ok": False, "code": "refused", "error": "wrong colour"}
        assert console.expectation is not None and console.expectation.action == "register_deck"
        console.submit(Command("register_deck", {"deck_id": "A2", "supervisor": "S-1"}, replies.append, s1))
    finally:
        t.join(5)
    assert got and got[0].args == {"deck_id": "A2", "supervisor": "S-1"} and len(replies) == 1


def _void_cmd(person: str, replies: list, done: list | None = None) -> Command:
    return Command("void", {"reason": "misdeal", "supervisor": person}, replies.append,
                   Actor(person, Role.SUPERVISOR), done=done.append if done is not None else None)


def test_a_second_void_while_the_first_is_carried_out_is_refused_not_accepted_and_lost():
    """Two supervisors void the same round a millisecond apart: the controller has taken
    the first; the second is told it is already being carried out, not "voided now" and
    then dropped (found by a new user: both answered, one journaled)."""
    console = Console()
    console.set_void_policy(VoidPolicy("r1", ""))
    replies: list = []
    console.submit(_void_cmd("S-1", replies))
    assert console.take_void() is not None  # the controller carries it out
    console.submit(_void_cmd("S-2", replies))
    assert replies[0]["ok"] is True and replies[1]["ok"] is False
    assert "already being carried out" in replies[1]["error"]
    console.set_void_policy(VoidPolicy("r2", ""))  # the next round: voids are judged again
    console.submit(_void_cmd("S-2", replies))
    assert replies[2]["ok"] is True


def test_the_supervisor_who_asked_a_held_void_is_refused_a_void_of_their_own_at_once():
    """Held for a second supervisor: the one who asked sending void again is refused at
    once (a new user saw it answered "accepted", then dropped); another supervisor's void
    is taken (it confirms)."""
    console = Console()
    console.set_void_policy(VoidPolicy("r1", "", needs_second=True, requested_by="S-1"))
    replies: list = []
    console.submit(_void_cmd("S-1", replies))
    assert replies[0]["ok"] is False and "a second supervisor must confirm" in replies[0]["error"]
    console.submit(_void_cmd("S-2", replies))
    assert replies[1]["ok"] is True


def test_a_voids_outcome_is_pushed_on_the_connection_that_sent_it():
    """A void is accepted at once, carried out within a device step, and its outcome is
    pushed on the same connection with the request's id (docs/console.md; a new user saw
    none on the control socket)."""
    from table.interfaces.dispatch import Channel, Dispatcher
    from table.interfaces.serving import FrontDoorLoop

    front = FrontDoorLoop("test-void-outcome")
    pushed: list = []
    got = threading.Event()

    async def push(obj):
        pushed.append(obj)
        got.set()

    try:
        console = Console()
        console.attached = True
        console.set_void_policy(VoidPolicy("r1", ""))
        channel = Channel("control-socket", Actor("S-1", Role.SUPERVISOR), push=push)
        reply = front.run(Dispatcher(console, front).answer(channel, {"id": "v-1", "action": "void",
                                                                      "reason": "misdeal"}))
        assert reply["ok"] is True and reply["id"] == "v-1"
        taken = console.take_void()
        taken.finish(ok=True, round_id="r1", voided=True)  # the controller, once it has voided the round
        assert got.wait(5)
        assert pushed == [{"type": "result", "action": "void", "id": "v-1", "ok": True, "round_id": "r1",
                           "voided": True}]
    finally:
        front.close()
