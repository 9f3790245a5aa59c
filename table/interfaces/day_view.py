"""The ``day_report`` query of the table API: the current shift's or gaming day's figures, with a series to plot.

A front-door query (``table/interfaces/api_schema.py``, for supervisors and
auditors), answered from the journal file opened read-only, never from the
controller's memory: :func:`table.day.day_report.live_report` counts the shift or
gaming day as ``tablectl report shift|day --json`` does (COMAR 36.05.03.25:
the settled win against the expected win given the decisions, with the 95 %
band of its exact variance, flagged outside it; the statistical win once the
slips and the drop are in) and adds ``series``, one item per settled round,
cumulative, for the supervisor's plot. Each round's exact expectation is
counted once and kept for the next query (a shift page asks after every round).
"""

from __future__ import annotations

import threading
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Callable

from table.day.day_report import (Calendar, JournalFacts, ReportError, live_report, merge_facts, read_journal,
                              segment_day)
from table.journal import Journal, JournalError
from table.day.segments import day_history
from table.rules.profiles import PENNSYLVANIA, RulesProfile
from table.rules.settlement import Tables


class DayReportQueries:
    """The ``day_report`` query of the journal at ``journal_path``: ``tables`` (the
    paytables the table settles with), ``profile``, ``calendar`` (the config's
    ``[gaming_day]``). :meth:`day_report` blocks (run it in a thread)."""

    def __init__(self, journal_path: str | Path, tables: Tables, *, profile: RulesProfile = PENNSYLVANIA,
                 calendar: Calendar = Calendar(), archive: str | Path | None = None) -> None:
        self.path = Path(journal_path)
        #: the ``[journal] archive`` folder: a day already closed is read from its archive
        self.archive = Path(archive) if archive is not None else None
        self.tables = tables
        self.profile = profile
        self.calendar = calendar
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def day_report(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args``: ``period`` (``shift`` or ``day``), optional ``gaming_day``
        (``YYYY-MM-DD``) and ``shift``. Returns the reply's fields: the report and its
        ``series``. Raises ``ValueError`` (a date that is not one, a report that
        cannot be counted: :class:`~table.day.day_report.ReportError`)."""
        on = None
        if args.get("gaming_day") is not None:
            try:
                on = date.fromisoformat(args["gaming_day"])
            except ValueError:
                raise ReportError(f"gaming_day {args['gaming_day']!r} is not a date YYYY-MM-DD") from None
        facts = self._facts(on)
        with self._lock:  # one count at a time: the cache is shared
            return live_report(facts, args["period"], self.tables, self.profile, self.calendar, on=on,
                               shift=args.get("shift"), cache=self._cache)

    def _facts(self, on: date | None) -> JournalFacts:
        """The facts of the live segment, or, for a gaming day ``on`` already closed and
        archived (``YYYY-MM-DD.journal.xz`` in the archive folder), of that day's archive,
        the next day's (the drop is counted, and entered, after the day's close) and the
        live segment: the night supervisor printing yesterday's report after the day's
        start gets that day's figures, not an empty day."""
        with Journal(self.path, read_only=True) as j:
            live = read_journal(j)
            today = segment_day(j)
            opened_days = set(day_history(j)["opened"])  # the days the table was opened, carried across days
            if on is None or self.archive is None or on == today:
                return live
        from table.day.segments import archive_name, existing, opened

        days = [existing(self.archive / archive_name(d.isoformat())) for d in (on, on + timedelta(days=1))]
        if days[0] is None:
            if today is not None and on < today and on.isoformat() in opened_days:
                # a day the table opened whose archive is not in the folder: named and flagged,
                # never an empty day shown as if nothing was played
                live.missing_days.append((on.isoformat(), f"{on.isoformat()} (no {archive_name(on.isoformat())} "
                                                          f"in {self.archive})"))
            return live
        parts = []
        for path in (p for p in days if p is not None):
            try:
                with opened(path) as db, Journal(db, read_only=True) as j:
                    parts.append(read_journal(j))
            except JournalError as exc:
                raise ReportError(f"{path}: {exc}") from None
        return merge_facts([*parts, live])

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """For :class:`~table.interfaces.dispatch.Dispatcher` ``queries``."""
        return {"day_report": self.day_report}

