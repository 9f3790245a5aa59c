"""The floor's reports: each table's win by table and game, for the gaming day, month to date and
year to date (COMAR 36.05.03.25), the days outside the 95 % band with their investigation
notes, CSV and JSON export, and the floor page. Behind sign-in: they show money.

Figures come from what the tables signed: ``round_results`` (the table's win of a round is
minus its players' net, ``round_settled``; voided rounds count nothing), and a table's
signed day report for a day when it published one (``day_reports``; it then replaces the
sum of that day's rounds, ``source: "day_report"``).

**Fluctuations.** Per table and game, the rounds of the year to date give the mean ``m``
and standard deviation ``s`` of one round's win; a day of ``n`` rounds whose win ``W`` has
``|W - n*m| > 1.96 * s * sqrt(n)`` (outside the standard deviation at 95 %, COMAR
36.05.03.25) is listed, with the notes people entered on it. A note is stored with who
wrote it, their role and the time, and chained to the note before it (``prev_hash``: the
SHA-256 of the previous note), and logged: a note taken out or changed breaks the chain.

People sign in with the people file of ``tablectl people`` (``--role pit_boss`` or
``--role floor_manager``), the table's own Argon2id PINs and sessions
(:class:`table.interfaces.auth.Authenticator`); every other role is refused.
"""

from __future__ import annotations

import asyncio
import csv
import datetime as _dt
import hashlib
import io
import json
import math
import secrets
from pathlib import Path
from typing import Any

import structlog

from table.interfaces.auth import Authenticator, PeopleFileError, SignInLocked
from table.roles import FLOOR_ROLES

from .ingest import Floor
from .store import Store, StoreError

log = structlog.get_logger("table.floor.reports")

COOKIE = "threecard_floor_session"
STATIC_DIR = Path(__file__).resolve().parent / "web_static"
#: two-sided 95 % (COMAR 36.05.03.25: fluctuations outside the standard deviation at 95 %)
Z95 = 1.96
#: fewer rounds than this in the year to date: no band yet
MIN_ROUNDS_FOR_BAND = 30
MAX_NOTE = 2000


class ReportError(ValueError):
    """A report asked for with a bad argument; the message names it."""


def _day(text: str | None) -> _dt.date:
    if text is None:
        return _dt.datetime.now(_dt.timezone.utc).date()
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise ReportError(f"day {text[:20]!r} is not a date YYYY-MM-DD") from None


def _figures(store: Store, first: str, last: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(table, game, day) -> rounds, wagered, win, the sum of squares of round wins, source."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for t, g, d, n, wagered, win, sq in store.query(
            "SELECT table_id, game, gaming_day, COUNT(*), SUM(wagered_cents), SUM(table_win_cents), "
            "SUM(1.0 * table_win_cents * table_win_cents) FROM round_results WHERE settled = 1 AND voided = 0 "
            "AND gaming_day >= ? AND gaming_day <= ? GROUP BY table_id, game, gaming_day", (first, last)):
        out[(t, g, d)] = {"rounds": int(n), "wagered_cents": int(wagered or 0), "win_cents": int(win or 0),
                          "sq": float(sq or 0), "source": "rounds"}
    latest: dict[tuple[str, str, str], int] = {}
    for t, d, g, win, seq in store.query(
            "SELECT table_id, gaming_day, game, table_win_cents, seq FROM day_reports WHERE gaming_day >= ? AND "
            "gaming_day <= ?", (first, last)):
        k = (t, g, d)
        if seq >= latest.get(k, -1):
            latest[k] = seq
            row = out.setdefault(k, {"rounds": 0, "wagered_cents": 0, "win_cents": 0, "sq": 0.0})
            row["win_cents"], row["source"] = int(win or 0), "day_report"
    return out


def _sum(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"rounds": sum(r["rounds"] for r in rows), "wagered_cents": sum(r["wagered_cents"] for r in rows),
            "win_cents": sum(r["win_cents"] for r in rows)}


def notes(store: Store, table_id: str | None = None) -> list[dict[str, Any]]:
    """Every investigation note (of ``table_id``), oldest first."""
    sql = "SELECT n, note_id, table_id, gaming_day, author, role, text, ts, prev_hash FROM notes"
    rows = store.query(sql + (" WHERE table_id = ?" if table_id else "") + " ORDER BY n", (table_id,) if table_id else ())
    keys = ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts", "prev_hash")
    return [dict(zip(keys, r)) for r in rows]


def _note_hash(note: dict[str, Any]) -> str:
    body = {k: note[k] for k in ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts",
                                 "prev_hash")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def add_note(store: Store, *, author: str, role: str, table_id: str, gaming_day: str, text: str) -> dict[str, Any]:
    """Store an investigation note (who, role, when), chained to the one before. Raises
    :class:`ReportError` for a bad table id, day or text, :class:`StoreError`."""
    text = text.strip() if isinstance(text, str) else ""
    if not text or len(text) > MAX_NOTE or not all(c.isprintable() or c == "\n" for c in text):
        raise ReportError(f"a note is 1-{MAX_NOTE} printable characters")
    if not isinstance(table_id, str) or not table_id or len(table_id) > 64:
        raise ReportError("table_id: give the table the note is about")
    day = _day(gaming_day).isoformat()
    for attempt in range(3):  # two floors writing at once: the second takes the next number
        try:
            with store.transaction() as tx:
                last = tx.query("SELECT n, note_id, table_id, gaming_day, author, role, text, ts, prev_hash "
                                "FROM notes ORDER BY n DESC LIMIT 1")
                keys = ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts", "prev_hash")
                prev = dict(zip(keys, last[0])) if last else None
                note = {"n": (prev["n"] + 1) if prev else 1, "note_id": secrets.token_hex(8), "table_id": table_id,
                        "gaming_day": day, "author": author, "role": role, "text": text,
                        "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds"),
                        "prev_hash": _note_hash(prev) if prev else "0" * 64}
                tx.execute("INSERT INTO notes (note_id, n, table_id, gaming_day, author, role, text, ts, prev_hash) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", tuple(note[k] for k in keys[1:2] + keys[:1] + keys[2:]))
            log.info("floor_note", **{k: note[k] for k in ("n", "table_id", "gaming_day", "author", "role")},
                     text=text[:200])
            return note
        except StoreError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def notes_chain_holds(store: Store) -> bool:
    """True when every note's ``prev_hash`` is the hash of the note before it."""
    prev = None
    for note in notes(store):
        if note["prev_hash"] != (_note_hash(prev) if prev else "0" * 64):
            return False
        prev = note
    return True


def report(store: Store, day: str | None = None) -> dict[str, Any]:
    """The floor report for the gaming ``day`` (``YYYY-MM-DD``, default today, UTC): per
    table and game the day, month to date and year to date (rounds, wagered, win in
    cents), the floor's totals, and the year's fluctuations outside the 95 % band with
    their notes. Raises :class:`ReportError`, :class:`StoreError`."""
    d = _day(day)
    first_of_year, first_of_month = d.replace(month=1, day=1), d.replace(day=1)
    figures = _figures(store, first_of_year.isoformat(), d.isoformat())
    by_tg: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for (t, g, dd), row in figures.items():
        by_tg.setdefault((t, g), []).append((dd, row))
    all_notes = notes(store)
    rows, fluctuations = [], []
    for (t, g), days in sorted(by_tg.items()):
        today = [r for dd, r in days if dd == d.isoformat()]
        mtd = [r for dd, r in days if dd >= first_of_month.isoformat()]
        ytd = [r for _, r in days]
        rows.append({"table_id": t, "game": g, "day": {**_sum(today), "source": today[0]["source"] if today else None},
                     "month_to_date": _sum(mtd), "year_to_date": _sum(ytd)})
        n_all = sum(r["rounds"] for r in ytd if r["source"] == "rounds")
        if n_all < MIN_ROUNDS_FOR_BAND:
            continue
        mean = sum(r["win_cents"] for r in ytd if r["source"] == "rounds") / n_all
        var = max(sum(r["sq"] for r in ytd if r["source"] == "rounds") / n_all - mean * mean, 0.0)
        sd = math.sqrt(var)
        for dd, r in sorted(days):
            if r["rounds"] == 0 or sd == 0:
                continue
            expected = r["rounds"] * mean
            z = (r["win_cents"] - expected) / (sd * math.sqrt(r["rounds"]))
            if abs(z) > Z95:
                fluctuations.append({"table_id": t, "game": g, "gaming_day": dd, "rounds": r["rounds"],
                                     "win_cents": r["win_cents"], "expected_cents": round(expected), "z": round(z, 2),
                                     "notes": [n for n in all_notes if n["table_id"] == t and n["gaming_day"] == dd]})
    totals = {k: _sum([r[k] for r in rows]) for k in ("day", "month_to_date", "year_to_date")}
    return {"schema": "threecard.floor-report/1", "gaming_day": d.isoformat(), "month_start": first_of_month.isoformat(),
            "year_start": first_of_year.isoformat(), "rows": rows, "totals": totals, "fluctuations": fluctuations,
            "band": {"z": Z95, "min_rounds": MIN_ROUNDS_FOR_BAND}}


def report_csv(rep: dict[str, Any]) -> str:
    """The report's rows as CSV: gaming_day, table_id, game, period, rounds, wagered_cents, win_cents."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["gaming_day", "table_id", "game", "period", "rounds", "wagered_cents", "win_cents"])
    for r in rep["rows"]:
        for period in ("day", "month_to_date", "year_to_date"):
            p = r[period]
            w.writerow([rep["gaming_day"], r["table_id"], r["game"], period, p["rounds"], p["wagered_cents"],
                        p["win_cents"]])
    return out.getvalue()


def tables(floor: Floor) -> list[dict[str, Any]]:
    """Every table heard from: online, last heard, the notary's seq, open alarms. No money."""
    seen = floor.store.query("SELECT table_id, floor, online, last_seen FROM tables_seen ORDER BY table_id")
    notary = dict(floor.store.query("SELECT table_id, seq FROM notary"))
    alarms: dict[str, int] = {}
    for t, n in floor.store.query("SELECT table_id, COUNT(*) FROM alarms GROUP BY table_id"):
        alarms[t] = int(n)
    known = {t for t, *_ in seen}
    out = [{"table_id": t, "floor": f, "online": bool(o), "last_seen": ls, "notary_seq": notary.get(t),
            "alarms": alarms.get(t, 0)} for t, f, o, ls in seen]
    out += [{"table_id": t, "floor": None, "online": False, "last_seen": None, "notary_seq": s, "alarms": alarms.get(t, 0)}
            for t, s in sorted(notary.items()) if t not in known]
    return out


def report_routes(floor: Floor, people_file: str | Path) -> list[Any]:
    """The routes of the reports and the floor page (for :func:`table.floor.web.floor_app`)."""
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    auth = Authenticator(people_file)

    def refuse(status: int, text: str) -> JSONResponse:
        return JSONResponse({"ok": False, "error": text}, status)

    def cross_site(request: Request) -> bool:
        origin = request.headers.get("origin")
        return origin is not None and origin.split("://", 1)[-1].rstrip("/") != request.headers.get("host", "")

    def session(request: Request) -> Any:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else request.cookies.get(COOKIE)
        s = auth.session(token)
        return s if s is not None and s.actor.role in FLOOR_ROLES else None

    async def body(request: Request, limit: int = 8192) -> Any:
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    async def page(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "floor.html")

    async def session_endpoint(request: Request) -> Response:
        if cross_site(request):
            return refuse(403, "cross-site request refused")
        if request.method == "DELETE":
            header = request.headers.get("authorization", "")
            auth.sign_out(header[7:].strip() if header[:7].lower() == "bearer " else request.cookies.get(COOKIE))
            resp = JSONResponse({"ok": True})
            resp.delete_cookie(COOKIE, path="/")
            return resp
        if request.method == "GET":
            s = session(request)
            return JSONResponse({"ok": True, **s.actor.to_dict()}) if s else refuse(401, "sign in first")
        req = await body(request, 4096)
        if not isinstance(req, dict) or not isinstance(req.get("person"), str) or not isinstance(req.get("pin"), str):
            return refuse(400, 'sign in with {"person": "ID", "pin": "PIN"}')
        address = request.client.host if request.client else ""
        try:
            token, s = await asyncio.to_thread(auth.sign_in, req["person"], req["pin"], address=address,
                                               source="floor")
        except SignInLocked as exc:
            return refuse(429, str(exc))
        except PermissionError as exc:
            return refuse(401, str(exc))
        except PeopleFileError as exc:
            log.error("floor_people_file_unreadable", error=str(exc)[:300])
            return refuse(500, "the people file cannot be read; the log says why")
        if s.actor.role not in FLOOR_ROLES:
            auth.sign_out(token)
            return refuse(403, f"role {s.actor.role.value} may not see the floor's reports (pit_boss or "
                               "floor_manager may)")
        resp = JSONResponse({"ok": True, "token": token, **s.actor.to_dict()})
        resp.set_cookie(COOKIE, token, max_age=int(auth.session_ttl_s), path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
        return resp

    async def tables_endpoint(request: Request) -> Response:
        try:
            return JSONResponse({"tables": await asyncio.to_thread(tables, floor)})
        except StoreError:
            return refuse(503, "the floor database cannot be read")

    async def report_endpoint(request: Request) -> Response:
        if session(request) is None:
            return refuse(401, "sign in first (pit_boss or floor_manager)")
        fmt = request.query_params.get("format", "json")
        try:
            rep = await asyncio.to_thread(report, floor.store, request.query_params.get("day"))
        except ReportError as exc:
            return refuse(400, str(exc))
        except StoreError:
            return refuse(503, "the floor database cannot be read")
        name = f"floor-report-{rep['gaming_day']}"
        if fmt == "csv":
            return Response(report_csv(rep), media_type="text/csv",
                            headers={"content-disposition": f'attachment; filename="{name}.csv"'})
        if fmt == "download":
            return Response(json.dumps(rep, indent=1), media_type="application/json",
                            headers={"content-disposition": f'attachment; filename="{name}.json"'})
        return JSONResponse(rep)

    async def notes_endpoint(request: Request) -> Response:
        if cross_site(request):
            return refuse(403, "cross-site request refused")
        s = session(request)
        if s is None:
            return refuse(401, "sign in first (pit_boss or floor_manager)")
        if request.method == "GET":
            return JSONResponse({"notes": await asyncio.to_thread(notes, floor.store)})
        if not request.headers.get("content-type", "").startswith("application/json"):
            return refuse(415, "send the note as Content-Type: application/json")
        req = await body(request)
        if not isinstance(req, dict):
            return refuse(400, 'give {"table_id", "gaming_day", "text"}')
        try:
            note = await asyncio.to_thread(add_note, floor.store, author=s.actor.person, role=s.actor.role.value,
                                           table_id=req.get("table_id"), gaming_day=req.get("gaming_day"),
                                           text=req.get("text"))
        except ReportError as exc:
            return refuse(400, str(exc))
        except StoreError:
            return refuse(503, "the floor database cannot be written")
        return JSONResponse({"ok": True, "note": note})

    async def alarms_endpoint(request: Request) -> Response:
        if session(request) is None:
            return refuse(401, "sign in first (pit_boss or floor_manager)")
        rows = await asyncio.to_thread(floor.store.query, "SELECT table_id, source, kind, text, ts FROM alarms "
                                                          "ORDER BY ts DESC LIMIT 200")
        return JSONResponse({"alarms": [dict(zip(("table_id", "source", "kind", "text", "ts"), r)) for r in rows]})

    return [Route("/", page), Route("/floor.html", page),
            Route("/api/v1/floor/session", session_endpoint, methods=["GET", "POST", "DELETE"]),
            Route("/api/v1/floor/tables", tables_endpoint), Route("/api/v1/floor/report", report_endpoint),
            Route("/api/v1/floor/notes", notes_endpoint, methods=["GET", "POST"]),
            Route("/api/v1/floor/alarms", alarms_endpoint),
            Mount("/floor-static", app=StaticFiles(directory=str(STATIC_DIR)))]
