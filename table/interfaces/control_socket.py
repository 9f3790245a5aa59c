"""The dealer and supervisor console on a Unix socket: the table API as JSON Lines (``docs/console.md``).

One request object per line, one reply object per line
(``docs/schemas/api-request-v1.schema.json``, ``api-reply-v1.schema.json``)::

    {"id": 1, "action": "status"}
    {"id": 1, "ok": true, "places": {...}, ...}
    {"id": 2, "action": "void", "reason": "misdeal", "supervisor": "S-17", "pin": "..."}
    {"id": 2, "ok": false, "code": "forbidden", "error": "void is for supervisor; alice is signed in as dealer"}

Compatible with the first version: a request without ``id`` gets its reply
without one, in order (the connection answers id-less requests one at a
time); requests that carry an id are answered as soon as each is done, each
reply naming its id. ``subscribe`` pushes the public events on the same
connection (as lines of their own, after its reply).

Who the client is comes from the kernel (``SO_PEERCRED``), mapped to a role
through the config's ``[roles]`` groups (:class:`~table.interfaces.peers.LocalRoles`);
a peer with no role gets one ``unauthenticated`` line and is closed (once it
has sent something: a connection is served from its first byte, parked until
then, :class:`~table.interfaces.serving.Park`). Bounds:
at most ``max_connections`` connections (the longest idle of the busiest
account is closed to make room), a line of at most
:data:`~table.interfaces.serving.MAX_LINE` bytes (a longer one gets one
``too_large`` reply and the connection is closed: nothing is read or logged
beyond the limit), ``idle_timeout_s`` without a request closes the
connection, and running out of descriptors turns newcomers away with a
``busy`` line until descriptors are free again (:mod:`~table.interfaces.serving`).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import structlog

from table.console import Console

from .dispatch import Channel, Dispatcher, EventHub, _valid_id, refusal
from .peers import LocalRoles, PeerCredentials, peer_credentials
from .serving import MAX_LINE, ConnectionGuard, FrontDoorLoop, Listener, SocketInUse, Ticket, clip, unix_listener  # noqa: F401

log = structlog.get_logger("table.control")

#: requests with an id one connection may have in flight at once
MAX_IN_FLIGHT = 16
#: a reply or event that cannot be written within this long ends the connection (s)
WRITE_TIMEOUT_S = 10.0


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


BUSY_LINE = _line(refusal("busy", "the table has no descriptor free for this connection now; try again"))


async def serve_lines(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, channel: Channel,
                      dispatcher: Dispatcher, ticket: Ticket) -> None:
    """Serve one JSON Lines connection until it closes (the control socket's protocol)."""
    lock = asyncio.Lock()

    async def send(obj: dict[str, Any]) -> None:
        data = _line(obj)
        async with lock:
            writer.write(data)
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)

    channel.push = send
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)
    tasks: set[asyncio.Task[Any]] = set()
    malformed = 0

    async def one(raw: Any, concurrent: bool) -> None:
        ticket.busy += 1
        try:
            await dispatcher.serve(channel, raw, send)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            writer.transport.abort()
        finally:
            ticket.busy -= 1
            if concurrent:
                slots.release()

    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
                eof = False
            except asyncio.LimitOverrunError:
                log.warning("request_too_long", source=channel.source, person=clip(channel.actor.person
                                                                                  if channel.actor else None))
                await send(refusal("too_large", f"a request line is at most {MAX_LINE} bytes; closing the "
                                                "connection"))
                return
            except asyncio.IncompleteReadError as exc:
                line, eof = exc.partial, True
            if line.strip():
                ticket.touch()
                try:
                    req: Any = json.loads(line)
                except (ValueError, RecursionError):
                    req = line
                if not isinstance(req, dict):
                    malformed += 1
                if isinstance(req, dict) and req.get("id") is not None and _valid_id(req.get("id")):
                    await slots.acquire()
                    task = asyncio.get_running_loop().create_task(one(req, True))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                else:
                    await one(req, False)
            if eof:
                break
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass
    finally:
        channel.close()
        for t in list(tasks):
            t.cancel()
        if malformed:
            log.info("malformed_requests", source=channel.source, count=malformed,
                     person=clip(channel.actor.person if channel.actor else None))
        writer.close()


class ControlSocket:
    """Serves the table API on a Unix socket at ``path`` (mode 0660, group
    ``socket_group`` when given) for ``console``.

    ``front``: the process's :class:`~table.interfaces.serving.FrontDoorLoop` (a
    private one when ``None``, closed with this socket); ``roles``: who may do
    what (:class:`~table.interfaces.peers.LocalRoles`; default: root and this
    process's own account are supervisors, nobody else has a role); ``hub``: the
    event stream for ``subscribe`` (none: refused); ``dispatcher``: share one
    with other front doors (default: a new one, with ``prove``). ``prove``:
    ``(person, pin) -> Actor``, the people file's PIN check: an account is not a
    person, so every supervisor action here names a person of the people file
    and proves it with their PIN, or is refused (``docs/console.md``).
    Raises ``OSError`` if the socket
    cannot be bound. :meth:`close` stops it and removes the socket file.
    """

    def __init__(self, path: str | Path, console: Console, *, front: FrontDoorLoop | None = None,
                 roles: LocalRoles | None = None, hub: EventHub | None = None,
                 dispatcher: Dispatcher | None = None, socket_group: str | None = None,
                 max_connections: int = 256, idle_timeout_s: float = 300.0,
                 reply_timeout_s: float = 30.0, prove: Any = None) -> None:
        self.path = Path(path)
        self.console = console
        self._own_front = front is None
        self.front = front or FrontDoorLoop("control-socket")
        self.roles = roles or LocalRoles()
        self.dispatcher = dispatcher or Dispatcher(console, self.front, hub=hub, reply_timeout_s=reply_timeout_s,
                                                   prove=prove)
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        try:
            sock = unix_listener(self.path, group=socket_group)
        except OSError:
            if self._own_front:
                self.front.close()
            raise
        self.guard: ConnectionGuard = self.front.run(self._start(sock))
        self.front.on_close(self._stop)
        console.attached = True
        self._closed = False

    async def _start(self, sock: socket.socket) -> ConnectionGuard:
        loop = asyncio.get_running_loop()
        guard = ConnectionGuard("control-socket", loop, max_connections=self.max_connections,
                                idle_timeout_s=self.idle_timeout_s)
        self._listener = Listener("control-socket", sock, loop, self._client, guard=guard, busy_reply=BUSY_LINE,
                                  peer_of=lambda conn, addr: peer_credentials(conn))
        return guard

    async def _client(self, conn: socket.socket, peer: PeerCredentials) -> None:
        reader, writer = await asyncio.open_unix_connection(sock=conn, limit=MAX_LINE)
        actor = self.roles.actor(peer, "control-socket")
        if actor is None:
            log.warning("control_no_role", uid=peer.uid, user=clip(peer.user))
            writer.write(_line(refusal("unauthenticated", f"account {peer.person} has no role at this table; "
                                                          f"roles come from groups ({self.roles.describe()})")))
            await _close(writer)
            return
        ticket = self.guard.admit(peer.uid, lambda reason: writer.transport.abort())
        if ticket is None:
            writer.write(_line(refusal("busy", "every connection is busy; try again")))
            await _close(writer)
            return

        def subscribed(on: bool) -> None:
            ticket.busy += 1 if on else -1
            ticket.set_idle_timeout(None if on else self.idle_timeout_s)

        channel = Channel("control-socket", actor, signed_in=False, on_subscribe=subscribed, proves_people=True)
        try:
            await serve_lines(reader, writer, channel, self.dispatcher, ticket)
        finally:
            ticket.release()

    async def _stop(self) -> None:
        await self._listener.close()
        if self.path.is_socket():
            self.path.unlink()

    def close(self) -> None:
        """Stop serving, close every connection and remove the socket file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._own_front:
            self.front.close()
        else:
            try:
                self.front.run(self._stop())
            except (TimeoutError, RuntimeError):
                pass


async def _close(writer: asyncio.StreamWriter) -> None:
    try:
        await asyncio.wait_for(writer.drain(), 1.0)
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass
    writer.close()


_ids = iter(range(1, 2 ** 53))


def send(path: str | Path, request: dict, timeout_s: float = 600.0, *, max_reply: int = 16 << 20) -> dict:
    """Send one request to a control socket and return its reply (for vendors and tests).

    ``max_reply``: the longest reply line taken (bytes); a longer one raises ``ValueError``.
    An ``id`` is added when the request has none (``"py-<pid>-<n>"``) and the reply is
    checked to name it (and returned without it, as the caller sent none). Raises ``ConnectionError`` when the controller closes the
    connection without a reply, ``OSError`` when it cannot be reached, ``TimeoutError``."""
    req = dict(request)
    rid = req.setdefault("id", f"py-{os.getpid()}-{next(_ids)}")
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        backoff = 0.005
        while True:
            try:
                s.connect(str(path))
                break
            except BlockingIOError:  # the listener's backlog is full (a flood): wait for room, to the deadline
                if time.monotonic() + backoff > deadline:
                    raise TimeoutError(f"{path}: the controller's backlog stayed full for {timeout_s:g} s") from None
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.1)
        with s.makefile("rwb") as f:
            f.write(_line(req))
            f.flush()
            while True:
                line = f.readline(max_reply)
                if not line:
                    raise ConnectionError(f"{path}: the controller closed the connection without a reply")
                if not line.endswith(b"\n"):
                    raise ValueError(f"{path}: a reply longer than {max_reply} bytes")
                reply = json.loads(line)
                if reply.get("id") == rid or ("id" not in reply and "ok" in reply):
                    if "id" not in request:
                        reply.pop("id", None)  # the id was ours, to match the reply
                    return reply
                # an event or status pushed by a subscription on this connection: not our reply
