"""The journal's size on disk (issue 18, "durable and cheap").

Measured on the files a run leaves (database, WAL, head file), as
``bench/rounds.py`` does; a behaviour test, not a timing test. The issue's
target is 4 KB a round at 7 seats (1,000 rounds in 4 MB). Format 3 does not
reach it without dropping something the integrity design requires (see
``docs/journal.md``, "What a round costs"): the bound enforced here is what
format 3 gives, so the journal cannot grow back unnoticed, and the 4 KB target
stays written down as a strict expected failure that turns red the day it is met.
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

ROUNDS = 40
SEATS = 7
#: bytes of journal files a round at 7 seats, format 3, over 40 rounds: measured ~12.1 KB
#: (~11.6 KB a round over 100: a journal's first pages, the schema and the table's
#: opening, weigh more on 40); margin for the random parts (hand categories, results,
#: page fill). Since issues 23 and 24 a round also journals its bets as frozen in the
#: close_bets entry and each checkpoint signs its state's SHA-256 (checkpoint v3): measured
#: 13.3 KB over 40 rounds in a fresh clone; the compact format (issue 26, point 4) is what
#: brings it down, not this bound. Since the shuffle commitment (protocols/SPEC.md §4.2.1) each
#: deck's count journals its commitment and each round the opening (salt and the 52 cards in
#: order) before settlement: measured 14.1 KB over 40 rounds
FORMAT_3_BOUND = 14_600


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("size")
    journal = tmp / "journal.sqlite3"
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--ante-cents", "1000", "--rounds", str(ROUNDS), "--seats", str(SEATS),
                                        "--seed", "3", "--json", "--journal", str(journal),
                                        "--log-file", str(tmp / "run.log")],
                          capture_output=True, text=True, timeout=300)
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


def test_a_round_at_7_seats_stays_within_format_3s_bound(run):
    journal, _ = run
    per_round = sum(_files(journal).values()) / ROUNDS
    assert per_round <= FORMAT_3_BOUND, f"{per_round:.0f} bytes a round at {SEATS} seats"


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
