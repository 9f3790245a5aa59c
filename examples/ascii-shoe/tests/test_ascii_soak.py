"""The table's chaos soak on this shoe (``tablectl soak --shoe-driver ascii-shoe``): a short,
bounded run with a fault in every round, of the classes a shoe can have, made through this
emulator's control socket. Every fault detected, no card event lost, doubled or misread,
no false alarm; the summary names the driver and what its shoe lacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("options,missing", [((), []), (("draw_index=false",), ["draw_index"])],
                         ids=["numbered", "basic-model"])
def test_a_short_soak_detects_every_fault_and_loses_no_card(options, missing):
    argv = [sys.executable, "-m", "table.cli", "soak", "--shoe-driver", "ascii-shoe", "--rounds", "12",
            "--fault-rate", "1", "--seed", "5", "--seats", "2", "--json"]
    for o in options:
        argv += ["--driver-option", o]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    summary = json.loads(out.stdout)
    assert out.returncode == 0, (summary["anomalies"], out.stderr[-2000:])
    assert summary["driver"] == "ascii-shoe" and summary["missing"] == missing
    assert summary["faults_injected"] >= 10 and summary["faults_detected"] == summary["faults_injected"]
    assert (summary["lost_events"], summary["duplicated_events"], summary["misread_events"],
            summary["false_alarms"]) == (0, 0, 0, 0)
    assert summary["card_events"] > 50
    # only the shoe's classes are drawn: none of the shuffler's
    assert not {"jam", "missing_card", "unplug_shuffler", "reboot_shuffler"} & set(summary["by_kind"])
    assert summary["wagers"]["ok"]


def test_the_soak_refuses_a_driver_with_no_emulator_and_options_without_a_driver():
    out = subprocess.run([sys.executable, "-m", "table.cli", "soak", "--shoe-driver", "spec", "--rounds", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "driver 'spec' names no emulator" in out.stderr
    out = subprocess.run([sys.executable, "-m", "table.cli", "soak", "--driver-option", "resend=false"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--driver-option needs --shoe-driver NAME" in out.stderr


def test_without_resend_each_noisy_card_line_is_one_lost_event_and_one_hold():
    """The model without resend: the soak counts the card whose line was noise as lost (it never
    reaches the journal) and exits 1; the table held each such round as a lost event."""
    out = subprocess.run([sys.executable, "-m", "table.cli", "soak", "--shoe-driver", "ascii-shoe", "--rounds", "16",
                          "--fault-rate", "1", "--seed", "12", "--seats", "2", "--json",
                          "--driver-option", "resend=false"], capture_output=True, text=True, timeout=600)
    summary = json.loads(out.stdout)
    noise = summary["by_kind"]["corrupt_bytes"]["injected"]
    assert noise >= 1, summary["by_kind"]  # the seed draws at least one
    assert summary["missing"] == ["resend"]
    assert summary["faults_detected"] == summary["faults_injected"] and summary["false_alarms"] == 0
    assert summary["lost_events"] == noise and summary["duplicated_events"] == 0
    assert summary["extra_alarm_rounds"] == 0, summary["anomalies"]
    assert out.returncode == 1
