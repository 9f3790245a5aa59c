"""``tablectl people``: who may sign in over HTTP/WebSocket (the people file, PINs hashed with Argon2id)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from table.interfaces.auth import DEFAULT_PEOPLE_FILE, PeopleFile, PeopleFileError, PinRejected, load_people
from table.roles import Role

from .exits import exit_codes


def _file(people_file: str | None, config_path: str | None) -> Path:
    if people_file:
        return Path(people_file)
    if config_path:
        from table.config import ConfigError, load_config

        try:
            return load_config(config_path).auth.people_file
        except ConfigError as exc:
            raise click.UsageError(f"invalid config:\n{exc}") from None
    return DEFAULT_PEOPLE_FILE


_file_options = [
    click.option("--file", "people_file", type=click.Path(dir_okay=False), default=None,
                 help=f"The people file (default: the config's [auth] people_file, else {DEFAULT_PEOPLE_FILE})."),
    click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                 help="Table config TOML naming the people file ([auth] people_file)."),
]


def _with_file(f):
    for opt in reversed(_file_options):
        f = opt(f)
    return f


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("people")
def people_group() -> None:
    """Who may sign in over HTTP/WebSocket: add, list or remove a person (PINs hashed with Argon2id)."""


@exit_codes({
    0: "added",
    1: "refused: already there without --replace, a PIN the rules refuse, an unsafe or invalid file",
})
@people_group.command("add")
@click.argument("person_id")
@click.option("--role", type=click.Choice([r.value for r in Role]), required=True,
              help="dealer, supervisor, pit (observer), auditor, or seat (a seat terminal; give --seat); "
                   "pit_boss or floor_manager for the floor's reports (tablectl floor serve).")
@click.option("--seat", type=click.IntRange(1, 7), default=None, help="The seat of a seat terminal (1-7).")
@click.option("--pit", "pits", multiple=True, metavar="NAME",
              help="A pit boss's pit (a table's [mqtt] floor), once per pit: the floor's reports show them "
                   "these pits' tables only.")
@click.option("--replace", is_flag=True, help="Replace the person's PIN and role if they are already there.")
@click.option("--pin-stdin", is_flag=True, help="Read the PIN from the first line of stdin (for provisioning "
                                                 "scripts), instead of asking twice on the terminal.")
@_with_file
def add_command(person_id: str, role: str, seat: int | None, pits: tuple[str, ...], replace: bool,
                pin_stdin: bool, people_file: str | None, config_path: str | None) -> None:
    """Add PERSON_ID with a ROLE; the PIN is asked for twice (never on the command line).

    A PIN has 6 to 64 characters and is not one character repeated or a run
    such as 123456. The file is written atomically, mode 0640, with the group
    of its folder.
    """
    if (role == Role.SEAT.value) != (seat is not None):  # before the PIN is asked, not after
        raise click.UsageError("--seat N goes with --role seat, and only there")
    if (role == Role.PIT_BOSS.value) != bool(pits):
        raise click.UsageError("--pit NAME (once per pit) goes with --role pit_boss, and only there")
    path = _file(people_file, config_path)
    if pin_stdin:
        pin = sys.stdin.readline().rstrip("\r\n")
        if not pin:
            raise click.UsageError("--pin-stdin: the first line of stdin is empty")
    else:
        pin = click.prompt(f"PIN for {person_id}", hide_input=True, confirmation_prompt="Repeat the PIN")
    try:
        person = PeopleFile(path).add(person_id, Role(role), pin, seat=seat, replace=replace, pits=pits)
    except (ValueError, PinRejected, PeopleFileError, OSError) as exc:
        click.echo(f"tablectl people add: {exc}", err=True)
        raise SystemExit(1) from None
    where = f" (seat {person.seat})" if person.seat else (f" (pits {', '.join(person.pits)})" if person.pits else "")
    click.echo(f"{person.id}: {person.role.value}{where} in {path}")


@exit_codes({0: "listed", 1: "the file is unsafe or invalid"})
@people_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a line per person.")
@_with_file
def list_command(as_json: bool, people_file: str | None, config_path: str | None) -> None:
    """List the people who may sign in (id, role, seat, pits; never the PIN hashes)."""
    path = _file(people_file, config_path)
    try:
        people = load_people(path)
    except PeopleFileError as exc:
        click.echo(f"tablectl people list: {exc}", err=True)
        raise SystemExit(1) from None
    rows = [{"id": p.id, "role": p.role.value, **({"seat": p.seat} if p.seat else {}),
             **({"pits": list(p.pits)} if p.pits else {})}
            for p in sorted(people.values(), key=lambda p: p.id)]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo(f"nobody in {path}")
    for r in rows:
        click.echo(f"{r['id']:24} {r['role']}" + (f" (seat {r['seat']})" if "seat" in r else "")
                   + (f" (pits {', '.join(r['pits'])})" if "pits" in r else ""))


@exit_codes({0: "removed", 1: "not there, or the file is unsafe or invalid"})
@people_group.command("remove")
@click.argument("person_id")
@_with_file
def remove_command(person_id: str, people_file: str | None, config_path: str | None) -> None:
    """Remove PERSON_ID; their sessions end at their next request."""
    path = _file(people_file, config_path)
    try:
        removed = PeopleFile(path).remove(person_id)
    except (PeopleFileError, OSError) as exc:
        click.echo(f"tablectl people remove: {exc}", err=True)
        raise SystemExit(1) from None
    if not removed:
        click.echo(f"tablectl people remove: {person_id} is not in {path}", err=True)
        raise SystemExit(1)
    click.echo(f"{person_id} removed from {path}")
