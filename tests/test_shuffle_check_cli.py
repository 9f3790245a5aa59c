"""tablectl shuffle-check on journals of real runs: a one-riffle shuffler is flagged
(and the report says after how many rounds); the proper shuffle passes."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.test_e2e_run import tablectl


def _start(tmp_path, name, *extra):
    """A 160-round simulated run with its own journal, started (not waited for)."""
    journal = tmp_path / f"{name}.sqlite3"
    proc = subprocess.Popen(tablectl() + ["run", "--simulate", "--ante-cents", "1000", "--rounds", "160", "--seats", "3", "--seed", "21",
                                          "--journal", str(journal), "--json", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, journal


def _check(run):
    proc, journal = run
    err = proc.communicate(timeout=600)[1]
    assert proc.returncode == 0, err
    return subprocess.run(tablectl() + ["shuffle-check", str(journal), "--json"], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.long
@pytest.mark.timeout(600)
def test_a_weak_shuffle_is_flagged_and_a_proper_one_passes(tmp_path):
    # The two tables are independent processes with journals of their own: deal both at once.
    runs = _start(tmp_path, "weak", "--weak-shuffle"), _start(tmp_path, "proper")
    try:
        weak = _check(runs[0])
        report = json.loads(weak.stdout)
        assert weak.returncode == 1 and report["verdict"] == "fail"
        assert 0 < report["flagged_after_rounds"] <= 160
        proper = _check(runs[1])
        report = json.loads(proper.stdout)
        assert proper.returncode == 0 and report["verdict"] == "pass", report
        assert report["rounds"] == 160 and set(report["decks"]) == {"A", "B"}
    finally:
        for proc, _ in runs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

def test_a_file_that_is_not_a_journal_is_bad_input_not_a_failed_shuffle(tmp_path):
    from click.testing import CliRunner

    from table.cli import main

    notes = tmp_path / "README.md"
    notes.write_text("# not a journal\n" * 200)
    r = CliRunner().invoke(main, ["shuffle-check", str(notes)])
    assert r.exit_code == 2, r.output  # 1 would say the shuffle failed
    assert "cannot open journal" in r.output and str(notes) in r.output
    assert notes.read_text() == "# not a journal\n" * 200


def test_the_help_lists_every_exit_status_and_what_a_failure_means():
    from click.testing import CliRunner

    from table.cli import main

    text = " ".join(CliRunner().invoke(main, ["shuffle-check", "--help"]).output.split())
    for status in ("0 the shuffle passes", "1 it fails", "2 the journal cannot be read", "3 too few rounds"):
        assert status in text, text
    assert "1 run in 20" in text and "re-test" in text


def test_shuffle_check_never_writes_to_what_it_reads(tmp_path):
    """An empty file or another program's SQLite database is bad input, left untouched
    (no journal tables, no .head file)."""
    import sqlite3

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    for f in (empty, other):
        before = f.read_bytes()
        proc = subprocess.run(tablectl() + ["shuffle-check", str(f)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert f.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "other.db"]
