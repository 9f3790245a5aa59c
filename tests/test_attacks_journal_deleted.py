"""An attack on the table's start-up: the journal deleted, so its anchors are never looked at.

An insider with the service's account deletes the journal (or moves it away) and
restarts the table. The controller opened a new, empty journal and, because it
was empty, skipped the check of the anchors (the head file left beside it, the
floor's signed checkpoints): no incident, no supervisor, round numbers from 1
again, and every settled round of the old journal gone from the table's record.
A journal behind a signed checkpoint seen elsewhere is cut short, however short:
an empty one too. It now waits for a supervisor's acknowledgement, journaled,
and round numbers go on past the anchor's.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading

import pytest

from table.console import Command
from table.errors import SupervisorRequired
from table.journal import head_path
from table.roles import Actor, Role

from console_helpers import wait_until
from test_controller import kinds, table


def _played_then_deleted(tmp_path, *, keep_head: bool) -> dict:
    """Two rounds played and signed; then the journal deleted (the head file kept or not).
    Returns the last signed checkpoint, as the floor saved it."""
    with table(tmp_path) as (ctl, sim, console, journal):
        ctl.prepare()
        ctl.play_round()
        ctl.play_round()
        ctl.close()
    path = tmp_path / "journal.sqlite3"
    anchor = json.loads(head_path(path).read_text())
    assert anchor["rounds_opened"] == 2
    for extra in ("", "-wal", "-shm") + (() if keep_head else (".head",)):
        if os.path.exists(f"{path}{extra}"):
            os.unlink(f"{path}{extra}")
    return anchor


@pytest.mark.parametrize("keep_head", [True, False], ids=["head-file-left", "anchors-off-the-table"])
def test_a_deleted_journal_is_an_incident_a_supervisor_acknowledges(tmp_path, keep_head):
    anchor = _played_then_deleted(tmp_path, keep_head=keep_head)
    with contextlib.ExitStack() as stack:
        if keep_head:  # the old head file names the entries the new journal lacks
            stack.enter_context(pytest.raises(AssertionError, match="missing"))
        with table(tmp_path, attached=False) as (ctl, sim, console, journal):
            ctl.anchors = [] if keep_head else [anchor]
            assert journal.last_seq == 0  # a new, empty journal at the same path
            with pytest.raises(SupervisorRequired, match="behind checkpoint"):
                ctl.prepare()  # was: the table opened and dealt round 1 again, nobody told
    for extra in ("", "-wal", "-shm", ".head"):
        if os.path.exists(f"{tmp_path / 'journal.sqlite3'}{extra}"):
            os.unlink(f"{tmp_path / 'journal.sqlite3'}{extra}")
    if keep_head:
        head_path(tmp_path / "journal.sqlite3").write_text(json.dumps(anchor))
    with table(tmp_path) as (ctl, sim, console, journal):
        ctl.anchors = [] if keep_head else [anchor]
        acked = []

        def ack(exp):
            if exp is not None and "acknowledge_incident" in exp.accepts and not acked:
                acked.append(exp)
                threading.Thread(target=console.submit, args=(Command(
                    "acknowledge_incident", {"supervisor": "S-1"}, lambda r: acked.append(r),
                    actor=Actor("S-1", Role.SUPERVISOR, source="http")),)).start()

        console.on_expectation(ack)
        ctl.prepare()
        wait_until(lambda: len(acked) == 2, 10, "the acknowledgement's answer")
        assert acked[1]["ok"] is True
        result = ctl.play_round()
        assert result.number == 3  # no round number dealt twice
        incidents = [b["what"] for b in kinds(journal, "incident")]
        assert any("behind a signed checkpoint" in w for w in incidents), incidents
        assert [b["supervisor"] for b in kinds(journal, "supervisor")
                if b["action"] == "acknowledge_incident"] == ["S-1"]
