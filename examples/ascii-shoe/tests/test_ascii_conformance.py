"""The table's conformance suite for drivers (``tablectl conformance --driver``) against
this driver and its emulator: every check passes, none skipped (a skip is not a pass)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devices.conformance.drivers import DRIVER_CHECKS, DriverTarget, run_driver_suite
from devices.conformance.suite import CallOperator
from threecard_ascii_shoe.emulator import Emulator, ShoeModel


@pytest.mark.parametrize("draw_index", [True, False], ids=["numbered", "basic-model"])
def test_every_driver_check_passes(draw_index):
    with Emulator(ShoeModel(draw_index=draw_index), tcp=("127.0.0.1", 0)) as emu:
        target = DriverTarget("ascii-shoe", "shoe", emu.url, options={"draw_index": draw_index},
                              operator=CallOperator({"shoe": emu.command}), event_timeout_s=10)
        results = run_driver_suite(target)
    assert [r.check.id for r in results] == [c.id for c in DRIVER_CHECKS if c.kind == "shoe"]
    assert [(r.check.id, r.outcome, r.detail) for r in results if r.outcome != "pass"] == []


def test_tablectl_conformance_driver_reports_a_pass():
    with Emulator(ShoeModel(), tcp=("127.0.0.1", 0), control=("127.0.0.1", 0)) as emu:
        host, port = emu.control_address
        out = subprocess.run([sys.executable, "-m", "table.cli", "conformance", "--driver", "ascii-shoe",
                              "--shoe", emu.url, "--shoe-control", f"{host}:{port}", "--json"],
                             capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["driver"]["package"].startswith("threecard-ascii-shoe")
    assert report["summary"]["verdict"] == "pass" and report["summary"]["passed"] == report["summary"]["total"] > 0


def test_a_shoe_that_breaks_the_contract_fails_it():
    """The suite can fail: a shoe whose model numbers every draw 0 fails card-events."""
    class Broken(ShoeModel):
        def draw(self):
            out = super().draw()
            self.draws = 0  # every card numbered 0
            return out

    with Emulator(Broken(), tcp=("127.0.0.1", 0)) as emu:
        target = DriverTarget("ascii-shoe", "shoe", emu.url, operator=CallOperator({"shoe": emu.command}),
                              event_timeout_s=5)
        results = {r.check.name: r for r in run_driver_suite(target)}
    assert results["card-events"].outcome == "fail" and "draw indices [0, 0" in results["card-events"].detail
