"""``tablectl config check|show``: validate and print a table config file."""

from __future__ import annotations

import json
import sys

import click

from table.config import DEFAULT_PATH, ConfigError, load_config

from .exits import exit_codes

EXIT_INVALID = 1

_FILE = click.argument("file", type=click.Path(dir_okay=False), default=str(DEFAULT_PATH), required=False)


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("config")
def config_group() -> None:
    """Validate and show the table config (default /etc/threecard/table.toml)."""


@exit_codes({
    0: "FILE is valid (one line on stdout sums it up)",
    1: "FILE is invalid or cannot be read: every problem on stderr as FILE:LINE: KEY: problem",
})
@config_group.command("check")
@_FILE
def check_command(file: str) -> None:
    """Check FILE; exit 0 when valid, 1 with every problem (FILE:LINE: KEY: ...) on stderr."""
    try:
        cfg = load_config(file)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        n = len(exc.problems)
        click.echo(f"{file}: invalid ({n} problem{'s' if n != 1 else ''})", err=True)
        sys.exit(EXIT_INVALID)
    for why in cfg.unsafe_files():
        click.echo(f"{file}: warning: {why} (the service refuses to start so)", err=True)
    risk = _shuffler_risk(cfg)
    if risk is not None:
        click.echo(f"{file}: warning: devices.shuffler.driver {cfg.devices.shuffler.driver!r}: {risk}", err=True)
    decks = ", ".join(f"{d.id} {d.back_colour}" for d in cfg.decks)
    click.echo(f"{file}: valid: table {cfg.table.id}, {cfg.table.seats} seats, decks {decks}, "
               f"shuffler {cfg.devices.shuffler.url}, shoe {cfg.devices.shoe.url}")


def _shuffler_risk(cfg) -> str | None:
    """The residual risk of the config's shuffler driver when it does not declare the shuffle
    commitment (docs/drivers.md, "Capabilities"); None when it does. The SPEC driver
    declares it; a 1.0 SPEC shuffler is found only at start, by its protocol version."""
    from devices.contract import DriverError
    from devices.apart.choose import prepare_apart as prepare  # a plugin is checked in its own process
    from table.procedure.commitment import residual_risk

    try:
        _, caps = prepare(cfg.devices.shuffler.driver, "shuffler", cfg.devices.shuffler.options)
    except DriverError:
        return None  # already a problem of the config (load_config checked the driver)
    return residual_risk(caps)


@exit_codes({
    0: "the effective config is on stdout",
    1: "FILE is invalid or cannot be read: the problems on stderr",
})
@config_group.command("show")
@_FILE
@click.option("--json", "as_json", is_flag=True, help="JSON instead of TOML.")
def show_command(file: str, as_json: bool) -> None:
    """Print FILE's effective config, defaults filled in (TOML, or JSON with --json).
    Exit 1 with the problems on stderr when FILE is invalid."""
    try:
        cfg = load_config(file)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_INVALID)
    if as_json:
        click.echo(json.dumps(cfg.to_dict(), indent=2))
    else:
        click.echo(f"# effective config of {file}\n" + cfg.to_toml(), nl=False)

