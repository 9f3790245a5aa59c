"""The floor's sessions, kept in the floor's database so that a restart of the floor (or a
second floor process on the same PostgreSQL) does not sign anyone out.

A session is made when a person signs in to the floor's pages (their PIN checked by the
table's :class:`table.interfaces.auth.Authenticator`, origin ``floor``); its token (32
random bytes, URL-safe) goes to the browser once, in an HttpOnly cookie, and the database
keeps only its SHA-256 (``floor_sessions.digest``): a copy of the database signs no one in.
A session ends ``ttl_s`` after sign-in, after ``idle_s`` unused (``[auth]``'s
``session_ttl_s`` and ``session_idle_s``, 8 h and 15 min by default), at sign-out, and when
the person leaves the people file or changes role (checked by the caller at each request:
:meth:`table.floor.reports._ReportRoutes.session`). At most
:data:`~table.interfaces.auth.MAX_SESSIONS_PER_PERSON` per person (the oldest ends).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Callable

from table.interfaces.auth import MAX_SESSIONS_PER_PERSON

from .store import Store

#: a session's last use is written at most this often (µs): a page polling every 2 s is not a write each
TOUCH_EVERY_US = 30_000_000


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class FloorSession:
    """A live session: who (``person``, ``role`` as signed in) and when it ends (µs since the epoch)."""

    person: str
    role: str
    expires_us: int


class FloorSessions:
    """The sessions in ``store`` (a migrated floor database). ``clock``: the wall clock, µs
    since the epoch (UTC); ``ttl_s``, ``idle_s``: seconds. Every method raises
    :class:`~table.floor.store.StoreError` when the database cannot be read or written."""

    def __init__(self, store: Store, clock: Callable[[], int], *, ttl_s: float, idle_s: float) -> None:
        self.store = store
        self.clock = clock
        self.ttl_us = int(ttl_s * 1e6)
        self.idle_us = int(idle_s * 1e6)

    def _execute(self, sql: str, params: tuple) -> int:
        with self.store.transaction() as tx:
            return tx.execute(sql, params)

    def open(self, person: str, role: str) -> str:
        """A new session for ``person`` in ``role``; its token (the only copy). The
        person's oldest beyond :data:`MAX_SESSIONS_PER_PERSON` and every expired one end."""
        token = secrets.token_urlsafe(32)
        now = self.clock()
        with self.store.transaction() as tx:
            tx.execute("DELETE FROM floor_sessions WHERE expires_us <= ? OR last_used_us <= ?",
                       (now, now - self.idle_us))
            mine = tx.query("SELECT digest FROM floor_sessions WHERE person = ? ORDER BY created_us DESC", (person,))
            for (old,) in mine[MAX_SESSIONS_PER_PERSON - 1:]:
                tx.execute("DELETE FROM floor_sessions WHERE digest = ?", (old,))
            tx.execute("INSERT INTO floor_sessions (digest, person, role, created_us, last_used_us, expires_us) "
                       "VALUES (?, ?, ?, ?, ?, ?)", (_digest(token), person, role, now, now, now + self.ttl_us))
        return token

    def get(self, token: str | None) -> FloorSession | None:
        """The live session of ``token``, or None (unknown, expired, idle too long); a use
        keeps it alive (written at most every :data:`TOUCH_EVERY_US`)."""
        if not token or len(token) > 128:
            return None
        digest, now = _digest(token), self.clock()
        rows = self.store.query("SELECT person, role, last_used_us, expires_us FROM floor_sessions WHERE digest = ?",
                                (digest,))
        if not rows:
            return None
        person, role, last_used, expires = rows[0]
        if now >= int(expires) or now - int(last_used) >= self.idle_us:
            self._execute("DELETE FROM floor_sessions WHERE digest = ?", (digest,))
            return None
        if now - int(last_used) >= TOUCH_EVERY_US:
            self._execute("UPDATE floor_sessions SET last_used_us = ? WHERE digest = ?", (now, digest))
        return FloorSession(str(person), str(role), int(expires))

    def close(self, token: str | None) -> bool:
        """End the session of ``token``; True if there was one."""
        if not token or len(token) > 128:
            return False
        return self._execute("DELETE FROM floor_sessions WHERE digest = ?", (_digest(token),)) > 0

    def end_person(self, person: str) -> None:
        """End every session of ``person`` (they left the people file or changed role)."""
        self._execute("DELETE FROM floor_sessions WHERE person = ?", (person,))
