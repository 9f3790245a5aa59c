"""The floor's ingest rate: signed table messages into SQLite and PostgreSQL.

    python bench/floor_ingest.py [--json] [--tables N] [--rounds R] [--broker]

Builds a stream of genuinely signed messages for ``--tables`` tables (per round:
``round_opened``, 24 ``card_dealt``, ``decisions_final``, ``round_settled``,
``round_closed``, a ``checkpoint`` event and its retained copy, and a status every
5 rounds), then times them through :meth:`table.floor.ingest.Floor.receive` (each
signature checked with the table key, a checkpoint's own signature too) until the
writer has committed the last one:

| figure | what |
| --- | --- |
| sqlite.messages_per_s | the whole stream into a fresh SQLite file (WAL) |
| postgresql.messages_per_s | the same into a fresh database of a throwaway local cluster (initdb, a Unix socket; skipped without PostgreSQL) |
| verify_only_per_s | the signature checks alone, per CPU second (the ceiling of one ingest thread) |
| cpu_ms_per_message | process CPU (user + system) per message, this process only (PostgreSQL's own work is not counted) |
| per_core_per_s | messages per CPU second of this process: the rate of one core given to the floor alone (the wall rate above shares the machine's cores with the broker, PostgreSQL and anything else running) |
| broker.messages_per_s / cpu_ms_per_message / per_core_per_s | with ``--broker``: published by another process to a local mosquitto (QoS 1) and taken by the floor's feed (paho) into SQLite; the CPU is this process's, the floor's alone |

Signing the stream is done before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def build(folder: Path, tables: int, rounds: int) -> tuple[list[tuple[str, bytes]], Path]:
    from floor_helpers import SignedTable

    keys = folder / "keys"
    out: list[tuple[str, bytes]] = []
    streams = []
    for n in range(tables):
        t = SignedTable(folder / "t", f"pit1-tcp-{n:03d}")
        t.publish_key(keys)
        msgs = []
        for r in range(rounds):
            opened, card, settled = t.round(r + 1)
            msgs += [opened, *[card] * 24, t.event("decisions_final", {"number": r + 1, "seats": {}}, "r"), settled,
                     t.event("round_closed", {"number": r + 1, "voided": False}, "r")]
            cp = t.checkpoint(entries=2)
            msgs += [t.event("checkpoint", cp), t.retained(cp)]
            if r % 5 == 0:
                msgs.append(t.status())
        t.close()
        streams.append(msgs)
    for i in range(max(len(s) for s in streams)):  # the tables interleaved, as a broker delivers them
        out += [(tp, p.encode()) for s in streams if i < len(s) for tp, p in [s[i]]]
    return out, keys


def run(url: str, stream: list[tuple[str, bytes]], keys: Path) -> dict:
    from table.floor.ingest import Floor
    from table.floor.store import open_store
    from table.interfaces.brokers import load_table_keys

    store = open_store(url)
    floor = Floor(store, load_table_keys(keys)).start()
    c0, t0 = os.times(), time.perf_counter()
    for topic, payload in stream:
        floor.receive(topic, payload)
    floor.wait_idle(600)
    took, c1 = time.perf_counter() - t0, os.times()
    counts = floor.counts
    floor.close()
    store.close()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    assert counts.forged == 0 and counts.verified == len(stream), counts
    return {"messages": len(stream), "seconds": round(took, 3), "messages_per_s": round(len(stream) / took),
            "cpu_ms_per_message": round(1000 * cpu / len(stream), 4),
            "per_core_per_s": round(len(stream) / max(cpu, 1e-6)), "refused_checkpoints": counts.refused_checkpoints}


def verify_only(stream: list[tuple[str, bytes]], keys: Path) -> float:
    from table.interfaces.mqtt import verify_message
    from table.interfaces.brokers import load_table_keys

    k = load_table_keys(keys)
    t0 = time.process_time()  # CPU, not wall: the machine may be shared
    for topic, payload in stream:
        verify_message(payload, topic, k)
    return round(len(stream) / max(time.process_time() - t0, 1e-6))


def publish_main(port: int, stream_file: Path) -> None:
    """The tables' side of ``--broker``, a process of its own (so the floor's process CPU is the
    floor's alone): every ``topic\tpayload`` line of ``stream_file`` published QoS 1 to the
    broker on ``port`` (checkpoints and statuses retained), then ``done`` on stdout."""
    import paho.mqtt.client as mqtt

    stream = [line.split("\t", 1) for line in stream_file.read_text().splitlines()]
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-tables-{os.getpid()}")
    pub.max_inflight_messages_set(200)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    infos = [pub.publish(tp, p, qos=1, retain=tp.endswith(("/checkpoint", "/status"))) for tp, p in stream]
    for info in infos:
        info.wait_for_publish(120)
    pub.disconnect()
    pub.loop_stop()
    print("done", flush=True)


def via_broker(folder: Path, stream: list[tuple[str, bytes]], keys: Path) -> dict:
    """The stream published by another process to a local mosquitto and taken by the floor's
    feed (paho, QoS 1) into SQLite: wall rate, and this process's CPU (the floor's alone)."""
    import subprocess

    from table.floor.ingest import BrokerFeed, Floor
    from table.floor.store import open_store
    from table.interfaces.brokers import BrokerAddress, load_table_keys

    from mqtt_broker import Broker

    stream_file = folder / "stream.tsv"
    stream_file.write_text("".join(f"{tp}\t{p.decode()}\n" for tp, p in stream))
    broker = Broker(folder / "broker").start()
    store = open_store(str(folder / "broker-floor.sqlite3"))
    floor = Floor(store, load_table_keys(keys)).start()
    feed = BrokerFeed(floor, BrokerAddress("127.0.0.1", broker.port, False)).start()
    feed.connected.wait(20)
    c0, t0 = os.times(), time.perf_counter()
    tables = subprocess.Popen([sys.executable, __file__, "--publish", str(broker.port), str(stream_file)],
                              stdout=subprocess.PIPE, text=True)
    try:
        floor.wait_for(lambda: floor.counts.received >= len(stream), 300)
        floor.wait_idle(300)
        took, c1 = time.perf_counter() - t0, os.times()
        assert tables.stdout.readline().strip() == "done"
    finally:
        tables.wait(60)
        tables.stdout.close()
        feed.close()
        floor.close()
        store.close()
        broker.stop()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    return {"messages": len(stream), "seconds": round(took, 3), "messages_per_s": round(len(stream) / took),
            "cpu_ms_per_message": round(1000 * cpu / len(stream), 4),
            "per_core_per_s": round(len(stream) / max(cpu, 1e-6))}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--publish":
        publish_main(int(sys.argv[2]), Path(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tables", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--broker", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="floor-bench-") as tmp:
        folder = Path(tmp)
        stream, keys = build(folder, args.tables, args.rounds)
        result: dict = {"tables": args.tables, "rounds_per_table": args.rounds,
                        "verify_only_per_s": verify_only(stream, keys),
                        "sqlite": run(str(folder / "floor.sqlite3"), stream, keys)}
        from pg_server import PgCluster, pg_bin

        if pg_bin() is not None:
            cluster = PgCluster().start()
            try:
                result["postgresql"] = run(cluster.create_database(), stream, keys)
            finally:
                cluster.stop()
        else:
            result["postgresql"] = None
        if args.broker:
            result["broker"] = via_broker(folder, stream, keys)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
