"""`tablectl run --config/--service` on a simulated table: config merged under the
command line, JSON logs on stdout, sd_notify READY / WATCHDOG / STATUS / STOPPING
over a real datagram socket, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner

from table.cli import main

CONFIG = """\
[table]
id = "bench-01"
seats = 2

[[decks]]
id = "X"
back_colour = "green"

[[decks]]
id = "Y"
back_colour = "black"

[devices.shuffler]
url = "/dev/threecard/shuffler"

[devices.shoe]
url = "/dev/threecard/shoe"

[link]
event_timeout_s = 5.0

[log]
format = "json"
level = "info"
"""


def runner() -> CliRunner:
    """A runner keeping stderr apart from stdout (click 8.1 needs asking; 8.2+ always does)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.fixture
def config_file(tmp_path):
    f = tmp_path / "table.toml"
    # the service's control socket in the test's own folder: /run/threecard is systemd's
    # RuntimeDirectory, absent on a machine that never installed the unit
    f.write_text(CONFIG + '\n[console]\ncontrol_socket = "%s"\n' % (tmp_path / "control.sock"))
    return f


@pytest.fixture(autouse=True)
def restore_logging():
    import logging

    import structlog

    root = logging.getLogger()
    handlers, level, saved = root.handlers[:], root.level, structlog.get_config()
    old_term = signal.getsignal(signal.SIGTERM)
    yield
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.configure(**saved)
    signal.signal(signal.SIGTERM, old_term)


def test_config_supplies_run_options(config_file):
    r = runner().invoke(
        main, ["run", "--simulate", "--rounds", "2", "--seed", "5", "--json", "--config", str(config_file),
               "--ante-cents", "1000"])  # the fixed bet: every seat of the config's layout is in play
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert [len(x["seats"]) for x in out["rounds"]] == [2, 2]
    assert [(x["deck_id"], x["deck_colour"]) for x in out["rounds"]] == [("X", "green"), ("Y", "black")]


def test_command_line_overrides_config(config_file):
    r = runner().invoke(main, [
        "run", "--simulate", "--rounds", "1", "--seed", "5", "--json", "--config", str(config_file),
        "--seats", "1", "--deck-colours", "red,blue"])
    assert r.exit_code == 0, r.stderr
    rnd = json.loads(r.stdout)["rounds"][0]
    assert len(rnd["seats"]) == 1 and (rnd["deck_id"], rnd["deck_colour"]) == ("X", "red")


def test_invalid_config_is_a_usage_error_naming_the_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(CONFIG.replace('back_colour = "black"', 'back_colour = "pink"'))
    r = runner().invoke(main, ["run", "--simulate", "--config", str(f)])
    assert r.exit_code == 2
    assert f"{f}:11: decks[1].back_colour: unknown back colour 'pink'" in r.stderr


def test_service_and_json_conflict(config_file):
    r = runner().invoke(main, ["run", "--simulate", "--service", "--json", "--config", str(config_file)])
    assert r.exit_code == 2 and "--json" in r.stderr


def test_service_mode_logs_json_on_stdout_and_prints_no_results(config_file, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    r = runner().invoke(
        main, ["run", "--simulate", "--service", "--rounds", "3", "--seed", "2", "--config", str(config_file)])
    assert r.exit_code == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]  # every stdout line is a JSON log record
    events = [x["event"] for x in records]
    assert events.count("round_result") == 3 and events[-1] == "run_summary"
    assert "service_ready" in events
    assert all(x.get("table_id") == "bench-01" for x in records)
    results = [x for x in records if x["event"] == "round_result"]
    assert [x["deck_id"] for x in results] == ["X", "Y", "X"]
    assert records[-1]["rounds"] == 3 and records[-1]["custody_violations"] == 0


def test_service_under_a_stand_in_systemd(config_file, tmp_path):
    """The service process notifies READY after both handshakes, pings the watchdog,
    reports each round in STATUS, deals until SIGTERM, then sends STOPPING and exits."""
    mgr = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"threecard-svc-{uuid.uuid4().hex}"
    mgr.bind("\0" + name)
    mgr.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET="@" + name, WATCHDOG_USEC="400000", PYTHONUNBUFFERED="1")
    env.pop("WATCHDOG_PID", None)
    log_path = tmp_path / "stdout.log"
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from table.cli import main; main()", "run", "--simulate", "--service",
             "--seed", "9", "--config", str(config_file)],
            stdout=out, stderr=subprocess.PIPE, env=env, text=True)
    try:
        seen: list[str] = []

        def until(pred) -> str:
            while True:
                msg = mgr.recv(4096).decode()
                seen.append(msg)
                if pred(msg):
                    return msg

        ready = until(lambda m: "READY=1" in m)
        assert "STATUS=shuffler SHF-SIM-0001 and shoe SHOE-SIM-0001 connected" in ready
        until(lambda m: m == "WATCHDOG=1\n")
        until(lambda m: m.startswith("STATUS=round 2 settled"))
        proc.send_signal(signal.SIGTERM)
        stopping = until(lambda m: "STOPPING=1" in m)
        assert "STATUS=stopping: interrupted" in stopping
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        mgr.close()
    assert proc.returncode == 130, err
    assert seen.index(ready) < seen.index("WATCHDOG=1\n")
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    events = [r["event"] for r in records]
    assert events.count("round_result") >= 2 and "service_stopping" in events and events[-1] == "run_summary"
    handshakes = [r for r in records if r["event"] == "handshake"]
    assert {r["device_serial"] for r in handshakes} == {"SHF-SIM-0001", "SHOE-SIM-0001"}
