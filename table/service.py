"""What ``tablectl run --config/--service`` adds to a run: the table config merged
under the command line, and the systemd service protocol.

:func:`merge_config` reads the config file and returns the run's effective
options: a value given on the command line wins, then the config's, then the
option's default. :class:`ServiceRun` is the service mode's side of the run
loop: ``READY=1`` once both device handshakes are done, ``WATCHDOG=1`` every
half ``WatchdogSec`` while both device links are alive, ``STATUS=`` after each
round, ``STOPPING=1`` on SIGTERM; round results go to the log (stdout is the
journal stream), not to stdout as text. Outside service mode every method is a
no-op, so the run loop calls them unconditionally.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import click
import structlog
from click.core import ParameterSource

from .config import DEFAULT_PATH, ConfigError, TableConfig, load_config
from .sdnotify import NotifyError, SystemdNotifier, Watchdog

log = structlog.get_logger("table.service")

#: run options a config supplies (option name -> how to read it from the config).
_FROM_CONFIG = {
    "seats": lambda c: c.table.seats,
    "deck_colours": lambda c: ",".join(str(d.back_colour) for d in c.decks),
    "ante_bonus": lambda c: c.paytables.ante_bonus,
    "shuffler_url": lambda c: c.devices.shuffler.url,
    "shoe_url": lambda c: c.devices.shoe.url,
    "log_level": lambda c: c.log.level,
    "log_format": lambda c: c.log.format,
}


def given_on_command_line(ctx: click.Context, name: str) -> bool:
    """True when option ``name`` came from the command line (or its envvar), not its default."""
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


@dataclass
class RunSettings:
    """The effective settings of one run: ``config`` (``None`` without a file) and
    ``options``, the command's option values after merging (same names as the
    command's parameters)."""

    config: TableConfig | None
    options: dict[str, Any] = field(default_factory=dict)

    def link_config(self, device: str) -> Any:
        """``LinkConfig`` for ``"shuffler"`` or ``"shoe"`` from the config (``None``: defaults)."""
        if self.config is None:
            return None
        return self.config.link.link_config(getattr(self.config.devices, device))

    def timing(self) -> Any:
        """The controller's ``TableTiming`` from the config (``None``: defaults)."""
        return self.config.link.table_timing() if self.config else None

    def deck_ids(self, default: tuple[str, str] = ("A", "B")) -> tuple[str, str]:
        """The two decks' ids."""
        return (self.config.decks[0].id, self.config.decks[1].id) if self.config else default

    def other_paytables(self) -> dict[str, Any]:
        """``Tables.load`` keyword arguments for the config's Pair Plus, Six Card Bonus
        and progressive tables, and the directory relative paths are read from."""
        if self.config is None:
            return {}
        p = self.config.paytables
        kw = {k: getattr(p, k) for k in ("pair_plus", "six_card_bonus", "progressive") if getattr(p, k)}
        return {**kw, "base_dir": self.config.base_dir}


def merge_config(ctx: click.Context, config_path: str | None, service: bool) -> RunSettings:
    """Read the config (``config_path``, or :data:`DEFAULT_PATH` in service mode) and
    merge it under ``ctx``'s options. Without either, the options pass unchanged.
    Raises ``click.UsageError`` (exit 2) carrying every config problem."""
    options = dict(ctx.params)
    if not config_path and not service:
        return RunSettings(None, options)
    path = config_path or str(DEFAULT_PATH)
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        raise click.UsageError(f"invalid config:\n{exc}") from None
    for name, read in _FROM_CONFIG.items():
        if name in options and not given_on_command_line(ctx, name):
            options[name] = read(cfg)
    return RunSettings(cfg, options)


class ServiceRun:
    """The service-mode hooks of ``tablectl run`` (no-ops when ``enabled`` is false).

    ``notifier``: where sd_notify messages go (default: ``$NOTIFY_SOCKET``).
    Notification failures are logged, never raised: a missing manager must not
    stop a dealt round.
    """

    def __init__(self, enabled: bool, settings: RunSettings | None = None,
                 notifier: SystemdNotifier | None = None) -> None:
        self.enabled = enabled
        self.settings = settings
        self.notifier = (notifier or SystemdNotifier.from_env()) if enabled else SystemdNotifier(None)
        self.watchdog: Watchdog | None = None
        self.rounds_done = 0
        self.net_by_seat: dict[str, int] = {}
        if enabled and settings is not None and settings.config is not None:
            structlog.contextvars.bind_contextvars(table_id=settings.config.table.id)

    def _send(self, what: str, *args: Any) -> None:
        try:
            getattr(self.notifier, what)(*args)
        except (NotifyError, ValueError) as exc:
            log.error("sd_notify_failed", message=what, error=str(exc))

    def unlimited(self, rounds_given: bool) -> bool:
        """True when the table deals until stopped: service mode without ``--rounds``."""
        return self.enabled and not rounds_given

    def devices_up(self, stack: ExitStack, shuffler: Any, shoe: Any) -> None:
        """Call once both handshakes are done: sends ``READY=1`` and starts the
        watchdog pings (every half ``$WATCHDOG_USEC``, only while
        ``shuffler.link.alive and shoe.link.alive``); ``stack`` stops them."""
        if not self.enabled:
            return
        ids = [getattr(getattr(d.link, "identity", None), "serial_number", "?") for d in (shuffler, shoe)]
        self._send("ready", f"shuffler {ids[0]} and shoe {ids[1]} connected")
        log.info("service_ready", shuffler_serial=ids[0], shoe_serial=ids[1])
        self.watchdog = stack.enter_context(
            Watchdog(self.notifier, healthy=lambda: bool(shuffler.link.alive and shoe.link.alive)))

    def round_done(self, result: Any, as_dict: dict[str, Any]) -> None:
        """After each round: log its result (``round_result``) and update STATUS."""
        if not self.enabled:
            return
        self.rounds_done += 1
        for s in result.seats:
            self.net_by_seat[str(s.seat)] = self.net_by_seat.get(str(s.seat), 0) + s.net_cents
        log.info("round_result", **as_dict)
        self._send("status", f"round {result.number} settled ({result.round_id}); deck {result.deck_id} in the shoe")

    def stopping(self, reason: str) -> None:
        """On SIGTERM / interrupt: ``STOPPING=1``."""
        if self.enabled:
            self._send("stopping", f"stopping: {reason}")
            log.info("service_stopping", reason=reason)

    def summary(self, cards_read: int, violations: int, error: str | None) -> None:
        """At exit: the run's totals as one ``run_summary`` log line."""
        if self.enabled:
            (log.error if error else log.info)("run_summary", rounds=self.rounds_done, cards_read=cards_read, custody_violations=violations,
                     net_by_seat=self.net_by_seat, error=error)
