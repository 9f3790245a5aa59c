"""The notary anchored both ways: the floor's signed receipts, and the floor a table's record names.

Certificate Transparency (RFC 9162, section 8.1 and 8.3: clients keep the signed tree
heads a log gave them, and a log that later shows an older head is caught) is the model.
The floor's notary (:mod:`table.notary_client`, ``table/floor/``) holds each table's
highest signed checkpoint; a table whose journal is behind it is held. This module is
the other direction: what the table holds of the floor.

**A receipt.** For each checkpoint its notary accepts (it moves the notary up), the floor
signs a receipt with the floor key::

    {"schema": "threecard.floor-signed/1", "key_id": "<the floor key's id>",
     "payload": "{\\"schema\\":\\"threecard.receipt/1\\",\\"table_id\\":...,\\"seq\\":...,
                  \\"head\\":...,\\"ts\\":...}", "sig": "<base64>"}

signed over ``b"threecard.floor-signed/1\\nreceipt " + table_id + b"\\n" + payload``;
``seq`` the checkpoint's position in the table's journal, ``head`` its chain hash there
(the checkpoint's digest of the journal), ``ts`` the floor's time (ISO 8601, UTC). The
floor publishes it, retained, on ``threecard/{floor}/{table}/receipt`` (the broker's
ACL lets only the floor's account write it: ``deploy/mosquitto-threecard.acl``); the
table takes it there and journals it (kind ``floor_receipt``) when its journal holds that
checkpoint and the receipt is newer than the last it journaled, just before its next
checkpoint, which covers it (:class:`ReceiptBook`).

**What a receipt catches.** A floor whose database is behind a receipt (restored from an
older copy, or a new one ``tablectl floor seed`` filled from an old one) hears that
receipt again: on the broker's retained topic when it subscribes, and from the table,
which presents its latest journaled receipt with its start-up question to the notary.
The floor then alarms (``floor_database_behind``) and holds the table: its notary answer
says so, and the table holds for a supervisor (docs/integration.md, "The floor's
notary"). A journal rolled back together with the floor's database still meets the
floor's retained receipt on the broker.

**A running table learns it too.** The floor states what its notary holds for each table,
signed as a receipt of that checkpoint, retained on ``threecard/{floor}/{table}/notary``:
at every start (a restored database included) and whenever the notary moves up. A running
table compares each statement with the latest receipt it journaled (or keeps to journal):
a statement below it, or another head at its place, says the floor went back (RFC 9162
section 8.3: a log that shows a head older than one a client holds is caught); a statement
signed before that receipt (its ``ts``) is a replay of the floor's own older receipt on
that topic, never the floor going back since, and is logged only. The table
then journals an incident and holds before its next round, for a supervisor and the floor
to examine it (:meth:`ReceiptBook.floor_statement`, ``TableController.floor_behind``),
as a device fault is held: never an exit.

**The floor of record.** A table started with ``[floor] url`` journals which floor it
reports to (kind ``floor_link``: the url and the floor key's id) whenever that changes. A
start without ``[floor]`` of a table whose record names a floor is held: a named
supervisor signs off that it no longer reports to one (:class:`FloorLink`, used by
``table/procedure/startup.py``), journaled, before it deals. Removing ``[floor]`` is then
an act on the record, never a silent way around the notary.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from datetime import datetime
from dataclasses import dataclass
from typing import Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .keys import TableKey, key_id as key_id_of, verify_signature

log = structlog.get_logger("table.floor_anchor")

#: the envelope of everything the floor signs (as the notary's answer, table/notary_client.py)
FLOOR_SIGNED_SCHEMA = "threecard.floor-signed/1"
#: a receipt's payload
RECEIPT_SCHEMA = "threecard.receipt/1"
#: the journal's kinds this module writes
RECEIPT_KIND = "floor_receipt"
LINK_KIND = "floor_link"
#: the most bytes of a receipt taken (one is ~400)
MAX_RECEIPT = 4096


class ReceiptError(ValueError):
    """A receipt that is not the floor's word about this table: not an envelope, another
    key, a bad signature, another table, a malformed payload. The message says which."""


@dataclass(frozen=True)
class Receipt:
    """A verified receipt: ``table_id``, ``seq`` (the checkpoint's last entry), ``head``
    (its chain hash), ``ts`` (the floor's time), ``envelope`` (the signed JSON object, as
    kept and presented)."""

    table_id: str
    seq: int
    head: str
    ts: str
    envelope: dict[str, Any]


def signing_input(table_id: str, payload: str) -> bytes:
    """The bytes the floor signs for the receipt ``payload`` (JSON text) about ``table_id``."""
    return FLOOR_SIGNED_SCHEMA.encode() + b"\nreceipt " + table_id.encode() + b"\n" + payload.encode()


def sign_receipt(floor_key: TableKey, table_id: str, seq: int, head: str, ts: str) -> dict[str, Any]:
    """The floor's receipt (the envelope, a dict) for the checkpoint ``seq``/``head`` of
    ``table_id`` it accepted at ``ts`` (ISO 8601)."""
    payload = json.dumps({"schema": RECEIPT_SCHEMA, "table_id": table_id, "seq": int(seq), "head": str(head),
                          "ts": ts}, separators=(",", ":"))
    sig = base64.b64encode(floor_key.sign(signing_input(table_id, payload))).decode()
    return {"schema": FLOOR_SIGNED_SCHEMA, "key_id": floor_key.key_id, "payload": payload, "sig": sig}


def verify_receipt(raw: Any, floor_public: Ed25519PublicKey, table_id: str | None = None) -> Receipt:
    """``raw`` (bytes, text or the envelope dict) checked as the floor's receipt: the
    envelope, the floor key's id and signature, the payload, and (given) ``table_id``.
    Raises :class:`ReceiptError` naming what does not hold."""
    env = raw
    if isinstance(raw, (bytes, str)):
        if len(raw) > MAX_RECEIPT:
            raise ReceiptError(f"a receipt larger than {MAX_RECEIPT} bytes")
        try:
            env = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ReceiptError("a receipt that is not JSON") from None
    if not isinstance(env, dict) or env.get("schema") != FLOOR_SIGNED_SCHEMA or set(env) != {
            "schema", "key_id", "payload", "sig"} or not all(isinstance(env[k], str) for k in ("key_id", "payload",
                                                                                             "sig")):
        raise ReceiptError(f"not a {FLOOR_SIGNED_SCHEMA} envelope")
    if env["key_id"] != key_id_of(floor_public):
        raise ReceiptError(f"signed with key {env['key_id'][:16]!r}, not the floor's")
    try:
        payload = json.loads(env["payload"])
        sig = base64.b64decode(env["sig"], validate=True)
    except (ValueError, binascii.Error, RecursionError):
        raise ReceiptError("a payload or signature that does not decode") from None
    if not isinstance(payload, dict) or payload.get("schema") != RECEIPT_SCHEMA:
        raise ReceiptError(f"not a {RECEIPT_SCHEMA} payload")
    table = payload.get("table_id")
    seq, head, ts = payload.get("seq"), payload.get("head"), payload.get("ts")
    if not isinstance(table, str) or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 \
            or not isinstance(head, str) or not isinstance(ts, str):
        raise ReceiptError("a receipt without table_id, seq, head and ts")
    if len(sig) != 64 or not verify_signature(floor_public, sig, signing_input(table, env["payload"])):
        raise ReceiptError("a bad signature (not the floor key's)")
    if table_id is not None and table != table_id:
        raise ReceiptError(f"a receipt about table {table[:40]!r}, not {table_id!r}")
    return Receipt(table, seq, head, ts, env)


def encode_for_url(envelope: dict[str, Any]) -> str:
    """The receipt ``envelope`` as one URL-safe base64 token (the notary request's ``receipt=``)."""
    return base64.urlsafe_b64encode(json.dumps(envelope, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_from_url(token: str) -> bytes:
    """The receipt's JSON bytes from :func:`encode_for_url`'s token. Raises :class:`ReceiptError`."""
    if len(token) > 2 * MAX_RECEIPT:
        raise ReceiptError("a receipt token too long")
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise ReceiptError("a receipt token that is not base64url") from None


def latest_receipt(journal: Any) -> dict[str, Any] | None:
    """The latest receipt the journal holds (its envelope), or None."""
    entry = journal.last(RECEIPT_KIND)
    env = entry.body.get("receipt") if entry is not None else None
    return env if isinstance(env, dict) else None


def _signed_before(said: Receipt, held: Receipt) -> bool:
    """Whether the floor signed ``said`` before ``held`` (their ``ts``, ISO 8601); False when
    either time does not read (then the statement is taken as it says)."""
    try:
        a, b = datetime.fromisoformat(said.ts), datetime.fromisoformat(held.ts)
        return (a.tzinfo is None) == (b.tzinfo is None) and a < b
    except (ValueError, TypeError):
        return False


class ReceiptBook:
    """The table's side of the receipts: :meth:`take` keeps a receipt the floor sent (the
    broker client's thread), :meth:`flush` journals it just before the table's next
    checkpoint (``Journal.before_checkpoint``, the controller's thread), so the checkpoint
    covers it and a clean stop leaves no entry after the last checkpoint.

    ``journal``: the table's open :class:`~table.journal.Journal`; ``floor_public``: the
    floor key of ``[floor] public_key``; ``table_id``. :meth:`attach` hooks :meth:`flush`."""

    def __init__(self, journal: Any, floor_public: Ed25519PublicKey, table_id: str) -> None:
        self.journal = journal
        self.floor_public = floor_public
        self.table_id = table_id
        self._pending: Receipt | None = None
        self._lock = threading.Lock()
        #: called with why (one line) when the floor's statement is behind what the table holds
        self.on_behind: list[Any] = []

    def attach(self) -> "ReceiptBook":
        """Journal what :meth:`take` kept before each of the journal's checkpoints."""
        self.journal.before_checkpoint.append(self.flush)
        return self

    def _newest(self) -> Receipt | None:
        last = latest_receipt(self.journal)
        if last is None:
            return None
        try:
            return verify_receipt(last, self.floor_public, self.table_id)
        except ReceiptError:
            return None  # a floor key changed since: the new floor's receipt is kept

    def _newest_seq(self) -> int:
        r = self._newest()
        return r.seq if r is not None else -1

    def floor_statement(self, raw: bytes) -> str | None:
        """The floor's statement of what its notary holds for this table (``raw``: a receipt
        of that checkpoint, from the retained ``.../notary`` topic) compared with the latest
        receipt the table journaled or keeps to journal. Returns why the floor is behind
        (its statement is below that receipt, or names another head at its place: its
        database was restored from an older copy, seeded from one, or replaced), after
        calling each of :attr:`on_behind` with it; None when the floor holds what the table
        holds. A statement that does not verify is logged and changes nothing (never raises)."""
        try:
            said = verify_receipt(raw, self.floor_public, self.table_id)
        except ReceiptError as exc:
            log.warning("floor_statement_refused", error=str(exc)[:200])
            return None
        with self._lock:
            pending = self._pending
        held = max((r for r in (pending, self._newest()) if r is not None), key=lambda r: r.seq, default=None)
        if held is None or said.seq > held.seq or (said.seq == held.seq and said.head == held.head):
            return None
        if _signed_before(said, held):
            # The floor signs a statement when it makes it (Floor.announce_notary); one signed
            # before the receipt the table holds is a replay (the floor's own older receipt put
            # on the .../notary topic), not the floor going back since: logged, nothing held.
            # A floor restored since states its older notary at a later time and is caught.
            log.warning("floor_statement_replayed", statement_seq=said.seq, statement_ts=said.ts[:40],
                        receipt_seq=held.seq, receipt_ts=held.ts[:40])
            return None
        if said.seq < held.seq:
            why = (f"the floor's notary holds this table's checkpoint {said.seq} ({said.ts}), behind the receipt "
                   f"for checkpoint {held.seq} the floor signed at {held.ts} and the table holds: the floor's "
                   "database was restored from an older copy or seeded from one")
        else:
            why = (f"the floor's notary holds another head at this table's checkpoint {said.seq} than the receipt "
                   f"the floor signed at {held.ts} and the table holds: the floor's database was replaced")
        log.error("floor_behind_table", statement_seq=said.seq, receipt_seq=held.seq, why=why)
        for callback in list(self.on_behind):
            try:
                callback(why)
            except Exception:  # noqa: BLE001 - the broker client's thread must go on
                log.exception("floor_behind_callback_failed")
        return why

    def take(self, raw: bytes) -> bool:
        """Keep the receipt ``raw`` (bytes from the broker) to journal when it verifies, names
        a checkpoint this journal holds (same seq and head) and is newer than the last one
        journaled or kept; True when kept. Never raises for a bad receipt: logged and
        dropped (a receipt naming a checkpoint the journal does not hold is the notary's
        business at the next start, not this thread's)."""
        try:
            r = verify_receipt(raw, self.floor_public, self.table_id)
        except ReceiptError as exc:
            log.warning("floor_receipt_refused", error=str(exc)[:200])
            return False
        with self._lock:
            pending = self._pending.seq if self._pending is not None else -1
        if max(pending, self._newest_seq()) >= r.seq:
            return False  # the one held, or an older one: nothing newer to keep
        mine = next(iter(self.journal.entries("checkpoint", since=r.seq, upto=r.seq + 1)), None)
        held = mine.body.get("checkpoint") if mine is not None else None
        if not isinstance(held, dict) or held.get("head") != r.head:
            log.warning("floor_receipt_not_held", seq=r.seq, journal_seq=self.journal.last_seq,
                        what="the floor's receipt names a checkpoint this journal does not hold")
            return False
        with self._lock:
            if self._pending is None or self._pending.seq < r.seq:
                self._pending = r
        return True

    def flush(self) -> None:
        """Journal the receipt kept, if any (kind ``floor_receipt``: the envelope, its seq,
        head and the floor's time). Raises what ``Journal.append`` raises."""
        with self._lock:
            r, self._pending = self._pending, None
        if r is not None and r.seq > self._newest_seq():
            self.journal.append(RECEIPT_KIND, receipt=r.envelope, seq=r.seq, head=r.head, floor_ts=r.ts)
            log.info("floor_receipt_journaled", seq=r.seq)


@dataclass(frozen=True)
class FloorLink:
    """The floor a table reports to, as its start-up gives it: ``url`` (``[floor] url``)
    and ``key_id`` (the id of ``[floor] public_key``). :meth:`of` makes it from the
    config's ``[floor]`` section (None: no floor)."""

    url: str
    key_id: str

    @classmethod
    def of(cls, section: Any) -> "FloorLink | None":
        """From ``[floor]`` (:class:`table.config.FloorSection`); None without a ``url``.
        Raises ``KeyFileError`` for an unreadable ``public_key``."""
        if section is None or not getattr(section, "url", None):
            return None
        from .keys import load_public_key

        return cls(str(section.url), key_id_of(load_public_key(section.public_key)))


def floor_of_record(journal: Any) -> dict[str, Any] | None:
    """The floor the journal last recorded (the ``floor_link`` entry's body: ``url``, None
    once a supervisor signed it off, and ``key_id``), or None when it never named one."""
    entry = journal.last(LINK_KIND)
    return dict(entry.body) if entry is not None else None
