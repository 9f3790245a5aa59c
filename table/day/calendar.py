"""The gaming day's calendar: which gaming day and which shift a moment falls in (the ``[gaming_day]`` section).

Its own module, light to import: the procedure asks it at every opening and drop,
and a table's start-up should not load the reports' exact expectation (numpy) for
it (:mod:`table.day.day_report` counts with it and re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Calendar:
    """Gaming days and shifts: ``start_hour`` (local), ``tz`` (IANA name), ``shift_hours``
    (the ``[gaming_day]`` section of the table config)."""

    start_hour: int = 6
    tz: str = "UTC"
    shift_hours: int = 8

    @classmethod
    def of(cls, config: Any) -> "Calendar":
        """From a :class:`table.config.TableConfig` (``None``: the defaults)."""
        if config is None:
            return cls()
        g = config.gaming_day
        return cls(g.start_hour, g.timezone, g.shift_hours)

    def _local(self, at: datetime) -> datetime:
        return at.astimezone(ZoneInfo(self.tz)) - timedelta(hours=self.start_hour)

    def gaming_day(self, at: datetime) -> date:
        """The gaming day ``at`` falls in."""
        return self._local(at).date()

    def clock_shift(self, at: datetime) -> int:
        """The shift (1-based) ``at`` falls in by the clock."""
        return self._local(at).hour // self.shift_hours + 1

    def bounds(self, day: date) -> tuple[datetime, datetime]:
        """The gaming day's start and end (local, aware)."""
        zone = ZoneInfo(self.tz)
        start = datetime(day.year, day.month, day.day, self.start_hour, tzinfo=zone)
        nxt = day + timedelta(days=1)
        return start, datetime(nxt.year, nxt.month, nxt.day, self.start_hour, tzinfo=zone)
