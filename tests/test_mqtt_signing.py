"""Forged MQTT messages fail signature checking in the documented subscriber recipe
(docs/integration.md), on a real mosquitto; the documented ACL keeps other accounts from
publishing as a table at all."""

from __future__ import annotations

import datetime

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from mqtt_broker import Broker, free_port, mosquitto_path

from table import keys
from table.config import MqttSettings
from table.events import EventLog
from table.interfaces.mqtt import ForgedMessage, MqttPublisher, sign_message, topics, verify_message
from table.journal import Journal

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed (.ci/run installs it)")


def recipe() -> dict:
    text = (REPO / "docs" / "integration.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "# recipe:" in b]
    ns: dict = {"__name__": "recipe"}
    exec(compile(code, "integration.md recipe", "exec"), ns)
    return ns


class Listener:
    """A raw subscriber: every (topic, payload, retained) it receives."""

    def __init__(self, port: int, topic: str, **auth) -> None:
        self.got: list[tuple[str, bytes, bool]] = []
        self.cv = threading.Condition()
        self.ready = threading.Event()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"listen-{time.monotonic_ns()}")
        if auth:
            self.c.username_pw_set(auth["user"], auth["password"])
        self.c.on_connect = lambda c, u, f, rc, p=None: c.subscribe(topic, 1)
        self.c.on_subscribe = lambda *a: self.ready.set()
        self.c.on_message = self._msg
        self.c.connect("127.0.0.1", port, 5)
        self.c.loop_start()
        assert self.ready.wait(10)

    def _msg(self, c, u, m) -> None:
        with self.cv:
            self.got.append((m.topic, m.payload, bool(m.retain)))
            self.cv.notify_all()

    def wait(self, pred, timeout_s: float = 15.0) -> bool:
        with self.cv:
            return self.cv.wait_for(lambda: pred(self.got), timeout_s)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()
        self.c._reset_sockets()


def publish(port: int, topic: str, payload: str, *, retain: bool = False, **auth) -> int:
    """Publish once (QoS 1) and return the CONNACK reason code (0: accepted)."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pub-{time.monotonic_ns()}")
    if auth:
        c.username_pw_set(auth["user"], auth["password"])
    result = {}
    done = threading.Event()

    def on_connect(client, u, f, rc, p=None):
        result["rc"] = rc.value if hasattr(rc, "value") else int(rc)
        done.set()

    c.on_connect = on_connect
    c.connect("127.0.0.1", port, 5)
    c.loop_start()
    try:
        assert done.wait(10)
        if result["rc"] == 0:
            c.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)
    finally:
        c.disconnect()
        c.loop_stop()
        c._reset_sockets()
    return result["rc"]


def journal(path: Path) -> Path:
    with Journal(path) as j:
        j.append("table_open", places={"A": "in_shoe"})
    return path


def test_forged_messages_fail_the_documented_recipe(tmp_path):
    r = recipe()
    key = keys.generate()
    _, pub = keys.save(key, tmp_path / "table-key.pem")
    trusted = {"pit2-tcp-07": r["table_key"](pub)}
    events_topic, status_topic = topics("pit2", "pit2-tcp-07")
    broker = Broker(tmp_path / "broker").start()  # anonymous clients may publish anything here
    listener = Listener(broker.port, "threecard/#")
    try:
        with EventLog(journal(tmp_path / "j.sqlite3"), "pit2-tcp-07") as log:
            table = MqttPublisher(log, MqttSettings(port=broker.port, floor="pit2", state_path=tmp_path / "s.json",
                                                    table_key=key)).start()
            try:
                assert table.wait_acked(1, 20)
                assert listener.wait(lambda got: any(t == events_topic for t, _, _ in got))
            finally:
                table.close()
        genuine = [(t, p) for t, p, _ in listener.got]
        forged_event = {"schema": "threecard.events/1", "seq": 2, "journal_seq": 9, "table_id": "pit2-tcp-07",
                        "round_id": "r00001-00000000", "ts": "2026-12-01T10:00:00+00:00", "type": "round_settled",
                        "data": {"number": 1, "results": {}, "net_cents": {"1": 500000}}}
        online = {"schema": "threecard.status/1", "table_id": "pit2-tcp-07", "floor": "pit2", "online": True,
                  "ts": "2099-01-01T00:00:00+00:00", "head_seq": 1}
        attacker = keys.generate()
        moved = next(p for t, p in genuine if t == events_topic)
        forgeries = [
            (events_topic, json.dumps(forged_event), False),                      # unsigned, anonymous
            (status_topic, json.dumps(online), True),                             # a retained online: true
            (events_topic, sign_message(attacker, events_topic, forged_event), False),  # another key
            (status_topic, sign_message(attacker, status_topic, online), True),
            ("threecard/pit2/pit2-tcp-07/events", moved.decode().replace('"seq\\":1', '"seq\\":2'), False),  # changed
        ]
        for topic, payload, retain in forgeries:
            assert publish(broker.port, topic, payload, retain=retain) == 0  # this broker takes anything
        sent = {(t, p.encode() if isinstance(p, str) else p) for t, p, _ in forgeries}
        # the forgeries as the broker gave them, told by their bytes (not by their place: a
        # genuine message re-delivered late, under load, fell among them and passed as one)
        assert listener.wait(lambda got: len({(t, p) for t, p, _ in got} & sent) >= len(forgeries))
        received = sorted({(t, p) for t, p, _ in listener.got} & sent)
    finally:
        listener.close()
        broker.stop()
    accepted = [r["verify"](t, p, trusted) for t, p in genuine]
    assert {m["type"] for m in accepted if "type" in m} == {"table_opened"}
    assert any(m.get("online") is True for m in accepted)
    board = r["StatusBoard"]()
    assert board.update(next(m for m in accepted if "online" in m))
    for topic, payload in received:
        with pytest.raises(r["Forged"]):
            r["verify"](topic, payload, trusted)
        with pytest.raises(ForgedMessage):
            verify_message(payload, topic, key.public)
    # A genuine message moved to another table's topic fails too, and so does one moved to another kind.
    with pytest.raises(r["Forged"]):
        r["verify"]("threecard/pit2/pit2-tcp-08/events", moved, {"pit2-tcp-08": trusted["pit2-tcp-07"]})
    with pytest.raises(r["Forged"]):
        r["verify"](status_topic, moved, trusted)
    # One that crossed a bridge adding a prefix still checks out, in the recipe and in verify_message.
    assert r["verify"]("site-a/threecard/pit2/pit2-tcp-07/events", moved, trusted)["seq"] == 1
    assert verify_message(moved, "site-a/threecard/pit2/pit2-tcp-07/events", key.public)["seq"] == 1
    # After its connection's will, a genuine online: true of that connection (a replay) does not bring the
    # table back; its next connection does.
    old = next(m for m in accepted if m.get("online") is True)
    connected = (datetime.datetime.fromisoformat(old["ts"]) - datetime.timedelta(seconds=1)).isoformat()
    assert board.update({**old, "online": False, "will": True, "ts": connected})
    assert not board.update(old) and board.online["pit2-tcp-07"] is False
    later = (datetime.datetime.fromisoformat(old["ts"]) + datetime.timedelta(seconds=1)).isoformat()
    assert board.update({**old, "session": "a-new-connection", "ts": later}) and board.online["pit2-tcp-07"]


#: the documented broker config's bound on a message (deploy/mosquitto-threecard.conf)
LIMIT = next(line for line in (REPO / "deploy" / "mosquitto-threecard.conf").read_text().splitlines()
             if line.startswith("message_size_limit "))


def test_the_documented_acl_lets_a_table_publish_only_its_own_topics(tmp_path):
    folder = tmp_path / "acl-broker"
    folder.mkdir()
    passwd = folder / "passwd"
    accounts = {"pit2-tcp-07": "t7-secret-1", "pit2-tcp-08": "t8-secret-2", "floor-reader": "floor-secret-3"}
    for i, (user, pw) in enumerate(accounts.items()):
        subprocess.run(["mosquitto_passwd", "-b"] + (["-c"] if i == 0 else []) + [str(passwd), user, pw],
                       check=True, capture_output=True)
    port = free_port()
    broker = Broker(folder, port)
    broker.conf.write_text(broker.conf.read_text().replace("allow_anonymous true", "allow_anonymous false")
                           + f"password_file {passwd}\nacl_file {REPO / 'deploy' / 'mosquitto-threecard.acl'}\n"
                           + LIMIT + "\n")
    broker.start()
    floor = Listener(port, "threecard/#", user="floor-reader", password=accounts["floor-reader"])
    key = keys.generate()
    t7 = "threecard/pit2/pit2-tcp-07/events"
    try:
        assert publish(port, t7, "forged") != 0  # anonymous: not even connected
        assert publish(port, t7, "forged by the floor", user="floor-reader", password=accounts["floor-reader"]) == 0
        assert publish(port, t7, "forged by table 8", user="pit2-tcp-08", password=accounts["pit2-tcp-08"]) == 0
        # Past the documented message_size_limit, even from the table's own account: dropped by the broker.
        assert publish(port, t7, "x" * 300_000, user="pit2-tcp-07", password=accounts["pit2-tcp-07"]) == 0
        marker = sign_message(key, t7, {"table_id": "pit2-tcp-07", "n": 1})
        assert publish(port, t7, marker, user="pit2-tcp-07", password=accounts["pit2-tcp-07"]) == 0
        assert floor.wait(lambda got: any(p == marker.encode() for _, p, _ in got))
        payloads = [p for _, p, _ in floor.got]
    finally:
        floor.close()
        broker.stop()
    assert payloads == [marker.encode()]  # the forgeries published before it never reached the floor


def test_the_documented_acl_lets_only_the_floor_write_a_tables_receipt(tmp_path):
    """The floor's retained receipts (table/floor_anchor.py) are the evidence a floor database
    restored behind them meets: a table's own account (root at the table holds its password)
    cannot clear or replace them; the floor service's account can, and the table reads its own."""
    folder = tmp_path / "acl-broker"
    folder.mkdir()
    passwd = folder / "passwd"
    accounts = {"pit2-tcp-07": "t7-secret-1", "floor": "floor-secret-2"}
    for i, (user, pw) in enumerate(accounts.items()):
        subprocess.run(["mosquitto_passwd", "-b"] + (["-c"] if i == 0 else []) + [str(passwd), user, pw],
                       check=True, capture_output=True)
    port = free_port()
    broker = Broker(folder, port)
    broker.conf.write_text(broker.conf.read_text().replace("allow_anonymous true", "allow_anonymous false")
                           + f"password_file {passwd}\nacl_file {REPO / 'deploy' / 'mosquitto-threecard.acl'}\n")
    broker.start()
    topic = "threecard/pit2/pit2-tcp-07/receipt"
    table = Listener(port, topic, user="pit2-tcp-07", password=accounts["pit2-tcp-07"])
    try:
        assert publish(port, topic, "", retain=True, user="pit2-tcp-07", password=accounts["pit2-tcp-07"]) == 0
        assert publish(port, topic, "the floor's receipt", retain=True, user="floor",
                       password=accounts["floor"]) == 0
        assert table.wait(lambda got: any(p == b"the floor's receipt" for _, p, _ in got))
        payloads = [p for _, p, _ in table.got]
    finally:
        table.close()
        broker.stop()
    assert payloads == [b"the floor's receipt"]  # the table's clear never reached the broker's subscribers
