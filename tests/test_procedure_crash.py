"""SIGKILL of the real controller process during a fill and during a credit (issue 27, point 6).

``tablectl run`` deals rounds on a simulated table that runs as a process of its own
(``tablectl simulate-table``: the devices keep their state across the controller's
restart, as real ones do), with ``[gaming_day] procedures_required``. The dealer and a
supervisor open the table over the control socket, then ask for a fill (or a credit):
the controller SIGKILLs itself at an exact step of that procedure
(``THREECARD_TEST_KILL_AT``, table/kill_points.py), never at a time the test guesses:

* ``procedure_prepared``: checked, not journaled: after the restart the slip is not
  there, the table says its last slip is the opening, and the people do it again;
* ``procedure_journaled``: journaled, not yet signed by a checkpoint nor answered:
  after the restart it is there once, the table's state counts it, the restart's
  checkpoint signs it; asked again it would be a second slip, so people read the
  table's ``last_slip`` first (as the shift page shows it);
* ``procedure_signed``: journaled and signed, the answer lost: the same.

Either way the journal verifies, the day's report counts the fill (credit) exactly
once, and the slips are numbered 1, 2, 3 without a gap or a repeat.

SIGKILL inside the day's close and its archive: tests/test_day_archive.py
(``test_sigkill_inside_the_days_close_loses_nothing_and_the_restart_finishes_it``,
eight points from the closed segment to the rename).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import datetime, timezone

import pytest

from console_helpers import PEOPLE, make_people, wait_until
from tests.day_helpers import gaming_day_of
from table.day.day_report import Calendar
from table.cli.run import EXIT_INTERRUPTED
from table.interfaces.control_socket import send
from table.journal import Journal, verify
from table.kill_points import KILL_ENV
from test_crash import table_process, tablectl  # noqa: F401 - table_process is a fixture
from tables import table_toml

#: the gaming day (and its 8-hour shifts) starts half a day from now: no test here spans a
#: gaming day's or a shift's start (a run at 05:59 UTC put the open on the day before
#: and the day's report found no opening inventory)
FAR_HOUR = (datetime.now(timezone.utc).hour + 12) % 24

OPEN = {"inventory": {"2500": 40, "500": 100, "100": 200}}  # $1,700
CLOSE = {"inventory": {"2500": 42, "500": 96, "100": 200}}  # $1,730
AMOUNT = {"fill": 50_000, "credit": 20_000}


def signed(procedure: str, slip: dict) -> dict:
    return {"action": "table_procedure", "procedure": procedure, "slip": slip, "dealer": "D-4",
            "dealer_pin": PEOPLE["D-4"][1], "supervisor": "S-17", "pin": PEOPLE["S-17"][1]}


def _status(control) -> dict | None:
    try:
        return send(control, {"action": "status"}, timeout_s=10)
    except (OSError, ValueError, ConnectionError):
        return None  # not listening yet


def _prepared(control) -> dict | None:
    """The status once the controller has recovered from its journal and prepared the
    table (the control socket answers before that): it is then in a round, or waits
    for something (the opening slip, a supervisor)."""
    st = _status(control)
    return st if st and (st.get("round") is not None or st.get("waiting_for") is not None) else None


class _Life:
    """One run of the controller, its log (stderr) in a file (a pipe nobody reads would
    fill and stop the controller)."""

    def __init__(self, cmd: list[str], control, env: dict, log) -> None:
        if control.exists():
            control.unlink()  # a killed controller leaves its socket file behind
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        self.status = wait_until(lambda: self.proc.poll() is not None or _prepared(control), 60,
                                 "the controller to prepare the table")
        assert self.proc.poll() is None, self.tail()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def wait(self, timeout_s: float) -> int:
        return self.proc.wait(timeout_s)

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("procedure", ["fill", "credit"])
@pytest.mark.parametrize("point", ["procedure_prepared", "procedure_journaled", "procedure_signed"])
def test_sigkill_during_a_fill_or_credit_leaves_it_done_once_or_cleanly_redone(table_process, tmp_path,  # noqa: F811
                                                                               procedure, point):
    dev, dealer = table_process
    journal, control = tmp_path / "journal.sqlite3", tmp_path / "control.sock"
    cfg = tmp_path / "table.toml"
    cfg.write_text(table_toml("crash-day", 2, dev / "shuffler", dev / "shoe",
                              f'[console]\ncontrol_socket = "{control}"\n'
                              f"[gaming_day]\nprocedures_required = true\nstart_hour = {FAR_HOUR}\n"))
    cmd = tablectl() + ["run", "--config", str(cfg), "--shuffler-url", str(dev / "shuffler"), "--shoe-url",
                        str(dev / "shoe"), "--dealer-socket", str(dealer), "--journal", str(journal),
                        "--control-socket", str(control), "--seats", "2", "--rounds", "1000",
                        "--people-file", str(make_people(tmp_path / "people.toml"))]
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}

    first = _Life(cmd, control, {**env, KILL_ENV: f"{point}:{procedure}"}, tmp_path / "first.log")
    try:
        opened = send(control, signed("open", OPEN), timeout_s=60)
        assert opened["ok"] and opened["slip"]["slip"] == 1, opened  # the open is not the point killed at
        wait_until(lambda: (_status(control) or {}).get("rounds_played", 0) >= 1, 60, "a round dealt")
        with pytest.raises((OSError, ValueError, ConnectionError)):
            send(control, signed(procedure, {"amount": AMOUNT[procedure]}), timeout_s=60)  # no answer: killed
        assert first.wait(30) == -signal.SIGKILL, first.tail()
    finally:
        first.end()

    again = _Life(cmd, control, env, tmp_path / "again.log")
    try:
        st = again.status
        landed = point != "procedure_prepared"
        # The table is as the journal says: open, its last slip the fill if it was journaled.
        assert {k: v for k, v in st["table_day"].items() if k != "gaming_day"} == {"open": True, "shift": 1, "last_slip": 2 if landed else 1, "required": True}, st
        if not landed:  # nothing of it was journaled: the people do it again, as slip 2
            redone = send(control, signed(procedure, {"amount": AMOUNT[procedure]}), timeout_s=60)
            assert redone["ok"] and redone["slip"]["slip"] == 2, redone
        played = st["rounds_played"]
        wait_until(lambda: (_status(control) or {}).get("rounds_played", 0) > played, 60, "a round after it")
        closed = send(control, signed("close", CLOSE), timeout_s=60)
        assert closed["ok"] and closed["slip"]["slip"] == 3, closed
        again.proc.send_signal(signal.SIGTERM)
        assert again.wait(60) == EXIT_INTERRUPTED, again.tail()  # a clean stop
    finally:
        again.end()

    result = verify(journal)
    assert result.ok, result.reason
    with Journal(journal, read_only=True) as j:
        slips = [e.body for e in j.entries("gaming_day")]
        day = gaming_day_of(j.last("gaming_day").ts, Calendar(start_hour=FAR_HOUR))
    assert [(b["procedure"], b["slip"]) for b in slips] == [("open", 1), (procedure, 2), ("close", 3)]
    assert slips[1]["amount"] == AMOUNT[procedure]
    rep = subprocess.run(tablectl() + ["report", "day", "--journal", str(journal), "--config", str(cfg), "--date", day,
                                       "--json"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode in (0, 1), rep.stderr
    st = json.loads(rep.stdout)["statistical"]
    # Counted once: not lost, not doubled (the closing, opening and the other side at their values).
    assert (st["opening"], st["closing"]) == (170_000, 173_000)
    assert (st["fills"], st["credits"]) == ((AMOUNT["fill"], 0) if procedure == "fill" else (0, AMOUNT["credit"]))
