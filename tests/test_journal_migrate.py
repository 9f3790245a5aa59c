"""Journal formats: format 4 refuses another format by name, and ``tablectl audit migrate``
converts a journal of each earlier format (1, 2, 3) without signing anything again
(docs/journal.md, "Formats"). Formats 1 and 2's fixtures were written by the last tablectls
that wrote them (``tests/fixtures/journal_format{1,2}/README.md`` says how).

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
from table.journal import (FORMAT, Journal, JournalError, JournalFormatError, encode_body, export, head_path,
                           migrate, verify)
from journal_rows import older_journal
from table.keys import load_private_key, load_public_key

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
    with pytest.raises(JournalError, match="does not hold by its own rules"):
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


# -- formats 1 and 2: written by the real older tablectls (tests/fixtures/journal_format{1,2}/README.md)



def _old_run_figures(run: dict) -> dict:
    """What the old tablectl's own report (``tablectl run --json``) says of its rounds, in the
    terms of ``tablectl report day --json``."""
    handle: dict[str, int] = {}
    house: dict[str, int] = {}
    decisions: dict[str, int] = {}
    hands = 0
    for rnd in run["rounds"]:
        for seat in rnd["seats"]:
            hands += 1
            decisions[seat["decision"]] = decisions.get(seat["decision"], 0) + 1
            for w in seat["wagers"]:
                handle[w["wager"]] = handle.get(w["wager"], 0) + w["stake"]
                house[w["wager"]] = house.get(w["wager"], 0) - w["amount"]
    return {"rounds": len(run["rounds"]), "hands": hands, "decisions": decisions, "handle": handle,
            "house_result": house, "settled_win": -sum(run["net_by_seat"].values())}


def _report_figures(journal: Path, *options: str, flags: tuple[str, ...] = ()) -> dict:
    r = CliRunner().invoke(main, ["report", "day", "--json", "--date", "2026-12-06", "--journal", str(journal),
                                  *options])
    doc = json.loads(r.stdout)
    assert r.exit_code == (1 if flags else 0), r.output
    assert len(doc["flags"]) == len(flags) and all(f in got for f, got in zip(flags, doc["flags"])), doc["flags"]
    return {"record": doc["record"]["status"], "rounds": doc["rounds"], "hands": doc["hands"],
            "decisions": doc["decisions"], "handle": {k: v for k, v in doc["handle"].items() if v},
            "house_result": {k: v for k, v in doc["house_result"].items() if v or k in doc["handle"] and doc["handle"][k]},
            "settled_win": doc["settled_win"]}


def test_a_format_2_journal_migrates_and_verifies_with_its_own_signatures_macs_and_head(tmp_path):
    src = older_journal(tmp_path, 2)
    before = src.read_bytes()
    assert verify(src).status == "unreadable" and "format 2" in verify(src).reason
    dest = tmp_path / "migrated.sqlite3"
    out = CliRunner().invoke(main, ["audit", "migrate", str(src), str(dest)])
    assert out.exit_code == 0, out.output
    assert src.read_bytes() == before  # the source is left as it is
    old = json.loads((src.parent / "verify.json").read_text())  # the old tablectl's own verdict
    key = load_private_key(src.parent / "journal.sqlite3.key", check_mode=False)
    after = verify(dest, public_keys=[load_public_key(src.parent / "journal.sqlite3.key.pub")], key=key)
    assert (after.status, after.entries, after.checkpoints) == \
        (old["status"], old["entries"], old["checkpoints"]) == ("ok", 108, 4)
    # format 2's checkpoints (v1) do not sign their own entry: the last one is the tail, its MAC checked
    assert (after.unsigned_tail, after.tail_checked, after.tail_kinds) == (1, True, {"checkpoint": 1})
    unkeyed = verify(dest, public_keys=[load_public_key(src.parent / "journal.sqlite3.key.pub")])
    assert (unkeyed.status, unkeyed.unsigned_tail) == ("unsigned", 1)  # never ok over bytes nothing checked
    assert head_path(dest).read_bytes() == head_path(src).read_bytes()
    db = sqlite3.connect(f"file:{dest}?mode=ro", uri=True)
    try:
        assert dict(db.execute("SELECT key, value FROM meta"))["migrated_from"] == "2"
    finally:
        db.close()


def test_the_migrated_format_2_journals_report_equals_the_old_tablectls(tmp_path):
    """Format 2 froze no bets at close_bets: the report reads the wagers its open entries name."""
    src = older_journal(tmp_path, 2)
    dest = tmp_path / "migrated.sqlite3"
    migrate(src, dest)
    shutil.copy(src.parent / "journal.sqlite3.key", tmp_path / "migrated.sqlite3.key")  # checks the last v1
    (tmp_path / "migrated.sqlite3.key").chmod(0o600)  # checkpoint entry's MAC: nothing signed it
    run = json.loads((src.parent / "run.json").read_text())
    got = _report_figures(dest, "--pair-plus", run["paytables"]["pair_plus"])
    assert got.pop("record") == "ok"
    assert got == _old_run_figures(run)
    assert got["rounds"] == 3 and got["handle"]["pair_plus"] == 4500


@pytest.mark.parametrize("fmt", [1, 2])
def test_an_edited_older_journal_does_not_migrate(fmt, tmp_path):
    """A settlement edited in the source (a seat's loss made a win) is refused before anything
    is written: a migration signs nothing, so it cannot launder an edit."""
    src = older_journal(tmp_path, fmt)
    db = sqlite3.connect(src)
    seq, body = db.execute("SELECT seq, body FROM entries WHERE kind='round' AND body LIKE '%\"settle\"%' "
                           "LIMIT 1").fetchone()
    db.execute("UPDATE entries SET body = ? WHERE seq = ?", (body.replace('"net":-', '"net":'), seq))
    db.commit()
    db.close()
    edited = src.read_bytes()
    dest = tmp_path / "migrated.sqlite3"
    with pytest.raises(JournalError, match=f"format {fmt} journal that does not hold by its own rules.*entry {seq}"):
        migrate(src, dest)
    assert not dest.exists() and not head_path(dest).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing half-written
    assert src.read_bytes() == edited


@pytest.mark.parametrize("found", ["9", "0", "3.5", "two"])
def test_an_unknown_format_is_refused_by_name_by_verify_and_migrate(found, tmp_path):
    src = older_journal(tmp_path, 2)  # format 2's meta names its format
    db = sqlite3.connect(src)
    db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (found,))
    db.commit()
    db.close()
    out = CliRunner().invoke(main, ["audit", "verify", str(src)])
    assert out.exit_code == 2 and f"journal format '{found}' is unknown" in out.output
    dest = tmp_path / "migrated.sqlite3"
    out = CliRunner().invoke(main, ["audit", "migrate", str(src), str(dest)])
    assert out.exit_code != 0 and f"journal format '{found}' is unknown" in out.output
    assert not dest.exists()


def test_a_format_1_journal_migrates_and_verify_says_it_was_never_signed(tmp_path):
    """Format 1 proved a stored hash chain and an unsigned head file, no more: the migrated file
    keeps that chain (every byte recomputed), and verify calls every entry unsigned, never ok."""
    src = older_journal(tmp_path, 1)
    before = src.read_bytes()
    with pytest.raises(JournalFormatError) as err:
        Journal(src, read_only=True)
    assert err.value.found == "1" and "tablectl audit migrate" in str(err.value)
    dest = tmp_path / "migrated.sqlite3"
    out = CliRunner().invoke(main, ["audit", "migrate", str(src), str(dest)])
    assert out.exit_code == 0, out.output
    assert src.read_bytes() == before
    old = json.loads((src.parent / "verify.json").read_text())  # the old tablectl's own verdict
    head = json.loads(head_path(src).read_text())
    after = verify(dest)
    assert (after.status, after.entries, after.checkpoints, after.unsigned_tail) == ("unsigned", old["entries"], 0,
                                                                                   old["entries"])
    assert after.head == head["hash"]  # format 1's own chain, recomputed over the migrated file
    assert "unsigned (format 1" in after.notes[0] and f"matches entry {head['seq']}" in after.notes[1]
    out = CliRunner().invoke(main, ["audit", "verify", str(dest)])
    assert out.exit_code == 4 and "none ever signed" in out.output and "OK" not in out.output
    db = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        original = [(s, json.loads(b)) for s, b in db.execute("SELECT seq, body FROM entries ORDER BY seq")]
    finally:
        db.close()
    assert [(e["seq"], e["body"]) for e in export(dest)] == original
    with pytest.raises(JournalError, match="format 1 history"):  # a closed record: no table appends to it
        Journal(dest)


def test_the_migrated_format_1_journals_report_equals_the_old_tablectls(tmp_path):
    """Format 1's decisions_done names no hands: the report reads them from its settlement."""
    src = older_journal(tmp_path, 1)
    dest = tmp_path / "migrated.sqlite3"
    migrate(src, dest)
    run = json.loads((src.parent / "run.json").read_text())
    got = _report_figures(dest, "--pair-plus", run["paytables"]["pair_plus"], flags=("never signed",))
    assert got.pop("record") == "unsigned"  # never "ok": nothing of it was ever signed, and flagged
    assert got == _old_run_figures(run)


@pytest.mark.parametrize("edit", ["body", "mac", "head", "anchor", "time"])
def test_a_migrated_format_1_history_edited_afterwards_is_named(edit, tmp_path):
    """Every byte of a migrated format 1 history is checked: a body, a MAC slipped in, the head
    file, a signed anchor claimed for it, an entry's time."""
    src = older_journal(tmp_path, 1)
    dest = tmp_path / "migrated.sqlite3"
    migrate(src, dest)
    anchors = []
    db = sqlite3.connect(dest)
    if edit == "body":
        db.execute("UPDATE entries SET body = ? WHERE seq = 5", (encode_body('{"edited":true}'),))
    elif edit == "mac":
        db.execute("UPDATE entries SET mac = ? WHERE seq = 5", (bytes(16),))
    elif edit == "time":
        db.execute("UPDATE entries SET ts = ts + 1 WHERE seq = 5")
    elif edit == "head":
        head_path(dest).write_text(json.dumps({"seq": 192, "hash": "0" * 64}))
    else:
        anchors = [json.loads((FIXTURE / "journal.sqlite3.head").read_text())]
    db.commit()
    db.close()
    r = verify(dest, anchors=anchors)
    assert r.status == "tampered", r
