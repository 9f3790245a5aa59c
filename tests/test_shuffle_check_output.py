"""tablectl shuffle-check says what it found in words a supervisor can act on (issue 19):
never "p None", and with too few rounds, how many more it needs."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from table.cli import main
from table.journal import Journal
from table.shuffle_check import PositionCounts, chi_square_report, rounds_needed, rounds_per_deck_needed

CLI = [sys.executable, "-c", "from table.cli import main; main()"]


def test_rounds_needed_counts_the_least_dealt_position_of_each_deck():
    counts = PositionCounts()
    for r in range(30):
        counts.add_round("A", list(range(12)))
        counts.add_round("B", list(range(12)) if r < 20 else list(range(6)))  # fewer seats later
    assert rounds_per_deck_needed() == 52 and rounds_per_deck_needed(2.0) == 104
    assert rounds_needed(counts) == {"A": 22, "B": 32}
    report = chi_square_report(counts)
    assert report["verdict"] == "insufficient" and report["rounds_needed"] == {"A": 22, "B": 32}
    for _ in range(32):
        counts.add_round("A", list(range(12)))
        counts.add_round("B", list(range(12)))
    assert rounds_needed(counts) == {"A": 0, "B": 0}


def test_an_empty_journal_says_how_many_rounds_a_verdict_takes(tmp_path):
    path = tmp_path / "j.sqlite3"
    Journal(path).close()
    r = CliRunner().invoke(main, ["shuffle-check", str(path)])
    assert r.exit_code == 3
    assert "None" not in r.stdout and "holds no dealt rounds" in r.stdout
    assert "52 rounds of each deck" in " ".join(r.stdout.split())
    out = json.loads(CliRunner().invoke(main, ["shuffle-check", str(path), "--json"]).stdout)
    assert out["verdict"] == "insufficient" and out["rounds_per_deck_needed"] == 52 and out["rounds_needed"] == {}


def test_a_short_run_is_told_how_many_more_rounds_of_each_deck(tmp_path):
    journal = tmp_path / "j.sqlite3"
    run = subprocess.run([*CLI, "run", "--simulate", "--ante-cents", "1000", "--rounds", "10", "--seats", "3", "--seed", "1", "--json",
                          "--journal", str(journal), "--log-file", str(tmp_path / "run.log")],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    r = CliRunner().invoke(main, ["shuffle-check", str(journal)])
    assert r.exit_code == 3, r.output
    text = " ".join(r.stdout.split())
    assert "None" not in text and "too few rounds for a verdict" in text
    assert "deal at least 47 more of deck A and 47 more of deck B (about 94 rounds)" in text
    assert all(len(line) <= 79 for line in r.stdout.splitlines())
