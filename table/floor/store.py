"""The floor's database: embedded SQLite by default, PostgreSQL from a URL, one schema.

``[floor] database`` in the floor config selects it:

* an absolute path, or ``sqlite:////abs/path.sqlite3``: SQLite (stdlib ``sqlite3``,
  WAL, created 0600); the README's floor on one machine;
* ``postgresql://USER@HOST:PORT/DB`` (or ``postgres://``; ``?host=/socket/dir`` for a
  Unix socket; the password in ``PGPASSWORD`` or ``~/.pgpass``, never in the config):
  PostgreSQL through psycopg 3 (optional extra ``floor``). Several floor processes
  may share one: every insert is keyed by what the tables signed (idempotent), the
  notary's row only grows (``ON CONFLICT ... WHERE seq < excluded.seq``), and the
  migrations run under an advisory lock.

The SQL is written once with ``?`` placeholders (:func:`table.floor.migrations`);
:class:`Store` turns them into ``%s`` for psycopg. Every method raises
:class:`StoreError` naming the database (its URL without a password).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import structlog

from .migrations import LATEST, MIGRATIONS

log = structlog.get_logger("table.floor.store")

#: the advisory lock id the migrations of every floor process take (PostgreSQL)
MIGRATION_LOCK = 0x7C0FF1 << 8


class StoreError(RuntimeError):
    """The floor database cannot be opened, migrated or written; the message names it."""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


class Tx:
    """One transaction: :meth:`execute` and :meth:`query` with ``?`` placeholders."""

    def __init__(self, cur: Any, pg: bool) -> None:
        self._cur = cur
        self._pg = pg

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self._pg else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed (-1 in a pipelined transaction)."""
        self._cur.execute(self._sql(sql), tuple(params))
        return self._cur.rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run one query; its rows."""
        self._cur.execute(self._sql(sql), tuple(params))
        return list(self._cur.fetchall())


class Store:
    """An open floor database (see the module docstring). Thread-safe: one connection,
    one transaction at a time (:meth:`transaction`). ``kind``: ``"sqlite"`` or
    ``"postgresql"``; ``where``: the database named without a password."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = redacted(url)
        self._lock = threading.RLock()
        pg = url.startswith(("postgresql://", "postgres://"))
        self.kind = "postgresql" if pg else "sqlite"
        if pg:
            try:
                import psycopg
            except ImportError:
                raise StoreError("a PostgreSQL floor database needs psycopg 3: pip install "
                                 "'threecard-table[floor]'") from None
            self._errors: tuple[type[BaseException], ...] = (psycopg.Error,)
            try:
                # a psycopg or a sqlite3 connection: only the DB-API calls both have are used
                self._conn: Any = psycopg.connect(url, autocommit=False, connect_timeout=10,
                                                  application_name="threecard-floor")
            except psycopg.Error as exc:
                raise StoreError(f"cannot connect to the floor database {self.where}: {exc}") from None
        else:
            path = Path(url[len("sqlite://"):] if url.startswith("sqlite://") else url)
            if not path.is_absolute():
                raise StoreError(f"the floor database {url!r} is not an absolute path, sqlite:////ABS/PATH or "
                                 "postgresql://...")
            self._errors = (sqlite3.Error,)
            try:
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
                self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(f"cannot open the floor database {path}: {exc}") from None
        self._pg = pg

    @contextlib.contextmanager
    def transaction(self, *, pipeline: bool = False) -> Iterator[Tx]:
        """One transaction: committed when the block ends, rolled back when it raises.
        ``pipeline``: on PostgreSQL, send the statements without waiting for each one's
        answer (psycopg's pipeline mode; a query still waits for its rows), for the
        ingest's batches: one round trip per query, not per statement (``Tx.execute``'s
        row count is then not known). Raises :class:`StoreError` for a database error."""
        with self._lock:
            try:
                if self._pg:
                    piped = self._conn.pipeline() if pipeline else contextlib.nullcontext()
                    with piped, self._conn.transaction(), self._conn.cursor() as cur:
                        yield Tx(cur, True)
                else:
                    cur = self._conn.cursor()
                    cur.execute("BEGIN IMMEDIATE")
                    try:
                        yield Tx(cur, False)
                    except BaseException:
                        self._conn.rollback()
                        raise
                    self._conn.commit()
            except self._errors as exc:
                raise StoreError(f"the floor database {self.where}: {exc}") from None

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """One read in its own transaction."""
        with self.transaction() as tx:
            return tx.query(sql, params)

    def version(self) -> int:
        """The schema version applied (0: none yet)."""
        with self.transaction() as tx:
            self._version_table(tx)
            rows = tx.query("SELECT MAX(version) FROM schema_version")
        return int(rows[0][0] or 0)

    def _version_table(self, tx: Tx) -> None:
        if self._pg:  # two floors starting together: one creates it, the other waits
            tx.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                   "note TEXT NOT NULL, applied_at TEXT NOT NULL)")

    def migrate(self) -> int:
        """Apply every migration not yet applied, each in its own transaction, under the
        migration lock (PostgreSQL: an advisory lock, so two floors starting together
        do not both apply one). Returns the version now. Raises :class:`StoreError` for a
        database newer than this code."""
        for number, note, statements in MIGRATIONS:
            with self.transaction() as tx:
                self._version_table(tx)
                done = int(tx.query("SELECT MAX(version) FROM schema_version")[0][0] or 0)
                if done > LATEST:
                    raise StoreError(f"the floor database {self.where} is at schema {done}, newer than this "
                                     f"floor's {LATEST}: upgrade the floor software")
                if number <= done:
                    continue
                for sql in statements:
                    tx.execute(sql)
                tx.execute("INSERT INTO schema_version (version, note, applied_at) VALUES (?, ?, ?)",
                           (number, note, _now()))
                log.info("floor_migrated", database=self.where, version=number, note=note)
        return self.version()

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except self._errors:  # pragma: no cover - closing a dead connection
                pass


def open_store(url: str, *, migrate: bool = True) -> Store:
    """The floor database at ``url`` (see the module docstring), migrated to the latest
    schema unless ``migrate`` is false. Raises :class:`StoreError`."""
    store = Store(url)
    if migrate:
        try:
            store.migrate()
        except StoreError:
            store.close()
            raise
    return store
