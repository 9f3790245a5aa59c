"""The rollback the broker's retained checkpoint cannot catch, caught by the floor's notary (issue 28).

The attack: an insider stops the table, puts back an older copy of its journal with that
copy's own genuine head file, and republishes the older genuine retained checkpoint it
captured from the broker. The restarted controller reads the broker's checkpoint as its
anchor, finds its journal level with it, and deals on: no incident, no alarm (the control
arm below, the same restart without ``[floor]``). With the floor's notary, which never takes
a lower checkpoint, the table's start-up question gets the newest checkpoint, signed by the
floor, the journal is behind it, and the table holds for a supervisor with an incident; the
floor alarms on the republished checkpoint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest

from table.floor.config import load_floor_config
from table.floor.service import FloorService
from table.journal import Journal, head_path
from table.keys import generate, save

from console_helpers import tablectl
from floor_helpers import broker, needs_mosquitto, rows  # noqa: F401
from mqtt_broker import free_port

pytestmark = [needs_mosquitto, pytest.mark.long]
TABLE = "pit1-tcp-07"


def _retained(port: int, topic: str) -> bytes:
    """The broker's retained message on ``topic``, raw, as anyone subscribed to the broker gets it."""
    import paho.mqtt.client as mqtt

    got: dict[str, bytes] = {}
    done = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="insider-capture")
    c.on_connect = lambda c, u, f, r, p=None: c.subscribe(topic, qos=1)
    c.on_message = lambda c, u, m: (got.setdefault("raw", m.payload), done.set())
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        assert done.wait(20), "no retained checkpoint on the broker"
    finally:
        c.disconnect()
        c.loop_stop()
        c._reset_sockets()
    return got["raw"]


def _republish(port: int, topic: str, raw: bytes) -> None:
    import paho.mqtt.client as mqtt

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="insider-republish")
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        c.publish(topic, raw, qos=1, retain=True).wait_for_publish(10)
    finally:
        c.disconnect()
        c.loop_stop()
        c._reset_sockets()


def _last_checkpoint(journal) -> dict:
    with Journal(journal, read_only=True) as j:  # closed here: the test's descriptor check counts it
        return j.last("checkpoint").body["checkpoint"]


def _table_config(tmp_path, port, journal, floor_url: str | None) -> str:
    path = tmp_path / ("table-floor.toml" if floor_url else "table-no-floor.toml")
    floor = f'[floor]\nurl = "{floor_url}"\npublic_key = "{tmp_path / "floor.key.pub"}"\n' if floor_url else ""
    path.write_text(f"""
[table]
id = "{TABLE}"
seats = 2
[devices.shuffler]
url = "{tmp_path / 'dev' / 'shuffler'}"
[devices.shoe]
url = "{tmp_path / 'dev' / 'shoe'}"
[journal]
path = "{journal}"
key_file = "{tmp_path / 'table.key'}"
[mqtt]
host = "127.0.0.1"
port = {port}
floor = "pit1"
state_path = "{tmp_path / ('mqtt-' + path.stem + '.json')}"
{floor}""")
    return str(path)


def test_a_journal_rolled_back_with_its_retained_checkpoint_republished_is_held_by_the_floors_notary(tmp_path, broker):
    save(generate(), tmp_path / "table.key")
    save(generate(), tmp_path / "floor.key")
    (tmp_path / "keys").mkdir()
    shutil.copy(tmp_path / "table.key.pub", tmp_path / "keys" / f"{TABLE}.pub")
    (tmp_path / "floor.toml").write_text(f"""
[floor]
database = "{tmp_path / 'floor.sqlite3'}"
key_file = "{tmp_path / 'floor.key'}"
table_keys = "{tmp_path / 'keys'}"
listen = "127.0.0.1:{free_port()}"
[[broker]]
url = "mqtt://127.0.0.1:{broker.port}"
""")
    service = FloorService(load_floor_config(tmp_path / "floor.toml")).start()
    floor = service.floor
    journal = tmp_path / "j.sqlite3"
    with_floor = _table_config(tmp_path, broker.port, journal, service.url)
    sim = subprocess.Popen(tablectl() + ["simulate-table", "--link-dir", str(tmp_path / "dev"), "--dealer-socket",
                                         str(tmp_path / "dealer.sock"), "--seed", "5"], stdout=subprocess.PIPE, text=True)
    try:
        assert sim.stdout.readline().startswith("ready")

        def run(config: str, path=journal, rounds: int = 2) -> subprocess.CompletedProcess:
            return subprocess.run(tablectl() + ["run", "--config", config, "--journal", str(path), "--dealer-socket",
                                                str(tmp_path / "dealer.sock"), "--rounds", str(rounds), "--seats", "2",
                                                "--log-file", str(tmp_path / "log")],
                                  capture_output=True, text=True, timeout=180)

        def notarised(seq: int) -> bool:
            cp = floor.notary_checkpoint(TABLE)
            return cp is not None and cp["seq"] == seq

        first = run(with_floor)
        assert first.returncode == 0, first.stderr[-2000:]
        old_head = _last_checkpoint(journal)
        assert floor.wait_for(lambda: notarised(old_head["seq"]), 30)
        topic = f"threecard/pit1/{TABLE}/checkpoint"
        captured = _retained(broker.port, topic)  # the insider keeps the genuine retained checkpoint of now
        for suffix in ("", ".head"):
            shutil.copy(f"{journal}{suffix}", f"{journal}.old{suffix}")

        second = run(with_floor)
        assert second.returncode == 0, second.stderr[-2000:]
        new_head = _last_checkpoint(journal)
        assert new_head["seq"] > old_head["seq"]
        assert floor.wait_for(lambda: notarised(new_head["seq"]), 30)

        # The attack: the older journal back with its own head file, its retained checkpoint republished.
        for suffix in ("", ".head"):
            shutil.copy(f"{journal}.old{suffix}", f"{journal}{suffix}")
            shutil.copy(f"{journal}.old{suffix}", f"{tmp_path / 'control.sqlite3'}{suffix}")
        for extra in ("-wal", "-shm"):
            if os.path.exists(f"{journal}{extra}"):
                os.unlink(f"{journal}{extra}")
        _republish(broker.port, topic, captured)
        assert floor.wait_for(lambda: floor.counts.refused_checkpoints >= 1, 30)  # the floor saw it go back
        assert floor.notary_checkpoint(TABLE)["seq"] == new_head["seq"]  # and did not follow it
        assert ("checkpoint_lower",) in rows(floor, "SELECT kind FROM alarms WHERE table_id = ?", (TABLE,))

        held = run(with_floor, rounds=1)
        assert held.returncode == 3, held.stderr[-2000:]  # held: a supervisor must acknowledge (nobody attached)
        assert "acknowledge" in held.stderr
        with Journal(journal, read_only=True) as j:
            incidents = [e.body for e in j.entries("incident")]
            assert j.last_seq < new_head["seq"]
        assert incidents and incidents[-1]["anchor_seq"] == new_head["seq"]
        assert "behind a signed checkpoint" in incidents[-1]["what"]

        # The control arm: the same restart with [floor] taken out of the config (root's way around
        # the notary) is not told by any anchor, but the journal names the floor it reports to:
        # the table holds for a supervisor's sign-off before it deals (table/floor_anchor.py).
        control = run(_table_config(tmp_path, broker.port, tmp_path / "control.sqlite3", None),
                      path=tmp_path / "control.sqlite3", rounds=1)
        assert control.returncode == 3, control.stderr[-2000:]
        assert "no longer reports to the floor" in control.stderr
        with Journal(tmp_path / "control.sqlite3", read_only=True) as j:
            assert not [e for e in j.entries("incident") if "behind a signed checkpoint" in e.body.get("what", "")]
            assert not [e for e in j.entries("round") if e.seq > old_head["seq"] and e.body.get("step") == "open"]
    finally:
        sim.terminate()
        sim.wait(10)
        sim.stdout.close()
        service.close()
    assert head_path(journal).exists()
