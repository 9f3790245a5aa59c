"""End to end over USB: ``tablectl run --simulate --transport usb`` as a subprocess.

The emulated shuffler and shoe sit behind the pure-Python pyusb backend; the
host opens them with pyusb exactly as it would open real devices. The same
seed over the ptys must deal the same cards, and ``--json`` must have the same
shape whichever transport carried the bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROUNDS = 20


def tablectl() -> list[str]:
    exe = shutil.which("tablectl", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from table.cli import main; main()"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(tablectl() + ["run", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def shape(value):
    """The structure of a JSON value: keys and types, not the values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    out = {}
    for transport in ("usb", "serial"):
        log = tmp_path_factory.mktemp(transport) / "run.log"
        proc = run("--simulate", "--transport", transport, "--rounds", str(ROUNDS), "--seed", "11", "--json",
                   "--log-file", str(log))
        assert proc.returncode == 0, proc.stderr + proc.stdout
        out[transport] = json.loads(proc.stdout)
    return out


def test_usb_run_deals_every_round_with_no_custody_violation(runs):
    usb_run = runs["usb"]
    assert len(usb_run["rounds"]) == ROUNDS
    assert usb_run["custody_violations"] == 0
    assert "error" not in usb_run
    assert usb_run["cards_read"] == sum(len(r["reads"]) for r in usb_run["rounds"]) > 0


def test_json_has_the_same_shape_over_both_transports(runs):
    assert shape(runs["usb"]) == shape(runs["serial"])


def test_the_same_seed_deals_the_same_cards_over_both_transports(runs):
    def dealt(run_json):
        return [(r["dealer_hand"], [s["cards"] for s in r["seats"]]) for r in run_json["rounds"]]

    assert dealt(runs["usb"]) == dealt(runs["serial"])
    assert runs["usb"]["net_by_seat"] == runs["serial"]["net_by_seat"]


def test_link_dir_with_usb_is_a_usage_error(tmp_path):
    proc = run("--simulate", "--transport", "usb", "--link-dir", str(tmp_path), "--rounds", "1")
    assert proc.returncode == 2
    assert "--link-dir" in proc.stderr
