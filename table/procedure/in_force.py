"""The table journals what is in force: at start, at each gaming day's segment, at every change.

:class:`InForceRecord` writes the ``in_force`` entry (:mod:`table.in_force`
describes its body: the rules profile, each paytable with its filing citation
and digest, the meter reading, the limits, the seats, the gaming-day settings,
the floor, the software and the drivers) when the table starts and when a new
gaming day's segment opens (each segment then reads alone), and carries out a
change made while the table runs as a journaled act of a named person
(:meth:`change`, :meth:`set_meter`), between rounds only: a round is settled
against what was in force when it was dealt (58 Pa. Code 649a.12(e): the meter
when the round was dealt).

May touch: the journal (kinds ``in_force`` and ``progressive_meter``) and the
round player's paytables and profile. Never a device.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from ..in_force import ENTRY_KIND, METER_KIND, describe, same
from ..rules.profiles import RulesProfile
from ..rules.settlement import SettlementError, Tables
from .state import TableState


class InForceChangeRefused(ValueError):
    """A change of what is in force asked for while a round is in play or held, or with
    nobody named to make it."""


class InForceRecord:
    """Journals what is in force on ``state``'s journal. ``current``: gives the paytables
    and profile the round player uses now, ``apply``: makes new ones current;
    ``seats``, ``limits`` (``TableLimits.to_dict()``, None: the defaults) and
    ``settings`` (``gaming_day``, ``floor``, ``drivers``, ...) complete the
    description."""

    def __init__(self, state: TableState, *, current: Callable[[], tuple[Tables, RulesProfile]],
                 apply: Callable[[Tables, RulesProfile], None], limits: Mapping[str, Any] | None,
                 settings: Mapping[str, Any] | None = None) -> None:
        self.t = state
        self.current = current
        self.apply = apply
        self.limits = limits
        self.settings = dict(settings or {})

    def body(self) -> dict[str, Any]:
        """What is in force now, as the ``in_force`` entry's body (no ``changed``/``by``)."""
        tables, profile = self.current()
        return describe(tables, profile.name, seats=self.t.seats, limits=self.limits, settings=self.settings)

    def at_start(self, changed: str = "start") -> None:
        """Journal what is in force when the table starts (``changed="start"``) or a new
        segment opens (``"segment"``); at start, nothing is written when the live segment's
        last ``in_force`` entry says the same (a restart changes nothing). Raises
        :class:`~table.journal.JournalWriteError`."""
        j = self.t.journal
        if j is None:
            return
        now = self.body()
        last = j.last(ENTRY_KIND)
        if changed == "start" and last is not None and same(last.body, now):
            return
        self.t.record(ENTRY_KIND, changed=changed, **now)

    def change(self, *, by: Mapping[str, Any], tables: Tables | None = None, profile: RulesProfile | None = None,
               limits: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A person changes what is in force while the table runs (a new paytable filed,
        new limits): journaled, naming ``by`` (``{"role", "id"}``), before it takes effect,
        between rounds only. Returns the entry's body. Raises
        :class:`InForceChangeRefused` (a round in play or held, nobody named) or
        :class:`~table.journal.JournalWriteError`."""
        self._may_change(by)
        old_tables, old_profile = self.current()
        new_tables, new_profile = tables or old_tables, profile or old_profile
        if limits is not None:
            self.limits = dict(limits)
        self.settings.update(settings or {})
        body = describe(new_tables, new_profile.name, seats=self.t.seats, limits=self.limits,
                        settings=self.settings)
        self.t.record(ENTRY_KIND, changed="change", by=dict(by), **body)  # journal before act
        self.apply(new_tables, new_profile)
        return body

    def set_meter(self, meter_cents: int, *, by: Mapping[str, Any]) -> None:
        """A new progressive meter reading (cents), journaled naming ``by`` before the next
        round is settled against it (58 Pa. Code 649a.12(e)). Raises
        :class:`InForceChangeRefused` (no progressive offered, a round in play, nobody
        named, a reading that is not cents) or :class:`~table.journal.JournalWriteError`."""
        self._may_change(by)
        tables, profile = self.current()
        if tables.progressive is None:
            raise InForceChangeRefused("progressive_meter_cents: no progressive paytable is in force")
        try:
            new = replace(tables, progressive_meter_cents=meter_cents)
        except SettlementError as exc:
            raise InForceChangeRefused(f"progressive_meter_cents: {exc}") from None
        self.t.record(METER_KIND, progressive_meter_cents=meter_cents, paytable=tables.progressive.name, by=dict(by))
        self.apply(new, profile)

    def _may_change(self, by: Mapping[str, Any]) -> None:
        if not isinstance(by, Mapping) or not by.get("id"):
            raise InForceChangeRefused("a change of what is in force names the person who makes it (by.id)")
        if self.t.round is not None or self.t.held is not None:
            raise InForceChangeRefused("what is in force changes between rounds only: a round is in play or held")
