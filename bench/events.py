"""Event stream benchmarks: events/s on the socket and to MQTT, card-to-socket latency.

    python bench/events.py [--json] [--rounds N] [--seats K] [--under-soak] [--baseline DIR [--pairs N]]

Deals ``--rounds`` simulated rounds (emulated shuffler and shoe on ptys, the
virtual dealer) through :class:`table.api.Table` with an event socket, with a
live socket consumer attached; then:

| figure | what |
| --- | --- |
| latency_ms p50 / p99 / max | from the virtual dealer pulling a card out of the shoe (the shoe emulator reads it) to its ``card_dealt`` line arriving at a live socket consumer: shoe → link → journal (fsync) → event log → socket |
| live_events_per_s | events over the socket while dealing (bounded by the table's pace) |
| socket_replay_events_per_s | a consumer resuming from 0: every event replayed from the journal through the socket |
| mqtt.live.latency_ms p50 / p99 / max | the same deal again, the table also publishing to a local mosquitto: from the card leaving the shoe to a QoS 1 subscriber holding its ``card_dealt`` event, the signed envelope opened (signature checked against the table key) |
| mqtt.socket_latency_ms_with_mqtt | the socket latency of that second deal (the table signing and publishing too) |
| mqtt_events_per_s | the whole stream published from the journal to a local mosquitto (QoS 1, PUBACK-acknowledged, every message signed) and received by a QoS 1 subscriber that opens each envelope |

``--under-soak`` measures while a chaos soak (``tablectl soak``, its table clock
compressed, faults in 30% of the rounds) runs in another process on the same
machine: the load the target (card read -> socket p99 < 5 ms) is set
under. The soak is stopped when the dealing ends.

``--baseline DIR``: another checkout's table (``git archive <commit> | tar -x -C DIR``)
dealt the same way, alternately with this one's, each in a process of its own, beside
one soak with ``--under-soak``: the socket latency of each, its limit (p99 < 5 ms
beside a soak) and this ÷ base, from one run.

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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the checkout whose table is measured: this one, or ``--tree DIR`` (a baseline's turn)
TREE = Path(sys.argv[sys.argv.index("--tree") + 1]).resolve() if "--tree" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(TREE))

import structlog  # noqa: E402

from simulators import table as sim_table  # noqa: E402
from table.api import Table  # noqa: E402
from table.config import DeviceConfig, DevicesConfig, JournalSection, TableConfig, TableSection  # noqa: E402
from table.interfaces.event_socket import read_events  # noqa: E402
from table.events import EventLog  # noqa: E402


def _quiet() -> None:
    import logging

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


class Arrivals:
    """What a consumer received, with the moment it had each event (perf_counter);
    :meth:`wait_for` waits (on a condition, bounded) until it has ``seq``."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict]] = []
        self.top = 0  # the highest seq received
        self._cv = threading.Condition()

    def add(self, ev: dict) -> None:
        t = time.perf_counter()
        with self._cv:
            self.got.append((t, ev))
            self.top = max(self.top, ev["seq"])
            self._cv.notify_all()

    def wait_for(self, seq: int, timeout_s: float) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self.top >= seq, timeout_s)


def _latency(draws: list[float], arrivals: list[tuple[float, dict]]) -> tuple[list[float], dict]:
    """Card read -> arrival of its ``card_dealt`` event (ms), sorted; and p50/p99/max.
    The k-th card pulled is the k-th card_dealt (the consumer attached before the
    first deal; events arrive in seq order)."""
    cards = [t for t, e in sorted(arrivals, key=lambda a: a[1]["seq"]) if e["type"] == "card_dealt"]
    lat = sorted((b - a) * 1000 for a, b in zip(draws[-len(cards):], cards)) if cards else []
    q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else [float("nan")] * 99
    return lat, {"p50": round(q[49], 3), "p99": round(q[98], 3), "max": round(max(lat), 3) if lat else None}


def deal(work: Path, rounds: int, seats: int, broker: Any = None) -> dict:
    """Deal ``rounds`` rounds with a live socket consumer; with ``broker`` (a running
    mosquitto) the table also publishes to MQTT (signed envelopes) and a QoS 1
    subscriber opens each envelope (signature checked against the table key, as
    a floor subscriber does) the moment it arrives."""
    work.mkdir(parents=True, exist_ok=True)
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
    on_socket, on_mqtt = Arrivals(), Arrivals()
    stop = threading.Event()
    sub = settings = None
    forged: list[str] = []
    if broker is not None:
        from table.interfaces.mqtt import ForgedMessage, verify_message
        from table.config import MqttSettings
        from table.keys import generate

        key = generate()
        settings = MqttSettings(port=broker.port, floor="bench", state_path=work / "mqtt-state.json", table_key=key)
        sub, subscribed = _subscriber(broker.port, "bench-live-sub")

        def on_message(c, u, msg) -> None:
            try:
                on_mqtt.add(verify_message(msg.payload, msg.topic, key.public))  # the envelope opened
            except ForgedMessage as exc:
                forged.append(str(exc))

        sub.on_message = on_message
        sub.loop_start()
        if not subscribed.wait(10):
            raise RuntimeError("the MQTT subscriber did not subscribe")
    try:
        table = Table(cfg, simulate=True, seed=1, rounds=rounds, event_socket=sock, mqtt=settings)
        table.start()
        # from the journal's start: under load the table may deal a card before the reader attaches
        reader = threading.Thread(target=lambda: [on_socket.add(e)
                                                  for e in read_events(sock, since=0, stop=stop)],
                                  daemon=True)
        reader.start()
        table.wait(600)
        head = table.head_seq
        on_socket.wait_for(head, 600)
        if sub is not None:
            on_mqtt.wait_for(head, 600)
        arrivals = on_socket.got
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
        if sub is not None:
            sub.disconnect()
            sub.loop_stop()
    lat, figures = _latency(draws, on_socket.got)
    out = {
        "rounds": rounds, "seats": seats, "events": head, "cards": len(lat),
        "latency_ms": figures,
        "live_events_per_s": round(len(arrivals) / live_s, 1) if live_s == live_s else None,
        "socket_replay_events_per_s": round(n / replay_s, 1),
        "socket_replayed": n,
    }
    if sub is not None:
        mlat, mfig = _latency(draws, on_mqtt.got)
        out["mqtt"] = {"events": len(on_mqtt.got), "cards": len(mlat), "latency_ms": mfig, "forged": len(forged)}
    return out


def _subscriber(port: int, client_id: str) -> tuple[Any, threading.Event]:
    """A QoS 1 subscriber to every table's events on floor ``bench`` (not started)."""
    import paho.mqtt.client as paho

    sub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id)
    subscribed = threading.Event()
    sub.on_connect = lambda c, u, f, rc, p=None: c.subscribe("threecard/bench/+/events", qos=1)
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.connect("127.0.0.1", port)
    return sub, subscribed


def mqtt_broker(work: Path) -> Any:
    """A local mosquitto, or None (paho-mqtt or mosquitto missing)."""
    try:
        import paho.mqtt.client  # noqa: F401
        from mqtt_broker import Broker, mosquitto_path
    except ImportError:
        return None
    if mosquitto_path() is None:
        return None
    return Broker(work / "broker").start()


def mqtt_throughput(work: Path, broker: Any) -> dict:
    """The whole stream of ``work``'s journal published (QoS 1, PUBACK-acknowledged, every
    message signed) and received by a QoS 1 subscriber that opens each envelope."""
    from table.interfaces.mqtt import MqttPublisher, verify_message
    from table.config import MqttSettings
    from table.keys import generate

    key = generate()
    got: set[int] = set()
    done = threading.Event()
    with EventLog(work / "journal.sqlite3", "bench-tcp-01") as log:
        head = log.head
        sub, subscribed = _subscriber(broker.port, "bench-sub")

        def on_message(c, u, msg) -> None:
            got.add(verify_message(msg.payload, msg.topic, key.public)["seq"])
            if len(got) >= head:
                done.set()

        sub.on_message = on_message
        sub.loop_start()
        subscribed.wait(10)
        t0 = time.perf_counter()
        pub = MqttPublisher(log, MqttSettings(port=broker.port, floor="bench", state_path=work / "mqtt-replay.json",
                                              table_key=key)).start()
        acked = pub.wait_acked(head, 300)
        t_acked = time.perf_counter() - t0
        done.wait(300)
        t_all = time.perf_counter() - t0
        pub.close()
        sub.disconnect()
        sub.loop_stop()
    return {"events": head, "acked": acked, "received": len(got),
            "published_events_per_s": round(head / t_acked, 1),
            "mqtt_events_per_s": round(len(got) / t_all, 1)}


#: the card read -> event socket p99 limit (ms), with a soak beside the table
P99_LIMIT_MS = 5.0


def against_baseline(args: argparse.Namespace) -> None:
    """This checkout's table and the baseline's, dealt alternately (each its own process,
    ``--pairs`` turns each) beside one soak when ``--under-soak``: the card read -> socket
    latency of each beside the limit, and this ÷ base (medians of the turns, one run)."""
    soak = _soak() if args.under_soak else None
    runs: dict[str, list[dict]] = {"this": [], "base": []}
    try:
        for _ in range(args.pairs):
            for name, tree in (("this", ROOT), ("base", Path(args.baseline).resolve())):
                r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json", "--no-mqtt", "--rounds",
                                    str(args.rounds), "--seats", str(args.seats), "--tree", str(tree)],
                                   capture_output=True, text=True, timeout=1800)
                if r.returncode:
                    raise SystemExit(f"{name}: {r.stderr.strip()[-800:]}")
                runs[name].append(json.loads(r.stdout)["socket"]["latency_ms"])
    finally:
        if soak is not None:
            soak.terminate()
            soak.wait(30)
    out: dict[str, Any] = {"under_soak": args.under_soak, "pairs": args.pairs, "limit_p99_ms": P99_LIMIT_MS}
    for name, rs in runs.items():
        out[name] = {k: round(statistics.median(r[k] for r in rs), 3) for k in ("p50", "p99", "max")}
    out["ratio"] = {k: round(out["this"][k] / out["base"][k], 3) if out["base"][k] else None for k in ("p50", "p99", "max")}
    if args.json:
        print(json.dumps(out))
        return
    print(f"card read -> event socket latency (ms), {args.rounds} rounds of {args.seats} seats, "
          f"{'beside a soak' if args.under_soak else 'alone'}, medians of {args.pairs} turns each:")
    for k in ("p50", "p99", "max"):
        limit = f"  (limit < {P99_LIMIT_MS})" if k == "p99" else ""
        print(f"  {k:<4} this {out['this'][k]:>8}  base {out['base'][k]:>8}  ratio {out['ratio'][k]}{limit}")


def _soak() -> subprocess.Popen:
    """A chaos soak in a process of its own (this checkout's), until terminated."""
    exe = shutil.which("tablectl", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-c", "from table.cli import main; main()"]
    return subprocess.Popen(cmd + ["soak", "--rounds", "100000", "--seed", "1", "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seats", type=int, default=7)
    ap.add_argument("--under-soak", action="store_true", help="deal while a chaos soak runs in another process")
    ap.add_argument("--no-mqtt", action="store_true", help="the socket figures only (no broker started)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout's table, dealt alternately with this one's "
                                                       "(socket figures only), beside the soak when --under-soak")
    ap.add_argument("--pairs", type=int, default=2, help="--baseline: turns of each checkout (default 2)")
    ap.add_argument("--tree", metavar="DIR", help=argparse.SUPPRESS)  # read before the imports (TREE)
    args = ap.parse_args()
    _quiet()
    if args.baseline:
        return against_baseline(args)
    soak = None
    if args.under_soak:
        soak = _soak()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            out = {"socket": deal(work / "socket", args.rounds, args.seats)}
            out["mqtt"] = None
            broker = None if args.no_mqtt else mqtt_broker(work)
            if broker is not None:
                try:  # the same deal again, the table also publishing to MQTT
                    live = deal(work / "mqtt", args.rounds, args.seats, broker)
                    if soak is not None:
                        soak.terminate()
                        soak.wait(30)
                        soak = None
                    out["mqtt"] = {"live": live["mqtt"], "socket_latency_ms_with_mqtt": live["latency_ms"],
                                   **mqtt_throughput(work / "mqtt", broker)}
                finally:
                    broker.stop()
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
    if m:
        ml = m["live"]["latency_ms"]
        print(f"card read -> MQTT subscriber (envelope opened) latency: p50 {ml['p50']} ms, p99 {ml['p99']} ms, "
              f"max {ml['max']} ms ({m['live']['cards']} cards, {m['live']['forged']} refused)")
        print(f"mqtt: {m['mqtt_events_per_s']} events/s received, {m['published_events_per_s']} events/s acknowledged")
    else:
        print("mqtt: not measured (--no-mqtt, or mosquitto / paho-mqtt not installed)")


if __name__ == "__main__":
    main()
