"""``tablectl shuffle-check``: is the shuffle random, judged from the cards as dealt?"""

from __future__ import annotations

import json
import sys
import textwrap

import click


from table.interfaces.audit_view import dealt_rounds
from table.journal import Journal, JournalError
from table.shuffle_check import PositionCounts, chi_square_report, rounds_until_flagged

from .exits import exit_codes


class BadJournal(click.ClickException):
    """JOURNAL cannot be read as a journal: exit 2, never 1 (which says the shuffle failed)."""

    exit_code = 2


@exit_codes({
    0: "the shuffle passes",
    1: "it fails (the report says after how many rounds it was first flagged)",
    2: "the journal cannot be read (missing, not a journal, unreadable entries), or bad usage",
    3: "too few rounds for a verdict (the report says how many more it needs)",
})
@click.command("shuffle-check")
@click.argument("journal", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--confidence", type=click.FloatRange(0.5, 0.9999), default=0.95, show_default=True,
              help="Fail when p < 1 - CONFIDENCE; a fair shuffle then fails 1 run in 1/(1 - CONFIDENCE).")
def shuffle_check_command(journal: str, as_json: bool, confidence: float) -> None:
    """Chi-square test of each card's dealt position, per deck, over the rounds in
    JOURNAL (in the style of GLI-29 and COMAR 36.05.02.17 F, 95% confidence).

    A test at 95% confidence fails a perfectly fair shuffle about 1 run in 20:
    a failure is evidence, not proof. Collect more rounds and re-test: a fair
    shuffle's p-value lands anywhere between 0 and 1 from one record to the
    next (a re-test on fresh rounds, e.g. a new run's journal, fails again only
    1 time in 20), while a weak shuffle's p-value falls further with every
    round added. Condemn a shuffler on a failure that persists, not on one run.
    """
    try:
        with Journal(journal, read_only=True) as j:
            rounds = dealt_rounds(j)
    except JournalError as exc:
        raise BadJournal(str(exc)) from None
    except (KeyError, TypeError, ValueError) as exc:  # a card read without its card, or not a card
        raise BadJournal(f"{journal}: unreadable card_read entry: {exc!r}") from None
    counts = PositionCounts()
    for deck, cards in rounds:
        counts.add_round(deck, cards)
    report = chi_square_report(counts, confidence=confidence)
    report["flagged_after_rounds"] = rounds_until_flagged(rounds, confidence=confidence) \
        if report["verdict"] == "fail" else None
    if as_json:
        click.echo(json.dumps(report))
    else:
        for line in report_lines(report, journal):
            click.echo(line)
    sys.exit({"pass": 0, "fail": 1}.get(report["verdict"], 3))


def _p(value: float | None) -> str:
    """A p-value for people: 3 significant digits (``0.0362``, ``1.2e-105``)."""
    return "-" if value is None else f"{value:.3g}"


def report_lines(report: dict, journal: str) -> list[str]:
    """The text report: the totals, each deck, and what the verdict rests on (or, with
    too few rounds, how many more it needs)."""
    per_deck = report["rounds_per_deck_needed"]
    if not report["decks"]:
        lines = [f"rounds 0  verdict INSUFFICIENT: {journal} holds no dealt rounds",
                 f"the test needs at least {per_deck} rounds of each deck ({2 * per_deck} with the two decks "
                 "alternating) before it can give a verdict"]
        return [w for line in lines for w in textwrap.wrap(line, 79, subsequent_indent="  ", break_on_hyphens=False)]
    lines = [f"rounds {report['rounds']}  X2 {report['statistic']:.1f}  dof {report['dof']}  "
             f"p {_p(report['p_value'])}  verdict {report['verdict'].upper()}"]
    for deck, d in report["decks"].items():
        lines.append(f"  deck {deck}: rounds {d['rounds']}  X2 {d['statistic']:.1f}  p {_p(d['p_value'])}  "
                     f"{d['verdict']}")
    if report["verdict"] == "insufficient":
        more = {deck: n for deck, n in report["rounds_needed"].items() if n}
        what = " and ".join(f"{n} more of deck {deck}" for deck, n in more.items())
        lines.append(f"too few rounds for a verdict (the p-values above give none): every dealt position of "
                     f"each deck needs {per_deck} deals, one card expected per cell; deal at least {what} "
                     f"(about {sum(more.values())} rounds), then check again")
    elif report["verdict"] == "fail":
        lines.append(f"FAIL at {report['confidence']:.0%} confidence (p < {1 - report['confidence']:.2g})"
                     + (f"; flagged after {report['flagged_after_rounds']} rounds" if report["flagged_after_rounds"]
                        else "") + ". A fair shuffle fails this often by chance: re-test on fresh rounds")
    else:
        lines.append(f"PASS at {report['confidence']:.0%} confidence (p >= {1 - report['confidence']:.2g})")
    return [w for line in lines for w in textwrap.wrap(line, 79, subsequent_indent="  ", break_on_hyphens=False)]
