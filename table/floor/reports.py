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
SHA-256 of the previous note), signed by the floor key and logged: a note taken out or
changed in the database is an alarm when the floor starts and on the page
(:mod:`table.floor.record`).

People sign in with the people file of ``tablectl people`` (``--role pit_boss --pit
NAME`` or ``--role floor_manager``), the table's own Argon2id PINs and sessions
(:class:`table.interfaces.auth.Authenticator`, origin ``floor``: logged with the peer's
address, bounded as a sign-in from off the table's screens); every other role is refused.

**Who sees what** (:class:`Scope`). A table's pit is the ``floor`` its last signed status
names (:func:`pits_of`). A pit boss sees the report, totals, fluctuations, notes, alarms
and exports of their pits' tables only, and writes notes on those tables only (another
pit: :class:`OutsideScope`, 403); a floor manager sees and writes about the whole floor.
A note about a table the floor has no key for (:class:`UnknownTable`) or a day it holds
no record of the table on (:class:`UnknownDay`) is refused (404) and writes nothing.
Today's report is the floor's gaming day by its wall clock (:meth:`GamingDay.of`).
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import structlog

from table.interfaces.auth import FLOOR, PIT_RE, Authenticator, PeopleFileError, SignInLocked
from table.keys import TableKey
from table.roles import FLOOR_ROLES, Role

from .ingest import Floor
from .figures import figures
from .sessions import FloorSessions
from .pit_screen import Clock, NoSuchTable, grid, local_zone_name, table_page
from .record import RecordCheck, note_hash, raise_alarms, sign_note
from .store import Store, StoreError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

log = structlog.get_logger("table.floor.reports")

COOKIE = "threecard_floor_session"
STATIC_DIR = Path(__file__).resolve().parent / "web_static"
#: two-sided 95 % (COMAR 36.05.03.25: fluctuations outside the standard deviation at 95 %)
Z95 = 1.96
#: fewer rounds than this in the year to date: no band yet
MIN_ROUNDS_FOR_BAND = 30
MAX_NOTE = 2000


def _wall_us() -> int:
    """Now, µs since the epoch (UTC): the floor's wall clock unless a test gives its own."""
    return int(_dt.datetime.now(_dt.timezone.utc).timestamp() * 1_000_000)


class ReportError(ValueError):
    """A report or a note asked for with a bad argument; the message names it. ``status``:
    the HTTP status it is answered with; ``code``: what kind of refusal (JSON ``code``)."""

    status = 400
    code = "bad_request"


class UnknownTable(ReportError):
    """A note about a table the floor does not know (no ``TABLE_ID.pub`` in its table keys)."""

    status = 404
    code = "unknown_table"

    def __init__(self, table_id: str) -> None:
        super().__init__(f"table_id: the floor does not know table {table_id[:64]!r} (no key for it in "
                         "[floor] table_keys); nothing was written")
        self.table_id = table_id


class UnknownDay(ReportError):
    """A note about a gaming day of which the floor holds no record of the table (no round,
    no day report): a mistyped or future day."""

    status = 404
    code = "unknown_gaming_day"

    def __init__(self, table_id: str, gaming_day: str) -> None:
        super().__init__(f"gaming_day: the floor has no record of table {table_id} on gaming day {gaming_day} "
                         "(no round, no day report); nothing was written")
        self.table_id, self.gaming_day = table_id, gaming_day


class OutsideScope(ReportError):
    """A pit boss asking for a pit, or writing about a table, outside their pits."""

    status = 403
    code = "not_your_pit"


@dataclass(frozen=True)
class Scope:
    """What a signed-in person may see and write on the floor: ``pits`` is None for a floor
    manager (the whole floor), else the pit boss's pits (the people file's ``pits``). A
    table's pit is the ``floor`` its signed status names (:func:`pits_of`); a table not
    heard from with a status belongs to no pit, so only a floor manager sees it."""

    person: str
    role: str
    pits: frozenset[str] | None = None

    def sees(self, pit: str | None) -> bool:
        return self.pits is None or pit in self.pits

    def tables(self, pits: dict[str, str | None]) -> set[str] | None:
        """The tables this scope sees (None: every one), from ``pits`` (table -> pit)."""
        return None if self.pits is None else {t for t, p in pits.items() if p in self.pits}


def _day(text: Any, default: _dt.date | None = None, key: str = "day") -> _dt.date:
    """The date ``text`` (``YYYY-MM-DD``); ``default`` when ``text`` is None (no default:
    a :class:`ReportError`). Raises :class:`ReportError` naming ``key``."""
    if text is None:
        if default is None:
            raise ReportError(f"{key}: give the gaming day, YYYY-MM-DD")
        return default
    if not isinstance(text, str):
        raise ReportError(f"{key}: {type(text).__name__} is not a date YYYY-MM-DD")
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise ReportError(f"{key} {text[:20]!r} is not a date YYYY-MM-DD") from None


def pits_of(store: Store) -> dict[str, str | None]:
    """table id -> the pit its last signed status names (``floor``; None when it named none
    a pit may be called); every table heard from with a status."""
    out: dict[str, str | None] = {}
    for t, status in store.query("SELECT table_id, status FROM tables_seen"):
        try:
            pit = json.loads(status).get("floor") if status else None
        except (ValueError, AttributeError, RecursionError):
            pit = None
        out[t] = pit if isinstance(pit, str) and PIT_RE.match(pit) else None
    return out


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


def notes(store: Store, table_id: str | None = None, *, only: set[str] | None = None) -> list[dict[str, Any]]:
    """Every investigation note (of ``table_id``; of the tables in ``only`` when it is
    given), oldest first."""
    sql = "SELECT n, note_id, table_id, gaming_day, author, role, text, ts, prev_hash FROM notes"
    rows = store.query(sql + (" WHERE table_id = ?" if table_id else "") + " ORDER BY n", (table_id,) if table_id else ())
    keys = ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts", "prev_hash")
    return [dict(zip(keys, r)) for r in rows if only is None or r[2] in only]


_note_hash = note_hash


def add_note(store: Store, *, author: str, role: str, table_id: Any, gaming_day: Any, text: Any,
             key: TableKey, known_tables: Any = None, now_us: int | None = None) -> dict[str, Any]:
    """Store an investigation note (who, role, when) about ``table_id``'s ``gaming_day``,
    chained to the one before and signed by the floor ``key`` (:mod:`table.floor.record`).
    ``known_tables``: the tables the floor knows (its keys;
    None: any); ``now_us``: the note's time, µs since the epoch (default: now). Raises :class:`ReportError` for a bad table id, day or text,
    :class:`UnknownTable` for a table not in ``known_tables``, :class:`UnknownDay` for a
    day the floor holds no round or day report of that table on (a refused note writes
    nothing), :class:`StoreError`."""
    text = text.strip() if isinstance(text, str) else ""
    if not text or len(text) > MAX_NOTE or not all(c.isprintable() or c == "\n" for c in text):
        raise ReportError(f"text: a note is 1-{MAX_NOTE} printable characters")
    if not isinstance(table_id, str) or not PIT_RE.match(table_id):
        raise ReportError("table_id: give the table the note is about (letters, digits, '.', '_', '-')")
    if known_tables is not None and table_id not in known_tables:
        raise UnknownTable(table_id)
    day = _day(gaming_day, key="gaming_day").isoformat()
    for attempt in range(3):  # two floors writing at once: the second takes the next number
        try:
            with store.transaction() as tx:
                if not (tx.query("SELECT 1 FROM round_results WHERE table_id = ? AND gaming_day = ? LIMIT 1",
                                 (table_id, day))
                        or tx.query("SELECT 1 FROM day_reports WHERE table_id = ? AND gaming_day = ? LIMIT 1",
                                    (table_id, day))):
                    raise UnknownDay(table_id, day)
                last = tx.query("SELECT n, note_id, table_id, gaming_day, author, role, text, ts, prev_hash "
                                "FROM notes ORDER BY n DESC LIMIT 1")
                keys = ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts", "prev_hash")
                prev = dict(zip(keys, last[0])) if last else None
                note = {"n": (prev["n"] + 1) if prev else 1, "note_id": secrets.token_hex(8), "table_id": table_id,
                        "gaming_day": day, "author": author, "role": role, "text": text,
                        "ts": _dt.datetime.fromtimestamp((now_us or _wall_us()) / 1e6, _dt.timezone.utc)
                        .isoformat(timespec="microseconds"),
                        "prev_hash": _note_hash(prev) if prev else "0" * 64}
                signed = sign_note(key, note)
                tx.execute("INSERT INTO notes (note_id, n, table_id, gaming_day, author, role, text, ts, prev_hash, "
                           "key_id, sig) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           tuple(note[k] for k in keys[1:2] + keys[:1] + keys[2:]) + (signed["key_id"], signed["sig"]))
            log.info("floor_note", **{k: note[k] for k in ("n", "table_id", "gaming_day", "author", "role")},
                     text=text[:200])
            return note
        except StoreError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def notes_chain_holds(store: Store) -> bool:
    """True when every note's ``prev_hash`` is the hash of the note before it (the chain
    alone; :func:`table.floor.record.check_notes` checks the floor's signatures too)."""
    prev = None
    for note in notes(store):
        if note["prev_hash"] != (_note_hash(prev) if prev else "0" * 64):
            return False
        prev = note
    return True


def report(store: Store, day: str | None = None, *, today: _dt.date | None = None,
           only: set[str] | None = None) -> dict[str, Any]:
    """The floor report for the gaming ``day`` (``YYYY-MM-DD``; default ``today``, which
    the floor's web side gives as its own gaming day, :meth:`GamingDay.of`; else the UTC
    date): per table and game the day, month to date and year to date (rounds, wagered,
    win in cents), the totals, and the year's fluctuations outside the 95 % band with
    their notes. ``only``: the tables a pit boss sees (None: the whole floor); the totals
    are then theirs. Raises :class:`ReportError`, :class:`StoreError`."""
    d = _day(day, today or _dt.datetime.now(_dt.timezone.utc).date())
    first_of_year, first_of_month = d.replace(month=1, day=1), d.replace(day=1)
    figures = _figures(store, first_of_year.isoformat(), d.isoformat())
    if only is not None:
        figures = {k: v for k, v in figures.items() if k[0] in only}
    by_tg: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for (t, g, dd), row in figures.items():
        by_tg.setdefault((t, g), []).append((dd, row))
    all_notes = notes(store, only=only)
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


#: how the floor page names the way a table went offline (``tables()``'s ``offline_why``)
OFFLINE_WHY = {"will": "connection lost: the broker published the table's last will (a crash, a kill, "
                       "its power or network gone)",
               "stopped": "stopped: the table said it was going offline"}


def tables(floor: Floor) -> list[dict[str, Any]]:
    """Every table heard from: online, last heard, the notary's seq, open alarms. No money.
    An offline table has ``offline_since`` (the floor's time when it learned it, UTC ISO
    8601: not the table's, which cannot say when it died) and ``offline_why``
    (:data:`OFFLINE_WHY`: its connection's last will, or its own clean stop)."""
    seen = floor.store.query("SELECT table_id, floor, online, last_seen, status FROM tables_seen ORDER BY table_id")
    notary = dict(floor.store.query("SELECT table_id, seq FROM notary"))
    alarms: dict[str, int] = {}
    for t, n in floor.store.query("SELECT table_id, COUNT(*) FROM alarms GROUP BY table_id"):
        alarms[t] = int(n)
    known = {t for t, *_ in seen}
    out = []
    for t, f, o, ls, text in seen:
        row = {"table_id": t, "floor": f, "online": bool(o), "last_seen": ls, "notary_seq": notary.get(t),
               "alarms": alarms.get(t, 0)}
        if not o:
            try:
                status = json.loads(text) if text else {}
            except (ValueError, RecursionError):
                status = {}
            will = isinstance(status, dict) and status.get("will") is True
            row.update(offline_since=ls, offline_why=OFFLINE_WHY["will" if will else "stopped"])
        out.append(row)
    out += [{"table_id": t, "floor": None, "online": False, "last_seen": None, "notary_seq": s, "alarms": alarms.get(t, 0)}
            for t, s in sorted(notary.items()) if t not in known]
    return out


@dataclass(frozen=True)
class _Signed:
    """A signed-in person (``actor``) behind a floor session."""

    actor: Any


class _ReportRoutes:
    """The endpoints behind :func:`report_routes`, one method each, sharing the floor,
    the sign-in (:class:`~table.interfaces.auth.Authenticator` on ``people_file``) and the
    wall ``clock`` (µs since the epoch, UTC; as :class:`table.journal.Journal`'s) that
    decides today's gaming day."""

    def __init__(self, floor: Floor, people_file: str | Path, clock: Callable[[], int] | None = None, *,
                 key: TableKey, zone: str | None = None) -> None:
        self.floor = floor
        #: the floor's display zone (times on the pages: :class:`table.floor.pit_screen.Clock`)
        self.shown = Clock(zone or local_zone_name())
        self.auth = Authenticator(people_file)
        self.clock = clock or _wall_us
        #: the floor key: signs the notes, and its public half checks them (and the floor's alarms, when
        #: the floor signs them) on the page
        self.key = key
        self.record = RecordCheck(key.public, alarms=floor.key is not None)
        #: the sessions, in the floor database (a restart of the floor signs no one out); on the real wall
        #: clock: ``clock`` decides the gaming day, and a test moving it to tomorrow is no idle person
        self.sessions = FloorSessions(floor.store, _wall_us, ttl_s=self.auth.session_ttl_s,
                                      idle_s=self.auth.session_idle_s)

    def today(self) -> _dt.date:
        """The floor's gaming day now (its ``timezone`` and ``day_starts_h``), not a browser's date."""
        now = _dt.datetime.fromtimestamp(self.clock() / 1e6, _dt.timezone.utc)
        return _dt.date.fromisoformat(self.floor.day.of(now.isoformat()))

    @staticmethod
    def refuse(status: int, text: str, **more: Any) -> JSONResponse:
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": False, "error": text, **more}, status)

    def refuse_error(self, exc: ReportError) -> JSONResponse:
        extra = {k: v for k, v in (("table_id", getattr(exc, "table_id", None)),
                                   ("gaming_day", getattr(exc, "gaming_day", None))) if v is not None}
        return self.refuse(exc.status, str(exc), code=exc.code, **extra)

    @staticmethod
    def cross_site(request: Request) -> bool:
        origin = request.headers.get("origin")
        return origin is not None and origin.split("://", 1)[-1].rstrip("/") != request.headers.get("host", "")

    @staticmethod
    def token(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        return header[7:].strip() if header[:7].lower() == "bearer " else request.cookies.get(COOKIE)

    def session(self, request: Request) -> Any:
        """The request's live floor session (:class:`table.floor.sessions.FloorSessions`, kept
        in the floor database: a floor restart keeps it) as an object with ``actor``, or None:
        no token, unknown, expired, or its person left the people file or changed role (their
        sessions then end). Raises :class:`StoreError`."""
        s = self.sessions.get(self.token(request))
        if s is None:
            return None
        try:
            person = self.auth.people().get(s.person)
        except PeopleFileError as exc:
            log.error("floor_people_file_unreadable", error=str(exc)[:300])
            return None
        if person is None or person.role.value != s.role or person.role not in FLOOR_ROLES:
            self.sessions.end_person(s.person)
            return None
        return _Signed(person.actor("floor"))

    def scope(self, request: Request) -> Scope | None:
        """The signed-in person's :class:`Scope` (a pit boss's pits read from the people file
        at each request: a change there holds at once), or None: not signed in, or a pit
        boss of no pit."""
        s = self.session(request)
        if s is None:
            return None
        if s.actor.role is Role.FLOOR_MANAGER:
            return Scope(s.actor.person, s.actor.role.value, None)
        try:
            person = self.auth.people().get(s.actor.person)
        except PeopleFileError:
            return None
        if person is None or not person.pits:
            return None
        return Scope(s.actor.person, s.actor.role.value, frozenset(person.pits))

    def who(self, actor: Any, scope: Scope | None) -> dict[str, Any]:
        return {**actor.to_dict(), "pits": sorted(scope.pits) if scope and scope.pits is not None else None,
                "gaming_day": self.today().isoformat()}

    @staticmethod
    async def body(request: Request, limit: int = 8192) -> Any:
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limit:
                return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return None

    @staticmethod
    async def page(request: Request) -> Response:
        from starlette.responses import FileResponse

        return FileResponse(STATIC_DIR / "floor.html")

    async def session_endpoint(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if self.cross_site(request):
            return self.refuse(403, "cross-site request refused")
        if request.method == "DELETE":
            try:
                await asyncio.to_thread(self.sessions.close, self.token(request))
            except StoreError:
                return self.refuse(503, "the floor database cannot be written: you are not signed out yet")
            resp = JSONResponse({"ok": True})
            resp.delete_cookie(COOKIE, path="/")
            return resp
        if request.method == "GET":
            try:
                s, scope = await asyncio.to_thread(self.session, request), await asyncio.to_thread(self.scope, request)
            except StoreError:
                return self.refuse(503, "the floor database cannot be read")
            return JSONResponse({"ok": True, **self.who(s.actor, scope)}) if s and scope else self.refuse(
                401, "sign in first")
        req = await self.body(request, 4096)
        if not isinstance(req, dict) or not isinstance(req.get("person"), str) or not isinstance(req.get("pin"), str):
            return self.refuse(400, 'sign in with {"person": "ID", "pin": "PIN"}')
        address = request.client.host if request.client else ""
        try:
            token, s = await asyncio.to_thread(self.auth.sign_in, req["person"], req["pin"], address=address,
                                               source="floor", origin=FLOOR)
            # the PIN was right: the floor keeps its own session, in its database, not the authenticator's
            self.auth.sign_out(token)
        except SignInLocked as exc:
            return self.refuse(429, str(exc))
        except PermissionError as exc:
            return self.refuse(401, str(exc))
        except PeopleFileError as exc:
            log.error("floor_people_file_unreadable", error=str(exc)[:300])
            return self.refuse(500, "the people file cannot be read; the log says why")
        if s.actor.role not in FLOOR_ROLES:
            return self.refuse(403, f"role {s.actor.role.value} may not see the floor's reports (pit_boss or "
                               "floor_manager may)")
        try:
            person = self.auth.people().get(s.actor.person)
        except PeopleFileError as exc:
            log.error("floor_people_file_unreadable", error=str(exc)[:300])
            return self.refuse(500, "the people file cannot be read; the log says why")
        if s.actor.role is Role.PIT_BOSS and (person is None or not person.pits):
            log.warning("floor_sign_in_refused", person=s.actor.person, reason="a pit boss of no pit")
            return self.refuse(403, f"{s.actor.person} is a pit boss of no pit: give their pits with tablectl "
                               "people add --replace --role pit_boss --pit NAME")
        scope = Scope(s.actor.person, s.actor.role.value,
                      None if s.actor.role is Role.FLOOR_MANAGER else frozenset(person.pits))
        try:
            token = await asyncio.to_thread(self.sessions.open, s.actor.person, s.actor.role.value)
        except StoreError:
            return self.refuse(503, "the floor database cannot be written: try again")
        resp = JSONResponse({"ok": True, "token": token, **self.who(s.actor, scope)})
        resp.set_cookie(COOKIE, token, max_age=int(self.auth.session_ttl_s), path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
        return resp

    async def tables_endpoint(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        try:
            return JSONResponse({"tables": await asyncio.to_thread(tables, self.floor)})
        except StoreError:
            return self.refuse(503, "the floor database cannot be read")

    def visible(self, scope: Scope, pit: str | None) -> set[str] | None:
        """The tables ``scope`` sees, narrowed to ``pit`` when given. Raises :class:`OutsideScope`
        for a pit outside a pit boss's, :class:`ReportError` for a bad pit name."""
        if pit is not None and not PIT_RE.match(pit):
            raise ReportError("pit: letters, digits, '.', '_', '-'")
        if pit is not None and not scope.sees(pit):
            raise OutsideScope(f"pit {pit}: {scope.person} is a pit boss of {', '.join(sorted(scope.pits or ()))} "
                               "only; the whole floor and other pits are the floor manager's")
        if pit is None and scope.pits is None:
            return None
        pits = pits_of(self.floor.store)
        wanted = {pit} if pit is not None else scope.pits or set()
        return {t for t, p in pits.items() if p in wanted}

    async def report_endpoint(self, request: Request) -> Response:
        from starlette.responses import JSONResponse, Response

        scope = await asyncio.to_thread(self.scope, request)
        if scope is None:
            return self.refuse(401, "sign in first (pit_boss or floor_manager)")
        fmt = request.query_params.get("format", "json")
        pit = request.query_params.get("pit")
        try:
            only = await asyncio.to_thread(self.visible, scope, pit)
            rep = await asyncio.to_thread(report, self.floor.store, request.query_params.get("day"),
                                          today=self.today(), only=only)
        except ReportError as exc:
            return self.refuse_error(exc)
        except StoreError:
            return self.refuse(503, "the floor database cannot be read")
        rep["scope"] = {"pits": sorted({pit} if pit else scope.pits) if pit or scope.pits is not None else None,
                        "whole_floor": only is None}
        what = "floor" if only is None else "pits-" + "-".join(rep["scope"]["pits"])
        name = f"{what}-report-{rep['gaming_day']}"
        if fmt == "csv":
            return Response(report_csv(rep), media_type="text/csv",
                            headers={"content-disposition": f'attachment; filename="{name}.csv"'})
        if fmt == "download":
            return Response(json.dumps(rep, indent=1), media_type="application/json",
                            headers={"content-disposition": f'attachment; filename="{name}.json"'})
        return JSONResponse(rep)

    async def notes_endpoint(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if self.cross_site(request):
            return self.refuse(403, "cross-site request refused")
        scope = await asyncio.to_thread(self.scope, request)
        if scope is None:
            return self.refuse(401, "sign in first (pit_boss or floor_manager)")
        if request.method == "GET":
            only = await asyncio.to_thread(self.visible, scope, None)
            try:
                record = await asyncio.to_thread(self.check_record)
            except StoreError:
                return self.refuse(503, "the floor database cannot be read")
            return JSONResponse({"notes": await asyncio.to_thread(notes, self.floor.store, only=only),
                                 "record": record})
        if not request.headers.get("content-type", "").startswith("application/json"):
            return self.refuse(415, "send the note as Content-Type: application/json")
        req = await self.body(request)
        if not isinstance(req, dict):
            return self.refuse(400, 'give {"table_id", "gaming_day", "text"}')
        table_id = req.get("table_id")
        try:
            if isinstance(table_id, str) and PIT_RE.match(table_id) and table_id not in self.floor.keys:
                raise UnknownTable(table_id)  # for everyone alike: the table list is no secret
            if scope.pits is not None and isinstance(table_id, str):
                pit = (await asyncio.to_thread(pits_of, self.floor.store)).get(table_id)
                if pit not in scope.pits:
                    log.warning("floor_note_refused", person=scope.person, table_id=table_id[:64], pit=pit,
                                reason="not the pit boss's pit")
                    raise OutsideScope(f"table_id: {table_id[:64]} is not in {scope.person}'s pits "
                                       f"({', '.join(sorted(scope.pits))}); nothing was written")
            note = await asyncio.to_thread(add_note, self.floor.store, author=scope.person, role=scope.role,
                                           table_id=table_id, gaming_day=req.get("gaming_day"),
                                           text=req.get("text"), key=self.key, known_tables=self.floor.keys,
                                           now_us=self.clock())
        except ReportError as exc:
            return self.refuse_error(exc)
        except StoreError:
            return self.refuse(503, "the floor database cannot be written")
        return JSONResponse({"ok": True, "note": note})

    async def alarms_endpoint(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        scope = await asyncio.to_thread(self.scope, request)
        if scope is None:
            return self.refuse(401, "sign in first (pit_boss or floor_manager)")
        only = await asyncio.to_thread(self.visible, scope, None)
        try:
            record = await asyncio.to_thread(self.check_record)  # before the read: its alarms are in it
        except StoreError:
            return self.refuse(503, "the floor database cannot be read")
        # the pit boss's tables are chosen before the limit: other pits' alarms (a flood of refusals on
        # one table of theirs) cannot push this pit's out of the newest 200
        where, params = "", ()
        if only is not None:
            if not only:
                return JSONResponse({"alarms": [], "record": record})
            where, params = f"WHERE table_id IN ({', '.join('?' * len(only))}) ", tuple(sorted(only))
        rows = await asyncio.to_thread(self.floor.store.query, "SELECT table_id, source, kind, text, ts FROM alarms "
                                       f"{where}ORDER BY ts DESC LIMIT 200", params)
        return JSONResponse({"alarms": [{**dict(zip(("table_id", "source", "kind", "text", "ts"), r)),
                                         "at": self.shown.at(r[4])} for r in rows],
                             "record": record, "zone": self.shown.zone})

    def now(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self.clock() / 1e6, _dt.timezone.utc)

    async def pit_endpoint(self, request: Request) -> Response:
        """``GET /api/v1/floor/pit[?pit=NAME]``: the grid of the tables in the person's scope
        (:func:`table.floor.pit_screen.grid`)."""
        from starlette.responses import JSONResponse

        scope = await asyncio.to_thread(self.scope, request)
        if scope is None:
            return self.refuse(401, "sign in first (pit_boss or floor_manager)")
        pit = request.query_params.get("pit") or None
        try:
            only = await asyncio.to_thread(self.visible, scope, pit)
            board = await asyncio.to_thread(grid, self.floor.store, only, clock=self.shown, now=self.now(), pit=pit)
        except ReportError as exc:
            return self.refuse_error(exc)
        except StoreError:
            return self.refuse(503, "the floor database cannot be read")
        return JSONResponse(board)

    async def figures_endpoint(self, request: Request) -> Response:
        """``GET /api/v1/floor/figures[?day=YYYY-MM-DD&pit=NAME&table=ID&series=month|year]``:
        the day, month and year figures with their 95 % band per table, per pit and for the
        person's scope, and the cumulative series the page plots
        (:func:`table.floor.figures.figures`)."""
        from starlette.responses import JSONResponse

        scope = await asyncio.to_thread(self.scope, request)
        if scope is None:
            return self.refuse(401, "sign in first (pit_boss or floor_manager)")
        series = request.query_params.get("series", "month")
        table_id = request.query_params.get("table")
        try:
            if series not in ("month", "year"):
                raise ReportError("series: month or year")
            if table_id is not None and not PIT_RE.match(table_id):
                raise ReportError("table: letters, digits, '.', '_', '-'")
            d = _day(request.query_params.get("day"), self.today())
            only = await asyncio.to_thread(self.visible, scope, request.query_params.get("pit") or None)
            pits = await asyncio.to_thread(pits_of, self.floor.store)
            if table_id is not None:
                if only is not None and table_id not in only:
                    return self.refuse(404, f"no table {table_id!r} in your view", code="unknown_table")
                only = {table_id}
            rows = await asyncio.to_thread(_figures, self.floor.store, d.replace(month=1, day=1).isoformat(),
                                           d.isoformat())
            out = figures(rows, d, only, pits, min_rounds=MIN_ROUNDS_FOR_BAND, series=series)
        except ReportError as exc:
            return self.refuse_error(exc)
        return JSONResponse(out)

    async def table_endpoint(self, request: Request) -> Response:
        """``GET /api/v1/floor/table/{table_id}[?before=SEQ&day=YYYY-MM-DD]``: one table's card,
        rounds and day figures (:func:`table.floor.pit_screen.table_page`); 404 for a table
        the floor has no status of or outside the person's pits (one answer for both)."""
        from starlette.responses import JSONResponse

        scope = await asyncio.to_thread(self.scope, request)
        if scope is None:
            return self.refuse(401, "sign in first (pit_boss or floor_manager)")
        table_id = request.path_params["table_id"]
        before = request.query_params.get("before")
        if before is not None and not (before.isdigit() and len(before) <= 18):
            return self.refuse(400, "before: the seq of the oldest round shown, a whole number")
        try:
            day = _day(request.query_params.get("day"), self.today()).isoformat()
            only = await asyncio.to_thread(self.visible, scope, None)
            page = await asyncio.to_thread(table_page, self.floor.store, table_id, only, clock=self.shown,
                                           gaming_day=day, before=int(before) if before else None, now=self.now())
        except ReportError as exc:
            return self.refuse_error(exc)
        except NoSuchTable:
            return self.refuse(404, f"no table {table_id[:64]!r} in your view", code="unknown_table")
        except ValueError as exc:
            return self.refuse(400, str(exc))
        except StoreError:
            return self.refuse(503, "the floor database cannot be read")
        return JSONResponse(page)

    def check_record(self) -> dict[str, Any]:
        """The floor's record checked now (:class:`table.floor.record.RecordCheck`), each
        problem an alarm row: ``{"holds": bool, "problems": [text, ...]}`` (at most 20)."""
        problems = self.record.check(self.floor.store)
        if problems:
            raise_alarms(self.floor.store, problems, key=self.key,
                         now=_dt.datetime.now(_dt.timezone.utc).isoformat())
        return {"holds": not problems, "problems": [p.why for p in problems[:20]]}


def report_routes(floor: Floor, people_file: str | Path, *, key: TableKey,
                  clock: Callable[[], int] | None = None, zone: str | None = None) -> list[Any]:
    """The routes of the reports and the floor page (for :func:`table.floor.web.floor_app`).
    ``key``: the floor key (signs the notes; :mod:`table.floor.record`); ``clock``: the
    wall clock, µs since the epoch (UTC); tests give their own; ``zone``: the IANA zone the
    pages show times in (default: the floor machine's own, :func:`~table.floor.pit_screen.local_zone_name`)."""
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    r = _ReportRoutes(floor, people_file, clock, key=key, zone=zone)
    page = r.page
    return [Route("/", page), Route("/floor.html", page),
            Route("/api/v1/floor/session", r.session_endpoint, methods=["GET", "POST", "DELETE"]),
            Route("/api/v1/floor/tables", r.tables_endpoint), Route("/api/v1/floor/report", r.report_endpoint),
            Route("/api/v1/floor/notes", r.notes_endpoint, methods=["GET", "POST"]),
            Route("/api/v1/floor/alarms", r.alarms_endpoint),
            Route("/api/v1/floor/pit", r.pit_endpoint), Route("/api/v1/floor/figures", r.figures_endpoint), Route("/api/v1/floor/table/{table_id}", r.table_endpoint),
            Mount("/floor-static", app=StaticFiles(directory=str(STATIC_DIR)))]
