"""The table's recent past for the screens' history panel: the last rounds with their
results, and the incidents with who handled them (the ``history`` query of the table API).

Read from the journal file opened read-only (as :mod:`table.interfaces.audit_view`
does), newest first, one page at a time. Only clear fields of the journal are read:
a round's number, seats, wagers placed, its holds (reasons already masked when
journaled), its void (reason masked, the supervisors), and its net results once it
is settled, which happens after the reveal. No sealed field and no card entry is
read, so nothing of a round appears before its reveal (58 Pa. Code 816a.1): a round
in progress is only its number, seats, wagers and step.

Reply fields (``{"history": ...}``)::

    {"rounds": [{"round_id", "number", "opened", "closed" | None, "seats": [int],
                 "wagers_cents": {seat: cents}, "outcome": "settled" | "voided" | "held"
                 | "in_progress", "net_cents": {seat: cents} | None, "house_cents": int | None,
                 "holds": [{"reason", "cause", "ts"}], "voided": {"reason", "supervisors"} | None,
                 "released_by": [person], "bets_open": bool}],
     "incidents": [{"seq", "ts", "type", "round_id", "number", "what", "handled_by":
                    [{"action", "supervisor", "ts"}]}],
     "next_before": seq | None, "head": seq}

``before``: the journal seq to page back from (absent: the newest); ``limit``:
rounds per page (1..50). ``next_before`` is what to send for the next, older page
(None: this page reaches the start of the journal).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator

from table.journal import connect, ts_text
from table.sealing import mask_cards

#: journal kinds the history reads (card entries, checkpoints and device traffic are never read)
KINDS = ("round", "violation", "incident", "supervisor")
#: journal entries read per request at most (a bound on the work one request can ask for)
MAX_SCAN = 20_000
CHUNK = 1000
#: gaming days before the live segment the history reads back into at most
MAX_DAYS_BACK = 7
_TEXT = 300


def _text(value: Any) -> str:
    """A clear journal text for a screen: masked again (never trust it was), bounded."""
    return mask_cards(str(value or ""))[:_TEXT]


def _cents(wagers: dict[str, Any]) -> int:
    return sum(v for v in wagers.values() if isinstance(v, int) and not isinstance(v, bool))


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise FileNotFoundError(f"no journal at {path}")
    return connect(path)


def _scan_back(dbs: Iterator[sqlite3.Connection], upto: int, limit: int,
               max_scan: int) -> tuple[list[tuple[int, str, str, str | None, str]], list[int], int]:
    """The journal's rows of :data:`KINDS` before seq ``upto``, newest first, read back in
    chunks of :data:`CHUNK` until ``limit`` rounds have their opening among them (or
    ``max_scan`` rows were read): from each of ``dbs`` in turn (the live segment, then
    the gaming days before it: the seqs go on across days, a round never spans two).
    Returns ``(rows, seqs of the openings, cursor)``: ``cursor`` is the seq the reading
    stopped at (0: the start of what ``dbs`` hold)."""
    kinds = ",".join("?" for _ in KINDS)
    rows: list[tuple[int, str, str, str | None, str]] = []
    opened: list[int] = []
    cursor, scanned = upto, 0
    for db in dbs:
        # Back in chunks until `limit` rounds have their opening in what was read.
        while cursor > 1 and len(opened) < limit and scanned < max_scan:
            chunk = db.execute(f"SELECT seq, ts, kind, round_id, body FROM entries WHERE seq < ? AND kind IN "
                               f"({kinds}) ORDER BY seq DESC LIMIT ?", (cursor, *KINDS, CHUNK)).fetchall()
            if not chunk:
                first = db.execute("SELECT MIN(seq) FROM entries").fetchone()[0]
                cursor = min(cursor, first) if first is not None else cursor
                break
            for row in chunk:
                rows.append(row)
                scanned += 1
                if row[2] == "round" and json.loads(row[4]).get("step") == "open":
                    opened.append(row[0])
                    if len(opened) >= limit:
                        break
            cursor = rows[-1][0]
        if cursor <= 1 or len(opened) >= limit or scanned >= max_scan:
            break
    else:
        cursor = 0  # nothing older to read
    return rows, opened, cursor


def _segments(live: sqlite3.Connection, archive: Path | None, opened_dbs: list[sqlite3.Connection]
              ) -> Iterator[sqlite3.Connection]:
    """The live segment, then each gaming day before it that the ``archive`` folder holds
    (decompressed once: :func:`table.day.segments.decompressed`), newest first; at most
    :data:`MAX_DAYS_BACK` days. Each connection opened is put in ``opened_dbs``."""
    from table.day import segments

    db: sqlite3.Connection | None = live
    for _ in range(MAX_DAYS_BACK + 1):
        if db is None:
            return
        yield db
        prev = segments.previous_archive(db, archive)
        if prev is None:
            return
        try:
            db = _connect(segments.decompressed(prev))
        except (OSError, segments.ArchiveError):
            return  # an archive that does not read: the history ends there
        opened_dbs.append(db)


def history(journal_path: str | Path, *, before: int | None = None, limit: int = 10,
            max_scan: int = MAX_SCAN, archive: str | Path | None = None) -> dict[str, Any]:
    """One page of the table's history, newest first (see the module docstring for the
    shape). ``before``: journal seq (exclusive) to page back from; ``limit``: rounds,
    1..50; ``archive``: the folder of archived gaming days (``[journal] archive``): the
    history reads on into the days before the live segment (just after the day's close,
    yesterday's last rounds are still listed). Raises ``FileNotFoundError`` when there is
    no journal, ``sqlite3.Error`` when it cannot be read."""
    limit = max(1, min(50, int(limit)))
    db = _connect(Path(journal_path))
    more: list[sqlite3.Connection] = []
    try:
        head = db.execute("SELECT COALESCE(MAX(seq), 0) FROM entries").fetchone()[0]
        upto = head + 1 if before is None else max(0, min(int(before), head + 1))
        rows, opened, cursor = _scan_back(_segments(db, Path(archive) if archive else None, more), upto, limit,
                                          max_scan)
    finally:
        db.close()
        for d in more:
            d.close()
    start = opened[-1] if len(opened) >= limit else (cursor if cursor > 1 else 0)
    rows = [r for r in rows if r[0] >= start]
    rows.reverse()  # oldest first: each round's steps in order
    rounds: dict[str, dict[str, Any]] = {}
    incidents: list[dict[str, Any]] = []
    for seq, ts_us, kind, rid, text in rows:
        ts = ts_text(ts_us)
        body = json.loads(text)
        r = rounds.get(rid) if rid else None
        if kind == "round":
            _round_step(rounds, incidents, seq, ts, rid, body)
        elif kind == "violation":
            incidents.append({"seq": seq, "ts": ts, "type": "custody_violation", "round_id": rid,
                              "number": r["number"] if r else None,
                              "what": "custody rule broken: " + str(body.get("rule") or "").replace("_", " ")
                              + (f" ({body['citation']})" if body.get("citation") else ""), "handled_by": []})
        elif kind == "incident":
            incidents.append({"seq": seq, "ts": ts, "type": "incident", "round_id": rid,
                              "number": r["number"] if r else None, "what": _text(body.get("what")),
                              "handled_by": []})
        elif kind == "supervisor":
            _supervisor_step(incidents, rid, body, ts)
    out_rounds = sorted(rounds.values(), key=lambda x: x["seq"], reverse=True)[:limit]
    incidents.reverse()
    return {"history": {"rounds": out_rounds, "incidents": incidents[:50],
                        "next_before": start if start > 1 else None, "head": head}}


def _round_step(rounds: dict[str, dict[str, Any]], incidents: list[dict[str, Any]], seq: int, ts: str,
                rid: str | None, body: dict[str, Any]) -> None:
    """Apply one ``round`` entry (``body``, at journal ``seq``, time ``ts``) to its round in
    ``rounds``: opened, held (an incident), released, settled, voided or closed."""
    r = rounds.get(rid) if rid else None
    step = body.get("step")
    if step == "open":
        wagers = body.get("wagers") or {}
        rounds[rid] = {"seq": seq, "round_id": rid, "number": body.get("number"), "opened": ts, "closed": None,
                       "seats": sorted(int(s) for s in wagers),
                       "wagers_cents": {str(s): _cents(w) for s, w in wagers.items() if isinstance(w, dict)},
                       "outcome": "in_progress", "net_cents": None, "house_cents": None, "holds": [],
                       "voided": None, "released_by": [],
                       # a table that takes bets opens its round with none: open until close_bets
                       "bets_open": not wagers}
        return
    if r is None:
        return
    if step == "close_bets":  # a table that takes bets opens its round with none: the wagers as placed
        r["bets_open"] = False
        wagers = body.get("wagers") or {}
        if isinstance(wagers, dict):
            r["seats"] = sorted(int(s) for s in wagers if str(s).isdigit())
            r["wagers_cents"] = {str(s): _cents(w) for s, w in wagers.items() if isinstance(w, dict)}
        return
    if step == "held":
        # a round settled before a crash is held at the restart only until its chips are
        # collected: its results stand (816a.1) and are shown, never "held" for good
        r["outcome"] = "settled" if r["net_cents"] is not None else "held"
        r["holds"].append({"reason": _text(body.get("reason")), "cause": body.get("cause"), "ts": ts})
        incidents.append({"seq": seq, "ts": ts, "type": "round_held", "round_id": rid, "number": r["number"],
                          "what": f"round {r['number']} held: {_text(body.get('reason'))}", "handled_by": []})
    elif step == "released":
        r["outcome"] = "settled" if r["net_cents"] is not None else "in_progress"
        r["released_by"].append(str(body.get("supervisor") or ""))
        _handled(incidents, rid, "released", body.get("supervisor"), ts)
    elif step == "settle":  # after the reveal: the results are public from here
        net = {str(s): res.get("net") for s, res in (body.get("results") or {}).items() if isinstance(res, dict)}
        r["net_cents"] = net
        r["house_cents"] = -sum(v for v in net.values() if isinstance(v, int))
        r["outcome"] = "settled"
    elif step == "voided":
        sups = [p for p in (body.get("supervisor"), body.get("second_supervisor")) if p]
        r["voided"] = {"reason": _text(body.get("reason")), "supervisors": sups}
        r["outcome"] = "voided"
        if sups:  # one line for the two-person void: "voided by S-1 and S-2"
            _handled(incidents, rid, "voided", " and ".join(str(p) for p in sups), ts)
    elif step == "closed":
        r["closed"] = ts
        if body.get("voided") and r["outcome"] != "voided":
            r["outcome"] = "voided"
        elif r["outcome"] in ("in_progress", "held") and r["net_cents"] is not None:
            r["outcome"] = "settled"


def _supervisor_step(incidents: list[dict[str, Any]], rid: str | None, body: dict[str, Any], ts: str) -> None:
    """Note a ``supervisor`` entry (``body``) against the incidents it handles."""
    action = str(body.get("action") or "")
    who = body.get("supervisor")
    if action == "acknowledge_incident":
        for i in incidents:
            if i["type"] == "incident" and not i["handled_by"]:
                i["handled_by"].append({"action": "acknowledged", "supervisor": who, "ts": ts})
    elif action == "void_requested":
        _handled(incidents, rid, "asked for a void", who, ts)
    elif rid:
        _handled(incidents, rid, action.replace("_", " "), who, ts)
    else:  # a deck registered, a card entered between rounds: the latest incident it answers
        for i in reversed(incidents):
            if i["type"] == "custody_violation":
                i["handled_by"].append({"action": action.replace("_", " "), "supervisor": who, "ts": ts})
                break


def _handled(incidents: list[dict[str, Any]], round_id: str | None, action: str, who: Any, ts: str) -> None:
    """Note ``who`` handled the incidents of round ``round_id`` (``action``: in words)."""
    for i in incidents:
        if round_id is not None and i["round_id"] == round_id:
            entry = {"action": action, "supervisor": who, "ts": ts}
            if entry not in i["handled_by"]:
                i["handled_by"].append(entry)
