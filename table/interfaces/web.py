"""The table API over HTTP and WebSocket (Starlette on uvicorn), with sign-in, on the front doors' loop.

``tablectl run ... --web HOST:PORT`` (or ``[web] listen``) serves:

==========================  ======================================================
``POST /api/v1/session``    sign in: ``{"person": "S-17", "pin": "..."}`` → a token
                            (also the HttpOnly, SameSite=Strict cookie ``threecard_session``)
``GET /api/v1/session``     who this session is; ``DELETE``: sign out
``GET /api/v1/status``      the ``status`` query
``GET /api/v1/events``      ``?after=SEQ&limit=N``: events from the journal (polling)
``POST /api/v1/commands``   any request object (``docs/schemas/api-request-v1.schema.json``)
``POST /api/v1/commands/A`` action ``A`` with the body as its arguments
``GET /api/v1/ws``          WebSocket: request objects in; replies and pushed events out
``GET /api/v1/openapi.json`` the OpenAPI 3.1 document (public)
``GET /api/v1/report/signed`` ``?period=shift|day&gaming_day=YYYY-MM-DD``: the ``day_report``
                            query's report signed by the table key, as a download
                            (:mod:`table.day.signed_report`, ``docs/reporting.md``)
``/``                       static pages (the web console; package folder ``web_static``)
==========================  ======================================================

Every API request but sign-in and the OpenAPI document needs a session:
``Authorization: Bearer TOKEN`` or the cookie; without one the answer is 401
(a WebSocket handshake is refused with 401 before it opens). A reply's HTTP
status follows its ``code`` (:data:`~table.interfaces.api_schema.ERROR_CODES`);
a refusal by the table itself (not expected now, refused with a reason) is 409.
A request sent with the cookie must be ``Content-Type: application/json`` and
come from the same origin (cross-site requests are refused), so another site
in the same browser cannot act for the person signed in.

Bounds: a connection is handed to uvicorn (and its TLS handshake begun) only at
its first byte, parked until then (:class:`~table.interfaces.serving.Park`:
longest parked closed first); connections (:class:`~table.interfaces.serving.ConnectionGuard`,
evicting the longest idle of the busiest address), an idle timeout, request
heads of 16 KiB (h11), bodies and WebSocket messages of
:data:`~table.interfaces.serving.MAX_LINE` bytes, WebSocket connections
(``max_websockets``), requests in flight per WebSocket, pings that close a
dead peer; descriptor exhaustion is survived (:class:`~table.interfaces.serving.Listener`).
uvicorn's access log is off (it would log paths an attacker chose); each API
request is logged bounded by the dispatcher.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any, Callable

import structlog
import uvicorn
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect
from uvicorn.lifespan.off import LifespanOff
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from .api_schema import ERROR_CODES, openapi
from .auth import Authenticator, PeopleFileError, SignInLocked
from .dispatch import Channel, Dispatcher, refusal
from .serving import MAX_LINE, ConnectionGuard, FrontDoorLoop, Listener, Ticket, clip, tcp_listener

log = structlog.get_logger("table.web")

COOKIE = "threecard_session"
STATIC_DIR = Path(__file__).with_name("web_static")
#: requests one WebSocket may have in flight
MAX_IN_FLIGHT = 16
WRITE_TIMEOUT_S = 10.0
SECURITY_HEADERS = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                    (b"content-security-policy", b"default-src 'self'; connect-src 'self'; frame-ancestors 'none'")]



class AppServer:
    """Serves the ASGI ``app`` on ``host:port`` with uvicorn in its own thread (port 0: a
    free one, :attr:`port`). The socket listens before the thread starts, so a client
    connecting at once waits in the backlog instead of being refused. ``options``:
    more ``uvicorn.Config`` keys. Raises ``OSError`` when the address cannot be bound."""

    def __init__(self, app: Any, host: str, port: int, *, name: str, **options: Any) -> None:
        import uvicorn

        host = host.strip("[]")
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.host = host
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False,
                                timeout_graceful_shutdown=2, **options)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, name=name,
                                        daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """Stop serving and close the socket (waits up to 5 s for the thread)."""
        self.server.should_exit = True
        self._thread.join(5)
        self.sock.close()

def with_headers(inner: Any, headers: list[tuple[bytes, bytes]] = SECURITY_HEADERS) -> Any:
    """The ASGI app ``inner`` with ``headers`` added to every HTTP response (the pit view's
    and the floor's pages; WebSocket scopes pass through untouched)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        await inner(scope, receive, send_with_headers)

    return app


class _BoundedServerLog(logging.Filter):
    """uvicorn's own log lines, bounded: no traceback, a clipped message, at most
    :attr:`PER_WINDOW` lines of one kind per :attr:`WINDOW_S` (a flood of malformed
    requests cannot flood the log), and not the notice uvicorn writes after every
    refused WebSocket handshake (the refusal is what we meant)."""

    WINDOW_S = 10.0
    PER_WINDOW = 5
    DROPPED = ("ASGI callable returned without completing handshake.",)

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        if msg in self.DROPPED:
            return False
        now = time.monotonic()
        start, n = self._seen.get(msg, (now, 0))
        if now - start > self.WINDOW_S:
            start, n = now, 0
        self._seen[msg] = (start, n + 1)
        if len(self._seen) > 1000:
            self._seen.clear()
        if n >= self.PER_WINDOW:
            return False
        if record.exc_info:
            exc = record.exc_info[1]
            record.msg = f"{clip(msg, 200)} ({type(exc).__name__}: {clip(str(exc), 200)})"
            record.exc_info = None
            record.exc_text = None
        record.args = tuple(clip(a, 200) if isinstance(a, str) else a for a in record.args) \
            if isinstance(record.args, tuple) else record.args
        return True


_SERVER_LOG_FILTER = _BoundedServerLog()
for _name in ("uvicorn.error", "uvicorn"):
    if _SERVER_LOG_FILTER not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_SERVER_LOG_FILTER)


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(obj, status_code=status, headers=headers)


def http_status(reply: dict[str, Any]) -> int:
    """The HTTP status of a reply: 200 when ok, the code's status, 409 for the table's own refusal."""
    if reply.get("ok"):
        return 200
    code = reply.get("code")
    return ERROR_CODES[code][0] if code in ERROR_CODES else 409


def _busy_http() -> bytes:
    body = json.dumps(refusal("busy", "the table has no descriptor free for this connection now; try again")).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def _protocols(front: "WebFrontDoor") -> tuple[type, type]:
    """uvicorn's HTTP and WebSocket protocols, holding their connection's place in the guard."""

    class GuardedWS(WebSocketsSansIOProtocol):
        ticket: Ticket | None = None

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            if self.ticket is not None:
                self.ticket.release()

    class GuardedH11(H11Protocol):
        ticket: Ticket | None = None

        def data_received(self, data: bytes) -> None:
            if self.ticket is not None:
                self.ticket.touch()
            super().data_received(data)
            if self.ticket is not None:
                self.ticket.busy = int(self.cycle is not None and not self.cycle.response_complete)

        def on_response_complete(self) -> None:
            if self.ticket is not None:
                self.ticket.busy = 0
                self.ticket.touch()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            if self.ticket is not None:
                self.ticket.release()

        def handle_websocket_upgrade(self, event: Any) -> None:
            super().handle_websocket_upgrade(event)
            ws = self.transport.get_protocol()
            if isinstance(ws, GuardedWS) and self.ticket is not None:
                ws.ticket, self.ticket = self.ticket, None
                ws.ticket.busy = 1
                ws.ticket.set_idle_timeout(None)  # a WebSocket is kept alive (or ended) by its pings

    return GuardedH11, GuardedWS


class WebFrontDoor:
    """Serves the table API over HTTP + WebSocket on ``host:port`` (port 0: a free one;
    :attr:`address` is where it listens).

    ``dispatcher``: the table API; ``auth``: who may sign in
    (:class:`~table.interfaces.auth.Authenticator`; ``None``: nobody can, every API
    request is 401); ``front``: the loop; ``tls_certfile``/``tls_keyfile``: HTTPS;
    ``static_dir``: static pages served at ``/`` (default the package's
    ``web_static``); ``report_signer``: signs a report for ``/api/v1/report/signed``
    (:func:`table.day.signed_report.sign_report` with the table key). Raises ``OSError`` when the address cannot be bound,
    ``ssl.SSLError``/``OSError`` for an unusable certificate.
    """

    def __init__(self, host: str, port: int, dispatcher: Dispatcher, auth: Authenticator | None,
                 front: FrontDoorLoop, *, tls_certfile: str | Path | None = None,
                 tls_keyfile: str | Path | None = None, max_connections: int = 256, idle_timeout_s: float = 10.0,
                 max_websockets: int = 64, static_dir: str | Path | None = STATIC_DIR,
                 report_signer: Callable[[dict[str, Any]], bytes] | None = None) -> None:
        self.dispatcher = dispatcher
        #: report -> the signed report file's bytes (the table key); None: no signed reports
        self.report_signer = report_signer
        self.auth = auth
        self.front = front
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.max_websockets = max_websockets
        self.websockets = 0
        self.static_dir = Path(static_dir) if static_dir else None
        self.ssl: ssl.SSLContext | None = None
        if tls_certfile:
            self.ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
            self.ssl.load_cert_chain(str(tls_certfile), str(tls_keyfile) if tls_keyfile else None)
        sock = tcp_listener(host, port)
        self.address: tuple[str, int] = sock.getsockname()[:2]
        try:
            self.guard: ConnectionGuard = front.run(self._start(sock))
        except BaseException:
            sock.close()
            raise
        front.on_close(self._stop)
        self._closed = False
        if self.ssl is None and host not in ("127.0.0.1", "::1", "localhost"):
            log.warning("web_without_tls", listen=f"{host}:{self.address[1]}",
                        advice="PINs and session tokens cross the network in clear: set [web] tls_certfile "
                               "and tls_keyfile")
        log.info("web_listening", url=self.url)

    @property
    def url(self) -> str:
        host, port = self.address
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.ssl else 'http'}://{host}:{port}"

    # -- serving ------------------------------------------------------------------------------

    async def _start(self, sock: socket.socket) -> ConnectionGuard:
        loop = asyncio.get_running_loop()
        self.loop = loop
        http, ws = _protocols(self)
        config = uvicorn.Config(self.app(), http=http, ws=ws, lifespan="off", log_config=None, access_log=False,
                                proxy_headers=False, server_header=False, ws_max_size=MAX_LINE,
                                ws_ping_interval=20.0, ws_ping_timeout=20.0, ws_per_message_deflate=False,
                                h11_max_incomplete_event_size=16 * 1024, timeout_keep_alive=5,
                                timeout_graceful_shutdown=2)
        config.load()
        self.server = uvicorn.Server(config)
        self.server.lifespan = LifespanOff(config)
        await self.server.startup(sockets=[])
        self._main = loop.create_task(self.server.main_loop(), name="web-main")
        app_state = self.server.lifespan.state
        self._factory = lambda: config.http_protocol_class(config=config, server_state=self.server.server_state,
                                                           app_state=app_state, _loop=loop)
        guard = ConnectionGuard("web", loop, max_connections=self.max_connections, idle_timeout_s=self.idle_timeout_s)
        self._listener = Listener("web", sock, loop, self._accept, guard=guard, busy_reply=_busy_http())
        return guard

    async def _accept(self, conn: socket.socket, peer: Any) -> None:
        holder: dict[str, asyncio.BaseTransport] = {}

        def close(reason: str) -> None:
            t = holder.get("t")
            if t is not None:
                t.abort()
            else:
                conn.close()

        ticket = self.guard.admit(peer, close)
        if ticket is None:
            try:
                conn.send(_busy_http())
            except OSError:
                pass
            conn.close()
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def factory() -> asyncio.Protocol:
            proto = self._factory()
            proto.ticket = ticket  # type: ignore[attr-defined]
            return proto

        try:
            transport, _ = await self.loop.connect_accepted_socket(factory, conn, ssl=self.ssl,
                                                                   ssl_handshake_timeout=10.0 if self.ssl else None)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError):
            ticket.release()
            conn.close()
            return
        holder["t"] = transport

    async def _stop(self) -> None:
        await self._listener.close()
        self.server.should_exit = True
        try:
            await asyncio.wait_for(self._main, 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        await self.server.shutdown(sockets=[])

    def close(self) -> None:
        """Stop serving; open connections are closed (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.front.run(self._stop())
        except (TimeoutError, RuntimeError):
            pass

    # -- the application -------------------------------------------------------------------------

    def app(self) -> Any:
        routes = [
            Route("/api/v1/session", self.session_endpoint, methods=["GET", "POST", "DELETE"]),
            Route("/api/v1/status", self.status_endpoint, methods=["GET"]),
            Route("/api/v1/events", self.events_endpoint, methods=["GET"]),
            Route("/api/v1/commands", self.command_endpoint, methods=["POST"]),
            Route("/api/v1/commands/{action}", self.command_endpoint, methods=["POST"]),
            Route("/api/v1/openapi.json", self.openapi_endpoint, methods=["GET"]),
            Route("/api/v1/report/signed", self.signed_report_endpoint, methods=["GET"]),
            WebSocketRoute("/api/v1/ws", self.ws_endpoint),
            Route("/api/{rest:path}", self.not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        ]
        if self.static_dir is not None and self.static_dir.is_dir():
            routes.append(Mount("/", app=StaticFiles(directory=str(self.static_dir), html=True), name="static"))
        inner = Starlette(routes=routes)

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return

            async def send_with_headers(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
                await send(message)

            try:
                await inner(scope, receive, send_with_headers)
            except Exception as exc:  # noqa: BLE001 - no traceback reaches a user
                log.error("web_request_failed", path=clip(scope.get("path"), 80),
                          error=f"{type(exc).__name__}: {clip(str(exc), 200)}")
                try:
                    await JSONResponse(refusal("internal", "the web front door failed on this request"),
                                       status_code=500)(scope, receive, send_with_headers)
                except RuntimeError:  # the response had already started
                    pass

        return app

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _token(conn: HTTPConnection) -> str | None:
        auth = conn.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return auth[7:].strip() or None
        return conn.cookies.get(COOKIE)

    def _cross_site(self, conn: HTTPConnection) -> bool:
        origin = conn.headers.get("origin")
        if origin is None:  # not a browser, or a same-origin GET: nothing to forge
            return False
        host = conn.headers.get("host", "")
        return origin.split("://", 1)[-1].rstrip("/") != host

    def _session(self, conn: HTTPConnection, *, touch: bool = True) -> Any:
        if self.auth is None:
            return None
        return self.auth.session(self._token(conn), touch=touch)

    def _unauthenticated(self, rid: Any = None) -> JSONResponse:
        text = "sign in first: POST /api/v1/session with your person id and PIN"
        if self.auth is None:
            text = "this table has no people file: nobody can sign in (tablectl people add)"
        return _json(refusal("unauthenticated", text, rid), 401, {"www-authenticate": 'Bearer realm="threecard"'})

    async def _body(self, request: Request, limit: int = MAX_LINE) -> bytes | JSONResponse:
        if request.headers.get("content-length", "").isdigit() and int(request.headers["content-length"]) > limit:
            return _json(refusal("too_large", f"a request body is at most {limit} bytes"), 413)
        if self._token(request) and request.headers.get("authorization") is None \
                and not request.headers.get("content-type", "").lower().startswith("application/json"):
            return _json(refusal("bad_request", "send the request as Content-Type: application/json"), 415)
        chunks, total = [], 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                return _json(refusal("too_large", f"a request body is at most {limit} bytes"), 413)
            chunks.append(chunk)
        return b"".join(chunks)

    def _prover(self, conn: HTTPConnection) -> Any:
        """The PIN check of a person who countersigns on this connection (a dealer's slip):
        the sign-in's own, with the lock-outs of the client's address (None: no people)."""
        auth = self.auth
        if auth is None:
            return None
        address = conn.client.host if conn.client else ""
        source = "websocket" if conn.scope.get("type") == "websocket" else "http"
        def check(person: str, pin: str) -> Any:
            return auth.check_pin(person, pin, address=address, source=source)

        check.people = auth.people  # type: ignore[attr-defined]  # who is a person (the count room's ids)
        check.end_sessions = auth.end_sessions  # type: ignore[attr-defined]  # a shift handed over
        return check

    def _channel(self, session: Any, conn: HTTPConnection | None = None) -> Channel:
        return Channel("http", session.actor, push=None, signed_in=True,
                       prove=self._prover(conn) if conn is not None else None)

    # -- endpoints --------------------------------------------------------------------------------

    async def not_found(self, request: Request) -> Response:
        return _json(refusal("bad_request", "no such API path; see /api/v1/openapi.json"), 404)

    async def openapi_endpoint(self, request: Request) -> Response:
        return _json(openapi(self.dispatcher.table_id))

    async def session_endpoint(self, request: Request) -> Response:
        if self._cross_site(request):
            return _json(refusal("forbidden", "cross-site request refused"), 403)
        if request.method == "POST":
            return await self._sign_in(request)
        session = self._session(request)
        if request.method == "DELETE":
            if self.auth is not None:
                self.auth.sign_out(self._token(request))
            resp = _json({"ok": True, "signed_out": session is not None})
            resp.delete_cookie(COOKIE, path="/")
            return resp
        if session is None:
            return self._unauthenticated()
        reply = await self.dispatcher.answer(self._channel(session), {"action": "whoami"})
        reply["expires_at"] = _dt.datetime.fromtimestamp(session.expires_at_unix, _dt.timezone.utc).isoformat()
        return _json(reply, http_status(reply))

    async def _sign_in(self, request: Request) -> Response:
        body = await self._body(request, 4096)
        if isinstance(body, Response):
            return body
        try:
            req = json.loads(body)
        except ValueError:
            req = None
        if not isinstance(req, dict) or not isinstance(req.get("person"), str) or not isinstance(req.get("pin"), str) \
                or set(req) - {"person", "pin"}:
            return _json(refusal("bad_request", 'sign in with {"person": "ID", "pin": "PIN"}'), 400)
        if self.auth is None:
            return self._unauthenticated()
        address = request.client.host if request.client else ""
        try:
            token, session = await self.front.run_blocking(
                lambda: self.auth.sign_in(req["person"], req["pin"], address=address, source="http"))
        except SignInLocked as exc:
            return _json(refusal("locked", str(exc)), 429, {"retry-after": str(int(exc.retry_after_s) + 1)})
        except PermissionError as exc:
            return _json(refusal("unauthenticated", str(exc)), 401)
        except PeopleFileError as exc:
            log.error("people_file_unreadable", error=clip(str(exc), 300))
            return _json(refusal("internal", "the people file cannot be read; the log says why"), 500)
        expires = _dt.datetime.fromtimestamp(session.expires_at_unix, _dt.timezone.utc)
        resp = _json({"ok": True, "token": token, **session.actor.to_dict(), "expires_at": expires.isoformat(),
                      "session_idle_s": self.auth.session_idle_s})
        resp.set_cookie(COOKIE, token, max_age=int(self.auth.session_ttl_s), path="/", httponly=True,
                        samesite="strict", secure=self.ssl is not None)
        return resp

    async def status_endpoint(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return self._unauthenticated()
        reply = await self.dispatcher.answer(self._channel(session), {"action": "status"})
        return _json(reply, http_status(reply))

    async def events_endpoint(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return self._unauthenticated()
        req: dict[str, Any] = {"action": "events"}
        for key in ("after", "limit", "seat"):
            value = request.query_params.get(key)
            if value is not None:
                if not value.isdigit() or len(value) > 12:
                    return _json(refusal("bad_request", f"{key} must be a whole number"), 400)
                req[key] = int(value)
        reply = await self.dispatcher.answer(self._channel(session), req)
        return _json(reply, http_status(reply))

    async def command_endpoint(self, request: Request) -> Response:
        if self._cross_site(request):
            return _json(refusal("forbidden", "cross-site request refused"), 403)
        session = self._session(request)
        if session is None:
            return self._unauthenticated()
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        action = request.path_params.get("action")
        raw: Any = body
        if action is not None:
            try:
                args = json.loads(body) if body.strip() else {}
            except ValueError:
                return _json(refusal("bad_request", "bad request: the body is not JSON"), 400)
            if not isinstance(args, dict):
                return _json(refusal("bad_request", "bad request: the body is a JSON object of arguments"), 400)
            if "action" in args and args["action"] != action:
                return _json(refusal("bad_request", "bad request: the path and the body name different actions"),
                             400)
            raw = {**args, "action": action}
        reply = await self.dispatcher.answer(self._channel(session, request), raw)
        return _json(reply, http_status(reply))

    async def signed_report_endpoint(self, request: Request) -> Response:
        """The ``day_report`` query (as the session's person: its roles apply) signed by the
        table, as a file to save: the report a regulator files (COMAR 36.05.03.25;
        K.A.R. 112-108-51 keeps it seven years). The signed copy is the report without the
        page's plot ``series``: the same object ``tablectl report --json`` prints."""
        session = self._session(request)
        if session is None:
            return self._unauthenticated()
        if self.report_signer is None:
            return _json(refusal("unknown_action", "this table signs no reports: it runs without a journal and its "
                                                   "key"), 404)
        req: dict[str, Any] = {"action": "day_report"}
        for key in ("period", "gaming_day"):
            value = request.query_params.get(key)
            if value is not None:
                req[key] = value[:32]
        reply = await self.dispatcher.answer(self._channel(session), req)
        if not reply.get("ok"):
            return _json(reply, http_status(reply))
        rep = reply.get("report") if isinstance(reply.get("report"), dict) else reply
        rep = {k: v for k, v in rep.items() if k not in ("ok", "id", "series")}
        data = await self.front.run_blocking(lambda: self.report_signer(rep))
        day = "".join(c for c in str(rep.get("gaming_day") or rep.get("through") or "") if c.isdigit() or c == "-")
        name = f"report-{self.dispatcher.table_id}-{day}-{req.get('period', 'shift')}".replace("/", "_")
        return Response(data, media_type="application/json",
                        headers={"content-disposition": f'attachment; filename="{name}.signed.json"'})

    async def ws_endpoint(self, websocket: WebSocket) -> None:
        if self._cross_site(websocket):
            await websocket.send_denial_response(_json(refusal("forbidden", "cross-site WebSocket refused"), 403))
            return
        session = self._session(websocket)
        if session is None:
            await websocket.send_denial_response(self._unauthenticated())
            return
        if self.websockets >= self.max_websockets:
            await websocket.send_denial_response(
                _json(refusal("busy", f"at most {self.max_websockets} WebSocket connections; try again"), 503))
            return
        token = self._token(websocket)
        self.websockets += 1
        await websocket.accept()
        lock = asyncio.Lock()
        closed = asyncio.Event()

        async def push(obj: dict[str, Any]) -> None:
            if self.auth is not None and self.auth.session(token, touch=False) is None:
                closed.set()
                raise ConnectionError("the session ended")
            async with lock:
                await asyncio.wait_for(websocket.send_text(json.dumps(obj, separators=(",", ":"))), WRITE_TIMEOUT_S)

        channel = Channel("websocket", session.actor, push=push, signed_in=True, prove=self._prover(websocket))
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        tasks: set[asyncio.Task[Any]] = set()

        async def one(data: Any) -> None:
            try:
                if self.auth is not None and self.auth.session(token) is None:
                    await push(refusal("unauthenticated", "the session ended; sign in again"))
                    return
                await self.dispatcher.serve(channel, data, push)
            except (ConnectionError, OSError, asyncio.TimeoutError, RuntimeError):
                closed.set()
            finally:
                slots.release()

        try:
            while not closed.is_set():
                receive = asyncio.ensure_future(websocket.receive())
                ended = asyncio.ensure_future(closed.wait())
                done, _ = await asyncio.wait({receive, ended}, return_when=asyncio.FIRST_COMPLETED)
                if receive not in done:
                    receive.cancel()
                    break
                ended.cancel()
                msg = receive.result()
                if msg["type"] == "websocket.disconnect":
                    break
                data = msg.get("text") if msg.get("text") is not None else msg.get("bytes")
                await slots.acquire()
                task = asyncio.get_running_loop().create_task(one(data))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ConnectionError, OSError, RuntimeError, WebSocketDisconnect):
            pass
        finally:
            self.websockets -= 1
            channel.close()
            for t in list(tasks):
                t.cancel()
            try:
                await websocket.close(4401 if closed.is_set() else 1000)
            except (RuntimeError, ConnectionError, OSError, WebSocketDisconnect):
                pass
