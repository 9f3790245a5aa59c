"""Attacks on the two-person rule for a void after the decisions (issue 15).

The terminal's ``--supervisor ID`` is a name typed when ``tablectl run`` starts:
nothing proves it. ``x NAME`` asks NAME's PIN, but the void it confirms was asked
under that unproven name, so one supervisor alone voided a decided round: start
the terminal as anyone (``--supervisor S-9``), type ``v REASON``, then ``x`` with
their own name and PIN. The core saw two names and voided.
"""

from __future__ import annotations

import io
import os
import threading

from table.interfaces.auth import Authenticator, PeopleFile
from table.interfaces.terminal import KeyConsole, pin_checker
from table.roles import Role

from console_helpers import CHEAP, wait_until
from test_controller import kinds, table
from test_two_person_void import held_after_decisions, submit


def test_one_supervisor_cannot_ask_and_confirm_a_decided_void_at_the_terminal(tmp_path):
    """S-2 alone at a terminal started as ``--supervisor S-9`` (a name nobody proved):
    ``v`` asks the void as S-9, ``x S-2`` with S-2's own PIN confirms it. The round must
    stay held: the void's first supervisor was never proved to be a person."""
    PeopleFile(tmp_path / "people.toml").add("S-2", Role.SUPERVISOR, "731904", hasher=CHEAP)
    auth = Authenticator(tmp_path / "people.toml", hasher=CHEAP)
    with table(tmp_path) as (ctl, sim, console, journal):
        held_after_decisions(ctl, sim)
        resolver = threading.Thread(target=ctl.resolve_held)
        resolver.start()
        read_fd, write_fd = os.pipe()
        out = io.StringIO()
        try:
            with os.fdopen(read_fd, "r") as keys_in, os.fdopen(write_fd, "w") as keys:
                keys_console = KeyConsole(console, "S-9", keys_in, out, pin_check=pin_checker(auth))
                wait_until(lambda: console.expectation is not None and "void" in console.expectation.accepts, 10,
                           "the held round to wait for a void")
                keys.write("v card beyond the deal: misdeal\n731904\n")  # S-2's PIN, if S-9's is asked
                keys.flush()
                wait_until(lambda: "<<< void" in out.getvalue(), 10, "the terminal's answer to the void")
                keys.write("x S-2\n731904\n")
                keys.flush()
                wait_until(lambda: "confirm void" in out.getvalue() or not resolver.is_alive(), 10,
                           "the terminal's answer to the confirmation")
                assert resolver.is_alive() and ctl.held is not None, out.getvalue()
                assert not [b for b in kinds(journal, "round") if b["step"] == "voided"]
                del keys_console
        finally:
            if resolver.is_alive():  # two real supervisors end the hold, so the bench stops
                wait_until(lambda: console.expectation is not None, 10, "the table to wait")
                if "confirm_void" not in console.expectation.accepts:
                    submit(console, "void", "S-1", reason="cleanup")
                    wait_until(lambda: "confirm_void" in console.expectation.accepts, 10, "the void request")
                submit(console, "confirm_void", "S-3")
                resolver.join(10)
