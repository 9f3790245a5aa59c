"""Event stream benchmarks (issue 9): events/s on the socket and to MQTT, card-to-socket latency.

    python bench/events.py [--json] [--rounds N] [--seats K] [--under-soak]

Deals ``--rounds`` simulated rounds (emulated shuffler and shoe on ptys, the
virtual dealer) through :class:`table.api.Table` with an event socket, with a
live socket consumer attached; then:

| figure | what |
| --- | --- |
| latency_ms p50 / p99 / max | from the virtual dealer pulling a card out of the shoe (the shoe emulator reads it) to its ``card_dealt`` line arriving at a live socket consumer: shoe → link → journal (fsync) → event log → socket |
| live_events_per_s | events over the socket while dealing (bounded by the table's pace) |
| socket_replay_events_per_s | a consumer resuming from 0: every event replayed from the journal through the socket |
| mqtt_events_per_s | the whole stream published from the journal to a local mosquitto (QoS 1, PUBACK-acknowledged) and received by a QoS 1 subscriber |

``--under-soak`` measures while a chaos soak (``tablectl soak``, its table clock
compressed, faults in 30% of the rounds) runs in another process on the same
machine: the load the issue 18 target (card read -> socket p99 < 5 ms) is set
under. The soak is stopped when the dealing ends.

MQTT figures need mosquitto (``apt-get install mosquitto``); without it they are null.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import structlog  # noqa: E402

from simulators import table as sim_table  # noqa: E402
from table.api import Table  # noqa: E402
from table.config import DeviceConfig, DevicesConfig, JournalSection, TableConfig, TableSection  # noqa: E402
from table.interfaces.event_socket import read_events  # noqa: E402
from table.events import EventLog  # noqa: E402


def _quiet() -> None:
    import logging

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def deal(work: Path, rounds: int, seats: int) -> dict:
    draws: list[float] = []
    original = sim_table.VirtualDealer.draw_card

    def timed_draw(self) -> None:  # the moment the card leaves the shoe
        draws.append(time.perf_counter())
        original(self)

    sim_table.VirtualDealer.draw_card = timed_draw
    cfg = TableConfig(TableSection("bench-tcp-01", seats),
                      DevicesConfig(DeviceConfig("/dev/threecard/shuffler"), DeviceConfig("/dev/threecard/shoe")),
                      journal=JournalSection(work / "journal.sqlite3"))
    sock = work / "events.sock"
    arrivals: list[tuple[float, dict]] = []
    stop = threading.Event()
    try:
        table = Table(cfg, simulate=True, seed=1, rounds=rounds, event_socket=sock)
        table.start()
        reader = threading.Thread(target=lambda: [arrivals.append((time.perf_counter(), e))
                                                  for e in read_events(sock, since=table.head_seq, stop=stop)],
                                  daemon=True)
        reader.start()
        t0 = time.perf_counter()
        table.wait(600)
        head = table.head_seq
        while (not arrivals or arrivals[-1][1]["seq"] < head) and time.perf_counter() - t0 < 600:
            time.sleep(0.005)
        live_s = arrivals[-1][0] - arrivals[0][0] if len(arrivals) > 1 else float("nan")
        # Replay: a consumer that resumes from 0 gets everything from the journal.
        r0 = time.perf_counter()
        n = sum(1 for _ in read_events(sock, since=0, follow=False))
        replay_s = time.perf_counter() - r0
        stop.set()
        table.stop()
        reader.join(5)
    finally:
        sim_table.VirtualDealer.draw_card = original
    cards = [t for t, e in arrivals if e["type"] == "card_dealt"]
    # The k-th card pulled is the k-th card_dealt (the reader attached before the first deal).
    lat = sorted((b - a) * 1000 for a, b in zip(draws[-len(cards):], cards))
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else [float("nan")] * 99
    return {
        "rounds": rounds, "seats": seats, "events": head, "cards": len(cards),
        "latency_ms": {"p50": round(q[49], 3), "p99": round(q[98], 3), "max": round(max(lat), 3) if lat else None},
        "live_events_per_s": round(len(arrivals) / live_s, 1) if live_s == live_s else None,
        "socket_replay_events_per_s": round(n / replay_s, 1),
        "socket_replayed": n,
    }


def mqtt(work: Path) -> dict | None:
    try:
        import paho.mqtt.client as paho
        from mqtt_broker import Broker, mosquitto_path

        from table.interfaces.mqtt import MqttPublisher
        from table.config import MqttSettings
    except ImportError:
        return None
    if mosquitto_path() is None:
        return None
    broker = Broker(work / "broker").start()
    got: set[int] = set()
    done = threading.Event()
    try:
        with EventLog(work / "journal.sqlite3", "bench-tcp-01") as log:
            head = log.head
            sub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="bench-sub")
            subscribed = threading.Event()

            def on_message(c, u, msg) -> None:
                got.add(json.loads(msg.payload)["seq"])
                if len(got) >= head:
                    done.set()

            sub.on_connect = lambda c, u, f, rc, p=None: c.subscribe("threecard/bench/+/events", qos=1)
            sub.on_subscribe = lambda *a: subscribed.set()
            sub.on_message = on_message
            sub.connect("127.0.0.1", broker.port)
            sub.loop_start()
            subscribed.wait(10)
            t0 = time.perf_counter()
            from table.keys import generate

            pub = MqttPublisher(log, MqttSettings(port=broker.port, floor="bench", state_path=work / "mqtt-state.json",
                                                  table_key=generate())).start()  # every message signed
            acked = pub.wait_acked(head, 300)
            t_acked = time.perf_counter() - t0
            done.wait(300)
            t_all = time.perf_counter() - t0
            pub.close()
            sub.disconnect()
            sub.loop_stop()
    finally:
        broker.stop()
    return {"events": head, "acked": acked, "received": len(got),
            "published_events_per_s": round(head / t_acked, 1),
            "mqtt_events_per_s": round(len(got) / t_all, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seats", type=int, default=7)
    ap.add_argument("--under-soak", action="store_true", help="deal while a chaos soak runs in another process")
    ap.add_argument("--no-mqtt", action="store_true", help="the socket figures only (no broker started)")
    args = ap.parse_args()
    _quiet()
    soak = None
    if args.under_soak:
        exe = shutil.which("tablectl", path=str(Path(sys.executable).parent))
        cmd = [exe] if exe else [sys.executable, "-c", "from table.cli import main; main()"]
        soak = subprocess.Popen(cmd + ["soak", "--rounds", "100000", "--seed", "1", "--json"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            out = {"socket": deal(work, args.rounds, args.seats)}
            if soak is not None:
                soak.terminate()
                soak.wait(30)
                soak = None
            out["mqtt"] = None if args.no_mqtt else mqtt(work)
    finally:
        if soak is not None:
            soak.terminate()
            soak.wait(30)
    out["under_soak"] = args.under_soak
    if args.json:
        print(json.dumps(out))
        return
    s, m = out["socket"], out["mqtt"]
    print(f"{s['events']} events, {s['cards']} cards in {s['rounds']} rounds of {s['seats']} seats")
    print(f"card read -> socket latency: p50 {s['latency_ms']['p50']} ms, p99 {s['latency_ms']['p99']} ms")
    print(f"socket: live {s['live_events_per_s']} events/s (table pace), replay {s['socket_replay_events_per_s']} events/s")
    print(f"mqtt: {m['mqtt_events_per_s']} events/s" if m else "mqtt: mosquitto not installed")


if __name__ == "__main__":
    main()
