"""``tablectl pit serve``: the pit view, every table of a pit on one page, from the floor's MQTT broker."""

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
    """The pit view: every table of a pit on one page, from the floor's MQTT broker.

    For a site with brokers and no floor service. Where tablectl floor serve runs, the
    pit's board is the floor's own page: signed in, the pit boss's grid; without sign-in,
    /pit?pit=NAME for the pits [floor] wall_pits names (docs/integration.md).
    """


@exit_codes({0: "stopped by SIGTERM or SIGINT"})
@pit_group.command("serve")
@click.option("--broker", "--mqtt", "brokers", required=True, multiple=True, metavar="URL",
              help="A floor broker: mqtt://[USER@]HOST[:PORT][/PREFIX], or mqtts:// for TLS (port 8883); PREFIX: "
                   "the topic prefix a bridge put before threecard/... Again for each further broker.")
@click.option("--pit", "pits", required=True, multiple=True, metavar="NAME",
              help="A pit (the tables' [mqtt] floor): its topics threecard/NAME/+/status and /events. Again for "
                   "each further pit.")
@click.option("--web", "web", default="127.0.0.1:8090", show_default=True, metavar="HOST:PORT",
              help="Serve the page here (port 0: any free port; the address is printed).")
@click.option("--table-keys", "table_keys", required=True, type=click.Path(file_okay=False, exists=True),
              help="Folder of the tables' public keys, TABLE_ID.pub: only messages they signed are shown.")
@click.option("--max-tables", type=click.IntRange(1, 100_000), default=500, show_default=True,
              help="Show at most this many tables (the first keys in sorted order); a table past it is refused "
                   "loudly: logged, its messages counted, listed on the page.")
@click.option("--password-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The broker account's password (with USER@ in --broker; the same for every broker).")
@click.option("--ca-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The brokers' CA certificate, for mqtts://.")
@click.option("--stale-s", type=click.FloatRange(5, 3600), default=90.0, show_default=True,
              help="A table online but not heard from for this long shows 'no news'.")
def serve_command(brokers: tuple[str, ...], pits: tuple[str, ...], web: str, table_keys: str,
                  max_tables: int, password_file: str | None, ca_file: str | None, stale_s: float) -> None:
    """Serve the pit view of the pits NAME from the brokers URL until SIGTERM or SIGINT (a site without a floor service: with one, the floor's own pages are the pit's board).

    Prints the page's address on stdout. A bad URL, pit name or keys folder, or
    an address that cannot be bound, is bad usage (2).
    """
    from table.cli.run import _host_port
    from table.interfaces.pit import BrokerAddress, PitBoard, PitServer, PitSetupError, PitSubscriber, load_table_keys

    configure_logging(stream=sys.stderr, fmt="auto", level="info")
    try:
        addresses = list(dict.fromkeys(BrokerAddress.parse(url) for url in brokers))
        board = PitBoard(pits, load_table_keys(table_keys), max_age_s=max(stale_s, 90.0), stale_s=stale_s,
                         max_tables=max_tables)
    except PitSetupError as exc:
        raise click.UsageError(str(exc)) from None
    password = Path(password_file).read_text().strip("\r\n") if password_file else None
    host, port = _host_port(web)
    try:
        server = PitServer(board, host, port)
    except OSError as exc:
        raise click.UsageError(f"--web {web}: {exc}") from None
    subscribers = [PitSubscriber(board, b, password=password, ca_file=ca_file).start() for b in addresses]
    click.echo(server.url, nl=True)
    sys.stdout.flush()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        for subscriber in subscribers:
            subscriber.close()
        server.close()
