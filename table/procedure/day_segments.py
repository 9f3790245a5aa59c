"""The gaming day's close in the journal: one segment a day, archived, kept seven years.

:class:`DaySegments` is the conductor's part that rolls the journal over to
the next gaming day: between rounds, the first time the table's clock (the
journal's: :attr:`table.journal.Journal.now_us`) is past the next day's start
hour (``[gaming_day] start_hour`` in ``timezone``, the casino's gaming day:
COMAR 36.05.03.25, K.A.R. 112-108-51). It journals the day's close (a
``segment`` entry ``{"close": day, "next": next_day}`` and a signed checkpoint,
one transaction), then :func:`table.day.segments.roll` archives the day, checks
the archive and starts the next day's segment; then the retention
(:func:`table.day.segments.prune`) removes archives past their age whose end the
floor's notary holds.

The conductor calls ``roll_if_due()`` between rounds (``TableController.play_round``
before it opens a round, and at the end of ``prepare``). A crash during the
rollover is finished at the next start by :func:`table.day.segments.finish`, before
the journal is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

import structlog

from ..day import segments
from ..journal import SEGMENT_KIND
from .state import TableState

log = structlog.get_logger("table.day_segments")


@dataclass(frozen=True)
class ArchivePolicy:
    """Where and how long gaming days are kept: ``folder`` (the archive folder; it must
    exist), ``start_hour``/``timezone`` (the gaming day), ``retention_years`` (K.A.R.
    112-108-51: seven), ``keep_days`` (instead of years, when given), ``anchored``: a
    callable giving the seq of the floor notary's checkpoint for this table (None: no
    floor or no answer; then no archive is ever removed)."""

    folder: Path
    start_hour: int = 6
    timezone: str = "UTC"
    retention_years: int = 7
    keep_days: int | None = None
    anchored: Callable[[], int | None] | None = None

    def gaming_day(self, at: datetime) -> date:
        """The gaming day ``at`` (aware) falls in."""
        from ..day.calendar import Calendar

        return Calendar(self.start_hour, self.timezone).gaming_day(at)


class DaySegments:
    """Rolls ``state``'s journal over at the gaming day's end, as ``policy`` says."""

    def __init__(self, state: TableState, policy: ArchivePolicy) -> None:
        self.t = state
        self.policy = policy
        self._events: segments.EventCount | None = None

    def _now(self) -> datetime:
        assert self.t.journal is not None
        return datetime.fromtimestamp(self.t.journal.now_us() / 1e6, timezone.utc)

    def current_day(self) -> date | None:
        """The gaming day the live segment holds: the one its first entry opened, else
        the day of its first entry (None: an empty journal)."""
        j = self.t.journal
        if j is None:
            return None
        opening = j.segment
        if opening is not None:
            return date.fromisoformat(opening.body["open"])
        first = next(iter(j.entries(since=0, upto=1)), None)
        return self.policy.gaming_day(datetime.fromisoformat(first.ts)) if first is not None else None

    def roll_if_due(self) -> Path | None:
        """Close the day and roll over when the table's clock is past the next gaming day's
        start and no round is in play or held; returns the archive written, or None.
        Raises :class:`~table.day.segments.ArchiveError` (the day stays in the live segment;
        the next call tries again) or :class:`~table.journal.JournalWriteError`."""
        j = self.t.journal
        if j is None or self.t.round is not None or self.t.held is not None:
            return None
        if self._events is None or self._events.journal is not j:  # counted once, then kept as entries commit
            self._events = segments.EventCount(j).start()
        for name, why in segments.not_compressed():  # off the round's path; said here, on the table's thread
            text = f"the archived gaming day {name} was not compressed and stays as it is: {why}"
            self.t.record("incident", what=text)
            self.t.alarms.sound("incident", text)
            self.t.publish("incident", what=text)
        day, today = self.current_day(), self.policy.gaming_day(self._now())
        if day is None or today <= day:
            return None
        if segments.closing(j) is None:
            with j.batch():
                self.t.record(SEGMENT_KIND, close=day.isoformat(), next=today.isoformat())
                self.t.checkpoint()
        archive = segments.roll(j, self.policy.folder, events=self._events)
        log.info("gaming_day_closed", day=day.isoformat(), archive=str(archive), next=today.isoformat())
        self.t.publish("gaming_day_closed", day=day.isoformat(), next=today.isoformat(), archive=archive.name)
        self.retain(today)
        return archive

    def retain(self, today: date) -> list[Path]:
        """Remove the archives past retention that the floor's notary anchors (see
        :func:`table.day.segments.prune`)."""
        p = self.policy
        oldest = segments.cutoff(today, years=p.retention_years, keep_days=p.keep_days)
        seq = None
        if p.anchored is not None:
            try:
                seq = p.anchored()
            except Exception as exc:  # noqa: BLE001 - a floor that does not answer removes nothing
                log.warning("retention_floor_unanswered", error=str(exc)[:200])
        return segments.prune(p.folder, oldest_kept=oldest, anchored_seq=seq, record=self._record_retention)

    def _record_retention(self, days: list[str], through_seq: int) -> None:
        """Journal, signed, which archived days retention removes, before they go: an auditor's
        ``audit verify --archive`` tells them from days deleted (table/day/segments.py)."""
        with self.t.batch():
            self.t.record(segments.RETENTION_KIND, removed=days, through_seq=through_seq,
                          retention_years=self.policy.retention_years, keep_days=self.policy.keep_days)
            self.t.checkpoint()

