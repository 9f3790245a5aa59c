"""The pit view: every table of a pit on one page, from the floor's MQTT broker, never from the tables.

``tablectl pit serve --mqtt mqtt://broker:1883 --pit pit2 --table-keys /etc/floor/tables --web 0.0.0.0:8090``
runs it on any machine of the floor. It subscribes to ``threecard/{pit}/+/status``
and ``threecard/{pit}/+/events`` (docs/integration.md), takes a message only when
it carries a valid signature of its table's key (``TABLE_ID.pub`` in the keys
folder; :func:`table.interfaces.mqtt.verify_message`): anyone on the floor
network can publish to a broker, so a forged ``online: true`` or
``round_settled`` is dropped and counted, never shown. Per table it keeps:

* online or offline: the retained status; ``online: false`` (the table's Last
  Will, sent by the broker when the table's connection dies, or its clean
  stop) is always believed, ``online: true`` only when newer than the last and
  fresh (a replayed old one does not bring a dead table back); a table not
  heard from for ``stale_s`` shows as "no news";
* the current step, what it waits for, alarms and link health (the status's
  ``table`` summary, :func:`table.interfaces.status_view.floor_status`);
* the current round's step from the events, and the last round's result
  (each seat's net from ``round_settled``, or voided), de-duplicated by ``seq``.

The page (``web_static/pit.html``) gets the whole board on a WebSocket
(``/api/v1/pit/ws``) each time it changes, and on ``GET /api/v1/pit``. The board
is public floor telemetry, already sealed by each table (58 Pa. Code 816a.1: no
card face before decisions are final); the pit view accepts no command.
Bounded: at most :data:`MAX_TABLES` tables, messages of :data:`MAX_MESSAGE`
bytes, :data:`MAX_CLIENTS` page connections.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from table.keys import KeyFileError, load_public_key

from .mqtt import ForgedMessage, verify_message
from .web import SECURITY_HEADERS, STATIC_DIR

log = structlog.get_logger("table.pit")

MAX_TABLES = 500
MAX_MESSAGE = 64 * 1024
MAX_CLIENTS = 64
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class PitSetupError(ValueError):
    """The pit view cannot start: a bad broker URL, pit name or keys folder; the message says why."""


@dataclass(frozen=True)
class BrokerAddress:
    """Where the floor's broker is: ``mqtt://[USER@]HOST[:PORT]`` or ``mqtts://`` (TLS, 8883)."""

    host: str
    port: int
    tls: bool
    username: str | None = None

    @classmethod
    def parse(cls, url: str) -> "BrokerAddress":
        parts = urlsplit(url)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise PitSetupError(f"{url!r} is not a broker URL; give mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
        if parts.password is not None:
            raise PitSetupError("give the broker password in a file (--password-file), not in the URL")
        try:
            port = parts.port or (8883 if parts.scheme == "mqtts" else 1883)
        except ValueError:
            raise PitSetupError(f"{url!r}: the port is not a number 1-65535") from None
        return cls(parts.hostname, port, parts.scheme == "mqtts", unquote(parts.username) if parts.username else None)


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
        elif kind == "round_voided":
            self.last_result = {"round_id": rid, "number": (self.round or {}).get("number"), "voided": True,
                                "reason": str(data.get("reason") or "")[:200], "ts": ev.get("ts")}

    def to_dict(self, now: float, stale_s: float) -> dict[str, Any]:
        stale = self.online and now - self.heard > stale_s
        state = "offline" if self.online is False else "no news" if stale or self.online is None else "online"
        return {"table_id": self.table_id, "state": state, "online": bool(self.online) and not stale,
                "status_ts": self.status_ts.isoformat() if self.status_ts else None, "offline_since": self.offline_since,
                "table": self.summary if state == "online" else None, "last_summary": self.summary,
                "round": self.round, "last_result": self.last_result, "last_seq": self.last_seq}


class PitBoard:
    """Every table of pit ``pit``, from verified MQTT messages. ``keys``: table id ->
    public key. ``max_age_s``: an ``online: true`` older than this is not believed;
    ``stale_s``: a table online but not heard from for this long shows "no news".
    Thread-safe; ``version`` grows with every change (``changed`` is set)."""

    def __init__(self, pit: str, keys: dict[str, Ed25519PublicKey], *, max_age_s: float = 90.0,
                 stale_s: float = 90.0, clock: Any = time.monotonic) -> None:
        if not _NAME.match(pit):
            raise PitSetupError(f"{pit!r} is not a pit name (letters, digits, '.', '_', '-')")
        self.pit = pit
        self.keys = dict(keys)
        self.max_age_s = max_age_s
        self.stale_s = stale_s
        self.clock = clock
        self.tables: dict[str, TableCard] = {t: TableCard(t) for t in sorted(self.keys)[:MAX_TABLES]}
        self.forged = 0
        self.version = 0
        self._lock = threading.Lock()
        self.listeners: list[Any] = []

    @property
    def topics(self) -> list[str]:
        return [f"threecard/{self.pit}/+/status", f"threecard/{self.pit}/+/events"]

    def receive(self, topic: str, payload: bytes) -> bool:
        """One MQTT message; True when it changed the board. A message that fails its
        table's signature is dropped and counted (:attr:`forged`)."""
        parts = topic.split("/")
        if len(parts) != 4 or parts[1] != self.pit or parts[3] not in ("status", "events") or len(payload) > MAX_MESSAGE:
            return False
        try:
            message = verify_message(payload, topic, self.keys)
        except ForgedMessage as exc:
            with self._lock:
                self.forged += 1
            log.warning("pit_message_refused", topic=topic[:120], reason=str(exc)[:200])
            self._changed()
            return False
        with self._lock:
            card = self.tables.get(parts[2])
            if card is None:
                return False
            card.heard = self.clock()
            if parts[3] == "status":
                changed = self._status(card, message)
            else:
                before = card.last_seq
                card.event(message)
                changed = card.last_seq != before
        if changed:
            self._changed()
        return changed

    def _status(self, card: TableCard, status: dict[str, Any]) -> bool:
        ts = _parse_ts(status.get("ts"))
        if ts is None:
            return False
        now = _dt.datetime.now(_dt.timezone.utc)
        if status.get("online") is True:
            if (now - ts).total_seconds() > self.max_age_s or (card.status_ts is not None and ts <= card.status_ts):
                return False  # stale or replayed: it does not bring a dead table back
            card.online, card.status_ts = True, ts
            card.offline_since = None
            summary = status.get("table")
            card.summary = summary if isinstance(summary, dict) else None
            return True
        if status.get("online") is False:  # always believed: it is the safe side
            was = card.online
            card.online = False
            card.offline_since = card.offline_since or now.isoformat(timespec="seconds")
            return was is not False
        return False

    def _changed(self) -> None:
        with self._lock:
            self.version += 1
            listeners = list(self.listeners)
        for cb in listeners:
            cb()

    def snapshot(self) -> dict[str, Any]:
        """The board as the page shows it."""
        now = self.clock()
        with self._lock:
            return {"pit": self.pit, "version": self.version, "forged": self.forged,
                    "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    "tables": [c.to_dict(now, self.stale_s) for c in self.tables.values()]}


class PitSubscriber:
    """The board's MQTT client (paho-mqtt): subscribes to the pit's topics on ``broker``,
    reconnecting by itself (1..30 s). ``password``: the broker account's; ``ca_file``:
    the broker's CA for ``mqtts://``."""

    def __init__(self, board: PitBoard, broker: BrokerAddress, *, password: str | None = None,
                 ca_file: str | None = None, client_id: str | None = None) -> None:
        try:
            import paho.mqtt.client as mqtt
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise PitSetupError("the pit view needs paho-mqtt: pip install 'threecard-table[mqtt]'") from exc
        self.board = board
        self.broker = broker
        self.connected = False
        self._client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or f"threecard-pit-{board.pit}",
                                   clean_session=True)
        self._client.reconnect_delay_set(1, 30)
        if broker.username:
            self._client.username_pw_set(broker.username, password)
        if broker.tls:
            import ssl

            self._client.tls_set(ca_certs=ca_file, cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = lambda client, userdata, msg: board.receive(msg.topic, msg.payload)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if reason.is_failure:
            log.warning("pit_broker_refused", reason=str(reason))
            return
        self.connected = True
        for topic in self.board.topics:
            client.subscribe(topic, qos=1)
        log.info("pit_subscribed", host=self.broker.host, port=self.broker.port, pit=self.board.pit)

    def _on_disconnect(self, *args: Any) -> None:
        self.connected = False
        log.warning("pit_broker_lost", host=self.broker.host)

    def start(self) -> "PitSubscriber":
        self._client.connect_async(self.broker.host, self.broker.port, keepalive=15)
        self._client.loop_start()
        return self

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()
        reset = getattr(self._client, "_reset_sockets", None)
        if reset is not None:
            reset()


def pit_app(board: PitBoard, static_dir: Path = STATIC_DIR) -> Any:
    """The pit view's ASGI app: the page, ``GET /api/v1/pit``, ``/api/v1/pit/ws``."""
    from starlette.applications import Starlette
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route, WebSocketRoute
    from starlette.staticfiles import StaticFiles
    from starlette.websockets import WebSocket, WebSocketDisconnect

    clients = {"n": 0}

    async def page(request: Any) -> Response:
        return FileResponse(static_dir / "pit.html")

    async def snapshot(request: Any) -> Response:
        return JSONResponse(board.snapshot())

    async def ws(websocket: WebSocket) -> None:
        origin = websocket.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1].rstrip("/") != websocket.headers.get("host", ""):
            await websocket.close(1008)
            return
        if clients["n"] >= MAX_CLIENTS:
            await websocket.close(1013)
            return
        clients["n"] += 1
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(changed.set)
            except RuntimeError:
                pass

        board.listeners.append(wake)
        await websocket.accept()
        try:
            sent = -1
            while True:
                if board.version != sent:
                    sent = board.version
                    await asyncio.wait_for(websocket.send_text(json.dumps(board.snapshot())), 10)
                changed.clear()
                try:  # also every few seconds: a table not heard from turns "no news" on time
                    await asyncio.wait_for(changed.wait(), 5)
                except asyncio.TimeoutError:
                    sent = -1
        except (WebSocketDisconnect, ConnectionError, RuntimeError, asyncio.TimeoutError):
            pass
        finally:
            clients["n"] -= 1
            if wake in board.listeners:
                board.listeners.remove(wake)

    routes = [Route("/", page), Route("/pit.html", page), Route("/api/v1/pit", snapshot),
              WebSocketRoute("/api/v1/pit/ws", ws),
              Mount("/js", app=StaticFiles(directory=str(static_dir / "js"))),
              Mount("/css", app=StaticFiles(directory=str(static_dir / "css")))]
    inner = Starlette(routes=routes)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await inner(scope, receive, with_headers)

    return app


class PitServer:
    """Serves :func:`pit_app` on ``host:port`` (uvicorn, in its own thread; port 0: a free
    one, :attr:`port`). Raises ``OSError`` when the address cannot be bound."""

    def __init__(self, board: PitBoard, host: str, port: int) -> None:
        import socket

        import uvicorn

        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.port = self.sock.getsockname()[1]
        self.host = host
        config = uvicorn.Config(pit_app(board), log_config=None, access_log=False, lifespan="off",
                                server_header=False, ws_max_size=4096, timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, name="pit-web",
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self._thread.join(5)
        self.sock.close()


__all__ = ["BrokerAddress", "PitBoard", "PitServer", "PitSetupError", "PitSubscriber", "TableCard", "load_table_keys",
           "pit_app"]
