"""The floor's receipts and its statements of what its notary holds (table/floor_anchor.py),
as a part of :class:`table.floor.ingest.Floor`: the receipt signed for each checkpoint the
notary takes, a receipt heard back from a table checked against what the database holds,
and the statement, retained on ``threecard/{floor}/{table}/notary``, of what the notary
holds for each table (RFC 9162 section 8.3: a client holding a signed tree head catches a
log that went back). Apart from ingest.py so each file keeps one job."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from typing import TYPE_CHECKING, Any, Callable

import structlog

from table.floor_anchor import Receipt, ReceiptError, sign_receipt, verify_receipt

from .store import Tx

if TYPE_CHECKING:
    import threading

    from table.keys import TableKey

    from .store import Store

log = structlog.get_logger("table.floor")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _digest(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]


class FloorReceipts:
    """The receipts part of the floor (mixed into :class:`table.floor.ingest.Floor`, whose
    store, key, locks, counts, sinks and alarms it uses)."""

    key: "TableKey | None"
    store: "Store"
    counts: Any  #: the floor's Counts (ingest.py; not imported: no import circle)
    _cv: "threading.Condition"
    notary_sinks: list[Callable[[str, str, bytes], None]]
    receipt_sinks: list[Callable[[str, str, bytes], None]]

    def _alarm(self, tx: Tx, aid: str, table: str | None, source: str, kind: str, text: str,
               detail: dict[str, Any]) -> None:
        raise NotImplementedError  # the floor's own alarm, signed by its key (ingest.Floor._alarm)

    def _announce(self, tx: Tx) -> list[Callable[[], None]]:
        assert self.key is not None
        now = _now()
        out = []
        for table, seq, head, floor in tx.query("SELECT n.table_id, n.seq, n.head, s.floor FROM notary n "
                                                "JOIN tables_seen s ON s.table_id = n.table_id"):
            env = sign_receipt(self.key, str(table), int(seq), str(head), now)
            out.append((str(floor), str(table), json.dumps(env, separators=(",", ":")).encode()))

        def send() -> None:
            for floor, table, payload in out:
                self._state_notary(floor, table, payload)
        return [send]

    def _state_notary(self, floor: str, table: str, payload: bytes) -> None:
        for sink in list(self.notary_sinks) if floor else []:
            try:
                sink(floor, table, payload)
            except Exception as exc:  # noqa: BLE001 - a broker that is away: stated at its reconnect
                log.warning("floor_notary_not_stated", table_id=table, error=str(exc)[:200])

    # -- receipts (table/floor_anchor.py) --------------------------------------------------------

    def _sign_receipt(self, tx: Tx, table: str, cp: dict[str, Any], floor: str, now: str) -> list[Callable[[], None]]:
        """Sign and keep the receipt of the checkpoint ``cp`` the notary just took, unless a
        receipt at or above it is known (this database is behind one: a lower receipt must
        never replace the broker's retained evidence); the publish runs after the commit."""
        if self.key is None:
            return []
        rows = tx.query("SELECT seq, conflict FROM floor_receipts WHERE table_id = ?", (table,))
        if rows and (int(rows[0][0]) >= int(cp["seq"]) or rows[0][1]):
            return []  # never a receipt over one heard back, nor while the database contradicts one
        env = sign_receipt(self.key, table, int(cp["seq"]), str(cp["head"]), now)
        text = json.dumps(env, separators=(",", ":"))
        tx.execute("INSERT INTO floor_receipts (table_id, seq, head, envelope, ts) VALUES (?, ?, ?, ?, ?) "
                   "ON CONFLICT (table_id) DO UPDATE SET seq = excluded.seq, head = excluded.head, "
                   "envelope = excluded.envelope, ts = excluded.ts WHERE floor_receipts.seq < excluded.seq",
                   (table, int(cp["seq"]), str(cp["head"]), text, now))
        if not floor:
            seen = tx.query("SELECT floor FROM tables_seen WHERE table_id = ?", (table,))
            floor = str(seen[0][0]) if seen else ""

        def send() -> None:
            with self._cv:
                self.counts.receipts_signed += 1
            self._state_notary(floor, table, text.encode())  # the notary moved up: what it holds now
            for sink in list(self.receipt_sinks) if floor else []:
                try:
                    sink(floor, table, text.encode())
                except Exception as exc:  # noqa: BLE001 - a broker that is away: the receipt stays kept
                    log.warning("floor_receipt_not_sent", table_id=table, seq=cp["seq"], error=str(exc)[:200])
        return [send]

    def _receipt_seen(self, tx: Tx, table: str, r: Receipt) -> list[Callable[[], None]]:
        """A genuine receipt of this floor heard back (the broker's retained one, or one a table
        presents): the database is behind it when the notary is below its seq, or holds
        another head at its seq. Then a ``floor_database_behind`` alarm (once per receipt) and
        the receipt kept as the table's highest (the table is held: :meth:`held`)."""
        rows = tx.query("SELECT seq, head FROM notary WHERE table_id = ?", (table,))
        notary = (int(rows[0][0]), str(rows[0][1])) if rows else None
        have = tx.query("SELECT head FROM checkpoints WHERE table_id = ? AND seq = ?", (table, r.seq))
        if notary is not None and notary[0] >= r.seq and have and str(have[0][0]) == r.head:
            return []  # the database holds it
        if notary is not None and notary[0] >= r.seq and not have:
            # Gone past it, and the checkpoint it names (kept when it was signed) is not here: the
            # database lost what it held (restored from an older copy) and a table's newer
            # checkpoint took the notary past since. Alarmed; the notary holds the table's latest.
            why = (f"the floor's database does not hold table {table}'s checkpoint {r.seq}, which the floor signed "
                   f"a receipt for at {r.ts}: it was restored from an older copy (its notary has since taken "
                   f"{notary[0]}); the rounds between are missing from the floor's reports")
            self._alarm(tx, _digest("receipt", table, r.seq, r.head), table, "floor", "floor_database_behind", why,
                        {"receipt": r.envelope, "notary_seq": notary[0]})
            return []
        if notary is None or notary[0] < r.seq:
            why = (f"the floor's database is behind the receipt it signed for table {table}'s checkpoint {r.seq} "
                   f"at {r.ts} (its notary holds {notary[0] if notary else 'nothing'}): it was restored from an "
                   "older copy or seeded from one; the floor holds the table")
        else:
            why = (f"the floor signed a receipt for table {table}'s checkpoint {r.seq} with head {r.head[:16]}, "
                   f"and its database holds another head there: the database was replaced; the floor holds the table")
        if notary is not None and notary[0] >= r.seq:
            # the database holds another head at the receipt's place: kept as a conflict, which
            # holds the table whatever the notary does next (a forked chain dealt past the
            # receipt's place would otherwise lift the hold) until a person clears it
            tx.execute("INSERT INTO floor_receipts (table_id, seq, head, envelope, ts, conflict) "
                       "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (table_id) DO UPDATE SET seq = excluded.seq, "
                       "head = excluded.head, envelope = excluded.envelope, ts = excluded.ts, "
                       "conflict = excluded.conflict",
                       (table, r.seq, r.head, json.dumps(r.envelope, separators=(",", ":")), r.ts, why))
        else:
            tx.execute("INSERT INTO floor_receipts (table_id, seq, head, envelope, ts) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT (table_id) DO UPDATE SET seq = excluded.seq, head = excluded.head, "
                       "envelope = excluded.envelope, ts = excluded.ts WHERE floor_receipts.seq < excluded.seq",
                       (table, r.seq, r.head, json.dumps(r.envelope, separators=(",", ":")), r.ts))
        self._alarm(tx, _digest("receipt", table, r.seq, r.head), table, "floor", "floor_database_behind", why,
                    {"receipt": r.envelope, "notary_seq": notary[0] if notary else None})

        def tell() -> None:
            with self._cv:
                self.counts.receipts_behind += 1
            log.error("floor_database_behind", table_id=table, receipt_seq=r.seq,
                      notary_seq=notary[0] if notary else None, why=why)
        return [tell]

    def present_receipt(self, table_id: str, raw: bytes) -> None:
        """A receipt ``table_id`` presents with its notary question (its journal's latest):
        compared with the database at once (:meth:`_receipt_seen`). One not signed by this
        floor's key, or about another table, is logged and changes nothing (a floor whose
        key was replaced signs afresh). Raises :class:`~table.floor.store.StoreError`."""
        if self.key is None:
            return
        try:
            r = verify_receipt(raw, self.key.public, table_id)
        except ReceiptError as exc:
            log.warning("floor_receipt_presented_refused", table_id=table_id, error=str(exc)[:200])
            return
        with self.store.transaction() as tx:
            after = self._receipt_seen(tx, table_id, r)
        for fn in after:
            fn()

    def held(self, table_id: str) -> str | None:
        """Why the floor holds ``table_id`` (its notary is below the highest receipt the floor
        signed or heard back for it: this database is behind; or its database holds another
        head where a receipt of this floor names one: replaced), or None."""
        rows = self.store.query("SELECT r.seq, r.ts, n.seq, r.conflict FROM floor_receipts r LEFT JOIN notary n "
                                "ON n.table_id = r.table_id WHERE r.table_id = ?", (table_id,))
        if rows and rows[0][3]:
            return f"{rows[0][3]} (a supervisor at the table and the floor examine it)"
        if not rows or (rows[0][2] is not None and int(rows[0][2]) >= int(rows[0][0])):
            return None
        seq, ts, top = int(rows[0][0]), rows[0][1], rows[0][2]
        return (f"the floor's database is behind the receipt it signed for checkpoint {seq} at {ts} (its notary "
                f"holds {top if top is not None else 'nothing'} for this table): restored from an older copy or "
                "seeded from one; a supervisor at the table and the floor examine it")
