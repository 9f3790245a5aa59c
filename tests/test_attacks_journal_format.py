"""Attacks on format 4's stored bodies (docs/journal.md, "Reading it"): the chain hashes
each entry's JSON, so the bytes a body is stored in must be that JSON's one deflate, or
an attacker could hide bytes in a row an auditor's "ok" never looked at."""

from __future__ import annotations

import sqlite3
import zlib

import pytest

from table.journal import MAX_BODY_BYTES, Journal, JournalError, decode_body, verify
from table.journal_dictionary import DICTIONARY
from table.keys import generate

KEY = generate()


@pytest.fixture
def journal(tmp_path):
    path = tmp_path / "j.sqlite3"
    with Journal(path, key=KEY, table_id="t1") as j:
        for n in range(1, 3):
            rid = f"r{n}"
            with j.batch():
                j.append("round", round_id=rid, step="open", number=n, wagers={"1": {"ante": 1000}})
                j.append("round", round_id=rid, step="settle", number=n, results={"1": {"net": -1000}})
                j.checkpoint(rounds_opened=n)
    return path


def _body(path, seq):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()[0]
    finally:
        db.close()


def _store(path, seq, stored):
    db = sqlite3.connect(path)
    db.execute("UPDATE entries SET body = ? WHERE seq = ?", (stored, seq))
    db.commit()
    db.close()


def _deflate(text: str, level: int, strategy: int = zlib.Z_DEFAULT_STRATEGY) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -14, 4, strategy, zdict=DICTIONARY)
    return c.compress(text.encode()) + c.flush()


@pytest.mark.parametrize("how", ["stored block", "fixed codes", "trailing bytes"])
def test_a_body_in_another_form_of_the_same_json_is_tampered(journal, how):
    """The same JSON in other bytes (a stored block, fixed Huffman codes, bytes after the
    stream's end): the chain's hash is unchanged, so only the one-form check sees it."""
    assert verify(journal, public_keys=[KEY.public]).status == "ok"
    seq = 3  # the first checkpoint: its random head and signature need the dynamic codes level 9 picks
    stored = _body(journal, seq)
    text = decode_body(stored)
    other = {"stored block": _deflate(text, 0), "fixed codes": _deflate(text, 9, zlib.Z_FIXED),
             "trailing bytes": stored + b"hidden"}[how]
    assert other != stored and decode_body(other) == text if how != "trailing bytes" else other != stored
    _store(journal, seq, other)
    r = verify(journal, public_keys=[KEY.public])
    assert r.status == "tampered" and r.first_bad == seq, r
    assert f"entry {seq}" in r.reason


def test_a_body_that_inflates_past_the_limit_is_refused_without_inflating_it(journal):
    bomb = zlib.compressobj(9, zlib.DEFLATED, -14, 4, zlib.Z_DEFAULT_STRATEGY, zdict=DICTIONARY)
    blob = bomb.compress(b"[" + b"0," * (MAX_BODY_BYTES // 2) + b"0]") + bomb.flush()
    assert len(blob) < 100_000
    _store(journal, 2, blob)
    r = verify(journal, public_keys=[KEY.public])
    assert r.status == "tampered" and r.first_bad == 2 and "does not read" in r.reason, r


def test_a_body_stored_as_its_json_text_reads_and_verifies(journal):
    """Format 3's form: every byte of it is what the chain hashes."""
    _store(journal, 2, decode_body(_body(journal, 2)))
    assert verify(journal, public_keys=[KEY.public]).status == "ok"
    with Journal(journal, read_only=True) as j:
        assert [e.body["step"] for e in j.entries("round")] == ["open", "settle"] * 2


@pytest.mark.parametrize("sql", [
    # a trigger the table's own next append would run (it deletes the first entry)
    "CREATE TRIGGER later AFTER INSERT ON entries BEGIN DELETE FROM entries WHERE seq = 1; END",
    # bytes hidden in a table no check reads
    "CREATE TABLE hidden (x)",
    "CREATE INDEX by_kind ON entries (kind)",
    "CREATE VIEW other AS SELECT 1",
    # meta rows the format does not have, or a migration it never made
    "INSERT INTO meta VALUES ('note', 'anything')",
    "INSERT INTO meta VALUES ('migrated_from', '1')",
])
def test_a_schema_object_or_meta_row_the_format_does_not_have_is_tampered(journal, sql):
    """The file holds the format's two tables and their meta rows, nothing else: anything
    added is stored bytes that no chain, MAC or signature covers, and a trigger is code the
    table's next write would run; ``audit verify`` must not say ok over it."""
    assert verify(journal, public_keys=[KEY.public]).status == "ok"
    db = sqlite3.connect(journal)
    db.execute(sql)
    db.commit()
    db.close()
    r = verify(journal, public_keys=[KEY.public], key=KEY)
    assert r.status == "tampered", r
    assert "schema" in r.reason or "meta" in r.reason, r.reason


def test_a_journal_with_entries_and_its_meta_rows_deleted_is_not_taken_for_a_new_one(journal):
    """The meta rows deleted (a format 3 journal's, say, so a format 4 table would not name its
    format and ask for ``audit migrate``): the table's writer took a file with entries and no
    meta for a new journal, wrote format 4's rows and the configured table id over it, and
    went on appending. Only an empty file is new."""
    db = sqlite3.connect(journal)
    db.execute("DELETE FROM meta")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="no format in its meta"):
        Journal(journal, key=KEY, table_id="t1")
    assert verify(journal, public_keys=[KEY.public]).status == "unreadable"
    db = sqlite3.connect(journal)
    try:
        assert db.execute("SELECT count(*) FROM meta").fetchone()[0] == 0  # nothing written over it
    finally:
        db.close()
