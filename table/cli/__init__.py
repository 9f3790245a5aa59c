"""``tablectl``: the table controller's command line (one module per subcommand).

The group imports a subcommand's module only when that subcommand runs, so
``tablectl --help`` and a quick ``tablectl hand`` do not pay for the device
stack. :data:`COMMANDS` names each subcommand's module and the one line the
group's help shows for it (a test holds that line to the command's own help).
"""

from __future__ import annotations

import importlib

import click

from .exits import exit_codes, run_guarded

#: subcommand -> ("module:attribute", the short help shown by ``tablectl --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    'audit': ('table.cli.audit:audit_group',
        "Audit the table's journal."),
    'config': ('table.cli.config:config_group',
        'Validate and show the table config (default /etc/threecard/table.toml).'),
    'conformance': ('table.cli.conformance:conformance_command',
        'Check a shuffler and/or a shoe against the link protocol (protocols/SPEC.md).'),
    'day': ('table.cli.day:day_group',
        "The gaming day's procedures: the count room's drop import."),
    'devices': ('table.cli.devices:devices_command',
        "List serial ports and the table's USB devices, with serial numbers and udev symlinks."),
    'emulate': ('table.cli.emulate:emulate_command',
        'Run a shuffler or shoe emulator until SIGTERM or SIGINT (exit 0).'),
    'events': ('table.cli.events:events_group',
        "The table's public event stream (docs/integration.md)."),
    'firmware': ('table.cli.firmware:firmware_group',
        'Signed firmware images: make a vendor key, sign, inspect, update a device.'),
    'floor': ('table.cli.floor:floor_group',
        "The floor: every table's signed records in one database, the notary, the floor reports."),
    'hand': ('table.cli.hand:hand_cmd',
        "Print a hand's category and ranking key; with --vs, which of two hands wins."),
    'people': ('table.cli.people:people_group',
        'Who may sign in over HTTP/WebSocket: add, list or remove a person (PINs hashed with Argon2id).'),
    'pit': ('table.cli.pit:pit_group',
        "The pit's read-only wall page: the floor's grid of a pit, without sign-in."),
    'paytable': ('table.cli.paytable:paytable_group',
        'List the shipped paytables or report their exact return.'),
    'probe': ('table.cli.probe:probe_command',
        'Identify, status and echo against one device by hand, printing each reply and its hex.'),
    'report': ('table.cli.report:report_command',
        'Rounds, hands, decisions, handle and house result by wager, voids, incidents, deck changes '
        'and device downtime for one shift, gaming day, month to date or year to date, from the '
        'journal; the settled win beside the expected win given the decisions and the theoretical '
        'win, with 95 % bands, and the statistical win once the inventories and the drop are '
        'entered (COMAR 36.05.03.25; K.A.R. 112-108-51).'),
    'run': ('table.cli.run:run_command',
        'Deal ROUNDS of Three Card Poker through the shuffler and the shoe.'),
    'settle': ('table.cli.settle:settle_cmd',
        "Recompute one round's settlement from ROUND.json; print it as JSON."),
    'shuffle-check': ('table.cli.shuffle_check:shuffle_check_command',
        "Chi-square test of each card's dealt position, per deck, over the rounds in JOURNAL (in "
        'the style of GLI-29 and COMAR 36.05.02.17 F, 95% confidence).'),
    'simulate-table': ('table.cli.simulate_table:simulate_table_command',
        'Run both emulators and the virtual dealer until SIGTERM or SIGINT.'),
    'soak': ('table.cli.soak:soak_command',
        'Play ROUNDS full rounds on a simulated table (emulators on ptys) with faults injected '
        'from every class: dealer errors (foreign card, card read twice, short deck, card drawn '
        'early, card too many), device faults (unreadable card, jam, shoe or shuffler rebooted or '
        'unplugged) and link noise. Counts faults injected and detected, card events lost or '
        "duplicated against the emulators' ground truth, and false custody alarms (violations or "
        'incidents in a round with no fault). Card events are aligned read by read against the '
        "shoe's ground truth: lost, duplicated and misread reads are counted apart."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands (``lazy``: name -> (``"module:attr"``, short
    help)) are imported on first use. Raises ``ImportError``/``AttributeError``
    only for a broken entry of :data:`COMMANDS`."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attr = self.lazy[cmd_name][0].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context):
        """Run the subcommand under :func:`~table.cli.exits.run_guarded`: an interrupt
        exits 130, a closed stdout 141, an unexpected exception 70 in one line."""
        return run_guarded(lambda: super(LazyGroup, self).invoke(ctx), ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
            else:
                rows.append((name, click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@exit_codes({0: "with --help or --version (each command lists its own exit codes; docs/cli.md has them all)"})
@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="threecard-table")
def main() -> None:
    """Three Card Poker table controller: shuffler, shoe, deck custody, settlement."""
