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
@click.option("--driver", "driver", metavar="NAME", default=None,
              help="Check a driver plugin (docs/drivers.md) rather than a SPEC device: the host-side checks "
                   "through the driver contract. 'spec' is the built-in driver.")
@click.option("--driver-option", "driver_options", metavar="KEY=VALUE", multiple=True,
              help="One of the driver's own options, as in [devices.KIND] (a TOML value: 9600, true, \"x\").")
@click.option("--list-drivers", is_flag=True, help="List the installed device drivers and their packages, then exit.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout instead of the table.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning",
              show_default=True, help="Link logs on stderr.")
def conformance_command(shuffler_url: str | None, shoe_url: str | None, shuffler_control, shoe_control,
                        operator_prompt: bool, emulated: str | None, event_timeout: float, shuffle_timeout: float,
                        driver: str | None, driver_options: tuple[str, ...], list_drivers: bool,
                        as_json: bool, log_level: str) -> None:
    """Check a shuffler and/or a shoe against the link protocol (protocols/SPEC.md).

    Prints a pass/fail table a vendor can hand to a test lab. With --driver NAME
    the host-side checks run through that driver plugin instead (events, their
    order, custody on faults, reconnect; docs/drivers.md).
    """
    if list_drivers:
        from devices.plugins import installed

        for name, package in sorted(installed().items()):
            click.echo(f"{name}\t{package}")
        return
    if driver is not None:
        _driver_run(driver, driver_options, shuffler_url, shoe_url, shuffler_control, shoe_control,
                    operator_prompt, emulated, event_timeout, shuffle_timeout, as_json, log_level)
        return
    if driver_options:
        raise click.UsageError("--driver-option needs --driver NAME")
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


def _option_value(text: str) -> tuple[str, object]:
    import tomllib

    key, eq, raw = text.partition("=")
    if not eq or not key.strip().isidentifier():
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint="--driver-option")
    try:
        return key.strip(), tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return key.strip(), raw.strip()  # a bare word: a string


def _driver_run(driver: str, driver_options: tuple[str, ...], shuffler_url, shoe_url, shuffler_control,
                shoe_control, operator_prompt: bool, emulated, event_timeout: float, shuffle_timeout: float,
                as_json: bool, log_level: str) -> None:
    """``--driver NAME``: the drivers' suite (devices/conformance/drivers.py) on each device named."""
    from devices.conformance.drivers import DriverTarget, run_driver_suite
    from devices.conformance.suite import ControlOperator, Operator, PromptOperator
    from devices.contract import DriverError
    from devices.plugins import installed, prepare

    if emulated:
        raise click.UsageError("--emulated runs the SPEC emulators; with --driver name the devices (--shoe URL)")
    if not (shuffler_url or shoe_url):
        raise click.UsageError("name a device for the driver: --shoe URL and/or --shuffler URL")
    options = dict(_option_value(o) for o in driver_options)
    devices = [(k, u) for k, u in (("shuffler", shuffler_url), ("shoe", shoe_url)) if u]
    for kind, _url in devices:
        try:
            prepare(driver, kind, options)
        except DriverError as exc:
            raise click.UsageError(f"--driver {driver}: {exc}") from None
    configure_logging(stream=sys.stderr, fmt="auto", level=log_level)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if operator_prompt:
        operator: Operator = PromptOperator(lambda text: click.prompt(f"\n>>> {text}", default="",
                                                                     show_default=False, err=True))
    elif shuffler_control or shoe_control:
        operator = ControlOperator(shuffler=shuffler_control, shoe=shoe_control)
    else:
        operator = Operator()
    results = []
    for kind, url in devices:
        target = DriverTarget(driver, kind, url, options=options, operator=operator, event_timeout_s=event_timeout,
                              shuffle_timeout_s=shuffle_timeout)
        results += run_driver_suite(target, on_result=None if as_json else
                                    (lambda r: click.echo(f"  {r.check.id} ... {r.outcome}", err=True)))
    summary = summarize(results)
    package = installed().get(driver, "?")
    if as_json:
        click.echo(json.dumps({
            "date": started, "host": {"package": _package_version()},
            "driver": {"name": driver, "package": package, "options": options},
            "target": dict(devices), "operator": operator.name,
            "results": [r.to_json() for r in results], "summary": summary}, indent=1))
    else:
        lines = ["threecard-table driver conformance report", f"  date      {started}",
                 f"  host      threecard-table {_package_version()}, driver contract (docs/drivers.md)",
                 f"  driver    {driver} ({package}) options {options or '{}'}",
                 *(f"  {k:<9} {u}" for k, u in devices), f"  physical steps by: {operator.name}", ""]
        rows = [("DEVICE", "CHECK", "RESULT", "DETAIL")] + [(r.check.kind, r.check.name, r.outcome.upper(), r.detail)
                                                             for r in results]
        w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
        lines += [f"{a:<{w0}}  {b:<{w1}}  {c:<6}  {d}" for a, b, c, d in rows]
        lines += ["", f"{summary['total']} checks: {summary['passed']} passed, {summary['failed']} failed, "
                      f"{summary['skipped']} skipped (a skip is not a pass)", f"RESULT: {summary['verdict'].upper()}"]
        click.echo("\n".join(lines))
    sys.exit({"pass": 0, "fail": EXIT_FAILED, "incomplete": EXIT_INCOMPLETE}.get(summary["verdict"], EXIT_FAILED))
