"""structlog set-up: JSON lines for machines, a console renderer for people.

stdlib logging (pyserial, pyusb, transitions) is routed through the same
processors, so every line has one shape. Context such as ``round_id``,
``deck_id`` and ``device_serial`` is bound with ``structlog.contextvars``.
"""

from __future__ import annotations

import logging
import sys
from typing import IO

import structlog


def configure_logging(
    *,
    stream: IO[str] | None = None,
    fmt: str = "json",
    level: str | int = "info",
) -> None:
    """Send all logs to ``stream`` (default stderr; never stdout, which carries
    results). ``fmt``: ``"json"`` (one JSON object per line) or ``"console"``.
    ``level``: a stdlib level name or number. Raises ``ValueError`` on an
    unknown format or level.
    """
    if fmt not in ("json", "console"):
        raise ValueError(f"log format must be 'json' or 'console', got {fmt!r}")
    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")
    stream = stream or sys.stderr
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
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
