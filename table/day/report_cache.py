"""A running table's report reading, kept: the live segment read once, each archived day once per content.

The supervisor's shift page asks the table for its shift's or gaming day's figures
(the ``day_report`` query, :mod:`table.interfaces.day_view`) again and again while
it is open. Counted from scratch, each ask re-read the whole live journal and
decompressed the archived days it needed; this module keeps what was read:

* :class:`LiveFacts`: the live segment's :class:`~table.day.day_report.FactsReader`,
  which reads only the entries committed since the last ask (each entry once). It
  starts again from the file's first entry when the file is not the one it read
  (another inode: the gaming day's rollover started a new segment), when the entry
  it read last is no longer there as it read it (the file was replaced or cut
  back), or when the segment's gaming day changed (a journal kept whole that
  journaled its close).
* :class:`ArchivedDays`: each archived day's facts and record check, keyed by the
  file's content digest (SHA-256). The file is hashed again whenever its identity
  (device, inode, size, modification and change times) differs from when it was
  hashed; an archive replaced or edited in place has another digest, so it is read
  and checked again, never answered from the copy kept.

How it stays honest: what is kept is keyed by what was read (the live entries by
their seq and the last one's content; an archive by its digest), so a kept answer
is the answer a fresh reading of the same bytes gives (``tests/test_report_cache.py``
compares them after every commit, a rollover and an archive replaced). Whether the
bytes themselves hold is the record check's question (:mod:`table.record_check`,
docs/reporting.md "The record first"): ``tablectl report`` and the auditor's
``audit verify`` check the chain from the files every time and never read this
cache; an archived day's own check (:func:`check_day`, its hash chain and signed
checkpoint) is kept with its digest and flags the reply when the day does not hold.
An edit in place of an earlier live entry (the writer holds the live file; any
other writer is an attack) is for the record check to find, as before: this cache
reads what the table committed, as the event stream does.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Iterable

from ..journal import Journal, JournalError, verify
from .day_report import UNREADABLE, FactsReader, JournalFacts, ReportError, read_journal, segment_day, unreadable


class LiveFacts:
    """The live segment's facts, read once: :meth:`catch_up` each ask, then :meth:`facts`.
    Not thread-safe (its owner holds one lock over an ask)."""

    def __init__(self) -> None:
        self._reader: FactsReader | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) of the file read
        self._last: tuple[Any, ...] | None = None  # the last entry read, as read
        #: how many times the segment was read from its first entry (a bench's and a test's figure)
        self.full_reads = 0

    def catch_up(self, journal: Journal) -> tuple[Any, ...]:
        """Read what ``journal`` (the live segment, open read-only) committed since the last
        call. Returns the version of what is kept now: equal versions, equal facts.
        Raises :class:`ReportError` for an entry that does not read."""
        st = os.stat(journal.path)
        here = (st.st_dev, st.st_ino)
        day = segment_day(journal)
        r = self._reader
        if r is None or here != self._file or day != r.day or journal.last_seq < r.last_seq \
                or (r.last_seq and self._entry(journal, r.last_seq) != self._last):
            r = self._reader = FactsReader(journal.table_id, day)
            self._file, self._last = here, None
            self.full_reads += 1
        try:
            upto = journal.last_seq
            if upto > r.last_seq:
                r.read(journal, upto)
                self._last = self._entry(journal, upto)
        except ReportError:
            self._reader = None
            raise
        except UNREADABLE as exc:
            self._reader = None
            raise unreadable(journal, exc) from None
        return (*here, day, r.last_seq, self._last)

    @staticmethod
    def _entry(journal: Journal, seq: int) -> tuple[Any, ...] | None:
        e = next(iter(journal.entries(since=seq - 1, upto=seq)), None)
        return None if e is None else (e.seq, e.ts, e.kind, e.round_id, e.deck_id,
                                       json.dumps(e.body, sort_keys=True, separators=(",", ":")))

    @property
    def day(self) -> date | None:
        """The gaming day of the segment read (None: a journal kept whole, or nothing read)."""
        return self._reader.day if self._reader is not None else None

    def facts(self) -> JournalFacts:
        """A fresh :class:`JournalFacts` of what :meth:`catch_up` read. Raises
        :class:`ReportError` (and forgets what it read: the next ask starts again)."""
        if self._reader is None:
            raise ReportError("the live journal was not read")
        try:
            return self._reader.facts()
        except ReportError:
            self._reader = None
            raise


@dataclass
class ArchivedDay:
    """One archived day as read once: its ``digest`` (SHA-256 of the file, hex), ``facts``
    (None when it does not read), ``status`` of its record check (:func:`check_day`) and
    ``problem`` (why the day does not read or does not hold, or None)."""

    digest: str
    facts: JournalFacts | None
    problem: str | None = None
    status: str = "ok"


def file_digest(path: Path) -> str:
    """SHA-256 of the file at ``path`` (hex). Raises ``OSError``."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def check_day(db: Path, day: str, public_keys: list[Any]) -> tuple[str, str | None]:
    """The record check of one archived day's segment ``db`` (decompressed) filed as
    gaming ``day``: its hash chain and its last signed checkpoint (with ``public_keys``,
    the signature), as ``tablectl audit verify --archive`` checks each day
    (:func:`table.day.segments.verify_chain`), and the day its close entry names.
    Returns (status, problem or None); status as :class:`table.record_check.RecordCheck`."""
    try:
        with Journal(db, read_only=True) as j:
            cp = j.last("checkpoint")
            closes = segment_day(j)
        anchor = cp.body.get("checkpoint") if cp is not None and isinstance(cp.body, dict) else None
        r = verify(db, public_keys=public_keys, anchors=[anchor] if isinstance(anchor, dict) else [])
    except (JournalError, *UNREADABLE) as exc:
        return "unreadable", f"{day}: {exc}"
    if r.status in ("tampered", "unreadable"):
        return r.status, f"{day}: {r.reason}" + (f" (entry {r.first_bad})" if r.first_bad else "")
    if anchor is None:
        # a closed day ends with its signed checkpoint (docs/journal.md): one without any has
        # nothing that vouches for a byte of it (its checkpoint entries unmade by an edit)
        return "unanchored", f"{day}: the archived day holds no checkpoint: nothing signed vouches for its entries"
    if public_keys and r.status != "ok":
        # checked with the table's key, a closed day's record is vouched for to its end by its
        # own last signed checkpoint; anything less is not a record that holds
        return r.status, f"{day}: " + ("; ".join(r.notes) or f"its record is {r.status}")
    if closes is None or closes.isoformat() != day:
        return "misfiled", f"{day}: the archive holds gaming day {closes or '(no close entry)'}: swapped or renamed"
    return r.status, None


class ArchivedDays:
    """Archived days read once per content (:class:`ArchivedDay` by digest), at most
    ``keep`` days kept (the least recently asked dropped first). ``public_keys``: the
    table's, for each day's check. Thread-safe."""

    def __init__(self, public_keys: Iterable[Any] = (), keep: int = 8) -> None:
        self.public_keys = list(public_keys)
        self.keep = keep
        self._days: "collections.OrderedDict[str, ArchivedDay]" = collections.OrderedDict()
        self._digests: dict[Path, tuple[tuple[int, ...], str]] = {}  # path -> (its identity, its digest)
        self._lock = threading.Lock()
        #: how many archived days were decompressed and read (a bench's and a test's figure)
        self.reads = 0

    def digest(self, path: Path) -> str:
        """The content digest of ``path``, hashed again when the file's identity changed."""
        st = os.stat(path)
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._lock:
            kept = self._digests.get(path)
        if kept is not None and kept[0] == ident:
            return kept[1]
        d = file_digest(path)
        with self._lock:
            self._digests[path] = (ident, d)
        return d

    def day(self, path: Path, day: date) -> ArchivedDay:
        """The archived ``day`` at ``path`` (an xz, or a day not compressed yet), read and
        checked once per content. Never raises for a bad archive (its ``problem`` says
        why); ``OSError`` for a file gone."""
        from .archive_files import opened

        digest = self.digest(path)
        with self._lock:
            kept = self._days.get(digest)
            if kept is not None:
                self._days.move_to_end(digest)
                return kept
        try:
            with opened(path) as db:
                status, problem = check_day(db, day.isoformat(), self.public_keys)
                with Journal(db, read_only=True) as j:
                    facts: JournalFacts | None = read_journal(j)
        except (JournalError, ReportError) as exc:
            facts, status, problem = None, "unreadable", f"{path.name}: {exc}"
        self.reads += 1
        out = ArchivedDay(digest, facts, problem, status)
        with self._lock:
            self._days[digest] = out
            while len(self._days) > self.keep:
                self._days.popitem(last=False)
        return out
