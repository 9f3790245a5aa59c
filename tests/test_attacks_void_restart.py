"""An attack on the two-person rule across a restart: kill the controller of a held round.

A round held once every seat has decided (a card beyond the deal, found as the
decisions came in) needs two supervisors to void: its outcome is settled by the
cards. That the decisions were final was kept in memory and in the next signed
checkpoint only; the journal's ``held`` entry did not say it. Killed before that
checkpoint (SIGKILL, a power cut: whoever has the service's rights can do it),
the restarted table rebuilt the round from its entries, found no
``decisions_done`` and let one supervisor void it alone. The ``held`` entry now
records ``decisions_final``, and the restart keeps it.
"""

from __future__ import annotations

import queue
import threading

from devices import CardShoe, Shuffler
from simulators.table import SimulatedTable
from table.console import Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.journal import Journal, verify
from table.recovery import device_cursor
from table.rules.settlement import Tables

from console_helpers import wait_until
from test_controller import BLUE, KEY, RED, kinds
from test_two_person_void import held_after_decisions, submit


def test_a_round_held_after_the_decisions_still_needs_two_supervisors_after_a_kill(tmp_path):
    path = tmp_path / "journal.sqlite3"
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        for life in ("held", "restarted"):
            events: queue.Queue = queue.Queue()
            journal = Journal(path, key=KEY)
            cursor = device_cursor(journal)
            shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False,
                                     resume=cursor.resume)
            shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False,
                                 resume=cursor.resume)
            console = Console()
            console.attached = True
            ctl = TableController(shuffler, shoe, events, sim.dealer, DeckCustody([("A", RED), ("B", BLUE)]),
                                  seats=2, ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                                  console=console, timing=TableTiming(event_timeout_s=3, settle_s=0.1),
                                  cursor=cursor)
            try:
                if life == "held":
                    held_after_decisions(ctl, sim)  # held with its decisions final; then killed:
                    continue                        # no close(), so no checkpoint signs the hold
                ctl.prepare()
                assert ctl.held is not None and ctl.held.decisions_final is True  # was False
                resolver = threading.Thread(target=ctl.resolve_held)
                resolver.start()
                try:
                    wait_until(lambda: console.expectation is not None and "void" in console.expectation.accepts,
                               10, "the held round to wait for a void")
                    submit(console, "void", "S-1", reason="misdeal")  # one supervisor alone
                    wait_until(lambda: console.expectation is not None
                               and "confirm_void" in console.expectation.accepts, 10,
                               "the table to wait for a second supervisor")
                    assert ctl.held is not None
                    assert not [b for b in kinds(journal, "round") if b["step"] == "voided"]
                finally:
                    if resolver.is_alive():
                        wait_until(lambda: console.expectation is not None, 10, "the table to wait")
                        submit(console, "confirm_void", "S-2")
                        resolver.join(10)
                voided = [b for b in kinds(journal, "round") if b["step"] == "voided"]
                assert voided and voided[-1]["supervisor"] == "S-1" and voided[-1]["second_supervisor"] == "S-2"
            finally:
                shuffler.close()
                shoe.close()
                journal.close()
    assert verify(path).ok
