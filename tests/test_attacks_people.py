"""Attacks on the two-person rule through accounts that are not people (issue 24, row 5).

Root and the service account on the control socket counted as a supervisor
distinct from every named person (``owner = "supervisor"``, the account's name
as the supervisor): one person with S-1's PIN and a root shell voided alone
after the decisions (S-1 on a screen, "root" on the socket as the second).
The two-person rule counts people: a supervisor action on the control socket
now names a person of the people file and proves it with their PIN, or is
refused, and that person is who counts. At the terminal, release, registering
a deck, entering a card and acknowledging prove the person too (as void and
confirm did).
"""

from __future__ import annotations

import io
import os
import threading

from table.console import Command, Console, VoidPolicy
from table.interfaces.auth import Authenticator, PeopleFile
from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.terminal import KeyConsole, pin_checker
from table.roles import Actor, Role

from console_helpers import CHEAP, wait_until
from test_controller import kinds, table
from test_two_person_void import held_after_decisions, submit

PINS = {"S-1": "590317", "S-2": "731904", "D-4": "482913"}


def _people(tmp_path):
    os.chmod(tmp_path, 0o700)
    people = PeopleFile(tmp_path / "people.toml")
    people.add("S-1", Role.SUPERVISOR, PINS["S-1"], hasher=CHEAP)
    people.add("S-2", Role.SUPERVISOR, PINS["S-2"], hasher=CHEAP)
    people.add("D-4", Role.DEALER, PINS["D-4"], hasher=CHEAP)
    return Authenticator(tmp_path / "people.toml", hasher=CHEAP)


def test_root_on_the_control_socket_is_not_a_second_supervisor(tmp_path):
    """S-1 asks the void on a screen; then, with a root shell (this test's own account,
    the socket's owner), confirms it on the control socket."""
    auth = _people(tmp_path)
    with table(tmp_path) as (ctl, sim, console, journal):
        sock = ControlSocket(tmp_path / "ctl.sock", console,
                             prove=pin_checker(auth, source="control-socket", origin="other"))
        try:
            held_after_decisions(ctl, sim)
            asked = threading.Event()
            console.on_expectation(lambda exp: exp is not None and exp.action == "confirm_void" and asked.set())
            resolver = threading.Thread(target=ctl.resolve_held)
            resolver.start()
            try:
                submit(console, "void", "S-1", reason="card beyond the deal: misdeal")
                assert asked.wait(10)
                # As the account alone (was: ok, "root" counted as the second supervisor).
                bare = send(sock.path, {"action": "confirm_void"}, timeout_s=30)
                assert bare["ok"] is False and bare["code"] == "forbidden" and "PIN" in bare["error"], bare
                # Naming a person without their PIN, or with a wrong one, or a dealer's.
                for req in ({"supervisor": "S-2"}, {"supervisor": "S-2", "pin": "000000"},
                            {"supervisor": "D-4", "pin": PINS["D-4"]}):
                    r = send(sock.path, {"action": "confirm_void", **req}, timeout_s=30)
                    assert r["ok"] is False and r["code"] == "forbidden", r
                # S-1 again, proved: the same person, refused by the two-person rule.
                own = send(sock.path, {"action": "confirm_void", "supervisor": "S-1", "pin": PINS["S-1"]},
                           timeout_s=30)
                assert own["ok"] is False and "two-person rule" in own["error"], own
                assert ctl.held is not None
                # S-2, proved: a second person.
                second = send(sock.path, {"action": "confirm_void", "supervisor": "S-2", "pin": PINS["S-2"]},
                              timeout_s=30)
                assert second["ok"] is True, second
                resolver.join(20)
                assert not resolver.is_alive()
            finally:
                if resolver.is_alive():
                    submit(console, "confirm_void", "S-2")
                    resolver.join(10)
        finally:
            sock.close()
        voided = [b for b in kinds(journal, "round") if b["step"] == "voided"][-1]
        assert (voided["supervisor"], voided["second_supervisor"]) == ("S-1", "S-2")
        assert all(PINS["S-2"] not in str(e.body) for e in journal.entries())  # the PIN is never journaled


def test_without_a_people_file_the_control_socket_refuses_supervisor_actions(tmp_path):
    console = Console()
    console.set_void_policy(VoidPolicy("r00007-abc", ""))
    sock = ControlSocket(tmp_path / "ctl.sock", console)
    try:
        r = send(sock.path, {"action": "void", "reason": "misdeal", "supervisor": "S-1", "pin": "590317"})
        assert r["ok"] is False and r["code"] == "forbidden" and "people file" in r["error"], r
        assert console.take_void() is None
        assert send(sock.path, {"action": "status"})["ok"] is not False  # the rest still works
    finally:
        sock.close()


def test_the_terminals_other_supervisor_actions_prove_the_person(tmp_path):
    """``l`` (release), ``r`` (register a deck), ``m`` (enter a card) and ``a`` (acknowledge)
    were sent as the name typed at ``tablectl run --supervisor``: now its PIN is asked."""
    auth = _people(tmp_path)
    console = Console()
    console.attached = True
    got: list[Command] = []
    console.submit = lambda cmd: got.append(cmd)  # what reaches the table
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    with os.fdopen(read_fd, "r") as keys_in, os.fdopen(write_fd, "w") as keys:
        KeyConsole(console, "S-1", keys_in, out, pin_check=pin_checker(auth))
        keys.write("l\n000000\n"                 # a wrong PIN: nothing sent
                   "r A2\n" + PINS["S-1"] + "\n"  # right: sent as S-1, proved
                   "m Qs 4\n" + PINS["S-1"] + "\n"  # (no card prompt shown here: named by number)
                   "a\n" + PINS["S-1"] + "\n")
        keys.flush()
        wait_until(lambda: len(got) == 3, 20, "three proved actions")
    assert [c.action for c in got] == ["register_deck", "confirm_card", "acknowledge_incident"]
    assert all(c.actor == Actor("S-1", Role.SUPERVISOR, source="terminal") for c in got), got
    assert "release hold refused: unknown person or wrong PIN" in out.getvalue()
    assert PINS["S-1"] not in out.getvalue()
