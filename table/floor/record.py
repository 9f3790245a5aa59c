"""The floor's own record, signed with the floor's key: its investigation notes and its own alarms.

What the tables send is signed by them; what the floor writes itself (a pit boss's or
floor manager's note on a fluctuation) is signed by the floor key (``[floor] key_file``,
the key that signs the notary's answers). Each note is chained to the one before
(``prev_hash``: the SHA-256 of the previous note's canonical JSON, :func:`note_hash`)
and signed: ``sig`` is the Ed25519 signature, by the floor key (``key_id``), of
``b"threecard.floor-note/1\\n" + note_hash(note)``. So whoever can write the floor
database but does not hold the floor key cannot change a note's words, author, role,
table, day or time, nor take a note out of the middle, nor put one in, without
:func:`check_notes` saying so.

The floor's own alarms (source ``floor``: a refused checkpoint, a refused message, a
record edited) are signed the same way, each row on its own (``key_id``, ``sig`` over
``b"threecard.floor-alarm/1\n"`` + the SHA-256 of its canonical JSON, :func:`alarm_hash`):
one changed in the database (its words, its table, its time) fails :func:`check_alarms`.
The tables' alarms (source ``table``) are the tables' word, copied from their signed
statuses, and not signed again.

:class:`RecordCheck` (both checks) runs when the floor starts
(:class:`table.floor.service.FloorService`) and each time the floor page asks for its
alarms or notes; each problem is an alarm row (kind ``floor_record_edited``, source
``floor``; :func:`raise_alarms`) and logged. The alarm comes back at the next check if
its row is deleted: it is derived from the record as it stands.

What it cannot see: the newest notes taken off the end (the chain then still holds; the
log line ``floor_note`` of each note, shipped off the machine, is the record of them),
and an alarm row deleted (each is logged when raised). Notes and alarms signed with an
earlier floor key fail the check after a rotation; floors sharing one database share
one floor key (the tables check the notary's answers against one key too).

:func:`floor_key` loads the floor key, or makes one when there is none yet (the file
created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600, linked into place whole:
:mod:`table.files`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from table.keys import KeyFileError, TableKey, generate, key_id as key_id_of, load_private_key, public_pem, \
    verify_signature

from .store import Store

log = structlog.get_logger("table.floor.record")

NOTE_DOMAIN = b"threecard.floor-note/1\n"
ALARM_DOMAIN = b"threecard.floor-alarm/1\n"
#: the fields of an alarm row its hash covers
ALARM_FIELDS = ("alarm_id", "table_id", "source", "kind", "text", "ts", "detail")
#: the fields of a note its hash covers (every column but its signature)
NOTE_FIELDS = ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts", "prev_hash")
ALARM_KIND = "floor_record_edited"


def note_hash(note: dict[str, Any]) -> str:
    """The SHA-256 (hex) of the note's canonical JSON (:data:`NOTE_FIELDS`, keys sorted)."""
    body = {k: note[k] for k in NOTE_FIELDS}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sign_note(key: TableKey, note: dict[str, Any]) -> dict[str, str]:
    """``{"key_id", "sig"}`` for ``note`` (its :data:`NOTE_FIELDS`), signed by the floor ``key``."""
    sig = key.sign(NOTE_DOMAIN + note_hash(note).encode())
    return {"key_id": key.key_id, "sig": base64.b64encode(sig).decode()}


def alarm_hash(alarm: dict[str, Any]) -> str:
    """The SHA-256 (hex) of an alarm row's canonical JSON (:data:`ALARM_FIELDS`, keys sorted)."""
    body = {k: alarm[k] for k in ALARM_FIELDS}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sign_alarm(key: TableKey, alarm: dict[str, Any]) -> dict[str, str]:
    """``{"key_id", "sig"}`` for an alarm row (its :data:`ALARM_FIELDS`), signed by the floor ``key``."""
    sig = key.sign(ALARM_DOMAIN + alarm_hash(alarm).encode())
    return {"key_id": key.key_id, "sig": base64.b64encode(sig).decode()}


@dataclass(frozen=True)
class RecordProblem:
    """One thing wrong with the floor's record: the note numbered ``n`` (or, with
    ``alarm_id``, that floor alarm; ``n`` 0) of ``table_id`` as stored, and ``why``, one line."""

    n: int
    table_id: str | None
    why: str
    alarm_id: str | None = None


def _signature_holds(public: Ed25519PublicKey, kid: str, row: dict[str, Any], signed: bytes) -> str | None:
    """None when ``row``'s ``key_id``/``sig`` sign ``signed`` with ``public`` (id ``kid``), else why not."""
    if not row["sig"]:
        return "carries no floor signature"
    if row["key_id"] != kid:
        return f"is signed by key {str(row['key_id'])[:16]}, not this floor's {kid}"
    try:
        sig = base64.b64decode(str(row["sig"]), validate=True)
    except (binascii.Error, ValueError):
        sig = b""
    if len(sig) != 64 or not verify_signature(public, sig, signed):
        return "was changed after the floor signed it (its signature does not match what it says)"
    return None


def check_notes(store: Store, public: Ed25519PublicKey) -> list[RecordProblem]:
    """Every problem of the notes in ``store`` against the floor's public key: a note
    without a signature, or signed by another key, or whose signature does not match what
    it says now (edited), or whose ``prev_hash`` is not the hash of the note before it (one
    taken out, put in or edited before it), or a gap in the numbers. Empty when the record
    holds. Raises :class:`~table.floor.store.StoreError`."""
    rows = store.query("SELECT " + ", ".join(NOTE_FIELDS) + ", key_id, sig FROM notes ORDER BY n")
    kid = key_id_of(public)
    problems: list[RecordProblem] = []
    prev: dict[str, Any] | None = None
    for row in rows:
        note = dict(zip(NOTE_FIELDS + ("key_id", "sig"), row))
        n, table = int(note["n"]), note["table_id"]
        want_prev = note_hash(prev) if prev is not None else "0" * 64
        if prev is None and n != 1 or prev is not None and n != int(prev["n"]) + 1:
            problems.append(RecordProblem(n, table, f"note {n} follows note {prev['n'] if prev else 'none'}: "
                                                    "notes were taken out"))
        elif note["prev_hash"] != want_prev:
            problems.append(RecordProblem(n, table, f"note {n} does not follow the note before it (prev_hash): "
                                                    "a note before it was changed, taken out or put in"))
        why = _signature_holds(public, kid, note, NOTE_DOMAIN + note_hash(note).encode())
        if why is not None:
            problems.append(RecordProblem(n, table, f"note {n} {why}"))
        prev = note
    return problems


#: rows of alarms already checked, by the hash of everything they hold (a changed row is checked again)
_CHECKED_MAX = 200_000


class RecordCheck:
    """The floor's record checked against its key (``public``): :meth:`check` returns every
    :class:`RecordProblem` of the notes (:func:`check_notes`) and of the floor's own alarms
    (:func:`check_alarms`). An alarm row found good is remembered by the hash of all it
    holds, signature included, so a page's check verifies only rows new or changed since."""

    def __init__(self, public: Ed25519PublicKey, *, alarms: bool = True) -> None:
        self.public = public
        #: check the floor's alarms too (a floor that signs them: :class:`table.floor.ingest.Floor` with its key)
        self.alarms = alarms
        self._good: set[str] = set()

    def check(self, store: Store) -> list[RecordProblem]:
        """Raises :class:`~table.floor.store.StoreError`."""
        problems = check_notes(store, self.public)
        return problems + check_alarms(store, self.public, self._good) if self.alarms else problems


def check_alarms(store: Store, public: Ed25519PublicKey, good: set[str] | None = None) -> list[RecordProblem]:
    """Every floor alarm (source ``floor``) whose signature by the floor key does not hold
    (unsigned, another key, changed since). ``good``: hashes of rows already found good
    (skipped; rows found good are added). Raises :class:`~table.floor.store.StoreError`."""
    kid = key_id_of(public)
    problems = []
    rows = store.query("SELECT " + ", ".join(ALARM_FIELDS) + ", key_id, sig FROM alarms WHERE source = 'floor' "
                       "ORDER BY ts")
    for row in rows:
        alarm = dict(zip(ALARM_FIELDS + ("key_id", "sig"), row))
        whole = hashlib.sha256(json.dumps(alarm, sort_keys=True).encode()).hexdigest()
        if good is not None and whole in good:
            continue
        why = _signature_holds(public, kid, alarm, ALARM_DOMAIN + alarm_hash(alarm).encode())
        if why is None:
            if good is not None:
                if len(good) >= _CHECKED_MAX:
                    good.clear()
                good.add(whole)
            continue
        problems.append(RecordProblem(0, alarm["table_id"], f"the floor's alarm {alarm['alarm_id']} "
                                                            f"({str(alarm['kind'])[:40]}) {why}",
                                      alarm_id=str(alarm["alarm_id"])))
    return problems


def insert_alarm(tx: Any, key: TableKey | None, alarm: dict[str, Any]) -> int:
    """Insert the alarm row ``alarm`` (:data:`ALARM_FIELDS`) once (``ON CONFLICT DO NOTHING``),
    signed by ``key`` when given (the floor's own: source ``floor``). Returns the row count."""
    signed = sign_alarm(key, alarm) if key is not None else {"key_id": None, "sig": None}
    return tx.execute("INSERT INTO alarms (" + ", ".join(ALARM_FIELDS) + ", key_id, sig) VALUES "
                      "(?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (alarm_id) DO NOTHING",
                      tuple(alarm[k] for k in ALARM_FIELDS) + (signed["key_id"], signed["sig"]))


def raise_alarms(store: Store, problems: list[RecordProblem], *, key: TableKey, now: str) -> int:
    """An alarm row (kind :data:`ALARM_KIND`, source ``floor``, signed by ``key``) per
    problem, each once (its id is a digest of what it says; raised again if its row is
    deleted); logged. Returns how many were new. Raises :class:`~table.floor.store.StoreError`."""
    new = 0
    with store.transaction() as tx:
        for p in problems:
            aid = hashlib.sha256(f"record\x1f{p.n}\x1f{p.alarm_id}\x1f{p.why}".encode()).hexdigest()[:32]
            new += max(0, insert_alarm(tx, key, {
                "alarm_id": aid, "table_id": p.table_id, "source": "floor", "kind": ALARM_KIND,
                "text": f"the floor's record was edited: {p.why}"[:1000], "ts": now,
                "detail": json.dumps({"note": p.n or None, "alarm_id": p.alarm_id, "why": p.why},
                                     separators=(",", ":"))}))
    for p in problems:
        log.error("floor_record_edited", note=p.n or None, alarm_id=p.alarm_id, table_id=p.table_id, why=p.why)
    return new


def floor_key(path: str | Path) -> tuple[TableKey, bool]:
    """The floor key at ``path`` and whether it was made just now: a floor with no key yet
    gets a new one (PEM, 0600, written to a temporary file created ``O_EXCL | O_NOFOLLOW``
    and linked into place, so an existing key is never replaced and two floors starting
    together end up with one; its public half ``PATH.pub``, 0644, for the tables' ``[floor]
    public_key``). Raises :class:`~table.keys.KeyFileError` for a key file that cannot be
    read or used, or a folder it cannot be made in."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        key = generate()
        tmp = p.with_name(f".{p.name}.{secrets.token_hex(6)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(tmp, flags, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, key.private_pem())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, p)  # fails if a key appeared meanwhile: that one is kept
                made = True
            except FileExistsError:
                made = False
            finally:
                os.unlink(tmp)
        except OSError as exc:
            raise KeyFileError(f"floor.key_file: no key at {p} and none can be made there: {exc}") from None
        if made:
            pub = p.with_name(p.name + ".pub")
            try:
                fd = os.open(pub, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as f:
                    f.write(public_pem(key.public))
            except FileExistsError:
                log.warning("floor_key_public_kept", path=str(pub),
                            what="a public key file was already there; it is not this new key's")
            except OSError as exc:
                raise KeyFileError(f"floor.key_file: cannot write {pub}: {exc}") from None
            log.warning("floor_key_created", path=str(p), key_id=key.key_id, public=str(pub),
                        what="this floor had no key: give its public half to the tables ([floor] public_key)")
            return TableKey(key.private, str(p)), True
    return load_private_key(p), False
