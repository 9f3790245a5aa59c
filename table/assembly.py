"""The table assembled in one place: a description of the table, its drivers opened, its controller built.

Every way a table is started (``tablectl run``, the vendor facade :mod:`table.api`,
the soaks of :mod:`table.hil`, the tests) goes through here::

    spec = TableSpec(shuffler=DeviceSpec.from_config(cfg, "shuffler", journal=journal),
                     shoe=DeviceSpec.from_config(cfg, "shoe", journal=journal),
                     decks=(("A", RED), ("B", BLUE)), tables=Tables.load("pa-649a12b-1"))
    with assemble(spec, People(dealer), journal=journal) as table:
        table.controller.play_round()

* :class:`DeviceSpec` and :class:`TableSpec` are the description, frozen: which
  device at which URL with which driver and options, the seats, the paytables, the
  limits, the timing, the gaming day's archive, the anchors and what the floor
  said. Built from the table config (:meth:`TableSpec.from_config`) or from the
  command line.
* :class:`People` are who act at the table: the dealer, the players' decisions and
  bets, the console the supervisors answer on. Present, not described.
* :func:`open_driver` is the ONE place a device's driver is opened. A driver run as
  a process of its own (the controller holding the keys, the journal and every
  sealed card, the driver only its device) is started here and handed back as a
  proxy with the same surface (docs/drivers.md, "The contract").
* :func:`assemble` opens the shuffler's driver, then the shoe's, builds the
  :class:`~table.controller.TableController`, and closes what it opened in reverse
  order when a step fails; :meth:`AssembledTable.close` does the same at the end
  (the controller first: it signs the journal's tail).

The floor's anchors (:func:`floor_anchors`) and the gaming day's archive policy
(:func:`archive_policy`) are read here too, once for every caller.
"""

from __future__ import annotations

import queue
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import structlog

from devices import plugins
from devices.contract import Capabilities, DeviceEvent, DriverError, DriverKind, LinkConfig, OpenRequest
from protocols.cards import BackColour

from .bets import TableLimits
from .config import TableConfig
from .console import Console
from .controller import Dealer, TableController, TableTiming
from .custody import DeckCustody
from .errors import TableError
from .floor_anchor import FloorLink
from .in_force import settings_of
from .journal import Journal, JournalError
from .procedure.day_segments import ArchivePolicy
from .procedure.round_play import Players
from .recovery import DeviceCursor, device_cursor
from .rules.profiles import PENNSYLVANIA, RulesProfile
from .rules.settlement import Tables
from .rules.strategy import Decide, q64_player

log = structlog.get_logger("table.assembly")

__all__ = ["AssemblyError", "DriverRefused", "DeviceSpec", "TableSpec", "People", "AssembledTable", "open_driver", "assemble",
           "floor_anchors", "archive_policy"]

#: The events both drivers deliver, waiting for the controller (bounded: a driver that floods waits).
EVENT_QUEUE_SIZE = 1024


class AssemblyError(TableError):
    """A table that cannot be assembled as described: ``key`` names the config key (or
    option) at fault, the message the rule."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class DriverRefused(DriverError):
    """A device's driver could not be loaded or refused its options or declaration
    (:class:`~devices.contract.DriverError`), naming the config key at fault: ``key``
    (``devices.shoe.driver``, or the option's ``devices.shoe.NAME``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


# -- the description ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceSpec:
    """One device as the table is told of it: ``kind`` (shuffler or shoe), ``url`` (a
    pyserial URL, ``socket://H:P`` or ``usb://VID:PID[/SERIAL]``), ``driver`` (the
    config's ``[devices.KIND] driver``: ``"spec"`` or a plugin's entry point name),
    ``options`` (the driver's own keys), ``link_config`` (timings in ms/s, the pinned
    serial, the firmware allowlist and the journal's approvals), ``extras`` (the SPEC
    driver's ``usb_backend`` and ``frame_trace`` only; docs/drivers.md)."""

    kind: DriverKind
    url: str
    driver: str = "spec"
    options: Mapping[str, Any] = field(default_factory=dict)
    link_config: LinkConfig = field(default_factory=LinkConfig)
    extras: Mapping[str, Any] = field(default_factory=dict)
    #: which drivers run in a process of their own (``devices.apart.choose``: ``"all"``, the
    #: default, ``"plugins"``, ``"none"``: the in-process form a test or bench chooses where it
    #: is cheaper; docs/drivers.md, "A driver's process")
    apart: str = "all"
    #: the table runs as the service: a driver process gets the service's isolation
    service: bool = False

    @classmethod
    def from_config(cls, cfg: TableConfig | None, kind: DriverKind | str, *, url: str | None = None,
                    journal: Journal | None = None, spec_only: bool = False,
                    extras: Mapping[str, Any] | None = None, service: bool = False) -> "DeviceSpec":
        """``[devices.KIND]`` of ``cfg`` (None: the SPEC driver with the default link) with
        the firmware versions ``journal``'s updates approve (:func:`table.firmware.link_config_for`).
        ``url`` overrides the config's; ``spec_only``: the built-in driver whatever the
        config names (emulators of a simulated table speak the SPEC)."""
        from .firmware import link_config_for

        kind = DriverKind(kind)
        if cfg is None:
            return cls(kind, url or "", extras=dict(extras or {}), service=service)
        dev = getattr(cfg.devices, str(kind))
        driver, options = ("spec", {}) if spec_only else (dev.driver, dict(dev.options))
        return cls(kind, url or dev.url, driver, options, link_config_for(cfg, str(kind), journal),
                   dict(extras or {}), service=service)


@dataclass(frozen=True)
class TableSpec:
    """The table as described: its two devices, the two decks (``(deck id, back colour)``
    each, 649a.3(b)), ``seats`` (1..7), the fixed bet (``ante_cents``, ``side_wagers``
    in cents by wager kind), the filed paytables (``tables``), the rules ``profile``,
    the table's ``limits`` (None: the documented defaults), ``timing`` (None: the
    defaults), ``day_required`` (no round while closed for the gaming day),
    ``archive`` (the gaming day's archive policy, None: one journal), ``anchors``
    (signed checkpoints seen off the journal) and ``unconfirmed`` (why the floor could
    not confirm the journal's end: held for a supervisor at start)."""

    shuffler: DeviceSpec
    shoe: DeviceSpec
    decks: tuple[tuple[str, BackColour], tuple[str, BackColour]]
    tables: Tables
    seats: int = 3
    ante_cents: int = 1000
    side_wagers: Mapping[str, int] = field(default_factory=dict)
    profile: RulesProfile = PENNSYLVANIA
    limits: TableLimits | None = None
    timing: TableTiming | None = None
    day_required: bool = False
    archive: ArchivePolicy | None = None
    anchors: tuple[dict[str, Any], ...] = ()
    unconfirmed: str | None = None
    #: the floor the table reports to (``[floor]``; None: none): the floor of record
    #: (:class:`table.floor_anchor.FloorLink`), journaled at start
    floor: Any = None
    #: what the caller knows is in force besides the paytables, profile, limits and seats
    #: (``gaming_day``, ``floor``, ``drivers``: :func:`table.in_force.settings_of`), journaled
    #: with them in the ``in_force`` entry (docs/journal.md, "What was in force")
    in_force: Mapping[str, Any] | None = None

    @classmethod
    def from_config(cls, cfg: TableConfig, *, journal: Journal | None = None,
                    urls: tuple[str, str] | None = None, ante_cents: int = 1000,
                    anchors: tuple[dict[str, Any], ...] | list = (), unconfirmed: str | None = None,
                    archive: ArchivePolicy | None = None) -> "TableSpec":
        """The table ``cfg`` describes. ``urls``: the shuffler's and the shoe's, given (a
        simulated table's emulators: the built-in driver then drives them), else the
        config's with the config's drivers."""
        shuffler_url, shoe_url = urls if urls is not None else (None, None)
        d = cfg.decks
        return cls(
            shuffler=DeviceSpec.from_config(cfg, DriverKind.SHUFFLER, url=shuffler_url, journal=journal,
                                            spec_only=urls is not None),
            shoe=DeviceSpec.from_config(cfg, DriverKind.SHOE, url=shoe_url, journal=journal,
                                        spec_only=urls is not None),
            decks=((d[0].id, d[0].back_colour), (d[1].id, d[1].back_colour)), tables=cfg.load_tables(),
            seats=cfg.table.seats, ante_cents=ante_cents, limits=cfg.limits.given(),
            timing=cfg.link.table_timing(), day_required=cfg.gaming_day.procedures_required,
            archive=archive, anchors=tuple(anchors), unconfirmed=unconfirmed, floor=FloorLink.of(cfg.floor),
            in_force=settings_of(cfg))


@dataclass
class People:
    """Who acts at the table: the ``dealer`` who moves decks and draws cards, each seat's
    play or fold (``decide``), who bets (``players``, None: the fixed bet), the
    ``console`` the supervisors answer on, and ``auto_dealer`` (the dealer's own
    confirmations need no command: a bench or simulated dealer)."""

    dealer: Dealer
    decide: Decide = q64_player
    console: Console | None = None
    auto_dealer: bool = True
    players: Players | None = None


# -- the drivers ------------------------------------------------------------------------------------


def open_driver(device: DeviceSpec, events: "queue.Queue[DeviceEvent]", *,
                resume: Callable[[Any], int | None] | None = None, ack_on_delivery: bool = False) -> Any:
    """Open ``device``'s driver, connected (its identity known), delivering on ``events``.

    THE SEAM where a device's driver comes into the table: every caller opens drivers
    through this function only. Every driver, the built-in SPEC driver and plugins
    alike, runs as a process of its own (:func:`devices.apart.choose.open_device`),
    started here and returned as a proxy with the same surface (``link``, ``status()``,
    ``shuffle()``, ``close()``, ``capabilities``, ``driver_name``); the table never
    imports its code and learns its declaration from the process. ``device.apart ==
    "none"`` (a test's or bench's explicit choice) opens it in this process
    (:func:`devices.plugins.open_driver`), as does an in-process USB emulator.

    ``resume``: the journal's last event per device (the links skip what is
    journaled); ``ack_on_delivery``: answer the device at once (no journal kept).
    Returns a driver carrying its plugin's declaration
    (:class:`devices.plugins.DeclaredDriver`). Raises :class:`DriverRefused` (cannot
    load, version, options, no declaration; naming ``devices.KIND.driver``) or the
    driver's :class:`~devices.contract.LinkError` (cannot open, no answer, refused at
    the handshake)."""
    request = OpenRequest(device.kind, device.url, str(device.kind), events, options=dict(device.options),
                          link_config=device.link_config, ack_on_delivery=ack_on_delivery, resume=resume,
                          extras=dict(device.extras))
    from devices.apart.choose import open_device

    try:
        drv = open_device(device.driver, request, apart=device.apart, service=device.service)
    except DriverError as exc:
        raise DriverRefused(f"devices.{device.kind}.driver", str(exc)) from exc
    if isinstance(drv, plugins.DeclaredDriver):
        return drv
    process = getattr(drv, "process", None)  # a driver apart: its declaration came from its process
    declared = getattr(process, "declared", None)
    if not isinstance(declared, Capabilities):
        drv.close()
        raise DriverRefused(f"devices.{device.kind}.driver",
                            f"{plugins.entry_point_of(device.driver)} declares no capabilities")
    return plugins.DeclaredDriver(drv, plugins.Declaration(
        device.driver, plugins.entry_point_of(device.driver), int(getattr(process, "contract_version", 0) or 0),
        device.kind, declared))


# -- the table --------------------------------------------------------------------------------------


class AssembledTable:
    """A table assembled by :func:`assemble`: ``controller``, the opened ``shuffler`` and
    ``shoe`` drivers, their ``events`` queue and the ``cursor`` of their journaled
    events. :meth:`close` (or leaving a ``with``) signs the journal's tail, then closes
    the shoe's driver and the shuffler's."""

    def __init__(self, stack: ExitStack, controller: TableController, shuffler: Any, shoe: Any,
                 events: "queue.Queue[DeviceEvent]", cursor: DeviceCursor) -> None:
        self._stack = stack
        self.controller = controller
        self.shuffler = shuffler
        self.shoe = shoe
        self.events = events
        self.cursor = cursor

    def close(self) -> None:
        """Close in reverse: the controller (its shutdown checkpoint), the shoe, the shuffler."""
        self._stack.close()

    def __enter__(self) -> "AssembledTable":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_controller(spec: TableSpec, people: People, shuffler: Any, shoe: Any,
                     events: "queue.Queue[DeviceEvent]", *, journal: Journal | None = None,
                     cursor: DeviceCursor | None = None) -> TableController:
    """The controller of the table ``spec`` describes, on drivers already open (what
    :func:`assemble` does after :func:`open_driver`; a bench that wraps a device's
    transport in its own faults opens it by hand and comes in here). Raises
    ``ValueError`` (seats, ante) and :class:`TableError` (a driver that declares no
    capabilities)."""
    (first, first_colour), (second, second_colour) = spec.decks
    return TableController(
        shuffler, shoe, events, people.dealer, DeckCustody([(first, first_colour), (second, second_colour)]),
        seats=spec.seats, ante_cents=spec.ante_cents, tables=spec.tables, profile=spec.profile,
        decide=people.decide, timing=spec.timing, journal=journal, console=people.console,
        auto_dealer=people.auto_dealer, side_wagers=dict(spec.side_wagers), cursor=cursor,
        anchors=list(spec.anchors), day_required=spec.day_required, limits=spec.limits, players=people.players,
        unconfirmed=spec.unconfirmed, archive=spec.archive, floor=spec.floor,
        in_force=dict(spec.in_force) if spec.in_force is not None else None)


def assemble(spec: TableSpec, people: People, *, journal: Journal | None = None) -> AssembledTable:
    """Open the table ``spec`` describes: the shuffler's driver, then the shoe's
    (:func:`open_driver`, resuming from what ``journal`` recorded; each event answered
    only once journaled when there is a journal), then the controller
    (:func:`build_controller`). What was opened is closed in reverse when a later step
    fails, and the failure raised: :class:`~devices.contract.DriverError`,
    :class:`~devices.contract.LinkError`, :class:`TableError`, ``ValueError``."""
    stack = ExitStack()
    try:
        cursor = device_cursor(journal) if journal is not None else DeviceCursor()
        events: queue.Queue[DeviceEvent] = queue.Queue(maxsize=EVENT_QUEUE_SIZE)
        opened = []
        for device in (spec.shuffler, spec.shoe):
            drv = open_driver(device, events, resume=cursor.resume_for(str(device.kind)),
                              ack_on_delivery=journal is None)
            stack.callback(drv.close)
            opened.append(drv)
        shuffler, shoe = opened
        controller = build_controller(spec, people, shuffler, shoe, events, journal=journal, cursor=cursor)
        stack.callback(_close_controller, controller)
    except BaseException:
        stack.close()
        raise
    return AssembledTable(stack, controller, shuffler, shoe, events, cursor)


def _close_controller(controller: TableController) -> None:
    """At the end: sign the journal's tail (a clean stop leaves nothing unsigned); a journal
    that can no longer be written was already reported."""
    try:
        controller.close()
    except JournalError as exc:
        log.error("shutdown_checkpoint_failed", error=str(exc))


# -- what the floor and the gaming day add ------------------------------------------------------------


def floor_anchors(section: Any, table_id: str, key: Any,
                  journal: Journal | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """The floor notary's checkpoint for this table as an anchor (``[floor] url``,
    :func:`table.notary_client.floor_anchors`), and why the journal's end could not be
    confirmed under ``[floor] unreachable = "hold"`` (None: confirmed, or not asked): the
    table then holds for a supervisor's acknowledgement at start. ``key``: the table
    key (its public half names the table to the floor); ``journal``: the table presents
    the latest floor receipt it journaled (:func:`table.floor_anchor.latest_receipt`),
    which the floor compares with its database (a floor restored behind it holds the
    table). Raises
    :class:`~table.notary_client.NotaryError` (a floor that cannot be reached under
    ``"refuse"``) and :class:`~table.keys.KeyFileError` (an unreadable ``[floor] public_key``)."""
    from .floor_anchor import latest_receipt
    from .notary_client import NotaryError, floor_anchors as ask_the_floor

    receipt = latest_receipt(journal) if journal is not None else None
    try:
        return ask_the_floor(section, table_id=table_id, table_public=key.public, receipt=receipt), None
    except NotaryError as exc:
        if section.unreachable == "hold":
            return [], str(exc)
        raise


def archive_policy(cfg: TableConfig | None, journal_path: str | Path, key: Any, table_id: str) -> ArchivePolicy | None:
    """With ``[journal] archive``: finish a gaming day's rollover a crash cut short
    (:func:`table.day.segments.finish`) and return the policy the controller rolls over and
    keeps archives by; None without it (one journal). Archived days are removed only
    below the floor notary's checkpoint (``[floor] url``), never without a floor.
    Raises :class:`AssemblyError` (key ``journal.archive``): the folder does not exist,
    or the rollover cannot be finished."""
    if cfg is None or cfg.journal.archive is None:
        return None
    from .day.segments import finish

    folder = Path(cfg.journal.archive)
    if not folder.is_dir():
        raise AssemblyError("journal.archive", f"folder {folder} does not exist (create it: the table does not "
                                               "make folders)")
    try:
        done = finish(journal_path, folder, key=key, table_id=table_id)
    except JournalError as exc:
        raise AssemblyError("journal.archive", f"a gaming day's rollover cut short cannot be finished: {exc}") from None
    if done is not None:
        log.warning("gaming_day_rollover_finished", archive=str(done))
    anchored = None
    if cfg.floor.url:
        def anchored() -> int | None:
            from .notary_client import floor_anchors as ask_the_floor

            got = [a for a in ask_the_floor(cfg.floor, table_id=table_id, table_public=key.public)
                   if isinstance(a.get("seq"), int) and "anchor_refused" not in a]
            return max((a["seq"] for a in got), default=None)
    else:
        log.info("retention_without_floor", note="no [floor] url: archived gaming days are never removed")
    g = cfg.gaming_day
    return ArchivePolicy(folder, g.start_hour, g.timezone, g.retention_years, g.keep_days, anchored)
