"""The journal: durable, hash-chained; `tablectl audit verify` finds the first bad entry."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from table.cli import main
from table.journal import GENESIS, Journal, JournalError, verify


@pytest.fixture
def journal_file(tmp_path):
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        for i in range(10):
            j.append("round", round_id=f"r{i}", deck_id="A", step="open", number=i)
    return path


def test_entries_chain_and_survive_reopening(journal_file):
    with Journal(journal_file) as j:
        entries = list(j.entries())
        assert [e.seq for e in entries] == list(range(1, 11))
        assert entries[0].prev_hash == GENESIS
        assert all(b.prev_hash == a.hash for a, b in zip(entries, entries[1:]))
        j.append("round", step="closed")
        assert j.last_seq == 11
    assert verify(journal_file).ok


def test_wal_and_full_sync(journal_file):
    db = sqlite3.connect(journal_file)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    j = Journal(journal_file)
    assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    j.close()


def _tamper(path, sql, *args):
    db = sqlite3.connect(path)
    db.execute(sql, args)
    db.commit()
    db.close()


@pytest.mark.parametrize(
    "sql, args, first_bad, words",
    [
        ("UPDATE entries SET body = ? WHERE seq = 4", ('{"number":99,"step":"open"}',), 4, "altered"),
        ("DELETE FROM entries WHERE seq = 6", (), 6, "missing"),
        ("UPDATE entries SET ts = ? WHERE seq = 2", ("2020-01-01T00:00:00+00:00",), 2, "altered"),
        ("DELETE FROM entries WHERE seq >= 8", (), 8, "missing"),
        ("DELETE FROM entries", (), 1, "missing"),
    ],
    ids=["edited body", "deleted middle", "edited time", "deleted tail", "deleted all"],
)
def test_verify_names_the_first_bad_entry(journal_file, sql, args, first_bad, words):
    _tamper(journal_file, sql, *args)
    result = verify(journal_file)
    assert not result.ok and result.first_bad == first_bad and words in result.reason


def test_verify_detects_reordering(journal_file):
    """Entries 5 and 6 trade places (each keeps its position's seq number)."""
    db = sqlite3.connect(journal_file)
    rows = {r[0]: r for r in db.execute("SELECT * FROM entries WHERE seq IN (5, 6)")}
    for seq, other in ((5, 6), (6, 5)):
        db.execute("UPDATE entries SET ts=?, kind=?, round_id=?, deck_id=?, body=?, prev_hash=?, hash=? WHERE seq=?",
                   (*rows[other][1:], seq))
    db.commit()
    db.close()
    result = verify(journal_file)
    assert not result.ok and result.first_bad == 5


def test_audit_verify_cli(journal_file, tmp_path):
    r = CliRunner().invoke(main, ["audit", "verify", str(journal_file)])
    assert r.exit_code == 0 and "OK: 10 entries" in r.output
    _tamper(journal_file, "UPDATE entries SET kind = 'void' WHERE seq = 3")
    r = CliRunner().invoke(main, ["audit", "verify", str(journal_file)])
    assert r.exit_code == 1 and "first bad entry 3" in r.output
    r = CliRunner().invoke(main, ["audit", "verify", str(tmp_path / "none.sqlite3")])
    assert r.exit_code == 2 and "no journal" in r.output


def test_an_entry_appended_behind_the_journals_back_is_caught(journal_file):
    from table.journal import entry_hash

    db = sqlite3.connect(journal_file)
    seq, h = db.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    for n in (1, 2):  # a well-formed chain extension, forged without the journal
        body = '{"step":"closed"}'
        new = entry_hash(h, seq + n, "2026-01-01T00:00:00+00:00", "round", None, None, body)
        db.execute("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?)",
                   (seq + n, "2026-01-01T00:00:00+00:00", "round", None, None, body, h, new))
        h = new
    db.commit()
    db.close()
    assert not verify(journal_file).ok


def test_not_a_journal(tmp_path):
    bad = tmp_path / "x.sqlite3"
    bad.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(JournalError):
        verify(bad)
