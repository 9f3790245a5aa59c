"""Archived gaming days as files: their names, reading one back (decompressed once and
kept for the readers that look back past the live segment: the history panel, the event
stream, MQTT), and the archive a segment names as the day before it.

Apart from :mod:`table.day.segments` (which writes, rolls and verifies them) so that the event
stream can read archived days without importing the rollover, which counts its events
(no import circle: tests/test_layers.py)."""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import lzma
import re
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Iterator

from ..journal import SEGMENT_KIND, JournalError

#: an archived gaming day's file name: ``YYYY-MM-DD.journal.xz``
ARCHIVE_RE = re.compile(r"^([0-9]{4}-[0-9]{2}-[0-9]{2})\.journal\.xz\Z")
#: an archived gaming day not compressed yet (docs/journal.md, "Gaming days and archives"):
#: ``YYYY-MM-DD.journal.sqlite3``, the closed segment as the rollover left it; the xz of
#: the same day replaces it off the round's path (:func:`table.day.segments.compress_pending`)
STAGED_RE = re.compile(r"^([0-9]{4}-[0-9]{2}-[0-9]{2})\.journal\.sqlite3\Z")
#: the largest archive decompressed (bytes): a day at 1,600 rounds of 7 seats is ~20 MB
MAX_SEGMENT_BYTES = 4 << 30


class ArchiveError(JournalError):
    """An archive cannot be written or does not verify; nothing was removed."""


def archive_name(day: str) -> str:
    """The archive file name of gaming day ``day`` (``YYYY-MM-DD``)."""
    return f"{day}.journal.xz"


def staged_of(archive: Path) -> Path:
    """The not-yet-compressed form (``YYYY-MM-DD.journal.sqlite3``) of the archive
    ``archive`` (``YYYY-MM-DD.journal.xz``), beside it."""
    name = archive.name
    return archive.with_name((name[:-3] if name.endswith(".xz") else name) + ".sqlite3") \
        if not STAGED_RE.match(name) else archive


def existing(archive: Path) -> Path | None:
    """The file that holds the archived day ``archive`` names: the xz when it is there,
    else the day's not-yet-compressed form (:func:`staged_of`), else None."""
    if archive.is_file():
        return archive
    staged = staged_of(archive)
    return staged if staged.is_file() else None


def archived_days(archive_dir: str | Path) -> list[tuple[str, Path]]:
    """The archived days in ``archive_dir``: (day, path) by file name, oldest first; a day
    whose xz is written is that file, a day not compressed yet its ``.journal.sqlite3``."""
    found: dict[str, Path] = {}
    for p in Path(archive_dir).iterdir():
        m = ARCHIVE_RE.match(p.name) or STAGED_RE.match(p.name)
        if m and p.is_file() and (m.group(1) not in found or p.name.endswith(".xz")):
            found[m.group(1)] = p
    return sorted(found.items())


@contextlib.contextmanager
def opened(archive: Path) -> Iterator[Path]:
    """The archived segment ``archive`` decompressed into a private temporary folder:
    yields the SQLite file's path (removed after). A day not compressed yet
    (:func:`existing`) is copied there as it is. Raises :class:`ArchiveError` for a
    file that is not xz or decompresses past :data:`MAX_SEGMENT_BYTES`, ``FileNotFoundError``."""
    found = existing(archive)
    if found is None:
        raise FileNotFoundError(f"no archive {archive}")
    with tempfile.TemporaryDirectory(prefix="threecard-day-") as tmp:
        out = Path(tmp) / found.name.replace(".xz", ".sqlite3")
        try:
            with (open(found, "rb") if STAGED_RE.match(found.name) else lzma.open(found, "rb")) as inp, \
                    open(out, "wb") as o:
                n = 0
                while chunk := inp.read(1 << 20):
                    n += len(chunk)
                    if n > MAX_SEGMENT_BYTES:
                        raise ArchiveError(f"{archive} decompresses past {MAX_SEGMENT_BYTES >> 30} GB")
                    o.write(chunk)
        except (OSError, lzma.LZMAError, EOFError) as exc:
            raise ArchiveError(f"{archive} is not a readable archive (xz): {exc}") from None
        if STAGED_RE.match(found.name):  # the closed segment as it was: one file, like an xz's
            try:
                con = sqlite3.connect(out)
                try:
                    con.execute("PRAGMA journal_mode=DELETE")
                finally:
                    con.close()
            except sqlite3.Error as exc:
                raise ArchiveError(f"{found} is not a readable archived day: {exc}") from None
        yield out


class _Copy:
    """One archive decompressed into a private temporary folder (:func:`decompressed`)."""

    def __init__(self, archive: Path) -> None:
        self._ctx = opened(archive)
        self.path = self._ctx.__enter__()

    def drop(self) -> None:
        with contextlib.suppress(Exception):
            self._ctx.__exit__(None, None, None)


#: decompressed copies of archived days, newest use last: (path, size, mtime_ns) -> copy
_COPIES: "collections.OrderedDict[tuple[str, int, int], _Copy]" = collections.OrderedDict()
_COPIES_LOCK = threading.Lock()
#: archived days kept decompressed at once (a reader pages back one or two days)
MAX_COPIES = 3


def decompressed(archive: Path) -> Path:
    """A read-only SQLite copy of the archived day ``archive``, decompressed once and kept
    (at most :data:`MAX_COPIES` days, the least recently asked removed first; all at the
    process's exit) while the archive file stays the same (size and time). For readers
    that look back past the live segment: the history panel, the event stream, MQTT.
    Raises :class:`ArchiveError` (not xz, too large) or ``FileNotFoundError``."""
    archive = existing(archive) or archive
    st = archive.stat()
    key = (str(archive.resolve()), st.st_size, st.st_mtime_ns)
    with _COPIES_LOCK:
        copy = _COPIES.get(key)
        if copy is not None:
            _COPIES.move_to_end(key)
            return copy.path
        copy = _Copy(archive)
        _COPIES[key] = copy
        while len(_COPIES) > MAX_COPIES:
            _COPIES.popitem(last=False)[1].drop()
        return copy.path


@atexit.register
def _drop_copies() -> None:
    with _COPIES_LOCK:
        while _COPIES:
            _COPIES.popitem()[1].drop()


def previous_archive(db: sqlite3.Connection, archive_dir: str | Path | None) -> Path | None:
    """The archive of the day before the segment open on ``db`` (its first entry, kind
    ``segment``, names it: ``previous.archive``), when ``archive_dir`` holds it; None for
    a first segment, no folder, or a name that is not an archive's (never a path: the
    name is checked against :data:`ARCHIVE_RE`)."""
    if archive_dir is None:
        return None
    try:
        row = db.execute("SELECT kind, body FROM entries ORDER BY seq LIMIT 1").fetchone()
        prev = json.loads(row[1]).get("previous") if row and row[0] == SEGMENT_KIND else None
    except (sqlite3.Error, ValueError, TypeError, AttributeError):
        return None
    name = prev.get("archive") if isinstance(prev, dict) else None
    if not isinstance(name, str) or not ARCHIVE_RE.match(name):
        return None
    return existing(Path(archive_dir) / name)
