"""Byte transports under the link: anything pyserial opens by URL.

``serial.serial_for_url`` gives one seam for real ports (``/dev/ttyUSB0``,
``/dev/threecard/shoe``), ptys, ``socket://host:port``, ``rfc2217://`` and
``loop://`` (docs/architecture.md, "The layer rule"). Ports are opened with ``exclusive=True`` so
a second process cannot interleave bytes on the same device.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import threading
import time
from typing import Any, Callable, Protocol, cast

import serial

from .errors import LinkLost, TransportError


class Transport(Protocol):
    """What the link needs of a byte transport."""

    name: str

    def open(self) -> None: ...

    def read(self, max_bytes: int) -> bytes:
        """Return 1..max_bytes bytes, or b"" after the read timeout (or when
        ``cancel_read`` woke it). Raises LinkLost.

        A transport whose ``timed_read`` is true also takes ``timeout_s`` (s),
        a bound for this one read (0: only what has arrived), and has
        ``wait_readable(timeout_s) -> bool``: block until bytes can be read
        (True) or the timeout passes (None: no timeout) or ``cancel_read`` or
        ``close`` woke it (False), reading nothing. The link then lets a requester read its own reply
        (SPEC §7.1). Such a transport may also have ``quiet(on: bool)``: while
        on, bytes arriving do not end a ``wait_readable`` (a wake-up by
        ``cancel_read``, a hang-up or an error still do), so a requester reading
        its own reply does not wake the thread that watches the line; off again,
        bytes already waiting end it at once.
        """

    def write(self, data: bytes) -> None:
        """Write all of ``data``. Raises LinkLost."""

    def close(self) -> None: ...


class TimedTransport(Transport, Protocol):
    """A :class:`Transport` whose ``timed_read`` is true: what :meth:`Transport.read`'s
    docstring says such a transport has besides (for the type checker)."""

    timed_read: bool

    def read(self, max_bytes: int, timeout_s: float | None = None) -> bytes: ...

    def wait_readable(self, timeout_s: float | None) -> bool: ...

    def cancel_read(self) -> None: ...


def as_timed(transport: Transport) -> TimedTransport:
    """``transport`` as a :class:`TimedTransport`, for code that has seen its
    ``timed_read`` true (or its ``wait_readable``); checks nothing itself."""
    return cast(TimedTransport, transport)


_HINTS = {
    errno.ENOENT: "no such device: check the cable and `tablectl devices`; install the udev rules for stable names",
    errno.EACCES: "permission denied: install the project's udev rules (udev/README.md) and add the user to their group",
    errno.EBUSY: "another process holds the port (exclusive lock)",
    errno.EAGAIN: "another process holds the port (exclusive lock)",
}


#: how a driver process confined away from its device's node opens it (set by
#: ``devices.apart.host``, docs/drivers.md "What a driver can reach"): called with the
#: node's path, it returns a descriptor the table opened and passed over (SCM_RIGHTS), or
#: raises ``OSError`` (the table's errno); None: a port is opened by its path here
_device_opener: "Callable[[str], int] | None" = None


def set_device_opener(opener: "Callable[[str], int] | None") -> None:
    """Open every local port (a path) through ``opener`` from now on (None: by path again).
    A driver process sets it once, before its driver opens the device."""
    global _device_opener
    _device_opener = opener


class _PassedPort(serial.Serial):
    """A posix port whose descriptor another process opened (the table, for a driver
    process that may not open the node itself): pyserial's ``open`` with the descriptor
    from ``opener`` instead of ``os.open`` of the path. Raises ``SerialException``."""

    def __init__(self, url: str, opener: "Callable[[str], int]", **kw: Any) -> None:
        self._opener = opener
        super().__init__(None, **kw)
        self._port = url

    def open(self) -> None:
        if self.is_open:
            raise serial.SerialException("Port is already open.")
        try:
            self.fd = self._opener(self._port)
        except OSError as exc:
            self.fd = None
            raise serial.SerialException(exc.errno, f"could not open port {self._port}: {exc}") from None
        self.pipe_abort_read_r, self.pipe_abort_read_w = None, None
        self.pipe_abort_write_r, self.pipe_abort_write_w = None, None
        posix: Any = self  # pyserial's posix port: its private steps are not in its stubs
        try:
            posix._reconfigure_port(force_update=True)  # the exclusive lock (flock) is taken here
            try:
                if not posix._dsrdtr:
                    posix._update_dtr_state()
                if not posix._rtscts:
                    posix._update_rts_state()
            except OSError as e:  # a pty: no modem lines
                if e.errno not in (errno.EINVAL, errno.ENOTTY):
                    raise
            posix._reset_input_buffer()
            self.pipe_abort_read_r, self.pipe_abort_read_w = os.pipe()
            self.pipe_abort_write_r, self.pipe_abort_write_w = os.pipe()
            os.set_blocking(self.pipe_abort_read_r, False)
            os.set_blocking(self.pipe_abort_write_r, False)
        except BaseException:
            for fd in (self.fd, self.pipe_abort_read_r, self.pipe_abort_read_w, self.pipe_abort_write_r,
                       self.pipe_abort_write_w):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self.fd = None
            self.pipe_abort_read_r = self.pipe_abort_read_w = None
            self.pipe_abort_write_r = self.pipe_abort_write_w = None
            raise
        self.is_open = True


class SerialTransport:
    """A pyserial port opened from a URL.

    ``read_timeout_s`` bounds one blocking :meth:`read` (s) where no timeout is
    given; on a posix port the link's reader thread waits in :meth:`wait_readable`
    with no timeout at all (an idle link wakes it only for the heartbeat's reply).
    ``baudrate`` is in bit/s (ignored by ptys and sockets).
    Raises :class:`TransportError` (with a hint) when the port cannot be opened
    and :class:`LinkLost` when it fails once open.
    """

    def __init__(self, url: str, *, baudrate: int = 115200, read_timeout_s: float = 0.25) -> None:
        self.url = url
        self.name = url
        self.baudrate = baudrate
        self.read_timeout_s = read_timeout_s
        self._port: serial.Serial | None = None
        self._fast: tuple[int, int] | None = None
        self._watch: _Watch | None = None

    def open(self) -> None:
        """Open the port (exclusive). Raises :class:`TransportError`."""
        opener = _device_opener
        try:
            if opener is not None and self.url.startswith("/"):
                port: Any = _PassedPort(self.url, opener, baudrate=self.baudrate, timeout=self.read_timeout_s,
                                        write_timeout=2.0, exclusive=True)
                port.open()
            else:
                port = serial.serial_for_url(
                    self.url,
                    baudrate=self.baudrate,
                    timeout=self.read_timeout_s,
                    write_timeout=2.0,
                    exclusive=True,
                )
        except (serial.SerialException, OSError, ValueError) as exc:
            code = getattr(exc, "errno", None)
            hint = _HINTS.get(code, "") if code else ""
            if not hint and "lock" in str(exc).lower():
                hint = _HINTS[errno.EBUSY]
            raise TransportError(f"cannot open {self.url}: {exc}", hint) from exc
        if self.url.startswith("socket://"):
            _set_nodelay(port)
        self._port = port
        # A posix port (real tty or pty): read and write its fd directly, one select
        # and one syscall per burst instead of pyserial's ioctl + select + read.
        fd, abort = getattr(port, "fd", None), getattr(port, "pipe_abort_read_r", None)
        self._fast = (fd, abort) if isinstance(fd, int) and isinstance(abort, int) else None
        self._watch = _Watch(*self._fast) if self._fast is not None else None

    @property
    def is_open(self) -> bool:
        return self._port is not None and self._port.is_open

    @property
    def timed_read(self) -> bool:
        """True when :meth:`read` honours ``timeout_s``: a posix port (tty or pty)."""
        return self._fast is not None

    def read(self, max_bytes: int = 512, timeout_s: float | None = None) -> bytes:
        """Block up to ``timeout_s`` (default ``read_timeout_s``; honoured on posix
        ports only, see :attr:`timed_read`) for at least one byte; b"" on timeout
        or when :meth:`cancel_read` woke it."""
        port = self._port
        if port is None:
            raise LinkLost(f"{self.url} is closed")
        fast = self._fast
        if fast is not None:
            return self._read_fd(fast, max_bytes, self.read_timeout_s if timeout_s is None else timeout_s)
        try:
            data = port.read(max(1, min(port.in_waiting, max_bytes)))
            # Drain what else is already waiting, so one call returns the whole burst
            # (pyserial's socket:// reports in_waiting as 0 or 1, not a count).
            while data and len(data) < max_bytes:
                waiting = port.in_waiting
                if not waiting:
                    break
                data += port.read(min(waiting, max_bytes - len(data)))
            return data
        except (serial.SerialException, OSError, TypeError, AttributeError) as exc:
            # TypeError/AttributeError: pyserial's fd was closed under a blocked read.
            raise LinkLost(f"{self.url}: {_failed('read', exc)}") from exc

    def wait_readable(self, timeout_s: float | None) -> bool:
        """Block up to ``timeout_s`` (s; None: until something happens) until the port
        has bytes to read; False on timeout or when :meth:`cancel_read` or :meth:`close`
        woke it. Reads nothing (posix ports, see :attr:`timed_read`). Raises :class:`LinkLost`."""
        watch = self._watch
        if self._port is None or watch is None:
            raise LinkLost(f"{self.url} is closed")
        try:
            return watch.wait(timeout_s)
        except (OSError, ValueError) as exc:
            raise LinkLost(f"{self.url}: read failed: {exc}") from exc

    def quiet(self, on: bool) -> None:
        """While ``on``, bytes arriving do not end :meth:`wait_readable` (see
        :class:`Transport`): a requester reads its own reply without waking the
        link's reader thread. Posix ports; never raises (a closed port: no-op)."""
        watch = self._watch
        if watch is not None:
            watch.quiet(on)

    def _read_fd(self, fast: tuple[int, int], max_bytes: int, timeout_s: float) -> bytes:
        fd, abort = fast
        watch = self._watch
        try:
            if watch is None:
                raise ValueError("closed")
            ready = watch.read_poll.poll(timeout_s * 1000)
            if not ready:
                return b""
            for f, _ in ready:  # a loop, not any() over a generator: one frame fewer a read
                if f == abort:
                    os.read(abort, 1000)
                    return b""
            data = os.read(fd, max_bytes)
        except BlockingIOError:
            return b""
        except (OSError, ValueError) as exc:  # EIO: the device (or the pty's master) went away
            raise LinkLost(f"{self.url}: read failed: {exc}") from exc
        if not data:
            raise LinkLost(f"{self.url}: readable but no data: the device was disconnected")
        return data

    def write(self, data: bytes) -> None:
        """Write all bytes or raise :class:`LinkLost`."""
        port = self._port
        if port is None:
            raise LinkLost(f"{self.url} is closed")
        if self._fast is not None:
            fd = self._fast[0]
            view = memoryview(data)
            try:
                while view:
                    try:
                        view = view[os.write(fd, view):]
                    except BlockingIOError:
                        if not select.select([], [fd], [], 2.0)[1]:
                            raise LinkLost(f"{self.url}: write timed out (2 s)") from None
            except (OSError, ValueError) as exc:
                raise LinkLost(f"{self.url}: write failed: {exc}") from exc
            return
        try:
            port.write(data)
        except (serial.SerialException, OSError, TypeError, AttributeError) as exc:
            raise LinkLost(f"{self.url}: {_failed('write', exc)}") from exc

    def cancel_read(self) -> None:
        """Wake a read blocked in another thread (posix ports); a no-op elsewhere."""
        self._cancel(self._port)

    @staticmethod
    def _cancel(port: Any) -> None:
        cancel = getattr(port, "cancel_read", None)
        if cancel is not None:
            try:
                cancel()
            except (serial.SerialException, OSError):
                pass

    def close(self) -> None:
        """Close the port; safe to call twice. A ``socket://`` port closes at once
        (see :func:`_close_socket_port`)."""
        port, self._port = self._port, None
        watch, self._watch = self._watch, None
        if watch is not None:
            if port is not None:  # a thread waiting on the line with no timeout finds the port closed
                watch.release(lambda: self._cancel(port))
            watch.close()
        if port is not None:
            try:
                if self.url.startswith("socket://"):
                    _close_socket_port(port)
                port.close()
            except (serial.SerialException, OSError):
                pass


class _Watch:
    """Waits for bytes on ``fd`` or a wake-up byte on ``wake`` (non-blocking, drained
    here), with an epoll set where the platform has one (Linux), whose interest in
    ``fd`` can be switched off from another thread while one waits (``quiet``):
    then only the wake-up pipe, a hang-up or an error end the wait. Without epoll,
    ``select`` and ``quiet`` is a no-op (the link's reader then parks instead).
    ``read_poll`` is a separate poll set on both, for a requester's own reads."""

    def __init__(self, fd: int, wake: int) -> None:
        self.fd, self.wake = fd, wake
        self._ep = select.epoll() if hasattr(select, "epoll") else None
        if self._ep is not None:
            self._ep.register(fd, select.EPOLLIN)
            self._ep.register(wake, select.EPOLLIN)
        self.read_poll = select.poll()  # poll, not select: no lists built per read
        self.read_poll.register(fd, select.POLLIN)
        self.read_poll.register(wake, select.POLLIN)
        self._gate = threading.Condition()
        self._inside = 0  # threads in wait()
        self._released = False  # release() began: no new wait

    def release(self, wake: Callable[[], None], timeout_s: float = 2.0) -> None:
        """Wake every thread in :meth:`wait` (``wake()``: a wake-up byte) and return once
        none is left in it, before the port's descriptors close: a wait has no timeout,
        and a wake-up byte whose pipe closed before the waiter saw it would leave it
        waiting for ever. Wakes again while one is left (another reader of the pipe may
        take a byte), for at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._gate:
            self._released = True
            while self._inside and (left := deadline - time.monotonic()) > 0:
                wake()
                self._gate.wait(min(left, 0.05))

    def wait(self, timeout_s: float | None) -> bool:
        """True when ``fd`` has bytes (or hung up); False on timeout (None: none) or a
        wake-up. Raises OSError/ValueError (closed)."""
        ep, fd, wake = self._ep, self.fd, self.wake
        with self._gate:
            if self._released:
                raise ValueError("the port is closing")
            self._inside += 1
        try:
            if ep is None:
                ready, _, _ = select.select([fd, wake], [], [], timeout_s)
            else:
                ready = [f for f, _ in ep.poll(-1 if timeout_s is None else timeout_s)]
        finally:
            with self._gate:
                self._inside -= 1
                self._gate.notify_all()
        if wake in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake, 1000)
            return False
        return bool(ready)

    def quiet(self, on: bool) -> None:
        """Mask (True) or unmask the line's bytes for :meth:`wait`; the same mask twice
        is harmless, and so is a call after :meth:`close` (a no-op)."""
        ep = self._ep
        if ep is not None:
            try:
                ep.modify(self.fd, 0 if on else select.EPOLLIN)
            except (OSError, ValueError):  # closed under us: the link is going down
                pass

    def close(self) -> None:
        if self._ep is not None:
            self._ep.close()


def _failed(what: str, exc: BaseException) -> str:
    """``"read failed: <exc>"``, unless pyserial's message already says so (its
    ``socket://`` read gives "read failed: socket disconnected", its writes
    "write failed: ..."): the prefix once, not twice."""
    text = str(exc)
    return text if text.startswith(f"{what} failed") else f"{what} failed: {text}"


def _set_nodelay(port: serial.SerialBase) -> None:
    """Disable Nagle on a ``socket://`` port (docs/pitfalls.md, "TCP ports": 40-90 ms otherwise)."""
    sock = getattr(port, "_socket", None)
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _close_socket_port(port: Any) -> None:  # pyserial's socket:// port; its _socket is not in the stubs
    """Close a pyserial ``socket://`` port's socket and mark the port closed, so
    its own ``close()`` has nothing left to do.

    pyserial's ``close()`` does the same (shutdown, close) and then sleeps 0.3 s
    "in case of quick reconnects" to a server that takes one connection at a
    time (docs/pitfalls.md, "TCP ports"). The device servers here listen with a backlog,
    so the pause only delayed every reconnect, and every conformance check,
    by 0.3 s; the bytes on the wire and the way the connection ends are the
    same. A pyserial without the attributes relied on falls back to its close.
    """
    sock = getattr(port, "_socket", None)
    if sock is None or not getattr(port, "is_open", False):
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already reset by the far end
    sock.close()
    port._socket = None
    port.is_open = False


class SocketTransport:
    """A transport over a connected stream socket that ``connect()`` returns: an
    in-memory ``socket.socketpair`` end in tests, or any socket a caller makes.

    ``read_timeout_s`` bounds one blocking read (s). Raises :class:`TransportError`
    when ``connect`` fails and :class:`LinkLost` on EOF or a socket error.
    """

    def __init__(self, connect: Callable[[], socket.socket], *, name: str = "memory",
                 read_timeout_s: float = 0.25) -> None:
        self._connect = connect
        self.name = name
        self.read_timeout_s = read_timeout_s
        self._sock: socket.socket | None = None
        self._wake_r = self._wake_w = -1
        self._watch: _Watch | None = None

    def open(self) -> None:
        try:
            sock = self._connect()
        except OSError as exc:
            raise TransportError(f"cannot connect {self.name}: {exc}") from exc
        sock.setblocking(True)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._wake_r, self._wake_w = os.pipe()
        # Non-blocking: the reader thread and a requester may both see one wake-up
        # byte (both wait on the pipe); the second finds it gone, not a blocked read.
        os.set_blocking(self._wake_r, False)
        self._watch = _Watch(sock.fileno(), self._wake_r)
        self._sock = sock

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    #: :meth:`read` honours ``timeout_s``.
    timed_read = True

    def read(self, max_bytes: int = 512, timeout_s: float | None = None) -> bytes:
        """Block up to ``timeout_s`` (default ``read_timeout_s``) for at least one
        byte; b"" on timeout or when :meth:`cancel_read` woke it."""
        sock = self._sock
        if sock is None:
            raise LinkLost(f"{self.name} is closed")
        try:
            watched: list[socket.socket | int] = [sock, self._wake_r]
            ready, _, _ = select.select(watched, [], [], self.read_timeout_s if timeout_s is None else timeout_s)
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 64)
                return b""
            if not ready:
                return b""
            data = sock.recv(max_bytes)
        except (OSError, ValueError) as exc:
            raise LinkLost(f"{self.name}: read failed: {exc}") from exc
        if not data:
            raise LinkLost(f"{self.name}: the device closed the connection")
        return data

    def wait_readable(self, timeout_s: float | None) -> bool:
        """Block up to ``timeout_s`` (s; None: until something happens) until the socket
        has bytes (or EOF) to read; False on timeout or when :meth:`cancel_read` or
        :meth:`close` woke it. Reads nothing."""
        watch = self._watch
        if self._sock is None or watch is None:
            raise LinkLost(f"{self.name} is closed")
        try:
            return watch.wait(timeout_s)
        except (OSError, ValueError) as exc:
            raise LinkLost(f"{self.name}: read failed: {exc}") from exc

    def quiet(self, on: bool) -> None:
        """As :meth:`SerialTransport.quiet`."""
        watch = self._watch
        if watch is not None:
            watch.quiet(on)

    def write(self, data: bytes) -> None:
        sock = self._sock
        if sock is None:
            raise LinkLost(f"{self.name} is closed")
        try:
            sock.sendall(data)
        except OSError as exc:
            raise LinkLost(f"{self.name}: write failed: {exc}") from exc

    def cancel_read(self) -> None:
        """Wake a read blocked in another thread."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"\0")
            except OSError:
                pass

    def close(self) -> None:
        sock, self._sock = self._sock, None
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.release(self.cancel_read)  # a thread waiting with no timeout finds the socket closed
            watch.close()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = -1
