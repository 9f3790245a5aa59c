"""What ``tablectl run --service`` adds to a run: the systemd service protocol.

``table_id`` is bound to every log line. :class:`ServiceRun` is the service
mode's side of the run loop: ``READY=1`` once both device handshakes are done,
``WATCHDOG=1`` every half ``WatchdogSec`` while both device links are alive, ``STATUS=`` after each
round, ``STOPPING=1`` on SIGTERM; round results go to the log (stdout is the
journal stream), not to stdout as text. Outside service mode every method is a
no-op, so the run loop calls them unconditionally.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import structlog

from table.service.sdnotify import NotifyError, SystemdNotifier, Watchdog

log = structlog.get_logger("table.service")


class ServiceRun:
    """The service-mode hooks of ``tablectl run`` (no-ops when ``enabled`` is false).

    ``notifier``: where sd_notify messages go (default: ``$NOTIFY_SOCKET``).
    Notification failures are logged, never raised: a missing manager must not
    stop a dealt round.
    """

    def __init__(self, enabled: bool, table_id: str | None = None,
                 notifier: SystemdNotifier | None = None) -> None:
        self.enabled = enabled
        self.table_id = table_id
        self.notifier = (notifier or SystemdNotifier.from_env()) if enabled else SystemdNotifier(None)
        self.watchdog: Watchdog | None = None
        self.rounds_done = 0
        self.net_by_seat: dict[str, int] = {}
        if enabled and table_id is not None:
            structlog.contextvars.bind_contextvars(table_id=table_id)

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

    def summary(self, cards_read: int, violations: int, error: str | None, *, stopped: bool = False,
                voided: int = 0) -> None:
        """At exit: the run's totals as one ``run_summary`` log line.

        ``error``: why the run ended early (None: every round dealt); ``stopped``: it
        ended because it was told to (SIGTERM from ``systemctl stop``, or Ctrl-C),
        which is routine: the line is logged at info with ``stopped`` set, not at
        error (``journalctl -p err`` then shows only what needs a person).
        ``voided``: rounds a supervisor voided."""
        if self.enabled:
            failed = error is not None and not stopped
            (log.error if failed else log.info)(
                "run_summary", rounds=self.rounds_done, cards_read=cards_read, custody_violations=violations,
                voided_rounds=voided, net_by_seat=self.net_by_seat,
                stopped=error if stopped else None, error=error if failed else None)
