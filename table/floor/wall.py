"""The pit's read-only wall page, served by the floor (``[floor] wall_pits``): the grid of one
pit (:func:`table.floor.pit_screen.grid`) without sign-in, for a monitor in the pit. It is
what ``tablectl pit serve`` showed, read from the floor's database instead of a second set of
broker subscriptions: one service, one rule for a table's state. No money (no figure, no
round result), no command; the tables' own status texts and alarms, already sealed by each
table (58 Pa. Code 816a.1: no card face before decisions are final), as the pit view showed
them. Only the pits the floor's config names are served: any other is 404, so a floor whose
config names none serves no page without sign-in.

``GET /pit?pit=NAME`` (the page), ``GET /api/v1/floor/wall?pit=NAME`` (the grid).

The same page also runs apart from the floor service, for a wall display on another
machine: ``tablectl pit serve --config FLOOR_TOML`` (:class:`WallDisplay`) serves only these
routes, reading the floor's database (no broker, no sign-in, no writes, no key): one pit
grid, one rule for a table's state, whichever machine shows it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .pit_screen import Clock, grid, local_zone_name
from .store import StoreError, open_store

STATIC_DIR = Path(__file__).resolve().parent / "web_static"


def wall_routes(floor: Any, pits: tuple[str, ...], clock: Clock) -> list[Any]:
    """The wall page's routes for ``pits`` (names checked by the floor's config), times in
    ``clock``'s zone."""
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    allowed = frozenset(pits)

    async def page(request: Any) -> Response:
        return FileResponse(STATIC_DIR / "wall.html")

    async def board(request: Any) -> Response:
        pit = request.query_params.get("pit", "")
        if pit not in allowed:
            return JSONResponse({"ok": False, "error": f"no wall page for pit {pit[:64]!r}: the floor's config "
                                 "([floor] wall_pits) does not name it"}, 404)
        try:
            out = await asyncio.to_thread(grid, floor.store, None, clock=clock, pit=pit)
        except StoreError:
            return JSONResponse({"ok": False, "error": "the floor database cannot be read now"}, 503)
        return JSONResponse(out)

    return [Route("/pit", page), Route("/api/v1/floor/wall", board),
            Mount("/floor-static", app=StaticFiles(directory=str(STATIC_DIR)))]


class WallDisplay:
    """The wall page alone (``tablectl pit serve``): the routes of :func:`wall_routes` for
    ``pits``, served on ``host:port`` (port 0: a free one), reading the floor's database
    ``config.database`` as it is (never migrated, never written: the floor service owns it),
    times in ``config.display_timezone`` (default this machine's zone). :attr:`url` is the
    server's address; :meth:`close` stops it. Raises
    :class:`~table.floor.store.StoreError` (the database cannot be opened) and ``OSError``
    (the address cannot be bound)."""

    def __init__(self, config: Any, pits: tuple[str, ...], host: str, port: int) -> None:
        from types import SimpleNamespace

        from starlette.applications import Starlette

        from table.interfaces.web import with_headers

        from .web import SECURITY_HEADERS, FloorServer

        self.pits = tuple(pits)
        self.store = open_store(config.database, migrate=False)
        try:
            routes = wall_routes(SimpleNamespace(store=self.store), self.pits,
                                 Clock(config.display_timezone or local_zone_name()))
            self.server: Any = FloorServer(with_headers(Starlette(routes=routes), SECURITY_HEADERS), host, port,
                                           name="pit-wall")
        except BaseException:
            self.store.close()
            raise

    @property
    def url(self) -> str:
        return str(self.server.url)

    def page(self, pit: str) -> str:
        """The address of ``pit``'s wall page."""
        from urllib.parse import quote

        return f"{self.url}/pit?pit={quote(pit)}"

    def close(self) -> None:
        self.server.close()
        self.store.close()
