"""An attack on the journal's audit: a whole journal written with someone else's key.

Whoever can write the journal's folder (the service account, a stolen backup
restored in its place) can make a new journal with the same table id, its own
entries, its own checkpoints signed with a key of their own, and a head file to
match. ``tablectl audit verify`` without ``--public-key`` checked no signature,
found the chain and the head file consistent, and exited 0 ("the journal holds
and is anchored"). Unsigned, a head file vouches for nothing: without the
table's public key the verdict is now ``unanchored`` (exit 3), and with it the
forgery is ``tampered`` (exit 1).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from table.cli import main as tablectl
from table.journal import Journal
from table.keys import generate, save


def _journal(path, key, rounds_opened: int) -> None:
    j = Journal(path, key=key, table_id="T-07")
    j.append("table_opened", decks={"A": "red", "B": "blue"})
    j.checkpoint(rounds_opened=rounds_opened)
    j.close()


def test_a_journal_forged_with_another_key_is_not_passed_without_the_tables_public_key(tmp_path):
    table_key, forger_key = generate(), generate()
    save(table_key, tmp_path / "table.key")
    path = tmp_path / "journal.sqlite3"
    _journal(path, forger_key, rounds_opened=0)  # the forger's journal, head file and all
    run = CliRunner().invoke(tablectl, ["audit", "verify", str(path), "--json"])
    result = json.loads(run.output)
    assert run.exit_code == 3, run.output  # was 0: "the journal holds and is anchored"
    assert result["status"] == "unanchored"
    assert any("signatures were not checked" in n for n in result["notes"])
    run = CliRunner().invoke(tablectl, ["audit", "verify", str(path), "--public-key", str(tmp_path / "table.key.pub")])
    assert run.exit_code == 1, run.output


def test_the_tables_own_journal_still_verifies_with_its_public_key(tmp_path):
    key = generate()
    save(key, tmp_path / "table.key")
    path = tmp_path / "journal.sqlite3"
    _journal(path, key, rounds_opened=0)
    run = CliRunner().invoke(tablectl, ["audit", "verify", str(path), "--public-key", str(tmp_path / "table.key.pub")])
    assert run.exit_code == 0, run.output
