"""The table's journal: an append-only, hash-chained record in SQLite that survives power loss.

Every custody and round transition is written here *before* it is acted on
(issue 5; 58 Pa. Code 816a.1: results are recorded before they are posted).
The database runs in WAL mode with ``synchronous=FULL``, so a committed entry
survives a power cut; each entry carries the SHA-256 of the one before, so an
edit, a deletion or a reordering breaks the chain at the first entry touched
(:func:`verify`).

Schema (one table)::

    entries(seq INTEGER PRIMARY KEY,   -- 1, 2, 3 ... without gaps
            ts TEXT,                   -- UTC, ISO 8601
            kind TEXT,                 -- e.g. "custody", "round", "card_read"
            round_id TEXT, deck_id TEXT,
            body TEXT,                 -- canonical JSON of the entry's fields
            prev_hash TEXT, hash TEXT) -- hex SHA-256

``hash = sha256(prev_hash || canonical JSON of [seq, ts, kind, round_id, deck_id, body])``;
the first entry's ``prev_hash`` is 64 zeros.

A deleted *tail* leaves a valid shorter chain, so the journal also keeps its
head — the last entry's ``seq`` and ``hash`` — in a small file beside the
database (``JOURNAL.head``), replaced atomically after every commit.
:func:`verify` checks the chain ends at that head (or past it, by the entry a
crash may have committed before the head file was written).

The journal never holds the order of a shuffled deck: only cards as the shoe
read them, as they were dealt.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

GENESIS = "0" * 64
SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    ts TEXT NOT NULL,
    kind TEXT NOT NULL,
    round_id TEXT,
    deck_id TEXT,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
"""


class JournalError(Exception):
    """The journal cannot be opened or written (disk, permissions, corruption)."""


@dataclass(frozen=True)
class Entry:
    """One journal entry; ``body`` is the decoded JSON object."""

    seq: int
    ts: str
    kind: str
    round_id: str | None
    deck_id: str | None
    body: dict[str, Any]
    prev_hash: str
    hash: str


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def entry_hash(prev_hash: str, seq: int, ts: str, kind: str, round_id: str | None, deck_id: str | None,
               body_json: str) -> str:
    """The chain hash of one entry (see module docstring)."""
    material = prev_hash + _canonical([seq, ts, kind, round_id, deck_id, body_json])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class Journal:
    """An open journal file. Thread-safe; one writer process at a time.

    ``path``: the SQLite file (created with its parent folders if missing).
    ``read_only``: open an existing journal for reading only (appends fail).
    Raises :class:`JournalError` when it cannot be opened or is not a journal.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        db = None
        try:
            if read_only:  # a reader (shuffle-check, reports): never creates or changes a file
                if not self.path.is_file():
                    raise OSError(f"no journal file at {self.path}")
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None,
                                     check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                db.executescript(SCHEMA)
            row = db.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        except (sqlite3.Error, OSError) as exc:
            if db is not None:
                db.close()
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        self._db = db
        self._lock = threading.Lock()
        self._seq, self._hash = (row[0], row[1]) if row else (0, GENESIS)

    @property
    def last_seq(self) -> int:
        """Sequence number of the last entry (0 for an empty journal)."""
        return self._seq

    def append(self, kind: str, *, round_id: str | None = None, deck_id: str | None = None, **body: Any) -> Entry:
        """Write one entry and commit it durably before returning (WAL, FULL sync).

        ``body`` must be JSON-serialisable. Raises :class:`JournalError` if the
        write fails; the caller must then not act on what it meant to record.
        """
        body_json = _canonical(body)
        ts = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")
        with self._lock:
            seq = self._seq + 1
            h = entry_hash(self._hash, seq, ts, kind, round_id, deck_id, body_json)
            try:
                self._db.execute(
                    "INSERT INTO entries (seq, ts, kind, round_id, deck_id, body, prev_hash, hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, ts, kind, round_id, deck_id, body_json, self._hash, h),
                )
            except sqlite3.Error as exc:
                raise JournalError(f"cannot write journal entry {seq} to {self.path}: {exc}") from exc
            entry = Entry(seq, ts, kind, round_id, deck_id, body, self._hash, h)
            self._seq, self._hash = seq, h
            self._write_head()
        return entry

    def _write_head(self) -> None:
        head = head_path(self.path)
        tmp = head.with_name(head.name + ".tmp")
        try:
            with open(tmp, "w") as f:
                json.dump({"seq": self._seq, "hash": self._hash}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, head)
        except OSError as exc:
            raise JournalError(f"cannot write the journal head {head}: {exc}") from exc

    def entries(self, kind: str | None = None, since: int = 0) -> Iterator[Entry]:
        """Entries in sequence order (optionally of one ``kind``, after ``since``)."""
        q = "SELECT seq, ts, kind, round_id, deck_id, body, prev_hash, hash FROM entries WHERE seq > ?"
        args: list[Any] = [since]
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        q += " ORDER BY seq"
        with self._lock:
            rows = self._db.execute(q, args).fetchall()
        for seq, ts, k, rid, did, body, prev, h in rows:
            yield Entry(seq, ts, k, rid, did, json.loads(body), prev, h)

    def last(self, kind: str) -> Entry | None:
        """The most recent entry of ``kind``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, ts, kind, round_id, deck_id, body, prev_hash, hash FROM entries "
                "WHERE kind = ? ORDER BY seq DESC LIMIT 1", (kind,)).fetchone()
        if row is None:
            return None
        seq, ts, k, rid, did, body, prev, h = row
        return Entry(seq, ts, k, rid, did, json.loads(body), prev, h)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :func:`verify`: ``ok``, the number of entries checked, and for a
    broken chain the first bad entry's ``seq`` and the ``reason``."""

    ok: bool
    entries: int
    first_bad: int | None = None
    reason: str = ""


def head_path(path: str | Path) -> Path:
    """The file holding the journal's head (last seq and hash): ``JOURNAL.head``."""
    p = Path(path)
    return p.with_name(p.name + ".head")


def verify(path: str | Path) -> VerifyResult:
    """Check the hash chain of the journal at ``path``, read-only.

    Finds the first entry that was edited (its hash no longer matches), deleted
    (a gap in ``seq`` or a ``prev_hash`` naming a missing entry) or reordered.
    Raises :class:`JournalError` if the file is missing or not a journal.
    """
    p = Path(path)
    if not p.exists():
        raise JournalError(f"no journal at {p}")
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            rows = db.execute(
                "SELECT seq, ts, kind, round_id, deck_id, body, prev_hash, hash FROM entries ORDER BY rowid"
            ).fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise JournalError(f"{p} is not a readable journal: {exc}") from exc
    prev, expected_seq = GENESIS, 1
    for n, (seq, ts, kind, rid, did, body, prev_hash, h) in enumerate(rows, 1):
        if seq != expected_seq:
            what = "missing (deleted)" if seq > expected_seq else "out of order"
            return VerifyResult(False, n - 1, expected_seq, f"entry {expected_seq} is {what}; found {seq}")
        if prev_hash != prev:
            return VerifyResult(False, n - 1, seq, f"entry {seq} does not follow entry {seq - 1} (prev_hash mismatch)")
        if entry_hash(prev_hash, seq, ts, kind, rid, did, body) != h:
            return VerifyResult(False, n - 1, seq, f"entry {seq} was altered (hash mismatch)")
        prev, expected_seq = h, seq + 1
    head = head_path(p)
    if head.exists():
        try:
            anchor = json.loads(head.read_text())
            a_seq, a_hash = int(anchor["seq"]), str(anchor["hash"])
        except (ValueError, KeyError, OSError) as exc:
            return VerifyResult(False, len(rows), None, f"the head file {head} is unreadable: {exc}")
        by_seq = {r[0]: r[7] for r in rows}
        if a_seq > len(rows):
            return VerifyResult(False, len(rows), len(rows) + 1,
                                f"entries {len(rows) + 1}..{a_seq} are missing (deleted): the head says {a_seq}")
        if a_seq and by_seq.get(a_seq) != a_hash:
            return VerifyResult(False, len(rows), a_seq, f"entry {a_seq} does not match the journal head")
        if len(rows) > a_seq + 1:
            return VerifyResult(False, len(rows), a_seq + 2,
                                f"entries after {a_seq + 1} were added behind the journal's back")
    return VerifyResult(True, len(rows))
