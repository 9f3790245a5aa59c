"""The journal's size on disk (issue 18, "durable and cheap"; the compact journal, format 4).

Measured on the files a run leaves (database, WAL, head file), as
``bench/journal_size.py`` does, at a full 7-seat table with a fixed bet on
every seat; a behaviour test, not a timing test. Format 4 stores every body
deflated with the format's preset dictionary (``docs/journal.md``, "What a round
costs on disk"): the bound is the compact journal's limit, 8 KB a round.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from console_helpers import tablectl
from table.journal import FORMAT, PAGE_SIZE, verify
from table.keys import load_public_key

#: the module's run (100 rounds at 7 seats) takes ~15 s, past the 120 s guard on a loaded
#: 2-core machine: a long test's guard, and started first
pytestmark = pytest.mark.long

ROUNDS = 100
SEATS = 7
#: bytes of journal files a round at 7 seats with a 10.00 ante on every seat, over 100 rounds
#: as ``bench/journal_size.py`` counts them: the compact journal's limit. Format 3 measured
#: 12.7 KB; format 4 7.3 KB (over 40 rounds 8.6 KB: a journal's first pages, the schema and
#: the table's opening weigh more on a short run)
BOUND = 8 * 1024


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("size")
    journal = tmp / "journal.sqlite3"
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--ante-cents", "1000", "--rounds", str(ROUNDS), "--seats", str(SEATS),
                                        "--seed", "3", "--json", "--journal", str(journal),
                                        "--log-file", str(tmp / "run.log")],
                          capture_output=True, text=True)  # the tests' hang guard bounds it
    assert proc.returncode == 0, proc.stderr[-2000:]
    return journal, json.loads(proc.stdout)


def _files(journal: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in journal.parent.glob(journal.name + "*")
            if not p.name.endswith((".key", ".key.pub"))}


def test_the_wal_is_emptied_at_close_and_the_journal_still_verifies(run):
    journal, out = run
    assert len(out["rounds"]) == ROUNDS
    files = _files(journal)
    assert files.get(journal.name + "-wal", 0) == 0, files  # wal_checkpoint(TRUNCATE) at close
    res = verify(journal, public_keys=[load_public_key(journal.with_name(journal.name + ".key.pub"))])
    assert res.status == "ok", res
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        assert dict(db.execute("SELECT key, value FROM meta"))["format"] == str(FORMAT)
        assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    finally:
        db.close()


def test_a_round_at_7_seats_stays_within_8_kb(run):
    journal, _ = run
    per_round = sum(_files(journal).values()) / ROUNDS
    assert per_round <= BOUND, f"{per_round:.0f} bytes a round at {SEATS} seats"


def test_entries_per_round_do_not_grow_with_the_round_number(run):
    journal, _ = run
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT round_id, COUNT(*), SUM(LENGTH(body)) FROM entries WHERE round_id IS NOT NULL "
                          "GROUP BY round_id ORDER BY MIN(seq)").fetchall()
        checkpoints = [len(b) for (b,) in db.execute("SELECT body FROM entries WHERE kind='checkpoint' ORDER BY seq")]
    finally:
        db.close()
    assert len(rows) == ROUNDS
    counts = {n for _, n, _ in rows}
    assert len(counts) == 1, counts  # the same entries every round: deltas, not snapshots
    early, late = rows[1][2], rows[-1][2]
    assert late <= early * 1.1 + 64, (early, late)
    # A checkpoint carries the state recovery needs, never the history before it.
    assert max(checkpoints[2:]) <= min(checkpoints[2:]) * 1.1 + 64, checkpoints
