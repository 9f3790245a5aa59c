"""The pit view behind a bridge: two real mosquitto brokers, the pit's (where the tables publish)
bridging ``threecard/#`` to a central one under ``site-a/`` with the config of docs/integration.md.
The pit view reads the central broker: the tables' signatures still verify (what is signed is the
table and the kind of message, not the topic), while a forged message and a genuine one replayed
under another table's topic, both published on the pit's broker and carried by the bridge, are
refused."""

from __future__ import annotations

import datetime
import threading
import time

import paho.mqtt.client as mqtt
import pytest
from console_helpers import wait_until
from mqtt_broker import mosquitto_path, start_bridged

from table import keys
from table.config import MqttSettings
from table.events import EventLog
from table.interfaces.mqtt import MqttPublisher, sign_message
from table.interfaces.pit import BrokerAddress, PitBoard, PitSubscriber
from table.journal import Journal

pytestmark = [pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed (.ci/run installs it)"),
              pytest.mark.timeout(120)]


def raw_client(port: int, on_message=None, topic: str | None = None) -> mqtt.Client:
    ready = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"raw-{time.monotonic_ns()}")
    c.on_connect = lambda cl, u, f, rc, p=None: cl.subscribe(topic, 1) if topic else ready.set()
    c.on_subscribe = lambda *a: ready.set()
    if on_message:
        c.on_message = on_message
    c.connect("127.0.0.1", port, 5)
    c.loop_start()
    assert ready.wait(10)
    return c


def close(c: mqtt.Client) -> None:
    c.disconnect()
    c.loop_stop()
    c._reset_sockets()


def test_the_pit_verifies_tables_across_a_prefixing_bridge_and_refuses_forged_and_replayed(tmp_path):
    edge, central = start_bridged(tmp_path, "site-a/")
    table_keys = {t: keys.generate() for t in ("pit2-tcp-07", "pit2-tcp-08")}
    board = PitBoard("pit2", {t: k.public for t, k in table_keys.items()})
    address = BrokerAddress.parse(f"mqtt://127.0.0.1:{central.port}/site-a")
    assert address.prefix == "site-a/"
    pit = PitSubscriber(board, address).start()
    seen_on_edge: list[tuple[str, bytes]] = []
    tap = raw_client(edge.port, lambda c, u, m: seen_on_edge.append((m.topic, m.payload)), "threecard/pit2/+/events")
    tables, logs = [], []
    try:
        wait_until(lambda: pit.connected, 15, "the pit view connected to the central broker")
        for table_id, key in table_keys.items():
            with Journal(tmp_path / f"{table_id}.sqlite3") as j:
                j.append("table_open", places={"A": "in_shoe"})
            logs.append(EventLog(tmp_path / f"{table_id}.sqlite3", table_id).__enter__())
            tables.append(MqttPublisher(logs[-1], MqttSettings(port=edge.port, floor="pit2", table_key=key,
                                                               state_path=tmp_path / f"{table_id}.json")).start())
        for t in tables:
            assert t.wait_acked(1, 20)

        def cards():
            return {c["table_id"]: c for c in board.snapshot()["tables"]}

        # Both tables online with their first event, from the central broker, signatures checked.
        wait_until(lambda: all(c["state"] == "online" and c["last_seq"] == 1 for c in cards().values()), 20,
                   "both tables online over the bridge")
        assert board.snapshot()["forged"] == 0
        # On the pit's broker: a forged round_settled for table 08, and table 07's genuine event
        # replayed under table 08's topic. The bridge carries both to the central broker.
        wait_until(lambda: any(t.endswith("pit2-tcp-07/events") for t, _ in seen_on_edge), 10, "07's event")
        genuine = next(p for t, p in seen_on_edge if t.endswith("pit2-tcp-07/events"))
        forged = sign_message(keys.generate(), "threecard/pit2/pit2-tcp-08/events",
                              {"schema": "threecard.events/1", "seq": 2, "table_id": "pit2-tcp-08",
                               "round_id": "r00001-00000000", "ts": datetime.datetime.now(datetime.UTC).isoformat(),
                               "type": "round_settled", "data": {"number": 1, "net_cents": {"1": 900000}}})
        attacker = raw_client(edge.port)
        try:
            attacker.publish("threecard/pit2/pit2-tcp-08/events", forged, qos=1).wait_for_publish(10)
            attacker.publish("threecard/pit2/pit2-tcp-08/events", genuine, qos=1).wait_for_publish(10)
        finally:
            close(attacker)
        wait_until(lambda: board.snapshot()["forged"] == 2, 15, "both refused")
        after = cards()["pit2-tcp-08"]
        assert after["last_seq"] == 1 and after["last_result"] is None  # nothing of them shown
        assert after["state"] == "online" and cards()["pit2-tcp-07"]["last_seq"] == 1
    finally:
        for t in tables:
            t.close()
        for lg in logs:
            lg.__exit__(None, None, None)
        close(tap)
        pit.close()
        edge.stop()
        central.stop()
