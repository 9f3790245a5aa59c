"""tablectl shuffle-check on journals of real runs: a one-riffle shuffler is flagged
(and the report says after how many rounds); the proper shuffle passes."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.test_e2e_run import tablectl


def _run(tmp_path, name, *extra):
    journal = tmp_path / f"{name}.sqlite3"
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--rounds", "160", "--seats", "3", "--seed", "21",
                                        "--journal", str(journal), "--json", *extra],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return subprocess.run(tablectl() + ["shuffle-check", str(journal), "--json"], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.timeout(600)
def test_a_weak_shuffle_is_flagged_and_a_proper_one_passes(tmp_path):
    weak = _run(tmp_path, "weak", "--weak-shuffle")
    report = json.loads(weak.stdout)
    assert weak.returncode == 1 and report["verdict"] == "fail"
    assert 0 < report["flagged_after_rounds"] <= 160
    proper = _run(tmp_path, "proper")
    report = json.loads(proper.stdout)
    assert proper.returncode == 0 and report["verdict"] == "pass", report
    assert report["rounds"] == 160 and set(report["decks"]) == {"A", "B"}
