"""The table's journal: an append-only record in SQLite that survives power loss and
cannot be changed, cut short or rolled back unnoticed by someone without the table key.

Every custody and round transition is written here *before* it is acted on
(58 Pa. Code 816a.1: results are recorded before they are posted).
The threat model, the key's life and the exit codes are in ``docs/journal.md``.

Durability
    WAL mode with ``synchronous=FULL``: a committed entry survives a power
    cut. The entries one step of the procedure produces commit together, in
    one transaction (:meth:`Journal.batch`). One process writes a journal at
    a time (an exclusive ``flock`` on the file).

Integrity (format 4)
    * **Public chain.** ``h_0`` is 32 zero bytes and ``h_i = SHA-256(h_{i-1} ||
      canonical JSON of [seq, ts, kind, round_id, deck_id, body])``. It is not
      stored: anyone recomputes it from the rows.
    * **Signed checkpoints.** At every round's close, at the table's opening
      and at shutdown the controller appends a ``checkpoint`` entry signed with
      the table key (Ed25519): table id, ``seq`` (the last entry it covers),
      ``head`` = ``h_seq``, the first 8 bytes of ``h_i`` for every entry since the
      previous checkpoint (``digests``; checkpoint v2 keeps 4 bytes, v1 kept 8:
      they name the entry changed, the signed ``head`` catches it), the rounds opened so far and the key
      id. The hashes are the controller's own, computed as it wrote, so an entry
      edited and re-chained afterwards breaks the signature, and the digests
      name the first entry changed. The latest checkpoint is also kept in the
      head file ``JOURNAL.head`` and published off the journal's own files (the
      event stream, MQTT): an anchor. ``verify`` with the table's public key
      checks all this without the private key.
    * **Keyed tail.** Each row also carries ``mac`` = the first 16 bytes of
      ``HMAC-SHA256(mac key, previous mac || the entry)``, the MAC key derived from
      the table key. Entries after the last checkpoint (a round in progress, a
      controller killed mid-round) are authenticated by it: a restarted
      controller checks them before it signs over them (:meth:`Journal.check_tail`).
    * **Sealed fields.** Card faces recorded before the reveal are encrypted
      (ChaCha20-Poly1305) under a key derived from the table key for that
      round; the reveal or void entry discloses that round key, so once a round
      is over anyone can open its sealed fields (816a.1: nobody reads a sealed
      card before the decisions it decides are final). A card's sealed field is
      its face alone; its commitment's nonce is derived from the seal's fresh
      nonce and the round key (:func:`commit_nonce`).

Size (format 4)
    Entries carry what cannot be recomputed: a card's commitment in base64url,
    no citation text or hand description in a settlement, one ``closed`` entry
    for the close. Each body is stored deflated with the format's preset
    dictionary (:func:`encode_body`; the chain hashes its JSON, so format 3's
    hashes and signatures hold on a migrated file, :func:`migrate`). The WAL is
    cut back to ``WAL_SIZE_LIMIT`` after checkpoints and truncated at
    :meth:`Journal.close`. ``docs/journal.md`` says where a round's bytes go.

Schema::

    meta(key TEXT PRIMARY KEY, value TEXT)       -- format, table_id, zdict_sha256
    entries(seq INTEGER PRIMARY KEY,             -- 1, 2, 3 ... without gaps
            ts INTEGER,                          -- UTC, microseconds since the Unix epoch
            kind TEXT, round_id TEXT, deck_id TEXT,
            body BLOB,                           -- canonical JSON of the entry's fields, deflated
            mac BLOB)                            -- 16 bytes (see above)

    A reader's connection sees every body as its JSON text through :func:`readable`
    (:func:`connect`); ``tablectl audit export`` prints every entry decoded.

The journal never holds the order of a shuffled deck: only cards as the shoe
read them, as they were dealt.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import errno
import fcntl
import functools
import hashlib
import hmac
import json
import os
import secrets
import signal
import sqlite3
import _signal
import stat
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, NoReturn

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from .files import UnsafeFile, json_lines, read_regular, write_atomic
from .journal_dictionary import DICTIONARY
from .keys import TableKey, key_id, verify_signature

FORMAT = 4
#: the earlier formats ``tablectl audit migrate`` converts (:func:`migrate`): format 3 holds the
#: same rows with every body as JSON text
MIGRATES_FROM = (1, 2, 3)
GENESIS = bytes(32)
#: SHA-256 (hex) of format 4's preset deflate dictionary, recorded in ``meta.zdict_sha256``
ZDICT_SHA256 = hashlib.sha256(DICTIONARY).hexdigest()
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,
    kind TEXT NOT NULL,
    round_id TEXT,
    deck_id TEXT,
    body NOT NULL,
    mac BLOB NOT NULL
);
"""
#: the kind of a signed checkpoint's entry
CHECKPOINT_KIND = "checkpoint"
#: the largest body a stored entry may inflate to (a hostile file's deflate bomb stops here)
MAX_BODY_BYTES = 16 << 20
#: deflate's parameters for a stored body (part of the format: :func:`encode_body`)
_DEFLATE = (9, zlib.DEFLATED, -14, 4, zlib.Z_DEFAULT_STRATEGY)
#: key-derivation purposes (:meth:`table.keys.TableKey.derive`)
SEAL_PURPOSE = "threecard/journal-seal/1"
MAC_PURPOSE = "threecard/journal-mac/1"
CHECKPOINT_VERSION = 3
#: the entry kind that opens (``{"open": day, "previous": ...}``) and closes (``{"close": day}``)
#: a gaming day's segment (docs/journal.md, "Gaming days")
SEGMENT_KIND = "segment"
#: bytes of ``h_i`` a checkpoint's ``digests`` keep per entry: v1 8, v2 and v3 4 (they only
#: name the first entry changed; the signed ``head`` is the whole 32-byte hash)
DIGEST_BYTES = {1: 8, 2: 4, 3: 4}
DIGEST_LEN = DIGEST_BYTES[CHECKPOINT_VERSION]
#: the label of a card commitment's nonce (:func:`commit_nonce`)
COMMIT_NONCE_LABEL = b"threecard/commit-nonce/1"
#: the page size of a new journal file
PAGE_SIZE = 8192
#: WAL bytes kept on disk once a checkpoint has emptied it (``PRAGMA journal_size_limit``)
WAL_SIZE_LIMIT = 256 << 10


class JournalError(Exception):
    """The journal cannot be opened or read (missing, not a journal, corrupt, locked)."""


class JournalWriteError(JournalError):
    """An entry could not be written: ``reason`` is ``"disk full"``, ``"file size limit"``,
    ``"I/O error"``, ``"read-only"`` or ``"locked"``. Nothing was recorded; the caller
    must not act on what it meant to record."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class JournalFormatError(JournalError):
    """The file is a journal of a format this tablectl does not read (``path``, ``found``: the
    format its ``meta`` names, None when it names none). An earlier format that
    ``tablectl audit migrate`` converts says so (``migratable``)."""

    def __init__(self, path: Path, found: str | None) -> None:
        self.path, self.found = path, found
        self.migratable = found in {str(f) for f in MIGRATES_FROM}
        super().__init__(_format_mismatch(path, found))


class SealError(JournalError):
    """A sealed field cannot be opened: no key, the wrong key, or an altered blob."""


# -- encodings --------------------------------------------------------------------------


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)
#: a str as JSON text, as ``_canonical`` writes it (ensure_ascii)
_encode_str = json.encoder.encode_basestring_ascii


def _canonical(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces, ASCII): the one encoding of an entry."""
    return _ENCODER.encode(obj)


def b64(data: bytes) -> str:
    """URL-safe base64 without padding (the journal's and the stream's binary fields)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    """Inverse of :func:`b64`; raises ``ValueError`` for text that is not base64url."""
    if not isinstance(text, str):
        raise ValueError("expected base64url text")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ts_text(ts_us: int) -> str:
    """An entry's time (µs since the epoch, UTC) as ISO 8601 with microseconds."""
    return _dt.datetime.fromtimestamp(ts_us / 1e6, _dt.timezone.utc).isoformat(timespec="microseconds")


def _now_us() -> int:
    return int(_dt.datetime.now(_dt.timezone.utc).timestamp() * 1_000_000)


def _json_str(text: str | None) -> str:
    return "null" if text is None else _encode_str(text)


def _material(seq: int, ts: int, kind: str, round_id: str | None, deck_id: str | None, body_json: str) -> bytes:
    """``canonical JSON of [seq, ts, kind, round_id, deck_id, body_json]`` (module docstring),
    built from the body's JSON text with string escapes only: byte for byte what
    ``_canonical`` gives for that list, without encoding the entry a second time."""
    if type(seq) is not int or type(ts) is not int:  # bool or a float would encode otherwise
        return _canonical([seq, ts, kind, round_id, deck_id, body_json]).encode("utf-8")
    return (f"[{seq},{ts},{_encode_str(kind)},{_json_str(round_id)},{_json_str(deck_id)},"
            f"{_encode_str(body_json)}]").encode("utf-8")


def encode_body(body_json: str) -> bytes:
    """A body's stored form in format 4: raw deflate (RFC 1951) of its canonical JSON, level 9,
    a 16 KB window, memLevel 4, with the format's preset dictionary
    (:data:`table.journal_dictionary.DICTIONARY`). One JSON text has one stored form:
    :func:`verify` checks a stored body is exactly this of the JSON it inflates to."""
    c = zlib.compressobj(*_DEFLATE, zdict=DICTIONARY)
    return c.compress(body_json.encode("utf-8")) + c.flush()


def stored_body(kind: str, body_json: str) -> bytes:
    """What format 4 stores as an entry's body (of any ``kind``): :func:`encode_body`. A body
    stored as JSON text (as format 3 stored every body) still reads and verifies: every
    byte of it is what the chain hashes."""
    return encode_body(body_json)


def decode_body(stored: Any) -> str:
    """The canonical JSON text of a stored body (text: as it is; a blob: inflated with the
    format's dictionary). Raises ``ValueError`` for a blob that is not one whole deflate
    stream of UTF-8 (trailing bytes, cut short, larger than :data:`MAX_BODY_BYTES`) and
    ``TypeError`` for a body of another type."""
    if isinstance(stored, str):
        return stored
    if not isinstance(stored, bytes):
        raise TypeError(f"a body of type {type(stored).__name__}")
    d = zlib.decompressobj(-14, zdict=DICTIONARY)
    try:
        out = d.decompress(stored, MAX_BODY_BYTES)
    except zlib.error as exc:
        raise ValueError(f"the body does not inflate: {exc}") from None
    if not d.eof or d.unused_data or d.unconsumed_tail:
        raise ValueError("the body is not one whole deflate stream")
    return out.decode("utf-8")


def body_problem(stored: Any) -> str | None:
    """Why a stored body is not in its one stored form (None when it is): a blob must be
    :func:`encode_body` of the JSON it inflates to, so no byte of it is outside what the
    chain's hash covers (that JSON)."""
    return _checked_body(stored)[1]


def _checked_body(stored: Any) -> tuple[str, None] | tuple[None, str]:
    """(the JSON text, None) of a stored body in its one stored form, else (None, why not):
    :func:`body_problem` and the text at one inflate."""
    try:
        text = decode_body(stored)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        return None, f"its body does not read ({exc})"
    if isinstance(stored, bytes) and encode_body(text) != stored:
        return None, "its stored body is not the one deflate of the JSON it holds"
    return text, None


def _sql_body(stored: Any) -> Any:
    try:
        return decode_body(stored)
    except (ValueError, TypeError, UnicodeDecodeError):
        return None  # NOT NULL in the file: a reader sees a body that does not read (verify names it)


def readable(db: sqlite3.Connection) -> sqlite3.Connection:
    """Let ``db`` (a connection to a journal file) read entries as format 3 did: a temporary
    view ``entries`` (the connection's own, nothing is written to the file) over
    ``main.entries`` with every body as its JSON text, so ``json_extract(body, ...)`` and
    ``json.loads(body)`` work. Returns ``db``. Writes go to ``main.entries``."""
    db.create_function("journal_body", 1, _sql_body, deterministic=True)
    try:
        db.execute("CREATE TEMP VIEW IF NOT EXISTS entries AS SELECT seq, ts, kind, round_id, deck_id, "
                   "journal_body(body) AS body, mac FROM main.entries")
    except sqlite3.Error:
        db.close()
        raise
    except (ValueError, UnicodeError) as exc:  # a damaged file's schema: say it as SQLite would
        db.close()
        raise sqlite3.DatabaseError(f"the file's schema does not read: {exc}") from None
    return db


def connect(path: str | Path, *, uri_options: str = "mode=ro", **kw: Any) -> sqlite3.Connection:
    """A read-only connection to the journal file ``path`` (``uri_options``: the URI's query,
    e.g. ``mode=ro&immutable=1``), made :func:`readable`."""
    return readable(sqlite3.connect(f"file:{path}?{uri_options}", uri=True, **kw))


def chain_next(prev: bytes, seq: int, ts: int, kind: str, round_id: str | None, deck_id: str | None,
               body_json: str) -> bytes:
    """``h_seq`` from ``h_{seq-1}`` (the public chain, see the module docstring)."""
    return hashlib.sha256(prev + _material(seq, ts, kind, round_id, deck_id, body_json)).digest()


def _mac_next(mac_key: bytes, prev: bytes, material: bytes) -> bytes:
    return hmac.new(mac_key, prev + material, hashlib.sha256).digest()[:16]


@dataclass(frozen=True)
class Entry:
    """One journal entry; ``body`` is the decoded JSON object; ``ts`` ISO 8601 (UTC).
    ``body_json``: the body's canonical JSON as stored, on entries handed to
    :meth:`Journal.on_commit` listeners (a listener in another thread decodes its own
    copy rather than share the writer's objects); None on entries read back."""

    seq: int
    ts: str
    kind: str
    round_id: str | None
    deck_id: str | None
    body: dict[str, Any]
    body_json: str | None = field(default=None, compare=False, repr=False)


# -- sealing ----------------------------------------------------------------------------


def seal_key(key: TableKey, table_id: str, round_id: str | None) -> bytes:
    """The 32-byte key that seals ``round_id``'s card faces (``None``: between rounds)."""
    return key.derive(SEAL_PURPOSE, f"{table_id}\x00{round_id or ''}".encode())


def _aad(table_id: str, seq: int, kind: str, round_id: str | None) -> bytes:
    """``canonical JSON of [table_id, seq, kind, round_id]``, built with string escapes only
    (byte for byte what ``_canonical`` gives, as :func:`_material`)."""
    if type(seq) is not int or not isinstance(table_id, str) or not isinstance(kind, str):
        return _canonical([table_id, seq, kind, round_id]).encode()
    return f"[{_encode_str(table_id)},{seq},{_encode_str(kind)},{_json_str(round_id)}]".encode()


def seal(k: bytes, table_id: str, seq: int, kind: str, round_id: str | None, fields: dict[str, Any],
         nonce: bytes | None = None) -> str:
    """``fields`` encrypted under round key ``k``, bound to the entry's place: base64url of a
    12-byte random nonce and the ChaCha20-Poly1305 ciphertext. ``nonce``: one the caller
    drew (:func:`fresh_seal_nonce`) to derive a commitment's nonce from before sealing;
    never one used before."""
    if nonce is None:
        nonce = fresh_seal_nonce()
    if len(nonce) != 12:
        raise ValueError("a seal nonce is 12 bytes")
    return b64(nonce + ChaCha20Poly1305(k).encrypt(nonce, _canonical(fields).encode(),
                                                 _aad(table_id, seq, kind, round_id)))


def fresh_seal_nonce() -> bytes:
    """A fresh 12-byte ChaCha20-Poly1305 nonce from the operating system's CSPRNG."""
    return secrets.token_bytes(12)


def commit_nonce(k: bytes, seal_nonce: bytes) -> str:
    """The nonce a card's commitment hides its card with (32 hex digits): the first 16
    bytes of ``HMAC-SHA256(k, COMMIT_NONCE_LABEL || seal_nonce)``, ``k`` the round's seal
    key, ``seal_nonce`` the fresh random nonce of the card's sealed blob. Nobody without
    ``k`` can tell it from random (so the commitment hides the card exactly as long as
    the sealed face stays sealed); the round's reveal or void discloses ``k``, and with
    it every opening. Not stored: it is recomputed from the blob."""
    return hmac.new(k, COMMIT_NONCE_LABEL + seal_nonce, hashlib.sha256).digest()[:16].hex()


def card_opening(k: bytes, table_id: str, entry: Entry) -> dict[str, Any]:
    """A ``card_read`` entry's opening with round key ``k``: its sealed fields (``card``)
    and the nonce its commitment hid (``nonce``, :func:`commit_nonce`). Raises
    :class:`SealError`."""
    fields = unseal(k, table_id, entry)
    if "nonce" not in fields:
        fields["nonce"] = commit_nonce(k, unb64(entry.body["sealed"])[:12])
    return fields


def unseal(k: bytes, table_id: str, entry: Entry) -> dict[str, Any]:
    """The sealed fields of ``entry`` (its ``body["sealed"]``) opened with round key ``k``.
    Raises :class:`SealError` for the wrong key or an altered blob."""
    try:
        blob = unb64(entry.body["sealed"])
        out = ChaCha20Poly1305(k).decrypt(blob[:12], blob[12:], _aad(table_id, entry.seq, entry.kind, entry.round_id))
        return json.loads(out)
    except (KeyError, ValueError, InvalidTag) as exc:
        raise SealError(f"entry {entry.seq}: sealed fields cannot be opened ({type(exc).__name__})") from None


# -- the journal ----------------------------------------------------------------------------

_SQLITE_REASONS = {
    "SQLITE_FULL": "disk full",
    "SQLITE_READONLY": "read-only",
    "SQLITE_BUSY": "locked",
    "SQLITE_LOCKED": "locked",
}


def _past_size_limit(path: Path | None) -> bool:
    """True when a write failed because a journal file reached the process's file size
    limit (RLIMIT_FSIZE): SQLite reports that as a plain I/O error."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        return False
    if path is None or soft == resource.RLIM_INFINITY:
        return False
    sizes = []
    for suffix in ("", "-wal"):
        try:
            sizes.append(os.stat(f"{path}{suffix}").st_size)
        except OSError:
            pass
    return any(size + 65536 >= soft for size in sizes)


def _write_error(exc: BaseException, what: str, path: Path | None = None) -> JournalWriteError:
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        reason = next((r for k, r in _SQLITE_REASONS.items() if name.startswith(k)), None)
        if reason is None:
            text = str(exc).lower()
            reason = ("disk full" if "full" in text else "read-only" if "readonly" in text or "read-only" in text
                      else "I/O error")
    else:
        e = getattr(exc, "errno", None)
        reason = {errno.ENOSPC: "disk full", errno.EFBIG: "file size limit", errno.EROFS: "read-only",
                  errno.EDQUOT: "disk full"}.get(e, "I/O error")
    if reason == "I/O error" and _past_size_limit(path):
        reason = "file size limit"
    return JournalWriteError(f"cannot write {what}: {reason} ({exc})", reason)


def state_digest(state: dict[str, Any]) -> str:
    """SHA-256 (hex) of a checkpoint's recovery state in canonical JSON: what a v3
    checkpoint signs of its own entry's ``state``."""
    return hashlib.sha256(_canonical(state).encode("utf-8")).hexdigest()


def checkpoint_entry_problem(seq: int, ts: int, round_id: Any, deck_id: Any, body: str) -> str | None:
    """Why the ``checkpoint`` entry stored as (``seq``, ``ts``, ``round_id``, ``deck_id``,
    ``body``) is not exactly what its own signature covers, or None when it is.

    A v3 checkpoint signs the chain up to the entry before it *and* its own entry:
    the entry's body must be exactly the canonical JSON of
    ``{"checkpoint": signed, "state": state}``, with ``state`` hashing to the signed
    ``state_sha256``, ``ts`` the signed time, no round or deck, and the signature in
    its one canonical base64url spelling. So a change to any byte of the entry is
    found with the public key alone (the signature itself is checked by the caller).
    Older versions (v1, v2) did not sign their own state: they are reported as such."""
    try:
        obj = json.loads(body)
    except ValueError as exc:
        return f"its body is not JSON ({exc})"
    if not isinstance(obj, dict) or not isinstance(obj.get("checkpoint"), dict):
        return "its body holds no checkpoint"
    cp = obj["checkpoint"]
    if not isinstance(cp.get("v"), int) or cp["v"] < 3:
        return f"a v{cp.get('v')} checkpoint, which does not sign its own recovery state"
    if set(obj) != {"checkpoint", "state"} or not isinstance(obj["state"], dict):
        return "its body holds more or less than the signed checkpoint and its state"
    if body != _canonical(obj):
        return "its body is not the canonical JSON that was written"
    if state_digest(obj["state"]) != cp.get("state_sha256"):
        return "its recovery state is not the one signed"
    if ts_text(ts) != cp.get("ts"):
        return "its time is not the one signed"
    if round_id is not None or deck_id is not None:
        return "it names a round or a deck, which a checkpoint never does"
    sig = cp.get("sig")
    try:
        if not isinstance(sig, str) or b64(unb64(sig)) != sig:
            return "its signature is not spelled canonically"
    except ValueError:
        return "its signature is not base64url"
    return None


def head_path(path: str | Path) -> Path:
    """The file holding the journal's latest signed checkpoint: ``JOURNAL.head``."""
    p = Path(path)
    return p.with_name(p.name + ".head")


class Journal:
    """An open journal file. Thread-safe; one writer process at a time.

    ``path``: the SQLite file; its folder must exist (created 0600, never through a
    symlink). ``key``: the table key: signs checkpoints, keys the MAC chain,
    seals card faces (None: a reader, or a writer that cannot seal). ``table_id``:
    bound into signatures and seals (a new journal records it; an existing one
    keeps its own). ``read_only``: open for reading only (appends fail), without
    the writer's lock. ``group``: give this group read access (mode 0640: the
    auditors' group, ``docs/journal.md``); otherwise files are 0600.
    Raises :class:`JournalError` when it cannot be opened, is not a journal, or
    another process writes it.
    """

    def __init__(self, path: str | Path, *, key: TableKey | None = None, table_id: str = "table",
                 read_only: bool = False, group: int | None = None, clock: Any = None) -> None:
        self.path = Path(path)
        self.group = group
        #: the wall clock entries are timed by: a callable giving µs since the epoch (UTC)
        self.now_us = clock or _now_us
        self._segment: Entry | None | bool = False  # the segment's opening entry, once read
        self.key = key
        self.read_only = read_only
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._batch_depth = 0
        self._batch_state: tuple | None = None
        db = None
        try:
            if read_only:
                if not self.path.is_file():
                    raise OSError(f"no journal file at {self.path}")
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None,
                                     check_same_thread=False)
            else:
                if not self.path.parent.is_dir():
                    raise OSError(f"folder {self.path.parent} does not exist")
                self._lock_fd = self._open_locked(group)
                db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
                # 8 KB pages for a new journal (an existing one keeps its own): a row that does
                # not fit a page starts the next one, and a round's settlement and checkpoint
                # are ~1.3 KB each; the WAL is checkpointed every ~4 MB as with 4 KB pages.
                db.execute(f"PRAGMA page_size={PAGE_SIZE}")
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(f"PRAGMA wal_autocheckpoint={(4 << 20) // PAGE_SIZE}")
                db.execute("PRAGMA synchronous=FULL")
                # A checkpointed WAL is cut back to this size (it would otherwise stay as
                # large as it ever grew, ~4 MB, beside a journal of a few hundred KB).
                db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
                if not _has_table(db, "entries"):
                    db.executescript(SCHEMA)
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall()) if _has_table(db, "meta") else {}
            if not meta and _has_table(db, "entries") and "hash" in _columns(db, "entries"):
                raise JournalFormatError(self.path, "1")
            if not meta and db.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None:
                # only an empty file is a new journal: one with entries and no meta had its rows
                # deleted (a format 3 journal's, say: it is migrated, never written over)
                raise JournalError(f"{self.path} is not a journal (no format in its meta)")
            if not read_only and not meta:
                db.execute("INSERT INTO meta VALUES ('format', ?), ('table_id', ?), ('zdict_sha256', ?)",
                           (str(FORMAT), table_id, ZDICT_SHA256))
                meta = {"format": str(FORMAT), "table_id": table_id, "zdict_sha256": ZDICT_SHA256}
            if meta and meta.get("format") != str(FORMAT):
                raise JournalFormatError(self.path, meta.get("format"))
            if not read_only and meta.get("migrated_from") == "1":
                raise JournalError(f"{self.path} is a format 1 history migrated to format {FORMAT}: a closed record "
                                   "(format 1's chain, nothing signed it) no table writes to; start a new journal")
            if meta and meta.get("zdict_sha256") != ZDICT_SHA256:
                raise JournalError(f"{self.path}: its bodies' dictionary (meta.zdict_sha256) is not format {FORMAT}'s")
            readable(db)
            self.table_id = meta.get("table_id", table_id)
            rows = db.execute("SELECT seq, mac FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        except (sqlite3.Error, OSError, JournalError) as exc:
            if db is not None:
                db.close()
            self._unlock()
            if isinstance(exc, JournalError):
                raise
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        self._db = db
        self._mac_key = key.derive(MAC_PURPOSE, self.table_id.encode()) if key is not None else None
        self._seq, self._mac = (rows[0], bytes(rows[1])) if rows else (0, bytes(16))
        # The public chain up to what this process has seen, and the digests since the
        # last checkpoint: computed once from the file, then from what we write.
        self._chain: bytes | None = None
        self._covered = 0  # the last seq the last signed checkpoint covers
        self._digests: list[bytes] = []  # h_i[:8] for the entries after it
        self._pending_head: dict[str, Any] | None = None  # written once the batch commits
        self._seal_keys: dict[str | None, bytes] = {}
        self._listeners: list[Any] = []  # on_commit callbacks
        #: called (under the journal's lock, in the checkpointing thread) just before each checkpoint
        #: is signed, so what they append is covered by it (the floor's receipts: table/floor_anchor.py)
        self.before_checkpoint: list[Any] = []
        self._uncommitted: list[Entry] = []  # appended inside the open batch

    # -- opening ----------------------------------------------------------------------------

    def _open_locked(self, group: int | None) -> int:
        mode = 0o640 if group is not None else 0o600
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags, mode)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise JournalError(f"{self.path} is a symlink; refusing to follow it") from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise JournalError(f"{self.path} is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise JournalError(f"{self.path} is being written by another process (a running controller?)") from None
        if group is not None:
            with contextlib.suppress(OSError):
                os.fchown(fd, -1, group)
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & mode or mode)
        return fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def on_commit(self, callback: Any) -> None:
        """Call ``callback(entries)`` with each group of entries just made durable (a list
        of :class:`Entry` with ``body_json`` set, in sequence order), in the writing
        thread, under the journal's lock, right after the commit: the event stream is
        fed from here, from memory, never by reading the file back. It
        must be quick and must not raise (an exception is logged by the caller's
        thread and the entries stay committed) nor write to this journal."""
        with self._lock:
            self._listeners.append(callback)

    def remove_listener(self, callback: Any) -> None:
        """Stop calling ``callback`` (see :meth:`on_commit`); unknown callbacks are ignored."""
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def _committed(self, entries: list[Entry]) -> None:
        for cb in list(self._listeners):
            try:
                cb(entries)
            except Exception:  # noqa: BLE001 - a listener's bug must not undo a durable write
                import logging

                logging.getLogger("table.journal").exception("journal listener failed")

    @property
    def in_batch(self) -> bool:
        """True inside :meth:`batch`: what is appended is not durable yet."""
        return self._batch_depth > 0

    @property
    def last_seq(self) -> int:
        """Sequence number of the last entry (0 for an empty journal)."""
        return self._seq

    # -- writing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self) -> Iterator["Journal"]:
        """Commit every entry appended inside the block in one transaction (one step of
        the procedure). Nothing inside is durable until the block ends; on an
        exception nothing of it is recorded. Raises :class:`JournalWriteError`."""
        with self._lock:
            if self._batch_depth == 0:
                self._ensure_chain()
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise _write_error(exc, f"journal {self.path}", self.path) from exc
                self._batch_state = (self._seq, self._mac, self._chain, list(self._digests), self._covered)
            self._batch_depth += 1
            try:
                yield self
            except BaseException:
                self._batch_depth -= 1
                if self._batch_depth == 0:
                    self._rollback()
                raise
            self._batch_depth -= 1
            if self._batch_depth == 0:
                with _signals_held():  # committed and noted together (see _signals_held)
                    try:
                        self._db.execute("COMMIT")
                    except sqlite3.Error as exc:
                        self._rollback()
                        raise _write_error(exc, f"journal {self.path}", self.path) from exc
                    self._batch_state = None
                done, self._uncommitted = self._uncommitted, []
                if done and self._listeners:
                    self._committed(done)
                if self._pending_head is not None:
                    signed, self._pending_head = self._pending_head, None
                    self.write_head(signed)

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("ROLLBACK")
        if self._batch_state is not None:
            self._seq, self._mac, self._chain, self._digests, self._covered = self._batch_state
            self._batch_state = None
        self._pending_head = None
        self._uncommitted = []

    def append(self, kind: str, *, round_id: str | None = None, deck_id: str | None = None,
               sealed: dict[str, Any] | None = None, seal_nonce: bytes | None = None, _ts: int | None = None,
               **body: Any) -> Entry:
        """Write one entry and commit it durably before returning (unless inside
        :meth:`batch`, which commits at its end).

        ``body`` must be JSON-serialisable. ``sealed``: fields encrypted under the
        round's seal key (card faces before the reveal); needs the table key.
        ``seal_nonce``: the fresh nonce to seal them with (:func:`fresh_seal_nonce`),
        when the caller derived a commitment's nonce from it (:meth:`commit_nonce`).
        Raises :class:`JournalWriteError` if the write fails (nothing recorded).
        ``_ts``: the entry's time (µs), for :meth:`checkpoint`, which signs it.
        """
        if self.read_only:
            raise JournalWriteError(f"journal {self.path} is open read-only", "read-only")
        if sealed is not None and self.key is None:
            raise JournalError("sealing a field needs the table key")
        ts = self.now_us() if _ts is None else _ts
        with self._lock:
            self._ensure_chain()
            seq = self._seq + 1
            if sealed is not None:
                body = {**body, "sealed": seal(self.seal_key(round_id), self.table_id, seq, kind, round_id, sealed,
                                               seal_nonce)}
            body_json = _canonical(body)
            material = _material(seq, ts, kind, round_id, deck_id, body_json)
            mac = _mac_next(self._mac_key, self._mac, material) if self._mac_key else bytes(16)
            # The row and the chain in memory move together (Ctrl-C waits); inside a batch
            # nothing is committed before its COMMIT, and an interrupt rolls both back.
            with _signals_held() if self._batch_depth == 0 else contextlib.nullcontext():
                try:
                    self._db.execute("INSERT INTO main.entries (seq, ts, kind, round_id, deck_id, body, mac) "
                                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                                     (seq, ts, kind, round_id, deck_id, stored_body(kind, body_json), mac))
                except sqlite3.Error as exc:
                    raise _write_error(exc, f"journal entry {seq} to {self.path}", self.path) from exc
                assert self._chain is not None
                self._chain = hashlib.sha256(self._chain + material).digest()
                self._digests.append(self._chain[:8])
                self._seq, self._mac = seq, mac
            entry = Entry(seq, ts_text(ts), kind, round_id, deck_id, body, body_json)
            if self._batch_depth:
                self._uncommitted.append(entry)
            elif self._listeners:
                self._committed([entry])
        return entry

    def seal_key(self, round_id: str | None) -> bytes:
        """The seal key of ``round_id`` (cached); needs the table key."""
        if self.key is None:
            raise SealError("no table key: sealed fields cannot be written or opened")
        k = self._seal_keys.get(round_id)
        if k is None:
            if len(self._seal_keys) > 64:
                self._seal_keys.clear()
            k = self._seal_keys[round_id] = seal_key(self.key, self.table_id, round_id)
        return k

    def commit_nonce(self, round_id: str | None, seal_nonce: bytes) -> str:
        """The commitment nonce of a card of ``round_id`` sealed with ``seal_nonce``
        (:func:`commit_nonce`); needs the table key."""
        return commit_nonce(self.seal_key(round_id), seal_nonce)

    def unseal(self, entry: Entry) -> dict[str, Any]:
        """The sealed fields of ``entry`` ({} when it has none), opened with the table key;
        a card's opening carries its commitment's ``nonce`` too. Raises :class:`SealError`."""
        if "sealed" not in entry.body:
            return {}
        k = self.seal_key(entry.round_id)
        return card_opening(k, self.table_id, entry) if entry.kind == "card_read" else unseal(k, self.table_id, entry)

    def _ensure_chain(self) -> None:
        """Pick up the public chain where the last checkpoint left it, and the digests
        of the entries after it (once per process; then from what this process
        appends). The checkpoint's own head is taken as given: :func:`verify`
        checks it against the whole journal."""
        if self._chain is not None:
            return
        h, covered = GENESIS, 0
        row = self._db.execute("SELECT seq, body FROM entries WHERE kind='checkpoint' ORDER BY seq DESC LIMIT 1"
                               ).fetchone()
        opening = self.segment
        if row is None and opening is not None:  # a gaming day's segment, not signed yet
            h, covered = bytes.fromhex(opening.body["previous"]["head"]), opening.seq - 1
        if row is not None:
            try:
                cp = json.loads(row[1])["checkpoint"]
                h, covered = bytes.fromhex(cp["head"]), int(cp["seq"])
            except (ValueError, KeyError, TypeError) as exc:
                raise JournalError(f"{self.path}: checkpoint entry {row[0]} is unreadable: {exc}") from None
        digests: list[bytes] = []
        for seq, ts, kind, rid, did, body in self._db.execute(
                "SELECT seq, ts, kind, round_id, deck_id, body FROM entries WHERE seq > ? ORDER BY seq", (covered,)):
            h = chain_next(h, seq, ts, kind, rid, did, body)
            digests.append(h[:8])
        self._chain, self._digests, self._covered = h, digests, covered

    def checkpoint(self, **state: Any) -> dict[str, Any]:
        """Sign the chain head and append a ``checkpoint`` entry (then write the head
        file). ``state``: what recovery needs to resume without reading what came
        before (custody, counts). Returns the signed checkpoint (as published:
        the event stream and MQTT carry it). Needs the table key. Raises
        :class:`JournalWriteError`."""
        if self.key is None:
            raise JournalError("a checkpoint needs the table key")
        with self._lock:
            for hook in list(self.before_checkpoint):
                hook()
            self._ensure_chain()
            assert self._chain is not None
            # v3 signs every byte of its own entry too: its time, and the hash of
            # its recovery state; the entry is nothing but the two (checkpoint_entry_problem).
            ts = self.now_us()
            signed = {"v": CHECKPOINT_VERSION, "table_id": self.table_id, "seq": self._seq,
                      "head": self._chain.hex(), "from": self._covered + 1,
                      "digests": b64(b"".join(d[:DIGEST_LEN] for d in self._digests)), "rounds_opened": state.get("rounds_opened", 0),
                      "key_id": self.key.key_id, "ts": ts_text(ts), "state_sha256": state_digest(state)}
            signed["sig"] = b64(self.key.sign(_canonical(signed).encode()))
            covered = self._seq
            self.append("checkpoint", checkpoint=signed, state=state, _ts=ts)
            self._covered = covered
            self._digests = [self._chain[:8]]  # the checkpoint entry opens the next stretch
            if self._batch_depth:
                self._pending_head = signed
        if self._batch_depth == 0:
            self.write_head(signed)
        return signed

    def write_head(self, signed: dict[str, Any]) -> None:
        """Replace the head file with the signed checkpoint ``signed`` (atomic, 0600)."""
        try:
            write_atomic(head_path(self.path), _canonical(signed).encode(), mode=0o600)
        except OSError as exc:
            raise _write_error(exc, f"the journal head {head_path(self.path)}") from exc

    def check_tail(self) -> int | None:
        """The seq of the first entry after the last checkpoint whose MAC is wrong (an
        entry changed by someone without the table key), or None when they all
        hold. Needs the key. The stretch before is covered by signatures."""
        if self._mac_key is None:
            raise JournalError("checking the MAC chain needs the table key")
        with self._lock:
            self._ensure_chain()
            start = self._covered
            row = self._db.execute("SELECT mac FROM entries WHERE seq = ?", (start,)).fetchone() if start else None
            mac = bytes(row[0]) if row else bytes(16)
            expected = start + 1
            for seq, ts, kind, rid, did, body, stored in self._db.execute(
                    "SELECT seq, ts, kind, round_id, deck_id, body, mac FROM entries WHERE seq > ? ORDER BY seq",
                    (start,)):
                if seq != expected:
                    return expected
                mac = _mac_next(self._mac_key, mac, _material(seq, ts, kind, rid, did, body))
                if not isinstance(stored, bytes) or not hmac.compare_digest(mac, stored):
                    return seq
                expected += 1
        return None

    @property
    def segment(self) -> Entry | None:
        """The entry that opens this gaming day's segment (kind :data:`SEGMENT_KIND`, its
        body ``{"open": day, "previous": {...}}``), or None for a journal that starts at
        entry 1 (the first segment, or a journal kept whole). ``docs/journal.md``."""
        if self._segment is False:
            with self._lock:
                row = self._db.execute("SELECT seq, ts, kind, round_id, deck_id, body FROM entries "
                                       "ORDER BY seq LIMIT 1").fetchone()
            try:
                first = Entry(row[0], ts_text(row[1]), row[2], row[3], row[4], json.loads(row[5])) if row else None
            except (ValueError, TypeError, OverflowError):
                first = None  # an entry that does not read opens no segment (verify names it)
                row = None
            opens = (first is not None and first.kind == SEGMENT_KIND and isinstance(first.body, dict)
                     and isinstance(first.body.get("previous"), dict))
            self._segment = first if opens else None
            if first is None:
                self._segment = False  # nothing yet: ask again later
                return None
        return self._segment  # type: ignore[return-value]

    @classmethod
    def open_segment(cls, path: str | Path, *, key: TableKey, table_id: str, previous: dict[str, Any],
                     opens: str, carried: dict[str, Any], state: dict[str, Any], clock: Any = None,
                     group: int | None = None) -> "Journal":
        """Start the next gaming day's segment in a new file at ``path`` (which must not
        exist): its first entry (kind :data:`SEGMENT_KIND`) names the previous segment's
        last entry (``previous``: ``seq``, ``head`` = its chain hash, ``checkpoint`` = its
        last signed checkpoint, ``gaming_day``, ``archive``), so the public chain and the
        entry numbers go on where it ended; ``opens``: the new gaming day (YYYY-MM-DD);
        ``carried``: what the day's procedures need from before (the table open or closed,
        :mod:`table.procedure.table_day`); ``state``: the recovery state the previous
        segment's last checkpoint held, signed again here. The MAC chain starts again
        from 16 zero bytes. Returns the open journal. Raises :class:`JournalError`."""
        p = Path(path)
        if p.exists():
            raise JournalError(f"{p} exists: a new segment is always a new file")
        j = cls(p, key=key, table_id=table_id, clock=clock, group=group)
        try:
            j._seq, j._chain = int(previous["seq"]), bytes.fromhex(previous["head"])
            j._covered, j._digests = j._seq, []
            with j.batch():
                j.append(SEGMENT_KIND, open=opens, previous=previous, carried=carried)
                j.checkpoint(**state)
        except BaseException:
            j.close()
            raise
        j._segment = False
        return j

    # -- reading ----------------------------------------------------------------------------

    def _rows(self, sql: str, args: Iterable[Any]) -> Iterator[Entry]:
        with self._lock:
            rows = self._db.execute(sql, tuple(args)).fetchall()
        for seq, ts, k, rid, did, body in rows:
            yield Entry(seq, ts_text(ts), k, rid, did, json.loads(body))

    def entries(self, kind: str | None = None, since: int = 0, upto: int | None = None) -> Iterator[Entry]:
        """Entries in sequence order (optionally of one ``kind``, with ``since < seq <= upto``)."""
        q = "SELECT seq, ts, kind, round_id, deck_id, body FROM entries WHERE seq > ?"
        args: list[Any] = [since]
        if upto is not None:
            q += " AND seq <= ?"
            args.append(upto)
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        return self._rows(q + " ORDER BY seq", args)

    def last(self, kind: str) -> Entry | None:
        """The most recent entry of ``kind``, or None."""
        rows = list(self._rows("SELECT seq, ts, kind, round_id, deck_id, body FROM entries WHERE kind = ? "
                               "ORDER BY seq DESC LIMIT 1", (kind,)))
        return rows[0] if rows else None

    def close(self) -> None:
        """Close the journal. A writer first folds the WAL into the database and empties
        it (``wal_checkpoint(TRUNCATE)``): every entry is already durable, this only
        leaves one file of the right size behind."""
        with self._lock:
            if not self.read_only:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
            self._unlock()

    def reopen(self) -> None:
        """Open the file at :attr:`path` again in this object, keeping its listeners
        (:meth:`on_commit`) and clock: after a gaming day's rollover put the next
        segment in its place (:func:`table.day.segments.roll`). Raises :class:`JournalError`."""
        listeners, clock = list(self._listeners), self.now_us
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        self._unlock()
        self.__init__(self.path, key=self.key, table_id=self.table_id, read_only=self.read_only,  # type: ignore[misc]
                      group=self.group, clock=clock)
        self._listeners = listeners

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _source_format(db: sqlite3.Connection, path: Path) -> str:
    """The format a journal file's ``meta`` names (``"1"`` for format 1's layout, which had
    none). Raises :class:`JournalError` for a file that is not a journal."""
    try:
        if _has_table(db, "meta"):
            found = dict(db.execute("SELECT key, value FROM meta").fetchall()).get("format")
            if found is not None:
                return str(found)
        if _has_table(db, "entries") and "hash" in _columns(db, "entries"):
            return "1"
    except sqlite3.Error as exc:
        raise JournalError(f"{path} is not a readable journal: {exc}") from None
    raise JournalError(f"{path} is not a journal (no format in its meta)")


def export(path: str | Path, *, since: int = 0, kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Every entry of the journal file ``path`` (this format, or one :func:`migrate` converts)
    as one readable object, in order: ``seq``, ``ts`` (ISO 8601, UTC), ``ts_us``, ``kind``,
    ``round_id``, ``deck_id``, ``body`` (the decoded JSON object), ``mac`` (hex) and
    ``stored`` (``"deflate"`` or ``"json"``: how the body is stored). ``since``: entries
    after that seq; ``kind``: of that kind only. Reads only; checks nothing (that is
    :func:`verify`). Raises :class:`JournalFormatError` for another format and
    :class:`JournalError` for a file that does not read."""
    p = Path(path)
    if not p.is_file():
        raise JournalError(f"no journal at {p}")
    try:
        db = connect(p)
    except sqlite3.Error as exc:
        raise JournalError(f"{p} is not a readable journal: {exc}") from None
    try:
        found = _source_format(db, p)
        if found != str(FORMAT) and found not in {"2", "3"}:  # format 1's rows are its own: migrate it first
            raise JournalFormatError(p, found)
        q = "SELECT seq, ts, kind, round_id, deck_id, body, mac FROM main.entries WHERE seq > ?"
        args: list[Any] = [since]
        if kind is not None:
            q += " AND kind = ?"
            args.append(kind)
        try:
            for seq, ts, k, rid, did, stored, mac in db.execute(q + " ORDER BY seq", args):
                yield {"seq": seq, "ts": ts_text(ts), "ts_us": ts, "kind": k, "round_id": rid, "deck_id": did,
                       "body": json.loads(decode_body(stored)),
                       "mac": bytes(mac).hex() if isinstance(mac, bytes) else mac,
                       "stored": "deflate" if isinstance(stored, bytes) else "json"}
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
            raise JournalError(f"{p}: an entry does not read: {exc}") from None
    finally:
        db.close()


@dataclass(frozen=True)
class Migrated:
    """What :func:`migrate` did: ``source_format``, ``entries`` copied, ``head`` (the chain's
    hash after the last one, hex: the source's, unchanged), ``head_file``: the source's
    head file was copied beside the new journal."""

    source_format: str
    entries: int
    head: str
    head_file: bool


def migrate(src: str | Path, dest: str | Path) -> Migrated:
    """Convert the journal file ``src`` of an earlier format (:data:`MIGRATES_FROM`) into a
    new file ``dest`` of this format, leaving ``src`` as it is (keep it archived).

    Nothing is signed again, and nothing could be: no key is asked for. Before anything is
    written, the source is checked against its own format's rules (:func:`_source_problem`:
    formats 2 and 3 their chain and checkpoints, format 1 its stored hash chain and head
    file); a source that does not hold is refused, so a migration cannot launder an edit.
    Formats 2 and 3 hash, MAC and seal exactly as format 4 does (the chain's input is each
    entry's canonical JSON, not the bytes it is stored in): every entry is copied with its
    time, kind, round, deck and MAC, its body stored deflated (:func:`encode_body`), and every
    checkpoint, the head file (copied beside ``dest``) and every anchor the floor saved
    verify on ``dest`` unchanged with the table's public key. Format 1 signed nothing: its
    entries are copied with their time in microseconds (its ISO text given back exactly),
    no MAC (it had none), and ``dest`` keeps format 1's chain (:func:`_verify_format1`), a
    closed record no table writes to. The copy is verified before it is put in place (its
    chain's head must be the source's); nothing half-written is left behind. The meta
    records ``migrated_from``. docs/journal.md, "Formats". Raises
    :class:`JournalFormatError` for a format it does not convert (this one included) and
    :class:`JournalError` when ``dest`` exists, a file does not read or the source does not
    hold by its own rules."""
    s, d = Path(src), Path(dest)
    if not s.is_file():
        raise JournalError(f"no journal at {s}")
    if d.exists() or head_path(d).exists():
        raise JournalError(f"{d} exists: a migration writes a new file")
    try:
        source = sqlite3.connect(f"file:{s}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise JournalError(f"{s} is not a readable journal: {exc}") from None
    tmp = d.with_name(f".{d.name}.migrating")
    head_tmp = d.with_name(f".{d.name}.head.migrating")  # put in place only once dest is
    try:
        _check_convertible(s, found := _source_format(source, s))
        meta = dict(source.execute("SELECT key, value FROM meta").fetchall()) if _has_table(source, "meta") else {}
        why = _source_problem(source, s, found, str(meta.get("table_id", "table")))
        if why is not None:
            raise JournalError(f"cannot migrate {s}: a format {found} journal that does not hold by its own rules: "
                               f"{why}; a migration signs nothing, so it does not convert an edited journal")
        tmp.unlink(missing_ok=True)  # a migration to dest killed before it was done
        head_tmp.unlink(missing_ok=True)
        n, h = _write_copy(source, s, tmp, found, str(meta.get("table_id", "table")))
        after = verify(tmp)
        if after.status == "tampered" or after.entries != n or (n and after.head != h.hex()):
            raise JournalError(f"cannot migrate {s}: the copy's chain ({after.status}: {after.reason}) is not the "
                               "source's")
        source_head = head_path(s)
        has_head = source_head.is_file()
        if has_head:
            write_atomic(head_tmp, read_regular(source_head, max_bytes=1 << 20), mode=0o600)
        # dest first, then its head: a crash between leaves a journal with no head file
        # (verify: unanchored, never ok), never a head file beside no journal (a retry refused)
        os.replace(tmp, d)
        if has_head:
            os.replace(head_tmp, head_path(d))
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        head_tmp.unlink(missing_ok=True)
        if isinstance(exc, (sqlite3.Error, OSError, ValueError, UnsafeFile)):
            raise JournalError(f"cannot migrate {s} to {d}: {exc}") from None
        raise
    finally:
        source.close()
    return Migrated(found, n, h.hex(), has_head)


def _write_copy(source: sqlite3.Connection, s: Path, tmp: Path, found: str, table_id: str) -> tuple[int, bytes]:
    """Write ``tmp`` (a new file, format 4) with every entry of ``source`` (format ``found``,
    already checked by :func:`_source_problem`). Returns the entries written and the
    chain's hash after the last (format 1's for a format 1 source)."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    os.close(fd)
    out = sqlite3.connect(str(tmp), isolation_level=None)
    try:
        out.execute(f"PRAGMA page_size={PAGE_SIZE}")
        out.executescript(SCHEMA)
        out.execute("BEGIN")
        out.executemany("INSERT INTO meta VALUES (?, ?)",
                        [("format", str(FORMAT)), ("table_id", table_id),
                         ("zdict_sha256", ZDICT_SHA256), ("migrated_from", found)])
        rows = _format1_rows(source) if found == "1" else _format3_rows(source, s, found)
        h, n = GENESIS, 0
        for seq, ts, kind, rid, did, body, mac, h in rows:
            stored = encode_body(body)
            if decode_body(stored) != body:
                raise JournalError(f"{s}: entry {seq}'s body does not come back from its stored form")
            out.execute("INSERT INTO main.entries VALUES (?, ?, ?, ?, ?, ?, ?)", (seq, ts, kind, rid, did, stored, mac))
            n += 1
        out.execute("COMMIT")
    finally:
        out.close()
    return n, h


def _format3_rows(source: sqlite3.Connection, s: Path, found: str) -> Iterator[tuple[Any, ...]]:
    """A format 2 or 3 journal's rows as format 4 stores them (the same rows, bodies as JSON
    text), each with the chain's hash after it."""
    h, first = GENESIS, True
    for seq, ts, kind, rid, did, body, mac in source.execute(
            "SELECT seq, ts, kind, round_id, deck_id, body, mac FROM entries ORDER BY seq"):
        if not isinstance(body, str):
            raise JournalError(f"{s}: entry {seq}'s body is not JSON text (a format {found} journal's)")
        if first and kind == SEGMENT_KIND:  # a gaming day's segment: the chain goes on from the day before
            prev = json.loads(body).get("previous")
            if isinstance(prev, dict) and isinstance(prev.get("head"), str):
                h = bytes.fromhex(prev["head"])
        first = False
        h = chain_next(h, seq, ts, kind, rid, did, body)
        yield seq, ts, kind, rid, did, body, mac, h


def _source_problem(db: sqlite3.Connection, s: Path, found: str, table_id: str) -> str | None:
    """Why the source of a migration does not hold by its own format's rules (None when it
    does), checked before anything is written. Formats 2 and 3 (format 4's chain and
    checkpoints, :class:`_Chain`, :class:`_Checkpoints`): every entry in order, the chain
    over each, every checkpoint entry's head and digests (no public key is given: the
    signatures are checked by ``audit verify`` on the new file, which holds them
    unchanged). Format 1: :func:`_format1_source_problem`."""
    if found == "1":
        return _format1_source_problem(db, s)
    previous = _segment_previous(db)
    if isinstance(previous, str):
        return previous
    h, base = (GENESIS, 0) if previous is None else (bytes.fromhex(previous["head"]), previous["seq"])
    chain, cps = _Chain(h, base + 1, set(), None), _Checkpoints(table_id, {})
    try:
        rows = db.execute("SELECT seq, ts, kind, round_id, deck_id, body, mac FROM entries ORDER BY rowid")
        bad = _walk(chain, cps, (row if isinstance(row[5], str) else _not_text(row[0], found) for row in rows))
        if bad is not None:
            return bad.reason
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
        return f"entry {chain.expected} does not read: {exc}"
    return None


# -- format 1: a stored hash chain, nothing signed (the tablectl before journal format 2) --------

#: format 1's chain starts from this ``prev_hash`` (64 zeros)
FORMAT1_GENESIS = "0" * 64
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def format1_ts(ts_us: int) -> str:
    """Format 1's time text of an entry timed ``ts_us`` (µs since the epoch, UTC): ISO 8601
    with microseconds and ``+00:00``, as that tablectl wrote it (integer arithmetic: exact)."""
    return (_EPOCH + _dt.timedelta(microseconds=ts_us)).isoformat(timespec="microseconds")


def format1_hash(prev_hash: str, seq: int, ts: str, kind: str, round_id: str | None, deck_id: str | None,
                 body_json: str) -> str:
    """Format 1's stored chain hash (hex): ``sha256(prev_hash || canonical JSON of [seq, ts,
    kind, round_id, deck_id, body])``, ``ts`` its ISO text, the first ``prev_hash`` 64 zeros
    (format 1's ``table/journal.py``, ``entry_hash``, commit a3cbded)."""
    material = prev_hash + _canonical([seq, ts, kind, round_id, deck_id, body_json])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _format1_us(ts: Any) -> int:
    """A format 1 entry's time text as µs since the epoch; ``ValueError`` unless it is
    exactly what :func:`format1_ts` gives back (one text, one time)."""
    if not isinstance(ts, str):
        raise ValueError("its time is not text")
    t = _dt.datetime.fromisoformat(ts)
    if t.tzinfo is None:
        raise ValueError(f"its time {ts[:40]!r} names no zone")
    us = (t - _EPOCH) // _dt.timedelta(microseconds=1)
    if format1_ts(us) != ts:
        raise ValueError(f"its time {ts[:40]!r} is not in the form format 1 wrote")
    return us


def _format1_rows(source: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    """A format 1 journal's rows as format 4 stores them: the time in µs, the body's JSON
    text, no MAC (``b""``: format 1 had none), each with format 1's chain hash after it."""
    for seq, ts, kind, rid, did, body, _prev, h in source.execute(
            "SELECT seq, ts, kind, round_id, deck_id, body, prev_hash, hash FROM entries ORDER BY seq"):
        yield seq, _format1_us(ts), kind, rid, did, body, b"", bytes.fromhex(h)


def _format1_head(path: Path) -> dict[str, Any] | str | None:
    """Format 1's head file beside ``path`` (``{"seq", "hash"}``, unsigned), None when there
    is none, or why it does not read (a str)."""
    head = head_path(path)
    if not head.exists():
        return None
    try:
        obj = json.loads(read_regular(head, max_bytes=1 << 20))
        if not isinstance(obj, dict) or set(obj) != {"seq", "hash"} or type(obj["seq"]) is not int \
                or not isinstance(obj["hash"], str):
            raise ValueError("not format 1's {seq, hash}")
    except (OSError, UnsafeFile, ValueError) as exc:
        return f"the head file {head.name} does not read: {exc}"
    return obj


def _format1_head_problem(head: dict[str, Any], hashes: dict[int, str], last: int) -> str | None:
    """Why the chain (``hashes``: seq -> format 1 hash, ``last`` entries) disagrees with format 1's
    head file (format 1's rule: the chain ends at the head or one entry past it, the entry a
    crash committed before the head file was written)."""
    a_seq = head["seq"]
    if a_seq > last:
        return f"entries {last + 1}..{a_seq} are missing (deleted): the head file says {a_seq}"
    if a_seq and hashes.get(a_seq) != head["hash"]:
        return f"entry {a_seq} does not match the head file"
    if last > a_seq + 1:
        return f"entries after {a_seq + 1} were added behind the head file"
    return None


def _format1_source_problem(db: sqlite3.Connection, s: Path) -> str | None:
    """Why a format 1 journal does not hold by format 1's rules (its ``audit verify``): every
    entry in order, its ``prev_hash`` the entry before's ``hash``, its ``hash`` recomputed
    (:func:`format1_hash`), its time in format 1's one form, and the chain against the head
    file beside it."""
    prev, expected, hashes = FORMAT1_GENESIS, 1, {}
    try:
        for seq, ts, kind, rid, did, body, prev_hash, h in db.execute(
                "SELECT seq, ts, kind, round_id, deck_id, body, prev_hash, hash FROM entries ORDER BY rowid"):
            if seq != expected:
                return f"entry {expected} is {'missing (deleted)' if seq > expected else 'out of order'}; found {seq}"
            if not isinstance(body, str) or not isinstance(kind, str):
                return f"entry {seq} is malformed (a field of the wrong type)"
            if prev_hash != prev:
                return f"entry {seq} does not follow entry {seq - 1} (prev_hash mismatch)"
            if format1_hash(prev, seq, ts, kind, rid, did, body) != h:
                return f"entry {seq} was altered (hash mismatch)"
            try:
                _format1_us(ts)
                json.loads(body)
            except ValueError as exc:
                return f"entry {seq} does not read: {exc}"
            prev, expected, hashes[seq] = h, seq + 1, h
    except (sqlite3.Error, ValueError, TypeError) as exc:
        return f"entry {expected} does not read: {exc}"
    head = _format1_head(s)
    if isinstance(head, str):
        return head
    return None if head is None else _format1_head_problem(head, hashes, expected - 1)


def _verify_format1(p: Path, db: sqlite3.Connection, outside: list[tuple[str, Any]],
                    keys: dict[str, Ed25519PublicKey]) -> VerifyResult:
    """:func:`verify` of a journal migrated from format 1 (``meta.migrated_from`` 1): what
    format 1 proves and no more. Every stored byte of every entry is checked: the entries
    in order, each body in its one stored form, no MAC (format 1 wrote none; a MAC there
    would be bytes nothing checks), no checkpoint entry (format 1 signed nothing), format
    1's chain recomputed over every entry (:func:`format1_hash`, the time as format 1's
    text) and against format 1's head file (``{seq, hash}``) beside it. Nothing here is
    signed, so the verdict is never ``ok``: ``unsigned`` (every entry "unsigned (format 1)",
    the unsigned head file matching) or ``unanchored`` (no head file); ``tampered`` for
    an entry or a head file that disagrees, and for a signed checkpoint given as an anchor
    (no checkpoint was ever signed over format 1's entries)."""
    prev, expected, hashes, kinds = FORMAT1_GENESIS, 1, {}, {}
    try:
        for seq, ts, kind, rid, did, stored, mac in db.execute(
                "SELECT seq, ts, kind, round_id, deck_id, body, mac FROM main.entries ORDER BY rowid"):
            if type(seq) is not int or type(ts) is not int or not isinstance(kind, str):
                return _bad(expected - 1, expected, f"entry {expected} is malformed (a field of the wrong type)")
            if seq != expected:
                what = "missing (deleted)" if seq > expected else "out of order"
                return _bad(expected - 1, expected, f"entry {expected} is {what}; found {seq}")
            why = body_problem(stored)
            if why is None and mac != b"":
                why = ("it carries a MAC, which format 1 never wrote (bytes nothing checks; meta.migrated_from "
                       "names format 1)")
            if why is None and kind == CHECKPOINT_KIND:
                why = "a checkpoint entry in a format 1 history, which signed nothing"
            if why is not None:
                return _bad(seq - 1, seq, f"entry {seq} is malformed: {why}")
            prev = hashes[seq] = format1_hash(prev, seq, format1_ts(ts), kind, rid, did, decode_body(stored))
            kinds[kind] = kinds.get(kind, 0) + 1
            expected += 1
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
        return VerifyResult("unreadable", expected - 1, None, f"{p}: cannot read entry {expected}: {exc}")
    count = expected - 1
    head = _format1_head(p)
    if isinstance(head, str):
        return _bad(count, None, head)
    for where, _cp in outside[1 if head is not None else 0:]:
        return _bad(count, None, f"{where} is a signed checkpoint, but this journal's entries are format 1's, "
                                 "which no checkpoint ever signed: it is not this journal's")
    why = _format1_head_problem(head, hashes, count) if head is not None else None
    if why is not None:
        return _bad(count, None, f"{why} (format 1's head file {head_path(p).name})")
    notes = [f"entries 1..{count} are unsigned (format 1, migrated): a stored SHA-256 chain only, no signature and "
             "no MAC ever covered them; the chain was recomputed over every byte of every entry"]
    notes.append(f"format 1's head file {head_path(p).name} (unsigned) matches entry {head['seq']}: it shows the "
                 "journal was not cut short, and vouches for nothing against whoever could write its folder"
                 if head is not None else "no head file beside the journal: a truncation could not be seen")
    if keys:
        notes.append("the public key checked nothing: format 1 signed nothing")
    return VerifyResult("unsigned" if head is not None else "unanchored", count, None, "", 0, count, tuple(notes),
                        kinds, False, 1, prev, None, 0, format1=True)


def disclosed_cards(journal: Journal) -> Iterator[tuple[Entry, dict[str, Any]]]:
    """Every ``card_read`` entry of a round that is over, with its opened sealed fields
    (``card``, ``nonce``): the round's reveal or void disclosed its seal key, so no
    table key is needed. Cards of a round still in progress stay sealed and are not
    given. In journal order, round by round."""
    pending: dict[str, list[Entry]] = {}
    table_id = journal.table_id
    for e in journal.entries():
        if e.kind == "card_read" and e.round_id is not None:
            pending.setdefault(e.round_id, []).append(e)
        elif e.kind == "round" and e.body.get("seal_key") and e.round_id in pending:
            k = bytes.fromhex(e.body["seal_key"])
            for card in pending.pop(e.round_id):
                if "sealed" in card.body:
                    yield card, card_opening(k, table_id, card)


def _check_convertible(path: Path, found: str | None) -> None:
    """Raises unless ``found`` is a format :func:`migrate` converts: this one (nothing to
    convert) or another (:class:`JournalFormatError`)."""
    if found == str(FORMAT):
        raise JournalError(f"{path} is already a format {FORMAT} journal, the format this tablectl writes: "
                           "nothing to convert")
    if found not in {str(f) for f in MIGRATES_FROM}:
        raise JournalFormatError(path, found)


def _format_mismatch(path: Path, found: str | None) -> str:
    older = found in {str(f) for f in range(1, FORMAT)}  # the formats there were: 0, "3.5", "two" never were
    if found is not None and found in {str(f) for f in MIGRATES_FROM}:
        return (f"{path} is a format {found} journal (an older tablectl wrote it); this one reads format {FORMAT}: "
                f"convert it with `tablectl audit migrate {path} NEW` (docs/journal.md, \"Formats\")")
    if older:
        return (f"{path} is a format {found} journal (an older tablectl wrote it); this one reads format {FORMAT}: "
                "verify it with the tablectl that wrote it, and start a new journal")
    return f"{path}: journal format {found!r} is unknown; this tablectl reads format {FORMAT}"


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


# -- verification -------------------------------------------------------------------------------


#: ``status`` values of :class:`VerifyResult`, and ``tablectl audit verify``'s exit code for each
STATUSES = {"ok": 0, "tampered": 1, "unreadable": 2, "unanchored": 3, "unsigned": 4, "gap": 5, "misfiled": 6}


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :func:`verify`.

    ``status``: ``"ok"`` (chain, signatures and anchors hold), ``"unanchored"``
    (the chain holds but no signed checkpoint, head file or anchor vouches for
    its end: a truncation or a rollback could not be seen), ``"unsigned"``
    (everything up to the last signed checkpoint holds and is anchored, but
    ``unsigned_tail`` entries after it, of the kinds ``tail_kinds`` counts, are
    vouched for by nothing that was checked: no signature covers them and no
    table key checked their MACs), ``"tampered"``
    (``first_bad`` names the first entry edited, deleted or reordered, or the
    ``reason`` says which checkpoint or anchor disagrees). ``entries``: how many
    entries were read; ``checkpoints``: signed checkpoints verified;
    ``unsigned_tail``: entries after the last checkpoint (a round in progress,
    or a controller stopped without a clean shutdown); ``tail_kinds``: how many
    of them of each kind; ``tail_checked``: their MACs were checked with the table
    key; ``notes``: what else an auditor should know. For a gaming day's segment
    (``docs/journal.md``): ``first_seq``, its first entry; ``previous``, what its
    segment entry names of the day before (``seq``, ``head``, ``checkpoint``,
    ``gaming_day``, ``archive``); ``head``, the chain hash after its last entry;
    ``last_checkpoint``, the seq of its last checkpoint entry (0: none); ``format1``: a
    history migrated from format 1, which nothing ever signed (:func:`_verify_format1`).
    """

    status: str
    entries: int
    first_bad: int | None = None
    reason: str = ""
    checkpoints: int = 0
    unsigned_tail: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    tail_kinds: dict[str, int] = field(default_factory=dict)
    tail_checked: bool = False
    first_seq: int = field(default=1, repr=False)
    head: str = field(default="", repr=False)
    previous: dict[str, Any] | None = field(default=None, repr=False)
    last_checkpoint: int = field(default=0, repr=False)
    #: a history migrated from format 1 (``meta.migrated_from`` 1): nothing of it was ever signed
    format1: bool = field(default=False, repr=False)

    @property
    def ok(self) -> bool:
        """True when nothing was found wrong (``ok``, ``unanchored`` or ``unsigned``)."""
        return self.status in ("ok", "unanchored", "unsigned")


_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _SignalGate:
    """SIGINT and SIGTERM wait (their handlers run at the end of the block) while an entry
    is written and the journal notes it: Python runs a signal's handler, and raises its
    exception, between any two steps of the main thread, and one between the row and the
    note made the next entry reuse its number (the shutdown's checkpoint failed, the
    tail stayed unsigned). Handlers run only in the main thread, so only there is
    anything held; a signal mask would not do (another thread takes the signal, the
    main thread still runs the handler).

    One gate handler is installed in front of each callable handler the first time a
    write needs it (and again only if the program installs another handler later):
    a write then only checks that the gate is still in place and counts itself in
    and out, instead of swapping handlers around each write. A signal
    outside a write goes straight to the program's handler."""

    def __init__(self) -> None:
        self.depth = 0
        self.caught: list[tuple[int, Any]] = []
        self.behind: dict[int, Any] = {}  # the program's handler behind the gate, by signal
        self._handler = self._on_signal  # one bound method, compared by identity

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.depth:
            self.caught.append((signum, frame))
            return
        handler = self.behind.get(signum)
        if callable(handler):
            handler(signum, frame)

    def _ensure(self) -> None:
        for sig in _HELD_SIGNALS:
            current = _signal.getsignal(sig)  # the C call: no enum conversion
            if current is not self._handler and callable(current):
                self.behind[sig] = current
                _signal.signal(sig, self._handler)

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            if self.depth == 0:
                self._ensure()
            self.depth += 1

    def __exit__(self, *exc: object) -> None:
        if threading.current_thread() is not threading.main_thread() or not self.depth:
            return
        self.depth -= 1
        if self.depth == 0 and self.caught:
            caught, self.caught = self.caught[:1], []
            for signum, frame in caught:  # now, as it would have run: KeyboardInterrupt and the like
                handler = self.behind.get(signum)
                if callable(handler):
                    handler(signum, frame)


_GATE = _SignalGate()


def _signals_held() -> _SignalGate:
    """The process's signal gate as a context manager (see :class:`_SignalGate`)."""
    return _GATE


def _walk(chain: "_Chain", cps: "_Checkpoints", rows: Iterable[tuple[Any, ...]]) -> VerifyResult | None:
    """Read ``rows`` (seq, ts, kind, round_id, deck_id, body, mac, in order) into ``chain``
    and its checkpoints ``cps``: the first entry that breaks either, as its verdict, or None."""
    for row in rows:
        bad = chain.read(row)
        if bad is None and row[2] == CHECKPOINT_KIND:
            bad = cps.read(chain, *row[:5])
        if bad is None:
            bad = chain.advance(cps)
        if bad is not None:
            return bad
    return None


def _not_text(seq: int, found: str) -> NoReturn:
    """A migrating source's body stored other than as JSON text: raised as ``ValueError``."""
    raise ValueError(f"entry {seq}'s body is not JSON text (a format {found} journal's)")


def _bad(n: int, seq: int | None, reason: str, **kw: Any) -> VerifyResult:
    return VerifyResult("tampered", n, seq, reason, **kw)


def load_anchors(path: str | Path) -> list[dict[str, Any]]:
    """Signed checkpoints saved off the table: a file of JSON lines, each a checkpoint
    (as in the head file) or an event whose ``type`` is ``checkpoint`` (its ``data``).
    Raises :class:`JournalError` for an unreadable file or line."""
    try:
        text = read_regular(path, max_bytes=256 << 20).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalError(f"cannot read anchors {path}: {exc}") from None
    out = []
    try:
        lines = list(json_lines(text))
    except ValueError as exc:
        raise JournalError(f"{path}: {exc}") from None
    for n, obj in lines:
        if isinstance(obj, dict) and obj.get("type") == "checkpoint" and isinstance(obj.get("data"), dict):
            obj = obj["data"]
        if not isinstance(obj, dict) or not isinstance(obj.get("seq"), int) or not isinstance(obj.get("head"), str):
            raise JournalError(f"{path}:{n}: not a signed checkpoint (seq, head, sig)")
        out.append(obj)
    return out


def check_signed(cp: dict[str, Any], keys: dict[str, Ed25519PublicKey]) -> str | None:
    """Why the signed checkpoint ``cp`` does not verify with ``keys`` (key id -> public
    key), or None when it does."""
    if not isinstance(cp, dict):
        return "not a checkpoint object"
    pub = keys.get(str(cp.get("key_id")))
    if pub is None:
        return f"signed by key {cp.get('key_id')!r}, which is not among the public keys given"
    try:
        sig = unb64(cp["sig"])
    except (KeyError, ValueError):
        return "no readable signature"
    message = _canonical({k: v for k, v in cp.items() if k != "sig"}).encode()
    return None if verify_signature(pub, sig, message) else "its signature does not verify"


def verify(path: str | Path, *, public_keys: Iterable[Ed25519PublicKey] = (),
           anchors: Iterable[dict[str, Any]] = (), key: TableKey | None = None) -> VerifyResult:
    """Check the journal at ``path``, read-only; never raises for a corrupt file.

    Recomputes the public chain over every byte of every entry (:class:`_Chain`);
    checks every checkpoint entry against it (its head, and its digests, which
    name the first entry changed) and, with ``public_keys`` (the table's: one per
    key id it has used), its signature (:class:`_Checkpoints`); checks the head
    file and every anchor (signed checkpoints saved off the table): a journal
    that ends before an anchor was truncated or rolled back, one that disagrees
    with it was rewritten (:func:`_check_anchors`); a gaming day's segment names
    the day before it in the archive (:func:`_archive_link`). ``key``: the table
    key, to check the MAC of every entry, the unsigned tail included. Memory
    stays bounded by the longest stretch between checkpoints. Raises
    :class:`JournalError` only for a missing file; an unreadable one (another
    format named in its ``meta``, :class:`JournalFormatError`'s message) is
    ``status="unreadable"``.
    """
    p = Path(path)
    if not p.exists():
        raise JournalError(f"no journal at {p}")
    keys = {key_id(k): k for k in public_keys}
    if key is not None:
        keys.setdefault(key.key_id, key.public)
    outside = _outside(p, anchors)
    if isinstance(outside, VerifyResult):
        return outside
    try:
        # main.entries as stored, without connect()'s temporary view (its set-up was ~0.12 ms,
        # most of a small journal's check): verify decodes every body itself
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return VerifyResult("unreadable", 0, None, f"{p} is not a readable journal: {exc}")
    try:
        opened = _open_checked(p, db, outside, keys)
        if isinstance(opened, VerifyResult):
            return opened
        table_id, cursor = opened
        link = _archive_link(db, table_id, keys)
        if isinstance(link, VerifyResult):
            return link
        previous, h, base = link
        wanted = {cp.get("seq") for _, cp in outside if isinstance(cp, dict) and isinstance(cp.get("seq"), int)}
        mac_key = key.derive(MAC_PURPOSE, table_id.encode()) if key is not None else None
        chain = _Chain(h, base + 1, wanted, mac_key)
        cps = _Checkpoints(table_id, keys)
        try:
            bad = _walk(chain, cps, cursor)
            if bad is not None:
                return bad
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
            return VerifyResult("unreadable", chain.count, None, f"{p}: cannot read entry {chain.expected}: {exc}")
    finally:
        db.close()
    notes: list[str] = []
    anchored = _check_anchors(p, outside, chain, cps, base, notes)
    if isinstance(anchored, VerifyResult):
        return anchored
    return _summary(p, outside, chain, cps, base, previous, anchored, bool(keys), notes)


def _outside(p: Path, anchors: Iterable[dict[str, Any]]) -> list[tuple[str, Any]] | VerifyResult:
    """The signed checkpoints kept outside the journal (its head file, then ``anchors``) as
    (where, checkpoint), or why the head file does not read (tampered)."""
    head = head_path(p)
    outside: list[tuple[str, Any]] = []
    if head.exists():
        try:
            head_cp = json.loads(read_regular(head, max_bytes=1 << 20))
        except (OSError, UnsafeFile, ValueError) as exc:
            return _bad(0, None, f"the head file {head} is unreadable: {exc}")
        if not isinstance(head_cp, dict):
            return _bad(0, None, f"the head file {head} is not a checkpoint")
        outside.append((f"the head file {head.name}", head_cp))
    outside += [(f"anchor {i} (seq {a.get('seq') if isinstance(a, dict) else '?'})", a)
                for i, a in enumerate(list(anchors), 1)]
    return outside


def _open_checked(p: Path, db: sqlite3.Connection, outside: list[tuple[str, Any]],
                  keys: dict[str, Ed25519PublicKey]) -> tuple[str, sqlite3.Cursor] | VerifyResult:
    """The file as a database: not damaged, of this format and dictionary. Returns the table id
    and a cursor over the stored rows (bodies as stored), or why it is unreadable; for a
    history migrated from format 1, its whole verdict (:func:`_verify_format1`: its head
    file and the anchors ``outside``, the ``keys`` given)."""
    try:
        damage = [r[0] for r in db.execute("PRAGMA integrity_check").fetchmany(3)]
        if damage != ["ok"]:
            return VerifyResult("unreadable", 0, None, f"{p}: the database file is damaged: {'; '.join(damage)}")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        cursor = db.execute("SELECT seq, ts, kind, round_id, deck_id, body, mac FROM main.entries ORDER BY rowid")
    except (sqlite3.Error, ValueError, TypeError) as exc:
        return VerifyResult("unreadable", 0, None, f"{p} is not a readable journal: {exc}")
    if meta.get("format") != str(FORMAT):
        return VerifyResult("unreadable", 0, None, _format_mismatch(p, meta.get("format")))
    if meta.get("zdict_sha256") != ZDICT_SHA256:
        return VerifyResult("unreadable", 0, None, f"{p}: its bodies' dictionary (meta.zdict_sha256) is not "
                                                   f"format {FORMAT}'s")
    try:
        why = _schema_problem(db, meta)
    except (sqlite3.Error, ValueError, TypeError) as exc:
        return VerifyResult("unreadable", 0, None, f"{p}: its schema does not read: {exc}")
    if why is not None:
        return _bad(0, None, f"{p}: {why}")
    if meta.get("migrated_from") == "1":
        return _verify_format1(p, db, outside, keys)
    return meta.get("table_id", "table"), cursor


@functools.lru_cache(maxsize=1)
def _format_schema() -> frozenset[tuple[Any, ...]]:
    """The schema objects (type, name, table, SQL) a file of this format holds: :data:`SCHEMA`'s.
    Made once a process (an in-memory database built from SCHEMA: ~0.2 ms a call, which was
    made twice a :func:`verify`)."""
    with contextlib.closing(sqlite3.connect(":memory:")) as mem:
        mem.executescript(SCHEMA)
        return frozenset(mem.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall())


#: the ``meta`` keys a file of this format holds (``migrated_from`` only after :func:`migrate`)
_META_KEYS = {"format", "table_id", "zdict_sha256"}


def _schema_problem(db: sqlite3.Connection, meta: dict[str, Any]) -> str | None:
    """Why the file holds more than the format's schema and meta rows (None when it holds
    exactly them): a table, index, view or trigger added is stored bytes no chain, MAC or
    signature covers (a trigger is code the table's next write runs), and so is a meta row
    the format does not have. ``migrated_from`` is what :func:`migrate` writes, one of
    :data:`MIGRATES_FROM` (nothing signs it: it says where the file came from, no more)."""
    found = set(db.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master").fetchall())
    extra = sorted(str(row[1]) for row in found - _format_schema())
    if extra or len(found) != len(_format_schema()):
        return f"its schema holds what format {FORMAT} does not ({', '.join(extra)[:200] or 'a changed table'})"
    other = set(meta) - _META_KEYS - {"migrated_from"}
    if other or ("migrated_from" in meta and meta["migrated_from"] not in {str(f) for f in MIGRATES_FROM}):
        return (f"its meta holds rows format {FORMAT} does not "
                f"({', '.join(sorted(map(str, other)))[:200] or 'migrated_from ' + repr(meta['migrated_from'])[:20]})")
    return None


def _archive_link(db: sqlite3.Connection, table_id: str,
                  keys: dict[str, Ed25519PublicKey]) -> tuple[dict[str, Any] | None, bytes, int] | VerifyResult:
    """The archives' part: what a gaming day's segment names of the day before it (its first
    entry's ``previous``), the chain hash it goes on from and the last entry before it
    (``GENESIS`` and 0 for a journal that starts at entry 1); tampered when the previous
    day's checkpoint it names is not one of this table's, signed. The archived day itself
    is checked by ``audit verify --archive`` (:func:`table.day.segments.verify_archive`)."""
    previous = _segment_previous(db)
    if isinstance(previous, str):
        return _bad(0, None, previous)
    if previous is None:
        return None, GENESIS, 0
    expected = previous["seq"] + 1
    why = signed_ok_early(previous.get("checkpoint"), table_id, keys)
    if why is not None:
        return _bad(0, expected, f"segment entry {expected} names a previous checkpoint that {why}")
    return previous, bytes.fromhex(previous["head"]), previous["seq"]


class _Chain:
    """The chain's part of :func:`verify`: entries in order without gaps, each body in its one
    stored form (:func:`body_problem`), the public hash over each (``h``), the hashes kept
    for the anchors (``kept``) and the stretch since the last checkpoint entry, and with the
    MAC key each row's MAC."""

    def __init__(self, h: bytes, first: int, wanted: set[Any], mac_key: bytes | None) -> None:
        self.h, self.expected, self.count = h, first, 0
        self.kept: dict[int, bytes] = {first - 1: h}
        self.wanted, self.mac_key, self.mac = wanted, mac_key, bytes(16)
        self.stretch: list[bytes] = []  # h_i[:8] since the last checkpoint entry
        self.stretch_from = first
        self.tail_kinds: dict[str, int] = {}  # the entries since the last checkpoint entry, by kind
        self._row: tuple[Any, ...] = ()

    def read(self, row: tuple[Any, ...]) -> VerifyResult | None:
        """Check one stored row's place and form; None when it holds (then the checkpoint's
        part may look at it before :meth:`advance` chains it)."""
        seq, ts, kind, rid, did, stored, stored_mac = row
        if not isinstance(seq, int) or not isinstance(ts, int) or not isinstance(kind, str):
            return _bad(self.count, self.expected, f"entry {self.expected} is malformed (a field of the wrong type)")
        if seq != self.expected:
            what = "missing (deleted)" if seq > self.expected else "out of order"
            return _bad(self.count, self.expected, f"entry {self.expected} is {what}; found {seq}")
        body, why = _checked_body(stored)
        if why is not None:
            return _bad(self.count, seq, f"entry {seq} is malformed: {why}")
        self._row = (seq, ts, kind, rid, did, body, stored_mac)
        return None

    @property
    def body(self) -> str:
        """The JSON text of the row :meth:`read` last took."""
        return str(self._row[5])

    def advance(self, cps: "_Checkpoints") -> VerifyResult | None:
        """Chain the row :meth:`read` took; with the MAC key, why its MAC does not hold."""
        seq, ts, kind, rid, did, body, stored_mac = self._row
        if cps.just_read:
            self.stretch, self.stretch_from, self.tail_kinds = [], seq, {}
            cps.just_read = False
        self.tail_kinds[kind] = self.tail_kinds.get(kind, 0) + 1
        material = _material(seq, ts, kind, rid, did, body)
        self.h = hashlib.sha256(self.h + material).digest()
        self.stretch.append(self.h[:8])
        if seq in self.wanted:
            self.kept[seq] = self.h
        if self.mac_key is not None:
            self.mac = _mac_next(self.mac_key, self.mac, material)
            if not isinstance(stored_mac, bytes) or not hmac.compare_digest(self.mac, stored_mac):
                return _bad(self.count, seq, f"entry {seq} was altered (its MAC does not hold)")
        self.expected += 1
        self.count += 1
        return None


class _Checkpoints:
    """The checkpoints' part of :func:`verify`: each checkpoint entry is this table's, signed
    (with the keys), every byte of its own entry signed (v3), covering exactly the
    stretch since the previous one, with the chain's head at its start."""

    def __init__(self, table_id: str, keys: dict[str, Ed25519PublicKey]) -> None:
        self.table_id, self.keys = table_id, keys
        self.n, self.last, self.old = 0, 0, 0
        #: the last checkpoint read is v1 or v2: it signed the chain before it, not its own entry
        self.last_old = False
        self.carried: dict[int, Any] = {}  # seq a checkpoint entry covers -> its signature
        self.just_read = False
        # checkpoints whose signature held, as canonical JSON: the head file's is the last
        # checkpoint entry's, byte for byte, and its signature is checked once
        self._signed: set[str] = set()

    def signed_ok(self, cp: dict[str, Any], where: str, count: int) -> VerifyResult | None:
        """Why ``cp`` (found at ``where``) is not this table's checkpoint, signed by one of
        the keys (its signature is not checked without keys)."""
        if cp.get("table_id") != self.table_id:
            return _bad(count, None, f"{where} belongs to table {cp.get('table_id')!r}, this journal to "
                                     f"{self.table_id!r}")
        if self.keys:
            text = _canonical(cp)
            if text in self._signed:
                return None
            why = check_signed(cp, self.keys)
            if why is not None:
                return _bad(count, None, f"{where}: {why}")
            self._signed.add(text)
        return None

    def read(self, chain: _Chain, seq: int, ts: int, kind: str, rid: Any, did: Any) -> VerifyResult | None:
        """Check the checkpoint entry ``seq`` the chain just read (before it is chained)."""
        body, count = chain.body, chain.count
        try:
            cp = json.loads(body)["checkpoint"]
            if not isinstance(cp, dict):
                raise TypeError("not an object")
        except (ValueError, KeyError, TypeError) as exc:
            return _bad(count, seq, f"checkpoint entry {seq} is unreadable: {exc}")
        where = f"checkpoint entry {seq}"
        bad = self.signed_ok(cp, where, count)
        if bad is not None:
            return _bad(count, seq, bad.reason)
        old = not (isinstance(cp.get("v"), int) and cp["v"] >= 3)
        if not old:
            why = checkpoint_entry_problem(seq, ts, rid, did, body)
            if why is not None and self.keys:  # unsigned, nothing of it is vouched for anyway
                return _bad(count, seq, f"{where} is not what was signed: {why}")
        else:
            self.old += 1
        if isinstance(cp.get("seq"), int):
            self.carried[cp["seq"]] = cp.get("sig")
        if cp.get("seq") != seq - 1 or cp.get("from") != chain.stretch_from:
            return _bad(count, seq, f"{where} covers {cp.get('from')}..{cp.get('seq')}, "
                                    f"not {chain.stretch_from}..{seq - 1}")
        if cp.get("head") != chain.h.hex():
            first = _first_in(cp, chain.stretch, chain.stretch_from)
            return _bad(count, first, f"{where} does not match the entries it covers: "
                                      + (f"entry {first} was changed" if first else "they were rewritten"))
        self.n, self.last, self.just_read, self.last_old = self.n + 1, seq, True, old
        return None


def _check_anchors(p: Path, outside: list[tuple[str, Any]], chain: _Chain, cps: _Checkpoints, base: int,
                   notes: list[str]) -> bool | VerifyResult:
    """The anchors' part of :func:`verify`: each checkpoint kept outside the journal (head
    file, anchors) is this table's, signed, and the journal holds it: the entry after the
    ones it covers carries it and the chain's hash there is its head. Returns whether one
    matched (an anchored end), or the earliest disagreement (tampered)."""
    last = base + chain.count  # the last entry read
    anchored = False
    failures: list[VerifyResult] = []
    for where, cp in outside:
        if not isinstance(cp, dict):
            failures.append(_bad(chain.count, None, f"{where} is not a checkpoint"))
            continue
        bad = cps.signed_ok(cp, where, chain.count)
        if bad is not None:
            failures.append(bad)
            continue
        seq = cp.get("seq")
        if isinstance(seq, int) and 0 <= seq < base:
            notes.append(f"{where} covers entries up to {seq}, before this segment (from {base + 1}): it belongs "
                         "to an archived gaming day (audit verify --archive checks the days together)")
            continue
        failure = _anchor_problem(p, where, cp, chain, cps, base, last)
        if failure is None:
            anchored = True
        else:
            failures.append(failure)
    if failures:  # the earliest entry any anchor disagrees with
        return min(failures, key=lambda r: r.first_bad if r.first_bad is not None else 1 << 62)
    return anchored


def _anchor_problem(p: Path, where: str, cp: dict[str, Any], chain: _Chain, cps: _Checkpoints, base: int,
                    last: int) -> VerifyResult | None:
    seq, count = cp.get("seq"), chain.count
    if not isinstance(seq, int) or seq < 0:
        return _bad(count, None, f"{where} has no valid seq")
    if seq > last:
        return _bad(count, last + 1, f"{where} covers entries up to {seq}, but the journal ends at {last}: entries "
                                     f"{last + 1}..{seq} are missing (truncated or rolled back)")
    if seq + 1 > last:
        # A checkpoint is signed as its entry is written: the entry after the ones it
        # covers is the checkpoint entry that carries it.
        return _bad(count, last + 1, f"{where} was written as entry {seq + 1}, but the journal ends at {last}: "
                                     "its checkpoint entry is missing (truncated)")
    if cps.carried.get(seq) != cp.get("sig"):
        return _bad(count, seq + 1, f"{where} was written as entry {seq + 1}, which is not the checkpoint entry "
                                    "carrying it (changed or replaced)")
    if chain.kept[seq].hex() != cp.get("head"):
        first = _locate(p, cp, chain.kept[base], base)
        return _bad(count, first, f"{where} (entries up to {seq}) does not match the journal: "
                                  + (f"entry {first} differs from what was signed" if first else
                                     "it was rewritten or rolled back"))
    return None


def _summary(p: Path, outside: list[tuple[str, Any]], chain: _Chain, cps: _Checkpoints, base: int,
             previous: dict[str, Any] | None, anchored: bool, keyed: bool, notes: list[str]) -> VerifyResult:
    """The verdict once every part held: ``ok``, ``unanchored`` or ``unsigned``, and what an
    auditor should know (notes)."""
    head_given = any(where.startswith("the head file") for where, _ in outside)
    last = base + chain.count
    if not head_given and cps.n:
        notes.append(f"no head file beside the journal ({head_path(p).name})")
    if not keyed and anchored:
        # Unsigned, a head file or an anchor vouches for nothing: whoever can write the
        # journal's folder can rewrite entries, re-chain them and write a matching head.
        anchored = False
        notes.append("no public key given: the head file and anchors match, but their signatures were not "
                     "checked, so they vouch for nothing (give --public-key)")
    elif cps.n and not keyed:
        notes.append("no public key given: checkpoint signatures were not checked")
    if cps.old:
        notes.append(f"{cps.old} checkpoint entries of an older version (v1, v2) sign the chain but not their own "
                     "recovery state")
    # The checkpoint entry itself is signed (v3: every byte of it), so the tail is what
    # comes after it. Without checkpoints nothing is signed at all.
    # A v1 or v2 checkpoint (formats 2 and 3, migrated) signed the chain up to the entry before
    # it, not its own entry (its time, its recovery state): the last such entry is in the tail.
    tail = (last - cps.last + cps.last_old) if cps.n else chain.count
    tail_kinds = dict(chain.tail_kinds)  # from the last checkpoint entry on: it is not in the tail
    if cps.n and not cps.last_old:
        tail_kinds = {k: v for k, v in tail_kinds.items() if k != CHECKPOINT_KIND or v > 1}
        if CHECKPOINT_KIND in tail_kinds:
            tail_kinds[CHECKPOINT_KIND] -= 1
    checked = chain.mac_key is not None
    if tail and cps.n:
        what = ", ".join(f"{n} {k}" for k, n in sorted(tail_kinds.items()))
        notes.append(f"{tail} entries after the last signed checkpoint ({what}) are covered by no signature "
                     + ("; their MACs were checked with the table key" if checked else
                        "and nothing checked them (a round in progress, a controller stopped without a clean "
                        "shutdown, or entries appended by someone else): only --key can check their MACs"))
    if not anchored and keyed:  # without keys the note above says why already
        notes.append("nothing outside the journal vouches for its end (no signed head file, no anchors): "
                     "a truncation or an older copy could not be told apart")
    if previous is not None:
        notes.append(f"this segment (gaming day {previous.get('next', '?')}) goes on from entry {base} of gaming day "
                     f"{previous.get('gaming_day')!s:.10} ({previous.get('archive')!s:.40}): audit verify --archive checks "
                     "that it is there and chains to it")
    status = "unanchored" if not anchored else "unsigned" if tail and not checked else "ok"
    return VerifyResult(status, chain.count, None, "", cps.n, tail, tuple(notes), tail_kinds, checked and bool(tail),
                        base + 1, chain.h.hex(), previous, cps.last)


def _segment_previous(db: sqlite3.Connection) -> dict[str, Any] | str | None:
    """What the first entry of a gaming day's segment names of the day before
    (``seq``, ``head``, ...), None when the journal starts at entry 1, or why it does
    not read (a str)."""
    try:
        row = db.execute("SELECT seq, kind, body FROM main.entries ORDER BY rowid LIMIT 1").fetchone()
    except sqlite3.Error:
        return None  # the pass over the entries says why it does not read
    text = _sql_body(row[2]) if row is not None else None  # None: the pass over the entries names it
    if row is None or row[1] != SEGMENT_KIND or not isinstance(text, str) or not isinstance(row[0], int):
        return None
    try:
        body = json.loads(text)
        prev = body.get("previous") if isinstance(body, dict) else None
        if prev is None:
            return None
        if not isinstance(prev, dict) or not isinstance(prev.get("seq"), int) or prev["seq"] + 1 != row[0]:
            raise ValueError("it does not name the entry before it")
        if len(bytes.fromhex(prev["head"])) != 32:
            raise ValueError("its previous head is not 32 bytes")
    except (ValueError, TypeError, KeyError) as exc:
        return f"segment entry {row[0]} does not read: {exc}"
    return {**prev, "next": body.get("open")}


def signed_ok_early(cp: Any, table_id: str, keys: dict[str, Ed25519PublicKey]) -> str | None:
    """Why ``cp`` (the previous day's last checkpoint named by a segment entry) is not a
    checkpoint of ``table_id`` signed by one of ``keys`` (unchecked without keys)."""
    if not isinstance(cp, dict):
        return "is not a checkpoint"
    if cp.get("table_id") != table_id:
        return f"belongs to table {cp.get('table_id')!r:.40}"
    return check_signed(cp, keys) if keys else None


def _first_in(cp: dict[str, Any], stretch: list[bytes], start: int) -> int | None:
    """The first entry of a stretch (hashes ``stretch`` from seq ``start``) whose hash
    disagrees with the checkpoint's signed digests."""
    try:
        digests, n = unb64(cp["digests"]), DIGEST_BYTES.get(cp.get("v"), 8)
    except (KeyError, ValueError, TypeError):
        return None
    for i, got in enumerate(stretch):
        if digests[i * n:(i + 1) * n] != got[:n]:
            return start + i
    return None


def _locate(p: Path, cp: dict[str, Any], h: bytes = GENESIS, base: int = 0) -> int | None:
    """For a checkpoint saved outside the journal that disagrees with it: the first entry
    of the checkpoint's stretch whose hash differs from its signed digest (a second
    pass over the journal)."""
    try:
        start, end = int(cp["from"]), int(cp["seq"])
        digests, n = unb64(cp["digests"]), DIGEST_BYTES.get(cp.get("v"), 8)
        db = connect(p)
    except (KeyError, ValueError, TypeError, sqlite3.Error):
        return None
    try:
        for seq, ts, kind, rid, did, body in db.execute(
                "SELECT seq, ts, kind, round_id, deck_id, body FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq",
                (base, end)):
            h = chain_next(h, seq, ts, kind, rid, did, body)
            if seq >= start and h[:n] != digests[(seq - start) * n:(seq - start + 1) * n]:
                return seq
    except (sqlite3.Error, ValueError, TypeError):
        return None
    finally:
        db.close()
    return None
