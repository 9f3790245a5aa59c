"""A report signed by the table (issue 27, point 4): `tablectl report ... --signed OUT` writes the
report signed with the table key; `tablectl audit report OUT --public-key K` accepts it only when
every byte is covered by the signature. The attack this stops: someone between the table and the
regulator (or a file share holding seven years of reports) changing a figure, a date, the table's
name or the key id of a filed report, or swapping in a report signed by another key."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone

import pytest

from table.keys import generate, load_private_key, public_pem, save
from table.day.signed_report import check_signed_report, sign_report
from tests.journal_rows import bodies_as_text
from tests.test_e2e_run import tablectl

PAYTABLES = ["--ante-bonus", "pa-649a12c-1", "--pair-plus", "example-pp-649a12d"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A simulated run's journal and the table key it was signed with (JOURNAL.key)."""
    folder = tmp_path_factory.mktemp("signed")
    path = folder / "journal.sqlite3"
    subprocess.run(tablectl() + ["run", "--simulate", "--rounds", "6", "--seats", "3", "--seed", "11", "--journal",
                                 str(path), "--json", *PAYTABLES], check=True, capture_output=True, timeout=300)
    key = load_private_key(folder / "journal.sqlite3.key")
    pub = folder / "table.pub"
    pub.write_bytes(public_pem(key.public))
    return path, key, pub


def cli(*args, timeout=300):
    return subprocess.run(tablectl() + list(args), capture_output=True, text=True, timeout=timeout)


def test_the_cli_signs_the_report_it_prints_and_audit_accepts_it(run, tmp_path):
    journal, key, pub = run
    out = tmp_path / "day.signed.json"
    r = cli("report", "day", "--journal", str(journal), "--json", "--signed", str(out))
    assert r.returncode in (0, 1), r.stderr
    printed = json.loads(r.stdout)
    doc = json.loads(out.read_bytes())
    assert doc["report"] == printed  # the signed copy is the report, figure for figure
    assert doc["report"]["rounds"] == 6
    assert doc["signature"]["key_id"] == key.key_id and doc["signature"]["table_id"] == printed["table_id"]
    ok = cli("audit", "report", str(out), "--public-key", str(pub))
    assert ok.returncode == 0, ok.stderr
    assert f"signed at {doc['signature']['signed_at']} by key {key.key_id}" in ok.stdout
    # one changed figure, through the CLI: refused, saying what failed
    doc["report"]["settled_win"] += 100
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
    bad = cli("audit", "report", str(forged), "--public-key", str(pub))
    assert bad.returncode == 1
    assert "the signature does not verify" in bad.stderr and "changed after signing" in bad.stderr


def test_every_byte_flipped_in_turn_is_caught(run):
    """Each byte of a real shift report's signed file, flipped (one bit, then all eight):
    not one of the altered files is accepted."""
    journal, key, _ = run
    r = cli("report", "shift", "--journal", str(journal), "--json", *PAYTABLES)
    assert r.returncode in (0, 1), r.stderr
    rep = json.loads(r.stdout)
    data = sign_report(rep, key, rep["table_id"])  # a report is signed as the table it names
    assert check_signed_report(data, [key.public]).ok
    problems = set()
    for i in range(len(data)):
        for mask in (0x01, 0xFF):
            altered = data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]
            found = check_signed_report(altered, [key.public])
            assert not found.ok, (i, mask, altered[max(0, i - 20):i + 20])
            assert found.problem
            problems.add(found.problem.split(" (")[0].split(":")[0])
    # the several ways a changed byte shows, each named
    assert any("not the canonical JSON" in p for p in problems)
    assert any("does not verify" in p for p in problems)
    assert any("not JSON" in p for p in problems)
    print(f"\n{len(data)} bytes, each flipped two ways: {2 * len(data)} altered files refused")


def test_bytes_added_or_removed_and_a_pretty_printed_copy_are_refused(run):
    _, key, _ = run
    data = sign_report({"report": "day", "settled_win": 1234, "band_95": [-5.5, 9.25]}, key, "t-1")
    for altered in (data + b"\n", data[:-1], b" " + data, data.replace(b",", b", ", 1),
                    (json.dumps(json.loads(data), indent=2) + "\n").encode()):
        found = check_signed_report(altered, [key.public])
        assert not found.ok and "not the canonical JSON" in found.problem


def test_another_tables_key_is_refused_naming_both_keys(run, tmp_path):
    journal, key, pub = run
    other = generate()
    other_pub = tmp_path / "other.pub"
    other_pub.write_bytes(public_pem(other.public))
    data = sign_report({"report": "day", "settled_win": 1}, key, "t-1")
    found = check_signed_report(data, [other.public])
    assert not found.ok and key.key_id in found.problem and other.key_id in found.problem
    # a report signed by another key that claims this table's key id: the signature fails
    doc = json.loads(sign_report({"report": "day", "settled_win": 1}, other, "t-1"))
    doc["signature"]["key_id"] = key.key_id
    claimed = (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()
    found = check_signed_report(claimed, [key.public])
    assert not found.ok and "does not verify" in found.problem
    # through the CLI: the wrong key exits 1, the right one among several keys exits 0
    path = tmp_path / "r.json"
    path.write_bytes(data)
    assert cli("audit", "report", str(path), "--public-key", str(other_pub)).returncode == 1
    assert cli("audit", "report", str(path), "--public-key", str(other_pub), "--public-key", str(pub),
               "--table", "t-1").returncode == 0


def test_a_report_naming_one_table_signed_by_another_tables_key_is_refused(run, tmp_path):
    """Table B's key signs a report naming table A (its figures, or a copy of A's report
    re-signed): refused even when both tables' keys are given, each named; the same report
    signed by A's key is accepted. Two keys given with no table named is a usage error (whose
    key is whose is the auditor's word, never the report's)."""
    journal, key_a, pub_a = run
    key_b = generate()
    pub_b = tmp_path / "b.pub"
    pub_b.write_bytes(public_pem(key_b.public))
    forged = tmp_path / "a-by-b.json"
    forged.write_bytes(sign_report({"report": "day", "table_id": "A", "settled_win": 1}, key_b, "A"))
    honest = tmp_path / "a-by-a.json"
    honest.write_bytes(sign_report({"report": "day", "table_id": "A", "settled_win": 1}, key_a, "A"))
    both = ["--public-key", f"A={pub_a}", "--public-key", f"B={pub_b}"]
    bad = cli("audit", "report", str(forged), *both)
    assert bad.returncode == 1, bad.stdout
    assert "the key of table 'B'" in bad.stderr and "names table 'A'" in bad.stderr
    assert cli("audit", "report", str(honest), *both).returncode == 0
    # B's key with --table A: the auditor says the key is A's, the report is A's: that is the auditor's word
    assert cli("audit", "report", str(forged), "--public-key", str(pub_b), "--table", "B").returncode == 1
    unnamed = cli("audit", "report", str(forged), "--public-key", str(pub_a), "--public-key", str(pub_b))
    assert unnamed.returncode == 2 and "--table" in unnamed.stderr
    # the report's own table and its signature's table must agree
    doc = {"report": "day", "table_id": "A", "settled_win": 1}
    mixed = check_signed_report(sign_report(doc, key_b, "B"), [key_b.public], {key_b.key_id: "B"})
    assert not mixed.ok and "signature names table 'B'" in mixed.problem


def test_no_key_and_an_empty_file_check_nothing_and_fail():
    key = generate()
    data = sign_report({"report": "day"}, key, "t-1")
    assert not check_signed_report(data, []).ok
    assert not check_signed_report(b"", [key.public]).ok
    assert not check_signed_report(b"{}\n", [key.public]).ok


def test_signing_needs_a_known_key(run, tmp_path):
    """`--signed` never makes a key of its own: a report signed by a key nobody holds proves nothing."""
    journal, _, _ = run
    lone = tmp_path / "lone.sqlite3"
    lone.write_bytes(journal.read_bytes())
    r = cli("report", "day", "--journal", str(lone), "--signed", str(tmp_path / "x.json"),
            "--table-key", str(journal.with_name(journal.name + ".key")))
    assert r.returncode == 2 and "unanchored" in r.stderr and "no signed head file" in r.stderr, r.stderr
    (tmp_path / "lone.sqlite3.head").write_bytes(journal.with_name(journal.name + ".head").read_bytes())
    r = cli("report", "day", "--journal", str(lone), "--signed", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "no table key to sign with" in r.stderr
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "lone.sqlite3.key").exists()
    k, _ = save(generate(), tmp_path / "k.pem")  # a key, but not the one that wrote the journal: refused
    r = cli("report", "day", "--journal", str(lone), "--signed", str(tmp_path / "x.json"),
            "--table-key", str(k))
    assert r.returncode == 2 and "not signed" in r.stderr and load_private_key(k).key_id in r.stderr, r.stderr
    assert not (tmp_path / "x.json").exists()
    own, _ = save(load_private_key(journal.with_name(journal.name + ".key")), tmp_path / "own.pem")
    r = cli("report", "day", "--journal", str(lone), "--signed", str(tmp_path / "x.json"),
            "--table-key", str(own))
    assert r.returncode in (0, 1), r.stderr
    assert json.loads((tmp_path / "x.json").read_bytes())["signature"]["key_id"] == load_private_key(own).key_id


def test_the_signing_time_is_utc():
    key = generate()
    when = datetime(2026, 12, 2, 7, 30, tzinfo=timezone.utc)
    doc = json.loads(sign_report({"report": "day"}, key, "t-1", now=when))
    assert doc["signature"]["signed_at"] == "2026-12-02T07:30:00.000000Z"


def test_a_journal_that_does_not_verify_is_reported_but_never_signed(run, tmp_path):
    """The attack: edit a settled round's amounts in a copy of the journal, then have the table
    sign the report made from it, so `audit report` says OK to edited figures. The report is
    still printed (people may need to read it), but --signed verifies the journal with the key
    first and refuses (exit 2), writing nothing."""
    import re
    import shutil
    import sqlite3

    journal, key, pub = run
    copy = tmp_path / "copy.sqlite3"
    for suffix in ("", ".head"):
        shutil.copy(f"{journal}{suffix}", f"{copy}{suffix}")
    bodies_as_text(copy)
    db = sqlite3.connect(copy)
    seq, body = db.execute("SELECT seq, body FROM entries WHERE kind = 'round' AND body LIKE '%\"amount\":%' "
                           "ORDER BY seq LIMIT 1").fetchone()
    edited = re.sub(r'"amount":(-?\d+)', lambda m: f'"amount":{int(m.group(1)) - 15000}', body, count=1)
    assert edited != body
    db.execute("UPDATE entries SET body = ? WHERE seq = ?", (edited, seq))
    db.commit()
    db.close()
    key_file = tmp_path / "table.key"
    save(key, key_file)
    out = tmp_path / "day.signed.json"
    r = cli("report", "day", "--journal", str(copy), "--json", "--signed", str(out),
            "--table-key", str(key_file))
    assert r.returncode == 2 and "not signed" in r.stderr and "tampered" in r.stderr, r.stderr
    assert f"first bad entry {seq}" in r.stderr and not out.exists()
    # The genuine journal, the same key: signed.
    good = cli("report", "day", "--journal", str(journal), "--json", "--signed", str(out),
               "--table-key", str(key_file))
    assert good.returncode in (0, 1) and out.exists(), good.stderr
