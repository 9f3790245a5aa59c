"""Attacks on `tablectl audit migrate` (journal formats 1, 2, 3 -> 4), as a dishonest dealer or
insider with file access and without the table's private key would try them. The first three
were holes found by review (each docstring says what the attack did before its fix, and the
test fails without it); the rest held (docs/journal.md, "Formats")."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from table.cli import main
from table.journal import (FORMAT1_GENESIS, Journal, JournalError, format1_hash, head_path, migrate, verify)
from journal_rows import FIXTURES, older_journal
from table.keys import load_private_key, load_public_key




def _pub(fmt: int):
    return load_public_key(FIXTURES / f"journal_format{fmt}" / "journal.sqlite3.key.pub")


def _rechain_format1(path: Path) -> None:
    """Recompute format 1's stored chain and its unsigned head file (all format 1 ever had)."""
    db = sqlite3.connect(path)
    prev, last = FORMAT1_GENESIS, 0
    for seq, ts, kind, rid, did, body in db.execute(
            "SELECT seq, ts, kind, round_id, deck_id, body FROM entries ORDER BY seq").fetchall():
        h = format1_hash(prev, seq, ts, kind, rid, did, body)
        db.execute("UPDATE entries SET prev_hash=?, hash=? WHERE seq=?", (prev, h, seq))
        prev, last = h, seq
    db.commit()
    db.close()
    head_path(path).write_text(json.dumps({"seq": last, "hash": prev}))


def _win_for_seat(body: str) -> str:
    return body.replace('"net":-', '"net":')


# -- holes found by review, each fails without its fix -----------------------------------------

def test_a_format2_journals_last_v1_checkpoint_entry_edited_is_not_ok_without_the_key(tmp_path):
    """Format 2's checkpoints are v1: they sign the chain up to the entry before them, not their
    own entry. The last checkpoint entry (its time, its recovery state: deck places, counts) is
    covered by nothing signed, yet `audit verify --public-key` on the migrated file says ok, exit 0.
    An auditor's ok must mean every byte was checked."""
    src = older_journal(tmp_path, 2)
    db = sqlite3.connect(src)
    seq, ts, body = db.execute("SELECT seq, ts, body FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    b = json.loads(body)
    assert "checkpoint" in b and b["checkpoint"]["v"] == 1
    b["state"]["custody"]["decks"][1]["place"] = "in_shoe"  # deck B claimed in the shoe
    b["state"]["rounds_played"] = 99
    db.execute("UPDATE entries SET ts=?, body=? WHERE seq=?",
               (ts + 3 * 86400 * 10**6, json.dumps(b, sort_keys=True, separators=(",", ":")), seq))
    db.commit()
    db.close()
    dest = tmp_path / "m.sqlite3"
    migrate(src, dest)  # the source "holds by its own rules"
    r = verify(dest, public_keys=[_pub(2)])
    out = CliRunner().invoke(main, ["audit", "verify", str(dest), "--public-key",
                                    str(FIXTURES / "journal_format2" / "journal.sqlite3.key.pub")])
    assert r.status != "ok" and out.exit_code != 0, (r, out.output)


def test_a_forged_format1_history_is_reported_as_never_signed_with_exit_1(tmp_path):
    """A format 1 history is unsigned: an insider rewrites a settlement, recomputes the stored
    chain and the head file, migrates. verify says unsigned (held), but `report day` counts the
    forged figures with exit 0 and an empty `flags` list (docs/journal.md says report *flags*
    the record unsigned); only record.status/notes say so, the same status a signed format 4
    journal with a round in progress gets."""
    src = older_journal(tmp_path, 1)
    db = sqlite3.connect(src)
    seq, body = db.execute("SELECT seq, body FROM entries WHERE kind='round' AND body LIKE '%\"settle\"%' "
                           "LIMIT 1").fetchone()
    db.execute("UPDATE entries SET body=? WHERE seq=?", (_win_for_seat(body), seq))
    db.commit()
    db.close()
    _rechain_format1(src)
    dest = tmp_path / "m.sqlite3"
    migrate(src, dest)
    assert verify(dest).status == "unsigned"
    r = CliRunner().invoke(main, ["report", "day", "--json", "--journal", str(dest), "--pair-plus",
                                  "example-pp-649a12d"])
    doc = json.loads(r.stdout)
    assert doc["record"]["status"] == "unsigned"
    assert r.exit_code != 0 and doc["flags"], (r.exit_code, doc["flags"])


def test_a_crash_mid_migrate_leaves_no_head_file_alone_and_a_retry_succeeds(tmp_path):
    """SIGKILL after the head file is written and before the copy is put in place: the head file
    is left beside a DEST that does not exist, with the hidden copy; a retry is refused (DEST
    "exists") until someone deletes a file by hand. 'Nothing half-written is left behind.'
    A SIGKILL cannot clean up; what must hold: no head file without its journal, and a retry
    succeeds and removes the hidden leftovers."""
    src = older_journal(tmp_path, 3)
    dest = tmp_path / "out" / "m.sqlite3"
    dest.parent.mkdir()
    code = ("import os, signal, sys\n"
            "import table.journal as j\n"
            "real = os.replace\n"
            "def crash(a, b):\n"
            "    if str(a).endswith('.migrating'):\n"
            "        os.kill(os.getpid(), signal.SIGKILL)\n"
            "    return real(a, b)\n"
            "j.os.replace = crash\n"
            f"j.migrate({str(src)!r}, {str(dest)!r})\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=str(Path(__import__("table").__file__).parents[1]))
    assert p.returncode == -9
    left = sorted(x.name for x in dest.parent.iterdir())
    assert not head_path(dest).exists(), left  # no head file beside a journal that is not there
    migrate(src, dest)  # a retry is not refused, and cleans what the crash left
    assert sorted(x.name for x in dest.parent.iterdir()) == ["m.sqlite3", "m.sqlite3.head"]


# -- attacks that held ----------------------------------------------------------------------------

def test_format2_relabelled_as_format1_is_never_ok(tmp_path):
    """A signed format 2 journal, a settlement edited, rewritten in format 1's layout (no meta,
    stored hash chain, unsigned head) to escape its signatures: migrates, but is never ok."""
    src = older_journal(tmp_path, 2)
    forged = tmp_path / "f1.sqlite3"
    s = sqlite3.connect(src)
    d = sqlite3.connect(forged)
    d.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, kind TEXT NOT NULL, round_id TEXT,"
              " deck_id TEXT, body TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)")
    from table.journal import format1_ts
    n = 0
    for seq, ts, kind, rid, did, body in s.execute("SELECT seq, ts, kind, round_id, deck_id, body FROM entries "
                                                  "WHERE kind != 'checkpoint' ORDER BY seq"):
        n += 1
        if kind == "round" and '"settle"' in body:
            body = _win_for_seat(body)
        d.execute("INSERT INTO entries VALUES (?,?,?,?,?,?,'','')", (n, format1_ts(ts), kind, rid, did, body))
    d.commit()
    d.close()
    s.close()
    _rechain_format1(forged)
    dest = tmp_path / "m.sqlite3"
    migrate(forged, dest)
    r = verify(dest, public_keys=[_pub(2)])
    assert r.status == "unsigned" and r.checkpoints == 0
    out = CliRunner().invoke(main, ["audit", "verify", str(dest), "--json"])
    assert out.exit_code == 4 and json.loads(out.stdout)["status"] == "unsigned"
    # the table's real signed head file given as an anchor: tampered
    anchor = json.loads((FIXTURES / "journal_format2" / "journal.sqlite3.head").read_text())
    assert verify(dest, public_keys=[_pub(2)], anchors=[anchor]).status == "tampered"


@pytest.mark.parametrize("edit", ["drop_migrated_from", "migrated_from_2", "trigger", "extra_meta"])
def test_a_migrated_format1_file_relabelled_is_never_ok(edit, tmp_path):
    src = older_journal(tmp_path, 1)
    dest = tmp_path / "m.sqlite3"
    migrate(src, dest)
    db = sqlite3.connect(dest)
    if edit == "drop_migrated_from":
        db.execute("DELETE FROM meta WHERE key='migrated_from'")
    elif edit == "migrated_from_2":
        db.execute("UPDATE meta SET value='2' WHERE key='migrated_from'")
    elif edit == "trigger":
        db.execute("CREATE TRIGGER t AFTER INSERT ON entries BEGIN SELECT 1; END")
    else:
        db.execute("INSERT INTO meta VALUES ('signed', 'yes')")
    db.commit()
    db.close()
    r = verify(dest, public_keys=[_pub(2)])
    assert r.status != "ok", r
    if edit in ("drop_migrated_from", "migrated_from_2"):
        os.remove(head_path(dest))  # the format 1 head file would be refused as a checkpoint
        assert verify(dest, public_keys=[_pub(2)]).status != "ok"
        # the table (its startup's MAC check of every entry after the last checkpoint) would not sign over it
        shutil.copy(FIXTURES / "journal_format2" / "journal.sqlite3.key", tmp_path / "k")
        os.chmod(tmp_path / "k", 0o600)
        with Journal(dest, key=load_private_key(tmp_path / "k")) as j:
            assert j.check_tail() == 1


@pytest.mark.parametrize("edit", ["ts_zone", "ts_no_micro", "dup_seq_schema", "seq_gap"])
def test_a_format1_source_that_does_not_hold_is_refused(edit, tmp_path):
    src = older_journal(tmp_path, 1)
    db = sqlite3.connect(src)
    if edit == "ts_zone":  # the same instant, another text
        db.execute("UPDATE entries SET ts = replace(substr(ts,1,26),'T12','T13') || '+01:00' WHERE seq=5")
    elif edit == "ts_no_micro":
        db.execute("UPDATE entries SET ts = substr(ts,1,19) || '+00:00' WHERE seq=5")
    elif edit == "dup_seq_schema":
        db.execute("ALTER TABLE entries RENAME TO old")
        db.execute("CREATE TABLE entries (seq INTEGER, ts TEXT, kind TEXT, round_id TEXT, deck_id TEXT, body TEXT,"
                   " prev_hash TEXT, hash TEXT)")
        db.execute("INSERT INTO entries SELECT * FROM old ORDER BY seq")
        db.execute("INSERT INTO entries SELECT * FROM old WHERE seq=5")
        db.execute("DROP TABLE old")
    else:
        db.execute("DELETE FROM entries WHERE seq=5")
    db.commit()
    db.close()
    if edit != "dup_seq_schema":
        _rechain_format1(src)
    dest = tmp_path / "m.sqlite3"
    with pytest.raises(JournalError):
        migrate(src, dest)
    assert not dest.exists() and not head_path(dest).exists()


def test_format3_forged_checkpoint_signature_migrates_but_never_verifies(tmp_path):
    """Edit a settlement, recompute the chain, rewrite every checkpoint's head/digests (sig kept):
    migrate accepts it (it checks no signature), verify with the public key says tampered."""
    src = older_journal(tmp_path, 3)
    from table.journal import GENESIS, b64, chain_next
    db = sqlite3.connect(src)
    rows = db.execute("SELECT seq, ts, kind, round_id, deck_id, body FROM entries ORDER BY seq").fetchall()
    h, stretch = GENESIS, []
    for seq, ts, kind, rid, did, body in rows:
        if kind == "round" and '"settle"' in body:
            body = _win_for_seat(body)
        if kind == "checkpoint":
            b = json.loads(body)
            b["checkpoint"]["head"] = h.hex()
            b["checkpoint"]["digests"] = b64(b"".join(x[:4] for x in stretch))
            body = json.dumps(b, sort_keys=True, separators=(",", ":"))
            stretch = []
        db.execute("UPDATE entries SET body=? WHERE seq=?", (body, seq))
        h = chain_next(h, seq, ts, kind, rid, did, body)
        stretch.append(h)
    db.commit()
    db.close()
    os.remove(head_path(src))
    dest = tmp_path / "m.sqlite3"
    try:
        migrate(src, dest)
    except JournalError:
        return  # refused: held
    assert verify(dest, public_keys=[_pub(3)]).status == "tampered"


def test_dangling_symlink_dest_is_not_followed(tmp_path):
    src = older_journal(tmp_path, 3)
    target = tmp_path / "elsewhere.sqlite3"
    dest = tmp_path / "m.sqlite3"
    dest.symlink_to(target)
    try:
        migrate(src, dest)
    except JournalError:
        return
    assert not target.exists() and not dest.is_symlink()


def test_dest_equal_to_src_is_refused(tmp_path):
    src = older_journal(tmp_path, 2)
    before = src.read_bytes()
    with pytest.raises(JournalError, match="exists"):
        migrate(src, src)
    assert src.read_bytes() == before
