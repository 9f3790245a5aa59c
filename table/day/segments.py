"""Gaming-day segments of the journal, their archives, the chain across days, retention.

The live journal (``JOURNAL``, e.g. ``journal.sqlite3``) holds one gaming day
(``[gaming_day] start_hour``, ``timezone``: COMAR 36.05.03.25 and K.A.R.
112-108-51 ask for figures by gaming day). At the day's close the controller
ends it with a ``segment`` entry ``{"close": day, "next": next_day}`` and a
signed checkpoint (one transaction), then :func:`roll`:

1. folds the WAL in and closes the file;
2. writes ``ARCHIVE/DAY.journal.sqlite3``, the day not compressed yet (the
   segment ``VACUUM``-ed into a temporary SQLite file, fsynced, renamed, the
   folder fsynced);
3. checks it holds the segment: the same entries, ending at the same entry with
   the same MAC (the full check, below, is off the round's path);
4. writes the next day's segment to ``JOURNAL.next``: its first entry (kind
   ``segment``) names the day closed (``previous``: its last entry's seq and chain
   hash, its last signed checkpoint, the day and the archive's name) and a
   checkpoint signs it with the same recovery state;
5. only then removes the closed segment's ``-wal``/``-shm`` and renames
   ``JOURNAL.next`` over ``JOURNAL`` (and its head file), fsyncing the folder.

The table deals on at once. Off the round's path (:func:`compress_pending`, a
thread of its own at a lower CPU priority) the day is then checked in full (it
verifies, :func:`table.journal.verify`, with the table key's public half, and
its last entry is the signed checkpoint), compressed with xz to
``ARCHIVE/DAY.journal.xz`` (a temporary name, fsynced, renamed, the folder
fsynced), the xz checked to decompress to the same bytes, and only then the
``.journal.sqlite3`` removed. Every reader takes a day in either form
(:func:`table.day.archive_files.existing`).

A SIGKILL anywhere leaves either the closed segment in place (steps 1-4; a
restart finds its ``close`` entry and its checkpoint at the end and does the
rollover again from step 2: :func:`finish`) or the new one (after 5), and a day
not compressed yet is compressed after the restart (:func:`finish`). Nothing is
removed before the file that holds it in its place has been checked.

:func:`verify_chain` checks a folder of archived days (and the live segment)
as one chain; :func:`prune` removes archives past their retention only when the
floor's notary holds a checkpoint at or after their end. ``docs/journal.md``
("Gaming days and archives") is the reference.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import json
import lzma
import os
import re
import shutil
import sqlite3
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable, Iterator

import structlog

from .. import kill_points
from ..journal import (SEGMENT_KIND, Journal, JournalError, VerifyResult, connect, decode_body, head_path,
                       verify)
from .archive_files import (ARCHIVE_RE, MAX_COPIES, MAX_SEGMENT_BYTES, STAGED_RE, ArchiveError,  # noqa: F401
                            archive_name, archived_days, decompressed, existing, opened, previous_archive,
                            staged_of)

log = structlog.get_logger("table.day.segments")

#: xz preset: 9 with the extreme flag (a day's archive is written once)
XZ_PRESET = 9 | lzma.PRESET_EXTREME
#: crash tests only: the step of :func:`roll` at which the process SIGKILLs itself (table/kill_points.py)
KILL_ENV = kill_points.KILL_ENV
#: ``audit verify --archive`` statuses beyond :data:`table.journal.STATUSES`, by severity
CHAIN_ORDER = ("tampered", "unreadable", "gap", "misfiled", "unanchored", "unsigned", "ok")


def next_path(path: str | Path) -> Path:
    """Where :func:`roll` writes the next day's segment before it replaces ``path``."""
    p = Path(path)
    return p.with_name(p.name + ".next")


def _step(name: str) -> None:
    """A point of the rollover a crash test may kill the process at (``KILL_ENV``)."""
    kill_points.reached(name)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def closing(journal: Journal) -> dict[str, Any] | None:
    """The ``close`` body (``{"close": day, "next": next_day}``) when ``journal`` ends with
    its day's close (that entry, then the signed checkpoint): a rollover to finish."""
    if not journal.last_seq:
        return None
    tail = list(journal.entries(since=journal.last_seq - 2))
    if len(tail) == 2 and tail[0].kind == SEGMENT_KIND and "close" in tail[0].body and tail[1].kind == "checkpoint":
        return dict(tail[0].body)
    return None


def carried_procedures(journal: Journal, kind: str = "gaming_day") -> list[dict[str, Any]]:
    """The people's procedures the next day's segment must carry for the table's state
    (open or closed, the shift, the slip numbers, the last inventory): those from the
    last ``open`` or ``close`` on, of what this segment carried and what it holds."""
    opening = journal.segment
    bodies = list(opening.body.get("carried", {}).get(kind, [])) if opening is not None else []
    bodies += [e.body for e in journal.entries(kind)]
    start = max((i for i, b in enumerate(bodies) if b.get("procedure") in ("open", "close")), default=0)
    return bodies[start:]


def write_staged(src: Path, staged: Path) -> Path:
    """Give the closed segment ``src`` (SQLite, no writer, its WAL folded in) its archived
    day's name ``staged`` (``YYYY-MM-DD.journal.sqlite3``): a hard link when the archive
    folder is on the journal's file system (no byte copied: the rollover costs the round
    no more than a few renames), else a copy; through a temporary name, fsynced,
    renamed, the folder fsynced. Raises :class:`ArchiveError`."""
    folder = staged.parent
    tmp = folder / f".{staged.name}.tmp"
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            os.link(src, tmp)
        except OSError:  # another file system (or links refused): a copy, fsynced
            _step("vacuumed")
            shutil.copyfile(src, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, staged)
        _fsync_dir(folder)
    except OSError as exc:
        raise ArchiveError(f"cannot write the archived day {staged}: {exc}") from None
    return staged


def _ro(path: Path) -> sqlite3.Connection:
    """A read-only connection to a journal file no one writes any more (a closed segment,
    an archived day): ``immutable``, so SQLite leaves no ``-shm`` or ``-wal`` beside it."""
    return connect(path, uri_options="mode=ro&immutable=1")


def _vacuum(src: Path, out: Path) -> None:
    db = _ro(src)
    try:
        db.execute("VACUUM INTO ?", (str(out),))
    finally:
        db.close()
    db = sqlite3.connect(out)
    try:
        db.execute("PRAGMA journal_mode=DELETE")  # one file: an auditor opens it read-only anywhere
        # Bodies as their JSON text (a form format 4 reads and verifies: every byte of it is
        # what the chain hashes): xz compresses text far better than the live file's deflate
        # (4.0 against 4.9 KB a round at 7 seats, docs/journal.md "Size"). A body that does
        # not decode is left as it is, for the verification that follows to name.
        db.create_function("journal_text", 1, _as_text, deterministic=True)
        db.execute("UPDATE main.entries SET body = journal_text(body) WHERE typeof(body) = 'blob'")
        db.commit()
        db.execute("VACUUM")
    finally:
        db.close()


def _as_text(stored: Any) -> Any:
    try:
        return decode_body(stored)
    except (ValueError, TypeError, UnicodeDecodeError):
        return stored


def _tail(db_path: Path) -> tuple[int, int, bytes | None]:
    """(entries, last seq, last entry's MAC) of the SQLite journal file ``db_path``."""
    con = _ro(db_path)
    try:
        n, hi = con.execute("SELECT COUNT(*), MAX(seq) FROM entries").fetchone()
        row = con.execute("SELECT mac FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        return int(n), int(hi or 0), (bytes(row[0]) if row else None)
    finally:
        con.close()


def _check_copy(src: Path, staged: Path) -> None:
    """``staged`` is the closed segment ``src``: the same file (a hard link), or a copy of
    the same size with the same entries to the same last MAC (the full verification is
    :func:`compress_one`'s, off the round's path). Raises :class:`ArchiveError`."""
    try:
        if not staged.is_file():
            raise ArchiveError(f"no archived day at {staged}")
        if os.path.samefile(src, staged):
            return
        if staged.stat().st_size != src.stat().st_size or _tail(staged) != _tail(src):
            raise ArchiveError(f"{staged} does not hold the segment it was made from")
    except (OSError, sqlite3.Error) as exc:
        raise ArchiveError(f"{staged} does not read: {exc}") from None


def _compress(staged: Path, archive: Path) -> str:
    """xz of ``staged`` to ``archive`` through a temporary name, fsynced, renamed, the
    folder fsynced; returns the SHA-256 of the bytes compressed. Raises
    :class:`ArchiveError`."""
    folder = archive.parent
    tmp_xz = folder / f".{archive.name}.tmp"
    digest = hashlib.sha256()
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp_xz.unlink()
        fd = os.open(tmp_xz, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as raw, lzma.open(raw, "wb", preset=XZ_PRESET) as out, open(staged, "rb") as inp:
            while chunk := inp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
            out.close()
            raw.flush()
            os.fsync(raw.fileno())
        _step("compressed")
        os.replace(tmp_xz, archive)
        _fsync_dir(folder)
    except (OSError, lzma.LZMAError) as exc:
        raise ArchiveError(f"cannot write the archive {archive}: {exc}") from None
    return digest.hexdigest()


def _xz_digest(archive: Path) -> str:
    digest = hashlib.sha256()
    try:
        with lzma.open(archive, "rb") as inp:
            while chunk := inp.read(1 << 20):
                digest.update(chunk)
    except (OSError, lzma.LZMAError, EOFError) as exc:
        raise ArchiveError(f"{archive} is not a readable archive (xz): {exc}") from None
    return digest.hexdigest()


def compress_one(staged: Path, *, public_keys: list[Any]) -> Path:
    """Off the round's path: check the archived day ``staged`` in full (``VACUUM``-ed into
    one file, it verifies with ``public_keys`` and ends with its signed checkpoint),
    compress it to its ``.journal.xz``, check the xz decompresses to the same bytes,
    then remove ``staged``. An xz already there that verifies as the same day (a crash
    after its rename) is kept. Returns the xz's path. Raises :class:`ArchiveError`
    (nothing removed)."""
    m = STAGED_RE.match(staged.name)
    if m is None:
        raise ArchiveError(f"{staged} is not an archived day's name")
    archive = staged.with_name(archive_name(m.group(1)))
    n, last_seq, _ = _tail(staged)
    tmp = staged.with_name(f".{staged.name}.vacuum.tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        _vacuum(staged, tmp)
        cp = _last_checkpoint(tmp)
        r = verify(tmp, public_keys=public_keys, anchors=[cp] if cp else [])
        if r.status != "ok" or cp is None or r.last_checkpoint != last_seq or r.entries != n:
            raise ArchiveError(f"the archived day {staged} does not verify: {r.status} {r.reason}")
        day = _close_day(tmp)
        if day != m.group(1):
            raise ArchiveError(f"{staged} holds gaming day {day or '(no close entry)'}, not {m.group(1)}: "
                               "swapped or renamed; not compressed, nothing removed")
        done = False
        if archive.is_file() or archive.is_symlink():
            try:
                check_archive(archive, public_keys=public_keys, last_seq=last_seq, head=r.head)
            except ArchiveError as exc:  # never replaced: a person compares the two
                raise ArchiveError(f"{archive} is there and is not the day {staged} holds ({exc}); neither "
                                   "is replaced nor removed") from None
            done = True
        if not done:
            want = _compress(tmp, archive)
            if _xz_digest(archive) != want:
                raise ArchiveError(f"the archive {archive} does not decompress to the day it was made from")
    except (OSError, sqlite3.Error) as exc:
        raise ArchiveError(f"cannot compress {staged}: {exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _step("xz_checked")
    staged.unlink()
    _fsync_dir(staged.parent)
    return archive


class _Compressor:
    """The one thread that compresses archived days off the round's path, at a lower CPU
    priority (``nice`` +10 on the thread, Linux). Not a daemon: a process that ends
    (``tablectl run --rounds N``, a service stop) finishes the day it compresses first;
    a SIGKILL leaves the ``.journal.sqlite3``, compressed at the next start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: "collections.OrderedDict[Path, list[Any]]" = collections.OrderedDict()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        #: (the day's file, why) of each day that could not be compressed, for the table to say
        self.failed: list[tuple[str, str]] = []

    def add(self, folder: Path, public_keys: list[Any]) -> None:
        with self._lock:
            for p in sorted(folder.iterdir()):
                if STAGED_RE.match(p.name) and p.is_file() and not p.is_symlink():
                    self._queue[p] = public_keys
            if not self._queue or (self._thread is not None and self._thread.is_alive()):
                return
            self._idle.clear()
            self._thread = threading.Thread(target=self._run, name="archive-compress")
            self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            with self._lock:
                if not self._queue:
                    self._idle.set()
                    return
                staged, keys = self._queue.popitem(last=False)
            try:
                if staged.exists():
                    archive = compress_one(staged, public_keys=keys)
                    log.info("gaming_day_compressed", archive=str(archive))
            except (ArchiveError, OSError, sqlite3.Error) as exc:
                log.error("gaming_day_not_compressed", archive=str(staged), error=str(exc)[:300],
                          note="the day stays in its .journal.sqlite3; the next start tries again")
                with self._lock:
                    self.failed.append((staged.name, str(exc)[:300]))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until no archived day waits to be compressed; returns whether it is so."""
        return self._idle.wait(timeout_s)


_COMPRESSOR = _Compressor()


def compress_pending(archive_dir: str | Path, *, public_keys: list[Any]) -> None:
    """Compress, on a thread of its own, every archived day of ``archive_dir`` not
    compressed yet (``YYYY-MM-DD.journal.sqlite3``: :func:`compress_one`). Returns at once."""
    _COMPRESSOR.add(Path(archive_dir), list(public_keys))


def not_compressed() -> list[tuple[str, str]]:
    """The archived days that could not be compressed since the last ask, ``(file name,
    why)``: a day that does not verify, a swapped one, an xz there that is another day
    (:func:`compress_one`); taken, so each is said once."""
    with _COMPRESSOR._lock:
        out, _COMPRESSOR.failed = _COMPRESSOR.failed, []
    return out


def compressed(timeout_s: float | None = None) -> bool:
    """Block until the archived days handed to :func:`compress_pending` are compressed (or
    failed, logged); returns False if ``timeout_s`` passed first. For a tool that reads
    the archive folder right after a rollover, and for a clean stop."""
    return _COMPRESSOR.wait(timeout_s)


def day_history(journal: Journal) -> dict[str, Any]:
    """What the next day's segment carries of the gaming days before it: the days the table
    was opened and the slip of each day's drop (:meth:`table.day.gaming_day.TableDay.history`),
    from what this segment carried and the openings and drops it holds."""
    from .gaming_day import TableDay

    opening = journal.segment
    carried = opening.body.get("carried", {}) if opening is not None else {}
    history = carried.get("day_history") if isinstance(carried, dict) else None
    bodies = [e.body for e in journal.entries("gaming_day") if e.body.get("procedure") in ("open", "drop")]
    return TableDay.replay(bodies, journal.table_id, history=history).history()


def write_archive(src: Path, archive: Path) -> Path:
    """Write the closed segment ``src`` (SQLite, no writer) to ``archive`` (xz of the
    segment ``VACUUM``-ed): through temporary files, fsynced, renamed. Raises
    :class:`ArchiveError`."""
    folder = archive.parent
    tmp_db = folder / f".{archive.name}.sqlite.tmp"
    tmp_xz = folder / f".{archive.name}.tmp"
    try:
        for t in (tmp_db, tmp_xz):
            with contextlib.suppress(FileNotFoundError):
                t.unlink()
        _vacuum(src, tmp_db)
        fd = os.open(tmp_xz, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as raw, lzma.open(raw, "wb", preset=XZ_PRESET) as out, open(tmp_db, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
            out.close()
            raw.flush()
            os.fsync(raw.fileno())
        _step("compressed")
        os.replace(tmp_xz, archive)
        _fsync_dir(folder)
        tmp_db.unlink()
    except (OSError, sqlite3.Error, lzma.LZMAError) as exc:
        raise ArchiveError(f"cannot write the archive {archive}: {exc}") from None
    return archive


def _last_checkpoint(db_path: Path) -> dict[str, Any] | None:
    db = connect(db_path)
    try:
        row = db.execute("SELECT body FROM entries WHERE kind='checkpoint' ORDER BY seq DESC LIMIT 1").fetchone()
        return json.loads(row[0])["checkpoint"] if row else None
    except (sqlite3.Error, ValueError, KeyError, TypeError):
        return None
    finally:
        db.close()


def check_archive(archive: Path, *, public_keys: list[Any], last_seq: int, head: str) -> VerifyResult:
    """Verify the archive against the segment it was made from (its last entry ``last_seq``
    and chain hash ``head``); raises :class:`ArchiveError` unless it verifies ``ok``,
    ending there."""
    with opened(archive) as db:
        cp = _last_checkpoint(db)
        r = verify(db, public_keys=public_keys, anchors=[cp] if cp else [])
    if r.status != "ok" or r.first_seq + r.entries - 1 != last_seq or r.head != head:
        raise ArchiveError(f"the archive {archive} does not verify as the segment it was made from: {r.status} "
                           f"{r.reason} ({r.entries} entries from {r.first_seq}, head {r.head[:16]})")
    return r


class EventCount:
    """The public event stream's head (:func:`table.events.public_count`) kept as entries
    commit (a listener of ``journal``), so a rollover names it without reading the whole
    closed day back (a scan of an 18 MB day cost the round that rolled over ~0.1 s).
    Counted once at :meth:`start` from the file; the journal's listeners go on across the
    day's segments, so the count does too."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.value = 0

    def start(self) -> "EventCount":
        """Count the journal's file and follow its commits. Call on the journal's writing
        thread (no commit between the count and the listener)."""
        from ..events import is_public, public_count

        def committed(entries: list[Any]) -> None:
            self.value += sum(1 for e in entries if is_public(e.kind, e.body.get("step")
                                                               if isinstance(e.body, dict) else None))

        db = connect(self.journal.path)
        try:
            self.value = public_count(db)
        finally:
            db.close()
        self.journal.on_commit(committed)
        return self


def roll(journal: Journal, archive_dir: str | Path, *, events: EventCount | None = None) -> Path:
    """Finish the day ``journal`` closed (:func:`closing`): archive it, check the archive,
    start the next day's segment at the same path (see the module docstring), and
    reopen ``journal`` on it (same object, same listeners). ``events``: the stream's head
    kept as entries commit (:class:`EventCount`; None: counted from the closed file).
    Returns the archive's path.
    Raises :class:`ArchiveError` (the closed segment stays in place, reopened) or
    :class:`~table.journal.JournalError`."""
    close = closing(journal)
    if close is None:
        raise ArchiveError(f"{journal.path} does not end with its gaming day's close")
    if journal.key is None:
        raise ArchiveError("a rollover needs the table key (the next segment is signed)")
    folder = Path(archive_dir)
    if not folder.is_dir():
        raise ArchiveError(f"the archive folder {folder} does not exist")
    path, day, nxt = journal.path, str(close["close"]), str(close["next"])
    last = journal.last("checkpoint")
    assert last is not None
    # the state's procedures, and the days opened and the drops entered (the drop rules, past the close)
    carried = {"gaming_day": carried_procedures(journal), "day_history": day_history(journal)}
    journal._ensure_chain()  # the chain hash after the last entry
    head_hex, last_seq = journal._chain.hex(), journal.last_seq  # type: ignore[union-attr]
    journal.close()
    _step("closed")
    archive = folder / archive_name(day)
    if archive.is_file():  # compressed before a crash cut the rollover short
        check_archive(archive, public_keys=[journal.key.public], last_seq=last_seq, head=head_hex)
    else:
        staged = staged_of(archive)
        try:
            _check_copy(path, staged)
        except ArchiveError:  # none yet, or a stale one: (re)write it
            write_staged(path, staged)
            _step("archived")
            _check_copy(path, staged)
    _step("verified")
    nxt_path = next_path(path)
    for stale in (nxt_path, Path(f"{nxt_path}-wal"), Path(f"{nxt_path}-shm"), head_path(nxt_path)):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    previous = {"seq": last_seq, "head": head_hex, "checkpoint": last.body["checkpoint"], "gaming_day": day,
                "archive": archive.name, "events": events.value if events is not None else _events_through(path)}
    new = Journal.open_segment(nxt_path, key=journal.key, table_id=journal.table_id, previous=previous, opens=nxt,
                               carried=carried, state=last.body.get("state", {}), clock=journal.now_us,
                               group=journal.group)
    new.close()
    _step("segment_written")
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:  # never: closed, the WAL was folded in and emptied
        raise ArchiveError(f"{wal} still holds entries after the close; the rollover waits (nothing removed)")
    for old in (wal, Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    os.replace(head_path(nxt_path), head_path(path))
    _step("head_moved")
    os.replace(nxt_path, path)
    _fsync_dir(path.parent)
    _step("renamed")
    journal.reopen()
    # The next segment's first entries were written by a journal of their own: its readers
    # (the event stream, from memory) hear of them as of any commit.
    journal._committed(list(journal.entries(since=last_seq)))
    log.info("gaming_day_archived", day=day, archive=str(archive), next=nxt)
    compress_pending(folder, public_keys=[journal.key.public])
    return archive


def _events_through(path: Path) -> int:
    """The public event stream's head at the end of the closed segment ``path``
    (:func:`table.events.public_count`): the next segment's events go on from it."""
    from ..events import public_count

    db = connect(path)
    try:
        return public_count(db)
    finally:
        db.close()


def finish(path: str | Path, archive_dir: str | Path, *, key: Any, table_id: str = "table", clock: Any = None,
           group: int | None = None) -> Path | None:
    """At start-up, before the controller opens the journal: finish a rollover a crash
    cut short (the journal at ``path`` ends with its day's close), remove what a cut
    rollover left (``JOURNAL.next``, temporary archives), and compress, off the start's
    path, the archived days a stop left not compressed (:func:`compress_pending`).
    Returns the archive of the rollover finished, or None when there was none to
    finish. Raises as :func:`roll`."""
    p, folder = Path(path), Path(archive_dir)
    for tmp in folder.glob(".*.tmp") if folder.is_dir() else ():
        tmp.unlink()
    if not p.exists():
        return None
    j = Journal(p, key=key, table_id=table_id, clock=clock, group=group)
    try:
        if closing(j) is None:
            nxt = next_path(p)
            for stale in (nxt, Path(f"{nxt}-wal"), Path(f"{nxt}-shm"), head_path(nxt)):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            if folder.is_dir() and key is not None:
                compress_pending(folder, public_keys=[key.public])
            return None
        log.warning("gaming_day_rollover_resumed", path=str(p))
        return roll(j, folder)
    finally:
        j.close()


# -- the chain across days ---------------------------------------------------------------------------


@dataclass
class DayCheck:
    """One segment of the chain: ``name`` (the archive's file name, or the live
    journal's), ``day`` (the gaming day its close entry names; None for the live one),
    the :class:`VerifyResult`, and ``last_cp`` (its last signed checkpoint)."""

    name: str
    day: str | None
    result: VerifyResult
    last_cp: dict[str, Any] | None = None


@dataclass
class ChainResult:
    """Outcome of :func:`verify_chain`: ``status`` (``ok``, ``tampered``, ``unreadable``,
    ``gap``: a day of the chain is missing, ``misfiled``: an archive is not the day its
    name says, or a day is there twice, ``unanchored``, ``unsigned``), ``reason`` (the
    first problem, naming the day), ``days`` checked in chain order, ``notes``."""

    status: str
    reason: str = ""
    days: list[DayCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: every problem found, (status, why naming the day), the worst first
    problems: list[tuple[str, str]] = field(default_factory=list)

    @property
    def entries(self) -> int:
        return sum(d.result.entries for d in self.days)


def _close_day(db: Path) -> str | None:
    con = connect(db)
    try:
        row = con.execute("SELECT body FROM entries WHERE kind=? ORDER BY seq DESC LIMIT 1", (SEGMENT_KIND,)).fetchone()
        body = json.loads(row[0]) if row else {}
        return str(body["close"]) if isinstance(body, dict) and "close" in body else None
    except (sqlite3.Error, ValueError):
        return None
    finally:
        con.close()


def archives(archive_dir: str | Path) -> list[tuple[str, Path]]:
    """The archived days in ``archive_dir``: (day, path) by file name, oldest first (a day
    not compressed yet by its ``.journal.sqlite3``: :func:`table.day.archive_files.archived_days`)."""
    return archived_days(archive_dir)


# long: one pass over the days in chain order, each link's check beside the segment it reads
def verify_chain(archive_dir: str | Path, *, live: str | Path | None = None, public_keys: list[Any] = (),
                 anchors: list[dict[str, Any]] = (), key: Any = None) -> ChainResult:
    """Check every archived day in ``archive_dir`` (and the live segment ``live``) as one
    chain: each segment verifies (:func:`table.journal.verify`, its own last checkpoint
    as its anchor), each names the one before it exactly (seq, chain hash, last
    signed checkpoint), its file name is the day its close entry names, and the
    chain's end is vouched for by the live segment or by ``anchors`` (the floor's).
    Raises :class:`JournalError` for a folder that does not exist."""
    folder = Path(archive_dir)
    if not folder.is_dir():
        raise JournalError(f"no archive folder at {folder}")
    keys = list(public_keys)
    out = ChainResult("ok")
    problems: list[tuple[str, str]] = []
    retired = 0  # the last entry the table's retention entries say it removed (RETENTION_KIND)
    for name_day, path in archives(folder):
        try:
            with opened(path) as db:
                cp = _last_checkpoint(db)
                lo, hi = _seq_range(db)
                mine = [cp] if cp else []
                mine += [a for a in anchors if isinstance(a, dict) and isinstance(a.get("seq"), int)
                         and lo <= a["seq"] + 1 <= hi]
                r = verify(db, public_keys=keys, anchors=mine, key=key)
                day = _close_day(db)
                retired = max(retired, _retention_through(db))
        except JournalError as exc:
            problems.append(("unreadable", f"{path.name}: {exc}"))
            continue
        out.days.append(DayCheck(path.name, day, r, cp))
        if day != name_day:
            problems.append(("misfiled", f"{path.name} holds gaming day {day or '(no close entry)'}, not {name_day}: "
                                         "swapped or renamed"))
    out.days.sort(key=lambda d: d.result.first_seq)
    if live is not None:
        r = verify(live, public_keys=keys, anchors=list(anchors), key=key)
        out.days.append(DayCheck(Path(live).name, None, r))
        retired = max(retired, _retention_through(Path(live)))
    seen_days: dict[str, str] = {}
    for i, d in enumerate(out.days):
        r = d.result
        if r.status in ("tampered", "unreadable"):
            problems.append((r.status, f"{d.name}: {r.reason}" + (f" (entry {r.first_bad})" if r.first_bad else "")))
        if d.day is not None:
            if d.day in seen_days:
                problems.append(("misfiled", f"gaming day {d.day} is there twice: {seen_days[d.day]} and {d.name}"))
            seen_days[d.day] = d.name
        if i == 0:
            if r.previous is not None:
                if retired >= r.previous["seq"]:
                    out.notes.append(f"the chain starts at entry {r.first_seq} ({d.name}): gaming day "
                                     f"{r.previous.get('gaming_day')} and those before it were removed by the "
                                     f"table's retention (journaled through entry {retired})")
                else:
                    problems.append(("gap", f"gaming day {r.previous.get('gaming_day')} ({r.previous.get('archive')},"
                                            f" entries to {r.previous['seq']}) and those before it are missing: "
                                            f"{d.name} chains to it, and no retention entry of the table removed "
                                            "them (deleted, or not copied)"))
            continue
        before = out.days[i - 1]
        prev, b = r.previous, before.result
        end = b.first_seq + b.entries - 1
        if prev is None:
            problems.append(("misfiled", f"{d.name} starts a journal at entry 1, but follows {before.name}"))
        elif prev["seq"] > end:
            problems.append(("gap", f"gaming day {prev.get('gaming_day')} ({prev.get('archive')}, entries "
                                    f"{end + 1}..{prev['seq']}) is missing: {d.name} chains to it, "
                                    f"{before.name} ends at entry {end}"))
        elif prev["seq"] < end:
            problems.append(("misfiled", f"{d.name} chains to entry {prev['seq']}, inside {before.name} "
                                         f"(entries {b.first_seq}..{end}): two copies of a day"))
        elif prev.get("head") != b.head or not isinstance(before.last_cp, dict) or \
                prev.get("checkpoint", {}).get("sig") != before.last_cp.get("sig"):
            problems.append(("tampered", f"{d.name} chains to a gaming day {prev.get('gaming_day')} other than "
                                         f"{before.name} (its chain hash or last checkpoint differs)"))
        elif b.last_checkpoint != end:
            problems.append(("tampered", f"{before.name} does not end with its signed checkpoint"))
        elif d.day is not None and before.day is not None and prev.get("gaming_day") != before.day:
            problems.append(("misfiled", f"{d.name} names gaming day {prev.get('gaming_day')} before it, "
                                         f"{before.name} holds {before.day}"))
    for d in out.days[:-1]:
        out.notes += [f"{d.name}: {n}" for n in d.result.notes if "archived gaming day" not in n
                      and "goes on from entry" not in n and "no head file" not in n]
    if out.days:
        last = out.days[-1]
        out.notes += [f"{last.name}: {n}" for n in last.result.notes if "no head file" not in n
                      and "goes on from entry" not in n and "archived gaming day" not in n]
        end = last.result.first_seq + last.result.entries - 1
        beyond = [a["seq"] for a in anchors if isinstance(a, dict) and isinstance(a.get("seq"), int)
                  and a["seq"] >= end]
        if last.day is not None and beyond:
            problems.append(("gap", f"the floor's checkpoints go on to entry {max(beyond)}, past the last day "
                                    f"archived ({last.name}, entries to {end}): the days after it are not here "
                                    "(give the live journal with --journal)"))
        elif last.day is not None and not any(isinstance(a, dict) and a.get("seq") == end - 1 for a in anchors):
            problems.append(("unanchored", f"nothing vouches for the end of {last.name} (the last day archived): "
                                           "give the live journal (--journal) or the floor's checkpoints (--anchors)"))
        elif last.result.status in ("unanchored", "unsigned"):
            problems.append((last.result.status, f"{last.name}: {last.result.status}"))
    else:
        problems.append(("unanchored", f"no archived day in {folder}"))
    if not keys and key is None:
        problems.append(("unanchored", "no public key given: no signature was checked"))
    if problems:
        worst = min(problems, key=lambda p: CHAIN_ORDER.index(p[0]))
        out.status, out.reason = worst
        out.problems = sorted(problems, key=lambda p: CHAIN_ORDER.index(p[0]))
        out.notes = [why for s, why in problems if why != out.reason] + out.notes
    return out


def _seq_range(db: Path) -> tuple[int, int]:
    con = connect(db)
    try:
        lo, hi = con.execute("SELECT MIN(seq), MAX(seq) FROM entries").fetchone()
        return int(lo or 0), int(hi or 0)
    except (sqlite3.Error, TypeError, ValueError):
        return 0, 0
    finally:
        con.close()


# -- retention ---------------------------------------------------------------------------------------


def cutoff(today: date, *, years: int, keep_days: int | None = None) -> date:
    """The oldest gaming day kept: ``keep_days`` before ``today`` when given, else the same
    date ``years`` years before (28 February for 29 February). K.A.R. 112-108-51: seven years."""
    if keep_days is not None:
        from datetime import timedelta

        return today - timedelta(days=keep_days)
    try:
        return today.replace(year=today.year - years)
    except ValueError:
        return today.replace(year=today.year - years, day=28)


#: the journal entry the table writes before retention removes archived days: ``{"removed":
#: [days], "through_seq": the last entry of the newest day removed, "cutoff": the oldest day
#: kept}``; :func:`verify_chain` takes a chain that starts after entry 1 only when one covers it
RETENTION_KIND = "retention"


def _retention_through(db: Path) -> int:
    """The highest ``through_seq`` of the retention entries in the segment ``db`` (0: none)."""
    con = connect(db)
    try:
        best = 0
        for (body,) in con.execute("SELECT body FROM entries WHERE kind=?", (RETENTION_KIND,)):
            try:
                through = json.loads(body).get("through_seq")
            except (ValueError, AttributeError):
                continue
            if isinstance(through, int) and not isinstance(through, bool):
                best = max(best, through)
        return best
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def prune(archive_dir: str | Path, *, oldest_kept: date, anchored_seq: int | None,
          record: Callable[[list[str], int], None] | None = None) -> list[Path]:
    """Remove the archives of gaming days before ``oldest_kept`` whose last checkpoint the
    floor's notary holds or has passed (``anchored_seq``: the seq of the notary's
    checkpoint; None: no floor, or it did not answer: nothing is removed, and the log
    says so). Oldest first; stops at the first archive not yet anchored. ``record(days,
    through_seq)`` is called before any file is removed, to journal the removal
    (:data:`RETENTION_KIND`): an auditor's :func:`verify_chain` then tells days removed by
    retention from days deleted. Returns the files removed."""
    removed: list[Path] = []
    old = [(d, p) for d, p in archives(archive_dir) if date.fromisoformat(d) < oldest_kept]
    if not old:
        return removed
    if anchored_seq is None:
        log.warning("retention_nothing_removed", archives_past_retention=len(old),
                    reason="no floor notary anchors the archives ([floor] url): nothing is ever removed without it")
        return removed
    going: list[tuple[str, Path, int]] = []
    for day, p in old:
        if STAGED_RE.match(p.name):  # not compressed yet: kept until it is (the compression reads it)
            log.info("retention_kept", day=day, reason="not compressed yet")
            break
        try:
            with opened(p) as db:
                cp = _last_checkpoint(db)
                end = _seq_range(db)[1]
        except ArchiveError:
            cp = None
        if cp is None or not isinstance(cp.get("seq"), int) or cp["seq"] > anchored_seq:
            log.warning("retention_kept", day=day, reason="its last checkpoint is not anchored off the table yet")
            break
        going.append((day, p, end))
    if going and record is not None:
        record([d for d, _, _ in going], max(e for _, _, e in going))  # journaled before anything is removed
    for day, p, _ in going:
        p.unlink()
        removed.append(p)
        log.info("retention_removed", day=day, archive=str(p))
    if removed:
        _fsync_dir(Path(archive_dir))
    return removed
