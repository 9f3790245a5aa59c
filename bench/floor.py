"""Floor bench: N synthetic tables through two bridged mosquitto brokers into the pit view.

    python bench/floor.py [--tables 50,200,500] [--rate-per-table 0.74] [--seconds 15]
                          [--pages 1,5] [--blast 6000] [--floor none,sqlite,postgresql] [--json]

For each table count N: two real mosquitto brokers, the tables' (edge) bridging
``threecard/#`` to a central one under ``site-a/`` with the config of
docs/integration.md ("A two-broker bridge"); N table keys; ``tablectl pit serve
--broker mqtt://127.0.0.1:CENTRAL/site-a`` (its own process) reading the
central broker; a publisher process playing the N tables: a retained signed
``online: true`` status each, then signed events (QoS 1) in the order of a
round (round_opened, bets_closed, 6 card_dealt, decisions_final,
dealer_revealed, round_settled, round_closed), tables taking turns, at
``N * rate_per_table`` messages/s (0.74 a table: 370/s at 500 tables, the
issue's figure; a busy floor is about 260/s).

| figure | what |
| --- | --- |
| paced.pages_P.pit_cpu_core | the pit process's CPU (user + system, /proc) over the paced phase, as a fraction of one core, with P pages open |
| paced.pages_P.page_resyncs | pages sent the whole board again because they fell more than 32 frames behind (the pages' fault, not the pit's) |
| paced.pages_P.cpu_us_per_message | that CPU divided by the messages the pit took (verified) |
| paced.pages_P.broker_latency_ms p50 / p99 / max | the same stamp to a plain subscriber of the pit's broker: the part of the page latency that is the brokers' and the bridge's, not the pit's |
| paced.pages_P.framed_latency_ms p50 / p99 / max | the same stamp to the pit making the frame that carries it (the frame's ``ts``): page latency minus this is the WebSocket delivery and the page's decoding |
| paced.pages_P.floor_cpu_core / floor_cpu_us_per_message / db_cpu_core | with ``--floor``: the floor's CPU (a fraction of a core, and per message the pit took), and on PostgreSQL the cluster's own processes' (the floor's backend, the WAL writer) |
| paced.pages_P.loadavg | the machine's 1-minute load average at the start and end of the phase (the machine may be shared) |
| paced.pages_P.page_latency_ms p50 / p99 / max | from the publisher stamping a ``round_settled`` (its ``ts``, wall clock) to each open page holding that table's card with that result: publisher -> edge broker -> bridge -> central broker -> pit (signature checked) -> delta frame -> page |
| blast.ingest_per_s | the pit stopped (SIGSTOP), ``--blast`` messages (signed beforehand) published and carried over the bridge to the pit's broker, then the pit let go (SIGCONT), one page open: the messages it took per second, first to last (its counters): what the pit can take, not the brokers |
| blast.pit_cpu_core / cpu_us_per_message / per_core_per_s | the pit's CPU over that drain; messages per CPU second |
| blast.floor_taken / floor_ingest_per_s / floor_cpu_core / floor_per_core_per_s | with ``--floor``: the floor stopped and let go with the pit, its own drain through mosquitto: what it received, per second, its CPU, and per CPU second of its process (``floor_with_db_per_core_per_s``: PostgreSQL's CPU counted too) |
| limits | the limits beside the figures as ratios (figure / limit): page p99 <= 250 ms at 500 tables, 5 pages, PostgreSQL, 370 messages/s; floor ingest >= 5,000 messages per core-second |
| frame_ms.full / delta_1_with_verify | in this process: encoding the whole board of N tables (a page's first frame, and what every change cost each page before the signed/2 release), and taking one message (its signature checked) plus encoding its delta |

Pages are WebSocket clients in this process (``websockets``), each decoding every
frame and keeping the board as the page does; not real Chromium pages
(``bench/web.py`` measures a real page). ``--floor`` runs every table count once
per entry: ``none`` (the pit alone), ``sqlite`` or ``postgresql`` (``tablectl
floor serve`` beside the pit, on the same central broker behind the bridge, on a
SQLite file or a database of a throwaway local PostgreSQL cluster,
tests/pg_server.py); each run then also has ``floor``: the floor's CPU (a
fraction of a core) and per message, and what it stored and refused (its
``/api/v1/floor/health``).

Needs mosquitto and paho-mqtt. Keep it short on a shared machine: it runs each
table count once (``--seconds`` per paced phase).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

PIT = "bench"
PREFIX = "site-a/"
CYCLE = (["round_opened", "bets_closed"] + ["card_dealt"] * 6
         + ["decisions_final", "dealer_revealed", "round_settled", "round_closed"])


def tablectl() -> list[str]:
    exe = Path(sys.executable).parent / "tablectl"
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from table.cli import main; main()"]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (and its reaped children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cluster_cpu_s(data_dir: Path) -> float:
    """User + system CPU seconds of a PostgreSQL cluster's processes now running (the
    postmaster of ``data_dir`` and its children: the floor's backend, the WAL writer...)."""
    try:
        master = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(stat.parent.name) == master or int(fields[1]) == master:
            total += sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    return total


def loadavg() -> float:
    """The machine's 1-minute load average (the machine may be shared: stated with each run)."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


# -- the publisher: its own process, playing every table ------------------------------------

def sign_v1(key: Any, topic: str, message: dict) -> str:
    """The envelope of the release before signed/2 (threecard.signed/1, signed over the topic)."""
    import base64

    payload = json.dumps(message, separators=(",", ":"))
    sig = key.sign(b"threecard.signed/1\n" + topic.encode() + b"\n" + payload.encode())
    return json.dumps({"schema": "threecard.signed/1", "key_id": key.key_id, "payload": payload,
                       "sig": base64.b64encode(sig).decode()}, separators=(",", ":"))


def publisher_main(edge_port: int, keys_dir: Path, v1: bool = False) -> None:
    """Reads commands on stdin: ``online``, ``pace RATE SECONDS``, ``blast K``, ``quit``;
    answers ``done ...`` on stdout. ``v1``: sign as the release before signed/2 did."""
    import paho.mqtt.client as mqtt

    from table.interfaces import mqtt as signing
    from table.keys import load_table_key

    sign_message = sign_v1 if v1 else signing.sign_message

    tables = sorted(p.name[:-4] for p in keys_dir.glob("*.pem"))
    keys = {t: load_table_key(keys_dir / f"{t}.pem") for t in tables}
    # Tables at different points of their rounds, so every phase sees round_settled from many.
    seq = {t: (i * 5) % len(CYCLE) for i, t in enumerate(tables)}
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-tables-{os.getpid()}")
    client.max_inflight_messages_set(1000)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", edge_port, 30)
    client.loop_start()
    turn = {"i": 0}

    def next_event() -> tuple[str, str]:
        t = tables[turn["i"] % len(tables)]
        turn["i"] += 1
        seq[t] += 1
        s = seq[t]
        kind = CYCLE[(s - 1) % len(CYCLE)]
        number = (s - 1) // len(CYCLE) + 1
        data: dict[str, Any] = {"number": number}
        if kind == "round_settled":
            data["net_cents"] = {"1": 500, "2": -1000}
        topic = f"threecard/{PIT}/{t}/events"
        ev = {"schema": "threecard.events/1", "seq": s, "journal_seq": s, "table_id": t,
              "round_id": f"r{number:05d}-00000000", "ts": now_iso(), "type": kind, "data": data}
        return topic, sign_message(keys[t], topic, ev)

    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "online":
            infos = []
            for t in tables:
                topic = f"threecard/{PIT}/{t}/status"
                status = {"schema": "threecard.status/1", "table_id": t, "floor": PIT, "online": True,
                          "ts": now_iso(), "head_seq": seq[t]}
                infos.append(client.publish(topic, sign_message(keys[t], topic, status), qos=1, retain=True))
            for info in infos:
                info.wait_for_publish(30)
            print("done online", flush=True)
        elif cmd[0] == "pace":
            rate, seconds = float(cmd[1]), float(cmd[2])
            start = time.monotonic()
            n = 0
            while time.monotonic() - start < seconds:
                due = start + n / rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing the synthetic tables
                client.publish(*next_event(), qos=1)
                n += 1
            print(f"done pace {n} {time.monotonic() - start:.3f}", flush=True)
        elif cmd[0] == "blast":
            k = int(cmd[1])
            messages = [next_event() for _ in range(k)]  # signed beforehand: the publisher is not the limit
            print("ready", flush=True)
            sys.stdin.readline()
            start = time.monotonic()
            infos = [client.publish(t, p, qos=1) for t, p in messages]
            for info in infos:
                info.wait_for_publish(120)
            print(f"done blast {k} {time.monotonic() - start:.3f}", flush=True)
        elif cmd[0] == "quit":
            break
    client.disconnect()
    client.loop_stop()


class Publisher:
    def __init__(self, edge_port: int, keys_dir: Path, v1: bool = False) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--publisher" + ("-v1" if v1 else ""), str(edge_port),
                                      str(keys_dir)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def ask(self, line: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer:
            raise RuntimeError(f"the publisher stopped (asked {line!r})")
        return answer

    def close(self) -> None:
        try:
            self.ask("quit")
        except (RuntimeError, BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# -- pages: WebSocket clients keeping the board as the page does ---------------------------

class Pages:
    """``n`` pages on the pit's WebSocket, in a thread of their own (an asyncio loop)."""

    def __init__(self, url: str, n: int) -> None:
        self.url = url.replace("http://", "ws://") + "/api/v1/pit/ws"
        self.n = n
        self.latencies: list[float] = []
        self.framed: list[float] = []  # the stamp to the frame carrying it made by the pit (its ts)
        self.frames = 0
        self.bytes = 0
        self.ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()
        if not self.ready.wait(60):
            raise RuntimeError("the pages did not get their first frame")

    async def _page(self, started: list) -> None:
        from websockets.asyncio.client import connect

        seen: dict[str, Any] = {}
        async with connect(self.url, max_size=None, open_timeout=30) as ws:
            first = True
            while not self._stop.is_set():
                try:
                    text = await asyncio.wait_for(ws.recv(), 0.5)
                except asyncio.TimeoutError:
                    continue
                got = time.time()
                frame = json.loads(text)
                self.frames += 1
                self.bytes += len(text)
                for card in frame.get("tables", []):
                    r = card.get("last_result")
                    key = (r or {}).get("round_id")
                    if key and seen.get(card["table_id"]) != key:
                        seen[card["table_id"]] = key
                        if not first:
                            ts = _dt.datetime.fromisoformat(r["ts"]).timestamp()
                            self.latencies.append((got - ts) * 1000)
                            self.framed.append((_dt.datetime.fromisoformat(frame["ts"]).timestamp() - ts) * 1000)
                if first:
                    first = False
                    started.append(1)
                    if len(started) == self.n:
                        self.ready.set()

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        started: list = []
        await asyncio.gather(*(self._page(started) for _ in range(self.n)))

    def reset(self) -> None:
        self.latencies = []

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


class Tap:
    """A plain subscriber on the pit's broker: the latency from a table stamping its
    ``round_settled`` to the message reaching that broker (publisher -> edge broker ->
    bridge -> central broker), the part of the page latency that is not the pit's."""

    def __init__(self, port: int, topic: str) -> None:
        import paho.mqtt.client as mqtt

        self.latencies: list[float] = []
        ready = threading.Event()
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-tap-{os.getpid()}-{time.monotonic_ns()}")
        self.c.on_connect = lambda c, u, f, rc, p=None: c.subscribe(topic, 1)
        self.c.on_subscribe = lambda *a: ready.set()
        self.c.on_message = self._message
        self.c.connect("127.0.0.1", port, 30)
        self.c.loop_start()
        if not ready.wait(30):
            raise RuntimeError("the tap did not subscribe")

    def _message(self, c: Any, u: Any, m: Any) -> None:
        if b"round_settled" in m.payload:
            got = time.time()
            ts = json.loads(json.loads(m.payload)["payload"])["ts"]
            self.latencies.append((got - _dt.datetime.fromisoformat(ts).timestamp()) * 1000)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def counts(url: str) -> dict:
    """The pit's counters (``accepted``, ``forged``); before the signed/2 release the pit had none: the
    tables' ``last_seq`` summed stands for ``accepted`` there."""
    with urllib.request.urlopen(url + "/api/v1/pit", timeout=30) as r:
        board = json.loads(r.read())
    if "counts" in board:
        return board["counts"]
    return {"accepted": sum(t["last_seq"] for t in board["tables"]) + sum(1 for t in board["tables"] if t["online"]),
            "forged": board["forged"]}


def accepted(url: str) -> int:
    return counts(url)["accepted"]


def pct(values: list[float]) -> dict | None:
    if not values:
        return None
    v = sorted(values)
    q = statistics.quantiles(v, n=100, method="inclusive") if len(v) > 1 else [v[0]] * 99
    return {"p50": round(q[49], 1), "p99": round(q[98], 1), "max": round(v[-1], 1), "n": len(v)}


def frame_costs(n: int) -> dict:
    """Encoding the whole board of ``n`` tables vs a delta of one table (ms, in this process)."""
    from table.interfaces.mqtt import sign_message
    from table.interfaces.pit import PitBoard
    from table.keys import generate

    key = generate()
    ids = [f"t-{i:04d}" for i in range(n)]
    board = PitBoard(PIT, {t: key.public for t in ids})
    for t in ids:
        for s, kind in enumerate(CYCLE[:11], 1):
            topic = f"threecard/{PIT}/{t}/events"
            board.receive(topic, sign_message(key, topic, {"schema": "threecard.events/1", "seq": s, "table_id": t,
                                                           "round_id": "r00001-00000000", "ts": now_iso(),
                                                           "type": kind, "data": {"number": 1,
                                                                                  "net_cents": {"1": 500}}}).encode())
    board.take_delta()
    reps = 20
    start = time.perf_counter()
    for _ in range(reps):
        json.dumps(board.snapshot(), separators=(",", ":"))
    full = (time.perf_counter() - start) / reps * 1000
    topic = f"threecard/{PIT}/t-0000/events"
    signed = [sign_message(key, topic, {"schema": "threecard.events/1", "seq": 100 + i, "table_id": "t-0000",
                                        "round_id": "r00001-00000000", "ts": now_iso(), "type": "card_dealt",
                                        "data": {}}).encode() for i in range(reps)]
    start = time.perf_counter()
    for raw in signed:  # one message taken (signature checked) and its delta frame encoded
        board.receive(topic, raw)
        json.dumps(board.take_delta(), separators=(",", ":"))
    delta = (time.perf_counter() - start) / reps * 1000
    return {"full": round(full, 2), "delta_1_with_verify": round(delta, 3)}


def floor_received(floor_url: str) -> int:
    """What the floor has received (verified or refused): its ``/api/v1/floor/health``."""
    with urllib.request.urlopen(floor_url + "/api/v1/floor/health", timeout=30) as r:
        return int(json.loads(r.read())["counts"]["received"])


def blast(n: int, k: int, url: str, pit: subprocess.Popen, publisher: Publisher, port: int, topic: str,
          floor: subprocess.Popen | None = None, floor_url: str = "", pg_data: Path | None = None) -> dict:
    """The pit's ingest rate: the pit stopped (SIGSTOP), ``k`` signed messages published and
    carried to the broker it reads (counted there by a subscriber of this process), then the
    pit let go (SIGCONT): the messages it takes per second, first to last, one page open.
    With ``floor`` (``tablectl floor serve`` on the same broker), the floor is stopped and let
    go with the pit, and its own drain is measured the same way (``floor_*``: what it received,
    its CPU, and with ``pg_data`` PostgreSQL's): the floor's ingest through mosquitto."""
    import signal

    import paho.mqtt.client as mqtt

    got = {"n": 0}
    ready = threading.Event()
    tap = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bench-tap-{os.getpid()}")
    tap.on_connect = lambda c, u, f, rc, p=None: c.subscribe(topic, 0)
    tap.on_subscribe = lambda *a: ready.set()
    tap.on_message = lambda c, u, m: got.__setitem__("n", got["n"] + 1)
    tap.connect("127.0.0.1", port, 30)
    tap.loop_start()
    pages = Pages(url, 1)
    try:
        assert ready.wait(30)
        assert publisher.ask(f"blast {k}") == "ready"
        before = accepted(url)
        fbefore = floor_received(floor_url) if floor else 0
        os.kill(pit.pid, signal.SIGSTOP)
        if floor:
            os.kill(floor.pid, signal.SIGSTOP)
        try:
            publisher.proc.stdin.write("go\n")
            publisher.proc.stdin.flush()
            publisher.proc.stdout.readline()
            deadline = time.monotonic() + 60
            while got["n"] < k and time.monotonic() < deadline:
                time.sleep(0.1)
            carried = got["n"]
        finally:
            os.kill(pit.pid, signal.SIGCONT)
            if floor:
                os.kill(floor.pid, signal.SIGCONT)
        cpu0 = cpu_s(pit.pid)
        fcpu0 = cpu_s(floor.pid) if floor else 0.0
        dcpu0 = cluster_cpu_s(pg_data) if pg_data else 0.0
        t0 = last_t = flast_t = time.monotonic()
        last, flast = before, fbefore
        cpu1, fcpu1, dcpu1 = cpu0, fcpu0, dcpu0
        pit_done = floor_done = False
        while not (pit_done and (floor_done or not floor)):
            time.sleep(0.1)
            now = time.monotonic()
            if not pit_done:
                c = accepted(url)
                if c != last:
                    last, last_t, cpu1 = c, now, cpu_s(pit.pid)
                pit_done = now - last_t >= 3 or last - before >= k
            if floor and not floor_done:
                c = floor_received(floor_url)
                if c != flast:
                    flast, flast_t, fcpu1 = c, now, cpu_s(floor.pid)
                    dcpu1 = cluster_cpu_s(pg_data) if pg_data else 0.0
                floor_done = now - flast_t >= 3 or flast - fbefore >= k
        took, wall = last - before, max(last_t - t0, 1e-6)
        out = {"published": k, "carried_to_the_pits_broker": carried, "taken": took,
               "ingest_per_s": round(took / wall, 1), "pit_cpu_core": round((cpu1 - cpu0) / wall, 3),
               "cpu_us_per_message": round((cpu1 - cpu0) / max(took, 1) * 1e6, 1),
               "per_core_per_s": round(took / max(cpu1 - cpu0, 1e-6), 1)}
        if floor:
            ftook, fwall = flast - fbefore, max(flast_t - t0, 1e-6)
            out.update({"floor_taken": ftook, "floor_ingest_per_s": round(ftook / fwall, 1),
                        "floor_cpu_core": round((fcpu1 - fcpu0) / fwall, 3),
                        "floor_per_core_per_s": round(ftook / max(fcpu1 - fcpu0, 1e-6), 1)})
            if pg_data:
                out["floor_with_db_per_core_per_s"] = round(ftook / max(fcpu1 - fcpu0 + dcpu1 - dcpu0, 1e-6), 1)
        return out
    finally:
        pages.close()
        tap.disconnect()
        tap.loop_stop()


def _table_keys(folder: Path, n: int) -> tuple[Path, Path]:
    """``n`` table keys of the pit: ``folder/keys`` (the private ones, for the publisher)
    and ``folder/pubs`` (the public ones, for the pit view). Returns both folders."""
    from table.keys import generate, save

    keys_dir, pubs = folder / "keys", folder / "pubs"
    keys_dir.mkdir(parents=True)
    pubs.mkdir()
    for i in range(n):
        t = f"{PIT}-t{i:04d}"
        save(generate(), keys_dir / f"{t}.pem")
        os.replace(keys_dir / f"{t}.pem.pub", pubs / f"{t}.pub")
    return keys_dir, pubs


def _paced(url: str, p: int, rate: float, args: argparse.Namespace, publisher: "Publisher",
           pit: subprocess.Popen, floor: subprocess.Popen | None, central: Any, baseline: Path | None) -> dict:
    """One paced run with ``p`` pages open: ``rate`` messages/s for ``args.seconds``; the
    figures of :func:`run_size`'s ``paced`` entry."""
    pages = Pages(url, p)
    tap = Tap(central.port, f"{'' if baseline else PREFIX}threecard/{PIT}/+/events")
    try:
        before, cpu0, fcpu0 = counts(url), cpu_s(pit.pid), cpu_s(floor.pid) if floor else 0.0
        dcpu0, load0 = cluster_cpu_s(args.pg_data) if args.pg_data else 0.0, loadavg()
        t0 = time.monotonic()
        answer = publisher.ask(f"pace {rate} {args.seconds}").split()
        deadline = time.monotonic() + 10
        while accepted(url) - before["accepted"] < int(answer[2]) and time.monotonic() < deadline:
            time.sleep(0.1)  # the last messages on their way
        wall = time.monotonic() - t0
        after, cpu1 = counts(url), cpu_s(pit.pid)
        took = after["accepted"] - before["accepted"]
        entry = {"published": int(answer[2]), "taken": took, "forged": after["forged"],
                 "page_resyncs": after.get("page_resyncs", 0) - before.get("page_resyncs", 0),
                 "messages_per_s": round(took / wall, 1),
                 "pit_cpu_core": round((cpu1 - cpu0) / wall, 3),
                 "cpu_us_per_message": round((cpu1 - cpu0) / max(took, 1) * 1e6, 1),
                 "page_latency_ms": pct(pages.latencies), "broker_latency_ms": pct(tap.latencies),
                 "framed_latency_ms": pct(pages.framed),
                 "frames_per_page_per_s":
                 round(pages.frames / p / wall, 1), "kib_per_page_per_s": round(pages.bytes / p / wall / 1024, 1)}
        entry["loadavg"] = [load0, loadavg()]
        if floor:
            entry["floor_cpu_core"] = round((cpu_s(floor.pid) - fcpu0) / wall, 3)
            entry["floor_cpu_us_per_message"] = round((cpu_s(floor.pid) - fcpu0) / max(took, 1) * 1e6, 1)
            if args.pg_data:  # PostgreSQL's own processes: the floor's database work not in its process
                entry["db_cpu_core"] = round((cluster_cpu_s(args.pg_data) - dcpu0) / wall, 3)
        return entry
    finally:
        tap.close()
        pages.close()


def _start_floor(folder: Path, database: str, pubs: Path, broker_url: str) -> tuple[subprocess.Popen, str]:
    """``tablectl floor serve`` on ``database`` (a SQLite path or a PostgreSQL URL), following
    ``broker_url``; returns the process and its URL once it serves."""
    from table.keys import generate, save

    from mqtt_broker import free_port

    save(generate(), folder / "floor.key")
    (folder / "floor.toml").write_text(f"""[floor]
database = "{database}"
key_file = "{folder / 'floor.key'}"
table_keys = "{pubs}"
listen = "127.0.0.1:{free_port()}"
[[broker]]
url = "{broker_url}"
""")
    floor = subprocess.Popen(tablectl() + ["floor", "serve", "--config", str(folder / "floor.toml")],
                             stdout=subprocess.PIPE, stderr=open(folder / "floor.log", "wb"), text=True)
    url = floor.stdout.readline().strip()
    if not url.startswith("http"):
        floor.kill()
        raise RuntimeError((folder / "floor.log").read_text()[-2000:])
    return floor, url


def run_size(n: int, args: argparse.Namespace, work: Path, baseline: Path | None = None,
             database: str | None = None) -> dict:
    """One table count: the figures above. ``baseline``: a source tree of the pit view before
    the signed/2 release instead (one broker, no bridge: it could not verify across one; signed/1)."""
    from mqtt_broker import Broker, start_bridged

    db_kind = "none" if database is None else "postgresql" if database.startswith("postgresql") else "sqlite"
    folder = work / (f"n{n}" + ("-baseline" if baseline else "") + f"-{db_kind}")
    keys_dir, pubs = _table_keys(folder, n)
    if baseline is None:
        edge, central = start_bridged(folder, PREFIX)
        broker_url = f"mqtt://127.0.0.1:{central.port}/{PREFIX.rstrip('/')}"
        cmd = tablectl() + ["pit", "serve", "--broker", broker_url, "--max-tables", str(max(500, n))]
    else:
        edge = central = Broker(folder / "broker").start()
        broker_url = f"mqtt://127.0.0.1:{edge.port}"
        cmd = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(baseline)!r}); "
               "from table.cli import main; main()", "pit", "serve", "--mqtt", broker_url]
    pit = subprocess.Popen(cmd + ["--pit", PIT, "--web", "127.0.0.1:0", "--table-keys", str(pubs)],
                           stdout=subprocess.PIPE, stderr=open(folder / "pit.log", "wb"), text=True)
    floor, floor_url = (None, "") if database is None else _start_floor(folder, database, pubs, broker_url)
    publisher = Publisher(edge.port, keys_dir, v1=baseline is not None)
    result: dict[str, Any] = {"tables": n, "rate_per_s": round(n * args.rate_per_table, 1),
                              "floor_database": db_kind}
    if baseline:
        result["baseline"] = f"the pit view before signed/2 ({baseline}), one broker, no bridge"
    try:
        url = pit.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError((folder / "pit.log").read_text()[-2000:])
        publisher.ask("online")
        deadline = time.monotonic() + 60
        while accepted(url) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the pit did not get {n} statuses: {counts(url)}")
            time.sleep(0.2)
        rate = n * args.rate_per_table
        result["paced"] = {}
        for p in ([1] if baseline else args.pages):
            result["paced"][f"pages_{p}"] = _paced(url, p, rate, args, publisher, pit, floor, central,
                                                   baseline)
        if args.blast:
            result["blast"] = blast(n, args.blast, url, pit, publisher, central.port,
                                    f"{'' if baseline else PREFIX}threecard/{PIT}/+/events", floor=floor,
                                    floor_url=floor_url, pg_data=args.pg_data)
        if baseline is None:
            result["frame_ms"] = frame_costs(n)
        if floor is not None:
            with urllib.request.urlopen(floor_url + "/api/v1/floor/health", timeout=30) as r:
                c = json.loads(r.read())["counts"]
            result["floor"] = {k: c[k] for k in ("received", "verified", "stored", "not_kept", "forged",
                                                 "unknown_table", "write_errors")}
    finally:
        publisher.close()
        pit.terminate()
        pit.wait(10)
        pit.stdout.close()
        if floor:
            floor.terminate()
            floor.wait(10)
            floor.stdout.close()
        edge.stop()
        central.stop()
    return result


#: the issue's limits: (figure, where it is read, the limit, "max" or "min")
LIMITS = (("page p99 (ms), 500 tables, 5 pages, PostgreSQL, 370 messages/s", 250.0, "max"),
          ("floor ingest through mosquitto (messages per core-second of the floor)", 5000.0, "min"))


def limits(runs: list[dict]) -> list[dict]:
    """Each limit of :data:`LIMITS` beside its figure from ``runs`` (the 500-table run on
    PostgreSQL with 5 pages; the floor's drain of the blast) as a ratio: figure / limit,
    within the limit when <= 1 for a maximum and >= 1 for a minimum. A figure not measured
    (another table count, no such run) is said so, never passed."""
    run = next((r for r in runs if r.get("tables") == 500 and r.get("floor_database") == "postgresql"), None)
    page = ((run or {}).get("paced") or {}).get("pages_5") or {}
    p99 = (page.get("page_latency_ms") or {}).get("p99")
    ingest = ((run or {}).get("blast") or {}).get("floor_per_core_per_s")
    out = []
    for (what, limit, kind), figure in zip(LIMITS, (p99, ingest)):
        if figure is None:
            out.append({"limit": what, "figure": None, "bound": limit, "ratio": None, "within": False,
                        "note": "not measured: run --tables 500 --pages 5 --floor postgresql with --blast"})
            continue
        ratio = figure / limit
        out.append({"limit": what, "figure": figure, "bound": limit, "ratio": round(ratio, 3),
                    "within": ratio <= 1 if kind == "max" else ratio >= 1,
                    **({"messages_per_s": page.get("messages_per_s")} if kind == "max" else {})})
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] in ("--publisher", "--publisher-v1"):
        publisher_main(int(sys.argv[2]), Path(sys.argv[3]), v1=sys.argv[1].endswith("v1"))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", default="50,200,500", help="table counts, comma-separated")
    ap.add_argument("--rate-per-table", type=float, default=0.74, help="messages/s per table (0.74: 370/s at 500)")
    ap.add_argument("--seconds", type=float, default=15.0, help="length of each paced phase")
    ap.add_argument("--pages", default="1,5", help="open pages per paced phase, comma-separated")
    ap.add_argument("--blast", type=int, default=3000, help="messages of the ingest blast (0: none)")
    ap.add_argument("--floor", default="none",
                    help="comma-separated, each table count once per entry: none (the pit alone), sqlite, postgresql "
                         "(tablectl floor serve beside the pit on that database)")
    ap.add_argument("--baseline", type=Path, default=None, metavar="SRC",
                    help="also run the largest table count against the pit view of source tree SRC (e.g. "
                         "`git archive c4dfae2 | tar -x -C SRC`: before signed/2), 1 page, for ratios from one run")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    args.pg_data = None
    args.pages = [int(x) for x in args.pages.split(",") if x]
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    out = {"pit": PIT, "bridge_prefix": PREFIX, "pages": "WebSocket clients (websockets), not Chromium", "runs": []}
    floors = [x for x in args.floor.split(",") if x]
    if set(floors) - {"none", "sqlite", "postgresql"}:
        ap.error(f"--floor: {args.floor!r}; allowed: none, sqlite, postgresql, comma-separated")
    cluster = None
    with tempfile.TemporaryDirectory(prefix="floor-bench-") as tmp:
        try:
            for db in floors:
                for n in [int(x) for x in args.tables.split(",") if x]:
                    database, args.pg_data = None, None
                    if db == "sqlite":
                        database = str(Path(tmp) / f"floor-{n}.sqlite3")
                    elif db == "postgresql":
                        if cluster is None:
                            from pg_server import PgCluster

                            cluster = PgCluster().start()
                        database, args.pg_data = cluster.create_database(), cluster.data
                    r = run_size(n, args, Path(tmp), database=database)
                    out["runs"].append(r)
                    if not args.json:
                        print(json.dumps(r), flush=True)
        finally:
            if cluster is not None:
                cluster.stop()
        if args.baseline:
            n = max(int(x) for x in args.tables.split(",") if x)
            args.pg_data = None
            r = run_size(n, args, Path(tmp), baseline=args.baseline.resolve())
            out["runs"].append(r)
            if not args.json:
                print(json.dumps(r), flush=True)
    out["limits"] = limits(out["runs"])
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for lim in out["limits"]:
            if lim["figure"] is None:
                print(f"{lim['limit']}: {lim['note']}")
            else:
                sign = "<=" if "p99" in lim["limit"] else ">="
                print(f"{lim['limit']}: {lim['figure']:g} against {sign} {lim['bound']:g}: ratio "
                      f"{lim['ratio']:.2f} ({'within' if lim['within'] else 'OUTSIDE'} the limit)")


if __name__ == "__main__":
    main()
