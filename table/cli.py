"""``tablectl``: the table controller's command line.

Subcommands are registered here; each lives in the module that owns its layer.
"""

from __future__ import annotations

import click

from . import cli_config, cli_rules
from .cli_audit import audit_group
from .cli_conformance import conformance_command
from .cli_devices import devices_command
from .cli_emulate import emulate_command
from .cli_run import run_command
from .cli_simtable import simulate_table_command
from .cli_soak import soak_command
from .cli_shuffle import shuffle_check_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="threecard-table")
def main() -> None:
    """Three Card Poker table controller: shuffler, shoe, deck custody, settlement."""


main.add_command(run_command)
cli_rules.register(main)
cli_config.register(main)
main.add_command(devices_command)
main.add_command(emulate_command)
main.add_command(conformance_command)
main.add_command(audit_group)
main.add_command(simulate_table_command)
from .cli_events import events_group  # noqa: E402

main.add_command(events_group)
main.add_command(soak_command)
main.add_command(shuffle_check_command)
