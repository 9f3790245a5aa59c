"""The local event stream: JSON Lines over a Unix domain socket (``tablectl run --event-socket``).

Protocol (schema files in ``docs/schemas/``):

1. The consumer connects and sends one request line::

       {"resume_from": 41}             # events with seq > 41, replayed from the journal, then live
       {"resume_from": 0}              # everything since the table's first entry
       {}                              # live only, from now on
       {"resume_from": 41, "seat": 3}  # seat 3's channel: its own cards live (816a.1)

   ``resume_from`` is the last ``seq`` the consumer has (0: none).
2. The controller answers one ``hello`` line (``hello-v1.schema.json``)::

       {"type": "hello", "schema": "threecard.events/1", "schema_version": "1.0.0",
        "table_id": "pit2-tcp-07", "head_seq": 57, "resume_from": 41, "seat": null}

3. Then events (``event-v1.schema.json``), one per line, ``seq`` consecutive
   from ``resume_from + 1``, for as long as the connection lasts.

A request that cannot be served (not JSON, ``resume_from`` beyond ``head_seq``,
a seat outside 1..7, no request within 10 s) gets one ``error`` line
(``{"type": "error", "error": "..."}``) and the connection is closed. A
consumer more than ``max_backlog`` events behind gets an ``error`` line naming
the last seq sent and is disconnected: it reconnects with that ``resume_from``
and loses nothing. Sealing is that of :mod:`table.events` (58 Pa. Code 816a.1).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import structlog

from table.interfaces.control_socket import unix_listener
from table.events import SCHEMA, SCHEMA_VERSION, EventLog, EventStreamError

log = structlog.get_logger("table.event_socket")

HELLO_TIMEOUT_S = 10.0


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class EventSocket:
    """Serves ``events`` on a Unix stream socket at ``path`` (mode 0660), a thread per consumer.

    Raises ``OSError`` if the socket cannot be bound. :meth:`close` disconnects
    every consumer and removes the socket file.
    """

    def __init__(self, path: str | Path, events: EventLog, *, max_backlog: int = 10_000) -> None:
        self.path = Path(path)
        self.events = events
        self.max_backlog = max_backlog
        self._server = unix_listener(self.path, backlog=16)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._clients: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, name="events-accept", daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._stop.is_set():
                    conn.close()
                    return
                self._clients.add(conn)
                self._threads = [t for t in self._threads if t.is_alive()]
                t = threading.Thread(target=self._client, args=(conn,), name="events-client", daemon=True)
                self._threads.append(t)
            t.start()

    def _request(self, conn: socket.socket) -> dict[str, Any]:
        conn.settimeout(HELLO_TIMEOUT_S)
        buf = b""
        while b"\n" not in buf:
            chunk = conn.recv(4096)
            if not chunk:
                raise ValueError("closed before the request line")
            buf += chunk
            if len(buf) > 65536:
                raise ValueError("request line too long")
        conn.settimeout(None)
        req = json.loads(buf.split(b"\n", 1)[0] or b"{}")
        if not isinstance(req, dict):
            raise ValueError('the request is a JSON object such as {"resume_from": 0}')
        for key in ("resume_from", "seat"):
            v = req.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise ValueError(f"{key} must be an integer or null, got {v!r}")
        return req

    def _client(self, conn: socket.socket) -> None:
        sub = None
        try:
            try:
                req = self._request(conn)
                sub = self.events.subscribe(req.get("resume_from"), seat=req.get("seat"), maxsize=self.max_backlog)
            except (ValueError, EventStreamError, OSError) as exc:
                reason = "no request line" if isinstance(exc, (TimeoutError, socket.timeout)) else str(exc)
                try:
                    conn.sendall(_line({"type": "error", "error": f"bad request: {reason}"}))
                except OSError:
                    pass
                return
            conn.sendall(_line({"type": "hello", "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                                "table_id": self.events.table_id, "head_seq": sub.head, "resume_from": sub.after,
                                "seat": sub.seat}))
            quiet = 0
            while quiet < 2:  # after stop: drain what is already due, then leave
                try:
                    ev = sub.get(0.2)
                except EOFError:
                    if sub.overflowed:
                        conn.sendall(_line({"type": "error", "error": "consumer fell behind; reconnect with "
                                            "resume_from", "last_seq": sub.last_seq}))
                    return
                if ev is not None:
                    conn.sendall(_line(ev))
                    quiet = 0
                elif self._stop.is_set():
                    quiet += 1
        except OSError:
            return  # the consumer went away
        finally:
            if sub is not None:
                sub.close()
            with self._lock:
                self._clients.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop serving: disconnect consumers, join their threads, remove the socket file."""
        self._stop.set()
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        self._accept.join(2.0)
        with self._lock:
            threads = list(self._threads)
        for t in threads:  # each drains the events already due (the last round's close), then ends
            t.join(3.0)
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(2.0)
        if self.path.is_socket():
            self.path.unlink()


def read_events(path: str | Path, *, since: int | None = None, seat: int | None = None, follow: bool = True,
                retry_s: float = 0.5, timeout_s: float = 10.0,
                stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
    """Events from the socket at ``path``: seq > ``since`` (None: from now on), as channel ``seat``.

    With ``follow``, reconnects whenever the connection drops (the controller
    restarted) and resumes from the last seq received, so the consumer sees
    every event once, in order. Without it, stops at the head announced in the
    hello. ``stop``: set it to end a following reader between connections.
    Raises ``ConnectionError`` when the server answers with an error line (or,
    without ``follow``, cannot be reached).
    """
    last = since
    while stop is None or not stop.is_set():
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout_s)
                s.connect(str(path))
                s.sendall(_line({"resume_from": last, "seat": seat}))
                s.settimeout(None if follow else timeout_s)
                with s.makefile("rb") as f:
                    hello = json.loads(f.readline() or b"{}")
                    if hello.get("type") != "hello":
                        raise ConnectionError(f"{path}: {hello.get('error', 'no hello from the event socket')}")
                    if last is None:
                        last = hello["resume_from"]
                    head = hello["head_seq"]
                    if not follow and last >= head:
                        return
                    for raw in f:
                        msg = json.loads(raw)
                        if msg.get("type") == "error":
                            if "last_seq" in msg:
                                break  # fell behind: reconnect and resume
                            raise ConnectionError(f"{path}: {msg['error']}")
                        last = msg["seq"]
                        yield msg
                        if not follow and last >= head:
                            return
        except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            if not follow:
                raise ConnectionError(f"cannot read the event socket {path}") from None
        if not follow:
            return
        if stop is not None:
            stop.wait(retry_s)
        else:
            time.sleep(retry_s)


def serve_for(stack: Any, controller: Any, journal_path: str | Path, socket_path: str | Path | None,
              config: Any = None, key: Any = None) -> EventLog:
    """``tablectl run``'s wiring: follow the controller's journal, serve it on
    ``socket_path`` (if given), and publish to MQTT when ``config`` (a
    :class:`~table.config.TableConfig`) has an ``[mqtt]`` section with a host.
    Everything is closed by ``stack`` (an ``ExitStack``). Table id: the
    config's ``table.id``, else ``"table"``. Raises ``OSError`` if the socket
    cannot be bound, ``EventStreamError`` if the journal cannot be read. ``key``: the
    table key, so a seat's channel can carry that seat's own (sealed) cards."""
    table_id = config.table.id if config is not None else "table"
    events = EventLog(journal_path, table_id, key=key)
    stack.callback(events.close)
    events.start()
    controller.subscribe(events.notify)
    if socket_path:
        stack.callback(EventSocket(socket_path, events).close)
    mqtt_cfg = getattr(config, "mqtt", None) if config is not None else None
    if mqtt_cfg is not None and mqtt_cfg.host:
        from table.interfaces.mqtt import MqttPublisher

        stack.callback(MqttPublisher(events, mqtt_cfg.settings()).start().close)
    return events
