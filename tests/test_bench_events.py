"""bench/events.py measures card read -> MQTT subscriber from the signed envelopes (issue 18)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mqtt_broker import mosquitto_path

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(mosquitto_path() is None, reason="needs mosquitto")
@pytest.mark.timeout(300)
def test_events_bench_measures_mqtt_latency_from_the_envelopes():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "events.py"), "--rounds", "1", "--seats", "1", "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    socket, mqtt = out["socket"], out["mqtt"]
    assert socket["cards"] == 6 and socket["latency_ms"]["p99"] > 0
    live = mqtt["live"]
    assert live["forged"] == 0 and live["cards"] == 6  # every card_dealt opened from its signed envelope
    assert 0 < live["latency_ms"]["p50"] <= live["latency_ms"]["p99"] <= live["latency_ms"]["max"]
    assert mqtt["acked"] and mqtt["received"] == mqtt["events"]
