"""The pit's read-only wall page, served by the floor (``[floor] wall_pits``): the grid of one
pit (:func:`table.floor.pit_screen.grid`) without sign-in, for a monitor in the pit. It is
what ``tablectl pit serve`` showed, read from the floor's database instead of a second set of
broker subscriptions: one service, one rule for a table's state. No money (no figure, no
round result), no command; the tables' own status texts and alarms, already sealed by each
table (58 Pa. Code 816a.1: no card face before decisions are final), as the pit view showed
them. Only the pits the floor's config names are served: any other is 404, so a floor whose
config names none serves no page without sign-in.

``GET /pit?pit=NAME`` (the page), ``GET /api/v1/floor/wall?pit=NAME`` (the grid).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .pit_screen import Clock, grid
from .store import StoreError

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
