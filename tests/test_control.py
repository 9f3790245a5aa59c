"""The control socket and terminal keys feed the same console."""

from __future__ import annotations

import threading

from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.terminal import parse_key_line
from table.console import Command, Console, VoidPolicy
from table.roles import Actor, Role


def test_socket_commands_reach_the_console_and_get_answers(tmp_path):
    console = Console()
    console.status = lambda: {"rounds_played": 3}
    sock = ControlSocket(tmp_path / "ctl.sock", console)
    try:
        assert console.attached
        assert send(sock.path, {"action": "status"}) == {"ok": True, "rounds_played": 3}
        assert send(sock.path, {"action": "dance"})["ok"] is False
        assert "bad request" in send(sock.path, {"no": "action"})["error"]
        # No round: a void is refused at once, saying why (never left waiting for a round).
        refused = send(sock.path, {"action": "void", "reason": "misdeal", "supervisor": "S-1"})
        assert refused["ok"] is False and "no round is in progress" in refused["error"]
        # A round in progress: accepted at once; the controller carries it out within a device step.
        console.set_void_policy(VoidPolicy("r00007-abc", ""))
        accepted = send(sock.path, {"action": "void", "reason": "misdeal", "supervisor": "S-1"})
        assert accepted["ok"] is True and accepted["accepted"] is True and accepted["round_id"] == "r00007-abc"
        taken = console.take_void()
        assert taken is not None and taken.args["reason"] == "misdeal"
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
