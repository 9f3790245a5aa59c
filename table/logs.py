"""structlog set-up: JSON lines for machines, a console renderer for people.

stdlib logging (pyserial, pyusb, transitions) is routed through the same
processors, so every line has one shape. Context such as ``round_id``,
``deck_id`` and ``device_serial`` is bound with ``structlog.contextvars``.

Modes: ``fmt="json"`` for files and the service (stdout goes to journald),
``fmt="console"`` for a person, ``fmt="auto"`` picks console on a terminal and
JSON elsewhere. When the stream is the journal stream systemd connected
(``$JOURNAL_STREAM`` names its device and inode), each line starts with a
syslog priority prefix (``<6>`` for info, ``<4>`` warning, ``<3>`` error), which
journald strips and stores as the priority, so ``journalctl -p warning`` works.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import IO, Mapping

import structlog


FORMATS = ("json", "console", "auto")

#: stdlib level -> syslog priority (sd-daemon(3) prefixes).
_SYSLOG_PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


def is_journal_stream(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """True when ``stream`` is the journald stream systemd gave this process:
    ``$JOURNAL_STREAM`` (``"DEV:INODE"``) matches the stream's file descriptor."""
    env = os.environ if environ is None else environ
    try:
        dev, ino = (int(x) for x in env.get("JOURNAL_STREAM", "").split(":"))
        st = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


class _PriorityPrefix(structlog.stdlib.ProcessorFormatter):
    """Prefixes each rendered line with ``<N>``, its syslog priority, for journald."""

    def format(self, record: logging.LogRecord) -> str:
        prio = _SYSLOG_PRIORITY.get(record.levelno)
        if prio is None:
            prio = next((p for lv, p in sorted(_SYSLOG_PRIORITY.items(), reverse=True) if record.levelno >= lv), 7)
        return f"<{prio}>" + super().format(record)


def configure_logging(
    *,
    stream: IO[str] | None = None,
    fmt: str = "json",
    level: str | int = "info",
    journald: bool | None = None,
) -> None:
    """Send all logs, structlog's and stdlib's, to ``stream`` (default stderr;
    stdout only in service mode, where results are not printed there).

    ``fmt``: ``"json"`` (one JSON object per line), ``"console"`` (for people)
    or ``"auto"`` (console when ``stream`` is a terminal, else JSON).
    ``level``: a stdlib level name or number. ``journald``: prefix lines with
    their syslog priority (``<6>...``); ``None`` decides by
    :func:`is_journal_stream`. Raises ``ValueError`` on an unknown format or level.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "console" if _isatty(stream) else "json"
    if journald is None:
        journald = is_journal_stream(stream)
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=_isatty(stream))
    )
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    formatter_cls = _PriorityPrefix if journald else structlog.stdlib.ProcessorFormatter
    handler.setFormatter(
        formatter_cls(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.format_exc_info, renderer],
        )
    )
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(lvl)
    # transitions logs every state change at INFO; keep it at WARNING unless debugging.
    logging.getLogger("transitions").setLevel(max(lvl, logging.WARNING) if lvl > logging.DEBUG else lvl)
    # pyusb sets its "usb" logger above CRITICAL at import unless PYUSB_DEBUG is set,
    # which would drop its records: import it first, then let them through at ``level``.
    try:
        import usb  # noqa: F401
    except ImportError:  # pragma: no cover - pyusb is a dependency
        pass
    logging.getLogger("usb").setLevel(lvl)


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
