"""bench/floor.py runs end to end on a small floor: synthetic signed tables through mosquitto into
`tablectl floor serve`, people signed in using its pages (the pit grid and a table's page), every
message taken and none counted forged, each page request timed, the floor's drain measured."""

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
def test_floor_bench_takes_every_signed_message_and_times_the_floors_pages():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "floor.py"), "--tables", "6", "--seconds", "4",
                           "--rate-per-table", "4", "--pages", "2", "--blast", "120", "--database", "sqlite",
                           "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(proc.stdout)
    paced = run["paced"]
    assert paced["published"] > 0 and paced["taken"] == paced["published"] and paced["page_errors"] == 0
    for figure in ("grid_ms", "table_ms", "page_ms"):
        assert paced[figure]["n"] > 0 and 0 < paced[figure]["p50"] <= paced[figure]["p99"] <= paced[figure]["max"]
    assert run["blast"]["taken"] == 120 and run["blast"]["floor_per_core_per_s"] > 0
    assert run["floor"]["forged"] == 0 and run["floor"]["write_errors"] == 0
    assert run["floor"]["received"] == 6 + paced["published"] + 120  # the statuses, the paced events, the blast
    # the page limit is read from the 500-table PostgreSQL run only: this one does not measure it
    assert [lim["figure"] for lim in run["limits"]][0] is None and run["limits"][1]["ratio"] > 0
