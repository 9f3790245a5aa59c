"""``tablectl paytable list`` (the shipped paytables) and ``tablectl paytable report
[NAME|FILE...] [--json]`` (exact returns by enumeration, docs/rules-profiles.md)."""

from __future__ import annotations

import json
import sys
import time

import click

from table.rules.paytables import PaytableError, list_paytables, load_paytable
from table.rules.profiles import get_profile
from table.rules.report import report as paytable_report

from .exits import exit_codes
from .options import profile_option as _profile_option


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("paytable")
def paytable_group() -> None:
    """List the shipped paytables or report their exact return."""


@exit_codes({0: "the list is on stdout"})
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


@exit_codes({
    0: "the report is on stdout",
    1: "a paytable is unknown or its file is invalid (the message names the file and line)",
})
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
