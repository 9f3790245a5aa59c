"""``tablectl people add``: the PIN from a provisioning script, and a bad role/seat pair
refused before any PIN is asked (found by a new user)."""

from __future__ import annotations

from click.testing import CliRunner

from table.cli import main
from table.interfaces.auth import load_people


def test_a_pin_piped_with_pin_stdin_adds_the_person(tmp_path):
    people = tmp_path / "people.toml"
    result = CliRunner().invoke(main, ["people", "add", "S-9", "--role", "supervisor", "--file", str(people),
                                       "--pin-stdin"], input="739164\n")
    assert result.exit_code == 0, result.output
    assert [(p.id, p.role.value) for p in load_people(people).values()] == [("S-9", "supervisor")]
    assert "739164" not in people.read_text()  # hashed, never kept


def test_an_empty_pin_on_stdin_is_a_usage_error_and_adds_nobody(tmp_path):
    people = tmp_path / "people.toml"
    result = CliRunner().invoke(main, ["people", "add", "S-9", "--role", "supervisor", "--file", str(people),
                                       "--pin-stdin"], input="\n")
    assert result.exit_code == 2 and "first line of stdin is empty" in result.output
    assert not people.exists()


def test_a_seat_terminal_without_its_seat_is_refused_before_the_pin_is_asked(tmp_path):
    people = tmp_path / "people.toml"
    result = CliRunner().invoke(main, ["people", "add", "seat-3", "--role", "seat", "--file", str(people)],
                                input="")
    assert result.exit_code == 2 and "--seat N goes with --role seat" in result.output
    assert "PIN" not in result.output
    result = CliRunner().invoke(main, ["people", "add", "D-1", "--role", "dealer", "--seat", "2", "--file",
                                       str(people)], input="")
    assert result.exit_code == 2


def test_a_pit_boss_names_their_pits_and_only_a_pit_boss_has_pits(tmp_path):
    people = tmp_path / "people.toml"
    result = CliRunner().invoke(main, ["people", "add", "PB-2", "--role", "pit_boss", "--file", str(people)],
                                input="")
    assert result.exit_code == 2 and "--pit NAME" in result.output and "PIN" not in result.output
    result = CliRunner().invoke(main, ["people", "add", "FM-1", "--role", "floor_manager", "--pit", "pit1",
                                       "--file", str(people)], input="")
    assert result.exit_code == 2 and "--pit NAME" in result.output
    result = CliRunner().invoke(main, ["people", "add", "PB-2", "--role", "pit_boss", "--pit", "pit2", "--pit", "pit1",
                                       "--file", str(people), "--pin-stdin"], input="739164\n")
    assert result.exit_code == 0 and "pits pit1, pit2" in result.output
    assert load_people(people)["PB-2"].pits == ("pit1", "pit2")
    result = CliRunner().invoke(main, ["people", "list", "--file", str(people), "--json"])
    assert '"pits": ["pit1", "pit2"]' in result.output
    result = CliRunner().invoke(main, ["people", "add", "PB-3", "--role", "pit_boss", "--pit", "pit 1",
                                       "--file", str(people), "--pin-stdin"], input="739164\n")
    assert result.exit_code == 1 and "pit names" in result.output
    people.write_text(people.read_text().replace('role = "pit_boss"', 'role = "dealer"'))  # pits on a dealer
    result = CliRunner().invoke(main, ["people", "list", "--file", str(people)])
    assert result.exit_code == 1 and "person[0].pits" in result.output
