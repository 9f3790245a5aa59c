"""``tablectl settle ROUND.json [--profile NAME]``: recompute a round's settlement with the
table's own code (docs/settlement.md); JSON on stdout. Errors in the input exit 1
with a one-line message naming the problem."""

from __future__ import annotations

import json

import click

from table.rules.paytables import PaytableError
from table.rules.settlement import Round, SettlementError, settle_round

from .exits import exit_codes
from .options import profile_option as _profile_option

#: Exit status: the round cannot be settled (the one-line message says why).
EXIT_BAD_ROUND = 1


class BadRound(click.ClickException):
    """A round file that cannot be settled: one line on stderr, exit 1."""

    exit_code = EXIT_BAD_ROUND

    def __init__(self, message: str) -> None:
        # One line, whatever the input put in the message (a paytable file's
        # problems come one a line).
        super().__init__("; ".join(part.strip() for part in message.splitlines() if part.strip()))


@exit_codes({
    0: "settled: the settlement is on stdout",
    EXIT_BAD_ROUND: "the round cannot be settled: one line on stderr names the file, the key and the rule",
})
@click.command("settle")
@click.argument("round_file", type=click.Path(dir_okay=False))
@_profile_option
def settle_cmd(round_file: str, profile_name: str | None) -> None:
    """Recompute one round's settlement from ROUND.json; print it as JSON.

    The input format is in docs/settlement.md (examples in docs/examples/).
    Amounts are in cents.
    """
    try:
        rnd = Round.from_file(round_file, profile=profile_name)
        out = settle_round(rnd)
    except (SettlementError, PaytableError) as e:
        # Every refusal names the round file first (then the key and the rule), as
        # docs/settlement.md promises: a paytable's own problem names that file too.
        text = str(e)
        raise BadRound(text if text.startswith(f"{round_file}:") else f"{round_file}: {text}") from None
    click.echo(json.dumps(out, indent=2))
