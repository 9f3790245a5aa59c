"""An attack on the table's start-up: a rolled-back journal behind a forged anchor.

An insider puts an older copy of the journal in place (its own head file with
it) and replaces the broker's retained checkpoint, the anchor that would show
the rollback, with one signed with a fresh key. The controller logged
``anchor_refused ... not table's key`` and resumed as if there were no anchor:
no incident, no alarm. A forged anchor is an attack in progress, not the
absence of one (issue 24, row 3): every refused anchor (a signature that does
not verify, another table's, a malformed one, a broker message that did not
verify) is journaled as an incident and the table holds for a supervisor,
exactly as for a genuine newer anchor.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading

import pytest

from devices import CardShoe, Shuffler
from simulators.table import SimulatedTable
from table.anchors import refused_anchor
from table.console import Command, Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.errors import SupervisorRequired
from table.journal import Journal, _canonical, b64, head_path
from table.keys import generate
from table.recovery import device_cursor
from table.roles import Actor, Role
from table.rules.settlement import Tables

from console_helpers import wait_until
from test_controller import BLUE, KEY, RED, kinds


@contextlib.contextmanager
def _lives(tmp_path):
    """One simulated table whose controller is started again and again on one journal:
    ``life(attached=...)`` is a context giving (controller, console, journal)."""
    path = tmp_path / "journal.sqlite3"
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        @contextlib.contextmanager
        def life(attached=True):
            events: queue.Queue = queue.Queue()
            journal = Journal(path, key=KEY)
            cursor = device_cursor(journal)
            shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False,
                                     resume=cursor.resume)
            shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False,
                                 resume=cursor.resume)
            console = Console()
            console.attached = attached
            ctl = TableController(shuffler, shoe, events, sim.dealer, DeckCustody([("A", RED), ("B", BLUE)]),
                                  seats=2, ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                                  console=console, timing=TableTiming(event_timeout_s=3, settle_s=0.1),
                                  cursor=cursor)
            try:
                yield ctl, console, journal
            finally:
                shuffler.close()
                shoe.close()
                journal.close()

        yield life


def _played(life) -> dict:
    """The journal as the forger leaves it: one round played and signed, and its own head
    file (as an older copy put back would be). Returns its last signed checkpoint."""
    with life() as (ctl, console, journal):
        ctl.prepare()
        ctl.play_round()
        ctl.close()
        path = journal.path
    return json.loads(head_path(path).read_text())


def _forged(genuine: dict) -> dict:
    """The newest checkpoint as the forger re-signs it with a fresh key (so that it would
    not show the rollback)."""
    fresh = generate()
    cp = {k: v for k, v in genuine.items() if k != "sig"}
    cp.update(key_id=fresh.key_id)
    cp["sig"] = b64(fresh.sign(_canonical(cp).encode()))
    return cp


@pytest.mark.parametrize("how", ["file-anchor-signed-with-a-fresh-key", "broker-message-refused",
                                 "another-tables-anchor", "malformed"])
def test_a_refused_anchor_holds_the_table_for_a_supervisor(tmp_path, how):
    with _lives(tmp_path) as life:
        genuine = _played(life)
        anchor = {
            "file-anchor-signed-with-a-fresh-key": _forged(genuine),
            "broker-message-refused": refused_anchor("the broker's retained threecard/f1/t/checkpoint",
                                                     "signed with key 'ab12', not table t's key"),
            "another-tables-anchor": {**genuine, "table_id": "T-99"},
            "malformed": ["not", "a", "checkpoint"],
        }[how]
        with life(attached=False) as (ctl, console, journal):
            ctl.anchors = [anchor]
            with pytest.raises(SupervisorRequired, match="refused anchor"):
                ctl.prepare()  # was: resumed as if there were no anchor
            incidents = [b for b in kinds(journal, "incident") if "anchor was refused" in b["what"]]
            assert len(incidents) == 1 and incidents[0]["anchor_refused"], incidents


def test_after_a_supervisor_acknowledges_a_refused_anchor_the_table_deals(tmp_path):
    with _lives(tmp_path) as life:
        genuine = _played(life)
        with life() as (ctl, console, journal):
            ctl.anchors = [_forged(genuine)]
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
            assert ctl.play_round().number == 2
            acks = [b for b in kinds(journal, "supervisor") if b["action"] == "acknowledge_incident"]
            assert [(b["supervisor"], b["anchors_refused"]) for b in acks] == [("S-1", 1)]


def test_a_corrupt_head_file_is_refused_too(tmp_path):
    with _lives(tmp_path) as life:
        genuine = _played(life)
        head = head_path(tmp_path / "journal.sqlite3")
        head.write_text("{not json")
        with life(attached=False) as (ctl, console, journal):
            with pytest.raises(SupervisorRequired, match="refused anchor"):
                ctl.prepare()
            assert any("the head file" in b["what"] for b in kinds(journal, "incident"))
        head.write_text(json.dumps(genuine))


def test_a_genuine_matching_anchor_is_no_incident(tmp_path):
    with _lives(tmp_path) as life:
        anchor = _played(life)
        with life(attached=False) as (ctl, console, journal):
            ctl.anchors = [anchor]
            ctl.prepare()  # no supervisor attached, and none needed
            assert not kinds(journal, "incident")
