"""``tablectl soak``: full rounds with random faults of every class, against ground truth."""

from __future__ import annotations

import json
import logging
import sys

import click
import structlog

from .exits import exit_codes


@exit_codes({
    0: "every fault was detected and no card event was lost, duplicated or misread, no false alarm",
    1: "a fault went undetected, a card event was lost, duplicated or misread, or a false alarm",
})
@click.command("soak")
@click.option("--rounds", type=click.IntRange(1), default=1000, show_default=True, help="Rounds to play.")
@click.option("--faults", type=click.Choice(["random", "none"]), default="random", show_default=True,
              help="random: a fault of a random class in --fault-rate of the rounds.")
@click.option("--fault-rate", type=click.FloatRange(0, 1), default=0.3, show_default=True,
              help="Share of the rounds that get a fault (with --faults random), 0 to 1.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seeds the faults and the shuffles.")
@click.option("--seats", type=click.IntRange(1, 7), default=3, show_default=True,
              help="Players at the table (each round deals 3 cards a seat and 3 to the dealer).")
@click.option("--speed", type=click.FloatRange(1, 1000), default=None,
              help="Run the table's clock this many times faster than real time: an unplug's "
                   "duration, a slow dealer, the devices' resend back-off and the controller's event "
                   "timeout (default 10; 1 is real time).")
@click.option("--shoe-driver", "shoe_driver", metavar="NAME", default=None,
              help="Soak a driver plugin's shoe (docs/drivers.md, 'Soak'): its emulator and the SPEC shuffler's, "
                   "each a process of its own, real time; only the shoe's fault classes are drawn.")
@click.option("--shuffler-driver", "shuffler_driver", metavar="NAME", default=None,
              help="Soak a driver plugin's shuffler (docs/drivers.md, 'Soak'): its emulator and the SPEC shoe's, "
                   "each a process of its own, real time; only the shuffler's fault classes are drawn.")
@click.option("--driver-option", "driver_options", metavar="KEY=VALUE", multiple=True,
              help="With --shoe-driver or --shuffler-driver: one of the driver's own options, as in "
                   "[devices.shoe] or [devices.shuffler] (e.g. draw_index=false); the emulator is started to match.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def soak_command(rounds: int, faults: str, fault_rate: float, seed: int, seats: int, speed: float | None,
                 as_json: bool, shoe_driver: str | None = None, driver_options: tuple[str, ...] = (),
                 shuffler_driver: str | None = None) -> None:
    """Play ROUNDS full rounds on a simulated table (emulators on ptys) with faults
    injected from every class: dealer errors (foreign card, card read twice, short
    deck, card drawn early, card too many), device faults (unreadable card, jam,
    shoe or shuffler rebooted or unplugged) and link noise, and the hands' and
    power's faults the emulators make (the shuffler's door opened at a shuffle,
    its power cut mid-shuffle or as the deck is taken out, its line noisy, a
    card event lost in the shoe; the deck carried from the shuffler to the shoe
    with six cards on top, a card out, a card doubled, or a cold deck loaded
    instead). Counts faults injected and detected, card
    events lost or duplicated against the emulators' ground truth, and false
    custody alarms (violations or incidents in a round with no fault). Card
    events are aligned read by read against the shoe's ground truth: lost,
    duplicated and misread reads are counted apart.

    \b
    What the summary sets apart, so nothing is hidden in the totals:
      faults_withdrawn        armed but never struck (its round ended first): not counted
      faults_pending_at_end   a missing card whose deck was not counted again before the end
      faults_detected_late    detected one round after the fault (included in faults_detected)
      extra_alarm_rounds      faulted rounds with an alarm their fault does not explain
      alarms_excused_as_aftermath  a held-back card read arriving the round after a shoe
                              reboot, unplug or noise burst (see table.hil.chaos.AFTERMATH)
      link_notices_without_fault   link notices in rounds with no fault near them
      wrongly_settled         rounds that settled although their fault's class must
                              hold them (cards not the verified deck's, or not all read)
      exits                   rounds a link error escaped (outcome "exit" below)
    Each undetected fault, false alarm, extra alarm and stray notice is listed
    with its round. The table by class gives, for each: injected, detected
    (late), withdrawn, ridden through (held or settled, no exit), wrongly
    settled and exits; the soak exits 1 unless the last two are 0.

    The JSON summary's "outcomes" counts the rounds by how they ended
    (a kind no round had is left out):

    \b
      played: dealt and settled as normal
      held:   held for a supervisor (a custody violation or a fault the
              controller caught) and resolved as one would: voided with
              wagers returned, or if already settled, its results stand
      fault:  a device fault or timeout stopped it; the table waited and
              went on ('tablectl run' with a front door tries the step again)
      exit:   a link error escaped it (a refused Shuffle, a link that stays
              down): 'tablectl run' exits 4 on it (counted in exits); the
              soak plays on, as a restart would

    With --shoe-driver NAME the shoe is a driver plugin's emulator (the
    plugin's emulator_argv) and the shuffler the SPEC shuffler's, each a
    process of its own, in real time, moved by a bench dealer through their
    control sockets; only the shoe's fault classes are drawn (foreign card,
    card read twice, unreadable card, card drawn early, card too many, noise
    as a card is reported, shoe unplugged or rebooted, and a card that leaves
    past the reader unreported). The summary also names the driver, its
    options and the capabilities its shoe lacks (docs/drivers.md, "Soak").
    With --shuffler-driver NAME the same the other way round: the plugin's
    shuffler and the SPEC shoe, the shuffler's classes drawn (a jam, the door
    at a shuffle, a card left out, line noise, a lost event, the cable, a power
    cycle, the power cut mid-shuffle and as the deck is taken out).
    """
    logging.getLogger().handlers.clear()
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    rate = fault_rate if faults == "random" else 0.0
    if shoe_driver is not None and shuffler_driver is not None:
        raise click.UsageError("soak one driver at a time: --shoe-driver or --shuffler-driver, not both")
    if shoe_driver is not None or shuffler_driver is not None or driver_options:
        kind = "shuffler" if shuffler_driver is not None else "shoe"
        summary = _driver_soak(shuffler_driver or shoe_driver, driver_options, rounds, seed, seats, rate, speed,
                               kind)
    else:
        summary = _spec_soak(rounds, seed, seats, rate, speed)
    _report(summary, as_json)


def _driver_soak(driver: str | None, driver_options: tuple[str, ...], rounds: int, seed: int, seats: int,
                 rate: float, speed: float | None, kind: str = "shoe") -> dict:
    from devices.contract import DriverError
    from table.hil.driver_soak import run_driver_soak

    from .conformance import _option_value

    if driver is None:
        raise click.UsageError("--driver-option needs --shoe-driver NAME or --shuffler-driver NAME")
    if speed is not None:
        raise click.UsageError("--speed is for the simulated table: a driver's emulator runs in real time")
    options = dict(_option_value(o) for o in driver_options)
    try:
        return run_driver_soak(rounds, seed, driver=driver, options=options, seats=seats, fault_rate=rate,
                               kind=kind)
    except DriverError as exc:
        raise click.UsageError(str(exc)) from None


def _spec_soak(rounds: int, seed: int, seats: int, rate: float, speed: float | None) -> dict:
    from table.hil.chaos import SOAK_SPEED, run_soak

    speed = SOAK_SPEED if speed is None else speed
    if sys.stderr.isatty():
        with click.progressbar(length=rounds, label="soak", file=sys.stderr) as bar:
            summary = run_soak(rounds, seed, seats=seats, fault_rate=rate, progress=lambda n: bar.update(1),
                               speed=speed)
    else:
        summary = run_soak(rounds, seed, seats=seats, fault_rate=rate, speed=speed)
    return summary


def per_class_table(by_kind: dict) -> str:
    """The soak's table by fault class (docs/emulators.md, "The soak's table"): injected,
    detected (late), withdrawn, ridden through (held or settled, no exit), wrongly settled
    (must be 0) and exits (must be 0), one line a class, with a header."""
    cols = ("injected", "detected", "late", "withdrawn", "ridden_through", "wrongly_settled", "exits")
    heads = ("injected", "detected", "late", "withdrawn", "ridden through", "wrongly settled", "exits")
    width = max([len("class")] + [len(k) for k in by_kind])
    lines = ["  " + f"{'class':{width}}" + "".join(f"  {h:>{max(len(h), 5)}}" for h in heads)]
    for kind, n in by_kind.items():
        row = dict(n, late=n.get("detected_late", 0))
        lines.append("  " + f"{kind:{width}}" + "".join(f"  {row.get(c, 0):>{max(len(h), 5)}}"
                                                          for c, h in zip(cols, heads)))
    return "\n".join(lines)


def _report(summary: dict, as_json: bool) -> None:
    """Print the summary (text or one JSON object) and exit 0 or 1 (see the exit codes)."""
    if as_json:
        click.echo(json.dumps(summary))
    else:
        keys = ("rounds", "faults_injected", "faults_detected", "lost_events", "duplicated_events",
                "false_alarms", "misread_events", "card_events", "faults_detected_late", "faults_withdrawn",
                "faults_pending_at_end", "extra_alarm_rounds", "alarms_excused_as_aftermath",
                "wrongly_settled", "exits", "exits_without_fault", "link_notices_without_fault")
        width = max(len(k) for k in keys)
        for key in keys:
            click.echo(f"{key:{width}} {summary.get(key, 0)}")
        click.echo(per_class_table(summary["by_kind"]))
        click.echo("outcomes: " + "  ".join(f"{k} {v}" for k, v in summary["outcomes"].items()))
        w = summary["wagers"]
        click.echo(f"wagers: placed {w['placed_cents']} cents in {w['rounds']} rounds ended = settled "
                   f"{w['settled_cents']} + returned by voids {w['returned_cents']}: "
                   f"{'balanced' if w['ok'] else 'NOT BALANCED'}; {w['open_rounds']} round(s) still open")
        if "driver" in summary:
            click.echo(f"driver: {summary['driver']} {json.dumps(summary['options'])}; its "
                       f"{summary.get('kind', 'shoe')} lacks: "
                       f"{', '.join(summary['missing']) or 'nothing'}")
        for line in w["problems"]:
            click.echo(f"  {line}")
        for a in summary["anomalies"]:
            click.echo(f"round {a['round']:6}: {a['what']} {json.dumps({k: v for k, v in a.items() if k not in ('round', 'what')})}")
    bad = (summary["faults_detected"] < summary["faults_injected"] or summary["lost_events"]
           or summary["duplicated_events"] or summary["false_alarms"] or summary["misread_events"]
           or summary.get("wrongly_settled", 0) or summary.get("exits", 0) or summary["wagers"]["problems"])
    sys.exit(1 if bad else 0)
