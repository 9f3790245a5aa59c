"""Public table events: derived from the journal, numbered per table, sealed (816a.1).

The journal (:mod:`table.journal`) is internal: it holds every card as the shoe
read it, the dealer's included. The public stream is a *pure function of the
journal*: each journal entry yields at most one public event, chosen by the
entry's kind (and, for ``round`` entries, its ``step``) alone, and rendered
from the entry (plus the round's earlier ``card_read`` entries). So an event
replayed from the journal after a reconnect is byte for byte the event that
was sent live, and the numbering never changes.

Sequence numbers
    ``seq`` is the event's position in the table's public stream: 1, 2, 3 ...
    without gaps. It is *not* the journal's entry number (most journal
    entries, e.g. device events and custody snapshots, are not published);
    each event carries that as ``journal_seq`` for auditors. Because
    publication depends only on the entry itself, ``seq`` is recomputed
    identically from the journal by every reader (the controller's process,
    ``tablectl events tail --journal``, a restarted controller): nothing extra
    is persisted and no counter can drift from the record. A reader indexes the
    journal once when it opens it (one pass over the entries' kinds).

Sealing (58 Pa. Code 816a.1: no outcome may be seen before the wager it
decides is final)
    * ``card_dealt`` on the table-wide stream carries where the card went
      (``to``: ``seat1``..``seat7`` or ``dealer``), its ``draw_index`` and back
      colour, never its face. The table-wide stream goes to displays, floor
      systems and MQTT that any seat may see, so a seat's cards are "another
      seat's cards" to every other reader of it.
    * A seat's own cards are published live only on that seat's channel
      (``seat=N`` on :meth:`EventLog.subscribe`, the socket's ``{"seat": N}``):
      the same events with the same numbers, where ``card_dealt`` to seat N
      also carries ``card``.
    * Every seat's cards are published in ``decisions_final``, rendered from
      the journal's ``decisions_done`` entry, written after the last seat
      decided: no wager depends on them any more.
    * The dealer's cards appear only in ``dealer_revealed``, from the journal's
      ``dealer_reveal`` entry, which follows ``decisions_done``.
    * A round held or voided before its decisions never reveals its cards.
    * Custody violations, incidents and supervisor actions are published
      without their details or card names (a duplicate or manually entered
      card may be a sealed one): rule, citation, what and who; card faces in
      free text (a hold or void reason, an incident) are masked as ``??``.

Event (one JSON object; JSON Schema ``docs/schemas/event-v1.schema.json``)::

    {"schema": "threecard.events/1", "seq": 17, "journal_seq": 52,
     "table_id": "pit2-tcp-07", "round_id": "r00001-5a8de940" | null,
     "ts": "2026-11-30T22:26:54.375956+00:00", "type": "card_dealt",
     "data": {"to": "seat1", "seat": 1, "draw_index": 0, "back_colour": "red", "manual": false}}

``ts`` is the journal entry's time (UTC, ISO 8601, microseconds). ``round_id``
is null for table events (``table_opened``, ``table_restarted``, deck
registrations between rounds).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import sqlite3
import threading
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import structlog

from .journal import Entry, JournalError, card_opening, connect, seal_key, ts_text, unb64, unseal
from .rules import kinds
from .sealing import mask_cards as mask

if TYPE_CHECKING:
    from .journal import Journal
    from .keys import TableKey

log = structlog.get_logger("table.events")

#: the schema id carried by every event; the major version is in the name.
SCHEMA = "threecard.events/1"
#: semver of the event schema (``docs/schemas/``): minor = fields/types added.
SCHEMA_VERSION = "1.6.0"  # 1.3.0: bets_closed's seats and wagers; decisions_final's Pair Plus-only seats;
#                             1.4.0: checkpoint v3 (state_sha256: every byte of the checkpoint entry signed);
#                             1.5.0: dealer_revealed's dealer_hand_name ("flush, king-jack-9")
#                             1.6.0: shuffle_committed and shuffle_opened (protocols/SPEC.md 4.2.1)

#: journal ``round`` steps that are published, and the event type each becomes.
ROUND_STEPS = {
    "open": "round_opened",
    "close_bets": "bets_closed",
    "decisions_done": "decisions_final",
    "dealer_reveal": "dealer_revealed",
    "settle": "round_settled",
    "closed": "round_closed",
    "held": "round_held",
    "voided": "round_voided",
}
#: other journal kinds that are published, and the event type each becomes.
KINDS = {
    "table_open": "table_opened",
    "restart": "table_restarted",
    "card_read": "card_dealt",
    "violation": "custody_violation",
    "incident": "incident",
    "supervisor": "supervisor_action",
    "checkpoint": "checkpoint",
    "shuffle_commitment": "shuffle_committed",
    "shuffle_opening": "shuffle_opened",
}
#: every public event type, in the order a round produces them.
EVENT_TYPES = ("table_opened", "table_restarted", "round_opened", "bets_closed", "card_dealt",
               "decisions_final", "dealer_revealed", "round_settled", "round_closed", "round_held",
               "round_voided", "custody_violation", "incident", "supervisor_action", "checkpoint",
               "shuffle_committed", "shuffle_opened")

_KIND_SQL = "kind IN ({})".format(",".join(f"'{k}'" for k in ("round", *KINDS)))


class EventStreamError(Exception):
    """A request to the event stream cannot be served (bad ``resume_from``, unreadable journal)."""


def is_public(kind: str, step: str | None) -> bool:
    """Whether a journal entry of ``kind`` (and ``round`` ``step``) yields a public event."""
    return kind in KINDS or (kind == "round" and step in ROUND_STEPS)


def public_count(db: sqlite3.Connection) -> int:
    """The public events the entries of the journal ``db`` yield, with those of the
    gaming days before it (``previous.events`` of a segment's first entry): the stream's
    head at its end. A gaming day's next segment starts counting from it
    (:func:`table.day.segments.roll`), so event seqs go on across days and restarts."""
    out = _events_before(db)
    for kind, step in db.execute(f"SELECT kind, json_extract(body, '$.step') FROM entries WHERE {_KIND_SQL}"):
        out += is_public(kind, step)
    return out


def _events_before(db: sqlite3.Connection) -> int:
    """``previous.events`` of a gaming day's segment (0 for a journal from entry 1)."""
    try:
        row = db.execute("SELECT kind, json_extract(body, '$.previous.events') FROM entries ORDER BY seq LIMIT 1"
                         ).fetchone()
    except sqlite3.Error:
        return 0
    return int(row[1]) if row and row[0] == "segment" and isinstance(row[1], int) else 0


def _hex(commit: Any) -> Any:
    """A journaled commitment (32 bytes, base64url) as the stream gives it (64 hex digits)."""
    try:
        return unb64(commit).hex()
    except ValueError:
        return commit


def _to(target: Any) -> str | None:
    if target is None:
        return None
    return "dealer" if int(target) == 0 else f"seat{int(target)}"


@dataclass(frozen=True)
class Derived:
    """One public event: ``event`` (the table-wide JSON object) and, for a card dealt to
    a seat, ``seat_card`` = (seat, card) that only that seat's channel may add."""

    event: dict[str, Any]
    seat_card: tuple[int, str] | None = None

    def render(self, seat: int | None = None) -> dict[str, Any]:
        """The event as channel ``seat`` sees it (None: the table-wide stream)."""
        if seat is not None and self.seat_card is not None and self.seat_card[0] == seat:
            return {**self.event, "data": {**self.event["data"], "card": self.seat_card[1]}}
        return self.event

    @property
    def seq(self) -> int:
        return self.event["seq"]


#: ``opener(journal_seq, round_id, body)``: the sealed fields of a card entry, opened with
#: the table key (the controller's own process), or None without the key
Opener = Callable[[int, "str | None", dict[str, Any]], "dict[str, Any] | None"]


def openings(table_id: str, round_id: str | None, seal_key_hex: str | None,
             cards: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The openings of a round's card commitments, from its card entries (``(journal seq,
    body)``) and the round seal key its reveal or void disclosed: ``[{"draw_index",
    "to", "card", "nonce"}]`` for every card that was committed to."""
    if not seal_key_hex:
        return []
    try:
        k = bytes.fromhex(seal_key_hex)
    except ValueError:
        return []
    out = []
    for jseq, body in cards:
        if "commit" not in body or "sealed" not in body:
            continue
        try:
            fields = card_opening(k, table_id, Entry(jseq, "", "card_read", round_id, None, body))
        except JournalError:
            continue  # cannot happen for the controller's own entries; never a crash for a reader
        out.append({"draw_index": body.get("draw_index"), "to": _to(body.get("to")), "card": fields.get("card"),
                    "nonce": fields.get("nonce")})
    return out


def _every_wager(wagers: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Each seat's wagers as the stream carries them: every kind, 0 where none was placed,
    in seat order."""
    zero = {k: 0 for k in kinds.keys()}
    return {s: {**zero, **w}
            for s, w in sorted(wagers.items(), key=lambda kv: int(kv[0]))}

# long: one branch per published event type, in the order of the event schema's table (docs/integration.md)
def derive(seq: int, journal_seq: int, ts: str, kind: str, round_id: str | None, body: dict[str, Any],
           table_id: str, round_cards: Callable[[str], list[tuple[int, dict[str, Any]]]],
           opener: Opener | None = None, journal_table_id: str | None = None) -> Derived:
    """The public event of one publishable journal entry (see the module docstring).

    ``round_cards(round_id)`` returns the card entries of that round so far
    (``(journal seq, body)``), for the openings a reveal or void publishes.
    ``opener`` opens a card's sealed face for that seat's own channel (without
    it no seat channel carries a card before ``decisions_final``).
    ``journal_table_id``: the table id the journal binds its seals to (default
    ``table_id``). Raises ``KeyError`` for an entry that is not publishable
    (:func:`is_public`).
    """
    step = body.get("step")
    etype = ROUND_STEPS[step] if kind == "round" else KINDS[kind]
    jtid = journal_table_id or table_id
    data: dict[str, Any]
    seat_card = None
    if etype == "round_opened":
        wagers = _every_wager(body.get("wagers", {}))
        data = {"number": body.get("number"), "seats": sorted(int(s) for s in wagers), "wagers": wagers}
    elif etype == "bets_closed":
        data = {"number": body.get("number")}
        if "wagers" in body:  # the bets as frozen (816a.1): published before the first card
            wagers = _every_wager(body["wagers"])
            data["seats"] = [int(s) for s in wagers]
            data["wagers"] = wagers
    elif etype == "card_dealt":
        to = body.get("to")
        data = {"to": _to(to), "draw_index": body.get("draw_index"), "back_colour": body.get("back_colour"),
                "manual": bool(body.get("manual", False))}
        if body.get("commit"):  # base64url in the journal (format 3), hex on the stream
            data["commitment"] = _hex(body["commit"])
        if to:
            data["seat"] = int(to)
            fields = opener(journal_seq, round_id, body) if opener is not None else None
            if fields and "card" in fields:
                seat_card = (int(to), fields["card"])
        if body.get("late") or body.get("replayed"):
            data["after_restart"] = True
    elif etype == "decisions_final":
        hands, decisions = body.get("hands", {}), body.get("decisions", {})
        # Every seat in play, a Pair Plus-only seat too (no decision: 649a.7, null since 1.3.0).
        seats = sorted({str(s) for s in decisions} | {str(s) for s in hands}, key=int)
        data = {"number": body.get("number"),
                "seats": {s: {"decision": decisions.get(s), "cards": list(hands.get(s, []))} for s in seats}}
    elif etype == "dealer_revealed":
        data = {"number": body.get("number"), "dealer_hand": body["dealer_hand"],
                "dealer_qualifies": bool(body["dealer_qualifies"]),
                "openings": openings(jtid, round_id, body.get("seal_key"), round_cards(round_id or ""))}
        if isinstance(body.get("dealer_hand_name"), str):  # since 1.5.0 (older journals have none)
            data["dealer_hand_name"] = body["dealer_hand_name"]
    elif etype == "round_settled":
        data = {"number": body.get("number"), "results": body.get("results", {}),
                "net_cents": {s: r.get("net") for s, r in body.get("results", {}).items()}}
    elif etype == "round_closed":
        data = {"number": body.get("number"), "voided": bool(body.get("voided", False))}
    elif etype == "round_held":
        data = {"number": body.get("number"), "reason": mask(body.get("reason")),
                "settled": bool(body.get("settled", False))}
    elif etype == "round_voided":
        data = {"reason": mask(body.get("reason")), "supervisor": body.get("supervisor"),
                "wagers": body.get("wagers", "returned")}
        if "returned_cents" in body:
            data["returned_cents"] = body["returned_cents"]
        if body.get("seal_key"):
            data["openings"] = openings(jtid, round_id, body["seal_key"], round_cards(round_id or ""))
    elif etype == "table_opened":
        data = {"places": body.get("places", {})}
    elif etype == "table_restarted":
        data = {"rounds_played": body.get("rounds_played"), "places": body.get("places", {})}
    elif etype == "custody_violation":  # no detail: it can name a card (816a.1)
        data = {"rule": body.get("rule"), "citation": body.get("citation")}
    elif etype == "incident":  # no message: it can carry a card
        data = {"what": mask(body.get("what"))}
    elif etype == "checkpoint":  # the signed checkpoint: an anchor off the journal's own files
        data = dict(body.get("checkpoint", {}))
    elif etype == "shuffle_committed":  # the shuffler's commitment at the count: no card (SPEC 4.2.1)
        data = {"deck_id": body.get("deck"), "back_colour": body.get("back_colour"),
                "commitment": body.get("commitment")}
    elif etype == "shuffle_opened":  # journaled after the reveal: the round's cards are public (816a.1)
        data = {"deck_id": body.get("deck"), **{k: body.get(k) for k in ("back_colour", "commitment", "salt", "order",
                                                                         "cards_checked", "matched")}}
    else:  # supervisor_action: no card (a confirm_card may be a dealer card)
        data = {"action": body.get("action"), "supervisor": body.get("supervisor")}
        for k in ("new_deck_id", "replaces", "draw_index"):
            if k in body:
                data[k] = body[k]
    event = {"schema": SCHEMA, "seq": seq, "journal_seq": journal_seq, "table_id": table_id,
             "round_id": round_id, "ts": ts, "type": etype, "data": data}
    return Derived(event, seat_card)


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise EventStreamError(f"no journal at {path}")
    try:
        db = connect(path, check_same_thread=False)
        db.execute("SELECT 1 FROM entries LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise EventStreamError(f"{path} is not a readable journal: {exc}") from exc
    return db


def _connect_file(path: Path) -> tuple[sqlite3.Connection, int]:
    """:func:`_connect`, and the inode of the file it opened (stat before and after: a
    rollover in between is seen and the new file opened)."""
    for _ in range(5):
        before = os.stat(path).st_ino if path.exists() else None
        db = _connect(path)
        try:
            after = os.stat(path).st_ino
        except OSError:
            after = None
        if before == after and after is not None:
            return db, after
        db.close()
    raise EventStreamError(f"{path} keeps being replaced while it is opened")


class _Deriver:
    """Walks journal rows in order and derives public events, keeping the card entries
    of the round it is in (a walk starts at a round's ``open`` entry)."""

    def __init__(self, table_id: str, db: sqlite3.Connection, opener: Opener | None = None) -> None:
        self.table_id = table_id
        self.db = db
        self.opener = opener
        self.journal_table_id = _journal_table_id(db) or table_id
        self.cards: dict[str, list[tuple[int, dict[str, Any]]]] = {}

    def _round_cards(self, round_id: str) -> list[tuple[int, dict[str, Any]]]:
        if round_id not in self.cards:  # a walk that began mid-round (not expected): ask the journal
            return [(seq, json.loads(body)) for seq, body in self.db.execute(
                "SELECT seq, body FROM entries WHERE kind='card_read' AND round_id=? ORDER BY seq", (round_id,))]
        return self.cards[round_id]

    def feed(self, seq: int, jseq: int, ts: str, kind: str, rid: str | None, body: dict[str, Any]) -> Derived:
        step = body.get("step")
        if kind == "round" and step == "open" and rid:
            self.cards = {rid: []}  # one round at a time: forget the previous one's cards
        elif kind == "card_read" and rid:
            self.cards.setdefault(rid, []).append((jseq, body))
        return derive(seq, jseq, ts, kind, rid, body, self.table_id, self._round_cards, self.opener,
                      self.journal_table_id)


def _opener(key: "TableKey", journal_table_id: str) -> Opener:
    """Opens a card entry's sealed fields with the table key (for a seat's own channel)."""
    keys: dict[str | None, bytes] = {}

    def open_(jseq: int, round_id: str | None, body: dict[str, Any]) -> dict[str, Any] | None:
        if "sealed" not in body:
            return None
        k = keys.get(round_id)
        if k is None:
            if len(keys) > 16:
                keys.clear()
            k = keys[round_id] = seal_key(key, journal_table_id, round_id)
        try:
            return unseal(k, journal_table_id, Entry(jseq, "", "card_read", round_id, None, body))
        except JournalError:
            return None

    return open_


def journal_table_id(path: str | Path) -> str | None:
    """The table id a journal file's metadata names (the id its commitments are bound
    to), or None when it names none. Raises :class:`EventStreamError` when the file is
    missing or not a readable journal."""
    db = _connect(Path(path))
    try:
        return _journal_table_id(db)
    finally:
        db.close()


def _journal_table_id(db: sqlite3.Connection) -> str | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE key='table_id'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


class Subscription:
    """A live feed of events after ``after`` (replayed first, then live), for one channel.

    Iterate it, or call :meth:`get`. ``overflowed`` is set (and the feed ends)
    when the consumer fell more than ``maxsize`` events behind: resume from the
    last ``seq`` it saw. :meth:`close` ends it.
    """

    def __init__(self, log_: "EventLog", after: int, seat: int | None, maxsize: int) -> None:
        self._log = log_
        self.after = after
        self.seat = seat
        self.overflowed = False
        self.closed = False
        self._q: queue.Queue[Derived | None] = queue.Queue(maxsize)
        self._replay: Iterator[dict[str, Any]] | None = None
        self.last_seq = after
        self.head = after  # the stream's head when it was made

    def _push(self, d: Derived) -> None:
        try:
            self._q.put_nowait(d)
        except queue.Full:
            self.overflowed = True
            self._log._unsubscribe(self)

    def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event dict, or None when nothing came within ``timeout`` s (None:
        wait). Raises ``EOFError`` once closed or overflowed and drained."""
        if self._replay is not None:
            nxt = next(self._replay, None)
            if nxt is not None:
                self.last_seq = nxt["seq"]
                return nxt
            self._replay = None
        if self.overflowed and self._q.empty():
            raise EOFError("consumer fell behind; resume from last_seq")
        try:
            d = self._q.get(timeout=timeout)
        except queue.Empty:
            if self.closed or self.overflowed:
                raise EOFError("subscription closed") from None
            return None
        if d is None:
            raise EOFError("subscription closed")
        if d.seq <= self.last_seq:  # already sent by the replay
            return self.get(timeout)
        self.last_seq = d.seq
        return d.render(self.seat)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            try:
                ev = self.get(0.2)
            except EOFError:
                return
            if ev is not None:
                yield ev

    def close(self) -> None:
        """End the subscription (its replay's journal connection is closed too)."""
        self.closed = True
        self._log._unsubscribe(self)
        if self._replay is not None:
            try:
                self._replay.close()  # type: ignore[attr-defined]
            except ValueError:  # running in the consumer's thread: it ends there
                pass
        try:
            self._q.put_nowait(None)
        except queue.Full:
            pass


class EventLog:
    """The public event stream of one table, derived from its journal.

    ``journal_path``: the SQLite journal the controller writes (opened here
    read-only, on a connection of its own, so readers never delay the
    controller's writes). ``table_id``: the table's id (config ``table.id``).
    ``journal``: the controller's open :class:`~table.journal.Journal`, in the
    controller's own process: the live stream is then fed each entry as it
    commits, from memory (:meth:`~table.journal.Journal.on_commit`), and the file
    is read only to index it at the start and to replay history to a client
    that resumes from an older ``seq``. Without it (another process,
    ``tablectl events tail --journal``) the file is followed: ``poll_s`` is how
    often new entries are looked for when nobody calls :meth:`notify`.
    ``archive``: the folder of archived gaming days (``[journal] archive``): a replay
    or a subscription from a seq before the live segment reads on from the day
    before it (its archive, decompressed once), so a client or the MQTT publisher
    behind at the day's close resumes without a gap; without it such a seq is
    refused. Followed as a file, the journal's path is watched for the next day's
    segment taking its place (the rollover renames it in): the stream goes on there.
    Raises :class:`EventStreamError` when the journal cannot be read. Start with
    :meth:`start`, stop with :meth:`close` (also a context manager).
    """

    #: entries held for the pump before it falls back to reading the file (it fell behind)
    MAX_FED = 50_000

    def __init__(self, journal_path: str | Path, table_id: str, *, poll_s: float = 0.05,
                 key: "TableKey | None" = None, journal: "Journal | None" = None,
                 archive: str | Path | None = None) -> None:
        self.path = Path(journal_path)
        self.table_id = table_id
        self.poll_s = poll_s
        self.archive = Path(archive) if archive is not None else None
        self._key = key
        self._past: "EventLog | None" = None  # the gaming day before the live segment, once asked for
        self._db, self._ino = _connect_file(self.path)
        self._opener = _opener(key, _journal_table_id(self._db) or table_id) if key is not None else None
        self._lock = threading.Lock()
        self._wake = threading.Condition()
        # Set by notify(), cleared by the pump before it reads: a notify that comes
        # while the pump is reading is not lost (the pump reads again at once
        # instead of waiting poll_s for the next look).
        self._dirty = False
        self._subs: list[Subscription] = []
        self._listeners: list[Callable[[Derived], None]] = []
        self._count = 0          # events so far (= head seq)
        self._last_entry = 0     # journal seq read up to
        # Anchors: (event seq before a round's open, journal seq before it); a replay
        # starts from the anchor at or before the wanted seq, with a fresh deriver.
        self._anchor_ev = array("q", [0])
        self._anchor_j = array("q", [0])
        self._deriver = _Deriver(table_id, self._db, self._opener)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._journal = journal
        self._fed: collections.deque[Entry] = collections.deque()  # committed, not yet published
        self._fed_lost = False  # the pump fell behind MAX_FED: read the file once to catch up
        if journal is not None:
            journal.on_commit(self._accept)  # before the index: nothing committed in between is missed
        self._index()

    # -- reading the journal -------------------------------------------------------------

    def _rows(self, db: sqlite3.Connection, after_entry: int, limit: int = 2000) -> list[tuple]:
        rows = db.execute(f"SELECT seq, ts, kind, round_id, body FROM entries WHERE seq > ? AND {_KIND_SQL} "
                          "ORDER BY seq LIMIT ?", (after_entry, limit)).fetchall()
        return [(seq, ts_text(ts), kind, rid, body) for seq, ts, kind, rid, body in rows]

    def _index(self) -> None:
        """Count the published events already in the journal and anchor each round."""
        q = (f"SELECT seq, kind, json_extract(body, '$.step') FROM entries WHERE seq <= ? AND {_KIND_SQL} "
             "ORDER BY seq")
        last = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM entries").fetchone()[0]
        first = self._db.execute("SELECT COALESCE(MIN(seq), 1) FROM entries").fetchone()[0]
        # A gaming day's segment: its events are numbered on from the days before (in the archive).
        self._count = self._anchor_ev[0] = _events_before(self._db)
        self._anchor_j[0] = first - 1
        for jseq, kind, step in self._db.execute(q, (last,)):
            if not is_public(kind, step):
                continue
            if kind == "round" and step == "open":
                self._anchor_ev.append(self._count)
                self._anchor_j.append(jseq - 1)
            self._count += 1
        self._last_entry = last
        # The deriver of the live pump needs the current round's cards.
        start = self._anchor_j[-1]
        self._deriver = _Deriver(self.table_id, self._db, self._opener)
        n = self._anchor_ev[-1]
        for jseq, ts, kind, rid, body in self._db.execute(
                f"SELECT seq, ts, kind, round_id, body FROM entries WHERE seq > ? AND seq <= ? AND {_KIND_SQL} "
                "ORDER BY seq", (start, last)):
            b = json.loads(body)
            if is_public(kind, b.get("step")):
                n += 1
                self._deriver.feed(n, jseq, ts_text(ts), kind, rid, b)

    @property
    def head(self) -> int:
        """The seq of the last event published so far (0: none)."""
        with self._lock:
            return self._count

    def replay(self, after: int = 0, upto: int | None = None, seat: int | None = None) -> Iterator[dict[str, Any]]:
        """Events with ``after < seq <= upto`` (``upto`` None: the head now), from the
        journal, as channel ``seat`` sees them. Raises :class:`EventStreamError` when
        ``after`` is negative or beyond the head."""
        with self._lock:
            head = self._count
            upto = head if upto is None else min(upto, head)
            if after < 0 or after > head:
                raise EventStreamError(f"resume_from {after} is outside the stream (0..{head})")
            if after == 0:  # from the start: of what the journal holds (a segment: its gaming day)
                after = self._anchor_ev[0]
            if after < self._anchor_ev[0]:
                if self.archive is None:
                    raise EventStreamError(f"resume_from {after} is before this gaming day's segment (its events "
                                           f"start after {self._anchor_ev[0]}; older days are in the archive)")
                start_ev, start_j = self._anchor_ev[0], self._anchor_j[0]
            else:
                i = bisect_right(self._anchor_ev, after) - 1
                return self._replay(self._anchor_ev[i], self._anchor_j[i], after, upto, seat)
        past = self._previous(start_ev)
        return self._across(past.replay(after, min(upto, start_ev), seat),
                            self._replay(start_ev, start_j, start_ev, upto, seat))

    @staticmethod
    def _across(*parts: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for part in parts:
            yield from part

    def _previous(self, start_ev: int) -> "EventLog":
        """The stream of the gaming day before the live segment, read from its archive
        (built once; again after the next rollover). ``start_ev``: the event seq the live
        segment's events start after, where that day's must end. Raises
        :class:`EventStreamError` when the archive is missing, unreadable or ends elsewhere."""
        from .day import archive_files

        with self._lock:
            past = self._past
        if past is not None and past.head == start_ev:
            return past
        db, _ = _connect_file(self.path)
        try:
            prev = archive_files.previous_archive(db, self.archive)
        finally:
            db.close()
        if prev is None:
            raise EventStreamError(f"the events before {start_ev} are in the gaming day before this segment, whose "
                                   f"archive is not in {self.archive}")
        try:
            past = EventLog(archive_files.decompressed(prev), self.table_id, key=self._key, archive=self.archive)
        except (OSError, archive_files.ArchiveError) as exc:
            raise EventStreamError(f"{prev}: {exc}") from None
        if past.head != start_ev:
            past.close()
            raise EventStreamError(f"{prev} ends at event {past.head}, not at {start_ev} where {self.path} goes on")
        with self._lock:
            old, self._past = self._past, past
        if old is not None:
            old.close()
        return past

    def _replay(self, ev_seq: int, jseq: int, after: int, upto: int, seat: int | None) -> Iterator[dict[str, Any]]:
        if upto <= after:
            return
        db = _connect(self.path)
        try:
            deriver = _Deriver(self.table_id, db, self._opener)
            while True:
                rows = self._rows(db, jseq)
                if not rows:
                    return
                for j, ts, kind, rid, body in rows:
                    jseq = j
                    b = json.loads(body)
                    if not is_public(kind, b.get("step")):
                        continue
                    ev_seq += 1
                    d = deriver.feed(ev_seq, j, ts, kind, rid, b)
                    if ev_seq > after:
                        yield d.render(seat)
                    if ev_seq >= upto:
                        return
        finally:
            db.close()

    # -- live ------------------------------------------------------------------------------

    def start(self) -> "EventLog":
        """Start following the journal (a thread)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._pump, name="event-log", daemon=True)
            self._thread.start()
        return self

    def notify(self, *_: Any) -> None:
        """Look for new journal entries now (thread-safe; pass it to ``TableController.subscribe``)."""
        with self._wake:
            self._dirty = True
            self._wake.notify_all()

    def _accept(self, entries: list[Entry]) -> None:
        """The journal's commit listener: hold what was just committed for the pump (in
        the writer's thread: only a list append and a wake-up)."""
        with self._wake:
            if len(self._fed) + len(entries) > self.MAX_FED:
                self._fed.clear()  # all of it is in the file: the pump reads it from there once
                self._fed_lost = True
            else:
                self._fed.extend(entries)
            self._dirty = True
            self._wake.notify_all()

    def poll(self) -> int:
        """Publish the events of new journal entries; returns how many. Fed by the
        journal (``journal`` given): what it committed, from memory; else (or to
        catch up after falling behind) what the file holds past the last entry read."""
        if self._journal is None:
            return self._poll_file()
        n = 0
        while True:
            with self._wake:
                lost, self._fed_lost = self._fed_lost, False
                batch = list(self._fed)
                self._fed.clear()
            if lost:
                n += self._poll_file()
            if not batch:
                return n
            for e in batch:
                if e.kind == "segment" and "open" in e.body:
                    self._next_segment()  # the journal's file is the next gaming day's now
                if e.seq <= self._last_entry:
                    continue  # indexed or read from the file already
                if e.seq != self._last_entry + 1:  # cannot happen: catch up from the file, in order
                    log.error("event_log_gap", expected=self._last_entry + 1, got=e.seq)
                    n += self._poll_file()
                    if e.seq <= self._last_entry:
                        continue
                body = json.loads(e.body_json) if e.body_json is not None else e.body  # a copy of its own
                n += self._publish(e.seq, e.ts, e.kind, e.round_id, body)

    def _next_segment(self) -> None:
        """Read the journal's file again after a gaming day's rollover put the next day's
        segment in its place (table/day/segments.py): the live events go on; a replay reaches
        back to the new segment's first entry (older days are in the archive)."""
        db, ino = _connect_file(self.path)
        with self._lock:
            old, self._db, self._ino = self._db, db, ino
            self._deriver = _Deriver(self.table_id, db, self._opener)
            self._anchor_ev, self._anchor_j = array("q", [self._count]), array("q", [self._last_entry])
            past, self._past = self._past, None  # the day before is now the one just closed
        with contextlib.suppress(sqlite3.Error):
            old.close()
        if past is not None:
            past.close()

    def _replaced(self) -> bool:
        """Whether another file is at the journal's path now (the next gaming day's segment)."""
        try:
            return os.stat(self.path).st_ino != self._ino
        except OSError:
            return False

    def _poll_file(self) -> int:
        n = 0
        while True:
            rows = self._rows(self._db, self._last_entry)
            if not rows:
                # Followed as a file: once the old segment is read to its end, go on in the
                # next day's (fed by the journal, its segment entry says so: poll()).
                if self._journal is None and self._replaced():
                    self._next_segment()
                    continue
                return n
            for jseq, ts, kind, rid, body in rows:
                n += self._publish(jseq, ts, kind, rid, json.loads(body))

    def _publish(self, jseq: int, ts: str, kind: str, rid: str | None, b: dict[str, Any]) -> int:
        """Derive and hand out the event of entry ``jseq`` (if it has one); 1 if it did."""
        if not is_public(kind, b.get("step")):
            with self._lock:
                self._last_entry = jseq
            return 0
        with self._lock:
            if kind == "round" and b.get("step") == "open":
                self._anchor_ev.append(self._count)
                self._anchor_j.append(jseq - 1)
            self._count += 1
            d = self._deriver.feed(self._count, jseq, ts, kind, rid, b)
            self._last_entry = jseq
            subs = list(self._subs)
            listeners = list(self._listeners)
        for s in subs:
            s._push(d)
        for cb in listeners:
            try:
                cb(d)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the stream
                log.exception("event_listener_failed", seq=d.seq)
        return 1

    def _pump(self) -> None:
        # Fed by the journal, the pump has nothing to look for until a commit or a notify
        # wakes it: it waits with no timeout (an idle table's threads sleep). Following a
        # file another process writes, it looks every poll_s.
        wait_s = None if self._journal is not None else self.poll_s
        while not self._stop.is_set():
            with self._wake:
                self._dirty = False
            try:
                self.poll()
            except sqlite3.Error as exc:
                log.error("event_log_read_failed", error=str(exc))
            with self._wake:
                if not self._stop.is_set() and not self._dirty:
                    self._wake.wait(wait_s)

    def subscribe(self, after: int | None = None, *, seat: int | None = None, maxsize: int = 10_000) -> Subscription:
        """A :class:`Subscription` to events with seq > ``after`` (None: from now on),
        replayed from the journal up to the head, then live, without gaps or
        repeats. ``seat``: that seat's channel (its own cards live, 816a.1); None:
        the table-wide stream. Raises :class:`EventStreamError` for an ``after``
        outside 0..head or a seat outside 1..7."""
        if seat is not None and not 1 <= seat <= 7:
            raise EventStreamError(f"seat must be 1..7, got {seat}")
        with self._lock:
            head = self._count
            start = head if after is None else after
            if start < 0 or start > head:
                raise EventStreamError(f"resume_from {start} is outside the stream (0..{head})")
            if start == 0:
                start = self._anchor_ev[0]
            if start < self._anchor_ev[0] and self.archive is None:
                raise EventStreamError(f"resume_from {start} is before this gaming day's segment (its events "
                                       f"start after {self._anchor_ev[0]}; older days are in the archive)")
            sub = Subscription(self, start, seat, maxsize)
            sub.head = head
            self._subs.append(sub)
        if start < head:
            sub._replay = self.replay(start, head, seat)
        return sub

    def add_listener(self, callback: Callable[[Derived], None]) -> None:
        """Call ``callback(derived)`` in the pump thread for each new live event."""
        with self._lock:
            self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[Derived], None]) -> None:
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def catch_up(self, timeout_s: float = 5.0) -> int:
        """Publish every entry the journal holds now (waking the pump, or reading in this
        thread when not started); returns the head. Raises ``TimeoutError``."""
        import time

        if self._journal is not None:
            target = self._journal.last_seq  # what it committed so far (every kind: the pump reads each)
        else:
            with self._lock:
                target = self._db.execute(f"SELECT COALESCE(MAX(seq), 0) FROM entries WHERE {_KIND_SQL}"
                                          ).fetchone()[0]
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if self._last_entry >= target:
                    return self._count
            if self._thread is None:
                self.poll()
                continue
            if time.monotonic() > deadline:
                raise TimeoutError(f"the event log did not reach journal entry {target} within {timeout_s:g} s")
            self.notify()
            time.sleep(0.005)

    def wait_for(self, seq: int, timeout_s: float) -> bool:
        """Wait until the head reaches ``seq`` (polling the journal); True if it did."""
        import time

        deadline = time.monotonic() + timeout_s
        while self.head < seq:
            if time.monotonic() > deadline:
                return False
            if self._thread is None:
                self.poll()
            time.sleep(0.01)
        return True

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def close(self) -> None:
        """Stop following, end every subscription, close the journal connection."""
        if self._journal is not None:
            self._journal.remove_listener(self._accept)
        self._stop.set()
        self.notify()
        if self._thread is not None:
            self._thread.join(5)
        for s in list(self._subs):
            s.close()
        with self._lock:
            self._db.close()
            past, self._past = self._past, None
        if past is not None:
            past.close()

    def __enter__(self) -> "EventLog":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
