"""Device ports besides the pty: a TCP server and an in-memory socket pair.

A port's ``fileno()`` may change when the host reconnects; the firmware
loop re-registers it. ``disconnect()`` models a cable pull.
"""

from __future__ import annotations

import select
import socket
from typing import Callable


def _nodelay(sock: socket.socket) -> None:
    """Disable Nagle (docs/pitfalls.md, "TCP ports": otherwise 40-90 ms per round trip)."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


class _SocketPort:
    """Shared read/write/close over the current connection ``self._conn``."""

    _conn: socket.socket | None

    def read(self, max_bytes: int = 4096) -> bytes:
        conn = self._conn
        if conn is None:
            return b""
        try:
            data = conn.recv(max_bytes)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:  # the host went away
            self._drop()
        return data

    def write(self, data: bytes) -> None:
        conn = self._conn
        if conn is None:
            raise OSError("no host connected")
        view = memoryview(data)
        while view:
            try:
                n = conn.send(view)
            except BlockingIOError:
                select.select([], [conn], [], 1.0)
                continue
            view = view[n:]

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass

    def disconnect(self) -> None:
        """Drop the host's connection (a cable pull); the host may connect again."""
        self._drop()


class TcpServerPort(_SocketPort):
    """Listens on ``host:port`` (port 0 picks a free one) and serves one host at a
    time; the next is accepted once the current one disconnects. ``name`` is the host's URL,
    ``socket://host:port``. Raises ``OSError`` if it cannot bind."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._listener: socket.socket | None = socket.create_server((host, port))
        self._listener.setblocking(False)
        self._conn = None
        self.host, self.port = self._listener.getsockname()[:2]
        self.name = f"socket://{self.host}:{self.port}"
        self.on_change: Callable[[], None] = lambda: None  # set by the firmware emulator

    def fileno(self) -> int:
        if self._conn is not None:
            return self._conn.fileno()
        return self._listener.fileno() if self._listener is not None else -1

    @property
    def unplugged(self) -> bool:
        """True between :meth:`unplug` and :meth:`plug` (the cable is out)."""
        return self._listener is None

    def unplug(self) -> None:
        """Pull the cable and keep it out: the host's connection is dropped and the port
        stops listening (a host trying to connect is refused) until :meth:`plug`."""
        self._drop()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def plug(self) -> None:
        """Plug the cable back in: listen again on the same port (the host reconnects).
        Raises ``OSError`` if the port was taken meanwhile."""
        if self._listener is None:
            self._listener = socket.create_server((self.host, self.port))
            self._listener.setblocking(False)
            self.on_change()

    def read(self, max_bytes: int = 4096) -> bytes:
        if self._conn is None:
            if self._listener is None:
                return b""
            try:
                conn, _ = self._listener.accept()
            except BlockingIOError:
                return b""
            conn.setblocking(False)
            _nodelay(conn)
            self._conn = conn
            return b""
        return super().read(max_bytes)

    def close(self) -> None:
        self._drop()
        if self._listener is not None:
            self._listener.close()
            self._listener = None


class SocketPairPort(_SocketPort):
    """In-memory link: :meth:`connect` makes a new ``socket.socketpair`` and returns
    the host's end (for ``firmware_bridge.transport.SocketTransport``)."""

    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self.on_change: Callable[[], None] = lambda: None  # set by the firmware emulator
        self._conn = None
        import os

        self._idle_r, self._idle_w = os.pipe()  # selectable while no host is connected
        os.set_blocking(self._idle_r, False)

    def connect(self) -> socket.socket:
        import os

        host_end, dev_end = socket.socketpair()
        dev_end.setblocking(False)
        self._drop()
        self._conn = dev_end
        os.write(self._idle_w, b"\0")
        self.on_change()  # wake the firmware loop so it watches the new socket
        return host_end

    def read(self, max_bytes: int = 4096) -> bytes:
        if self._conn is None:
            import os

            try:
                os.read(self._idle_r, 64)
            except OSError:
                pass
            return b""
        return super().read(max_bytes)

    def fileno(self) -> int:
        return self._conn.fileno() if self._conn is not None else self._idle_r

    def close(self) -> None:
        import os

        self._drop()
        for fd in (self._idle_r, self._idle_w):
            try:
                os.close(fd)
            except OSError:
                pass


class LineRatePort:
    """A device port as slow as a UART: bytes move no faster than ``baud`` bit/s at
    ``bits_per_byte`` (10 for 8N1). Wraps another :class:`~simulators.firmware.DevicePort`
    (a pty, which itself moves bytes at memory speed whatever baud rate is set).

    A read of n bytes returns once those n bytes could have arrived over the line
    (n × bits_per_byte / baud after the line was last free); a write of n bytes is
    handed on once they could have left. The wait models the wire's time for a
    benchmark (``bench/firmware.py``); it decides nothing. Raises ``ValueError`` for a
    baud rate outside 300..4,000,000.
    """

    def __init__(self, port, *, baud: int = 115200, bits_per_byte: int = 10) -> None:
        if not 300 <= baud <= 4_000_000:
            raise ValueError(f"baud rate {baud}: allowed 300..4000000")
        self.port = port
        self.byte_s = bits_per_byte / baud
        self._rx_free = 0.0
        self._tx_free = 0.0

    @property
    def name(self) -> str:
        return self.port.name

    @property
    def on_change(self):
        return getattr(self.port, "on_change", None)

    @on_change.setter
    def on_change(self, callback) -> None:
        if hasattr(self.port, "on_change"):
            self.port.on_change = callback

    def fileno(self) -> int:
        return self.port.fileno()

    def _line(self, free_at: float, n: int) -> float:
        import time

        now = time.monotonic()
        done = max(now, free_at) + n * self.byte_s
        if done > now:
            time.sleep(done - now)
        return done

    def read(self, max_bytes: int = 4096) -> bytes:
        data = self.port.read(max_bytes)
        if data:
            self._rx_free = self._line(self._rx_free, len(data))
        return data

    def write(self, data: bytes) -> None:
        self._tx_free = self._line(self._tx_free, len(data))
        self.port.write(data)

    def disconnect(self, *args) -> None:
        self.port.disconnect(*args)

    def close(self) -> None:
        self.port.close()
