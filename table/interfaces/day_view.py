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
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from table.day.calendar import Calendar
from table.journal import Journal, JournalError, verify
from table.rules.profiles import PENNSYLVANIA, RulesProfile
from table.rules.settlement import Tables

if TYPE_CHECKING:
    from table.day.day_report import JournalFacts
    from table.day.report_cache import ArchivedDays, LiveFacts


class DayReportQueries:
    """The ``day_report`` query of the journal at ``journal_path``: ``tables`` (the
    paytables the table settles with), ``profile``, ``calendar`` (the config's
    ``[gaming_day]``), ``archive`` (the ``[journal] archive`` folder), ``public_keys``
    (the table's: each archived day's signed checkpoint is checked), ``clock`` (now,
    an aware datetime; a bench's or a test's fake). :meth:`day_report` blocks (run it in
    a thread).

    Read once (:mod:`table.day.report_cache`): each ask reads only the live entries
    committed since the last ask, an archived day once per content digest, and an ask
    whose record and period are the ones of the last answer gets that answer again."""

    def __init__(self, journal_path: str | Path, tables: Tables, *, profile: RulesProfile = PENNSYLVANIA,
                 calendar: Calendar = Calendar(), archive: str | Path | None = None,
                 public_keys: Iterable[Any] = (), clock: Callable[[], datetime] | None = None) -> None:
        self.path = Path(journal_path)
        #: the ``[journal] archive`` folder: a day already closed is read from its archive
        self.archive = Path(archive) if archive is not None else None
        self.tables = tables
        self.profile = profile
        self.calendar = calendar
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._public_keys = list(public_keys)
        self._readers: "tuple[LiveFacts, ArchivedDays] | None" = None
        self._answers: dict[tuple[Any, ...], dict[str, Any]] = {}  # the answers to the record as last read
        #: why the live segment does not hold, checked at each reading of it from its first entry
        self._live_problem: str | None = None
        self._live_checked = -1  # the live reader's full_reads when it was last checked

    @property
    def live(self) -> "LiveFacts":
        """The live segment's reader: each entry read once."""
        return self._read()[0]

    @property
    def archived(self) -> "ArchivedDays":
        """The archived days' reader: each day read once per content digest."""
        return self._read()[1]

    def _read(self) -> "tuple[LiveFacts, ArchivedDays]":
        if self._readers is None:
            # the report's code (the rules' exact tables, numpy) is loaded at the first ask,
            # not at every start of a table that keeps a journal
            from table.day.report_cache import ArchivedDays, LiveFacts

            self._readers = (LiveFacts(), ArchivedDays(self._public_keys))
        return self._readers

    def day_report(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args``: ``period`` (``shift`` or ``day``), optional ``gaming_day``
        (``YYYY-MM-DD``) and ``shift``. Returns the reply's fields: the report and its
        ``series`` (the caller does not change them: an answer is kept). Raises
        ``ValueError`` (a date that is not one, a report that cannot be counted:
        :class:`~table.day.day_report.ReportError`)."""
        from table.day.day_report import ReportError, live_report

        on = None
        if args.get("gaming_day") is not None:
            try:
                on = date.fromisoformat(args["gaming_day"])
            except ValueError:
                raise ReportError(f"gaming_day {args['gaming_day']!r} is not a date YYYY-MM-DD") from None
        now = self.clock()
        with self._lock:  # one count at a time: what is kept is shared
            version, facts, problems = self._facts(on)
            # an answer depends on the record read and on now only through the gaming day and
            # the clock's shift it falls in (a journaled shift change is in the record)
            key = (version, args.get("period"), on, args.get("shift"), self.calendar.gaming_day(now),
                   self.calendar.clock_shift(now))
            kept = self._answers.get(key)
            if kept is None:
                kept = live_report(facts(), args["period"], self.tables, self.profile, self.calendar, on=on,
                                   shift=args.get("shift"), now=now, cache=self._cache)
                if problems:  # the record first (docs/reporting.md): a day that does not hold is said first
                    kept["flags"] = [*problems, *kept.get("flags", [])]
                if len(self._answers) >= 16 or any(k[0] != version for k in self._answers):
                    self._answers.clear()  # the record grew: the answers to it before are not asked again
                self._answers[key] = kept
            return dict(kept)

    def _facts(self, on: date | None) -> tuple[tuple[Any, ...], Callable[[], JournalFacts], list[str]]:
        """The version of the record read and the facts of the live segment, or, for a gaming
        day ``on`` already closed and archived (``YYYY-MM-DD.journal.xz`` in the archive
        folder), of that day's archive, the next day's (the drop is counted, and entered,
        after the day's close) and the live segment: the night supervisor printing
        yesterday's report after the day's start gets that day's figures, not an empty day.
        An archived day whose record does not hold (:func:`table.day.report_cache.check_day`)
        is counted, and flagged by the problems returned third."""
        from table.day.day_report import ReportError, merge_facts
        from table.day.segments import day_history

        with Journal(self.path, read_only=True) as j:
            live_version = self.live.catch_up(j)
            today = self.live.day
            live = self._check_live()
            if on is None or self.archive is None or on == today:
                return live_version, self.live.facts, live
            opened_days = set(day_history(j)["opened"])  # the days the table was opened, carried across days
        from table.day.segments import archive_name, existing

        days = [(d, existing(self.archive / archive_name(d.isoformat()))) for d in (on, on + timedelta(days=1))]
        if days[0][1] is None:
            missing = today is not None and on < today and on.isoformat() in opened_days
            version = (live_version, on, "missing" if missing else "none")

            def live_only() -> JournalFacts:
                live = self.live.facts()
                if missing:
                    # a day the table opened whose archive is not in the folder: named and flagged,
                    # never an empty day shown as if nothing was played
                    live.missing_days.append((on.isoformat(), f"{on.isoformat()} (no {archive_name(on.isoformat())} "
                                                              f"in {self.archive})"))
                return live
            return version, live_only, live
        read = [(d, self.archived.day(path, d)) for d, path in days if path is not None]
        for _, a in read:
            if a.facts is None:
                raise ReportError(a.problem or "an archived day does not read")
        problems = live + [f"the archived gaming day {d} does not verify ({a.status}): {a.problem}: its figures "
                           "are counted from a record that does not hold" for d, a in read if a.problem is not None]

        def merged() -> JournalFacts:
            return merge_facts([*(a.facts for _, a in read if a.facts is not None), self.live.facts()])
        return (live_version, on, tuple(a.digest for _, a in read)), merged, problems

    def _check_live(self) -> list[str]:
        """The record check of the live segment (:func:`table.journal.verify`, with the table's
        public keys), taken each time it is read from its first entry (the first ask, a
        rollover, a file replaced): an entry edited while the table was stopped (its start
        checks only the entries after the last checkpoint) is flagged first in each reply
        (docs/reporting.md "The record first"), never shown as figures that hold. Entries
        read since come from the table's own commits."""
        if self.live.full_reads != self._live_checked:
            self._live_checked = self.live.full_reads
            try:
                r = verify(self.path, public_keys=self.archived.public_keys)
            except JournalError as exc:
                self._live_problem = f"the live journal does not verify: {exc}"
            else:
                self._live_problem = None if r.status not in ("tampered", "unreadable") else (
                    f"the live journal does not verify ({r.status}): {r.reason}"
                    + (f" (entry {r.first_bad})" if r.first_bad else "") + ": its figures are counted from a "
                    "record that does not hold")
        return [self._live_problem] if self._live_problem else []

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """For :class:`~table.interfaces.dispatch.Dispatcher` ``queries``."""
        return {"day_report": self.day_report}
