"""systemd service notifications (sd_notify(3)) and the watchdog, in pure Python.

The protocol is one datagram per notification, ``KEY=VALUE`` lines, sent to the
AF_UNIX datagram socket named by ``$NOTIFY_SOCKET``: a path, or an abstract
socket name when it starts with ``@`` (sent as a leading NUL byte). The
service manager sets ``$WATCHDOG_USEC`` (and ``$WATCHDOG_PID``) when the unit
has ``WatchdogSec=``; the service must send ``WATCHDOG=1`` more often than
that, and sd_watchdog_enabled(3) advises every half interval.

Written here rather than taken from PyPI: ``sdnotify`` (last release 2017)
swallows every error, and ``systemd-watchdog`` times pings on the wall clock and
sends no ``STOPPING=1``; the protocol itself is a few lines.

Typical use in a service::

    notifier = SystemdNotifier.from_env()        # a no-op outside systemd
    ...open the devices, handshake...
    notifier.ready()
    with Watchdog(notifier, healthy=lambda: a.link.alive and b.link.alive):
        ...run...
    notifier.stopping()
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Callable, Mapping

import structlog

log = structlog.get_logger("table.sdnotify")


class NotifyError(OSError):
    """``$NOTIFY_SOCKET`` is malformed, or a notification could not be sent."""


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """The watchdog timeout systemd set for this process, in seconds, or ``None``.

    Reads ``$WATCHDOG_USEC`` (µs, a positive integer); ``None`` when it is unset,
    not a positive integer, or ``$WATCHDOG_PID`` names another process (as
    sd_watchdog_enabled(3) does). The caller pings at half this interval.
    """
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    if pid is not None and pid.strip() != str(os.getpid()):
        return None
    return int(usec) / 1_000_000


class SystemdNotifier:
    """Sends sd_notify messages to ``address`` (a ``$NOTIFY_SOCKET`` value).

    ``address``: a filesystem path (``/run/systemd/notify``) or an abstract name
    starting with ``@``; ``None`` makes every method a no-op (not under systemd).
    Methods raise :class:`NotifyError` when the socket refuses a datagram
    (a service whose manager went away should fail loudly, not run blind).
    Thread-safe: one datagram per call.
    """

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._target: str | bytes | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        if address:
            if address.startswith("@"):
                self._target = b"\0" + address[1:].encode()
            elif address.startswith("/"):
                self._target = address
            else:  # vsock: (systemd 254+) and anything else: not for a table PC
                raise NotifyError(f"NOTIFY_SOCKET {address!r}: only a path or an @abstract name is supported")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "SystemdNotifier":
        """A notifier for ``$NOTIFY_SOCKET``; a no-op one when it is unset or empty."""
        env = os.environ if environ is None else environ
        return cls(env.get("NOTIFY_SOCKET") or None)

    @property
    def enabled(self) -> bool:
        """True when notifications go somewhere (``$NOTIFY_SOCKET`` was set)."""
        return self._target is not None

    def notify(self, **fields: str | int) -> None:
        """Send one datagram of ``KEY=VALUE`` lines (``notify(READY=1, STATUS="up")``).
        Values must not contain newlines (``ValueError``)."""
        if self._target is None:
            return
        lines = []
        for key, value in fields.items():
            text = str(value)
            if "\n" in text:
                raise ValueError(f"sd_notify field {key} must be one line")
            lines.append(f"{key}={text}")
        data = ("\n".join(lines) + "\n").encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.sendto(data, self._target)
            except OSError as exc:
                raise NotifyError(exc.errno, f"sd_notify to {self.address}: {exc.strerror or exc}") from exc

    def ready(self, status: str | None = None) -> None:
        """``READY=1``: start-up is finished (for ``Type=notify``), with an optional STATUS."""
        self.notify(READY=1, **({"STATUS": status} if status else {}))

    def watchdog(self) -> None:
        """``WATCHDOG=1``: the service is healthy; resets the watchdog timer."""
        self.notify(WATCHDOG=1)

    def status(self, text: str) -> None:
        """``STATUS=text``: one line shown by ``systemctl status``."""
        self.notify(STATUS=text)

    def stopping(self, status: str | None = None) -> None:
        """``STOPPING=1``: the service is shutting down."""
        self.notify(STOPPING=1, **({"STATUS": status} if status else {}))

    def close(self) -> None:
        """Close the socket; later notifications open a new one."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def __enter__(self) -> "SystemdNotifier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Watchdog:
    """A thread that sends ``WATCHDOG=1`` every ``interval_s`` while ``healthy()`` is true.

    ``interval_s`` defaults to half of :func:`watchdog_interval_s`; when that is
    ``None`` (no ``WatchdogSec=``) or the notifier is disabled, no thread starts.
    ``healthy``: called from the thread before each ping; a false answer or an
    exception skips the ping (logged once per change), so a dead device link
    lets systemd's watchdog fire and restart the service. A failed send is
    logged and retried at the next tick. Use as a context manager, or
    :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        notifier: SystemdNotifier,
        healthy: Callable[[], bool],
        interval_s: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if interval_s is None:
            timeout = watchdog_interval_s(environ)
            interval_s = timeout / 2 if timeout else None
        if interval_s is not None and interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.notifier = notifier
        self.healthy = healthy
        self.interval_s = interval_s if notifier.enabled else None
        self.pings = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        """True while the ping thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "Watchdog":
        """Start pinging (sends the first ping at once when healthy)."""
        if self.interval_s is not None and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="sd-watchdog", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop pinging and join the thread; safe to call twice."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> "Watchdog":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        was_healthy = True
        while True:
            try:
                ok = bool(self.healthy())
            except Exception as exc:  # a broken health check must not kill the thread
                ok = False
                log.warning("watchdog_health_check_failed", error=repr(exc))
            if ok != was_healthy:
                log.warning("watchdog_pings_stopped") if not ok else log.info("watchdog_pings_resumed")
                was_healthy = ok
            if ok:
                try:
                    self.notifier.watchdog()
                    self.pings += 1
                except NotifyError as exc:
                    log.error("watchdog_ping_failed", error=str(exc))
            if self._stop.wait(self.interval_s):
                return
