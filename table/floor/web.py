"""The floor's HTTP side (Starlette on uvicorn, in its own thread): the notary's answer to a
starting table, the floor's health, and (behind sign-in) the reports and the floor page.

``GET /api/v1/notary/{table_id}?nonce=HEX`` answers with the notary's highest signed
checkpoint of the table, in an envelope signed by the floor key
(:func:`table.notary_client.sign_answer`; the format in ``docs/integration.md``). It
needs no sign-in: the checkpoint is the table's own signed record, and the answer is
good only for the nonce the table sent. ``&receipt=`` (base64url JSON): the latest floor
receipt the table's journal holds, compared with the database first; the answer's
``held`` says why the floor holds the table when its database is behind a receipt it
signed (:mod:`table.floor_anchor`). ``GET /api/v1/floor/health``: what the
floor has taken and refused (:class:`table.floor.ingest.Counts`), no money.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import asdict
from typing import Any

from table.interfaces.web import AppServer, with_headers
from table.floor_anchor import ReceiptError, decode_from_url
from table.keys import TableKey
from table.notary_client import sign_answer

from .ingest import Floor

_TABLE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")
_NONCE = re.compile(r"^[0-9a-f]{16,64}\Z")
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store"),
                    (b"content-security-policy", b"default-src 'self'; connect-src 'self'; frame-ancestors 'none'")]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def floor_app(floor: Floor, floor_key: TableKey, *, extra_routes: list[Any] | None = None) -> Any:
    """The floor's ASGI app: the notary, the health, and ``extra_routes`` (the reports)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from .store import StoreError

    async def notary(request: Request) -> Response:
        table_id = request.path_params["table_id"]
        nonce = request.query_params.get("nonce", "")
        if not _TABLE.match(table_id) or not _NONCE.match(nonce):
            return JSONResponse({"error": "give a table id and ?nonce= of 16-64 lowercase hex digits"}, 400)
        if table_id not in floor.keys:
            return JSONResponse({"error": f"the floor does not know table {table_id}"}, 404)
        token = request.query_params.get("receipt")
        try:
            if token:  # the latest floor receipt the table's journal holds (table/floor_anchor.py)
                try:
                    floor.present_receipt(table_id, decode_from_url(token))
                except ReceiptError as exc:
                    return JSONResponse({"error": f"receipt=: {exc}"}, 400)
            cp = floor.notary_checkpoint(table_id)
            held = floor.held(table_id)
        except StoreError:
            return JSONResponse({"error": "the floor database cannot be read"}, 503)
        return Response(sign_answer(floor_key, table_id, nonce, cp, _now(), held=held), media_type="application/json")

    async def health(request: Request) -> Response:
        return JSONResponse({"counts": asdict(floor.counts), "database": floor.store.kind})

    async def database_away(request: Request, exc: Exception) -> Response:
        # a read the floor could not make (its sessions, its grid): said, never a 500 with a trace
        return JSONResponse({"ok": False, "error": "the floor database cannot be read now; try again"}, 503)

    routes = [Route("/api/v1/notary/{table_id}", notary), Route("/api/v1/floor/health", health),
              *(extra_routes or [])]
    return with_headers(Starlette(routes=routes, exception_handlers={StoreError: database_away}), SECURITY_HEADERS)


class FloorServer(AppServer):
    """Serves ``app`` on ``host:port`` (port 0: a free one, :attr:`port`) in its own thread.
    Raises ``OSError`` when the address cannot be bound."""

    def __init__(self, app: Any, host: str, port: int, *, name: str = "floor-web") -> None:
        # proxy_headers off: the address a sign-in is logged with is the peer's, not a header's
        super().__init__(app, host, port, name=name, limit_concurrency=256, proxy_headers=False)
