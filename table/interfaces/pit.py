"""The pit view: every table of one or more pits on one page, from the floor's MQTT brokers, never from the tables.

``tablectl pit serve --broker mqtt://broker:1883 --pit pit2 --table-keys /etc/floor/tables --web 0.0.0.0:8090``
runs it on any machine of the floor (``--broker`` again for each further broker,
``--pit`` again for each further pit). On each broker it subscribes to
``[PREFIX/]threecard/{pit}/+/status`` and ``.../events`` (docs/integration.md;
``PREFIX`` is the broker URL's path, for a broker that gets the tables' topics
over a bridge with a prefix), takes a message only when it carries a valid
signature of its table's key (``TABLE_ID.pub`` in the keys folder;
:func:`table.interfaces.mqtt.verify_message`, which covers the table and the
kind of message, not the bridge's prefix): anyone on the floor network can
publish to a broker, so a forged ``online: true`` or ``round_settled`` is
dropped and counted, never shown. The table is the one the signed message
names (its ``table_id``, which must be the topic's), and a status must name
the topic's pit (its ``floor``): a genuine status republished under another
pit's topic is refused and counted like a forged one. Per table it keeps:

* online or offline: the retained status, ordered by
  :func:`table.interfaces.mqtt.order_status` as the floor orders it: the Last Will
  of the table's current connection (sent by the broker when it dies) or its clean
  stop shows it offline, ``online: true`` only when newer than the last, fresh,
  and not of a connection whose will was taken (a replayed old one does not bring a
  dead table back); a table not
  heard from for ``stale_s`` shows as "no news";
* the current step, what it waits for, alarms and link health (the status's
  ``table`` summary, :func:`table.interfaces.status_view.floor_status`);
* the current round's step from the events, and the last round's result
  (each seat's net from ``round_settled``, or voided), de-duplicated by ``seq``
  (the same table heard over two brokers is one table).

At most ``max_tables`` tables (default :data:`MAX_TABLES`, ``--max-tables``): the
first in sorted order of the keys folder. A table past the limit is **refused
loudly**: logged (``pit_table_refused``) when the pit starts and at its first
message, its messages counted, and listed on the page as refused; never dropped
without a word.

The page (``web_static/pit.html``) gets the whole board once on its WebSocket
(``/api/v1/pit/ws``, a ``full`` frame), then only the tables that changed:
changes are coalesced per tick (:data:`TICK_S`) into one ``delta`` frame,
encoded once and sent to every page; a page too slow to take its frames is
sent a ``full`` frame again. ``GET /api/v1/pit`` is the whole board. The board
is public floor telemetry, already sealed by each table (58 Pa. Code 816a.1:
no card face before decisions are final); the pit view accepts no command.
Bounded: ``max_tables`` tables, messages of :data:`MAX_MESSAGE` bytes,
:data:`MAX_CLIENTS` page connections, :data:`MAX_QUEUED` frames per page.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import unquote, urlsplit

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from table.keys import KeyFileError, load_public_key

from .mqtt import ForgedMessage, ReceiverLoop, StatusMark, order_status, verify_message
from .status_view import rounds_as_people_say
from .web import STATIC_DIR, AppServer, with_headers

log = structlog.get_logger("table.pit")

#: the default table limit of a pit view (``max_tables``)
MAX_TABLES = 500
MAX_MESSAGE = 64 * 1024
MAX_CLIENTS = 64
#: frames queued for one page before it is sent the whole board again instead
MAX_QUEUED = 32
#: changes are coalesced into one frame per tick (s)
TICK_S = 0.1
#: with nothing changing, a page still gets an (empty) frame this often (s)
HEARTBEAT_S = 5.0
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


class PitSetupError(ValueError):
    """The pit view cannot start: a bad broker URL, pit name or keys folder; the message says why."""


@dataclass(frozen=True)
class BrokerAddress:
    """Where a floor's broker is: ``mqtt://[USER@]HOST[:PORT][/PREFIX]`` or ``mqtts://`` (TLS,
    8883). ``PREFIX`` (segments of letters, digits, ``.``, ``_``, ``-``) is put before
    ``threecard/...`` in the topics subscribed to: the prefix a bridge added."""

    host: str
    port: int
    tls: bool
    username: str | None = None
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> "BrokerAddress":
        parts = urlsplit(url)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise PitSetupError(f"{url!r} is not a broker URL; give mqtt://HOST[:PORT][/PREFIX] or mqtts://...")
        if parts.password is not None:
            raise PitSetupError("give the broker password in a file (--password-file), not in the URL")
        if "?" in url or "#" in url:
            raise PitSetupError(f"{url!r}: a broker URL takes no ?query, #fragment or MQTT wildcard")
        try:
            port = parts.port or (8883 if parts.scheme == "mqtts" else 1883)
        except ValueError:
            raise PitSetupError(f"{url!r}: the port is not a number 1-65535") from None
        segments = [unquote(x) for x in parts.path.strip("/").split("/") if x]
        if any(not _NAME.match(x) for x in segments) or len(segments) > 8:
            raise PitSetupError(f"{url!r}: the topic prefix (the URL's path) must be up to 8 segments of letters, "
                                "digits, '.', '_', '-' (no MQTT wildcards)")
        prefix = "".join(f"{x}/" for x in segments)
        return cls(parts.hostname, port, parts.scheme == "mqtts", unquote(parts.username) if parts.username else None,
                   prefix)

    @property
    def label(self) -> str:
        """``HOST:PORT[/PREFIX]``, as the page shows it (no account)."""
        return f"{self.host}:{self.port}" + (f"/{self.prefix.rstrip('/')}" if self.prefix else "")


def load_table_keys(folder: str | Path) -> dict[str, Ed25519PublicKey]:
    """Table id -> public key, from ``TABLE_ID.pub`` files in ``folder`` (what ``tablectl
    audit keygen`` writes beside a table key). Raises :class:`PitSetupError`."""
    path = Path(folder)
    if not path.is_dir():
        raise PitSetupError(f"no folder of table keys at {path}")
    keys = {}
    for f in sorted(path.glob("*.pub")):
        table_id = f.name[:-len(".pub")]
        if not _NAME.match(table_id):
            continue
        try:
            keys[table_id] = load_public_key(f)
        except KeyFileError as exc:
            raise PitSetupError(f"{f}: {exc}") from None
    if not keys:
        raise PitSetupError(f"no table keys (TABLE_ID.pub) in {path}: the pit would believe no table")
    return keys


def _parse_ts(text: Any) -> _dt.datetime | None:
    try:
        ts = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return ts if ts.tzinfo is not None else None


@dataclass
class TableCard:
    """What the pit knows of one table."""

    table_id: str
    online: bool | None = None
    status_ts: _dt.datetime | None = None
    heard: float = 0.0            # monotonic time of the last verified message
    summary: dict[str, Any] | None = None
    last_seq: int = 0
    round: dict[str, Any] | None = None
    last_result: dict[str, Any] | None = None
    offline_since: str | None = None
    #: how it went offline: ``"connection lost (its last will)"`` or ``"stopped"``
    offline_why: str | None = None
    #: the mark of the status taken last (:func:`table.interfaces.mqtt.order_status`)
    mark: StatusMark | None = None

    def event(self, ev: dict[str, Any]) -> None:
        seq = ev.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            return  # QoS 1 is at-least-once: a repeat
        self.last_seq = seq
        kind, data, rid = ev.get("type"), ev.get("data") or {}, ev.get("round_id")
        if kind == "round_opened":
            self.round = {"round_id": rid, "number": data.get("number"), "step": "open for bets"}
        elif self.round is not None and rid == self.round.get("round_id"):
            steps = {"bets_closed": "dealing", "decisions_final": "decisions final", "dealer_revealed":
                     "dealer revealed", "round_settled": "settled", "round_closed": "closed",
                     "round_held": "HELD", "round_voided": "voided"}
            if kind in steps:
                self.round["step"] = steps[kind]
        if kind == "round_settled":
            nets = {str(s): v for s, v in (data.get("net_cents") or {}).items() if isinstance(v, int)}
            self.last_result = {"round_id": rid, "number": data.get("number"), "voided": False, "net_cents": nets,
                                "house_cents": -sum(nets.values()), "ts": ev.get("ts")}
        elif kind == "round_voided":  # its data has no number: the round's, else the one its id carries
            now = self.round if self.round is not None and self.round.get("round_id") == rid else None
            self.last_result = {"round_id": rid, "number": now.get("number") if now is not None else _number_of(rid),
                                "voided": True,
                                "reason": str(data.get("reason") or "")[:200], "ts": ev.get("ts")}

    def state(self, now: float, stale_s: float) -> str:
        """``online``, ``offline`` or ``no news`` (online but not heard from for ``stale_s``)."""
        stale = self.online and now - self.heard > stale_s
        return "offline" if self.online is False else "no news" if stale or self.online is None else "online"

    def to_dict(self, now: float, stale_s: float) -> dict[str, Any]:
        state = self.state(now, stale_s)
        stale = state == "no news" and self.online is True
        return {"table_id": self.table_id, "state": state, "online": bool(self.online) and not stale,
                "status_ts": self.status_ts.isoformat() if self.status_ts else None, "offline_since": self.offline_since,
                "offline_why": self.offline_why if state == "offline" else None,
                "table": self.summary if state == "online" else None, "last_summary": self.summary,
                "round": self.round, "last_result": self.last_result, "last_seq": self.last_seq}


def _number_of(round_id: Any) -> int | None:
    """The round number a round id carries (``r00011-79645365`` -> 11), or None."""
    m = re.fullmatch(r"r(\d{1,9})-[0-9a-f]{8}", round_id) if isinstance(round_id, str) else None
    return int(m.group(1)) if m else None


def _said_as_people_do(summary: dict[str, Any]) -> dict[str, Any]:
    """A table's summary with rounds said as people count them ("round 11", never its id
    ``r00011-79645365``) in what it waits for and its alarms: a table of an older version
    published ids in those texts."""
    out = dict(summary)
    if isinstance(out.get("waiting_for"), str):
        out["waiting_for"] = rounds_as_people_say(out["waiting_for"])
    if isinstance(out.get("alarms"), list):
        out["alarms"] = [{**a, "text": rounds_as_people_say(a["text"])} if isinstance(a, dict)
                         and isinstance(a.get("text"), str) else a for a in out["alarms"]]
    return out


class PitBoard:
    """Every table of pits ``pit`` (a name, or several), from verified MQTT messages.

    ``keys``: table id -> public key; the first ``max_tables`` in sorted order are shown,
    the others refused loudly (:attr:`refused`). ``max_age_s``: an ``online: true`` older
    than this is not believed; ``stale_s``: a table online but not heard from for this long
    shows "no news". Thread-safe (the MQTT clients' threads call :meth:`receive`, the web
    server's loop :meth:`take_delta`); ``version`` grows with every change, and the
    ``listeners`` are called (with no argument) at most once between two
    :meth:`take_delta` calls. Raises :class:`PitSetupError` for a bad pit name or limit."""

    def __init__(self, pit: str | Iterable[str], keys: dict[str, Ed25519PublicKey], *, max_age_s: float = 90.0,
                 stale_s: float = 90.0, max_tables: int = MAX_TABLES, clock: Any = time.monotonic) -> None:
        pits = (pit,) if isinstance(pit, str) else tuple(dict.fromkeys(pit))
        if not pits:
            raise PitSetupError("give at least one pit name")
        for name in pits:
            if not _NAME.match(name):
                raise PitSetupError(f"{name!r} is not a pit name (letters, digits, '.', '_', '-')")
        if not isinstance(max_tables, int) or max_tables < 1:
            raise PitSetupError(f"max_tables must be a whole number >= 1, not {max_tables!r}")
        self.pits = pits
        self.pit = ", ".join(pits)
        self.keys = dict(keys)
        self.max_age_s = max_age_s
        self.stale_s = stale_s
        self.max_tables = max_tables
        self.clock = clock
        ordered = sorted(self.keys)
        self.tables: dict[str, TableCard] = {t: TableCard(t) for t in ordered[:max_tables]}
        #: table id -> messages refused, for each table past the limit
        self.refused: dict[str, int] = {t: 0 for t in ordered[max_tables:]}
        if self.refused:
            log.warning("pit_table_refused", count=len(self.refused), max_tables=max_tables,
                        tables=ordered[max_tables:max_tables + 20],
                        reason=f"past the pit's table limit ({max_tables}, --max-tables)")
        self.forged = 0
        self.accepted = 0
        self.refused_messages = 0
        #: pages sent the whole board again because they did not take their frames in time
        self.page_resyncs = 0
        self.version = 0
        #: broker label -> connected?
        self.brokers: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._shown: dict[str, str] = {}   # table id -> the state last put in a frame
        self._wake_pending = False
        self._refused_changed = False
        self.listeners: list[Any] = []

    @property
    def topics(self) -> list[str]:
        """The topics to subscribe to (before a broker's prefix)."""
        return [f"threecard/{p}/+/{kind}" for p in self.pits for kind in ("status", "events")]

    def receive(self, topic: str, payload: bytes) -> bool:
        """One MQTT message (``topic`` as received, with any bridge prefix); True when it
        changed the board. A message that fails its table's signature is dropped and
        counted (:attr:`forged`); one of a table past the limit is counted in
        :attr:`refused` (and logged at its first)."""
        parts = topic.split("/")
        if (len(parts) < 4 or parts[-4] != "threecard" or parts[-3] not in self.pits
                or parts[-1] not in ("status", "events") or len(payload) > MAX_MESSAGE):
            return False
        try:
            message = verify_message(payload, topic, self.keys)
            if parts[-1] == "status" and message.get("floor") != parts[-3]:
                raise ForgedMessage(f"the status names pit {str(message.get('floor'))[:64]!r}, not the topic's "
                                    f"{parts[-3]!r}: a table's signed status moved to another pit's topic")
        except ForgedMessage as exc:
            with self._lock:
                self.forged += 1
            log.warning("pit_message_refused", topic=topic[:120], reason=str(exc)[:200])
            self._changed(None)
            return False
        table = message["table_id"]  # the signed body's (verify_message: the topic's table, or refused)
        with self._lock:
            card = self.tables.get(table)
            if card is None:
                if table in self.refused:
                    first = self.refused[table] == 0
                    self.refused[table] += 1
                    self.refused_messages += 1
                    self._refused_changed = True
                else:
                    return False
            else:
                self.accepted += 1
                card.heard = self.clock()
                if parts[-1] == "status":
                    changed = self._status(card, message)
                else:
                    before = card.last_seq
                    card.event(message)
                    changed = card.last_seq != before
                if changed:
                    self._dirty.add(table)
        if card is None:
            if first:
                log.warning("pit_table_refused", table=table, max_tables=self.max_tables,
                            reason=f"past the pit's table limit ({self.max_tables}, --max-tables)")
            self._changed(None)
            return False
        if changed:
            self._changed(table)
        return changed

    def broker_state(self, label: str, connected: bool) -> None:
        """Record that the subscriber of broker ``label`` is (dis)connected (shown on the page)."""
        with self._lock:
            self.brokers[label] = connected
        self._changed(None)

    def _status(self, card: TableCard, status: dict[str, Any]) -> bool:
        """Take ``status`` by :func:`table.interfaces.mqtt.order_status`, the floor's rule
        (caller holds the lock): the Last Will of the table's current connection shows it
        offline at once; a replay (older, or of a connection whose will was taken) is
        refused and counted with the forged; an ``online: true`` older than ``max_age_s``
        is not believed either (a capture replayed to a pit view started since)."""
        now = _dt.datetime.now(_dt.timezone.utc)
        try:
            verdict, mark = order_status(card.mark, status)
        except ForgedMessage as exc:
            self.forged += 1
            log.warning("pit_status_refused", table=card.table_id, reason=str(exc)[:200])
            return False
        if verdict != "take":
            return False
        if status.get("online") is True:
            if (now - mark.ts).total_seconds() > self.max_age_s:
                return False  # stale: it does not bring a dead table back
            card.online, card.status_ts, card.mark = True, mark.ts, mark
            card.offline_since = card.offline_why = None
            summary = status.get("table")
            card.summary = _said_as_people_do(summary) if isinstance(summary, dict) else None
            return True
        if status.get("online") is False:
            was = card.online
            card.online, card.mark = False, mark
            card.offline_since = card.offline_since or now.isoformat(timespec="seconds")
            card.offline_why = "connection lost (its last will)" if mark.will else "stopped"
            return was is not False
        return False

    def _changed(self, table: str | None) -> None:
        with self._lock:
            self.version += 1
            if self._wake_pending:
                return  # the next frame will carry it: one wake per frame
            self._wake_pending = True
            listeners = list(self.listeners)
        for cb in listeners:
            cb()

    def expire(self) -> None:
        """Mark the tables whose shown state changed with time alone (online, not heard
        from for ``stale_s``: "no news"), so the next frame carries them."""
        now = self.clock()
        with self._lock:
            late = [t for t, c in self.tables.items() if c.state(now, self.stale_s) != self._shown.get(t)]
            self._dirty.update(late)
        if late:
            self._changed(None)

    def _header(self) -> dict[str, Any]:
        return {"pit": self.pit, "pits": list(self.pits), "version": self.version, "forged": self.forged,
                "max_tables": self.max_tables,
                "counts": {"tables": len(self.tables), "accepted": self.accepted, "forged": self.forged,
                           "refused_tables": len(self.refused), "refused_messages": self.refused_messages,
                           "page_resyncs": self.page_resyncs},
                "brokers": [{"broker": b, "connected": up} for b, up in sorted(self.brokers.items())],
                "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")}

    def _refused_list(self) -> list[dict[str, Any]]:
        return [{"table_id": t, "messages": n, "reason": f"past the pit's table limit ({self.max_tables})"}
                for t, n in self.refused.items()]

    def snapshot(self) -> dict[str, Any]:
        """The whole board as the page shows it (a ``full`` frame): ``pit``, ``pits``,
        ``version``, ``forged``, ``max_tables``, ``counts``, ``brokers``, ``refused``
        (tables past the limit), ``ts`` and ``tables`` (one card each, sorted by id)."""
        now = self.clock()
        with self._lock:
            return {"type": "full", **self._header(), "refused": self._refused_list(),
                    "tables": [self._card(c, now) for c in self.tables.values()]}

    def _card(self, card: TableCard, now: float) -> dict[str, Any]:
        d = card.to_dict(now, self.stale_s)
        self._shown[card.table_id] = d["state"]
        return d

    def take_delta(self) -> dict[str, Any]:
        """The tables changed since the last call (a ``delta`` frame: the header members of
        :meth:`snapshot`, ``tables`` changed, ``refused`` when that list changed; ``version``
        unchanged when nothing did). Re-arms the listeners."""
        now = self.clock()
        with self._lock:
            self._wake_pending = False
            dirty, self._dirty = self._dirty, set()
            refused = self._refused_changed
            self._refused_changed = False
            frame = {"type": "delta", **self._header(),
                     "tables": [self._card(self.tables[t], now) for t in sorted(dirty)]}
            if refused:
                frame["refused"] = self._refused_list()
        return frame


def unique_client_id(pit: str) -> str:
    """A fresh MQTT client id for one pit subscriber: ``threecard-pit-{pit}-{pid}-{random}``,
    unique per process and per subscriber, so two pit views of one pit on one broker do
    not knock each other off (MQTT 3.1.1 section 3.1.4: the broker disconnects the older
    client of a reused id)."""
    return f"threecard-pit-{pit[:24]}-{os.getpid()}-{secrets.token_hex(4)}"


def broker_client(mqtt: Any, broker: BrokerAddress, client_id: str, password: str | None,
                  ca_file: str | None) -> Any:
    """A paho client for a subscriber of ``broker`` (the pit view's, the floor's): a clean
    session under ``client_id``, reconnecting by itself (1..30 s), the broker account's
    ``password``, and TLS checked against ``ca_file`` for ``mqtts://``. ``mqtt``: the
    ``paho.mqtt.client`` module (imported by the caller, an optional extra)."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
    client.reconnect_delay_set(1, 30)
    if broker.username:
        client.username_pw_set(broker.username, password)
    if broker.tls:
        import ssl

        client.tls_set(ca_certs=ca_file, cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
    return client


class PitSubscriber:
    """The board's MQTT client for one broker (paho-mqtt): subscribes to the board's
    topics (``[PREFIX/]threecard/{pit}/+/status|events``) on ``broker``, reconnecting by
    itself (1..30 s), and tells the board when it is (dis)connected. ``password``: the
    broker account's; ``ca_file``: the broker's CA for ``mqtts://``; ``client_id``: by
    default a unique one (:func:`unique_client_id`)."""

    def __init__(self, board: PitBoard, broker: BrokerAddress, *, password: str | None = None,
                 ca_file: str | None = None, client_id: str | None = None) -> None:
        try:
            import paho.mqtt.client as mqtt
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise PitSetupError("the pit view needs paho-mqtt: pip install 'threecard-table[mqtt]'") from exc
        self.board = board
        self.broker = broker
        self.connected = False
        self.connects = 0
        self.client_id = client_id or unique_client_id(board.pits[0])
        self._client = broker_client(mqtt, broker, self.client_id, password, ca_file)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = lambda client, userdata, msg: board.receive(msg.topic, msg.payload)
        self._loop: ReceiverLoop | None = None
        board.broker_state(broker.label, False)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if reason.is_failure:
            log.warning("pit_broker_refused", broker=self.broker.label, reason=str(reason))
            return
        self.connected = True
        self.connects += 1
        for topic in self.board.topics:
            client.subscribe(self.broker.prefix + topic, qos=1)
        self.board.broker_state(self.broker.label, True)
        log.info("pit_subscribed", broker=self.broker.label, pits=list(self.board.pits), client_id=self.client_id)

    def _on_disconnect(self, *args: Any) -> None:
        self.connected = False
        self.board.broker_state(self.broker.label, False)
        log.warning("pit_broker_lost", broker=self.broker.label)

    def start(self) -> "PitSubscriber":
        self._client.connect_async(self.broker.host, self.broker.port, keepalive=15)
        self._loop = ReceiverLoop(self._client, f"pit-feed-{self.broker.label}").start()
        return self

    def close(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None


#: Put in a page's queue in place of frames it was too slow for: send it the whole board again.
_RESYNC = object()


async def _broadcast(board: PitBoard, queues: "set[asyncio.Queue]", state: dict[str, Any]) -> None:
    """One frame per tick with changes, encoded once for every page: put in each of
    ``queues`` (:data:`_RESYNC` instead for a page too slow for its frames);
    ``state["version"]`` is the version of the last frame sent."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        try:
            loop.call_soon_threadsafe(woken.set)
        except RuntimeError:  # the loop is closed: the server stops
            pass

    board.listeners.append(wake)
    board.take_delta()  # re-arms the listeners; every page starts from a full frame
    last_sent = last_expired = loop.time()
    try:
        while True:
            try:
                await asyncio.wait_for(woken.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
            woken.clear()
            if loop.time() - last_expired >= 1.0:  # a table turning "no news" with time, busy or not
                last_expired = loop.time()
                board.expire()
            # At most one frame a tick: what arrives meanwhile is coalesced into it.
            await asyncio.sleep(max(0.0, last_sent + TICK_S - loop.time()))
            frame = board.take_delta()
            if frame["version"] == state.get("version") and loop.time() - last_sent < HEARTBEAT_S:
                continue  # nothing new, and the last frame is recent
            state["version"] = frame["version"]
            text = json.dumps(frame, separators=(",", ":"))
            last_sent = loop.time()
            for q in list(queues):
                if q.full():
                    while not q.empty():
                        q.get_nowait()
                    q.put_nowait(_RESYNC)  # too slow for its frames: the whole board again
                    board.page_resyncs += 1
                else:
                    q.put_nowait(text)
    finally:
        if wake in board.listeners:
            board.listeners.remove(wake)


def pit_app(board: PitBoard, static_dir: Path = STATIC_DIR) -> Any:
    """The pit view's ASGI app: the page, ``GET /api/v1/pit`` (the whole board),
    ``/api/v1/pit/ws`` (a ``full`` frame, then ``delta`` frames: one per tick with
    changes, shared by every page, an empty one every :data:`HEARTBEAT_S`)."""
    from starlette.applications import Starlette
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route, WebSocketRoute
    from starlette.staticfiles import StaticFiles
    from starlette.websockets import WebSocket, WebSocketDisconnect

    queues: set[asyncio.Queue] = set()
    state: dict[str, Any] = {"task": None}

    async def page(request: Any) -> Response:
        return FileResponse(static_dir / "pit.html")

    async def snapshot(request: Any) -> Response:
        return JSONResponse(board.snapshot())

    async def ws(websocket: WebSocket) -> None:
        origin = websocket.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1].rstrip("/") != websocket.headers.get("host", ""):
            await websocket.close(1008)
            return
        if len(queues) >= MAX_CLIENTS:
            await websocket.close(1013)
            return
        if state["task"] is None or state["task"].done():
            state["task"] = asyncio.get_running_loop().create_task(_broadcast(board, queues, state),
                                                                   name="pit-broadcast")
        queue: asyncio.Queue = asyncio.Queue(MAX_QUEUED)
        queues.add(queue)
        try:
            await websocket.accept()
            # Taken in this loop step, with the queue registered: every later frame is newer.
            frame: Any = json.dumps(board.snapshot(), separators=(",", ":"))
            while True:
                if frame is _RESYNC:
                    frame = json.dumps(board.snapshot(), separators=(",", ":"))
                await asyncio.wait_for(websocket.send_text(frame), 10)
                frame = await queue.get()
        except (WebSocketDisconnect, ConnectionError, RuntimeError, asyncio.TimeoutError):
            pass
        finally:
            queues.discard(queue)

    routes = [Route("/", page), Route("/pit.html", page), Route("/api/v1/pit", snapshot),
              WebSocketRoute("/api/v1/pit/ws", ws),
              Mount("/js", app=StaticFiles(directory=str(static_dir / "js"))),
              Mount("/css", app=StaticFiles(directory=str(static_dir / "css")))]
    return with_headers(Starlette(routes=routes))


class PitServer(AppServer):
    """Serves :func:`pit_app` on ``host:port`` (uvicorn, in its own thread; port 0: a free
    one, :attr:`port`). Raises ``OSError`` when the address cannot be bound."""

    def __init__(self, board: PitBoard, host: str, port: int) -> None:
        super().__init__(pit_app(board), host, port, name="pit-web", ws_max_size=4096)


__all__ = ["BrokerAddress", "PitBoard", "PitServer", "PitSetupError", "PitSubscriber", "TableCard", "load_table_keys",
           "pit_app", "unique_client_id"]
