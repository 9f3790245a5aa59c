"""MQTT floor telemetry (issue 9) against a real mosquitto broker started by the tests.

The broker is stopped mid-run and started again: the publisher stores and forwards
from the journal, and a persistent QoS 1 subscriber ends with every event exactly
once after de-duplicating by seq. The retained status and the Last Will mark the
table online and offline. Sockets: 127.0.0.1 only.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time

import paho.mqtt.client as mqtt
import pytest
from event_checks import assert_gapless, assert_sealed, assert_valid
from mqtt_broker import Broker, mosquitto_path
from test_events import config

from table.api import Table
from table.events import EventLog
from table.journal import Journal
from table.interfaces.mqtt import ForgedMessage, MqttPublisher, topics, verify_message
from table.config import MqttSettings
from table import keys

#: the table key every test table signs with; subscribers check against its public half
KEY = keys.generate()

pytestmark = pytest.mark.skipif(mosquitto_path() is None,
                                reason="mosquitto not installed (.ci/run installs it)")


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


class Subscriber:
    """A floor display: persistent session (clean_session=False), QoS 1, reconnecting.
    It keeps only messages whose signature checks against the table key (``forged``
    counts the others)."""

    def __init__(self, port: int, topic: str, client_id: str = "floor-display") -> None:
        self.messages: list[tuple[str, dict, bool]] = []
        self.forged: list[str] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        self.client.reconnect_delay_set(1, 1)
        self.client.on_connect = lambda c, u, f, rc, p=None: c.subscribe([(topic, 1)])
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, keepalive=5)
        self.client.loop_start()
        assert self.subscribed.wait(10)

    def _on_message(self, client, userdata, msg) -> None:
        try:
            message = verify_message(msg.payload, msg.topic, KEY.public)
        except ForgedMessage as exc:
            with self.lock:
                self.forged.append(str(exc))
            return
        with self.lock:
            self.messages.append((msg.topic, message, bool(msg.retain)))

    def events(self) -> list[dict]:
        with self.lock:
            return [p for t, p, _ in self.messages if t.endswith("/events")]

    def statuses(self) -> list[dict]:
        with self.lock:
            return [p for t, p, _ in self.messages if t.endswith("/status")]

    def wait(self, predicate, timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return predicate()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
        self.client._reset_sockets()  # paho closes its socketpair only in __del__


def test_broker_restart_mid_run_every_event_exactly_once(tmp_path, broker):
    floor, table_id = "pit2", "pit2-tcp-07"
    sub = Subscriber(broker.port, f"threecard/{floor}/+/#")
    settings = MqttSettings(port=broker.port, floor=floor, state_path=tmp_path / "mqtt-state.json", keepalive_s=5,
                            table_key=KEY)
    try:
        with Table(config(tmp_path, table_id=table_id), simulate=True, seed=21, rounds=10, mqtt=settings) as t:
            assert t.mqtt.wait_acked(20, 20)
            broker.stop()  # mid-run: the table goes on dealing and journaling
            head_at_stop = t.head_seq
            assert sub.wait(lambda: t.head_seq >= head_at_stop + 40 or not t._thread.is_alive())
            assert not t.mqtt.connected
            acked_while_down = t.mqtt.acked_seq
            broker.start()
            t.wait(120)
            head = t.head_seq
            assert t.mqtt.wait_acked(head, 30)
            replayed = list(t.events.replay(0))
        events = sub.events()
        assert sub.wait(lambda: len({e["seq"] for e in sub.events()}) >= head)
        assert sub.wait(lambda: sub.statuses() and sub.statuses()[-1]["online"] is False)
        events = sub.events()
        statuses = sub.statuses()
    finally:
        sub.close()
    by_seq: dict[int, dict] = {}
    for e in events:
        assert by_seq.setdefault(e["seq"], e) == e  # a repeat is the very same event
    unique = [by_seq[s] for s in sorted(by_seq)]
    assert unique == replayed  # every event exactly once after de-duplication, as the journal has them
    assert_gapless(unique)
    assert head > head_at_stop + 1 and acked_while_down < head
    assert_valid(unique)
    assert_sealed(unique)
    assert {e["table_id"] for e in unique} == {table_id}
    assert_valid(statuses, "status-v1.schema.json")
    assert statuses[0]["online"] is True and statuses[-1]["online"] is False
    assert [s["online"] for s in statuses].count(True) >= 2  # online again after the broker came back
    assert json.loads(settings.state_path.read_text()) == {"table_id": table_id, "acked_seq": head}
    print(json.dumps({"events": head, "received": len(events), "duplicates": len(events) - len(unique),
                      "broker_down_at_seq": head_at_stop, "acked_when_down": acked_while_down}))


def _small_journal(tmp_path, n: int = 30):
    path = tmp_path / "journal.sqlite3"
    with Journal(path) as j:
        j.append("table_open", seats=1)
        for i in range(1, n):
            j.append("round", round_id=f"r{i:05d}-00000000", step="open", number=i, wagers={"1": {"ante": 1000}})
    return path


def test_publisher_restart_resumes_after_acked_seq(tmp_path, broker):
    path = _small_journal(tmp_path)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"table_id": "t9", "acked_seq": 10}))
    sub = Subscriber(broker.port, "threecard/f1/t9/events", client_id="resume-check")
    try:
        with EventLog(path, "t9") as log:
            pub = MqttPublisher(log, MqttSettings(port=broker.port, floor="f1", state_path=state), KEY).start()
            try:
                assert pub.wait_acked(log.head, 20)
            finally:
                pub.close()
        assert sub.wait(lambda: len(sub.events()) >= 20)
        seqs = sorted({e["seq"] for e in sub.events()})
    finally:
        sub.close()
    assert seqs == list(range(11, 31))
    assert json.loads(state.read_text())["acked_seq"] == 30


def test_last_will_marks_table_offline(tmp_path, broker):
    path = _small_journal(tmp_path, 3)
    events_topic, status_topic = topics("f1", "t-lwt")
    sub = Subscriber(broker.port, status_topic, client_id="status-board")
    code = textwrap.dedent(f"""
        import sys, time
        from table.events import EventLog
        from table.interfaces.mqtt import MqttPublisher; from table.config import MqttSettings
        from table.keys import load_table_key
        log = EventLog({str(path)!r}, "t-lwt").start()
        pub = MqttPublisher(log, MqttSettings(port={broker.port}, floor="f1", keepalive_s=5,
                                              state_path=__import__("pathlib").Path({str(tmp_path / 's.json')!r})),
                            load_table_key("KEYFILE")).start()
        assert pub.wait_acked(log.head, 20)
        print("up", flush=True)
        time.sleep(60)
    """)
    key_file, _ = keys.save(KEY, tmp_path / "table-key.pem")
    code = code.replace("KEYFILE", str(key_file))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # structlog's default logger prints on stdout too
            if line.strip() == "up":
                break
        else:
            pytest.fail("the publisher process did not come up")
        assert sub.wait(lambda: any(s["online"] for s in sub.statuses()))
        proc.send_signal(signal.SIGKILL)  # no DISCONNECT: the broker publishes the Last Will
        proc.wait(10)
        assert sub.wait(lambda: sub.statuses()[-1]["online"] is False)
        statuses = sub.statuses()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
        sub.close()
    assert_valid(statuses, "status-v1.schema.json")
    # A display that connects now gets the retained status: offline.
    late = Subscriber(broker.port, status_topic, client_id="late-board")
    try:
        assert late.wait(lambda: late.messages)
        topic, status, retained = late.messages[0]
    finally:
        late.close()
    assert retained and status["online"] is False and status["table_id"] == "t-lwt"


def test_tablectl_run_publishes_from_config(tmp_path, broker):
    """`tablectl run --config` with an [mqtt] section publishes the run's events."""
    from hil_helpers import CLI

    cfg = tmp_path / "table.toml"
    cfg.write_text(f"""
[table]
id = "pit3-tcp-02"
seats = 2
[devices.shuffler]
url = "/dev/threecard/shuffler"
[devices.shoe]
url = "/dev/threecard/shoe"
[mqtt]
host = "127.0.0.1"
port = {broker.port}
floor = "pit3"
state_path = "{tmp_path}/mqtt-state.json"
""")
    sub = Subscriber(broker.port, "threecard/pit3/pit3-tcp-02/#", client_id="cli-board")
    key_file, _ = keys.save(KEY, tmp_path / "table-key.pem")
    try:
        r = subprocess.run(CLI + ["run", "--simulate", "--rounds", "2", "--seed", "4", "--config", str(cfg),
                                  "--table-key", str(key_file),
                                  "--journal", str(tmp_path / "j.sqlite3"), "--log-file", str(tmp_path / "log")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        with EventLog(tmp_path / "j.sqlite3", "pit3-tcp-02") as log:
            expected = list(log.replay(0))
        assert sub.wait(lambda: len({e["seq"] for e in sub.events()}) >= len(expected))
        assert sub.wait(lambda: sub.statuses() and sub.statuses()[-1]["online"] is False)
        events = sub.events()
    finally:
        sub.close()
    unique = {e["seq"]: e for e in events}
    assert [unique[s] for s in sorted(unique)] == expected
    assert json.loads((tmp_path / "mqtt-state.json").read_text())["acked_seq"] == len(expected)
