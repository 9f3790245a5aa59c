"""``tablectl floor serve``: the floor service, every table's signed records in one database."""

from __future__ import annotations

import signal
import sys
import threading

import click

from table.logs import configure_logging

from .exits import exit_codes

#: how long ``floor serve`` waits for its brokers' subscriptions before it prints its address (s)
FOLLOW_WAIT_S = 10.0


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

    Prints the floor's address on stdout once it serves and has subscribed to
    every broker (waiting at most 10 s: a broker away is logged and followed
    when it comes), so a table started after that line is kept from its first
    round. A bad config, key or address is bad usage (2); a database that
    cannot be opened or migrated exits 1.
    """
    from table.floor.config import FloorConfigError, load_floor_config
    from table.floor.service import FloorService
    from table.floor.store import StoreError

    import structlog

    configure_logging(stream=sys.stderr, fmt="auto", level="info")
    log = structlog.get_logger("table.floor")
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
    away = service.wait_following(FOLLOW_WAIT_S)  # a table started after the address is heard from its start
    if away:  # the notary answers meanwhile; the feed keeps trying and logs when it subscribes
        log.warning("floor_brokers_not_followed_yet", brokers=away, waited_s=FOLLOW_WAIT_S)
    click.echo(service.url, nl=True)
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        service.close()
