"""``tablectl run``: deal rounds on a real or simulated table.

The loop hands each settled round to the printers of :mod:`table.cli.run_output`
(a few lines for a person, or its JSON form) and keeps only the totals.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import click
import structlog

from firmware_bridge.errors import LinkError

from table.console import Console, console_decisions
from table.errors import DeviceFault, DeviceTimeout, RoundHeld, RoundVoided, SupervisorRequired, TableError
from table.day.gaming_day import TableClosed
from table.controller import JournalTampered, RoundResult, TableController
from table.in_force import settings_of as in_force_settings
from table.rules.strategy import q64_player
from table.journal import Journal, JournalError, JournalWriteError, load_anchors
from table.keys import KeyFileError, table_key_for
from table.custody import CustodyViolation
from table.logs import configure_logging
from table.rules import kinds
from table.rules.paytables import PaytableError, load_paytable
from table.rules.profiles import get_profile
from table.rules.settlement import SettlementError, Tables, all_slots
from table.rules.wagers import MAX_AMOUNT_CENTS, MAX_WAGER_CENTS
from table.sealing import mask_cards
from table.service.run import ServiceRun
from table.cli.settings import given_on_command_line, merge_config

from .exits import EXIT_INTERRUPTED, exit_codes
from .options import address_option, parse_deck_colours
from .run_output import round_lines, round_to_json, summary_lines, voided_line  # noqa: F401 (round_to_json: API)

EXIT_SCENARIO_FAILED = 1
EXIT_CUSTODY = 3
EXIT_DEVICE = 4
#: the journal cannot be written (disk full, file size limit, I/O error, read-only): the
#: service unit does not restart on it (RestartPreventExitStatus=5, docs/journal.md)
EXIT_JOURNAL = 5

#: Paytable kinds in words, with their article (the side wagers' from table.rules.kinds).
_KIND_TEXT = {"ante_bonus": "an ante bonus",
              **{k.paytable_slot: f"a {k.label}" for k in kinds.side_kinds() if k.paytable_slot}}


def _dest(option: str) -> str:
    """``"side-cents"`` -> ``"side_cents"``: the click parameter of ``--side-cents``."""
    return option.replace("-", "_")


#: each side wager kind's paytable option (``--pair-plus``), its parameter, and its slot
_PAYTABLE_OPTIONS = tuple((k.paytable_option, k.key, k.paytable_slot or "")
                          for k in kinds.side_kinds())
#: the fixed bet's options of the side wagers (``--side-cents``: Pair Plus and Six Card
#: Bonus; ``--progressive-cents``), each with the kinds it places and its default
_FIXED_OPTIONS: dict[str, tuple[tuple[kinds.WagerKind, ...], int]] = {}
for _k in kinds.side_kinds():
    _FIXED_OPTIONS[_k.fixed_option] = (_FIXED_OPTIONS.get(_k.fixed_option, ((), 0))[0] + (_k,), _k.fixed_default)


def _kind_options(f: Any) -> Any:
    """The options derived from the wager kinds (table.rules.kinds): each side wager's
    paytable (``--pair-plus``, ``--six-card``, ``--progressive``), then the fixed bet's
    cents (``--side-cents``, ``--progressive-cents``), in the kinds' order."""
    made = []
    for flag, dest, _slot in _PAYTABLE_OPTIONS:
        label = kinds.of(dest).label
        made.append(click.option(flag, dest, default=None, help=f"{label[:1].upper()}{label[1:]} paytable name or "
                                                               "file; simulated seats then wager it."))
    for option, (placed, default) in _FIXED_OPTIONS.items():
        words = " and ".join(k.label for k in placed)
        table = "those tables are" if len(placed) > 1 else f"{'an' if words[:1] in 'aeiou' else 'a'} {words} table is"
        made.append(click.option(f"--{option}", _dest(option), type=click.IntRange(1, MAX_WAGER_CENTS),
                                 default=default, show_default=True,
                                 help=f"The fixed bet's {words} wager in cents, when {table} set (see "
                                      "--ante-cents)."))
    for option in reversed(made):
        f = option(f)
    return f

#: Options that name a real table's devices or dealer: --simulate brings its own.
_REAL_TABLE_OPTIONS = (("shuffler_url", "--shuffler-url"), ("shoe_url", "--shoe-url"),
                       ("dealer_socket", "--dealer-socket"), ("shuffler_control", "--shuffler-control"),
                       ("shoe_control", "--shoe-control"))

log = structlog.get_logger("tablectl")


class _LogFile(click.ParamType):
    """``--log-file``: opened for appending with ``O_NOFOLLOW``, made mode 0600, and a
    regular file only. Another account that may write the log's folder could
    otherwise plant a symlink there and have the table append to any file it may
    write, or read a log made world-readable (docs/pitfalls.md, "Files in a shared folder")."""

    name = "filename"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        if value == "-":
            return sys.stdout
        from table.files import open_append_private

        try:
            fd = open_append_private(value)
        except OSError as exc:
            self.fail(f"cannot open log file {value!r}: {exc.strerror or exc}", param, ctx)
        return os.fdopen(fd, "a", encoding="utf-8")


class RunResults:
    """What ``tablectl run`` keeps of the rounds dealt: counts and each seat's net,
    never the rounds themselves, so a long run stays flat in memory.

    With ``as_json`` each round is written to ``out`` as it is dealt, inside the
    one JSON object documented in the README (``{"rounds": [...], ...}``, the
    same bytes as building it whole); :meth:`finish` writes the rest. Otherwise
    each round is its text (``round_lines`` under ``profile``). ``out`` is a
    text stream.
    """

    def __init__(self, seats: int, as_json: bool, out: TextIO, profile: Any = None) -> None:
        self.count = 0
        self._profile = profile
        self.net_by_seat = {str(s): 0 for s in range(1, seats + 1)}
        self._json = as_json
        self._out = out

    def add(self, r: RoundResult) -> None:
        """Count round ``r`` and write it out."""
        self.count += 1
        for s in r.seats:
            self.net_by_seat[str(s.seat)] += s.net_cents
        if not self._json:
            for line in round_lines(r, self._profile):
                click.echo(line, file=self._out)
            return
        self._out.write(('{"rounds": [' if self.count == 1 else ", ") + json.dumps(round_to_json(r)))
        self._out.flush()

    def finish(self, rest: dict[str, Any]) -> None:
        """With ``as_json``: close the ``rounds`` list and write ``rest`` (the summary
        keys, in order) to end the object and its line."""
        if self._json:
            tail = json.dumps(rest)  # '{"cards_read": ...}'
            head = '{"rounds": [' if self.count == 0 else ""
            sep = ", " if len(tail) > 2 else ""
            self._out.write(head + "]" + sep + tail[1:] + "\n")
            self._out.flush()


@exit_codes({
    0: "every round dealt (a voided round does not count: --rounds N deals N rounds)",
    EXIT_SCENARIO_FAILED: "with --scenario: the controller did not give the scenario's documented response",
    EXIT_CUSTODY: "a custody violation held a round and no supervisor could be asked, or the table is closed for "
                  "the gaming day ([gaming_day] procedures_required) and no front door can open it",
    EXIT_DEVICE: "a device failed or stopped answering",
    EXIT_JOURNAL: "the journal cannot be written (disk full, file size limit, I/O error, read-only: docs/journal.md)",
    EXIT_INTERRUPTED: "stopped: Ctrl-C, or SIGTERM (a routine `systemctl stop`, which the unit counts as success)",
})
@click.command("run")
@click.option("--simulate", is_flag=True, help="Emulated shuffler and shoe on real ptys, with a virtual dealer.")
@click.option("--pace", type=click.Choice(["machine", "person"]), default="machine", show_default=True,
              help="With --simulate: machine (the virtual dealer and players do every step at once), or person "
                   "(training: nothing moves until the trainee does it on the dealer's screen or at the terminal: "
                   "bets, each card dealt, Play or Fold, the collect; docs/emulators.md).")
@click.option("--rounds", type=click.IntRange(1), default=10, show_default=True, help="Rounds to deal.")
@click.option("--seats", type=click.IntRange(1, 7), default=3, show_default=True, help="Player seats (1-7).")
@click.option("--seed", type=int, default=None, help="Seed the simulated shuffles for a reproducible run (default: secrets.SystemRandom).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of a line per round.")
@click.option("--ante-cents", type=click.IntRange(1, MAX_WAGER_CENTS), default=1000,
              show_default="1000 at a real table; none with --simulate",
              help="The fixed bet's ante in cents; the play wager equals it. At a real table: every seat's bet "
                   "when the dealer closes bets without entering any. With --simulate, only when given (or "
                   f"{'/'.join('--' + o for o in _FIXED_OPTIONS)} is): every seat antes it every round; otherwise the simulated "
                   "seats are seeded players who sit down, sit out and vary their bets within the table's limits "
                   "(docs/bets.md, Simulated players).")
@click.option("--ante-bonus", "ante_bonus", default="pa-649a12b-1", show_default=True, help="Ante bonus paytable name or TOML file (`tablectl paytable list`).")
@click.option("--profile", "profile_name", type=click.Choice(["pennsylvania", "california", "california-literal"]),
              default="pennsylvania", show_default=True,
              help="Rules profile ranking the hands (docs/rules-profiles.md); the round runner banks as the house.")
@click.option("--weak-shuffle", is_flag=True,
              help="With --simulate: the shuffler riffles once instead of shuffling (for `tablectl shuffle-check`).")
@click.option("--scenario", "scenario", type=click.Path(exists=True, dir_okay=False), default=None,
              help="With --simulate: run a scenario file (simulators/scenarios/*.toml) and check the controller "
                   "gives its documented response; exit 0 if it does, 1 if not.")
@_kind_options
@click.option("--meter-cents", type=click.IntRange(0, MAX_AMOUNT_CENTS), default=10_000_000, show_default=True,
              help="The progressive meter (cents) paid by a meter line; it must pay at least the progressive wager.")
@click.option("--deck-colours", default="red,blue", show_default=True, help="Back colours of the two decks.")
@click.option("--shuffler-url", default=None, help="Shuffler port URL for a real table (/dev/..., socket://host:port) or USB selector usb://VID:PID[/SERIAL].")
@click.option("--shoe-url", default=None, help="Shoe port URL for a real table.")
@click.option("--link-dir", type=click.Path(file_okay=False), default=None, help="With --simulate: make symlinks 'shuffler' and 'shoe' to the ptys here.")
@click.option("--transport", type=click.Choice(["serial", "usb"]), default="serial", show_default=True,
              help="With --simulate: emulators on ptys (serial) or as USB devices behind a pure-Python pyusb backend (usb). "
                   "A real table's transport follows its URLs (usb://VID:PID[/SERIAL] for USB).")
@click.option("--log-file", type=_LogFile(), default=None,
              help="Write JSON-line logs here instead of stderr (appended; made mode 0600; never through a symlink; - for stdout).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default=None,
              help="Default: warning when the logs go to a terminal (a person reads them) and with --simulate "
                   "on stderr; else the config's [log] level, else info.")
@click.option("--log-format", type=click.Choice(["json", "console", "auto"]), default=None,
              help="Logs as JSON lines or for people; default: console on a terminal (JSON there only when asked "
                   "here), else the config's [log] format, else JSON.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Table config TOML (`tablectl config check`); options given here override it. A real table "
                   "takes its [journal] path and its [console] sockets, as the service does; one that sets no "
                   "[journal] path is refused unless --journal or --no-journal is given. --simulate takes neither "
                   "(a simulated table is not the real one). "
                   "Default with --service: /etc/threecard/table.toml.")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False), default=None,
              help="SQLite journal: every transition is written here before it is acted on; on restart custody is "
                   "restored from it and a round in progress is held. Default with --service, or --config at a "
                   "real table: the config's [journal] path. Its folder must exist (the run makes files, never "
                   "folders). Without it (or with --no-journal) no record is kept.")
@click.option("--no-journal", "no_journal", is_flag=True,
              help="Deal without a journal although --config names one (no record, no restart that resumes, no "
                   "event stream). Not with --journal or --service.")
@click.option("--table-key", "table_key", type=click.Path(dir_okay=False), default=None,
              help="The table's Ed25519 key (PEM, mode 0600; `tablectl audit keygen`) that signs the journal's "
                   "checkpoints and seals card faces. Default: the config's journal.key_file, else the systemd "
                   "credential threecard-table-key; outside --service, JOURNAL.key beside the journal (made on first use).")
@click.option("--anchors", "anchors_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Signed checkpoints saved off the table (JSON lines, e.g. a floor subscriber's copy of the "
                   "checkpoint events): a journal behind one is not resumed until a supervisor acknowledges it. "
                   "Default: the config's journal.anchors.")
@click.option("--control-socket", "control_socket", type=click.Path(dir_okay=False), default=None,
              help="Unix socket for dealer and supervisor commands (docs/console.md); its folder must exist "
                   "(the run makes files, never folders). Default with --service: the config's "
                   "console.control_socket; with --config at a real table: that key when the file sets it.")
@click.option("--event-socket", "event_socket", type=click.Path(dir_okay=False), default=None,
              help="Unix socket serving the public event stream as JSON lines, resumable (docs/integration.md); "
                   "needs --journal; its folder must exist. Default: the config's console.event_socket.")
@click.option("--web", "web", default=None, metavar="HOST:PORT",
              help="Serve the table API over HTTP + WebSocket here (docs/console.md); default: the config's "
                   "[web] listen, else none. People sign in with an id and PIN (tablectl people add).")
@click.option("--people-file", "people_file", type=click.Path(dir_okay=False), default=None,
              help="Who may sign in over HTTP (tablectl people add); default: the config's [auth] people_file, "
                   "else /etc/threecard/people.toml.")
@click.option("--dealer-socket", "dealer_socket", type=click.Path(dir_okay=False), default=None,
              help="A virtual dealer on this socket (tablectl simulate-table) instead of the terminal dealer.")
@click.option("--shuffler-control", "shuffler_control", metavar="HOST:PORT", callback=address_option, default=None,
              help="With --shoe-control: a bench dealer moves the cards through standalone emulators' control "
                   "sockets (tablectl emulate --control, or a driver package's emulator; docs/drivers.md).")
@click.option("--shoe-control", "shoe_control", metavar="HOST:PORT", callback=address_option, default=None,
              help="The shoe emulator's control socket, with --shuffler-control.")
@click.option("--supervisor", default=None, help="Supervisor id recorded for commands typed at this terminal.")
@click.option("--service", is_flag=True,
              help="Run as the systemd service: JSON logs on stdout (journald), round results in the log not on "
                   "stdout, sd_notify READY/WATCHDOG/STOPPING, rounds until stopped unless --rounds is given.")
@click.option("--trace-frames", "trace_frames", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write every frame on both device links to FILE, one JSON object a line: time, device, "
                   "direction, hex and the decoded message. FILE must not exist; it is created mode 0600. "
                   "Card faces of CardDrawn frames are masked (docs/cli.md).")
@click.option("--trace-card-faces", "trace_card_faces", is_flag=True,
              help="With --simulate and --trace-frames: do not mask card faces in the trace (emulated decks only).")
def run_command(**params: Any) -> None:
    """Deal ROUNDS of Three Card Poker through the shuffler and the shoe.

    With --simulate the devices are firmware emulators on real pseudo-terminals
    and a virtual dealer moves the cards; otherwise give --shuffler-url and
    --shoe-url and the dealer is prompted on the terminal.

    A held round (a custody violation, a device fault, a restart mid-round)
    waits for a supervisor on the control socket or at the terminal; with
    neither attached the run stops.

    On a terminal each round is a header line and a line per seat: the hand,
    each wager's outcome in dollars and the seat's net; logs show warnings
    only, for a person (--log-format/--log-level ask for more). --json prints
    one JSON object at the end (integer cents), with a progress bar on stderr
    when that is a terminal.
    """
    ctx = click.get_current_context()
    paytables = {slot: params.pop(dest) for _flag, dest, slot in _PAYTABLE_OPTIONS}
    fixed = {_dest(o): params.pop(_dest(o)) for o in _FIXED_OPTIONS}
    a = _RunArgs(**params, paytables=paytables, fixed_cents=fixed)
    if a.scenario is not None:
        _run_scenario(a.scenario, a.simulate, a.as_json, a.journal_path)
        return
    _TableRun(ctx, a).run()


@dataclass
class _RunArgs:
    """``tablectl run``'s options, as click gives them (the names of its parameters)."""

    simulate: bool = False
    pace: str = "machine"
    rounds: int = 10
    seats: int | None = None
    seed: int | None = None
    as_json: bool = False
    ante_cents: int = 1000
    ante_bonus: str | None = None
    deck_colours: str | None = None
    shuffler_url: str | None = None
    shoe_url: str | None = None
    link_dir: str | None = None
    log_file: Any = None
    log_level: str | None = None
    transport: str = "serial"
    log_format: str | None = None
    config_path: str | None = None
    service: bool = False
    journal_path: str | None = None
    no_journal: bool = False
    control_socket: str | None = None
    supervisor: str | None = None
    dealer_socket: str | None = None
    #: each side wager kind's paytable option: slot -> name or file (None: the config's)
    paytables: dict[str, str | None] = field(default_factory=dict)
    #: the fixed bet's cents per option of the side wagers: ``{"side_cents": 500, ...}``
    fixed_cents: dict[str, int] = field(default_factory=dict)
    meter_cents: int = 10_000_000
    event_socket: str | None = None
    scenario: str | None = None
    weak_shuffle: bool = False
    profile_name: str = "pennsylvania"
    table_key: str | None = None
    anchors_file: str | None = None
    web: str | None = None
    people_file: str | None = None
    trace_frames: str | None = None
    trace_card_faces: bool = False
    shuffler_control: tuple[str, int] | None = None
    shoe_control: tuple[str, int] | None = None

    @property
    def bench_dealer(self) -> bool:
        """A dealer that is not a person: the simulation's (unless at a person's pace), a
        remote one, or the control sockets'."""
        return bool((self.simulate and self.pace != "person") or self.dealer_socket or self.shoe_control)


class _TableRun:
    """One ``tablectl run``: options checked, the journal and front doors opened, the
    devices and the controller built, rounds dealt, the outcome printed. Each phase is
    a method, in the order :meth:`run` takes them."""

    def __init__(self, ctx: click.Context, a: _RunArgs) -> None:
        self.ctx = ctx
        self.a = a
        self.settings = merge_config(ctx, a.config_path, a.service)
        self.cfg = self.settings.config
        o = self.settings.options
        self.seats, self.ante_bonus = o["seats"], o["ante_bonus"]
        a.shuffler_url, a.shoe_url = o["shuffler_url"], o["shoe_url"]
        self.journal: Journal | None = None
        self.anchors: list = []
        #: why the floor could not confirm the journal's end ([floor] unreachable = "hold")
        self.unconfirmed: str | None = None
        #: the floor this start reports to (table/floor_anchor.py: a journal naming one holds without it)
        self.floor_link: Any = None
        self.voided: list[dict[str, str]] = []
        self.error: str | None = None
        self.code = 0
        self.controller: TableController | None = None

    def run(self) -> None:
        """The phases of the run, in order; exits with the documented code."""
        a, o = self.a, self.settings.options
        self._check_options()
        self.svc = ServiceRun(a.service, self.cfg.table.id if self.cfg is not None else None)
        self.colours = parse_deck_colours(o["deck_colours"], "--deck-colours")
        _configure_run_logging(self.ctx, a.log_file, a.service, o["log_level"], o["log_format"], a.simulate)
        self.tables = _load_tables(self.settings, self.ante_bonus, a.paytables, a.meter_cents)
        _check_meter(self.tables, a.meter_cents, a.fixed_cents[_dest(kinds.PROGRESSIVE.fixed_option)])
        self._open_journal()
        self._check_streams()
        signal.signal(signal.SIGTERM, _raise_exit)
        # Past a file size limit the kernel's default kills the process mid-write; ignored,
        # the write fails with EFBIG and the journal reports "file size limit" (exit 5).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        self.profile = get_profile(a.profile_name)
        self.results = RunResults(self.seats, a.as_json and not a.service, sys.stdout, self.profile)
        with ExitStack() as stack:
            if self.journal is not None:
                stack.callback(self.journal.close)
            self._open_front_doors(stack)
            try:
                self._build_table(stack)
                self._deal(stack)
            except JournalWriteError as exc:
                # Nothing more can be recorded, so nothing more is done: the devices keep their
                # unacknowledged events and a restart holds the round (docs/journal.md).
                self.error, self.code = (f"journal unwritable ({exc.reason}): the round is held and the table "
                                         f"stops; free the disk or fix the journal, then restart ({exc})"), EXIT_JOURNAL
                self.svc.stopping(f"journal unwritable: {exc.reason}")
            except JournalTampered as exc:
                self.error, self.code = str(exc), EXIT_CUSTODY
            except (RoundHeld, CustodyViolation, SupervisorRequired, TableClosed) as exc:
                # (TableClosed: procedures required, the table closed and no front door to open it)
                self.error, self.code = str(exc), EXIT_CUSTODY
            except (TableError, LinkError) as exc:
                self.error, self.code = str(exc), EXIT_DEVICE
            except KeyboardInterrupt as exc:
                self.error = "interrupted by SIGTERM" if isinstance(exc, _Terminated) else "interrupted"
                self.code = EXIT_INTERRUPTED
                self.svc.stopping(self.error)
            ctl = self.controller
            self.violations = len(ctl.custody.violations) if ctl else 0
            self.cards_read = ctl.cards_read if ctl else 0
        self._report()

    # -- 1. the options -------------------------------------------------------------------------

    def _check_options(self) -> None:
        """Combinations of options that cannot work together (``click.UsageError``)."""
        a, ctx = self.a, self.ctx
        if a.service and a.as_json:
            raise click.UsageError("--json prints results on stdout, which --service keeps for the logs")
        if a.no_journal and (a.journal_path or a.service):
            raise click.UsageError(f"--no-journal deals without a record; it cannot be used with "
                                   f"{'--journal' if a.journal_path else '--service (a table in service keeps one)'}")
        if a.simulate:
            given = [flag for name, flag in _REAL_TABLE_OPTIONS if given_on_command_line(ctx, name)]
            if given:
                raise click.UsageError(f"--simulate brings its own emulated devices and virtual dealer; it cannot be "
                                       f"used with {' or '.join(given)} (drop --simulate to run a real table)")
        if a.simulate:  # its emulators speak the SPEC: a plugin's device is not what it would run (docs/drivers.md)
            for kind in ("shuffler", "shoe"):
                driver = self.settings.driver(kind)[0]
                if driver != "spec":
                    raise click.UsageError(
                        f"devices.{kind}.driver: the config names driver {driver!r}, but --simulate runs the SPEC "
                        f"emulators with the built-in driver; to play with {driver!r} run its emulator and give "
                        f"--{kind}-url (and --{kind}-control), or soak it: tablectl soak --{kind}-driver {driver}")
        if a.pace == "person" and not a.simulate:
            raise click.UsageError("--pace person paces a simulated table (add --simulate); at a real table the "
                                   "dealer's own hands set the pace")
        if a.pace == "person" and not (a.web or a.control_socket or sys.stdin.isatty()
                                       or (self.cfg is not None and self.cfg.web.listen)):
            raise click.UsageError("--pace person waits for the trainee: give --web HOST:PORT (the dealer's screen) "
                                   "or --control-socket, or run it at a terminal")
        if a.trace_card_faces and not a.simulate:
            raise click.UsageError("--trace-card-faces shows the cards a real shoe reads, which nothing readable "
                                   "without the table's key may reveal (58 Pa. Code 816a.1): it is for --simulate only")
        if a.trace_card_faces and not a.trace_frames:
            raise click.UsageError("--trace-card-faces needs --trace-frames FILE")
        if a.transport == "usb" and a.link_dir:
            raise click.UsageError("--link-dir makes pty symlinks; it cannot be used with --transport usb")
        if not a.simulate and not (a.shuffler_url and a.shoe_url):
            raise click.UsageError("give --simulate, or both --shuffler-url and --shoe-url for a real table")

    # -- 2. the journal and its anchors ------------------------------------------------------------

    def _journal_from_config(self) -> str:
        """Take the config's [journal] path when no --journal is given: at a real table, by
        hand as in service (a person who starts a table with --config expects its record).
        By hand, a config that names no journal is refused (``click.UsageError``) rather
        than dealt without a record or into the service's default journal; --no-journal
        deals without one on purpose. --simulate is not the real table: it takes none.
        Returns the name to give a problem with the journal (the option or the config key)."""
        a, cfg = self.a, self.cfg
        if a.journal_path is not None or cfg is None or a.simulate or a.no_journal:
            return "--journal"
        if not a.service and not _file_sets(cfg.source, "journal", "path"):
            raise click.UsageError(f"{cfg.source} sets no [journal] path: a real table deals with a record. "
                                   "Set [journal] path there, or give --journal PATH, or --no-journal to deal "
                                   "without a record")
        a.journal_path = str(cfg.journal.path)
        return f"[journal] path of {cfg.source or 'the config'}"

    def _open_journal(self) -> None:
        """The journal (``--journal``, or the config's in service mode), its table key, and
        the anchors to check it against (``--anchors``, the floor's broker). Raises
        ``click.BadParameter`` naming the option."""
        a, cfg = self.a, self.cfg
        journal_hint = self._journal_from_config()
        if a.journal_path:
            _check_folder(a.journal_path, journal_hint)
        # One rule for every file the run creates: its folder must exist (the journal, the
        # sockets, the trace); the service's socket folder is systemd's RuntimeDirectory.
        # The config's sockets are taken here, before anything is created, so a missing folder
        # is refused naming the config's key and leaves no journal behind.
        control_hint, event_hint = "--control-socket", "--event-socket"
        if a.control_socket is None and cfg is not None and (a.service or (not a.simulate and _file_sets(
                cfg.source, "console", "control_socket"))):
            a.control_socket = str(cfg.console.control_socket)
            control_hint = f"[console] control_socket of {cfg.source or 'the config'}"
        if a.event_socket is None and cfg is not None and cfg.console.event_socket is not None and not a.no_journal:
            a.event_socket = str(cfg.console.event_socket)
            event_hint = f"[console] event_socket of {cfg.source or 'the config'}"
        for path, hint in ((a.control_socket, control_hint), (a.event_socket, event_hint)):
            if path:
                _check_folder(path, hint)
        if a.trace_frames:
            _check_folder(a.trace_frames, "--trace-frames")
            if os.path.lexists(a.trace_frames):  # checked again, atomically, when it is created
                raise click.BadParameter(f"{a.trace_frames} already exists; a trace is always a new file (choose "
                                         "another name)", param_hint="--trace-frames")
        if not a.journal_path:
            return
        try:
            key, made = table_key_for(a.journal_path, a.table_key or (cfg.journal.key_file if cfg else None),
                                      service=a.service)
        except KeyFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--table-key") from None
        if made:
            click.echo(f"tablectl run: made a table key {key.source} (key id {key.key_id}) beside the journal; "
                       "a real table keeps its key in systemd credentials (docs/journal.md)", err=True)
        table_id = cfg.table.id if cfg is not None else "table"
        self.archive_policy = _archive_policy(cfg, a.journal_path, key, table_id)
        try:
            self.journal = journal = Journal(a.journal_path, key=key, table_id=table_id)
        except JournalError as exc:
            raise click.BadParameter(str(exc), param_hint=journal_hint) from None
        anchors_path = a.anchors_file or (cfg.journal.anchors if cfg is not None else None)
        try:
            self.anchors = load_anchors(anchors_path) if anchors_path and Path(anchors_path).exists() else []
        except JournalError as exc:
            journal.close()
            raise click.BadParameter(str(exc), param_hint="--anchors") from None
        if cfg is not None and cfg.mqtt.host and not a.simulate:
            # The floor's broker keeps the table's latest signed checkpoint: an anchor no one
            # at the table can take back (docs/journal.md).
            from table.interfaces.mqtt import fetch_checkpoint

            cp = fetch_checkpoint(cfg.mqtt.settings(key), table_id, key.public)
            if cp is not None:
                self.anchors.append(cp)
        if cfg is not None and cfg.floor.url and not a.simulate:
            # The floor's notary: the highest checkpoint the floor saw, which it never lowers
            # (docs/decisions/0004-anchors-off-the-table.md); the broker's retained one can be republished by an insider.
            try:
                anchors, self.unconfirmed = _floor_anchors(cfg.floor, table_id, key, journal)
            except click.BadParameter:
                journal.close()
                raise
            self.anchors += anchors
            from table.floor_anchor import FloorLink  # the floor of record (table/floor_anchor.py)
            self.floor_link = FloorLink.of(cfg.floor)
        if a.simulate and journal.last_seq:
            journal.close()
            raise click.BadParameter(
                f"{a.journal_path} already holds {journal.last_seq} entries of an earlier table, but --simulate "
                "starts a fresh simulated table; give a new journal path", param_hint="--journal")

    def _check_streams(self) -> None:
        """The event socket needs the journal; ``--web`` (or ``[web] listen``) parsed."""
        a, cfg = self.a, self.cfg
        if a.config_path is not None and cfg is not None and not a.service:
            for warning in unused_config(cfg.source, journal=self.journal is not None,
                                         control_socket=a.control_socket, simulate=a.simulate):
                click.echo(f"tablectl run: warning: {warning}", err=True)
        if a.event_socket and self.journal is None:
            raise click.UsageError("--event-socket derives the events from the journal: give --journal too")
        web_listen = a.web or (cfg.web.listen if cfg is not None else None)
        self.web_host_port = _host_port(web_listen) if web_listen else None

    # -- 3. the front doors ------------------------------------------------------------------------

    def _open_front_doors(self, stack: ExitStack) -> None:
        """The console every front door feeds, the frame trace, the control socket, the web,
        and the terminal's keys. Raises ``click.UsageError`` when a door cannot open."""
        a, cfg, journal = self.a, self.cfg, self.journal
        self.trace = None
        if a.trace_frames:
            from table.frame_trace import FrameTrace

            try:
                self.trace = stack.enter_context(FrameTrace(a.trace_frames, card_faces=a.trace_card_faces))
            except OSError as exc:
                raise click.BadParameter(exc.strerror or str(exc), param_hint="--trace-frames") from None
        self.console = console = Console(two_person_void=cfg.console.two_person_void if cfg is not None else True)
        if a.control_socket is None and a.service and cfg is not None:
            a.control_socket = str(cfg.console.control_socket)
        # Front doors (and what only they use: the API dispatcher and its JSON Schemas, the
        # asyncio loop, roles) are imported and started only when an option asks for one.
        self.front = front = self.roles = self.dispatcher = None
        if a.control_socket or self.web_host_port is not None:
            from table.interfaces.dispatch import Dispatcher
            from table.interfaces.peers import LocalRoles
            from table.interfaces.serving import FrontDoorLoop

            self.front = front = FrontDoorLoop()
            stack.callback(front.close)
            self.roles = LocalRoles.from_config(cfg.roles if cfg is not None else None)
            # On the control socket a supervisor action names a person of the people file and
            # proves it (docs/decisions/0003-an-account-is-not-a-person.md).
            prove = _terminal_pin_check(cfg, a.people_file, source="control-socket", origin="other") \
                if a.control_socket else None
            self.dispatcher = Dispatcher(console, front, table_id=cfg.table.id if cfg is not None else "table",
                                         stream_pending=journal is not None, prove=prove)
            if journal is not None:  # the shuffle check and the audit status, read from the journal file
                from table.anchors import NOTED  # an anchor started without is no checkpoint to verify
                from table.interfaces.audit_view import AuditQueries

                self.dispatcher.queries.update(AuditQueries(a.journal_path, public_keys=(journal.key.public,),
                                                            anchors=lambda: [a for a in self.anchors
                                                                             if NOTED not in a],
                                                            archive=cfg.journal.archive if cfg else None).handlers())
                from table.day.calendar import Calendar
                from table.interfaces.day_view import DayReportQueries

                # the shift's and the day's figures for the supervisor's page
                self.dispatcher.queries.update(DayReportQueries(a.journal_path, self.tables, profile=self.profile,
                                                                calendar=Calendar.of(cfg),
                                                                archive=cfg.journal.archive if cfg else None,
                                                                public_keys=(journal.key.public,)).handlers())
        elif a.event_socket:
            from table.interfaces.peers import LocalRoles

            self.roles = LocalRoles.from_config(cfg.roles if cfg is not None else None)
        try:
            if a.control_socket:
                from table.interfaces.control_socket import ControlSocket

                stack.callback(ControlSocket(a.control_socket, console, front=front, roles=self.roles,
                                             dispatcher=self.dispatcher,
                                             socket_group=cfg.console.socket_group if cfg else None,
                                             max_connections=cfg.console.max_connections if cfg else 256,
                                             idle_timeout_s=cfg.console.idle_timeout_s if cfg else 300.0).close)
            if self.web_host_port is not None:
                signer = _report_signer(journal) if journal is not None else None
                stack.callback(_open_web(self.web_host_port, self.dispatcher, front, cfg, a.people_file,
                                         signer).close)
                console.attached = True
        except OSError as exc:
            raise click.UsageError(f"cannot open a front door: {exc}") from None
        self.key_console = None
        if sys.stdin.isatty() and not a.as_json and not a.service:
            from table.interfaces.terminal import KeyConsole

            self.key_console = KeyConsole(console, a.supervisor or "terminal", sys.stdin, sys.stderr,
                                          pin_check=_terminal_pin_check(cfg, a.people_file))

    # -- 4. the devices and the controller --------------------------------------------------------

    def _dealer(self, stack: ExitStack) -> tuple[Any, Any, Any]:
        """``(dealer, decide, usb_backend)``: the virtual dealer of a simulated table (whose
        emulators give the device URLs), a remote one, or the person at a real table."""
        a = self.a
        if a.simulate:
            from simulators.pty_port import PtyLinkError
            from simulators.table import SimulatedTable

            try:
                sim = stack.enter_context(SimulatedTable(self.colours, seed=a.seed, link_dir=a.link_dir,
                                                         transport=a.transport,
                                                         shuffle="riffle1" if a.weak_shuffle else "random"))
            except PtyLinkError as exc:
                raise click.BadParameter(str(exc), param_hint="'--link-dir'") from None
            a.shuffler_url, a.shoe_url = sim.shuffler_url, sim.shoe_url
            if a.pace == "person":  # training: the trainee's hands through the table's control socket
                from simulators.hands import HandsServer
                from table.hil.training import TrainingDealer, TrainingHands

                hands = stack.enter_context(HandsServer(sim.dealer, sim.shoe))
                self.console.hands = TrainingHands(self.console, hands.address)
                return TrainingDealer(hands.address), console_decisions(self.console), sim.usb_backend
            return sim.dealer, q64_player, sim.usb_backend
        if a.shuffler_control or a.shoe_control:
            from table.hil.control_dealer import ControlDealer

            if not (a.shuffler_control and a.shoe_control) or a.dealer_socket:
                raise click.UsageError("a bench dealer needs both --shuffler-control and --shoe-control "
                                       "(and no --dealer-socket)")
            return ControlDealer(a.shuffler_control, a.shoe_control), q64_player, None
        if a.dealer_socket:
            from table.hil.remote_dealer import RemoteDealer

            dealer = RemoteDealer(a.dealer_socket)
            stack.callback(dealer.close)
            return dealer, q64_player, None
        from table.interfaces.terminal import ConsoleDealer

        # prompts only; nothing reads stdin here; decisions come in on the console; real USB
        # devices: pyusb picks libusb
        return ConsoleDealer(), console_decisions(self.console), None

    def _build_table(self, stack: ExitStack) -> None:
        """Assemble the table (``table.assembly``: the drivers the config names, opened, and
        the controller); the event stream and MQTT follow it."""
        from table.assembly import DeviceSpec, DriverRefused, People, TableSpec, assemble

        a, journal = self.a, self.journal
        dealer, decide, usb_backend = self._dealer(stack)
        trace = self.trace

        def device(kind: str, url: str) -> DeviceSpec:
            # the driver the config names (docs/drivers.md); --simulate's devices speak the SPEC
            extras = {"usb_backend": usb_backend, "frame_trace": trace.hook(kind) if trace else None}
            return DeviceSpec.from_config(self.cfg, kind, url=url, journal=journal, spec_only=a.simulate,
                                          extras=extras, service=a.service)

        spec = TableSpec(
            shuffler=device("shuffler", a.shuffler_url), shoe=device("shoe", a.shoe_url),
            decks=tuple(zip(self.settings.deck_ids(), self.colours)), tables=self.tables, seats=self.seats,
            ante_cents=a.ante_cents, side_wagers=_side_wagers(self.tables, a.fixed_cents),
            profile=self.profile, limits=self._limits(), timing=self.settings.timing(),
            day_required=self.cfg is not None and self.cfg.gaming_day.procedures_required,
            archive=getattr(self, "archive_policy", None), anchors=tuple(self.anchors), unconfirmed=self.unconfirmed,
            floor=self.floor_link,
            in_force=in_force_settings(self.cfg, {k: self.settings.driver(k)[0] for k in ("shuffler", "shoe")}))
        people = People(dealer, decide, self.console, auto_dealer=a.bench_dealer, players=self._players())
        try:
            table = stack.enter_context(assemble(spec, people, journal=journal))
        except DriverRefused as exc:
            raise click.UsageError(str(exc)) from None
        self.controller = controller = table.controller
        _say_residual_risk(table.shuffler)
        self.svc.devices_up(stack, table.shuffler, table.shoe)
        if self.key_console is not None:
            # payouts before the collect (a person pays them), holds, voids and incidents
            self.key_console.follow(controller, payouts=not a.bench_dealer)
        elif not a.service and not a.as_json:
            controller.subscribe(_say_incidents)  # what the table found and did about it, in words
        # The public stream, for whoever takes it: the front doors' subscribers, the event socket,
        # MQTT when [mqtt] host is set. Nobody to serve: nothing derived.
        mqtt_on = bool(self.cfg is not None and self.cfg.mqtt.host)
        if journal is not None and (self.dispatcher is not None or a.event_socket or mqtt_on):
            from table.interfaces.event_socket import serve_for
            from table.interfaces.mqtt import MqttSetupError, MqttUnavailable

            try:
                serve_for(stack, controller, a.journal_path, a.event_socket, self.cfg, front=self.front,
                          dispatcher=self.dispatcher, roles=self.roles, table_key=journal.key, journal=journal)
            except (MqttSetupError, MqttUnavailable, OSError) as exc:  # [mqtt] without paho: say so, not "a bug"
                raise click.UsageError(f"cannot serve the event stream: {exc}") from None

    def _limits(self) -> Any:
        """The config's ``[limits]`` (``table.bets.TableLimits``), None when it sets none
        (the documented defaults; a dealer who only closes bets then gets the fixed bet)."""
        given = self.cfg.limits.given() if self.cfg is not None else None
        if given is None and self.a.pace == "person":  # the trainee places bets, within the default limits
            from table.bets import DEFAULT_LIMITS

            return DEFAULT_LIMITS
        return given

    def _players(self) -> Any:
        """Who bets on a simulated table: seeded players who sit down and leave and vary
        their bets within the limits, unless ``--ante-cents`` asks for the fixed
        bet on every seat (None: the controller's fixed bet)."""
        a = self.a
        if not a.simulate or any(given_on_command_line(self.ctx, name)
                                 for name in ("ante_cents", *map(_dest, _FIXED_OPTIONS))):
            return None
        from table.bets import DEFAULT_LIMITS, offered_kinds
        from table.players import SimulatedPlayers

        seed = a.seed if a.seed is not None else secrets.randbits(32)
        sides = [k for k in offered_kinds(self.tables) if k != "ante"]
        return SimulatedPlayers(seed, self._limits() or DEFAULT_LIMITS, self.seats, sides)

    # -- 5. the rounds ---------------------------------------------------------------------------

    def _deal(self, stack: ExitStack) -> None:
        """Deal until ``--rounds`` rounds are dealt (a voided round does not count; the service
        without ``--rounds`` deals until stopped). A held round or an absent device waits for
        a supervisor when a front door is attached, and ends the run otherwise."""
        a, controller = self.a, self.controller
        assert controller is not None
        controller.prepare()  # a round held across a restart: the first play_round() resolves it
        unlimited = self.svc.unlimited(given_on_command_line(self.ctx, "rounds"))
        bar = _progress_bar(stack, a.rounds) if a.as_json and not unlimited else None
        dealt = 0
        last_wait = None
        while unlimited or dealt < a.rounds:
            try:
                r = controller.play_round()
            except RoundVoided as exc:
                self.voided.append({"round_id": exc.round_id, "reason": mask_cards(exc.reason)})
                if a.service:
                    log.warning("round_voided", round_id=exc.round_id, reason=mask_cards(exc.reason))
                elif not a.as_json:
                    click.echo(voided_line(exc.round_id, exc.reason))
                continue
            except (RoundHeld, DeviceFault, DeviceTimeout, LinkError) as exc:
                # (a LinkError: a device request the ride-through cannot clear, e.g. NO_DECK)
                if not self.console.attached:
                    raise
                # The next play_round() first waits for the supervisors to void or release it;
                # with no round held (a device away between rounds) it tries the step again.
                held = controller.held is not None
                text = mask_cards(str(exc)) + ("; waiting for a supervisor" if held else "")
                if a.service:
                    log.warning("round_held" if held else "table_waits", reason=mask_cards(str(exc)))
                elif text != last_wait:  # one line while the same device stays away
                    click.echo(f"tablectl run: {text}", err=True)
                last_wait = text
                continue
            last_wait = None
            dealt += 1
            if bar is not None:
                bar.update(1)
            if a.service:
                self.svc.round_done(r, round_to_json(r))
                continue
            self.results.add(r)

    # -- 6. the outcome --------------------------------------------------------------------------

    def _report(self) -> None:
        """The summary (text, ``--json``, or the service's log record) and the exit status."""
        a, results = self.a, self.results
        if a.service:
            # A stop is routine (info); anything else that ended the run is an error.
            self.svc.summary(self.cards_read, self.violations, self.error, stopped=self.code == EXIT_INTERRUPTED,
                             voided=len(self.voided))
            sys.exit(self.code)  # the summary record says why; stdout carries JSON log lines only
        if a.as_json:
            tables = self.tables
            out: dict[str, Any] = {
                "cards_read": self.cards_read,
                "custody_violations": self.violations,
                "net_by_seat": results.net_by_seat,
                "voided": self.voided,
                "seed": a.seed,
                "ante_cents": a.ante_cents,
                "profile": self.profile.name,
                "paytables": {k: pt.name for k in all_slots() if (pt := tables.slot(k)) is not None},
            }
            if self.error:
                out["error"] = self.error
            results.finish(out)
        else:
            for line in summary_lines(results.count, self.cards_read, self.violations, results.net_by_seat,
                                      voided=len(self.voided)):
                click.echo(line)
        if self.error:
            click.echo(f"tablectl run: {self.error}", err=True)
            sys.exit(self.code)


def _run_scenario(path: str, simulate: bool, as_json: bool, journal_path: str | None) -> None:
    """``--scenario``: play it on a simulated table and compare with its [expect].
    The scenario file sets the rounds, seats and seed; ``--journal`` keeps the run's journal."""
    from table.hil.chaos import ScenarioError, run_scenario

    if not simulate:
        raise click.UsageError("--scenario runs on a simulated table: add --simulate")
    logging.getLogger().handlers.clear()
    logging.basicConfig(level=logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        result = run_scenario(path, journal_path)
    except ScenarioError as exc:
        raise click.BadParameter(str(exc), param_hint="--scenario") from None
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"scenario: {result['name']}: {'PASS' if result['passed'] else 'FAIL'}")
        for key, value in result["observed"].items():
            mark = "  (expected " + json.dumps(result["differences"][key]["expected"]) + ")" \
                if key in result["differences"] else ""
            click.echo(f"  {key:14} {json.dumps(value)}{mark}")
    sys.exit(0 if result["passed"] else 1)


def _host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) to (host, port). Raises ``click.BadParameter``."""
    from table.config import _listen

    try:
        _listen(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--web") from None
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _authenticator(cfg: Any, people_file: str | None) -> Any:
    """The people file's sign-in check (``--people-file`` or ``[auth]``). Raises
    ``click.UsageError`` for a broken people file."""
    from table.interfaces.auth import DEFAULT_PEOPLE_FILE, Authenticator, PeopleFileError

    try:
        if cfg is not None:
            return Authenticator.from_config(cfg.auth) if people_file is None else \
                Authenticator(people_file, session_ttl_s=cfg.auth.session_ttl_s,
                              session_idle_s=cfg.auth.session_idle_s, max_failures=cfg.auth.max_failures,
                              lockout_s=cfg.auth.lockout_s, table_screens=cfg.auth.table_screens)
        return Authenticator(people_file or DEFAULT_PEOPLE_FILE)
    except PeopleFileError as exc:
        raise click.UsageError(str(exc)) from None


def _terminal_pin_check(cfg: Any, people_file: str | None, *, source: str = "terminal",
                        origin: str = "table") -> Any:
    """The terminal's check of a supervisor's PIN (``v``, ``x NAME``, ``l``, ``r``, ``m``,
    ``a``), or the control socket's (``source="control-socket"``, ``origin="other"``);
    None when nobody is in the people file (supervisor actions are then refused there,
    saying why)."""
    from table.interfaces.terminal import pin_checker

    try:
        auth = _authenticator(cfg, people_file)
    except click.UsageError as exc:  # the terminal still works; supervisor actions are refused
        log.warning("supervisor_proof_unavailable", source=source, error=str(exc)[:300])
        return None
    return pin_checker(auth, source=source, origin=origin) if auth.people() else None


def _report_signer(journal: Journal) -> Any:
    """Signs a report with the journal's table key, naming its table (the web's signed download)."""
    from table.day.signed_report import sign_report

    return lambda rep: sign_report(rep, journal.key, journal.table_id)


def _say_residual_risk(shuffler: Any) -> None:
    """A shuffler that does not commit to its shuffles is said so at start, on stderr and
    in the logs (its ``device`` journal entry names ``commitment`` missing): the risk the
    table then runs with (docs/drivers.md, "Capabilities"; SPEC §4.2.1)."""
    from devices.contract import WITHOUT_COMMITMENT, Capabilities
    from table.procedure.commitment import residual_risk

    caps = getattr(shuffler, "capabilities", WITHOUT_COMMITMENT)
    why = residual_risk(caps if isinstance(caps, Capabilities) else WITHOUT_COMMITMENT, shuffler)
    if why is not None:
        click.echo(f"tablectl run: warning: {why}", err=True)
        log.warning("shuffle_commitment_missing", risk=why)


def _open_web(host_port: tuple[str, int], dispatcher: Any, front: Any, cfg: Any, people_file: str | None,
              report_signer: Any = None) -> Any:
    """The HTTP + WebSocket front door of ``tablectl run``. Raises ``click.UsageError``."""
    from table.interfaces.web import WebFrontDoor

    auth = _authenticator(cfg, people_file)
    if not auth.people():
        log.warning("web_nobody_can_sign_in", people_file=str(auth.people_file),
                    advice="add people with `tablectl people add ID --role ROLE`")
    w = cfg.web if cfg is not None else None
    try:
        return WebFrontDoor(host_port[0], host_port[1], dispatcher, auth, front,
                            tls_certfile=w.tls_certfile if w else None, tls_keyfile=w.tls_keyfile if w else None,
                            max_connections=w.max_connections if w else 256,
                            idle_timeout_s=w.idle_timeout_s if w else 10.0,
                            max_websockets=w.max_websockets if w else 64, report_signer=report_signer)
    except OSError as exc:
        raise click.UsageError(f"--web {host_port[0]}:{host_port[1]}: {exc}") from None


def _say_incidents(ev: Any) -> None:
    """An incident (a device's state adopted after a restart, a deck found where the table has
    no record of it) on the terminal, as it happens; and a device fault the table waits out
    (docs/device-faults.md: what to do is said at the terminal too), and the device back."""
    if ev.kind == "incident":
        click.echo(f"tablectl run: incident: {mask_cards(str(ev.data.get('what', '')))}", err=True)
    elif ev.kind == "device_fault":
        click.echo(f"tablectl run: the {ev.data.get('source')}: {mask_cards(str(ev.data.get('reason', '')))}; "
                   f"the table waits for {ev.data.get('waiting_for')}", err=True)
    elif ev.kind == "device_back":
        click.echo(f"tablectl run: the {ev.data.get('source')} answers again: the table goes on", err=True)


def _side_wagers(tables: Tables, fixed_cents: dict[str, int]) -> dict[str, int]:
    """Each seat's side wagers: one for every side paytable the table has, at the cents of
    its fixed bet's option (``fixed_cents``: ``{"side_cents": 500, "progressive_cents": 100}``)."""
    return {k.key: fixed_cents[_dest(k.fixed_option)] for k in kinds.side_kinds()
            if k.paytable_slot and tables.slot(k.paytable_slot) is not None}


class _Terminated(KeyboardInterrupt):
    """SIGTERM, taken through the same clean shutdown as Ctrl-C."""


def _raise_exit(signum, frame) -> None:  # SIGTERM → clean shutdown via KeyboardInterrupt handling
    raise _Terminated


def _configure_run_logging(ctx: click.Context, log_file, service: bool, log_level: str | None,
                           log_format: str | None, simulate: bool = False) -> None:
    """Where the run's logs go and how they look.

    A log file, and the service (stdout, for journald), take the merged settings
    (command line, then the config's [log], then JSON at info), as they always have.
    Logs on stderr are for whoever reads stderr: on a terminal a person, who gets
    the console renderer at warning level unless --log-format/--log-level given on
    the command line ask otherwise (a config's [log] is meant for the service and
    files, not a person's terminal); elsewhere (a pipe, a file) the merged settings,
    except ``simulate``'s level: warning unless --log-level is given.
    """
    if log_file is not None or service:
        stream = log_file or sys.stdout
        fmt, level = log_format or "json", log_level or "info"
    else:
        stream = sys.stderr
        person = _isatty(stream)
        fmt = log_format if given_on_command_line(ctx, "log_format") or not person else "console"
        # --simulate's logs on a pipe or a file are warnings only unless --log-level asks: the
        # round lines (or --json) are its output, and info records there drown a warning.
        quiet = person or simulate
        level = log_level if given_on_command_line(ctx, "log_level") or not quiet else "warning"
        fmt, level = fmt or "auto", level or ("warning" if quiet else "info")
    configure_logging(stream=stream, fmt=fmt, level=level)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _load_tables(settings, ante_bonus: str, given: dict[str, str | None], meter_cents: int) -> Tables:
    """The run's paytables: the command line's over the config's. A table that cannot be
    loaded, or is of another kind than its slot, is a usage error naming the option
    that gave it (``--pair-plus`` for a Pair Plus slot given an ante bonus table).
    ``given``: slot -> the command line's paytable option (None: not given)."""
    side = settings.other_paytables()
    base_dir = side.pop("base_dir", None)
    flags = {"ante_bonus": "--ante-bonus", **{slot: flag for flag, _dest, slot in _PAYTABLE_OPTIONS}}
    chosen = {"ante_bonus": ante_bonus}
    for _flag, _key, slot in _PAYTABLE_OPTIONS:
        if given[slot]:
            chosen[slot] = given[slot]  # the command line overrides the config
        elif side.get(slot):
            chosen[slot] = side[slot]
    loaded = {}
    for slot, name in chosen.items():
        hint = flags[slot] if slot == "ante_bonus" or given.get(slot) else f"the config's paytables.{slot}"
        try:
            loaded[slot] = load_paytable(name, base_dir=base_dir)
        except (PaytableError, SettlementError, OSError) as exc:
            raise click.BadParameter(str(exc), param_hint=hint) from None
        if loaded[slot].kind != slot:
            raise click.BadParameter(
                f"{name!r} is {_KIND_TEXT.get(loaded[slot].kind, loaded[slot].kind)} paytable, not "
                f"{_KIND_TEXT[slot]} one (`tablectl paytable list` shows each table's kind)", param_hint=hint)
    try:
        return Tables.from_slots(loaded, meter_cents)
    except SettlementError as exc:
        raise click.BadParameter(str(exc), param_hint="--meter-cents") from None


def _check_meter(tables: Tables, meter_cents: int, progressive_cents: int) -> None:
    """A usage error when a meter line of the progressive table would pay less than the
    progressive wager at this meter (the settlement refuses such a hit, mid-run)."""
    if tables.progressive is None:
        return
    for line, payout in tables.progressive.lines.items():
        try:
            net = payout.net_cents(progressive_cents, meter_cents)
        except PaytableError:
            continue
        if payout.form == "meter" and net < 0:
            raise click.BadParameter(
                f"{meter_cents} cents: line {line!r} of {tables.progressive.name} pays {payout}, less than the "
                f"{progressive_cents}-cent progressive wager (--progressive-cents); a real meter starts at its "
                "reset amount, above the wager", param_hint="--meter-cents")


def _raw_config(source: Path | None) -> dict:
    """The config file's TOML as written (no defaults filled in); {} when unreadable (it was
    read and checked already)."""
    if source is None:
        return {}
    import tomllib

    try:
        return tomllib.loads(Path(source).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _file_sets(source: Path | None, section: str, key: str) -> bool:
    """True when the config file itself sets ``[section] key`` (not its default)."""
    return key in (_raw_config(source).get(section) or {})


def unused_config(source: Path | None, *, journal: bool, control_socket: str | None,
                  simulate: bool = False) -> list[str]:
    """What a table config file sets that a run outside ``--service`` will not use, in
    words naming the file, the key and what to give instead: ``[journal] path`` and
    ``[console] control_socket`` (not taken by ``--simulate``, a table that is not the real
    one, nor the journal with ``--no-journal``), ``[mqtt]`` (it publishes the journal's
    events: nothing without a journal), ``[floor] url`` (the notary checks the journal's
    end: nothing without one). ``source``: the file."""
    raw = _raw_config(source)
    why = ("--simulate is not the real table and keeps no record of it" if simulate
           else "--no-journal asked for no record")
    out = []
    if "path" in (raw.get("journal") or {}) and not journal:
        out.append(f"{source}: [journal] path is not used: {why}; this run keeps no journal "
                   "(give --journal PATH for one of its own)")
    if "control_socket" in (raw.get("console") or {}) and control_socket is None:
        out.append(f"{source}: [console] control_socket is not used with --simulate: this run opens no control "
                   "socket (give --control-socket PATH)")
    if (raw.get("mqtt") or {}).get("host") and not journal:
        out.append(f"{source}: [mqtt] publishes the journal's events: without a journal this run connects to no "
                   "broker (give --journal PATH)")
    if (raw.get("floor") or {}).get("url") and not journal:
        out.append(f"{source}: [floor] url checks the journal's end with the floor's notary: without a journal "
                   "this run asks the floor nothing (give --journal PATH)")
    return out


def _archive_policy(cfg: Any, journal_path: str, key: Any, table_id: str) -> Any:
    """The gaming day's archive policy (:func:`table.assembly.archive_policy`); its
    refusal is bad usage naming the config's key."""
    from table.assembly import AssemblyError, archive_policy

    try:
        return archive_policy(cfg, journal_path, key, table_id)
    except AssemblyError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"{exc.key}: "), param_hint=f"the config's {exc.key}") from None


def _floor_anchors(section: Any, table_id: str, key: Any, journal: Any = None) -> tuple[list, str | None]:
    """The floor notary's anchor and why the journal's end is unconfirmed
    (:func:`table.assembly.floor_anchors`; the table presents the latest floor receipt
    ``journal`` holds); a floor that cannot be reached under ``"refuse"``, or an
    unreadable floor key, is bad usage."""
    from table.assembly import floor_anchors
    from table.keys import KeyFileError
    from table.notary_client import NotaryError

    try:
        return floor_anchors(section, table_id, key, journal)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc), param_hint="the config's floor.public_key") from None
    except NotaryError as exc:
        raise click.BadParameter(f"{exc}; the table does not start without the floor's checkpoint "
                                 "([floor] unreachable = \"refuse\"; docs/integration.md)",
                                 param_hint="the config's floor.url") from None


def _check_folder(path: str, option: str) -> None:
    """A usage error unless ``path``'s folder exists: the run creates files, never folders
    (a mistyped path must not leave a tree of new folders behind)."""
    folder = Path(path).expanduser().parent
    if not folder.is_dir():
        raise click.BadParameter(f"folder {folder} does not exist (create it first: the run does not make folders)",
                                 param_hint=option)


def _progress_bar(stack: ExitStack, rounds: int):
    """A progress bar on stderr for ``--json`` runs, when stderr is a terminal (else None)."""
    if not _isatty(sys.stderr):
        return None
    return stack.enter_context(click.progressbar(length=rounds, label="rounds", file=sys.stderr))
