"""The two-person rule for a void after the decisions are final (issue 15).

Once every seat has decided, the round's outcome is settled by the cards alone:
voiding it then returns wagers some players have already lost or won. One
supervisor asks; a *different* supervisor confirms; both are journaled. The
attack these tests stop: one supervisor (or a dealer at the supervisor's
terminal) voiding a lost round alone, by confirming their own request or by
typing someone else's name at the terminal.
"""

from __future__ import annotations

import threading

import pytest

from table.console import Command
from table.errors import RoundHeld
from table.roles import Actor, Role
from table.rules.settlement import Decision

from test_controller import kinds, table


def supervisor(name: str) -> Actor:
    return Actor(name, Role.SUPERVISOR, source="http")


def held_after_decisions(ctl, sim) -> None:
    """Play a round in which the dealer draws a card while the seats decide: a card
    beyond the deal, found once the decisions are in, so the round is held with its
    decisions final."""
    drawn = []

    def decide(seat, hand):
        if not drawn:
            sim.dealer.draw_card()
            drawn.append(seat)
        return Decision.PLAY

    ctl.decide = decide
    ctl.prepare()
    with pytest.raises(RoundHeld):
        ctl.play_round()
    assert ctl.held is not None and ctl.held.decisions_final


def submit(console, action, person, **args):
    answers, done = [], threading.Event()
    cmd = Command(action, {"supervisor": person, **args}, answers.append, actor=supervisor(person),
                  done=lambda reply: (answers.append(reply), done.set()))
    console.submit(cmd)
    return answers, done


def test_a_void_after_the_decisions_needs_a_second_supervisor_and_journals_both(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        held_after_decisions(ctl, sim)
        resolver = threading.Thread(target=ctl.resolve_held)
        resolver.start()
        try:
            asked = threading.Event()
            console.on_expectation(lambda exp: exp is not None and exp.action == "confirm_void" and asked.set())
            first, _ = submit(console, "void", "S-1", reason="card beyond the deal: misdeal")
            # S-1 asked; the table now waits for someone else.
            assert asked.wait(10)
            assert console.status()["void_needs_second_supervisor"] is True
            assert "S-1 asked" in console.expectation.what
            own, own_done = submit(console, "confirm_void", "S-1")
            assert own_done.wait(10) or own
            assert own[0]["ok"] is False and "two-person rule" in own[0]["error"]
            assert ctl.held is not None  # still held: one supervisor cannot void it alone
            second, _ = submit(console, "confirm_void", "S-2")
            resolver.join(10)
            assert not resolver.is_alive()
        finally:
            if resolver.is_alive():
                submit(console, "confirm_void", "S-2")
                resolver.join(10)
        assert first and first[0]["ok"] is True
        assert second[0]["ok"] is True and second[0]["supervisors"] == ["S-1", "S-2"]
        voided = [b for b in kinds(journal, "round") if b["step"] == "voided"][-1]
        assert voided["supervisor"] == "S-1" and voided["second_supervisor"] == "S-2"
        assert voided["wagers"] == "returned"
        requested = [b for b in kinds(journal, "supervisor") if b["action"] == "void_requested"]
        assert [r["supervisor"] for r in requested] == ["S-1"]
        assert ctl.held is None


def test_a_round_held_before_the_decisions_is_voided_by_one_supervisor(tmp_path):
    """The rule is for outcomes already settled by the cards: before the decisions,
    one supervisor voids (a misdeal found mid-deal)."""
    from simulators.devices import SimCard
    from protocols.cards import BackColour, Card
    from test_controller import SlipDealer

    slip = lambda sim: sim.shoe.cards.insert(0, SimCard(Card.parse("As"), BackColour.BLUE))  # noqa: E731
    with table(tmp_path, dealer=lambda sim: SlipDealer(sim, 2, slip)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld):
            ctl.play_round()
        assert console.status()["void_needs_second_supervisor"] is False
        answers, _ = submit(console, "void", "S-1", reason="foreign card: misdeal")
        ctl.resolve_held()
        voided = [b for b in kinds(journal, "round") if b["step"] == "voided"][-1]
        assert voided["supervisor"] == "S-1" and "second_supervisor" not in voided


def test_the_terminal_acts_as_a_second_supervisor_only_with_their_pin(tmp_path):
    """The attack: at the terminal, the supervisor who asked the void types ``x S-2`` to
    be the second supervisor themself. The terminal asks S-2's PIN (the people file,
    Argon2id) and acts as S-2 only when it is right; a typed name alone confirms nothing."""
    import io
    import os

    from table.interfaces.auth import Authenticator, PeopleFile
    from table.interfaces.terminal import KeyConsole, parse_key_line, pin_checker

    # The bare key is the terminal's own person: the core refuses it as the one who asked.
    assert parse_key_line("x S-2", "S-1").person == "S-1"
    people = PeopleFile(tmp_path / "people.toml")
    people.add("S-1", Role.SUPERVISOR, "590317")  # the terminal's own supervisor proves who asks, too
    people.add("S-2", Role.SUPERVISOR, "731904")
    people.add("D-4", Role.DEALER, "482913")
    auth = Authenticator(tmp_path / "people.toml")
    with table(tmp_path) as (ctl, sim, console, journal):
        held_after_decisions(ctl, sim)
        asked = threading.Event()
        console.on_expectation(lambda exp: exp is not None and exp.action == "confirm_void" and asked.set())
        resolver = threading.Thread(target=ctl.resolve_held)
        resolver.start()
        read_fd, write_fd = os.pipe()
        out = io.StringIO()
        with os.fdopen(read_fd, "r") as keys_in, os.fdopen(write_fd, "w") as keys:
            keys_console = KeyConsole(console, "S-1", keys_in, out, pin_check=pin_checker(auth))
            try:
                keys.write("v card beyond the deal: misdeal\n590317\n")
                keys.flush()
                assert asked.wait(10), out.getvalue()
                for line in ("x S-2\n", "000000\n",      # S-2's name, a wrong PIN
                             "x D-4\n", "482913\n",      # a dealer's right PIN: not a supervisor
                             "x S-2\n", "731904\n"):     # S-2's own PIN
                    keys.write(line)
                keys.flush()
                resolver.join(20)
                assert not resolver.is_alive(), out.getvalue()
            finally:
                if resolver.is_alive():
                    submit(console, "confirm_void", "S-2")
                    resolver.join(10)
        said = out.getvalue()
        assert "confirm void refused: unknown person or wrong PIN" in said
        assert "confirm void refused: D-4 is not a supervisor" in said
        assert "731904" not in said and "482913" not in said and "590317" not in said  # PINs are never echoed or logged
        voided = [b for b in kinds(journal, "round") if b["step"] == "voided"][-1]
        assert voided["supervisor"] == "S-1" and voided["second_supervisor"] == "S-2"
        assert auth.session_count == 0  # the check leaves no session behind
        del keys_console


def test_without_a_people_file_the_terminal_refuses_a_second_supervisor_and_says_where():
    import io

    from table.console import Console
    from table.interfaces.terminal import KeyConsole

    out = io.StringIO()
    keys = KeyConsole(Console(), "S-1", io.StringIO("x S-2\n"), out)
    keys._thread.join(5)
    assert "cannot tell who types" in out.getvalue() and "signed-in screen" in out.getvalue()


def test_a_void_accepted_the_instant_before_the_results_are_recorded_is_carried_out_not_dropped(tmp_path, mocker):
    """A void lands after the dealer's hand is revealed, while the table computes the
    settlement (the last instant a void is allowed): its answer said "a second supervisor
    must confirm", so the round is held for one; it is never settled and paid after that
    answer (found by a new user: round 1043 paid after a 200 "accepted")."""
    import table.procedure.round_play as round_module  # where the round settles its seats

    real = round_module.settle_seat
    answers: list = []

    def settle_seat(*args, **kwargs):  # the settlement's computation: the void arrives meanwhile
        if not answers:
            answers.extend(submit(console, "void", "S-1", reason="dealer exposed a card")[0])
        return real(*args, **kwargs)

    with table(tmp_path) as (ctl, sim, console, journal):
        mocker.patch.object(round_module, "settle_seat", side_effect=settle_seat)
        ctl.prepare()
        with pytest.raises(RoundHeld):
            ctl.play_round()
        assert answers[0]["ok"] is True and "second supervisor" in answers[0]["what"]
        assert ctl.held is not None and ctl.held.void_request.supervisor == "S-1"
        assert "settle" not in [e.body.get("step") for e in journal.entries("round")]
