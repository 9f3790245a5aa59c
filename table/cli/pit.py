"""``tablectl pit serve``: the pit's read-only wall page of the floor service, on a machine of its own."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click

from table.logs import configure_logging

from .exits import exit_codes


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("pit")
def pit_group() -> None:
    """The pit's read-only wall page: the floor's grid of a pit, without sign-in.

    The pit board is the floor service's (tablectl floor serve): signed in, the pit
    boss's grid; without sign-in, /pit?pit=NAME for the pits [floor] wall_pits names.
    This command serves that same wall page on another machine (a display in the pit),
    read from the floor's database (docs/integration.md, "The floor service").
    """


@exit_codes({0: "stopped by SIGTERM or SIGINT"})
@pit_group.command("serve")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="The floor's config (tablectl floor serve --config): its database and display time zone are "
                   "read; the database is only read.")
@click.option("--pit", "pits", multiple=True, metavar="NAME",
              help="A pit to show (its wall page /pit?pit=NAME). Again for each further pit. Default: the config's "
                   "[floor] wall_pits.")
@click.option("--web", "web", default="127.0.0.1:8090", show_default=True, metavar="HOST:PORT",
              help="Serve the page here (port 0: any free port; each pit's address is printed).")
def serve_command(config_path: str, pits: tuple[str, ...], web: str) -> None:
    """Serve the floor's read-only wall page of the pits NAME from the floor's database until SIGTERM or SIGINT (no sign-in, no money, no command).

    Prints each pit page's address on stdout, one a line. A bad config, pit name,
    an unreadable database, or an address that cannot be bound, is bad usage (2).
    """
    from table.cli.run import _host_port
    from table.floor.config import FloorConfigError, load_floor_config
    from table.floor.store import StoreError
    from table.floor.wall import WallDisplay
    from table.interfaces.auth import PIT_RE

    configure_logging(stream=sys.stderr, fmt="auto", level="info")
    try:
        config = load_floor_config(config_path)
    except FloorConfigError as exc:
        raise click.UsageError(str(exc)) from None
    shown = tuple(dict.fromkeys(pits or config.wall_pits))
    if not shown:
        raise click.UsageError("no pit to show: give --pit NAME, or name the pits in the config's [floor] wall_pits")
    bad = [p for p in shown if not PIT_RE.match(p)]
    if bad:
        raise click.UsageError(f"--pit {bad[0][:64]!r}: a pit name is letters, digits, '.', '_' or '-'")
    host, port = _host_port(web)
    db = config.database
    if not db.startswith(("postgresql://", "postgres://")):  # read only: a missing file is never made here
        path = Path(db[len("sqlite://"):] if db.startswith("sqlite://") else db)
        if not path.is_file():
            raise click.UsageError(f"the floor's database ({db}): no such file; start the floor service "
                                   "(tablectl floor serve) first, it makes the database")
    try:
        wall = WallDisplay(config, shown, host, port)
    except StoreError as exc:
        raise click.UsageError(f"the floor's database ({config.database}): {exc}") from None
    except OSError as exc:
        raise click.UsageError(f"--web {web}: {exc}") from None
    for pit in shown:
        click.echo(wall.page(pit))
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        wall.close()
