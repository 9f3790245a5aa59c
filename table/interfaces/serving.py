"""What every front door stands on: one asyncio loop, bounded connections, an accept loop that survives EMFILE.

The hand-written thread-per-client servers are gone. Every front door of a
process (the Unix control and event sockets, HTTP and WebSocket) runs on one
:class:`FrontDoorLoop`, an asyncio event loop in a thread of its own, so an
idle client costs a descriptor and a few hundred bytes, not a thread.

Bounds, per listener (:class:`ConnectionGuard`):

* **count**: at most ``max_connections``. A newcomer to a full listener
  closes the connection that has been idle longest (no request in flight, no
  subscription) of the peer holding the most connections (a Unix peer is its
  uid, a TCP peer its address), so a flood from one account or host evicts its
  own connections first; with nothing to evict the newcomer gets one error and
  is closed.
* **idle timeout**: a connection that sends no complete request for
  ``idle_timeout_s`` is told so and closed.
* **length**: the transports bound a line or message (:data:`MAX_LINE`).

* **silence**: a connection is served from its first byte. Until then it is
  parked (:class:`Listener`): a descriptor and a selector entry, no task, no
  stream, no protocol, no TLS handshake. At most ``max_connections`` wait
  parked; a newcomer to a full park closes the one parked longest, and one
  parked for ``idle_timeout_s`` is closed. So 2,000 idle clients cost the
  listener a few microseconds each and the status request behind them is
  answered at once (2,000 idle clients, then one request).

Descriptor exhaustion (EMFILE, ENFILE, ENOBUFS, ENOMEM on ``accept``) never
ends a listener (:class:`Listener`): it keeps one spare descriptor, and when
``accept`` fails for want of descriptors it frees the spare, takes the waiting
connection, tells it ``busy`` and closes it (so clients see an answer, not a
hang), then retries after a short back-off (at most :data:`RETRY_MAX_S`).
Serving resumes as soon as descriptors are free again.

Logging is bounded: nothing a client sent is logged beyond :func:`clip`'s few
characters, and the loop's own exception reports are clipped the same way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import grp
import os
import socket
import stat
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

import structlog

log = structlog.get_logger("table.front_doors")

T = TypeVar("T")

#: longest request line or message accepted (bytes); a reason is at most 500 characters
MAX_LINE = 64 * 1024
#: the longest back-off between accept retries while descriptors are exhausted (s)
RETRY_MAX_S = 0.25
#: accept errors that mean "no descriptor or memory now", not "this listener is broken"
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def clip(value: Any, limit: int = 64) -> str:
    """``value`` as text of at most ``limit`` characters for a log line: control
    characters escaped, the rest replaced by ``…(+N)`` naming how much was cut."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[:limit] + f"…(+{len(text) - limit})"
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


# -- the loop ------------------------------------------------------------------------------------


class FrontDoorLoop:
    """One asyncio event loop in a daemon thread, shared by every front door of a process.

    :meth:`run` runs a coroutine on it from another thread and returns its
    result (raising what it raised); :meth:`spawn` starts one without waiting.
    Blocking work (a journal replay, a PIN hash) goes to :meth:`run_blocking`,
    a small pool of its own so it never stalls the loop. :meth:`close` runs the
    registered closers (newest first), stops the loop and joins the thread.
    """

    def __init__(self, name: str = "front-doors", *, workers: int = 4) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(_bounded_exception_handler)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{name}-work")
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        self.closed = False

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = 30.0) -> T:
        """Run ``coro`` on the loop and return its result. Raises what it raised, or
        ``TimeoutError`` after ``timeout_s``. Not from the loop's own thread."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("FrontDoorLoop.run() called from the loop's own thread")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"{self.name}: no result within {timeout_s} s") from None

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> "concurrent.futures.Future[Any]":
        """Start ``coro`` on the loop (thread-safe); returns a concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the loop's worker pool (awaited from the loop)."""
        return await self.loop.run_in_executor(self.pool, fn, *args)

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run ``await closer()`` on the loop when :meth:`close` is called (newest first)."""
        self._closers.append(closer)

    async def _close_all(self) -> None:
        while self._closers:
            closer = self._closers.pop()
            try:
                await closer()
            except Exception as exc:  # noqa: BLE001 - one front door's failure must not keep the others open
                log.warning("front_door_close_failed", error=clip(str(exc), 200))
        tasks = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)

    def close(self, timeout_s: float = 10.0) -> None:
        """Close every front door on the loop, stop it and join its thread (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.run(self._close_all(), timeout_s)
        except (TimeoutError, RuntimeError) as exc:
            log.warning("front_doors_close_slow", error=clip(str(exc), 200))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)
        self.pool.shutdown(wait=True, cancel_futures=True)
        if not self.loop.is_running():
            self.loop.close()


def _bounded_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's unhandled-error reports, logged without a traceback or anything unbounded."""
    exc = context.get("exception")
    log.error("front_door_loop_error", message=clip(context.get("message", ""), 200),
              error=None if exc is None else f"{type(exc).__name__}: {clip(str(exc), 200)}")


# -- connection bounds ---------------------------------------------------------------------------


@dataclass(eq=False)
class Ticket:
    """One admitted connection. ``peer``: the fairness key (uid or address);
    ``close``: called with a reason to end the connection (it may write a last
    line first); ``busy``: requests in flight or a subscription, which makes it
    the last to be evicted; ``idle_timeout_s``: ``None`` for no idle limit (a
    subscriber that only listens)."""

    guard: "ConnectionGuard"
    peer: Any
    close: Callable[[str], None]
    idle_timeout_s: float | None
    opened: float = field(default_factory=time.monotonic)
    last_active: float = field(default_factory=time.monotonic)
    busy: int = 0
    closed: bool = False
    _timer: asyncio.TimerHandle | None = None

    def touch(self) -> None:
        """A complete request arrived: the idle clock starts again."""
        self.last_active = time.monotonic()
        self.guard._touched(self)

    def set_idle_timeout(self, seconds: float | None) -> None:
        self.idle_timeout_s = seconds
        self.guard._arm(self)

    def end(self, reason: str) -> None:
        """Close the connection for ``reason`` (once)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.close(reason)
        finally:
            self.release()

    def release(self) -> None:
        """The connection has ended: free its place."""
        self.closed = True
        self.guard._release(self)


#: connections a listener takes from the kernel's queue in one go, without waiting
ACCEPT_BATCH = 64
#: the kernel queue of connections not accepted yet (capped by net.core.somaxconn, 4096 on
#: current kernels): a flood of idle clients fits in it, so no newcomer's SYN is dropped and
#: retried a second later (a status request after 2,000 idle clients)
BACKLOG = 4096


class ConnectionGuard:
    """Bounds one listener's connections: count (with fair eviction) and idle time.

    ``counts``: admitted, refused (full, nothing to evict), evicted (closed to make
    room, parked connections of the listener's :class:`Park` included), idle (closed
    for idleness, parked ones included), exhausted (accept failed for want of
    descriptors) — figures for status and benchmarks.
    """

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop, *, max_connections: int,
                 idle_timeout_s: float | None) -> None:
        if max_connections < 1:
            raise ValueError(f"{name}: max_connections must be at least 1, got {max_connections}")
        self.name = name
        self.loop = loop
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.tickets: set[Ticket] = set()
        #: each peer's tickets, longest idle first (admission order, moved to the end when
        #: touched): the victim is found without a scan of every connection (the
        #: scan made each of 2,000 newcomers cost ~1 ms, and the status request behind them waited)
        self._by_peer: dict[Any, dict[Ticket, None]] = {}
        self.counts = {"admitted": 0, "refused": 0, "evicted": 0, "idle": 0, "exhausted": 0}

    def admit(self, peer: Any, close: Callable[[str], None]) -> Ticket | None:
        """A place for a new connection from ``peer``, evicting an idle one when full;
        ``None`` when every connection is busy (the caller refuses the newcomer)."""
        if len(self.tickets) >= self.max_connections:
            victim = self._victim()
            if victim is None:
                self.counts["refused"] += 1
                return None
            self.counts["evicted"] += 1
            victim.end("the server is full and this connection was the longest idle")
        t = Ticket(self, peer, close, self.idle_timeout_s)
        self.tickets.add(t)
        self._by_peer.setdefault(peer, {})[t] = None
        self.counts["admitted"] += 1
        self._arm(t)
        return t

    def _victim(self) -> Ticket | None:
        """The longest idle connection of the peer holding the most (fair to the others);
        None when every connection is busy."""
        for peer in sorted(self._by_peer, key=lambda p: -len(self._by_peer[p])):
            for t in self._by_peer[peer]:  # longest idle first
                if not t.busy and not t.closed:
                    return t
        return None

    def _touched(self, t: Ticket) -> None:
        mine = self._by_peer.get(t.peer)
        if mine is not None and t in mine:
            del mine[t]
            mine[t] = None

    def _arm(self, t: Ticket) -> None:
        if t._timer is not None:
            t._timer.cancel()
            t._timer = None
        if t.idle_timeout_s is None or t.closed:
            return
        due = t.last_active + t.idle_timeout_s - time.monotonic()
        t._timer = self.loop.call_later(max(0.0, due), self._check_idle, t)

    def _check_idle(self, t: Ticket) -> None:
        t._timer = None
        if t.closed or t.idle_timeout_s is None:
            return
        if time.monotonic() - t.last_active >= t.idle_timeout_s:
            self.counts["idle"] += 1
            t.end(f"no request for {t.idle_timeout_s:g} s")
        else:
            self._arm(t)

    def _release(self, t: Ticket) -> None:
        if t._timer is not None:
            t._timer.cancel()
            t._timer = None
        self.tickets.discard(t)
        mine = self._by_peer.get(t.peer)
        if mine is not None:
            mine.pop(t, None)
            if not mine:
                del self._by_peer[t.peer]

    def close_all(self, reason: str) -> None:
        for t in list(self.tickets):
            t.end(reason)


# -- listening -----------------------------------------------------------------------------------


class Park:
    """Accepted connections that have sent nothing yet, oldest first: each costs a
    descriptor and a selector entry until it becomes readable, when ``spoke(conn,
    addr)`` takes it over. Bounds (``guard``'s): at most ``max_connections`` parked (a
    newcomer to a full park closes the one parked longest, counted ``evicted``), and
    none longer than ``idle_timeout_s`` (closed, counted ``idle``). One timer serves the
    whole park, so admitting and closing cost O(1)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, guard: ConnectionGuard,
                 spoke: Callable[[socket.socket, Any], None]) -> None:
        self.loop = loop
        self.guard = guard
        self.spoke = spoke
        #: fd -> (connection, address, parked since), in the order parked
        self.waiting: "OrderedDict[int, tuple[socket.socket, Any, float]]" = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self.waiting)

    def add(self, conn: socket.socket, addr: Any) -> None:
        """Park ``conn`` (non-blocking, accepted from ``addr``) until it is readable."""
        while len(self.waiting) >= self.guard.max_connections:
            self._drop_oldest("evicted")
        fd = conn.fileno()
        self.waiting[fd] = (conn, addr, time.monotonic())
        self.loop.add_reader(fd, self._readable, fd)
        if self._timer is None and self.guard.idle_timeout_s is not None:
            self._timer = self.loop.call_later(self.guard.idle_timeout_s, self._sweep)

    def _readable(self, fd: int) -> None:
        entry = self.waiting.pop(fd, None)
        self.loop.remove_reader(fd)
        if entry is not None:
            self.spoke(entry[0], entry[1])

    def _drop_oldest(self, count: str) -> None:
        fd, (conn, _, _) = self.waiting.popitem(last=False)
        self.guard.counts[count] += 1  # counted before the client can see it closed
        self.loop.remove_reader(fd)
        conn.close()

    def _sweep(self) -> None:
        """Close the connections parked ``idle_timeout_s`` or longer; wake again for the next."""
        self._timer = None
        timeout = self.guard.idle_timeout_s
        if timeout is None:
            return
        now = time.monotonic()
        while self.waiting:
            since = next(iter(self.waiting.values()))[2]
            if now - since < timeout:
                self._timer = self.loop.call_later(since + timeout - now, self._sweep)
                return
            self._drop_oldest("idle")

    def close_all(self) -> None:
        """Close every parked connection (the listener is closing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self.waiting:
            fd, (conn, _, _) = self.waiting.popitem(last=False)
            self.loop.remove_reader(fd)
            conn.close()


class SocketInUse(OSError):
    """The socket path is served by another live process, or is not a socket: it is not
    taken over."""


def unix_listener(path: Path, *, backlog: int = BACKLOG, mode: int = 0o660, group: str | None = None) -> socket.socket:
    """A listening, non-blocking Unix stream socket at ``path`` with ``mode`` (and
    ``group``, a group name, when given). A stale socket file a killed process left
    (nobody answers on it) is replaced; a path another live process serves, or any
    file that is not a socket, is refused (:class:`SocketInUse`): nothing is deleted
    or taken over. Raises ``OSError`` (``ENOENT`` when the folder does not exist: it is
    never created; ``KeyError`` for an unknown group becomes ``OSError``)."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise SocketInUse(errno.EEXIST, f"{path} exists and is not a socket; refusing to replace it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)  # stale: its process is gone
        except OSError as exc:
            raise SocketInUse(errno.EADDRINUSE, f"cannot tell whether {path} is in use ({exc}); "
                                                "refusing to replace it") from None
        else:
            raise SocketInUse(errno.EADDRINUSE, f"{path} is served by another live process; "
                                                "refusing to take it over")
        finally:
            probe.close()
    if not path.parent.is_dir():  # the same rule as the journal's: files are created, never folders
        raise OSError(errno.ENOENT, f"folder {path.parent} does not exist (create it first: the table creates "
                                    "files, never folders)")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound in a private folder (0700: nobody else can reach the socket through it), given
    # its group and mode there, then linked into place: no window in which the socket is
    # open to all, and the process's umask is never changed (another thread creating a
    # file meanwhile would get the wrong mode).
    private = Path(tempfile.mkdtemp(prefix=".s", dir=path.parent))
    staged = private / "s"
    try:
        server.bind(str(staged))
        if group is not None:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise OSError(errno.EINVAL, f"group {group!r} (socket_group) does not exist") from None
            os.chown(staged, -1, gid)
        os.chmod(staged, mode)
        server.listen(backlog)
        server.setblocking(False)
        try:
            os.link(staged, path)  # never replaces: a file that appeared meanwhile is refused
        except FileExistsError:
            raise SocketInUse(errno.EEXIST, f"{path} appeared while the socket was being bound; "
                                            "refusing to replace it") from None
    except OSError:
        server.close()
        raise
    finally:
        with contextlib.suppress(OSError):
            staged.unlink()
        with contextlib.suppress(OSError):
            private.rmdir()
    return server


def tcp_listener(host: str, port: int, *, backlog: int = BACKLOG) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port`` (port 0: any free one).
    Raises ``OSError`` (address in use, unknown host)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    try:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host.strip("[]"), port))
        server.listen(backlog)
        server.setblocking(False)
    except OSError:
        server.close()
        raise
    return server


class Listener:
    """Accepts connections on ``sock`` for ``handle(conn, peer)`` until closed; survives
    descriptor exhaustion (module docstring). ``busy_reply``: bytes written to a
    connection turned away while descriptors are exhausted (then it is closed).
    ``peer_of(conn, addr)``: the fairness key of a new connection.

    ``handle`` is called when the connection first becomes readable (bytes or
    end of file), not when it is accepted: until then it is parked
    (:class:`Park`, bounded by the guard's ``max_connections`` and
    ``idle_timeout_s``), so a silent client costs no task, stream or protocol."""

    def __init__(self, name: str, sock: socket.socket, loop: asyncio.AbstractEventLoop,
                 handle: Callable[[socket.socket, Any], Awaitable[None] | None],
                 *, guard: ConnectionGuard, busy_reply: bytes = b"",
                 peer_of: Callable[[socket.socket, Any], Any] | None = None) -> None:
        self.name = name
        self.sock = sock
        self.loop = loop
        self.handle = handle
        self.guard = guard
        self.busy_reply = busy_reply
        self.peer_of = peer_of or (lambda conn, addr: addr[0] if isinstance(addr, tuple) else addr)
        self._spare: int | None = self._open_spare()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.park = Park(loop, guard, self._spoke)
        self._task = loop.create_task(self._accept_loop(), name=f"{name}-accept")
        self._last_warning = 0.0

    @staticmethod
    def _open_spare() -> int | None:
        try:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None

    async def _accept_loop(self) -> None:
        backoff = 0.01
        while True:
            try:
                conn, addr = await self.loop.sock_accept(self.sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if exc.errno in EXHAUSTED:
                    self._exhausted(exc)
                    await asyncio.sleep(backoff)  # back-off while the system has no descriptor to give
                    backoff = min(backoff * 2, RETRY_MAX_S)
                    continue
                if exc.errno in (errno.EBADF, errno.EINVAL):  # the listening socket was closed
                    return
                log.warning("accept_failed", listener=self.name, error=clip(str(exc), 200))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)
                continue
            backoff = 0.01
            if self._spare is None:
                self._spare = self._open_spare()
            self._take(conn, addr)
            # Drain the kernel's queue without a trip through the selector for each: after a
            # flood of idle clients the request behind them is reached at once.
            for _ in range(ACCEPT_BATCH):
                try:
                    conn, addr = self.sock.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break  # sock_accept above sees it again and handles it
                self._take(conn, addr)
            await asyncio.sleep(0)  # let the connections just taken (and everyone else) run

    def _take(self, conn: socket.socket, addr: Any) -> None:
        """Park one accepted connection until it speaks (who it is is asked then)."""
        conn.setblocking(False)
        self.park.add(conn, addr)

    def _spoke(self, conn: socket.socket, addr: Any) -> None:
        """Hand a connection that became readable to the front door's handler."""
        try:
            peer = self.peer_of(conn, addr)
        except OSError as exc:
            log.warning("peer_unknown", listener=self.name, error=clip(str(exc), 200))
            conn.close()
            return
        try:
            result = self.handle(conn, peer)
        except Exception as exc:  # noqa: BLE001 - one connection's failure must not end the listener
            log.warning("connection_setup_failed", listener=self.name, error=clip(str(exc), 200))
            conn.close()
            return
        if asyncio.iscoroutine(result):
            task = self.loop.create_task(result)
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("connection_failed", listener=self.name, error=f"{type(exc).__name__}: {clip(str(exc), 200)}")

    def _exhausted(self, exc: OSError) -> None:
        self.guard.counts["exhausted"] += 1
        now = time.monotonic()
        if now - self._last_warning > 10.0:  # one warning per 10 s, not one per attempt
            self._last_warning = now
            log.warning("descriptors_exhausted", listener=self.name, error=os.strerror(exc.errno or 0),
                        times=self.guard.counts["exhausted"])
        if self._spare is None:
            return
        os.close(self._spare)  # free one descriptor to answer the connection that waits
        self._spare = None
        try:
            conn, _ = self.sock.accept()
        except OSError:
            pass
        else:
            try:
                conn.setblocking(False)
                if self.busy_reply:
                    conn.send(self.busy_reply)
            except OSError:
                pass
            conn.close()
        self._spare = self._open_spare()

    async def close_accepting(self) -> None:
        """Stop accepting new connections (those open go on)."""
        if not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass

    async def close(self) -> None:
        """Stop accepting, end the connections' tasks, close the socket and the spare."""
        await self.close_accepting()
        self.sock.close()
        self.park.close_all()
        self.guard.close_all("the table is shutting down")
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
