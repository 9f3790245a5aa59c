"""The gaming day's procedures by people, as a part of the conductor (issue 27, point 1).

:class:`TableDayProcedure` joins :class:`table.gaming_day.TableDay` (the pure
rules: slips, two signers, open/closed) to the table's shared
:class:`~table.procedure.state.TableState`: a procedure is journaled (kind
``gaming_day``) before it changes the state, a checkpoint signs it, the public
stream hears of it (without the inventory: what the table holds is for the
pit), and a restart replays the journal's procedures. COMAR 36.05.03.10 (slips
signed by the dealer and a supervisor); COMAR 36.05.03.25 (the drop).

The conductor calls, between rounds only:

* ``recover()`` after the journal is recovered (``TableController.recover``);
* ``check_may_deal()`` before a round is opened (``TableController.play_round``,
  before ``self.rounds.open``): raises :class:`~table.gaming_day.TableClosed`
  on a closed table when ``required`` (a table whose config asks for the
  procedures; a simulated table deals without them);
* ``carry_out(procedure, args, dealer=..., supervisor=...)`` for a front door's
  command, once its two people are proven (raises
  :class:`~table.gaming_day.ProcedureError`).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..gaming_day import ENTRY_KIND, ProcedureError, TableClosed, TableDay
from .state import TableState

__all__ = ["TableDayProcedure", "ProcedureError", "TableClosed"]


class TableDayProcedure:
    """The table's gaming day on ``state``; ``required``: rounds need an open table."""

    def __init__(self, state: TableState, required: bool = False) -> None:
        self.t = state
        self.required = required
        self.day = TableDay(state.table_id)

    @property
    def is_open(self) -> bool:
        """Whether the table is open (an opening slip and no closing since)."""
        return self.day.is_open

    def recover(self) -> None:
        """Replay the journal's procedures (after a restart the table is as people left it)."""
        j = self.t.journal
        if j is not None:
            # A gaming day's segment carries the procedures before it that the state needs
            # (table.segments.carried_procedures): an open table stays open across the day's close.
            opening = j.segment
            carried = list(opening.body.get("carried", {}).get(ENTRY_KIND, [])) if opening is not None else []
            self.day = TableDay.replay(carried + [e.body for e in j.entries(ENTRY_KIND)], self.t.table_id)

    def check_may_deal(self) -> None:
        """Raises :class:`TableClosed` when procedures are required and the table is closed."""
        if self.required:
            self.day.check_may_deal()

    def carry_out(self, procedure: str, args: Mapping[str, Any], *, dealer: str, supervisor: str) -> dict[str, Any]:
        """Check, journal, apply and sign one procedure; returns its journaled body.
        Raises :class:`ProcedureError` (nothing journaled), or
        :class:`~table.journal.JournalWriteError` (nothing applied)."""
        if self.t.round is not None:
            raise ProcedureError("a round is in play: table procedures are carried out between rounds", "refused")
        body = self.day.prepare(procedure, args, dealer=dealer, supervisor=supervisor)
        self.t.record(ENTRY_KIND, **body)
        self.day.apply(body)
        self.t.checkpoint()
        self.t.publish("table_procedure", procedure=procedure, slip=body["slip"], open=self.day.is_open)
        return body
