"""Attacks on what ``tablectl audit verify`` vouches for (issue 24, rows 1 and 2).

1. An insider with the journal's folder appends a forged ``settle`` (seat 1 paid
   $1,000,000) and a forged supervisor entry after the last signed checkpoint.
   ``verify --public-key --anchors`` said "ok", exit 0, with a note "1 entry not
   signed yet": an auditor without the private key read "ok" for entries
   nothing vouches for. Now the verdict is ``unsigned`` (exit 4), naming how many
   entries and of which kinds; with ``--key`` their MACs are checked (exit 1).
2. After a clean shutdown, the last checkpoint entry's own recovery ``state``
   was edited (rounds 6 -> 600) and a field added: the checkpoint signed the
   chain before it but not its own body, so ``--public-key`` passed it. A v3
   checkpoint signs every byte of its entry: each byte of the last checkpoint
   entry of a small journal is changed in turn and ``verify --public-key``
   finds every one (exit 1).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from table.cli import main as tablectl
from table.journal import Journal, decode_body, head_path, verify
from table.keys import generate, save

KEY = generate()


@pytest.fixture
def keyfiles(tmp_path):
    key_file = tmp_path / "table.key"
    save(KEY, key_file)
    return key_file, tmp_path / "table.key.pub"


def _journal(path) -> None:
    """A small journal as a table leaves it after a clean shutdown: the last entry is a
    signed checkpoint, its head file beside it."""
    with Journal(path, key=KEY, table_id="T-07") as j:
        j.append("decks_registered", decks={"A": "red", "B": "blue"})
        j.checkpoint(rounds_opened=0, rounds_played=0, places={"A": "shoe", "B": "shuffler"})
        j.append("round", round_id="R1", step="open", number=1)
        j.append("settle", round_id="R1", results={"1": {"net": 500}})
        j.append("round", round_id="R1", step="closed", number=1)
        j.checkpoint(rounds_opened=6, rounds_played=6, places={"A": "rack", "B": "shoe"}, cards_read=36)


def _verify(path, *args):
    run = CliRunner().invoke(tablectl, ["audit", "verify", str(path), "--json", *map(str, args)])
    return run.exit_code, json.loads(run.output)


def _sql(path, statement, args=()):
    db = sqlite3.connect(path)
    with db:
        db.execute(statement, args)
    db.close()


def _append_forged(path, kind, body, round_id=None):
    db = sqlite3.connect(path)
    with db:
        seq, ts = db.execute("SELECT max(seq), max(ts) FROM entries").fetchone()
        db.execute("INSERT INTO entries (seq, ts, kind, round_id, deck_id, body, mac) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (seq + 1, ts + 1, kind, round_id, None, json.dumps(body, sort_keys=True, separators=(",", ":")),
                    bytes(16)))
    db.close()


def test_a_clean_journal_is_ok_with_the_public_key_alone(tmp_path, keyfiles):
    path = tmp_path / "j.sqlite3"
    _journal(path)
    code, out = _verify(path, "--public-key", keyfiles[1])
    assert (code, out["status"], out["unsigned_tail"]) == (0, "ok", 0), out


def test_forged_entries_after_the_last_checkpoint_are_not_ok_without_the_key(tmp_path, keyfiles):
    path = tmp_path / "j.sqlite3"
    _journal(path)
    anchors = tmp_path / "anchors.jsonl"
    anchors.write_text(head_path(path).read_text() + "\n")
    _append_forged(path, "settle", {"results": {"1": {"net": 100_000_000}}}, round_id="R2")
    _append_forged(path, "supervisor", {"action": "release", "supervisor": "S-1"})
    code, out = _verify(path, "--public-key", keyfiles[1], "--anchors", anchors)
    assert code == 4 and out["status"] == "unsigned", out  # was 0, "ok"
    assert out["unsigned_tail"] == 2 and out["tail_kinds"] == {"settle": 1, "supervisor": 1}
    run = CliRunner().invoke(tablectl, ["audit", "verify", str(path), "--public-key", str(keyfiles[1])])
    assert run.exit_code == 4 and "UNSIGNED" in run.output and "1 settle, 1 supervisor" in run.output
    # The table key checks their MACs: the forgery is named.
    code, out = _verify(path, "--key", keyfiles[0])
    assert code == 1 and out["first_bad"] == 7, out


def test_entries_the_table_key_checked_after_the_last_checkpoint_are_ok(tmp_path, keyfiles):
    path = tmp_path / "j.sqlite3"
    _journal(path)
    with Journal(path, key=KEY) as j:  # a round in progress, written by the table itself
        j.append("round", round_id="R2", step="open", number=7)
    code, out = _verify(path, "--public-key", keyfiles[1])
    assert code == 4 and out["tail_kinds"] == {"round": 1}
    code, out = _verify(path, "--key", keyfiles[0])
    assert code == 0 and out["status"] == "ok" and out["tail_checked"], out


def test_the_last_checkpoints_own_state_is_signed(tmp_path, keyfiles):
    path = tmp_path / "j.sqlite3"
    _journal(path)
    db = sqlite3.connect(path)
    seq, body = db.execute("SELECT seq, body FROM entries WHERE kind='checkpoint' ORDER BY seq DESC LIMIT 1").fetchone()
    db.close()
    obj = json.loads(decode_body(body))
    obj["state"]["rounds_opened"] = 600
    obj["state"]["places"] = {"A": "shoe", "B": "shoe"}
    obj["extra"] = 1
    _sql(path, "UPDATE entries SET body = ? WHERE seq = ?", (json.dumps(obj, sort_keys=True, separators=(",", ":")),
                                                              seq))
    code, out = _verify(path, "--public-key", keyfiles[1])
    assert code == 1 and out["status"] == "tampered" and out["first_bad"] == seq, out  # was 0


def test_every_byte_of_the_last_checkpoint_entry_is_covered(tmp_path, keyfiles):
    path = tmp_path / "j.sqlite3"
    _journal(path)
    original = path.read_bytes()
    head = head_path(path).read_bytes()
    db = sqlite3.connect(path)
    seq, ts, kind, stored = db.execute("SELECT seq, ts, kind, body FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    db.close()
    assert kind == "checkpoint" and isinstance(stored, bytes)
    body = decode_body(stored)
    pub = [KEY.public]
    target = tmp_path / "f.sqlite3"
    missed = []
    # Every byte of its body, its kind and its time, each changed in turn.
    # As stored (deflated) and as its JSON text (a body a format 3 journal stored: it reads too).
    changes: list[tuple[str, object]] = [("body", stored[:i] + bytes([stored[i] ^ 1]) + stored[i + 1:])
                                         for i in range(len(stored))]
    changes += [("body", body[:i] + chr(ord(body[i]) ^ 1) + body[i + 1:]) for i in range(len(body))]
    changes += [("kind", kind[:i] + chr(ord(kind[i]) ^ 1) + kind[i + 1:]) for i in range(len(kind))]
    changes += [("ts", ts ^ (0xFF << (8 * i))) for i in range(7)]
    changes += [("round_id", "R1"), ("deck_id", "A")]
    for column, value in changes:
        target.write_bytes(original)
        head_path(target).write_bytes(head)
        _sql(target, f"UPDATE entries SET {column} = ? WHERE seq = ?", (value, seq))
        result = verify(target, public_keys=pub)
        if result.status != "tampered":
            missed.append((column, value, result.status))
    assert len(changes) > 500 and not missed, missed[:5]


def test_a_deleted_last_checkpoint_entry_is_found_by_its_head_file(tmp_path, keyfiles):
    path = tmp_path / "j.sqlite3"
    _journal(path)
    _sql(path, "DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)")
    code, out = _verify(path, "--public-key", keyfiles[1])
    assert code == 1 and "its checkpoint entry is missing" in out["reason"], out
