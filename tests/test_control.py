"""The control socket and terminal keys feed the same console."""

from __future__ import annotations

import threading

from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.terminal import parse_key_line
from table.console import Command, Console


def test_socket_commands_reach_the_console_and_get_answers(tmp_path):
    console = Console()
    console.status = lambda: {"rounds_played": 3}
    sock = ControlSocket(tmp_path / "ctl.sock", console)
    try:
        assert console.attached
        assert send(sock.path, {"action": "status"}) == {"ok": True, "rounds_played": 3}
        assert send(sock.path, {"action": "dance"})["ok"] is False
        assert "bad request" in send(sock.path, {"no": "action"})["error"]

        def supervisor():
            cmd = console.wait(("void",), "a void")
            cmd.answer(ok=True, reason=cmd.args["reason"])

        t = threading.Thread(target=supervisor)
        t.start()
        assert send(sock.path, {"action": "void", "reason": "misdeal", "supervisor": "S-1"}) == {
            "ok": True, "reason": "misdeal"}
        t.join()
    finally:
        sock.close()
    assert not sock.path.exists()


def test_a_command_not_awaited_is_refused_with_what_the_table_waits_for():
    console = Console()
    console.attached = True
    answers = []
    console.submit(Command("close_bets", reply=answers.append))
    console.submit(Command("void", {"reason": "x", "supervisor": "S"}, answers.append))
    cmd = console.wait(("void",), "a supervisor to void")
    assert cmd.action == "void"
    assert answers == [{"ok": False, "error": "close_bets is not expected now; the table waits for a supervisor to void"}]


def test_terminal_keys():
    assert parse_key_line("v foreign card seen", "S-2").args == {"reason": "foreign card seen", "supervisor": "S-2"}
    assert parse_key_line("m Qs", "S-2").action == "confirm_card"
    assert parse_key_line("r A2", "S-2").args["deck_id"] == "A2"
    assert parse_key_line("c", "S").action == "close_bets"
    assert parse_key_line("zz", "S") is None and parse_key_line("", "S") is None
