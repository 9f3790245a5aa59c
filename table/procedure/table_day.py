"""The gaming day's procedures by people, as a part of the conductor.

:class:`TableDayProcedure` joins :class:`table.day.gaming_day.TableDay` (the pure
rules: slips, two signers, open/closed) to the table's shared
:class:`~table.procedure.state.TableState`: a procedure is journaled (kind
``gaming_day``) before it changes the state, a checkpoint signs it, the
in-process subscribers hear of it (procedure, slip number, open or closed:
never the inventory nor an amount, what the table holds is for the pit), and a
restart replays the journal's procedures. COMAR 36.05.03.10 (slips signed by
the dealer and a supervisor); COMAR 36.05.03.25 (the drop).

When a procedure is carried out (always on the controller's thread):

* **between rounds**: before a round opens (``TableController.play_round``
  calls :meth:`between_rounds`): procedures a front door sent while the table
  dealt (a simulated table deals round after round, so the console keeps them
  for this moment, :meth:`~table.console.Console.take_procedures`) are carried
  out, and on a closed table whose procedures are ``required`` the table waits
  for the dealer and a supervisor to open it (``waiting_for`` says so) instead
  of dealing;
* **while bets are open and none is placed yet** (a real table opens the next
  round for bets as soon as the last one closes): the bets wait takes
  ``table_procedure`` too (:meth:`take`, ``bets_placed``); the entry is then
  journaled outside the round (no round id) and signed by the round's own
  checkpoint at its end (a checkpoint inside an open round would hide it from
  recovery). Once a bet is placed the procedure is refused until the round ends.

``check_may_deal()`` raises :class:`~table.day.gaming_day.TableClosed` on a closed
table when ``required`` (with no console attached nobody could open it).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping

import structlog

from .. import kill_points
from ..console import Command, Console
from ..day.gaming_day import ENTRY_KIND, ProcedureError, TableClosed, TableDay
from ..journal import JournalWriteError
from ..round import RoundState
from .state import TableState

__all__ = ["TableDayProcedure", "ProcedureError", "TableClosed", "OPEN_WHAT", "replay_day"]

log = structlog.get_logger("table.day.gaming_day")

#: what a closed table whose procedures are required waits for, in words
OPEN_WHAT = ("the dealer and a supervisor to open the table: an opening inventory slip signed by both "
             "(COMAR 36.05.03.10)")


def replay_day(journal: Any, table_id: str, *, calendar: Any = None, today: Any = None) -> TableDay:
    """The table's gaming-day state after ``journal``'s procedures (a restart, an offline
    drop import): a gaming day's segment carries the procedures before it that the state
    needs (table.day.segments.carried_procedures), so an open table stays open across the
    day's close, and the days opened and the drops entered before it (``day_history``).
    ``calendar`` (:class:`table.day.calendar.Calendar`, default 06:00 UTC): the gaming day of
    an opening journaled before openings named their day; ``today``: the current gaming
    day's callable (:class:`~table.day.gaming_day.TableDay`)."""
    from ..day.calendar import Calendar

    opening = journal.segment
    carried_all = opening.body.get("carried", {}) if opening is not None else {}
    carried = list(carried_all.get(ENTRY_KIND, [])) if isinstance(carried_all, dict) else []
    history = carried_all.get("day_history") if isinstance(carried_all, dict) else None
    cal = calendar or Calendar()
    bodies = []
    for e in journal.entries(ENTRY_KIND):
        b = e.body
        if b.get("procedure") == "open" and "gaming_day" not in b:  # journaled before openings named their day
            b = {**b, "gaming_day": cal.gaming_day(datetime.fromisoformat(e.ts)).isoformat()}
        bodies.append(b)
    return TableDay.replay(carried + bodies, table_id, history=history, today=today)


class TableDayProcedure:
    """The table's gaming day on ``state``; ``required``: rounds need an open table.
    ``console``: where front doors' ``table_procedure`` commands come from (None: only
    in-process calls of :meth:`carry_out`)."""

    def __init__(self, state: TableState, required: bool = False, console: Console | None = None,
                 calendar: Any = None) -> None:
        from ..day.calendar import Calendar

        self.t = state
        self.required = required
        self.console = console
        #: the table's gaming day (``[gaming_day]``): openings name their day, drops are checked against it
        self.calendar = calendar or Calendar()
        self.day = TableDay(state.table_id, self.today)

    def today(self) -> str:
        """The table's current gaming day (``YYYY-MM-DD``) by the journal's clock."""
        j = self.t.journal
        now = datetime.fromtimestamp(j.now_us() / 1e6, timezone.utc) if j is not None else datetime.now(timezone.utc)
        return self.calendar.gaming_day(now).isoformat()

    @property
    def is_open(self) -> bool:
        """Whether the table is open (an opening slip and no closing since)."""
        return self.day.is_open

    @property
    def waits_to_open(self) -> bool:
        """No round may be dealt until the table is opened (required and closed)."""
        return self.required and not self.day.is_open

    def status(self) -> dict[str, Any]:
        """``{"open", "shift", "last_slip", "required", "gaming_day"}`` for the table's status
        (``gaming_day``: the table's current gaming day, YYYY-MM-DD: the screens' drop form
        defaults to it, never to the browser's date)."""
        d = self.day
        return {"open": d.is_open, "shift": d.shift, "last_slip": d.slip_no, "required": self.required,
                "gaming_day": self.today()}

    def recover(self) -> None:
        """Replay the journal's procedures (after a restart the table is as people left it)."""
        j = self.t.journal
        if j is not None:
            self.day = replay_day(j, self.t.table_id, calendar=self.calendar, today=self.today)

    def check_may_deal(self) -> None:
        """Raises :class:`TableClosed` when procedures are required and the table is closed."""
        if self.required:
            self.day.check_may_deal()

    def between_rounds(self) -> bool:
        """Before a round opens: carry out the procedures the console kept, then, on a
        closed table whose procedures are required, wait for people to open it (each
        procedure asked meanwhile is carried out and answered; a drop may be entered).
        Returns whether it waited. Raises :class:`TableClosed` when no front door is
        attached to ask, :class:`~table.journal.JournalWriteError`."""
        console = self.console
        if console is not None:
            for cmd in console.take_procedures():
                self.take(cmd)
        waited = False
        while self.waits_to_open:
            if console is None or not console.attached:
                raise TableClosed()
            cmd = console.wait(("table_procedure",), OPEN_WHAT, role="supervisor", action="table_procedure",
                               voids=False)
            waited = True
            self.take(cmd)
        return waited

    def take(self, cmd: Command, *, bets_placed: bool = False) -> None:
        """Carry out a front door's ``table_procedure`` command and answer it: ``{"ok":
        true, "slip": body}`` or the refusal (``code`` ``bad_request`` / ``refused``).
        ``bets_placed``: the round open for bets has wagers (refused: between rounds
        only). A retry (the same ``request_id`` and the same ask) is answered with the
        slip the first ask made and ``"repeated": true``, journaling nothing. Raises
        :class:`~table.journal.JournalWriteError` (answered first)."""
        a = cmd.args
        if bets_placed:
            cmd.answer(ok=False, code="refused", error="bets are placed for this round: a table procedure is "
                                                      "carried out between rounds (before the first bet)")
            return
        try:
            body = self.carry_out(a.get("procedure", ""), a.get("slip") or {}, dealer=a.get("dealer", ""),
                                  supervisor=cmd.person or "", request_id=a.get("request_id"))
        except ProcedureError as exc:
            cmd.answer(ok=False, code=exc.code, error=f"table procedure: {exc}")
            return
        except JournalWriteError as exc:
            cmd.answer(ok=False, code="refused", error=f"table procedure: not journaled, nothing done: {exc}")
            raise
        if body.get("repeated"):
            cmd.answer(ok=True, slip={k: v for k, v in body.items() if k != "repeated"}, repeated=True)
            return
        cmd.answer(ok=True, slip=body)

    def carry_out(self, procedure: str, args: Mapping[str, Any], *, dealer: str, supervisor: str,
                  request_id: str | None = None) -> dict[str, Any]:
        """Check, journal, apply and sign one procedure; returns its journaled body.
        Between rounds, or while the round in play is open for bets (the entry then
        carries no round id, and the round's own checkpoint signs it). ``request_id``:
        the front door's id of this ask; a retry of an ask already carried out returns
        that ask's body with ``"repeated": True`` and journals nothing (no second fill
        slip for one fill, COMAR 36.05.03.10). Raises :class:`ProcedureError` (nothing
        journaled; ``refused`` for an id already used by a different ask), or
        :class:`~table.journal.JournalWriteError` (nothing applied)."""
        before = self.day.repeated(request_id, procedure, args, dealer=dealer, supervisor=supervisor)
        if before is not None:
            log.info("table_procedure_repeated", procedure=procedure, slip=before.get("slip"), request_id=request_id)
            return {**before, "repeated": True}
        r = self.t.round
        if r is not None and (r.machine.round_state is not RoundState.OPEN_FOR_BETS or r.wagers):
            raise ProcedureError("a round is in play: table procedures are carried out between rounds", "refused")
        body = self.day.prepare(procedure, args, dealer=dealer, supervisor=supervisor, request_id=request_id)
        kill_points.reached("procedure_prepared", procedure)
        if self.t.journal is not None:
            self.t.journal.append(ENTRY_KIND, round_id=None, deck_id=None, **body)
        kill_points.reached("procedure_journaled", procedure)
        self.day.apply(body)
        if r is None:
            self.t.checkpoint()
        kill_points.reached("procedure_signed", procedure)
        log.info("table_procedure", procedure=procedure, slip=body["slip"], dealer=dealer, supervisor=supervisor,
                 open=self.day.is_open)  # no inventory, no amount: the journal holds them
        self.t.publish("table_procedure", procedure=procedure, slip=body["slip"], open=self.day.is_open)
        return body
