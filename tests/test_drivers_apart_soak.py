"""The chaos soak with the SPEC drivers apart (docs/drivers.md, "A driver's process"): each
fault class of the soak (table/hil/chaos.py) is detected and no card is lost, doubled or
misread when both drivers run in processes of their own, as a table runs them; the shoe's
line noise is made on its cable (a relay pty, table.hil.chaos.NoisyCable), and what the
driver process drops for a bad CRC reaches the table with the link's state."""

from __future__ import annotations

import random

import pytest

from table.hil.chaos import DETECTED_BY, FAULT_KINDS, ChaosTable, FaultInjector, run_soak


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_class_is_detected_with_the_drivers_apart(kind):
    with ChaosTable(seed=5, apart=True) as t:
        assert t.shoe.process.starts == 1 and t.shuffler.process.starts == 1  # each in its own process
        t.controller.prepare()
        inj = FaultInjector(t, random.Random(1))
        t.play()
        before = t.detections()
        inj.inject(kind)
        t.play()
        t.play()  # consequences and recovery
        after = t.detections()
        new = {k for k in after if after[k] > before.get(k, 0)}
        assert new & set(DETECTED_BY[kind]), (kind, new)
        assert t.truth_reads()[: len(t.device_reads())] == [
            r if r[0] != "??" else t.truth_reads()[i] for i, r in enumerate(t.device_reads())]
        assert len(t.truth_reads()) == len(t.device_reads())


def test_a_short_soak_with_the_drivers_apart_detects_every_fault_and_loses_no_card():
    out = run_soak(12, 7, fault_rate=1.0)
    assert out["faults_injected"] >= 8 and out["faults_detected"] == out["faults_injected"], out["anomalies"]
    assert (out["lost_events"], out["duplicated_events"], out["misread_events"], out["false_alarms"]) == (0, 0, 0, 0)
    assert not out["anomalies"]
