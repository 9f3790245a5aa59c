"""The dealer and supervisor console: a local control socket and terminal keys.

Both feed the controller's :class:`~table.controller.Console` with the same
commands, documented in ``docs/console.md``:

==================  =========================================  ===========
action              arguments                                  who
==================  =========================================  ===========
``status``          —                                          anyone
``close_bets``      —                                          dealer
``confirm_collect`` —                                          dealer
``decide``          ``seat``, ``decision`` (play/fold)         dealer
``void``            ``reason``, ``supervisor``                 supervisor
``register_deck``   ``deck_id``, ``supervisor``                supervisor
``confirm_card``    ``card`` (e.g. ``"Qs"``), ``supervisor``   supervisor
==================  =========================================  ===========

The socket speaks JSON Lines over a Unix stream socket: one request object
per line (``{"action": "void", "reason": "misdeal", "supervisor": "S-17"}``),
one reply object per line (``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from pathlib import Path

import structlog

from table.console import Command, Console

log = structlog.get_logger("table.control")


class SocketInUse(OSError):
    """Another live process serves the socket path; it is not taken over."""


def unix_listener(path: Path, backlog: int) -> socket.socket:
    """A listening Unix stream socket at ``path`` (mode 0660, for the service's group).

    A socket file a killed process left (nobody answers on it) is replaced; a path
    another live process serves is refused (:class:`SocketInUse`), and so is a path
    that is not a socket (nothing else is deleted). The socket is bound under a
    temporary name, given its mode, then renamed into place, so it never exists at
    ``path`` with a wider mode. Raises ``OSError``."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_socket()):
        raise SocketInUse(f"{path} exists and is not a socket; refusing to replace it")
    if path.is_socket():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)  # stale: its process is gone
        except OSError as exc:
            raise SocketInUse(f"cannot tell whether {path} is in use ({exc}); refusing to replace it") from None
        else:
            raise SocketInUse(f"{path} is served by another live process; refusing to take it over")
        finally:
            probe.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident() % 10_000}")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(tmp))
        os.chmod(tmp, 0o660)
        os.rename(tmp, path)
        server.listen(backlog)
    except OSError:
        server.close()
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return server


class ControlSocket:
    """Serves the console on a Unix socket at ``path`` (mode 0660), a thread per client.

    Raises ``OSError`` if the socket cannot be bound. :meth:`close` stops it and
    removes the socket file.
    """

    def __init__(self, path: str | Path, console: Console, *, reply_timeout_s: float = 600.0) -> None:
        self.path = Path(path)
        self.console = console
        self.reply_timeout_s = reply_timeout_s
        self._server = unix_listener(self.path, backlog=8)
        self._stop = threading.Event()
        self._clients: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, name="control-accept", daemon=True)
        self._accept.start()
        console.attached = True

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._clients.append(conn)
            t = threading.Thread(target=self._client, args=(conn,), name="control-client", daemon=True)
            self._threads.append(t)
            t.start()

    def _client(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            for line in f:
                if not line.strip():
                    continue
                reply = self._handle(line)
                try:
                    f.write((json.dumps(reply) + "\n").encode())
                    f.flush()
                except OSError:
                    return

    def _handle(self, line: bytes) -> dict:
        try:
            req = json.loads(line)
            if not isinstance(req, dict) or not isinstance(req.get("action"), str):
                raise ValueError("a request is a JSON object with a string 'action'")
        except ValueError as exc:
            return {"ok": False, "error": f"bad request: {exc}"}
        done = threading.Event()
        box: dict = {}

        def reply(result: dict) -> None:
            box.update(result)
            done.set()

        action = req.pop("action")
        log.info("control_command", action=action, **{k: v for k, v in req.items() if k != "card"})
        self.console.submit(Command(action, req, reply))
        if not done.wait(self.reply_timeout_s):
            return {"ok": False, "error": f"no answer within {self.reply_timeout_s:g} s"}
        return box

    def close(self) -> None:
        self._stop.set()
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in another thread
        except OSError:
            pass
        self._server.close()
        for c in self._clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accept.join(2.0)
        for t in self._threads:
            t.join(2.0)
        if self.path.is_socket():
            self.path.unlink()


def send(path: str | Path, request: dict, timeout_s: float = 600.0) -> dict:
    """Send one request to a control socket and return its reply (for vendors and tests)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(path))
        with s.makefile("rwb") as f:
            f.write((json.dumps(request) + "\n").encode())
            f.flush()
            line = f.readline()
    if not line:
        raise ConnectionError(f"{path}: the controller closed the connection without a reply")
    return json.loads(line)
