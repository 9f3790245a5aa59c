"""Rules-engine subcommands of ``tablectl`` (hand, settle, paytable).

* ``tablectl hand CARDS... [--vs] [--profile NAME] [--json]``: a hand's category
  and ranking key; with ``--vs`` the six cards are two hands and the verdict.
* ``tablectl settle ROUND.json [--profile NAME]``: recompute a round's
  settlement with the table's own code (docs/settlement.md); JSON on stdout.
* ``tablectl paytable list``: the shipped paytables.
* ``tablectl paytable report [NAME|FILE...] [--json]``: exact returns by
  enumeration (docs/rules-profiles.md).

Errors in the input (a bad card, a bad round file, an invalid paytable) exit
with status 1 and a one-line message naming the problem.
"""

from __future__ import annotations

import json
import sys
import time

import click

from protocols.cards import parse_cards
from table.rules.hands import dealer_qualifies, evaluate
from table.rules.paytables import PaytableError, list_paytables, load_paytable
from table.rules.profiles import PROFILES, get_profile
from table.rules.report import report as paytable_report
from table.rules.settlement import Round, SettlementError, hand_to_dict, settle_round

_profile_option = click.option(
    "--profile",
    "profile_name",
    type=click.Choice(sorted(PROFILES), case_sensitive=False),
    default=None,
    help="Rules profile (default: pennsylvania, or the round file's).",
)


def _cards(tokens: tuple[str, ...]):
    text = " ".join(tokens).replace(",", " ")
    try:
        return parse_cards(text)
    except ValueError as e:
        raise click.ClickException(str(e)) from None


@click.command("hand")
@click.argument("cards", nargs=-1, required=True)
@click.option("--vs", "versus", is_flag=True,
              help="Compare: CARDS are six cards, the first hand's three then the second's (dealer) three.")
@_profile_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def hand_cmd(cards: tuple[str, ...], versus: bool, profile_name: str | None, as_json: bool) -> None:
    """Print a hand's category and ranking key; with --vs, which of two hands wins.

    \b
    Examples:
      tablectl hand As Kd Qh
      tablectl hand Qc 6d 4h --vs Qh 6s 3c
    """
    profile = get_profile(profile_name or "pennsylvania")
    cs = _cards(cards)
    want = 6 if versus else 3
    if len(cs) != want:
        raise click.UsageError(f"expected {want} cards{' (three per hand)' if versus else ''}, got {len(cs)}")
    if len(set(cs)) != len(cs):
        raise click.ClickException("the same card appears twice")
    a = evaluate(cs[:3], profile)
    out: dict = {"profile": profile.name, "hand": hand_to_dict(a)}
    if versus:
        b = evaluate(cs[3:], profile)
        verdict = "first hand wins" if a > b else "second hand wins" if b > a else "tie"
        out["vs"] = {**hand_to_dict(b), "qualifies_as_dealer": dealer_qualifies(b)}
        out["result"] = verdict
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return

    def show(label: str, v) -> None:
        click.echo(f"{label}: {' '.join(str(c) for c in v.cards)}  {v.category.label}  ({v.describe()})")
        click.echo(f"  key: {tuple(int(x) for x in v.key)}")

    click.echo(f"profile: {profile.name}")
    show("hand", a)
    if versus:
        show("vs", b)
        click.echo(f"  as the dealer's hand it {'qualifies' if dealer_qualifies(b) else 'does not qualify'}")
        click.echo(f"result: {verdict}")


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
        raise click.ClickException(str(e)) from None
    click.echo(json.dumps(out, indent=2))


@click.group("paytable")
def paytable_group() -> None:
    """List the shipped paytables or report their exact return."""


@paytable_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def paytable_list(as_json: bool) -> None:
    """List the shipped paytables: name, kind, citation."""
    tables = list_paytables()
    if as_json:
        click.echo(json.dumps([
            {"name": p.name, "kind": p.kind, "title": p.title, "section": p.section, "label": p.label,
             "expires": p.expires, "citation": p.citation,
             "lines": {k: str(v) for k, v in p.lines.items()}}
            for p in tables
        ], indent=2))
        return
    for p in tables:
        lines = ", ".join(f"{k} {v}" for k, v in p.lines.items())
        extra = f"  [expires {p.expires}]" if p.expires else ""
        click.echo(f"{p.name:<24} {p.kind:<15} {p.title}{extra}")
        click.echo(f"{'':<24} {'':<15} {lines}")


@paytable_group.command("report")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_profile_option
@click.option("--wager-cents", type=click.IntRange(min=1), default=500, show_default=True,
              help="Wager used to value flat-amount lines (Six Card Bonus Paytable E).")
def paytable_report_cmd(names: tuple[str, ...], as_json: bool, profile_name: str | None, wager_cents: int) -> None:
    """Exact return of each paytable by full enumeration (all shipped ones by default).

    NAMES are shipped names or paytable files. Each figure is printed as an
    exact fraction and a percentage to 4 decimals.
    """
    profile = get_profile(profile_name or "pennsylvania")
    try:
        tables = [load_paytable(n) for n in names] if names else list_paytables()
    except PaytableError as e:
        raise click.ClickException(str(e)) from None
    t0 = time.perf_counter()
    reports = []
    if sys.stderr.isatty():
        with click.progressbar(tables, label="enumerating", file=sys.stderr,
                               item_show_func=lambda p: p.name if p else "") as bar:
            for p in bar:
                reports.append(paytable_report(p, profile, wager_cents))
    else:
        for p in tables:
            reports.append(paytable_report(p, profile, wager_cents))
    elapsed = time.perf_counter() - t0
    if as_json:
        click.echo(json.dumps({"profile": profile.name, "seconds": round(elapsed, 3),
                               "paytables": [r.to_dict() for r in reports]}, indent=2))
        return
    for r in reports:
        p = r.paytable
        click.echo(f"{p.name} ({p.kind}, profile {profile.name})")
        click.echo(f"  {p.title}")
        click.echo(f"  citation: {p.citation}")
        for line in r.lines():
            click.echo(line)
        click.echo("")
    click.echo(f"enumerated {len(reports)} paytable(s) in {elapsed:.2f} s")


def register(group: click.Group) -> None:
    """Add the rules-engine subcommands to the ``tablectl`` group."""
    group.add_command(hand_cmd)
    group.add_command(settle_cmd)
    group.add_command(paytable_group)
