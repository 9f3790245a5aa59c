"""Journal formats: format 4 refuses another format by name, and ``tablectl audit migrate``
converts a format 3 journal without signing anything again (docs/journal.md, "Formats").

The format 3 fixture (``tests/fixtures/journal_format3/``) was written by the tablectl of
commit 09f7f21, the last to write format 3: ``tablectl run --simulate --ante-cents 1000
--rounds 3 --seats 7 --seed 3 --journal journal.sqlite3``, then its ``tablectl report day
--json --date 2026-12-06`` saved as ``report_day.json``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from table.cli import main
from table.journal import (FORMAT, Journal, JournalError, JournalFormatError, export, head_path, migrate,
                           verify)
from table.keys import load_public_key

FIXTURE = Path(__file__).parent / "fixtures" / "journal_format3"


@pytest.fixture
def format3(tmp_path: Path) -> Path:
    for p in FIXTURE.iterdir():
        shutil.copy(p, tmp_path / p.name)
    return tmp_path / "journal.sqlite3"


def _report(journal: Path) -> dict:
    r = CliRunner().invoke(main, ["report", "day", "--json", "--date", "2026-12-06", "--journal", str(journal)])
    assert r.exit_code == 0, r.output
    return _unnamed(json.loads(r.stdout))


def _unnamed(doc: dict) -> dict:
    doc["record"].pop("checked")  # names the file it read
    return doc


def test_a_format_3_journal_is_refused_by_name_and_converted_by_migrate(format3, tmp_path):
    with pytest.raises(JournalFormatError) as err:
        Journal(format3, read_only=True)
    assert err.value.found == "3" and err.value.migratable and str(format3) in str(err.value)
    assert "tablectl audit migrate" in str(err.value)
    r = verify(format3)
    assert r.status == "unreadable" and "format 3" in r.reason
    dest = tmp_path / "migrated.sqlite3"
    out = CliRunner().invoke(main, ["audit", "migrate", str(format3), str(dest)])
    assert out.exit_code == 0, out.output
    pub = load_public_key(FIXTURE / "journal.sqlite3.key.pub")
    after = verify(dest, public_keys=[pub])
    assert after.status == "ok", after  # the source's own signatures and head file, unchanged
    assert head_path(dest).read_bytes() == (FIXTURE / "journal.sqlite3.head").read_bytes()
    with Journal(dest, read_only=True) as j:
        assert j.last_seq == after.entries > 100
    db = sqlite3.connect(f"file:{dest}?mode=ro", uri=True)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta"))
        assert meta["format"] == str(FORMAT) and meta["migrated_from"] == "3"
        assert {type(b) for (b,) in db.execute("SELECT body FROM entries")} == {bytes}
    finally:
        db.close()
    # Every entry reads back as the source held it.
    src = sqlite3.connect(f"file:{format3}?mode=ro", uri=True)
    try:
        original = [(s, k, json.loads(b)) for s, k, b in src.execute("SELECT seq, kind, body FROM entries ORDER BY seq")]
    finally:
        src.close()
    assert [(e["seq"], e["kind"], e["body"]) for e in export(dest)] == original
    assert [(e["seq"], e["kind"], e["body"]) for e in export(format3)] == original


def test_the_migrated_journals_day_report_equals_the_one_the_old_tablectl_gave(format3, tmp_path):
    dest = tmp_path / "migrated.sqlite3"
    migrate(format3, dest)
    shutil.copy(FIXTURE / "journal.sqlite3.key.pub", tmp_path / "migrated.sqlite3.key.pub")  # found by name
    expected = _unnamed(json.loads((FIXTURE / "report_day.json").read_text()))
    assert expected["record"]["status"] == "ok" and expected["rounds"] == 3
    assert _report(dest) == expected


def test_a_migration_signs_nothing_so_an_edited_source_does_not_migrate(format3, tmp_path):
    """Migrate cannot launder an edit: the copy keeps the source's signatures, and a body
    changed in the source no longer matches the checkpoint that covers it."""
    db = sqlite3.connect(format3)
    seq, body = db.execute("SELECT seq, body FROM entries WHERE kind='round' AND body LIKE '%\"settle\"%' "
                           "LIMIT 1").fetchone()
    db.execute("UPDATE entries SET body = ? WHERE seq = ?", (body.replace('"net":-', '"net":'), seq))
    db.commit()
    db.close()
    dest = tmp_path / "migrated.sqlite3"
    with pytest.raises(JournalError, match="is not the source's"):
        migrate(format3, dest)
    assert not dest.exists() and not head_path(dest).exists()


def test_migrate_refuses_its_own_format_an_unknown_one_and_an_existing_destination(format3, tmp_path):
    dest = tmp_path / "migrated.sqlite3"
    migrate(format3, dest)
    with pytest.raises(JournalError, match="already a format 4 journal.*nothing to convert") as current:
        migrate(dest, tmp_path / "again.sqlite3")
    assert "unknown" not in str(current.value)  # its own format is not "unknown"
    assert not (tmp_path / "again.sqlite3").exists()
    with pytest.raises(JournalError, match="exists"):
        migrate(format3, dest)
    db = sqlite3.connect(dest)
    db.execute("UPDATE meta SET value = '9' WHERE key = 'format'")
    db.commit()
    db.close()
    with pytest.raises(JournalFormatError) as err:
        Journal(dest, read_only=True)
    assert err.value.found == "9" and "unknown" in str(err.value) and str(dest) in str(err.value)
    out = CliRunner().invoke(main, ["audit", "verify", str(dest)])
    assert out.exit_code == 2 and "journal format '9' is unknown" in out.output
