"""``tablectl simulate-table``: the simulated table as a process of its own."""

from __future__ import annotations

import signal
import threading

import click

from .exits import exit_codes
from .options import parse_deck_colours


@exit_codes({
    0: "stopped by SIGTERM or SIGINT (Ctrl-C)",
    2: "bad usage, including a --link-dir whose names are taken by something other than pty symlinks",
})
@click.command("simulate-table")
@click.option("--link-dir", type=click.Path(file_okay=False), required=True,
              help="Folder for the symlinks 'shuffler' and 'shoe' to the emulators' ptys.")
@click.option("--dealer-socket", type=click.Path(dir_okay=False), required=True,
              help="Unix socket where the virtual dealer takes prompts (tablectl run --dealer-socket).")
@click.option("--seed", type=int, default=None, help="Seed the shuffles (default: secrets.SystemRandom).")
@click.option("--deck-colours", default="red,blue", show_default=True, help="Back colours of the two decks.")
def simulate_table_command(link_dir: str, dealer_socket: str, seed: int | None, deck_colours: str) -> None:
    """Run both emulators and the virtual dealer until SIGTERM or SIGINT.

    The table outlives any controller connected to it, as real devices do:
    kill the controller and start it again, and the devices still hold the
    events it had not acknowledged. Prints 'ready' once listening.
    """
    from simulators.table import SimulatedTable
    from simulators.table_server import DealerServer

    a, b = parse_deck_colours(deck_colours, "--deck-colours")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    from simulators.pty_port import PtyLinkError

    try:
        sim_table = SimulatedTable((a, b), seed=seed, link_dir=link_dir, history=None)  # "truth": every read
    except PtyLinkError as exc:
        raise click.BadParameter(str(exc), param_hint="'--link-dir'") from None
    with sim_table as sim:
        server = DealerServer(sim, dealer_socket)
        click.echo(f"ready shuffler={sim.shuffler_url} shoe={sim.shoe_url} dealer={dealer_socket}", nl=True)
        import sys

        sys.stdout.flush()
        try:
            stop.wait()
        finally:
            server.close()
