"""bench/floor.py runs end to end on a small floor: synthetic signed tables through two bridged
mosquittos into `tablectl pit serve` and `tablectl floor serve`, every message taken and none counted forged, latency
measured at the pages from the tables' own stamps (issue 28)."""

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
def test_floor_bench_takes_every_signed_message_across_the_bridge():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "floor.py"), "--tables", "6", "--seconds", "4",
                           "--rate-per-table", "4", "--pages", "2", "--blast", "120", "--floor", "sqlite", "--json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = json.loads(proc.stdout)["runs"]
    paced = run["paced"]["pages_2"]
    assert paced["forged"] == 0 and paced["published"] > 0 and paced["taken"] == paced["published"]
    lat = paced["page_latency_ms"]
    assert lat["n"] > 0 and 0 < lat["p50"] <= lat["p99"] <= lat["max"]
    assert run["blast"]["taken"] == run["blast"]["carried_to_the_pits_broker"] == 120
    assert run["blast"]["ingest_per_s"] > 0 and run["frame_ms"]["full"] > 0
    # the floor stopped and let go with the pit: its own drain through mosquitto, every blast message
    assert run["blast"]["floor_taken"] == 120 and run["blast"]["floor_per_core_per_s"] > 0
    # the limits are read from the 500-table PostgreSQL run only: this one measures neither
    assert [lim["figure"] for lim in json.loads(proc.stdout)["limits"]] == [None, None]
    # `tablectl floor serve` beside the pit, on the same broker behind the bridge: every message kept
    floor = run["floor"]
    assert run["floor_database"] == "sqlite" and floor["forged"] == 0 and floor["write_errors"] == 0
    assert floor["received"] >= paced["published"] + run["blast"]["published"] + 6  # the events and 6 statuses
    # every message verified; each either written (its batch committed) or one the floor keeps nothing of
    assert floor["stored"] + floor["not_kept"] == floor["verified"] == floor["received"]
    assert floor["stored"] > 6 and floor["not_kept"] > 0  # the statuses and rounds' results; the cards dealt
