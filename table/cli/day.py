"""``tablectl day``: the gaming day's procedures from the command line (issue 27, point 2).

``tablectl day drop-import --control-socket S FILE.csv`` enters the count
room's drops (one row a gaming day) at the running table: every row is checked
first (nothing is imported from a bad file), then each becomes a ``drop``
procedure (``table_procedure`` on the control socket), signed as every slip is
by a supervisor and a dealer who each prove their PIN, and naming the count
room's two people (``counted_by``, ``verified_by``) in the journaled slip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .exits import exit_codes


class BadInput(click.ClickException):
    """A file, an option or the table's answer that stops the import before any row: exit 2."""

    exit_code = 2


class Refused(click.ClickException):
    """The table refused a row (the rows before it are imported, and named): exit 1."""

    exit_code = 1


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("day")
def day_group() -> None:
    """The gaming day's procedures: the count room's drop import."""


@exit_codes({
    0: "every row is journaled as a drop",
    1: "the table refused a row: the rows before it are journaled (each named), the rest are not",
    2: "the file is not a count-room CSV for this table (the file, line and column are named), a PIN is "
       "wrong, the table is open or cannot be reached, or bad usage: nothing is imported",
})
@day_group.command("drop-import")
@click.argument("csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="FILE.csv")
@click.option("--control-socket", "control_socket", type=click.Path(dir_okay=False), required=True,
              help="The running table's control socket (`tablectl run --control-socket`).")
@click.option("--supervisor", required=True, help="The supervisor who enters the drops (a person of the people "
                                                  "file); their PIN is asked.")
@click.option("--dealer", required=True, help="The dealer who countersigns (a person of the people file); their "
                                              "PIN is asked.")
@click.option("--pins-from-stdin", is_flag=True, help="Read the supervisor's PIN, then the dealer's, one a line "
                                                      "from stdin (a script); default: asked without echo.")
def drop_import_command(csv_file: Path, control_socket: str, supervisor: str, dealer: str,
                        pins_from_stdin: bool) -> None:
    """Enter the count room's drops from FILE.csv (columns gaming_day, table_id,
    amount_cents, counted_by, verified_by; one row a gaming day) as drop procedures at
    the running table, after the table is closed (COMAR 36.05.03.25: the drop counted
    after the close). Every row is checked first; a row for another table, a date
    that is not one, an amount that is not whole cents, one person counting and
    verifying, a day twice: refused, naming the file, line and column."""
    from table.gaming_day import DropFileError, read_drop_csv
    from table.interfaces.control_socket import send

    try:
        text = csv_file.read_bytes()[:1 << 20].decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{csv_file}: cannot be read as UTF-8 text: {exc}") from None

    def ask(req: dict) -> dict:
        try:
            return send(control_socket, req, 120)
        except (OSError, ConnectionError, ValueError) as exc:
            raise BadInput(f"{control_socket}: the table cannot be reached: {exc}") from None

    who = ask({"action": "whoami"})
    if not who.get("ok"):
        raise BadInput(f"{control_socket}: {who.get('error')}")
    try:
        rows = read_drop_csv(text, str(csv_file), who["table_id"])
    except DropFileError as exc:
        raise BadInput(str(exc)) from None
    status = ask({"action": "status"})
    day = status.get("table_day") or {}
    if day.get("open"):
        raise BadInput("the table is open: the drop is entered after the close (close it first); nothing imported")
    if pins_from_stdin:
        sup_pin, dealer_pin = sys.stdin.readline().rstrip("\r\n"), sys.stdin.readline().rstrip("\r\n")
    else:
        sup_pin = click.prompt(f"PIN for {supervisor} (supervisor)", hide_input=True, err=True)
        dealer_pin = click.prompt(f"PIN for {dealer} (dealer)", hide_input=True, err=True)
    done: list[str] = []
    for row in rows:
        r = ask({"action": "table_procedure", "procedure": "drop", "slip": row.slip(), "supervisor": supervisor,
                 "pin": sup_pin, "dealer": dealer, "dealer_pin": dealer_pin})
        if not r.get("ok"):
            where = f"{csv_file}:{row.line}: {row.gaming_day}"
            if not done:
                raise BadInput(f"{where}: refused, nothing imported: {r.get('error')}")
            raise Refused(f"{where}: refused: {r.get('error')}; imported before it: {', '.join(done)}")
        done.append(row.gaming_day)
        click.echo(f"{row.gaming_day}: drop ${row.amount_cents / 100:,.2f} journaled as slip {r['slip']['slip']} "
                   f"(counted by {row.counted_by}, verified by {row.verified_by})")
