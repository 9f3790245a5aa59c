"""A simulated table over several gaming days on a wall clock the test sets (no sleeping).

Run as a program (``python -m tests.day_helpers FOLDER DAYS ROUNDS``) it plays
ROUNDS rounds on each of DAYS gaming days from 2026-12-01 into FOLDER
(``journal.sqlite3``, ``archive/``, ``table.key``): the crash tests run it with
``THREECARD_TEST_KILL_AT`` set to kill it inside the day's close."""

from __future__ import annotations

import contextlib
import queue
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from devices import CardShoe, Shuffler
from protocols.cards import BackColour
from protocols.clock import SettableWallClock
from simulators.table import SimulatedTable
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.journal import Journal
from table.keys import generate, load_private_key, save
from table.procedure.day_segments import ArchivePolicy
from table.rules.settlement import Tables

START = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)  # gaming day 2026-12-01 (start hour 6, UTC)
PAYTABLES = ["--ante-bonus", "pa-649a12b-1"]


class WallClock(SettableWallClock):
    """The journal's wall clock (:class:`protocols.clock.SettableWallClock`), from
    :data:`START` unless told."""

    def __init__(self, start: datetime = START) -> None:
        super().__init__(start)


def day_start(n: int) -> datetime:
    """07:00 UTC on the n-th gaming day after the first (an hour past its start)."""
    return datetime(2026, 12, 1 + n, 7, 0, tzinfo=timezone.utc)


def table_key(folder: Path):
    path = folder / "table.key"
    if path.exists():
        return load_private_key(path)
    key = generate()
    save(key, path)
    return key


@contextlib.contextmanager
def day_table(folder: Path, clock: WallClock, *, seats: int = 2, anchored=None, keep_days=None,
              day_required: bool = False, seed: int = 3, sim: SimulatedTable | None = None
              ) -> Iterator[TableController]:
    """A prepared controller on a simulated table (``sim``: the same table again, for a
    restart) whose journal (``folder/journal.sqlite3``) is one segment a gaming day,
    archived to ``folder/archive``."""
    (folder / "archive").mkdir(exist_ok=True)
    key = table_key(folder)
    policy = ArchivePolicy(folder / "archive", 6, "UTC", 7, keep_days, anchored)
    with (contextlib.nullcontext(sim) if sim is not None else
          SimulatedTable((BackColour.RED, BackColour.BLUE), seed=seed)) as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(folder / "journal.sqlite3", key=key, table_id="t1", clock=clock)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        ctl = TableController(shuffler, shoe, events, sim.dealer,
                              DeckCustody([("A", BackColour.RED), ("B", BackColour.BLUE)]), seats=seats,
                              ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                              timing=TableTiming(event_timeout_s=5, settle_s=0.1), archive=policy,
                              day_required=day_required)
        try:
            try:
                ctl.prepare()
            except BaseException:
                ctl.close()  # as table.assembly closes a controller whose start failed
                raise
            yield ctl
            ctl.close()
        finally:
            shuffler.close()
            shoe.close()
            journal.close()


def main(argv: list[str]) -> None:
    folder, days, rounds = Path(argv[0]), int(argv[1]), int(argv[2])
    clock = WallClock()
    with day_table(folder, clock) as ctl:
        for n in range(days):
            clock.set(day_start(n) if n else START)
            for _ in range(rounds):
                ctl.play_round()
            clock.set(day_start(n) + timedelta(hours=1))
        clock.set(day_start(days))
        ctl.play_round()  # the first round of the next day closes the last one


if __name__ == "__main__":
    main(sys.argv[1:])


def gaming_day_of(ts: str, calendar=None) -> str:
    """The gaming day (``YYYY-MM-DD``) a journal entry's time ``ts`` falls in, by the
    product's calendar (default: start hour 6, UTC): not the date of ``ts``, which is
    the day before between midnight and the start hour."""
    from table.day.day_report import Calendar

    return (calendar or Calendar()).gaming_day(datetime.fromisoformat(ts)).isoformat()
