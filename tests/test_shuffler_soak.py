"""``tablectl soak --shuffler-driver NAME``: the chaos soak on a driver plugin's shuffler (its
emulator, a process of its own) with the SPEC shoe, drawing the shuffler's fault classes, and the
table by class it prints (docs/drivers.md, "Soak")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from table.hil.driver_soak import SHUFFLER_FAULT_KINDS, run_driver_soak

from tables import install_drivers

BENCH_PLUGIN = '''
import sys

from devices.plugins import SPEC


class BenchShuffler:
    """The SPEC driver, with the SPEC shuffler's emulator for the soak."""

    name = "bench-shuffler"
    contract_version = SPEC.contract_version
    kinds = SPEC.kinds
    option_keys = frozenset()

    def capabilities(self, kind, options):
        return SPEC.capabilities(kind, options)

    def check_options(self, kind, options):
        pass

    def open(self, request):
        return SPEC.open(request)

    def emulator_argv(self, kind, options):
        return [sys.executable, "-m", "table.cli", "emulate", str(kind), "--tcp", "127.0.0.1:0",
                "--control", "127.0.0.1:0", "--no-stdin"]


PLUGIN = BenchShuffler()
NO_EMULATOR = type("NoEmulator", (), {k: getattr(BenchShuffler, k) for k in
                                      ("name", "contract_version", "kinds", "option_keys", "capabilities",
                                       "check_options", "open")})()
'''


@pytest.fixture
def bench_plugin(tmp_path, monkeypatch):
    return install_drivers(tmp_path, monkeypatch, "bench-shuffler", "0.1", {"bench_shuffler": BENCH_PLUGIN},
                           {"bench-shuffler": "bench_shuffler:PLUGIN", "no-emulator": "bench_shuffler:NO_EMULATOR"})


def test_the_shuffler_soak_draws_the_shufflers_classes_and_counts_each(bench_plugin):
    out = run_driver_soak(8, 3, driver="bench-shuffler", kind="shuffler", fault_rate=1.0)
    assert out["kind"] == "shuffler" and out["driver"] == "bench-shuffler" and out["missing"] == []
    assert set(out["by_kind"]) == set(SHUFFLER_FAULT_KINDS)
    struck = sum(n["injected"] + n["withdrawn"] for n in out["by_kind"].values())
    assert struck == 8  # every round drew a fault: struck or withdrawn, none lost from the count
    for kind, n in out["by_kind"].items():  # each struck fault ended one way: ridden, wrongly settled, exit
        assert n["ridden_through"] + n["wrongly_settled"] + n["exits"] == n["injected"], (kind, n)
    # the deck the shuffler handed over was the deck dealt: every card the shoe read is journaled
    assert (out["lost_events"], out["duplicated_events"], out["misread_events"]) == (0, 0, 0)


def test_tablectl_soak_shuffler_driver_prints_the_table_by_class(bench_plugin):
    env = dict(os.environ, PYTHONPATH=f"{bench_plugin}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = subprocess.run([sys.executable, "-m", "table.cli", "soak", "--shuffler-driver", "bench-shuffler",
                        "--rounds", "3", "--seed", "2", "--fault-rate", "1"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode in (0, 1), r.stderr
    lines = r.stdout.splitlines()
    head = next(line for line in lines if line.split()[:2] == ["class", "injected"])
    assert "wrongly settled" in head and head.rstrip().endswith("exits")
    assert {line.split()[0] for line in lines if line.startswith("  ") and line.split()[0] in
            SHUFFLER_FAULT_KINDS} == set(SHUFFLER_FAULT_KINDS)
    assert "driver: bench-shuffler {}; its shuffler lacks: nothing" in r.stdout
    # the exit status says whether every must-be-0 column was 0
    summary = subprocess.run([sys.executable, "-m", "table.cli", "soak", "--shuffler-driver", "bench-shuffler",
                              "--rounds", "3", "--seed", "2", "--fault-rate", "1", "--json"], capture_output=True,
                             text=True, timeout=300, env=env)
    out = json.loads(summary.stdout)
    bad = out["wrongly_settled"] or out["exits"] or out["faults_detected"] < out["faults_injected"]
    assert summary.returncode == (1 if bad or out["false_alarms"] else 0)


def test_soak_refuses_two_drivers_and_a_driver_without_an_emulator(bench_plugin):
    from click.testing import CliRunner

    from table.cli import main

    r = CliRunner().invoke(main, ["soak", "--shoe-driver", "ascii-shoe", "--shuffler-driver", "bench-shuffler"])
    assert r.exit_code == 2 and "one driver at a time" in r.output
    r = CliRunner().invoke(main, ["soak", "--shuffler-driver", "no-emulator", "--rounds", "1"])
    assert r.exit_code == 2 and "names no emulator" in r.output
