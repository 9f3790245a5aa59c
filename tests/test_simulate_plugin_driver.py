"""``tablectl run --simulate --config`` with a plugin driver in the config refuses, naming it: the
simulated table's emulators speak the SPEC, so it would silently run the built-in driver instead
(docs/drivers.md, "Simulating")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tables import table_toml


def _run(tmp_path, shuffler: str = "", shoe: str = "") -> subprocess.CompletedProcess:
    cfg = tmp_path / "table.toml"
    cfg.write_text(table_toml("t1", 2, "/dev/threecard/shuffler", "/dev/threecard/shoe", shoe, shuffler=shuffler))
    return subprocess.run([sys.executable, "-m", "table.cli", "run", "--simulate", "--config", str(cfg), "--rounds",
                           "1", "--seed", "1", "--journal", str(tmp_path / "j.sqlite3")],
                          capture_output=True, text=True, timeout=120)


def test_a_plugin_shoe_in_the_config_is_refused_by_name(tmp_path):
    r = _run(tmp_path, shoe='driver = "ascii-shoe"')
    assert r.returncode == 2, r.stdout + r.stderr
    assert "devices.shoe.driver" in r.stderr and "'ascii-shoe'" in r.stderr
    assert "tablectl soak --shoe-driver ascii-shoe" in " ".join(r.stderr.split())


@pytest.mark.parametrize("shuffler", ['driver = "spec"', ""])
def test_the_spec_driver_in_the_config_simulates_as_before(tmp_path, shuffler):
    r = _run(tmp_path, shuffler=shuffler)
    assert r.returncode == 0, r.stdout + r.stderr
