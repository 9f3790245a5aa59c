"""``tablectl run``: deal rounds on a real or simulated table."""

from __future__ import annotations

import json
import logging
import queue
import signal
import sys
from pathlib import Path
from contextlib import ExitStack
from typing import Any, TextIO

import click
import structlog

from devices import CardShoe, Shuffler
from firmware_bridge.errors import LinkError
from protocols.cards import BackColour
from protocols.errors import CardError

from table.interfaces.control_socket import ControlSocket
from table.interfaces.dispatch import Dispatcher
from table.interfaces.peers import LocalRoles
from table.interfaces.serving import FrontDoorLoop
from table.interfaces.terminal import KeyConsole
from table.console import Console, console_decisions
from table.errors import DeviceFault, DeviceTimeout, RoundHeld, RoundVoided, SupervisorRequired, TableError
from table.controller import JournalTampered, RoundResult, TableController
from table.rules.strategy import q64_player
from table.journal import Journal, JournalError, JournalWriteError, load_anchors
from table.keys import KeyFileError, table_key_for
from table.recovery import DeviceCursor, device_cursor
from table.custody import CustodyViolation, DeckCustody
from table.logs import configure_logging
from table.rules.paytables import PaytableError
from table.rules.profiles import get_profile
from table.rules.settlement import SettlementError, Tables
from table.service.run import ServiceRun
from table.cli.settings import given_on_command_line, merge_config

EXIT_CUSTODY = 3
EXIT_DEVICE = 4
#: the journal cannot be written (disk full, file size limit, I/O error, read-only): the
#: service unit does not restart on it (RestartPreventExitStatus=5, docs/journal.md)
EXIT_JOURNAL = 5

log = structlog.get_logger("tablectl")


def _colours(text: str) -> tuple[BackColour, BackColour]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    if len(parts) != 2:
        raise click.BadParameter("give two back colours, e.g. red,blue")
    try:
        a, b = (BackColour.parse(p) for p in parts)
    except CardError as exc:
        raise click.BadParameter(str(exc)) from None
    if a == b:
        raise click.BadParameter("the two decks need different back colours (58 Pa. Code 649a.3(b))")
    return a, b


def _money(cents: int) -> str:
    sign = "+" if cents > 0 else "-" if cents < 0 else " "
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def round_to_json(r: RoundResult) -> dict[str, Any]:
    """The ``--json`` form of one round (documented in README, "Output")."""
    return {
        "number": r.number,
        "round_id": r.round_id,
        "deck_id": r.deck_id,
        "deck_colour": str(r.deck_colour),
        "dealer_hand": [str(c) for c in r.dealer_hand],
        "dealer_qualifies": r.dealer_qualifies,
        "seats": [
            {
                "seat": s.seat,
                "cards": [str(c) for c in s.cards],
                "decision": s.decision.value,
                "net": s.net_cents,
                "wagers": [w.to_dict() for w in s.settlement.results],
            }
            for s in r.seats
        ],
        "reads": [{"draw_index": c.draw_index, "card": str(c.card), "back_colour": str(c.back_colour)} for c in r.reads],
    }


def _round_line(r: RoundResult) -> str:
    seats = "  ".join(
        f"s{s.seat} {' '.join(map(str, s.cards))} {s.decision.value:4} {_money(s.net_cents):>7}" for s in r.seats
    )
    q = "qualifies" if r.dealer_qualifies else "no qualify"
    return f"round {r.number:4d}  deck {r.deck_id} ({r.deck_colour})  dealer {' '.join(map(str, r.dealer_hand))} {q:10} | {seats}"


class RunResults:
    """What ``tablectl run`` keeps of the rounds dealt: counts and each seat's net,
    never the rounds themselves, so a long run stays flat in memory (issue 18).

    With ``as_json`` each round is written to ``out`` as it is dealt, inside the
    one JSON object documented in the README (``{"rounds": [...], ...}``, the
    same bytes as building it whole); :meth:`finish` writes the rest. Otherwise
    each round is one line (``_round_line``). ``out`` is a text stream.
    """

    def __init__(self, seats: int, as_json: bool, out: TextIO) -> None:
        self.count = 0
        self.net_by_seat = {str(s): 0 for s in range(1, seats + 1)}
        self._json = as_json
        self._out = out

    def add(self, r: RoundResult) -> None:
        """Count round ``r`` and write it out."""
        self.count += 1
        for s in r.seats:
            self.net_by_seat[str(s.seat)] += s.net_cents
        if not self._json:
            click.echo(_round_line(r), file=self._out)
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


@click.command("run")
@click.option("--simulate", is_flag=True, help="Emulated shuffler and shoe on real ptys, with a virtual dealer.")
@click.option("--rounds", type=click.IntRange(1), default=10, show_default=True, help="Rounds to deal.")
@click.option("--seats", type=click.IntRange(1, 7), default=3, show_default=True, help="Player seats (1-7).")
@click.option("--seed", type=int, default=None, help="Seed the simulated shuffles for a reproducible run (default: secrets.SystemRandom).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead of a line per round.")
@click.option("--ante-cents", type=click.IntRange(1), default=1000, show_default=True, help="Each seat's ante in cents; the play wager equals it.")
@click.option("--ante-bonus", "ante_bonus", default="pa-649a12b-1", show_default=True, help="Ante bonus paytable name or TOML file (`tablectl paytable list`).")
@click.option("--profile", "profile_name", type=click.Choice(["pennsylvania", "california", "california-literal"]),
              default="pennsylvania", show_default=True,
              help="Rules profile ranking the hands (docs/rules-profiles.md); the round runner banks as the house.")
@click.option("--weak-shuffle", is_flag=True,
              help="With --simulate: the shuffler riffles once instead of shuffling (for `tablectl shuffle-check`).")
@click.option("--scenario", "scenario", type=click.Path(exists=True, dir_okay=False), default=None,
              help="With --simulate: run a scenario file (simulators/scenarios/*.toml) and check the controller "
                   "gives its documented response; exit 0 if it does, 1 if not.")
@click.option("--pair-plus", "pair_plus", default=None, help="Pair Plus paytable name or file; simulated seats then wager it.")
@click.option("--six-card", "six_card", default=None, help="Six Card Bonus paytable name or file.")
@click.option("--progressive", "progressive", default=None, help="Progressive paytable name or file.")
@click.option("--side-cents", type=click.IntRange(1), default=500, show_default=True,
              help="Each simulated seat's Pair Plus and Six Card Bonus wager in cents, when those tables are set.")
@click.option("--progressive-cents", type=click.IntRange(1), default=100, show_default=True,
              help="Each simulated seat's progressive wager in cents, when a progressive table is set.")
@click.option("--meter-cents", type=click.IntRange(0), default=10_000_000, show_default=True,
              help="The progressive meter (cents) paid by a meter line.")
@click.option("--deck-colours", default="red,blue", show_default=True, help="Back colours of the two decks.")
@click.option("--shuffler-url", default=None, help="Shuffler port URL for a real table (/dev/..., socket://host:port) or USB selector usb://VID:PID[/SERIAL].")
@click.option("--shoe-url", default=None, help="Shoe port URL for a real table.")
@click.option("--link-dir", type=click.Path(file_okay=False), default=None, help="With --simulate: make symlinks 'shuffler' and 'shoe' to the ptys here.")
@click.option("--transport", type=click.Choice(["serial", "usb"]), default="serial", show_default=True,
              help="With --simulate: emulators on ptys (serial) or as USB devices behind a pure-Python pyusb backend (usb). "
                   "A real table's transport follows its URLs (usb://VID:PID[/SERIAL] for USB).")
@click.option("--log-file", type=click.File("a"), default=None, help="Write JSON-line logs here instead of stderr.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default=None,
              help="Default: info, or warning when logs would go to a terminal.")
@click.option("--log-format", type=click.Choice(["json", "console", "auto"]), default=None,
              help="Logs as JSON lines or for people; default: the config's, else console on a terminal, JSON elsewhere.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Table config TOML (`tablectl config check`); options given here override it. "
                   "Default with --service: /etc/threecard/table.toml.")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False), default=None,
              help="SQLite journal: every transition is written here before it is acted on; on restart custody is "
                   "restored from it and a round in progress is held. Default with --service: the config's "
                   "journal.path. Without it no record is kept.")
@click.option("--table-key", "table_key", type=click.Path(dir_okay=False), default=None,
              help="The table's Ed25519 key (PEM, mode 0600; `tablectl audit keygen`) that signs the journal's "
                   "checkpoints and seals card faces. Default: the config's journal.key_file, else the systemd "
                   "credential threecard-table-key; outside --service, JOURNAL.key beside the journal (made on first use).")
@click.option("--anchors", "anchors_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Signed checkpoints saved off the table (JSON lines, e.g. a floor subscriber's copy of the "
                   "checkpoint events): a journal behind one is not resumed until a supervisor acknowledges it. "
                   "Default: the config's journal.anchors.")
@click.option("--control-socket", "control_socket", type=click.Path(dir_okay=False), default=None,
              help="Unix socket for dealer and supervisor commands (docs/console.md).")
@click.option("--event-socket", "event_socket", type=click.Path(dir_okay=False), default=None,
              help="Unix socket serving the public event stream as JSON lines, resumable (docs/integration.md); "
                   "needs --journal.")
@click.option("--web", "web", default=None, metavar="HOST:PORT",
              help="Serve the table API over HTTP + WebSocket here (docs/console.md); default: the config's "
                   "[web] listen, else none. People sign in with an id and PIN (tablectl people add).")
@click.option("--people-file", "people_file", type=click.Path(dir_okay=False), default=None,
              help="Who may sign in over HTTP (tablectl people add); default: the config's [auth] people_file, "
                   "else /etc/threecard/people.toml.")
@click.option("--dealer-socket", "dealer_socket", type=click.Path(dir_okay=False), default=None,
              help="A virtual dealer on this socket (tablectl simulate-table) instead of the terminal dealer.")
@click.option("--supervisor", default=None, help="Supervisor id recorded for commands typed at this terminal.")
@click.option("--service", is_flag=True,
              help="Run as the systemd service: JSON logs on stdout (journald), round results in the log not on "
                   "stdout, sd_notify READY/WATCHDOG/STOPPING, rounds until stopped unless --rounds is given.")
def run_command(simulate, rounds, seats, seed, as_json, ante_cents, ante_bonus, deck_colours, shuffler_url,
                shoe_url, link_dir, log_file, log_level, transport="serial", log_format=None, config_path=None,
                service=False, journal_path=None, control_socket=None, supervisor=None, dealer_socket=None,
                pair_plus=None, six_card=None, progressive=None, side_cents=500, progressive_cents=100,
                meter_cents=10_000_000, event_socket=None, scenario=None, weak_shuffle=False,
                profile_name="pennsylvania", table_key=None, anchors_file=None, web=None, people_file=None) -> None:
    """Deal ROUNDS of Three Card Poker through the shuffler and the shoe.

    With --simulate the devices are firmware emulators on real pseudo-terminals
    and a virtual dealer moves the cards; otherwise give --shuffler-url and
    --shoe-url and the dealer is prompted on the terminal.

    A held round (a custody violation, a device fault, a restart mid-round)
    waits for a supervisor on the control socket or at the terminal; with
    neither attached the run stops.

    Exit status: 0 all rounds dealt (a voided round does not count: --rounds N deals N
    rounds); 2 bad usage; 3 a custody violation held a
    round and no supervisor could be asked; 4 a device failed or stopped answering.
    """
    ctx = click.get_current_context()
    if scenario is not None:
        _run_scenario(scenario, simulate, as_json, journal_path)
        return
    settings = merge_config(ctx, config_path, service)
    seats, deck_colours, ante_bonus, shuffler_url, shoe_url, log_level, log_format = (settings.options[k] for k in (
        "seats", "deck_colours", "ante_bonus", "shuffler_url", "shoe_url", "log_level", "log_format"))
    if service and as_json:
        raise click.UsageError("--json prints results on stdout, which --service keeps for the logs")
    svc = ServiceRun(service, settings.config.table.id if settings.config is not None else None)
    colours = _colours(deck_colours)
    if transport == "usb" and link_dir:
        raise click.UsageError("--link-dir makes pty symlinks; it cannot be used with --transport usb")
    if not simulate and not (shuffler_url and shoe_url):
        raise click.UsageError("give --simulate, or both --shuffler-url and --shoe-url for a real table")
    stream = log_file or (sys.stdout if service else sys.stderr)
    level = log_level or ("warning" if log_file is None and stream.isatty() else "info")
    configure_logging(stream=stream, fmt=log_format or ("json" if log_file or service else "auto"), level=level)

    try:
        side_tables = settings.other_paytables()
        for key, value in (("pair_plus", pair_plus), ("six_card_bonus", six_card), ("progressive", progressive)):
            if value:
                side_tables[key] = value  # the command line overrides the config
        tables = Tables.load(ante_bonus=ante_bonus, progressive_meter_cents=meter_cents, **side_tables)
    except (PaytableError, SettlementError, OSError) as exc:
        raise click.BadParameter(str(exc), param_hint="--ante-bonus") from None

    if journal_path is None and service and settings.config is not None and not simulate:
        journal_path = str(settings.config.journal.path)
    journal = None
    anchors: list = []
    if journal_path:
        cfg_key = settings.config.journal.key_file if settings.config is not None else None
        try:
            key, made = table_key_for(journal_path, table_key or cfg_key, service=service)
        except KeyFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--table-key") from None
        if made:
            click.echo(f"tablectl run: made a table key {key.source} (key id {key.key_id}) beside the journal; "
                       "a real table keeps its key in systemd credentials (docs/journal.md)", err=True)
        table_id = settings.config.table.id if settings.config is not None else "table"
        try:
            journal = Journal(journal_path, key=key, table_id=table_id)
        except JournalError as exc:
            raise click.BadParameter(str(exc), param_hint="--journal") from None
        anchors_path = anchors_file or (settings.config.journal.anchors if settings.config is not None else None)
        try:
            anchors = load_anchors(anchors_path) if anchors_path and Path(anchors_path).exists() else []
        except JournalError as exc:
            journal.close()
            raise click.BadParameter(str(exc), param_hint="--anchors") from None
    if journal is not None and simulate and journal.last_seq:
        journal.close()
        raise click.BadParameter(
            f"{journal_path} already holds {journal.last_seq} entries of an earlier table, but --simulate starts "
            "a fresh simulated table; give a new journal path", param_hint="--journal")

    cfg = settings.config
    if event_socket is None and cfg is not None and cfg.console.event_socket is not None:
        event_socket = str(cfg.console.event_socket)
    if event_socket and journal is None:
        raise click.UsageError("--event-socket derives the events from the journal: give --journal too")
    web_listen = web or (cfg.web.listen if cfg is not None else None)
    web_host_port = _host_port(web_listen) if web_listen else None
    # The journal's own table key signs the MQTT messages and opens a seat's sealed cards.
    signing_key = journal.key if journal is not None else None
    signal.signal(signal.SIGTERM, _raise_exit)
    # Past a file size limit the kernel's default kills the process mid-write; ignored,
    # the write fails with EFBIG and the journal reports "file size limit" (exit 5).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    results = RunResults(seats, as_json and not service, click.get_text_stream("stdout"))
    error: str | None = None
    code = 0
    with ExitStack() as stack:
        controller = None
        if journal is not None:
            stack.callback(journal.close)
        console = Console()
        if control_socket is None and service and settings.config is not None:
            control_socket = str(settings.config.console.control_socket)
        front = FrontDoorLoop()
        stack.callback(front.close)
        roles = LocalRoles.from_config(cfg.roles if cfg is not None else None)
        dispatcher = Dispatcher(console, front, table_id=cfg.table.id if cfg is not None else "table")
        try:
            if control_socket:
                stack.callback(ControlSocket(control_socket, console, front=front, roles=roles, dispatcher=dispatcher,
                                             socket_group=cfg.console.socket_group if cfg else None,
                                             max_connections=cfg.console.max_connections if cfg else 256,
                                             idle_timeout_s=cfg.console.idle_timeout_s if cfg else 300.0).close)
            if web_host_port is not None:
                stack.callback(_open_web(web_host_port, dispatcher, front, cfg, people_file).close)
                console.attached = True
        except OSError as exc:
            raise click.UsageError(f"cannot open a front door: {exc}") from None
        if sys.stdin.isatty() and not as_json and not service:
            KeyConsole(console, supervisor or "terminal", sys.stdin, sys.stderr)
        cursor = device_cursor(journal) if journal is not None else DeviceCursor()
        resume = cursor.resume
        try:
            events: queue.Queue = queue.Queue(maxsize=1024)
            if simulate:
                from simulators.table import SimulatedTable

                from simulators.pty_port import PtyLinkError

                try:
                    sim = stack.enter_context(SimulatedTable(colours, seed=seed, link_dir=link_dir, transport=transport,
                                                            shuffle="riffle1" if weak_shuffle else "random"))
                except PtyLinkError as exc:
                    raise click.BadParameter(str(exc), param_hint="'--link-dir'") from None
                usb_backend = sim.usb_backend
                shuffler_url, shoe_url, dealer = sim.shuffler_url, sim.shoe_url, sim.dealer
                decide = q64_player
            elif dealer_socket:
                from table.hil.remote_dealer import RemoteDealer

                dealer = RemoteDealer(dealer_socket)
                stack.callback(dealer.close)
                decide = q64_player
                usb_backend = None
            else:
                from table.interfaces.terminal import ConsoleDealer

                dealer = ConsoleDealer()  # prompts only; nothing reads stdin here
                decide = console_decisions(console)  # decisions come in on the console
                usb_backend = None  # real USB devices: pyusb picks libusb
            shuffler = stack.enter_context(Shuffler.open(shuffler_url, events=events, name="shuffler", usb_backend=usb_backend,
                                                         config=settings.link_config("shuffler", journal),
                                                         ack_on_delivery=journal is None, resume=resume))
            shoe = stack.enter_context(CardShoe.open(shoe_url, events=events, name="shoe", usb_backend=usb_backend,
                                                     config=settings.link_config("shoe", journal),
                                                     ack_on_delivery=journal is None, resume=resume))
            svc.devices_up(stack, shuffler, shoe)
            deck_ids = settings.deck_ids()
            custody = DeckCustody([(deck_ids[0], colours[0]), (deck_ids[1], colours[1])])
            controller = TableController(shuffler, shoe, events, dealer, custody, seats=seats,
                                         ante_cents=ante_cents, tables=tables, decide=decide, timing=settings.timing(),
                                         journal=journal, console=console, profile=get_profile(profile_name),
                                         auto_dealer=bool(simulate or dealer_socket),
                                         side_wagers=_side_wagers(tables, side_cents, progressive_cents),
                                         cursor=cursor, anchors=anchors)
            stack.callback(_close_quietly, controller)
            if journal is not None:  # the stream for subscribers, the event socket, and MQTT when [mqtt] host is set
                from table.interfaces.event_socket import serve_for

                from table.interfaces.mqtt import MqttSetupError

                try:
                    serve_for(stack, controller, journal_path, event_socket, settings.config, front=front,
                              dispatcher=dispatcher, roles=roles, table_key=signing_key)
                except (MqttSetupError, OSError) as exc:
                    raise click.UsageError(f"cannot serve the event stream: {exc}") from None
            controller.prepare()
            # --rounds counts rounds dealt: a voided round does not count (the service
            # without --rounds deals until stopped).
            unlimited = svc.unlimited(given_on_command_line(ctx, "rounds"))
            dealt = 0
            while unlimited or dealt < rounds:
                try:
                    r = controller.play_round()
                except RoundVoided as exc:
                    click.echo(f"tablectl run: {exc}", err=True)
                    continue
                except (RoundHeld, DeviceFault, DeviceTimeout) as exc:
                    if not console.attached:
                        raise
                    click.echo(f"tablectl run: {exc}; waiting for a supervisor", err=True)
                    controller.resolve_held()
                    continue
                dealt += 1
                if service:
                    svc.round_done(r, round_to_json(r))
                    continue
                results.add(r)
        except JournalWriteError as exc:
            # Nothing more can be recorded, so nothing more is done: the devices keep their
            # unacknowledged events and a restart holds the round (docs/journal.md).
            error, code = (f"journal unwritable ({exc.reason}): the round is held and the table stops; "
                           f"free the disk or fix the journal, then restart ({exc})"), EXIT_JOURNAL
            svc.stopping(f"journal unwritable: {exc.reason}")
        except JournalTampered as exc:
            error, code = str(exc), EXIT_CUSTODY
        except (RoundHeld, CustodyViolation, SupervisorRequired) as exc:
            error, code = str(exc), EXIT_CUSTODY
        except (TableError, LinkError) as exc:
            error, code = str(exc), EXIT_DEVICE
        except KeyboardInterrupt:
            error, code = "interrupted", 130
            svc.stopping(error)
        violations = len(controller.custody.violations) if controller else 0
        cards_read = controller.cards_read if controller else 0

    net_by_seat = results.net_by_seat
    if service:
        svc.summary(cards_read, violations, error)
    elif as_json:
        out: dict[str, Any] = {
            "cards_read": cards_read,
            "custody_violations": violations,
            "net_by_seat": net_by_seat,
            "seed": seed,
            "ante_cents": ante_cents,
            "paytables": {k: getattr(tables, k).name for k in ("ante_bonus", "pair_plus", "six_card_bonus", "progressive")
                          if getattr(tables, k) is not None},
        }
        if error:
            out["error"] = error
        results.finish(out)
    else:
        click.echo(f"rounds {results.count}  cards read {cards_read}  custody violations {violations}")
        click.echo("net by seat: " + "  ".join(f"seat{s} {_money(v)}" for s, v in net_by_seat.items())
                   + f"   house {_money(-sum(net_by_seat.values()))}")
    if error:
        click.echo(f"tablectl run: {error}", err=True)
        sys.exit(code)


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


def _open_web(host_port: tuple[str, int], dispatcher: Any, front: Any, cfg: Any, people_file: str | None) -> Any:
    """The HTTP + WebSocket front door of ``tablectl run``. Raises ``click.UsageError``."""
    from table.interfaces.auth import DEFAULT_PEOPLE_FILE, Authenticator, PeopleFileError
    from table.interfaces.web import WebFrontDoor

    try:
        if cfg is not None:
            auth = Authenticator.from_config(cfg.auth) if people_file is None else \
                Authenticator(people_file, session_ttl_s=cfg.auth.session_ttl_s,
                              session_idle_s=cfg.auth.session_idle_s, max_failures=cfg.auth.max_failures,
                              lockout_s=cfg.auth.lockout_s)
        else:
            auth = Authenticator(people_file or DEFAULT_PEOPLE_FILE)
    except PeopleFileError as exc:
        raise click.UsageError(str(exc)) from None
    if not auth.people():
        log.warning("web_nobody_can_sign_in", people_file=str(auth.people_file),
                    advice="add people with `tablectl people add ID --role ROLE`")
    w = cfg.web if cfg is not None else None
    try:
        return WebFrontDoor(host_port[0], host_port[1], dispatcher, auth, front,
                            tls_certfile=w.tls_certfile if w else None, tls_keyfile=w.tls_keyfile if w else None,
                            max_connections=w.max_connections if w else 256,
                            idle_timeout_s=w.idle_timeout_s if w else 10.0,
                            max_websockets=w.max_websockets if w else 64)
    except OSError as exc:
        raise click.UsageError(f"--web {host_port[0]}:{host_port[1]}: {exc}") from None


def _side_wagers(tables: Tables, side_cents: int, progressive_cents: int) -> dict[str, int]:
    """Each seat's side wagers: one for every side paytable the table has (issue 6, point 10)."""
    out = {}
    if tables.pair_plus is not None:
        out["pair_plus"] = side_cents
    if tables.six_card_bonus is not None:
        out["six_card"] = side_cents
    if tables.progressive is not None:
        out["progressive"] = progressive_cents
    return out


def _close_quietly(controller: TableController) -> None:
    """At exit: sign the journal's tail (a clean stop leaves nothing unsigned); a journal
    that can no longer be written was already reported."""
    try:
        controller.close()
    except JournalError as exc:
        log.error("shutdown_checkpoint_failed", error=str(exc))


def _raise_exit(signum, frame) -> None:  # SIGTERM → clean shutdown via KeyboardInterrupt handling
    raise KeyboardInterrupt
