"""Floor bench: N synthetic tables through mosquitto into the floor service, its pages open.

    python bench/floor.py [--tables 500] [--rate-per-table 0.74] [--seconds 20] [--pages 5]
                          [--blast 6000] [--database postgresql|sqlite] [--json]

One real mosquitto; ``tablectl floor serve`` (its own process) on a database of a
throwaway local PostgreSQL cluster (initdb, pg_ctl, loopback: tests/pg_server.py) or a
SQLite file, following the broker, with a people file (a floor manager and a pit boss of
the bench's pit); N table keys; a publisher process playing the N tables: a retained
signed ``online: true`` status each, then signed events (QoS 1) in the order of a round
(round_opened, bets_closed, 6 card_dealt, decisions_final, dealer_revealed,
round_settled, round_closed), tables taking turns, at ``N * rate_per_table`` messages/s
(0.74 a table: 370/s at 500 tables, the issue's figure).

**Pages.** ``--pages`` people (floor managers and pit bosses in turn, each signed in with
their own session) use the floor's pages as the page does: every 2 s the pit grid
(``GET /api/v1/floor/pit``: every table of their view, its state, step, what it waits
for, devices, alarms) and a table's page, one click away (``GET /api/v1/floor/table/ID``:
its rounds and the day's figures), a different table each time. HTTP clients in this
process (keep-alive, one a page), not Chromium (``tests/test_floor_grid_500.py`` opens the
500-table grid in Chromium).

| figure | what |
| --- | --- |
| paced.grid_ms / table_ms p50 / p99 / max | one page's request answered, from sending it to its last byte, while the tables publish at the paced rate |
| paced.page_ms | both together: the page p99 against the 250 ms limit |
| paced.published / taken / messages_per_s | what the tables published and the floor received over the phase (its ``/api/v1/floor/health``) |
| paced.floor_cpu_core / db_cpu_core | the floor's process and PostgreSQL's processes, a fraction of one core over the phase |
| blast.floor_per_core_per_s | the floor stopped (SIGSTOP), ``--blast`` messages (signed beforehand) published to mosquitto and queued there for it, then let go (SIGCONT): messages it took per CPU second of its process, its ingest through mosquitto (``with_db``: PostgreSQL's CPU counted too) |
| limits | the issue's limits beside the figures, as ratios: page p99 / 250 ms (<= 1 within) at 370 messages/s, ingest / 5,000 messages per core-second (>= 1 within) |
| loadavg | the machine's 1-minute load average at the start and end (the machine may be shared) |

Needs mosquitto, paho-mqtt and (for PostgreSQL) the server's binaries.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

PIT = "bench"
CYCLE = (["round_opened", "bets_closed"] + ["card_dealt"] * 6
         + ["decisions_final", "dealer_revealed", "round_settled", "round_closed"])
#: the issue's limits: (what, bound, "max" | "min")
LIMITS = [("page p99 <= 250 ms at 500 tables, 5 pages, PostgreSQL, 370 messages/s", 250.0, "max"),
          ("floor ingest through mosquitto >= 5,000 messages per core-second", 5000.0, "min")]
PEOPLE = (("FM-1", "floor_manager", "739201"), ("PB-1", "pit_boss", "482913"))
#: a page reads the floor this often (s), as floor.js does
REFRESH_S = 2.0


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


def _table_keys(folder: Path, n: int) -> tuple[Path, Path]:
    """``n`` table keys of the pit: ``folder/keys`` (the private ones, for the publisher)
    and ``folder/pubs`` (the public ones, for the floor). Returns both folders."""
    from table.keys import generate, save

    keys_dir, pubs = folder / "keys", folder / "pubs"
    keys_dir.mkdir(parents=True)
    pubs.mkdir()
    for i in range(n):
        t = f"{PIT}-t{i:04d}"
        save(generate(), keys_dir / f"{t}.pem")
        os.replace(keys_dir / f"{t}.pem.pub", pubs / f"{t}.pub")
    return keys_dir, pubs


def pct(values: list[float]) -> dict | None:
    if not values:
        return None
    v = sorted(values)
    q = statistics.quantiles(v, n=100, method="inclusive") if len(v) > 1 else [v[0]] * 99
    return {"p50": round(q[49], 1), "p99": round(q[98], 1), "max": round(v[-1], 1), "n": len(v)}



# -- pages: people using the floor's pages over HTTP ------------------------------------------

class Page(threading.Thread):
    """One person's page: signed in with their PIN, then every :data:`REFRESH_S` the pit grid
    and one table's page (the next of ``tables`` each time), each request timed."""

    def __init__(self, url: str, person: str, pin: str, tables: list[str], offset: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.host, _, port = url.split("://", 1)[1].partition(":")
        self.port = int(port.rstrip("/"))
        self.origin = url.rstrip("/")
        self.tables, self.i, self.stop = tables, offset, stop
        self.grid_ms: list[float] = []
        self.table_ms: list[float] = []
        self.errors = 0
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        body = json.dumps({"person": person, "pin": pin})
        self.conn.request("POST", "/api/v1/floor/session", body=body,
                          headers={"Content-Type": "application/json", "Origin": self.origin})
        resp = self.conn.getresponse()
        resp.read()
        cookie = resp.getheader("set-cookie") or ""
        if resp.status != 200 or not cookie:
            raise RuntimeError(f"{person} could not sign in: HTTP {resp.status}")
        self.cookie = cookie.split(";", 1)[0]

    def _get(self, path: str, into: list[float]) -> None:
        t0 = time.perf_counter()
        self.conn.request("GET", path, headers={"Cookie": self.cookie})
        resp = self.conn.getresponse()
        resp.read()
        into.append((time.perf_counter() - t0) * 1000)
        if resp.status != 200:
            self.errors += 1

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            self._get("/api/v1/floor/pit", self.grid_ms)
            self._get(f"/api/v1/floor/table/{self.tables[self.i % len(self.tables)]}", self.table_ms)
            self.i += 7
            self.stop.wait(max(0.0, REFRESH_S - (time.monotonic() - start)))  # the page's refresh period
        self.conn.close()


def health(url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/api/v1/floor/health", timeout=30) as r:
        return json.loads(r.read())["counts"]


def _start_floor(folder: Path, database: str, pubs: Path, broker_port: int) -> tuple[subprocess.Popen, str]:
    """``tablectl floor serve`` on ``database`` (a SQLite path or a PostgreSQL URL) following the
    broker, with the people of :data:`PEOPLE`; returns the process and its URL once it serves."""
    from table.interfaces.auth import PeopleFile
    from table.keys import generate, save
    from table.roles import Role

    from console_helpers import CHEAP
    from mqtt_broker import free_port

    save(generate(), folder / "floor.key")
    people = PeopleFile(folder / "floor-people.toml")
    for person, role, pin in PEOPLE:
        if role == "pit_boss":
            people.add(person, Role(role), pin, hasher=CHEAP, pits=(PIT,))
        else:
            people.add(person, Role(role), pin, hasher=CHEAP)
    (folder / "floor.toml").write_text(f"""[floor]
database = "{database}"
key_file = "{folder / 'floor.key'}"
table_keys = "{pubs}"
people_file = "{folder / 'floor-people.toml'}"
listen = "127.0.0.1:{free_port()}"
[[broker]]
url = "mqtt://127.0.0.1:{broker_port}"
""")
    floor = subprocess.Popen(tablectl() + ["floor", "serve", "--config", str(folder / "floor.toml")],
                             stdout=subprocess.PIPE, stderr=open(folder / "floor.log", "wb"), text=True)
    url = floor.stdout.readline().strip()
    if not url.startswith("http"):
        floor.kill()
        raise RuntimeError((folder / "floor.log").read_text()[-2000:])
    return floor, url


def _wait_received(url: str, target: int, timeout_s: float) -> int:
    """The floor's received count once it reaches ``target`` or stops moving for 3 s."""
    deadline, last, last_t = time.monotonic() + timeout_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        got = health(url)["received"]
        if got >= target:
            return got
        if got != last:
            last, last_t = got, time.monotonic()
        elif time.monotonic() - last_t > 3:
            return got
        time.sleep(0.1)  # polling the floor's counters between bench phases, not on its path
    return last


def paced(url: str, n: int, args: argparse.Namespace, publisher: "Publisher", floor: subprocess.Popen,
          pg_data: Path | None) -> dict:
    tables = [f"{PIT}-t{i:04d}" for i in range(n)]
    stop = threading.Event()
    pages = [Page(url, *PEOPLE[i % len(PEOPLE)][::2], tables, i * 97, stop) for i in range(args.pages)]
    before = health(url)["received"]
    cpu0, dcpu0, load0, t0 = cpu_s(floor.pid), cluster_cpu_s(pg_data) if pg_data else 0.0, loadavg(), time.monotonic()
    for p in pages:
        p.start()
    answer = publisher.ask(f"pace {n * args.rate_per_table} {args.seconds}").split()
    stop.set()
    for p in pages:
        p.join(60)
    wall = time.monotonic() - t0
    published = int(answer[2])
    taken = _wait_received(url, before + published, 30) - before
    grid = [x for p in pages for x in p.grid_ms]
    table = [x for p in pages for x in p.table_ms]
    out = {"pages": args.pages, "published": published, "taken": taken,
           "messages_per_s": round(published / float(answer[3]), 1),
           "grid_ms": pct(grid), "table_ms": pct(table), "page_ms": pct(grid + table),
           "page_errors": sum(p.errors for p in pages),
           "floor_cpu_core": round((cpu_s(floor.pid) - cpu0) / wall, 3), "loadavg": [load0, loadavg()]}
    if pg_data:
        out["db_cpu_core"] = round((cluster_cpu_s(pg_data) - dcpu0) / wall, 3)
    return out


def blast(url: str, k: int, publisher: "Publisher", floor: subprocess.Popen, pg_data: Path | None) -> dict:
    """The floor stopped, ``k`` signed messages queued for it at mosquitto, then let go: its drain."""
    assert publisher.ask(f"blast {k}") == "ready"
    before = health(url)["received"]
    os.kill(floor.pid, signal.SIGSTOP)
    try:
        publisher.proc.stdin.write("go\n")
        publisher.proc.stdin.flush()
        publisher.proc.stdout.readline()  # every message acknowledged by the broker (queued for the floor)
    finally:
        os.kill(floor.pid, signal.SIGCONT)
    cpu0, dcpu0, t0 = cpu_s(floor.pid), cluster_cpu_s(pg_data) if pg_data else 0.0, time.monotonic()
    got = _wait_received(url, before + k, 300)
    cpu, dcpu, wall = cpu_s(floor.pid) - cpu0, (cluster_cpu_s(pg_data) - dcpu0) if pg_data else 0.0, \
        time.monotonic() - t0
    took = got - before
    out = {"published": k, "taken": took, "floor_ingest_per_s": round(took / max(wall, 1e-6), 1),
           "floor_cpu_core": round(cpu / max(wall, 1e-6), 3), "floor_per_core_per_s": round(took / max(cpu, 1e-6), 1)}
    if pg_data:
        out["floor_with_db_per_core_per_s"] = round(took / max(cpu + dcpu, 1e-6), 1)
    return out


def limits(run: dict) -> list[dict]:
    """Each of :data:`LIMITS` beside its figure as a ratio (figure / limit): within when <= 1 for
    a maximum and >= 1 for a minimum. The page limit is read only from a 500-table run on
    PostgreSQL with 5 pages; a figure not measured is said so, never passed."""
    full = run["tables"] == 500 and run["database"] == "postgresql" and run["paced"]["pages"] == 5
    p99 = (run["paced"].get("page_ms") or {}).get("p99") if full else None
    ingest = (run.get("blast") or {}).get("floor_per_core_per_s")
    out = []
    for (what, bound, kind), figure in zip(LIMITS, (p99, ingest)):
        if figure is None:
            out.append({"limit": what, "figure": None, "bound": bound, "ratio": None, "within": False,
                        "note": "not measured: run --tables 500 --pages 5 --database postgresql with --blast"})
            continue
        ratio = figure / bound
        out.append({"limit": what, "figure": figure, "bound": bound, "ratio": round(ratio, 3),
                    "within": ratio <= 1 if kind == "max" else ratio >= 1})
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] in ("--publisher", "--publisher-v1"):
        publisher_main(int(sys.argv[2]), Path(sys.argv[3]), v1=sys.argv[1].endswith("v1"))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", type=int, default=500, help="synthetic tables")
    ap.add_argument("--rate-per-table", type=float, default=0.74, help="messages/s per table (0.74: 370/s at 500)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the paced phase")
    ap.add_argument("--pages", type=int, default=5, help="people with the floor's pages open")
    ap.add_argument("--blast", type=int, default=6000, help="messages of the ingest blast (0: none)")
    ap.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    import structlog

    from mqtt_broker import Broker

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    cluster = broker = floor = publisher = None
    with tempfile.TemporaryDirectory(prefix="floor-bench-") as tmp:
        work = Path(tmp)
        try:
            pg_data = None
            if args.database == "postgresql":
                from pg_server import PgCluster

                cluster = PgCluster().start()
                database, pg_data = cluster.create_database(), cluster.data
            else:
                database = str(work / "floor.sqlite3")
            keys_dir, pubs = _table_keys(work, args.tables)
            broker = Broker(work / "broker").start()
            floor, url = _start_floor(work, database, pubs, broker.port)
            publisher = Publisher(broker.port, keys_dir)
            assert publisher.ask("online") == "done online"
            _wait_received(url, args.tables, 120)  # every table's status taken: the grid is whole
            run: dict[str, Any] = {"tables": args.tables, "database": args.database,
                                   "rate_per_s": round(args.tables * args.rate_per_table, 1),
                                   "paced": paced(url, args.tables, args, publisher, floor, pg_data)}
            if args.blast:
                run["blast"] = blast(url, args.blast, publisher, floor, pg_data)
            counts = health(url)
            run["floor"] = {k: counts.get(k) for k in ("received", "verified", "stored", "forged", "write_errors")}
        finally:
            if publisher is not None:
                publisher.close()
            if floor is not None:
                floor.terminate()
                floor.wait(30)
            if broker is not None:
                broker.stop()
            if cluster is not None:
                cluster.stop()
    run["limits"] = limits(run)
    if args.json:
        print(json.dumps(run, indent=2))
    else:
        print(json.dumps({k: v for k, v in run.items() if k != "limits"}))
        for lim in run["limits"]:
            if lim["figure"] is None:
                print(f"{lim['limit']}: {lim['note']}")
            else:
                print(f"{lim['limit']}: {lim['figure']} / {lim['bound']:g} = {lim['ratio']} "
                      f"({'within' if lim['within'] else 'NOT within'})")


if __name__ == "__main__":
    main()
