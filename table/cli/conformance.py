"""``tablectl conformance``: the device conformance suite outside pytest, as a report for a lab.

Runs :mod:`devices.conformance.suite` against the devices named and prints a
plain-text pass/fail table (or ``--json``). Exit status: 0 every check
passed; 1 any check failed; 2 bad usage; 3 nothing failed but some checks
were skipped (a physical step needed a person): the run is incomplete, and
a skip is never counted as a pass.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from importlib.metadata import PackageNotFoundError, version

import click

from devices.conformance.suite import FAIL, PASS, SKIP, CheckResult, Target, run_suite
from protocols.messages import PROTOCOL_MAJOR, PROTOCOL_MINOR

from table.hil.conformance import InProcessBench, hil_target, usb_url
from table.logs import configure_logging

from .exits import exit_codes
from .options import address_option

EXIT_FAILED = 1
EXIT_INCOMPLETE = 3



def _package_version() -> str:
    try:
        return version("threecard-table")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def summarize(results: list[CheckResult]) -> dict:
    """Counts and the verdict: ``"pass"`` (all passed), ``"fail"`` (any failed),
    ``"incomplete"`` (none failed, some skipped) or ``"empty"``."""
    counts = {o: sum(r.outcome == o for r in results) for o in (PASS, FAIL, SKIP)}
    verdict = ("empty" if not results else "fail" if counts[FAIL] else "incomplete" if counts[SKIP] else "pass")
    return {"total": len(results), "passed": counts[PASS], "failed": counts[FAIL], "skipped": counts[SKIP],
            "verdict": verdict}


def render_table(target: Target, results: list[CheckResult], started: str) -> str:
    """The plain-text report: header, one row per check, summary."""
    lines = [
        "threecard-table device conformance report",
        f"  date      {started}",
        f"  host      threecard-table {_package_version()}, protocol {PROTOCOL_MAJOR}.{PROTOCOL_MINOR} "
        f"(protocols/SPEC.md)",
        f"  shuffler  {target.shuffler_url or '(not under test)'}",
        f"  shoe      {target.shoe_url or '(not under test)'}",
        f"  where     {target.label}; physical steps by: {target.operator.name}",
        "",
    ]
    rows = [("DEVICE", "CHECK", "RESULT", "DETAIL")]
    rows += [(r.check.device, r.check.name, r.outcome.upper(), r.detail) for r in results]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    for row in rows:
        lines.append(f"{row[0]:<{w0}}  {row[1]:<{w1}}  {row[2]:<6}  {row[3]}")
    s = summarize(results)
    lines += ["", f"{s['total']} checks: {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped "
                  f"(a skip is not a pass)",
              f"RESULT: {s['verdict'].upper()}"]
    if s["verdict"] == "incomplete":
        lines.append("Skipped checks need a person at the bench: rerun with --operator-prompt "
                     "(or --shuffler-control/--shoe-control for standalone emulators).")
    return "\n".join(lines) + "\n"


@exit_codes({
    0: "every check passed",
    1: "a check failed (a device that cannot be opened fails its checks)",
    3: "none failed but some were skipped: a physical step needed a person (incomplete; a skip is not a pass)",
})
@click.command("conformance")
@click.option("--shuffler", "shuffler_url", metavar="URL",
              help="Shuffler under test: /dev/..., socket://HOST:PORT or usb://VID:PID[/SERIAL].")
@click.option("--shoe", "shoe_url", metavar="URL", help="Shoe under test (same forms).")
@click.option("--shuffler-control", metavar="HOST:PORT", callback=address_option,
              help="Control socket of a standalone shuffler emulator (tablectl emulate --control).")
@click.option("--shoe-control", metavar="HOST:PORT", callback=address_option,
              help="Control socket of a standalone shoe emulator.")
@click.option("--operator-prompt", is_flag=True,
              help="Ask a person at the bench to do the physical steps (insert a deck, draw cards).")
@click.option("--emulated", type=click.Choice(["pty", "usb"]), default=None,
              help="Run against in-process emulators instead (a self-test of the suite).")
@click.option("--event-timeout", type=click.FloatRange(0.1, 600), default=10.0, show_default=True, metavar="S",
              help="Seconds to wait for a device event after a physical step.")
@click.option("--shuffle-timeout", type=click.FloatRange(1, 3600), default=180.0, show_default=True, metavar="S",
              help="Seconds a shuffle may take to verify (SPEC 7).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of the table.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning",
              show_default=True, help="Link logs on stderr.")
def conformance_command(shuffler_url: str | None, shoe_url: str | None, shuffler_control, shoe_control,
                        operator_prompt: bool, emulated: str | None, event_timeout: float, shuffle_timeout: float,
                        as_json: bool, log_level: str) -> None:
    """Check a shuffler and/or a shoe against the link protocol (protocols/SPEC.md).

    Prints a pass/fail table a vendor can hand to a test lab.
    """
    if emulated and (shuffler_url or shoe_url):
        raise click.UsageError("--emulated runs in-process emulators; do not also name devices")
    if not emulated and not (shuffler_url or shoe_url):
        raise click.UsageError("name a device: --shuffler URL and/or --shoe URL (or --emulated pty|usb)")
    for name, url in (("--shuffler", shuffler_url), ("--shoe", shoe_url)):
        if url and url.startswith("usb:"):
            try:
                usb_url(url)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint=name) from None
    configure_logging(stream=sys.stderr, fmt="auto", level=log_level)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    devices = tuple(d for d, u in (("shuffler", shuffler_url), ("shoe", shoe_url)) if u or emulated)

    def progress(result: CheckResult) -> None:
        if not as_json:
            click.echo(f"  {result.check.id} ... {result.outcome}", err=True)

    if emulated:
        with InProcessBench(transport=emulated) as bench:
            target = bench.target
            results = run_suite(target, devices, on_result=progress)
    else:
        ask = (lambda text: click.prompt(f"\n>>> {text}", default="", show_default=False, err=True)) \
            if operator_prompt else None
        target = hil_target(shuffler_url=shuffler_url, shoe_url=shoe_url, shuffler_control=shuffler_control,
                            shoe_control=shoe_control, ask=ask, event_timeout_s=event_timeout,
                            shuffle_timeout_s=shuffle_timeout)
        results = run_suite(target, devices, on_result=progress)
    summary = summarize(results)
    if as_json:
        click.echo(json.dumps({
            "date": started, "host": {"package": _package_version(), "protocol": f"{PROTOCOL_MAJOR}.{PROTOCOL_MINOR}"},
            "target": {"shuffler": target.shuffler_url, "shoe": target.shoe_url, "where": target.label,
                       "operator": target.operator.name},
            "results": [r.to_json() for r in results], "summary": summary,
        }, indent=1))
    else:
        click.echo(render_table(target, results, started), nl=False)
    sys.exit({"pass": 0, "fail": EXIT_FAILED, "incomplete": EXIT_INCOMPLETE}.get(summary["verdict"], EXIT_FAILED))
