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


@exit_codes({0: "every checkpoint of the source taken (or already there)",
             1: "a floor database cannot be opened, read or written",
             3: "some checkpoints refused: a bad signature, a table without a key, or a fork against what "
                "this floor kept (alarmed); the rest were taken"})
@floor_group.command("seed")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="This floor's config (TOML): its [floor] database and table_keys.")
@click.option("--from", "source", required=True, metavar="DATABASE",
              help="The floor database to take the checkpoints from: an absolute SQLite path, "
                   "sqlite:////ABS/PATH or postgresql://... (read only).")
def seed_command(config_path: str, source: str) -> None:
    """Give a new floor database the notary of an old one, before tables start against it.

    A floor database that starts empty (a lost disk restored elsewhere, a move
    from SQLite to PostgreSQL, a second floor with its own database) has no
    notary: it would take whatever checkpoint a broker retains, an older one an
    insider republished too. This reads every signed checkpoint the
    source floor kept, checks each with its table's key from this floor's
    table_keys, and takes them by the notary's rule (the notary only grows; a
    fork against what this floor kept is refused and alarmed). Run it with the
    serving floor stopped or running: both are safe. Prints one line of counts.
    """
    from pathlib import Path

    from table.floor.config import FloorConfigError, load_floor_config
    from table.floor.ingest import Floor
    from table.floor.record import floor_key
    from table.floor.store import StoreError, open_store
    from table.interfaces.brokers import PitSetupError, load_table_keys
    from table.keys import KeyFileError

    configure_logging(stream=sys.stderr, fmt="auto", level="info")
    try:
        config = load_floor_config(config_path)
        keys = load_table_keys(config.table_keys)
        floor_signing_key = floor_key(config.key_file)[0]
    except (FloorConfigError, PitSetupError, KeyFileError) as exc:
        raise click.UsageError(str(exc)) from None
    if not source.startswith(("postgresql://", "postgres://")):
        path = Path(source[len("sqlite://"):] if source.startswith("sqlite://") else source)
        if not path.is_file():  # never create an empty source (SQLite would)
            raise click.UsageError(f"--from {source}: no floor database there")
    try:
        old = open_store(source, migrate=False)
        try:
            signed = [s for (s,) in old.query("SELECT signed FROM checkpoints UNION SELECT signed FROM notary")]
        except StoreError as exc:
            raise click.UsageError(f"--from {old.where}: not a floor database with checkpoints ({exc})") from None
        finally:
            old.close()
        store = open_store(config.database)
        try:
            counts = Floor(store, keys, key=floor_signing_key).seed(_parsed(signed))  # the key signs its alarms
        finally:
            store.close()
    except StoreError as exc:
        click.echo(f"tablectl floor seed: {exc}", err=True)
        sys.exit(1)
    click.echo(f"seeded from {old.where}: {counts.taken} checkpoints taken, {counts.refused} refused as forks or "
               f"lower (alarmed), {counts.bad_signature} with a bad signature, {counts.unknown_table} of tables "
               "without a key")
    if counts.refused or counts.bad_signature or counts.unknown_table:
        sys.exit(3)


def _parsed(rows: list[str]) -> list[object]:
    """The stored signed checkpoints as objects (a row that is not JSON: an empty object, refused later)."""
    import json

    out: list[object] = []
    for text in rows:
        try:
            out.append(json.loads(text))
        except (TypeError, ValueError):
            out.append({})
    return out
