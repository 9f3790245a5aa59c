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

Who may read what (58 Pa. Code 816a.1): the peer's role comes from its
account (``SO_PEERCRED`` mapped through ``[roles]``,
:class:`~table.interfaces.peers.LocalRoles`). A seat terminal gets only its
own seat's channel (asking for none gives it that one; asking for another
seat is refused); every other role gets the table-wide stream, and a seat's
channel is refused to it. A peer with no role is refused.

A request that cannot be served (not JSON, ``resume_from`` beyond ``head_seq``,
a seat outside 1..7, a channel the peer may not have, a request line longer
than 64 KiB) gets one ``error`` line (``{"type": "error", "error": "..."}``)
and the connection is closed; a connection with no complete request within
10 s is closed without one. A
consumer more than ``max_backlog`` events behind gets an ``error`` line naming
the last seq sent and is disconnected: it reconnects with that ``resume_from``
and loses nothing. Sealing is that of :mod:`table.events` (58 Pa. Code 816a.1).

Served on the process's :class:`~table.interfaces.serving.FrontDoorLoop` with
the same bounds as the control socket (a connection parked until its first
byte, the longest parked closed first when the park is full and after 10 s;
connection count with fair eviction of connections that have not sent their
request line; descriptor exhaustion survived).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import structlog

from table.events import SCHEMA, SCHEMA_VERSION, EventLog, EventStreamError

from .dispatch import MAX_BACKLOG, Dispatcher, EventHub, channel_seat
from .peers import LocalRoles, PeerCredentials, peer_credentials
from .serving import MAX_LINE, ConnectionGuard, FrontDoorLoop, Listener, clip, unix_listener

log = structlog.get_logger("table.event_socket")

HELLO_TIMEOUT_S = 10.0
#: an event that cannot be written within this long ends the connection (s)
WRITE_TIMEOUT_S = 30.0


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _error(text: str, **extra: Any) -> bytes:
    return _line({"type": "error", "error": text, **extra})


class EventSocket:
    """Serves ``events`` on a Unix stream socket at ``path`` (mode 0660, group
    ``socket_group`` when given).

    ``front``: the process's :class:`~table.interfaces.serving.FrontDoorLoop` (a
    private one when ``None``); ``hub``: an :class:`~table.interfaces.dispatch.EventHub`
    on ``events`` to share (default: a new one); ``roles``: who may read which
    channel (default: root and this process's account, table-wide only);
    ``max_backlog``: events a consumer may fall behind before it is told to
    resume. Raises ``OSError`` if the socket cannot be bound. :meth:`close`
    lets every consumer have the events already due, disconnects them and
    removes the socket file.
    """

    def __init__(self, path: str | Path, events: EventLog, *, max_backlog: int = MAX_BACKLOG,
                 front: FrontDoorLoop | None = None, hub: EventHub | None = None, roles: LocalRoles | None = None,
                 socket_group: str | None = None, max_connections: int = 256) -> None:
        self.path = Path(path)
        self.events = events
        self.max_backlog = max_backlog
        self.roles = roles or LocalRoles()
        self.max_connections = max_connections
        self._own_front = front is None
        self.front = front or FrontDoorLoop("event-socket")
        self._own_hub = hub is None
        self.hub = hub or EventHub(events, self.front)
        self._feeds: set[Any] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        try:
            sock = unix_listener(self.path, group=socket_group)
        except OSError:
            self._release()
            raise
        self.guard: ConnectionGuard = self.front.run(self._start(sock))
        self.front.on_close(self._stop)
        self._closed = False

    def _release(self) -> None:
        if self._own_hub:
            self.hub.close()
        if self._own_front:
            self.front.close()

    async def _start(self, sock: socket.socket) -> ConnectionGuard:
        loop = asyncio.get_running_loop()
        guard = ConnectionGuard("event-socket", loop, max_connections=self.max_connections,
                                idle_timeout_s=HELLO_TIMEOUT_S)
        self._listener = Listener("event-socket", sock, loop, self._client, guard=guard,
                                  busy_reply=_error("busy: the table has no descriptor free for this connection "
                                                    "now; try again"),
                                  peer_of=lambda conn, addr: peer_credentials(conn))
        return guard

    async def _client(self, conn: socket.socket, peer: PeerCredentials) -> None:
        reader, writer = await asyncio.open_unix_connection(sock=conn, limit=MAX_LINE)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        feed = None
        ticket = None
        try:
            actor = self.roles.actor(peer, "event-socket")
            if actor is None:
                log.warning("events_no_role", uid=peer.uid, user=clip(peer.user))
                writer.write(_error(f"bad request: account {peer.person} has no role at this table "
                                    f"({self.roles.describe()})"))
                return
            ticket = self.guard.admit(peer.uid, lambda reason: writer.transport.abort())
            if ticket is None:
                writer.write(_error("busy: every connection is busy; try again"))
                return
            try:
                req = await self._request(reader)
                seat = channel_seat(actor, req.get("seat"))
                feed = self.hub.open(req.get("resume_from"), seat, self.max_backlog)
            except asyncio.IncompleteReadError:
                writer.write(_error("bad request: closed before the request line"))
                return
            except asyncio.LimitOverrunError:
                writer.write(_error(f"bad request: the request line is longer than {MAX_LINE} bytes"))
                return
            except (ValueError, EventStreamError, PermissionError) as exc:
                writer.write(_error(f"bad request: {clip(str(exc), 300)}"))
                return
            ticket.touch()
            ticket.busy += 1
            ticket.set_idle_timeout(None)
            self._feeds.add(feed)
            writer.write(_line({"type": "hello", "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                                "table_id": self.events.table_id, "head_seq": feed.head,
                                "resume_from": feed.after, "seat": feed.seat}))
            while True:
                try:
                    ev = await feed.next()
                except EOFError:
                    if feed.overflowed:
                        writer.write(_error("consumer fell behind; reconnect with resume_from",
                                            last_seq=feed.last_seq))
                    return
                writer.write(_line(ev))
                await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            writer.transport.abort()
        finally:
            if feed is not None:
                feed.close()
                self._feeds.discard(feed)
            if ticket is not None:
                ticket.release()
            try:
                await asyncio.wait_for(writer.drain(), 1.0)
            except (ConnectionError, OSError, asyncio.TimeoutError):
                pass
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _request(self, reader: asyncio.StreamReader) -> dict[str, Any]:
        line = await reader.readuntil(b"\n")
        try:
            req = json.loads(line.strip() or b"{}")
        except (ValueError, RecursionError):
            raise ValueError("the request line is not JSON") from None
        if not isinstance(req, dict):
            raise ValueError('the request is a JSON object such as {"resume_from": 0}')
        unknown = sorted(k for k in req if k not in ("resume_from", "seat"))
        if unknown:
            raise ValueError(f"unknown member {clip(unknown[0], 40)}; allowed: resume_from, seat")
        for key in ("resume_from", "seat"):
            v = req.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise ValueError(f"{key} must be an integer or null, got {clip(v, 40)}")
        return req

    async def _stop(self) -> None:
        """Consumers first send what is already due (the last round's close), then leave."""
        await self._listener.close_accepting()
        await asyncio.sleep(0)  # let fan-outs already handed to the loop reach the feeds
        for f in list(self._feeds):
            f.close()  # each feed ends after the events it already holds
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=3.0)
        await self._listener.close()
        if self.path.is_socket():
            self.path.unlink()

    def close(self) -> None:
        """Stop serving: consumers get the events already due, then are disconnected;
        the socket file is removed (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.front.run(self._stop())
        except (TimeoutError, RuntimeError):
            pass
        if self._own_hub:
            self.hub.close()
        if self._own_front:
            self.front.close()


def read_events(path: str | Path, *, since: int | None = None, seat: int | None = None, follow: bool = True,
                retry_s: float = 0.5, timeout_s: float = 10.0,
                stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
    """Events from the socket at ``path``: seq > ``since`` (None: from now on), as channel ``seat``.

    With ``follow``, reconnects whenever the connection drops (the controller
    restarted; a connection closed before its hello, as a stopping controller's is,
    is a drop too) and resumes from the last seq received, so the consumer sees
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
                    first = f.readline()
                    if not first:  # closed before its hello (a controller stopping): a drop like any other
                        raise ConnectionResetError
                    hello = json.loads(first)
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


def _receipts(config: Any, journal: Any, table_id: str, controller: Any = None) -> dict[str, Any]:
    """The publisher's receipt hooks with ``[floor] url`` and a journal: ``on_receipt`` takes
    the floor's receipts into the journal (:class:`table.floor_anchor.ReceiptBook`'s ``take``,
    journaled before each checkpoint), ``receipt_source`` gives the latest one journaled,
    presented in the table's statuses; ``on_floor_notary`` compares the floor's statement of
    its notary with them (``floor_statement``), and a floor behind holds ``controller``
    before its next round (its ``floor_behind``); none otherwise."""
    floor = getattr(config, "floor", None)
    if journal is None or floor is None or not getattr(floor, "url", None):
        return {}
    from table.floor_anchor import ReceiptBook, latest_receipt
    from table.keys import load_public_key

    book = ReceiptBook(journal, load_public_key(floor.public_key), table_id).attach()
    if controller is not None and hasattr(controller, "floor_behind"):
        book.on_behind.append(controller.floor_behind)
    return {"on_receipt": book.take, "receipt_source": lambda: latest_receipt(journal),
            "on_floor_notary": book.floor_statement}


def serve_for(stack: Any, controller: Any, journal_path: str | Path, socket_path: str | Path | None,
              config: Any = None, *, front: FrontDoorLoop | None = None, dispatcher: Dispatcher | None = None,
              roles: LocalRoles | None = None, table_key: Any = None, journal: Any = None) -> EventLog:
    """``tablectl run``'s wiring: follow the controller's journal, serve it on
    ``socket_path`` (if given) and to ``dispatcher``'s subscribers, and publish to
    MQTT when ``config`` (a :class:`~table.config.TableConfig`) has an ``[mqtt]``
    section with a host, signed with ``table_key`` (a :class:`~table.keys.TableKey`).
    ``journal``: the controller's open :class:`~table.journal.Journal`: the live
    stream is fed what it commits, from memory (without it: the file is followed).
    Everything is closed by ``stack`` (an ``ExitStack``). Table id: the config's
    ``table.id``, else ``"table"``. Raises ``OSError`` if the socket cannot be bound,
    ``EventStreamError`` if the journal cannot be read,
    :class:`~table.interfaces.mqtt.MqttSetupError` for unusable MQTT settings."""
    table_id = config.table.id if config is not None else "table"
    archive = config.journal.archive if config is not None else None  # a client behind at the day's close
    events = EventLog(journal_path, table_id, key=table_key, journal=journal,  # the key opens a seat's own cards
                      archive=archive)
    stack.callback(events.close)
    events.start()
    if journal is None:
        controller.subscribe(events.notify)  # look at the file at once on every table event
    if front is None:
        front = FrontDoorLoop("event-stream")
        stack.callback(front.close)
    hub = EventHub(events, front)
    stack.callback(hub.close)
    if dispatcher is not None:
        dispatcher.hub = hub
        dispatcher.table_id = table_id
    if socket_path:
        console = getattr(config, "console", None)
        stack.callback(EventSocket(socket_path, events, front=front, hub=hub, roles=roles,
                                   socket_group=getattr(console, "socket_group", None),
                                   max_connections=getattr(console, "max_connections", 256)).close)
    mqtt_cfg = getattr(config, "mqtt", None) if config is not None else None
    if mqtt_cfg is not None and mqtt_cfg.host:
        from table.interfaces.mqtt import MqttPublisher

        stack.callback(MqttPublisher(events, mqtt_cfg.settings(table_key), status_source=controller.status,
                                     **_receipts(config, journal, events.table_id, controller)).start().close)
    return events
