"""Helpers for the floor's tests: a real broker, a real PostgreSQL, genuinely signed table streams."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from table.interfaces.mqtt import checkpoint_topic, sign_message, topics
from table.journal import Journal
from table.keys import TableKey, generate, save

from mqtt_broker import Broker, mosquitto_path

needs_mosquitto = pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed (scripts/test-deps installs it)")


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path) -> str:
    """The URL of an empty floor database: SQLite in tmp_path, or a new database on the test
    cluster (conftest's ``pg_cluster``: one a worker)."""
    if request.param == "sqlite":
        return str(tmp_path / "floor.sqlite3")
    return request.getfixturevalue("pg_cluster").create_database()


@pytest.fixture
def broker(tmp_path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


class SignedTable:
    """A table's signed stream without a table: a real journal (so its checkpoints are the
    journal's own, signed), events and statuses signed as ``table.interfaces.mqtt`` signs them."""

    def __init__(self, folder: Path, table_id: str, floor: str = "pit1", key: TableKey | None = None) -> None:
        self.table_id, self.floor = table_id, floor
        self.key = key or generate()
        folder.mkdir(parents=True, exist_ok=True)
        self.key_file = folder / f"{table_id}.key"
        if not self.key_file.exists():
            save(self.key, self.key_file)
        self.path = folder / f"{table_id}.sqlite3"
        self._journal: Journal | None = None
        self.events_topic, self.status_topic = topics(floor, table_id)
        self.checkpoint_topic = checkpoint_topic(floor, table_id)
        self.seq = 0

    @property
    def journal(self) -> Journal:
        """The table's journal, made at its first use: a forger that only signs a status
        needs none (300 of them made 300 journal files, ~3 ms of CPU and ~40 ms of fsyncs each)."""
        if self._journal is None:
            self._journal = Journal(self.path, key=self.key, table_id=self.table_id)
        return self._journal

    @journal.setter
    def journal(self, journal: Journal) -> None:
        self._journal = journal

    def publish_key(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(f"{self.key_file}.pub", folder / f"{self.table_id}.pub")

    def event(self, etype: str, data: dict[str, Any], round_id: str | None = None,
              ts: str | None = None) -> tuple[str, str]:
        self.seq += 1
        ev = {"schema": "threecard.events/1", "seq": self.seq, "journal_seq": self.seq, "table_id": self.table_id,
              "round_id": round_id, "ts": ts or now(), "type": etype, "data": data}
        return self.events_topic, sign_message(self.key, self.events_topic, ev)

    def status(self, online: bool = True, alarms: list[dict[str, str]] | None = None) -> tuple[str, str]:
        msg = {"schema": "threecard.status/1", "table_id": self.table_id, "floor": self.floor, "online": online,
               "ts": now(), "head_seq": self.seq, "table": {"alarms": alarms or []}}
        return self.status_topic, sign_message(self.key, self.status_topic, msg)

    def checkpoint(self, entries: int = 3) -> dict[str, Any]:
        """Journal ``entries`` entries and sign a checkpoint over them: the journal's own."""
        for i in range(entries):
            self.journal.append("note", n=i)
        return self.journal.checkpoint(rounds_opened=self.seq)

    def retained(self, cp: dict[str, Any]) -> tuple[str, str]:
        return self.checkpoint_topic, sign_message(self.key, self.checkpoint_topic, cp)

    def round(self, number: int, ante: int = 1000, nets: dict[str, int] | None = None,
              ts: str | None = None) -> list[tuple[str, str]]:
        """A round's signed events: opened (each seat's ante), a card, settled with ``nets``
        (each seat's net; default seat 1 +ante, seat 2 -2*ante: the table wins ante)."""
        rid = f"r{number:05d}-{self.table_id}"
        nets = nets if nets is not None else {"1": ante, "2": -2 * ante}
        wagers = {s: {"ante": ante, "pair_plus": 0, "six_card": 0, "progressive": 0} for s in nets}
        return [self.event("round_opened", {"number": number, "seats": sorted(int(s) for s in nets),
                                            "wagers": wagers}, rid, ts),
                self.event("card_dealt", {"to": "seat1", "seat": 1, "draw_index": 0, "back_colour": "red",
                                          "manual": False}, rid, ts),
                self.event("round_settled", {"number": number, "results": {}, "net_cents": nets}, rid, ts)]

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()


class Publisher:
    """A paho client publishing raw (already signed) messages, each acknowledged (QoS 1)."""

    def __init__(self, port: int, client_id: str = "test-table") -> None:
        import paho.mqtt.client as mqtt

        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def send(self, messages: list[tuple[str, str]], retain: bool = False) -> None:
        infos = [self.client.publish(t, p, qos=1, retain=retain or t.endswith("/checkpoint") or t.endswith("/status"))
                 for t, p in messages]
        for info in infos:
            info.wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
        self.client._reset_sockets()  # paho keeps its wake-up socketpair until garbage-collected


@contextlib.contextmanager
def running_floor(database: str, keys_dir: Path, port: int, *, floors: tuple[str, ...] = ("+",), prefix: str = ""):
    """A floor (ingest + one broker feed, its topics under ``prefix``, e.g. ``site-a/``) on
    ``database``; yields the Floor once subscribed."""
    from table.floor.ingest import BrokerFeed, Floor
    from table.floor.store import open_store
    from table.interfaces.brokers import BrokerAddress, load_table_keys

    store = open_store(database)
    floor = Floor(store, load_table_keys(keys_dir)).start()
    feed = BrokerFeed(floor, BrokerAddress("127.0.0.1", port, False, prefix=prefix), floors=floors).start()
    try:
        assert feed.connected.wait(20), "the floor did not subscribe"
        yield floor
    finally:
        feed.close()
        floor.close()
        store.close()


def settle(floor: Any, received: int, timeout_s: float = 30.0) -> None:
    """Wait until the floor has received ``received`` messages and written them."""
    assert floor.wait_for(lambda: floor.counts.received >= received, timeout_s), floor.counts
    assert floor.wait_idle(timeout_s)


def rows(floor: Any, sql: str, params: tuple = ()) -> list[tuple]:
    return floor.store.query(sql, params)


def jsonl(path: Path) -> list[Any]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def call(server, path, body=None, token=None, method=None):
    """One request to a floor server's HTTP API -> ``(status, JSON body, or text for CSV)``; an HTTP error's
    JSON body is returned with its status, not raised."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode() if body is not None else None,
                                 headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if r.headers.get_content_type() == "application/json" else raw.decode())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@contextlib.contextmanager
def floor_for_pages(tmp_path: Path, table_id: str, person: str, role: Any, pin: str, *,
                    pits: tuple[str, ...] = ("pit1",), wall_pits: tuple[str, ...] = ()) -> Iterator[tuple[Any, SignedTable]]:
    """An in-process floor for a page test: one table of pit1 (its stream handed to the floor by
    the test: the floor's broker is away, none is needed), one person of ``role`` (a
    :class:`table.roles.Role`) in ``pits``, and ``wall_pits`` served as walls. Yields the
    started ``FloorService`` and the :class:`SignedTable`; both closed after."""
    from table.floor.config import parse_floor_config
    from table.floor.service import FloorService
    from table.interfaces.auth import PeopleFile

    from console_helpers import CHEAP
    from mqtt_broker import free_port

    table = SignedTable(tmp_path / "t", table_id)
    table.publish_key(tmp_path / "keys")
    save(generate(), tmp_path / "floor.key")
    PeopleFile(tmp_path / "people.toml").add(person, role, pin, hasher=CHEAP, pits=list(pits))
    walls = f"wall_pits = {json.dumps(list(wall_pits))}\n" if wall_pits else ""
    try:
        service = FloorService(parse_floor_config(f"""
[floor]
database = "{tmp_path / 'floor.sqlite3'}"
key_file = "{tmp_path / 'floor.key'}"
table_keys = "{tmp_path / 'keys'}"
people_file = "{tmp_path / 'people.toml'}"
listen = "127.0.0.1:0"
{walls}[[broker]]
url = "mqtt://127.0.0.1:{free_port()}"
""")).start()
    except BaseException:
        table.close()
        raise
    try:
        yield service, table
    finally:
        service.close()
        table.close()
