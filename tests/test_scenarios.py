"""Every scenario shipped in simulators/scenarios/ ends in the controller's documented response."""

from __future__ import annotations

import json
import subprocess

import pytest

from table.chaos import ScenarioError, load_scenario, run_scenario, shipped_scenarios
from tests.test_e2e_run import tablectl

SHIPPED = shipped_scenarios()


def test_the_issue_s_scenarios_are_shipped():
    names = {p.stem for p in SHIPPED}
    assert {"jam-third-shuffle", "foreign-card-round-5", "missing-card", "shoe-unplugged-2s",
            "unreadable-card", "previous-deck-left-in-rack"} <= names


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_scenario_ends_in_its_documented_response(path):
    sc = load_scenario(path)
    assert sc["expect"] and sc["description"].strip()
    result = run_scenario(path)
    assert result["passed"], result["differences"]


def test_tablectl_run_scenario(tmp_path):
    path = next(p for p in SHIPPED if p.stem == "unreadable-card")
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--scenario", str(path), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["passed"] is True
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(path.read_text().replace('supervisor = ["confirm_card"]', 'supervisor = []'))
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--scenario", str(wrong)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "FAIL" in proc.stdout


def test_a_malformed_scenario_names_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nrounds = 2\nseed = 1\n[[fault]]\nround = 1\nkind = "gremlins"\n'
                   '[expect]\nheld_rounds = 0\n')
    with pytest.raises(ScenarioError, match=r"bad.toml: fault\[0\].kind: 'gremlins'; allowed: foreign_card"):
        load_scenario(bad)
    bad.write_text('name = "x"\nrounds = 2\nseed = 1\n[[fault]]\nround = 1\nkind = "jam"\nstep = "deal"\n'
                   '[expect]\nheld_rounds = 0\n')
    with pytest.raises(ScenarioError, match=r"fault\[0\].step: unknown key"):
        load_scenario(bad)
    bad.write_text('name = "x"\nrounds = 1\nseed = 1\n')
    with pytest.raises(ScenarioError, match="expect: required"):
        load_scenario(bad)
