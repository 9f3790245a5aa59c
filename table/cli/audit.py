"""``tablectl audit``: check the journal's hash chain."""

from __future__ import annotations

import json

import click

from table.journal import JournalError, verify

from .exits import exit_codes


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("audit")
def audit_group() -> None:
    """Audit the table's journal."""


@exit_codes({
    0: "the hash chain holds",
    1: "the chain is broken: the first edited, deleted or reordered entry is named",
    2: "JOURNAL is missing or not a journal, or bad usage",
})
@audit_group.command("verify")
@click.argument("journal", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def verify_command(journal: str, as_json: bool) -> None:
    """Check that no entry of JOURNAL was edited, deleted or reordered."""
    try:
        result = verify(journal)
    except JournalError as exc:
        click.echo(f"tablectl audit verify: {exc}", err=True)
        raise SystemExit(2) from None
    if as_json:
        click.echo(json.dumps({"ok": result.ok, "entries": result.entries, "first_bad": result.first_bad,
                               "reason": result.reason}))
    elif result.ok:
        click.echo(f"OK: {result.entries} entries, hash chain intact")
    else:
        click.echo(f"FAIL: first bad entry {result.first_bad}: {result.reason} "
                   f"({result.entries} entries verified before it)", err=True)
    if not result.ok:
        raise SystemExit(1)
