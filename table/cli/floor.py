"""``tablectl floor serve``: the floor service, every table's signed records in one database."""

from __future__ import annotations

import signal
import sys
import threading

import click

from table.logs import configure_logging

from .exits import exit_codes


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("floor")
def floor_group() -> None:
    """The floor: every table's signed records in one database, the notary, the floor reports."""


@exit_codes({0: "stopped by SIGTERM or SIGINT", 1: "the floor database cannot be opened or migrated"})
@floor_group.command("serve")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="The floor config (TOML): [floor] database, key_file, table_keys, listen; [[broker]] url.")
def serve_command(config_path: str) -> None:
    """Follow every table on the config's brokers, keep their signed records, answer the notary.

    Prints the floor's address on stdout once it serves. A bad config, key or
    address is bad usage (2); a database that cannot be opened or migrated exits 1.
    """
    from table.floor.config import FloorConfigError, load_floor_config
    from table.floor.service import FloorService
    from table.floor.store import StoreError

    configure_logging(stream=sys.stderr, fmt="auto", level="info")
    try:
        service = FloorService(load_floor_config(config_path))
    except FloorConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        service.start()
    except StoreError as exc:
        click.echo(f"tablectl floor serve: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        raise click.UsageError(f"floor.listen {service.config.listen}: {exc}") from None
    click.echo(service.url, nl=True)
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        service.close()
