"""``tablectl day``: the gaming day's procedures from the command line.

``tablectl day drop-import --control-socket S FILE.csv`` enters the count
room's drops (one row a gaming day) at the running table: every row is checked
first (nothing is imported from a bad file), then each becomes a ``drop``
procedure (``table_procedure`` on the control socket), signed as every slip is
by a supervisor and a dealer who each prove their PIN, and naming the count
room's two people (``counted_by``, ``verified_by``) in the journaled slip.
``--journal J`` does the same on a stopped table's journal (the PINs checked
against the people file here), every row in one transaction.
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
@click.option("--control-socket", "control_socket", type=click.Path(dir_okay=False), default=None,
              help="The running table's control socket (`tablectl run --control-socket`).")
@click.option("--journal", "journal_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Or a stopped table's journal (refused while the table writes it).")
@click.option("--table-key", "key_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="With --journal: the table key (default: JOURNAL.key beside it, which must exist).")
@click.option("--people-file", "people_file", type=click.Path(dir_okay=False), default=None,
              help="With --journal: the people file the PINs are checked against (default "
                   "/etc/threecard/people.toml).")
@click.option("--supervisor", required=True, help="The supervisor who enters the drops (a person of the people "
                                                  "file); their PIN is asked.")
@click.option("--dealer", required=True, help="The dealer who countersigns (a person of the people file); their "
                                              "PIN is asked.")
@click.option("--pins-from-stdin", is_flag=True, help="Read the supervisor's PIN, then the dealer's, one a line "
                                                      "from stdin (a script); default: asked without echo.")
def drop_import_command(csv_file: Path, control_socket: str | None, journal_path: str | None,
                        key_file: str | None, people_file: str | None, supervisor: str, dealer: str,
                        pins_from_stdin: bool) -> None:
    """Enter the count room's drops from FILE.csv (columns gaming_day, table_id,
    amount_cents, counted_by, verified_by; one row a gaming day) as drop procedures at
    the running table, after the table is closed (COMAR 36.05.03.25: the drop counted
    after the close). Every row is checked first; a row for another table, a date
    that is not one, an amount that is not whole cents, one person counting and
    verifying, a day twice: refused, naming the file, line and column."""
    from table.files import UnsafeFile, read_regular
    from table.day.gaming_day import MAX_DROP_FILE_BYTES, DropFileError, read_drop_csv
    from table.interfaces.control_socket import send

    if (control_socket is None) == (journal_path is None):
        raise click.UsageError("give --control-socket (a running table) or --journal (a stopped one)")
    try:  # the whole file or none of it: a file past the limit is refused, never read in part
        data = read_regular(csv_file, max_bytes=MAX_DROP_FILE_BYTES)
    except UnsafeFile as exc:
        raise BadInput(f"{csv_file}: refused, nothing imported: {exc} (a count-room file is at most "
                       f"{MAX_DROP_FILE_BYTES} bytes, {MAX_DROP_FILE_BYTES >> 20} MiB; split it)") from None
    except OSError as exc:
        raise BadInput(f"{csv_file}: cannot be read: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{csv_file}: cannot be read as UTF-8 text: {exc}") from None

    def pins() -> tuple[str, str]:
        if pins_from_stdin:
            return sys.stdin.readline().rstrip("\r\n"), sys.stdin.readline().rstrip("\r\n")
        return (click.prompt(f"PIN for {supervisor} (supervisor)", hide_input=True, err=True),
                click.prompt(f"PIN for {dealer} (dealer)", hide_input=True, err=True))

    if journal_path is not None:
        _import_offline(csv_file, text, journal_path, key_file, people_file, supervisor, dealer, pins)
        return
    assert control_socket is not None

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
    sup_pin, dealer_pin = pins()
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


def _import_offline(csv_file: Path, text: str, journal_path: str, key_file: str | None, people_file: str | None,
                    supervisor: str, dealer: str, pins) -> None:
    """``--journal``: the drops journaled on a stopped table's journal, all rows or none (one
    transaction), after both PINs are proved against the people file (the lock-outs of a
    sign-in from outside the table's screens). The entries carry the journal's MACs; the
    controller's next start signs them with its checkpoint. Raises :class:`BadInput`."""
    from table.day.gaming_day import ENTRY_KIND, DropFileError, ProcedureError, read_drop_csv
    from table.interfaces.auth import DEFAULT_PEOPLE_FILE, Authenticator, PeopleFileError, SignInLocked
    from table.journal import Journal, JournalError
    from table.keys import KeyFileError, load_private_key
    from table.procedure.table_day import replay_day
    from table.roles import Role

    beside = Path(journal_path).with_name(Path(journal_path).name + ".key")
    try:
        key = load_private_key(key_file or beside)
    except (KeyFileError, OSError) as exc:
        raise BadInput(f"the table key cannot be read ({exc}); give --table-key") from None
    try:
        journal = Journal(journal_path, key=key)
    except JournalError as exc:
        raise BadInput(f"{journal_path}: {exc} (a running table's journal: use --control-socket)") from None
    with journal:
        try:
            rows = read_drop_csv(text, str(csv_file), journal.table_id)
        except DropFileError as exc:
            raise BadInput(str(exc)) from None
        from datetime import datetime, timezone

        from table.day.calendar import Calendar

        # the drop rules need today's gaming day (a day to come has no drop): the default calendar
        day = replay_day(journal, journal.table_id,
                         today=lambda: Calendar().gaming_day(datetime.now(timezone.utc)).isoformat())
        if day.is_open:
            raise BadInput("the table is open: the drop is entered after the close (close it first); "
                           "nothing imported")
        sup_pin, dealer_pin = pins()
        try:
            auth = Authenticator(people_file or DEFAULT_PEOPLE_FILE)
            for person, pin, role in ((supervisor, sup_pin, Role.SUPERVISOR), (dealer, dealer_pin, Role.DEALER)):
                actor = auth.check_pin(person, pin, source="tablectl", origin="other")
                if actor.role is not role:
                    raise BadInput(f"{person} is {actor.role.value}, not {role.value}; nothing imported")
        except (PermissionError, SignInLocked, PeopleFileError) as exc:
            raise BadInput(f"{exc}; nothing imported") from None
        from table.day.gaming_day import count_room_problem

        bodies = []
        for row in rows:
            problem = count_room_problem(auth.people(), row.counted_by, row.verified_by)
            if problem:
                raise BadInput(f"{csv_file}:{row.line}: {problem}; nothing imported")
            try:
                body = day.prepare("drop", row.slip(), dealer=dealer, supervisor=supervisor)
            except ProcedureError as exc:
                raise BadInput(f"{csv_file}:{row.line}: {exc}; nothing imported") from None
            day.apply(body)
            bodies.append((row, body))
        try:
            with journal.batch():  # all rows or none
                for _, body in bodies:
                    journal.append(ENTRY_KIND, **body)
        except JournalError as exc:
            raise BadInput(f"{journal_path}: not written, nothing imported: {exc}") from None
    for row, body in bodies:
        click.echo(f"{row.gaming_day}: drop ${row.amount_cents / 100:,.2f} journaled as slip {body['slip']} "
                   f"(counted by {row.counted_by}, verified by {row.verified_by})")
