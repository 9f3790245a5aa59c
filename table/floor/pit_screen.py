"""The pit boss's screen on the floor: every table of their pits at a glance, and one table's
rounds and day figures, read from the floor's database (what the floor took from the tables'
signed messages: :mod:`table.floor.ingest`). No money on the grid; the table's page shows its
day figures (behind the floor's sign-in, as the reports).

**The grid** (:func:`grid`): one card per table the floor has heard a status from, in the
signed-in person's scope (:class:`table.floor.reports.Scope`): its pit, its state
(``online``; ``offline`` with the floor's time it learned it and how, the connection's last
will or a clean stop; ``no news`` when an online table has not been heard from for
``stale_s``: a table republishes its status every ``status_interval_s``, 30 s by default,
docs/integration.md), the round's number and step, what it waits for, its devices' links
(shuffler, shoe) and its alarms (the table's own, from its status, and the count of alarm
rows the floor holds of it). One query of ``tables_seen`` and one grouped count of
``alarms``: the same cost at 500 tables as the floor's table list.

**A table** (:func:`table_page`): the card, its rounds (newest first, :data:`ROUNDS_PAGE`
a page, ``before``: the round seq to page from), each with the incidents the table
journaled on it, and the gaming day's figures (rounds, wagered, table win).

Times are given as UTC ISO 8601 (``ts``) and as the floor's wall time (``at``, in the
floor's display zone: :class:`Clock`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from table.interfaces.auth import PIT_RE
from table.interfaces.status_view import rounds_as_people_say

from .store import Store

#: an online table not heard from for this long shows "no news" (s): three missed status republishes
STALE_S = 90.0
#: rounds on one page of a table's history
ROUNDS_PAGE = 50
#: how the page names the way a table went offline (as :data:`table.floor.reports.OFFLINE_WHY`)
OFFLINE_WHY = {"will": "connection lost: the broker published the table's last will (a crash, a kill, "
                       "its power or network gone)",
               "stopped": "stopped: the table said it was going offline"}


def local_zone_name() -> str:
    """The machine's own IANA time zone (``TZ``, else the ``/etc/localtime`` link, else
    ``/etc/timezone``), or ``"UTC"`` when none can be read."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.readlink("/etc/localtime")
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text().strip())
    except OSError:
        pass
    for name in candidates:
        if not name:
            continue
        try:
            ZoneInfo(name)
            return name
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return "UTC"


@dataclass(frozen=True)
class Clock:
    """The floor's display zone: ``zone`` an IANA name (``[floor] display_timezone``; by
    default the floor machine's own zone, :func:`local_zone_name`). :meth:`at` says a UTC
    ISO 8601 time as the floor's wall time."""

    zone: str = "UTC"

    def at(self, ts: Any) -> str | None:
        """``ts`` (ISO 8601 with an offset) as ``YYYY-MM-DD HH:MM:SS ZONE`` in :attr:`zone`;
        None for a missing or unreadable time (never raises: the text came from a table)."""
        if not isinstance(ts, str) or not ts:
            return None
        return _wall_time(ts, self.zone)


@functools.lru_cache(maxsize=8192)
def _wall_time(ts: str, zone: str) -> str | None:
    """:meth:`Clock.at` of a text (kept: a grid says the same times every 2 s)."""
    try:
        t = _dt.datetime.fromisoformat(ts)
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    local = t.astimezone(ZoneInfo(zone))
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or zone)


def _number_of(round_id: Any) -> int | None:
    """A round's number from its id (``r00011-79645365`` -> 11: a void heard without its
    round's opening still names round 11), or None."""
    text = str(round_id or "")
    if len(text) > 1 and text[0] == "r" and text[1:].split("-", 1)[0].isdigit():
        return int(text[1:].split("-", 1)[0])
    return None


def _text(v: Any, limit: int) -> str | None:
    return rounds_as_people_say(v)[:limit] if isinstance(v, str) else None


def _summary(status: dict[str, Any]) -> dict[str, Any]:
    """The parts of a table's signed status summary the grid shows, each checked for shape
    (a table's text is shown, never trusted for structure)."""
    summary = status.get("table") if isinstance(status.get("table"), dict) else {}
    rnd = summary.get("round") if isinstance(summary.get("round"), dict) else None
    links = summary.get("links") if isinstance(summary.get("links"), dict) else {}
    alarms = summary.get("alarms") if isinstance(summary.get("alarms"), list) else []
    return {
        "round": {"number": rnd.get("number") if isinstance(rnd.get("number"), int) else None,
                  "step": _text(rnd.get("state"), 40)} if rnd else None,
        "waiting_for": _text(summary.get("waiting_for"), 200),
        "devices": {name: {"up": bool(link.get("up")), "state": _text(link.get("state"), 32) or ""}
                    for name, link in links.items() if name in ("shuffler", "shoe") and isinstance(link, dict)},
        "table_alarms": [{"kind": _text(a.get("kind"), 64) or "?", "text": _text(a.get("text"), 300) or ""}
                         for a in alarms[:20] if isinstance(a, dict)],
        "rounds_played": summary.get("rounds_played") if isinstance(summary.get("rounds_played"), int) else None,
    }


def _state(online: Any, last_seen: str | None, now: _dt.datetime, stale_s: float) -> str:
    if not online:
        return "offline"
    try:
        seen = _dt.datetime.fromisoformat(last_seen or "")
    except ValueError:
        return "no news"
    return "no news" if (now - seen).total_seconds() > stale_s else "online"


def card(row: tuple, alarm_rows: int, clock: Clock, now: _dt.datetime, stale_s: float = STALE_S) -> dict[str, Any]:
    """One table's card from its ``tables_seen`` row ``(table_id, floor, online, last_seen,
    status)`` and the count of the floor's alarm rows of it: ``table_id``, ``pit``,
    ``state`` (``online`` | ``offline`` | ``no news``), ``last_seen``/``last_seen_at``,
    ``offline_since``/``offline_since_at``/``offline_why`` when offline, ``round``
    (``{number, step}``), ``waiting_for``, ``devices`` (``{shuffler|shoe: {up, state}}``),
    ``table_alarms`` (the table's own, from its status), ``alarms`` (rows the floor holds)."""
    table_id, pit, online, last_seen, text = row
    will, summary = _read_status(text if isinstance(text, str) else "")
    state = _state(online, last_seen, now, stale_s)
    out: dict[str, Any] = {"table_id": table_id, "pit": pit, "state": state, "last_seen": last_seen,
                           "last_seen_at": clock.at(last_seen), "alarms": alarm_rows,
                           **(_fresh(summary) if online else {"round": None, "waiting_for": None,
                                                              "devices": {}, "table_alarms": [],
                                                              "rounds_played": None})}
    if state == "offline":
        # the floor's time when it learned it: a dead table cannot say when it died
        out.update(offline_since=last_seen, offline_since_at=clock.at(last_seen),
                   offline_why=OFFLINE_WHY["will" if will else "stopped"])
    return out


def _fresh(summary: dict[str, Any]) -> dict[str, Any]:
    """A copy of a kept :func:`_summary` a caller may change (its dicts and lists new)."""
    rnd = summary["round"]
    return {**summary, "round": dict(rnd) if rnd is not None else None,
            "devices": {k: dict(v) for k, v in summary["devices"].items()},
            "table_alarms": [dict(a) for a in summary["table_alarms"]]}


@functools.lru_cache(maxsize=4096)
def _read_status(text: str) -> tuple[bool, dict[str, Any]]:
    """A status's text (as ``tables_seen`` keeps it) read once: whether it is a last will, and
    its :func:`_summary`. Kept by its text: a table's status changes when it publishes a
    new one (every 30 s, or on a change), while every page reads the grid every 2 s."""
    try:
        status = json.loads(text) if text else {}
    except (ValueError, RecursionError):
        status = {}
    status = status if isinstance(status, dict) else {}
    return status.get("will") is True, _summary(status)


def grid(store: Store, only: set[str] | None, *, clock: Clock, now: _dt.datetime | None = None,
         pit: str | None = None, stale_s: float = STALE_S) -> dict[str, Any]:
    """Every table in view (``only``: the tables a pit boss sees, None: the whole floor;
    ``pit``: one pit), sorted by pit then table: ``{"tables": [card, ...], "counts":
    {"tables", "online", "offline", "no_news", "alarmed"}, "pits": [name, ...], "zone"}``
    (:func:`card`). Raises :class:`~table.floor.store.StoreError`."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    alarms = {t: int(n) for t, n in store.query("SELECT table_id, COUNT(*) FROM alarms WHERE table_id IS NOT NULL "
                                                 "GROUP BY table_id")}
    cards = []
    for row in store.query("SELECT table_id, floor, online, last_seen, status FROM tables_seen"):
        if only is not None and row[0] not in only:
            continue
        if pit is not None and row[1] != pit:
            continue
        cards.append(card(row, alarms.get(row[0], 0), clock, now, stale_s))
    cards.sort(key=lambda c: (c["pit"] or "", c["table_id"]))
    counts = {"tables": len(cards), "online": sum(c["state"] == "online" for c in cards),
              "offline": sum(c["state"] == "offline" for c in cards),
              "no_news": sum(c["state"] == "no news" for c in cards),
              "alarmed": sum(bool(c["alarms"] or c["table_alarms"]) for c in cards)}
    return {"tables": cards, "counts": counts, "pits": sorted({c["pit"] for c in cards if c["pit"]}),
            "zone": clock.zone, "ts": now.isoformat(timespec="seconds"), "at": clock.at(now.isoformat())}


class NoSuchTable(LookupError):
    """A table the floor holds no status of, or one outside the person's scope (one answer
    for both: a pit boss learns nothing of other pits' tables)."""


def table_page(store: Store, table_id: str, only: set[str] | None, *, clock: Clock, gaming_day: str,
               before: int | None = None, now: _dt.datetime | None = None) -> dict[str, Any]:
    """One table: ``card`` (:func:`card`), ``rounds`` (newest first, at most
    :data:`ROUNDS_PAGE`, older than round seq ``before`` when given: ``round_id``,
    ``number``, ``gaming_day``, ``opened_ts``/``opened_at``, ``settled_at``, ``state``
    (``settled`` | ``voided`` | ``open``), ``wagered_cents``, ``table_win_cents``,
    ``incidents`` [{type, what, ts, at}]), ``more`` (older rounds exist: page with
    ``before=rounds[-1].seq``), ``day`` (the ``gaming_day``'s rounds, wagered and win in
    cents: settled rounds, voided ones counted apart), ``alarms`` (newest 50, ``at`` the
    floor's time). Raises :class:`NoSuchTable`, ``ValueError`` for a bad id,
    :class:`~table.floor.store.StoreError`."""
    if not PIT_RE.match(table_id):
        raise ValueError("table_id: letters, digits, '.', '_', '-'")
    if only is not None and table_id not in only:
        raise NoSuchTable(table_id)
    seen = store.query("SELECT table_id, floor, online, last_seen, status FROM tables_seen WHERE table_id = ?",
                       (table_id,))
    if not seen:
        raise NoSuchTable(table_id)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    n_alarms = store.query("SELECT COUNT(*) FROM alarms WHERE table_id = ?", (table_id,))[0][0]
    cols = ("round_id", "number", "gaming_day", "opened_ts", "wagered_cents", "settled", "voided", "table_win_cents",
            "settled_ts", "seq")
    where, params = "table_id = ?", [table_id]
    if before is not None:
        where += " AND seq < ?"
        params.append(before)
    rows = [dict(zip(cols, r)) for r in store.query(
        f"SELECT {', '.join(cols)} FROM round_results WHERE {where} ORDER BY seq DESC LIMIT ?",
        (*params, ROUNDS_PAGE + 1))]
    more, rows = len(rows) > ROUNDS_PAGE, rows[:ROUNDS_PAGE]
    incidents: dict[str, list[dict[str, Any]]] = {}
    if rows:
        ids = [r["round_id"] for r in rows]
        for rid, kind, what, ts in store.query(
                f"SELECT round_id, type, what, ts FROM incidents WHERE table_id = ? AND round_id IN "
                f"({', '.join('?' * len(ids))}) ORDER BY seq", (table_id, *ids)):
            incidents.setdefault(rid, []).append({"type": kind, "what": rounds_as_people_say(str(what))[:500],
                                                  "ts": ts, "at": clock.at(ts)})
    rounds = [{"round_id": r["round_id"], "number": r["number"] if r["number"] is not None
               else _number_of(r["round_id"]), "gaming_day": r["gaming_day"], "seq": r["seq"],
               "opened_ts": r["opened_ts"], "opened_at": clock.at(r["opened_ts"]),
               "settled_at": clock.at(r["settled_ts"]),
               "state": "voided" if r["voided"] else "settled" if r["settled"] else "open",
               "wagered_cents": int(r["wagered_cents"] or 0),
               "table_win_cents": int(r["table_win_cents"] or 0) if r["settled"] and not r["voided"] else None,
               "incidents": incidents.get(r["round_id"], [])} for r in rows]
    day = store.query("SELECT COUNT(*), SUM(wagered_cents), SUM(table_win_cents) FROM round_results WHERE table_id = ? "
                      "AND gaming_day = ? AND settled = 1 AND voided = 0", (table_id, gaming_day))[0]
    voided = store.query("SELECT COUNT(*) FROM round_results WHERE table_id = ? AND gaming_day = ? AND voided = 1",
                         (table_id, gaming_day))[0][0]
    alarms = [{"source": s, "kind": k, "text": rounds_as_people_say(str(t))[:1000], "ts": ts, "at": clock.at(ts)}
              for s, k, t, ts in store.query("SELECT source, kind, text, ts FROM alarms WHERE table_id = ? "
                                             "ORDER BY ts DESC LIMIT 50", (table_id,))]
    return {"card": card(seen[0], int(n_alarms), clock, now), "rounds": rounds, "more": more,
            "day": {"gaming_day": gaming_day, "rounds": int(day[0] or 0), "wagered_cents": int(day[1] or 0),
                    "win_cents": int(day[2] or 0), "voided": int(voided or 0)},
            "alarms": alarms, "zone": clock.zone}
