"""The floor's ingest: every table message from the brokers, checked against its table's key,
kept in the floor database; the notary's rule applied to every checkpoint.

:meth:`Floor.receive` (a broker client's thread) checks the message's signature with
:func:`table.interfaces.mqtt.verify_message` (one call site, :meth:`Floor._verify`),
and a checkpoint's own signature with :func:`table.journal.check_signed`; what does
not verify is dropped, counted and logged (and an alarm row, at most one per table,
day and reason), never stored. The table a message is kept under is the one its signed
body names (``table_id``, which must be the topic's), and a status's floor is its body's
``floor``, which must be the topic's: a genuine message republished under another
table's or floor's topic is refused like a forged one (any prefix a bridge put before
``threecard/`` is not compared). What verifies and has something to keep is queued
(the events the floor keeps nothing of, :data:`KEPT_EVENTS`, are counted as
``not_kept`` and never queued) (bounded: a full queue makes
the broker's thread wait, so QoS 1 backs up at the broker) and written by one
writer thread in transactions of up to ``batch_max`` messages, each gathered for
at most :data:`LINGER_S` after its first (one commit, and one wake of the writer,
per batch rather than per message: ``bench/floor_ingest.py``).

**Durability.** A message is acknowledged to the broker (QoS 1 PUBACK, sent by
paho when :meth:`Floor.receive` returns) once it is verified and queued (an event
the floor keeps nothing of: once verified and counted), before its batch is
committed: committed means SQLite's WAL with ``synchronous=NORMAL``
(survives a crash of the floor process; the last transactions may be lost to a
power cut) or PostgreSQL's commit. A crash of the floor process loses the
messages queued and not yet committed (at most ``queue_max``; at the rates of a
floor, the last :data:`LINGER_S` or so). On restart the brokers deliver every
table's retained status and checkpoint again, so the notary is back at each
table's latest checkpoint; events of the lost window stay only in the tables'
journals (the record of truth), and the floor's round results miss them.

What is kept (``table/floor/migrations.py``), from the topics
``threecard/{floor}/{table}/events | status | checkpoint``:

* ``round_opened`` and ``bets_closed`` (the bets as frozen), ``round_settled``, ``round_voided``
  -> ``round_results`` (wagers,
  the players' net, the table's win = minus the players' net), by gaming day;
* ``incident``, ``custody_violation``, ``round_held``, ``round_voided`` -> ``incidents``;
* ``checkpoint`` (event or retained) -> ``checkpoints`` and the ``notary``
  (:mod:`table.floor.notary`); a lower or forked one -> an ``alarms`` row;
* ``day_report`` events (when tables publish them) -> ``day_reports``;
* the status -> ``tables_seen``; its alarms -> ``alarms`` (source ``table``); the
  receipt it presents (the latest its journal holds) -> compared as below;
* ``receipt`` (the floor's own receipts, retained on the broker: :mod:`table.floor_anchor`)
  -> compared with the notary: one the database is behind is a ``floor_database_behind``
  alarm, and the table is held (:meth:`Floor.held`) until the notary passes it.

**Receipts.** For each checkpoint that moves the notary up (and is above every receipt
the floor knows of for the table), the floor signs a receipt with its key, keeps it
(``floor_receipts``) and, once the batch is committed, publishes it retained on
``threecard/{floor}/{table}/receipt`` (each :attr:`Floor.receipt_sinks`); the table
journals it. A receipt heard back above the notary (the broker's retained one when the
floor subscribes, or the one a table presents with its notary question) means this
database is behind what the floor once signed: restored from an older copy, or a new one
seeded from an old one (RFC 9162 section 8.3: a log caught going back by the heads its
clients hold). The floor also states what its notary holds for each table, retained on
``threecard/{floor}/{table}/notary`` (a receipt of the notary's checkpoint: with each
receipt, and for every table whenever a broker feed subscribes, :meth:`Floor.announce_notary`),
so a running table whose latest receipt is above it holds before its next round.

Other events (cards dealt, decisions) are checked and counted, not kept: the
table's journal keeps them, and the reports do not need them.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from zoneinfo import ZoneInfo

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from table.interfaces.mqtt import ForgedMessage, ReceiverLoop, StatusMark, order_status, verify_message
from table.floor_anchor import ReceiptError, verify_receipt
from table.journal import check_signed
from table.keys import TableKey, key_id as key_id_of

from .notary import judge
from .receipts import FloorReceipts, _digest, _now
from .record import insert_alarm
from .store import Store, StoreError, Tx

log = structlog.get_logger("table.floor")

#: the largest message taken (a checkpoint's digests grow with its stretch; a round is ~30 entries)
MAX_MESSAGE = 256 * 1024
#: the game every Three Card Poker table reports under (``round_results.game``)
GAME = "three_card_poker"
#: a batch is gathered for at most this long after its first message (s), then committed
LINGER_S = 0.02
#: the most refusal reasons counted apart (``Counts.by_reason``)
MAX_REASONS = 64
INCIDENT_TYPES = ("incident", "custody_violation", "round_held", "round_voided")
#: the events the floor keeps something of (the rest are checked and counted, never queued)
KEPT_EVENTS = frozenset({"round_opened", "bets_closed", "round_settled", "round_voided", "day_report", "checkpoint",
                         *INCIDENT_TYPES})


@dataclass(frozen=True)
class GamingDay:
    """Which gaming day a time falls in: the day in ``tz`` of the time minus ``starts``
    (the hour the gaming day begins, e.g. 6 for 06:00; COMAR 36.05.03.25 reports by
    gaming day, month to date and year to date)."""

    tz: str = "UTC"
    starts_h: int = 0

    def of(self, ts: str) -> str:
        """The gaming day (``YYYY-MM-DD``) of the ISO 8601 time ``ts``; raises ``ValueError``."""
        t = _dt.datetime.fromisoformat(ts)
        if t.tzinfo is None:
            raise ValueError(f"{ts!r} has no time zone")
        local = t.astimezone(ZoneInfo(self.tz)) - _dt.timedelta(hours=self.starts_h)
        return local.date().isoformat()


@dataclass
class Counts:
    """What the floor has taken and refused since it started (``GET /api/v1/floor/health``)."""

    received: int = 0
    verified: int = 0
    #: verified messages written to the database (their batch committed)
    stored: int = 0
    #: verified events the floor keeps nothing of (cards dealt, decisions: the table's journal keeps them)
    not_kept: int = 0
    forged: int = 0
    too_big: int = 0
    unknown_table: int = 0
    refused_checkpoints: int = 0
    #: receipts the floor signed, and receipts heard back that this database is behind
    receipts_signed: int = 0
    receipts_behind: int = 0
    write_errors: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


@dataclass
class SeedCounts:
    """What :meth:`Floor.seed` did: ``taken`` (kept, new or already there), ``refused`` (a
    fork or lower against what was kept: alarmed), ``bad_signature`` (not the table's
    key), ``unknown_table`` (no ``TABLE_ID.pub`` in the floor's table keys)."""

    taken: int = 0
    refused: int = 0
    bad_signature: int = 0
    unknown_table: int = 0


def _table_topic(topic: str) -> list[str]:
    """``[threecard, FLOOR, TABLE, KIND]`` of ``[PREFIX/]threecard/FLOOR/TABLE/KIND`` (the
    prefix a bridge added is dropped: the signature does not cover it), or ``[]``."""
    parts = topic.split("/")
    return parts[-4:] if len(parts) >= 4 and parts[-4] == "threecard" else []


def _cents(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


class Floor(FloorReceipts):
    """The floor's ingest into ``store`` (a migrated :class:`~table.floor.store.Store`).

    ``keys``: table id -> public key (``TABLE_ID.pub``; only these tables are believed);
    ``day``: the :class:`GamingDay`; ``queue_max``: messages waiting for the writer;
    ``batch_max``: messages per transaction; ``key``: the floor key, which signs the
    floor's own alarms (:mod:`table.floor.record`; None: unsigned, for a bench). :meth:`start`
    starts the writer, :meth:`close` drains and stops it. ``counts``: :class:`Counts`.
    """

    def __init__(self, store: Store, keys: dict[str, Ed25519PublicKey], *, day: GamingDay = GamingDay(),
                 queue_max: int = 20_000, batch_max: int = 2_000, key: TableKey | None = None) -> None:
        self.store = store
        self.key = key
        self.keys = dict(keys)
        self.day = day
        self.counts = Counts()
        self.batch_max = batch_max
        self.queue_max = queue_max
        self._items: deque[tuple] = deque()   # verified, waiting for the writer (bounded by queue_max)
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)    # a batch written or a message refused (wait_idle)
        self._work = threading.Condition(self._lock)  # the writer's: a first message, or a full batch
        self._room = threading.Condition(self._lock)  # the receivers': room in the queue again
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._forged_alarms: set[str] = set()
        self._pending = 0  # messages received and not yet written or refused (wait_idle)
        #: table id -> the :class:`~table.interfaces.mqtt.StatusMark` of the status taken last (seeded
        #: from the database, so a restarted floor refuses a replay too; :meth:`_take_status`)
        self._status_marks: dict[str, StatusMark] = self._statuses_stored()
        #: where each receipt goes once its batch is committed: ``sink(floor, table_id, payload)``
        #: (the broker feeds' retained publish; :class:`BrokerFeed`)
        self.receipt_sinks: list[Callable[[str, str, bytes], None]] = []
        #: where the floor's statement of what its notary holds for a table goes (with each
        #: receipt, and at :meth:`announce_notary`): ``sink(floor, table_id, payload)``
        self.notary_sinks: list[Callable[[str, str, bytes], None]] = []

    # -- receiving (the broker clients' threads) ------------------------------------------------

    def _verify(self, topic: str, payload: bytes) -> dict[str, Any]:
        """The one place the floor checks a table's signature (``table.interfaces.mqtt``)."""
        return verify_message(payload, topic, self.keys)

    def receive(self, topic: str, payload: bytes) -> bool:
        """Check and queue one broker message; True when it verified. Blocks while the
        writer's queue is full (until :meth:`close`).

        The table comes from the signed body (its ``table_id``, which must be the topic's:
        :func:`~table.interfaces.mqtt.verify_message`), and so does a status's floor (its
        ``floor``): a genuine message republished under another table's or another floor's
        topic is refused like a forged one (a bridge's prefix before ``threecard/`` is not
        part of what is compared). An event the floor does not keep (cards dealt,
        decisions: :data:`KEPT_EVENTS`) is checked and counted (``not_kept``), never
        queued: there is nothing of it to commit."""
        if len(payload) > MAX_MESSAGE:
            self._refuse(topic, f"larger than {MAX_MESSAGE} bytes", "too_big")
            return False
        parts = _table_topic(topic)
        kind = parts[3] if parts else ""
        if kind == "receipt":
            return self._receive_receipt(topic, parts, payload)
        try:
            message = self._verify(topic, payload)
            table = message["table_id"]  # the signed body's, checked to be the topic's table
            if kind == "events":
                etype = message.get("type")
                if etype == "checkpoint":
                    self._check_checkpoint(table, message.get("data"))
            elif kind == "status":
                floor = message.get("floor")
                if floor != parts[1]:
                    raise ForgedMessage(f"the status names floor {str(floor)[:64]!r}, not the topic's "
                                        f"{parts[1][:64]!r}: a table's signed status moved to another floor's topic")
                if not self._take_status(table, message):
                    with self._lock:  # the retained one again (a restart, a QoS 1 redelivery): nothing new
                        self.counts.received += 1
                        self.counts.verified += 1
                        self.counts.not_kept += 1
                    return True
            elif kind == "checkpoint":
                self._check_checkpoint(table, message)
        except ForgedMessage as exc:
            self._refuse(topic, str(exc), "unknown_table" if "no public key" in str(exc) else "forged")
            return False
        if kind not in ("events", "status", "checkpoint"):
            self._refuse(topic, f"not a table topic the floor keeps ({kind[:32]!r})", "forged")
            return False
        with self._lock:
            if kind == "events" and etype not in KEPT_EVENTS:
                self.counts.received += 1
                self.counts.verified += 1
                self.counts.not_kept += 1
                return True
            while len(self._items) >= self.queue_max and not self._stop.is_set():
                self._room.wait(0.5)  # the writer is behind: QoS 1 backs up at the broker
            self.counts.received += 1
            self.counts.verified += 1
            self._pending += 1  # until it is written (wait_idle)
            self._items.append((kind, parts[1], table, message))
            if len(self._items) in (1, self.batch_max):  # one wake a batch, not one a message
                self._work.notify()
        return True

    def _receive_receipt(self, topic: str, parts: list[str], payload: bytes) -> bool:
        """A receipt on the broker's ``.../receipt`` topic: the floor's own word (its key), about
        the topic's table; queued for :meth:`_receipt_seen`. One not signed by this floor's key
        is refused like a forged message."""
        if self.key is None:
            return True  # a floor without a key (a bench) signs no receipts and judges none
        try:
            r = verify_receipt(payload, self.key.public, parts[2])
        except ReceiptError as exc:
            self._refuse(topic, f"a receipt refused: {exc}", "forged")
            return False
        with self._lock:
            self.counts.received += 1
            self.counts.verified += 1
            self._pending += 1
            self._items.append(("receipt", parts[1], r.table_id, r))
            if len(self._items) in (1, self.batch_max):
                self._work.notify()
        return True

    def announce_notary(self) -> None:
        """State, for every table the notary holds, what it holds: a receipt of the notary's
        checkpoint, signed now and handed to :attr:`notary_sinks` (the broker's retained
        ``.../notary`` topic), so a running table whose latest receipt is above it learns the
        floor went back (a database restored from an older copy: :mod:`table.floor_anchor`).
        Queued behind the messages already received, so a statement never goes out after a
        newer receipt. Called when a broker feed subscribes (each start, each reconnect)."""
        if self.key is None:
            return
        with self._lock:
            self._pending += 1
            self._items.append(("announce", "", "", None))
            if len(self._items) in (1, self.batch_max):
                self._work.notify()

    def _statuses_stored(self) -> dict[str, StatusMark]:
        seen: dict[str, StatusMark] = {}
        for table, text in self.store.query("SELECT table_id, status FROM tables_seen"):
            try:
                status = json.loads(text)
                seen[table] = StatusMark.of(status if isinstance(status, dict) else {})
            except (ValueError, TypeError, RecursionError, ForgedMessage):
                continue
        return seen

    def _take_status(self, table: str, status: dict[str, Any]) -> bool:
        """Take a verified status of ``table`` by :func:`table.interfaces.mqtt.order_status`
        (the rule the pit view follows too): True if it is to be stored (newer, or the Last
        Will of the table's current connection: the table is offline, never a forgery);
        False if there is nothing to store (the one taken, again: the broker's retained status
        after a restart, a QoS 1 redelivery; or the will of a connection the table has since
        replaced). Raises :class:`ForgedMessage` for a replay: a status older than the last
        one taken, or one of a connection whose will was taken. A genuine old status
        republished (on any topic) would otherwise move the table to the old status's floor,
        show a dead table online and raise its old alarms again."""
        with self._lock:
            verdict, mark = order_status(self._status_marks.get(table), status)
            if verdict != "take":
                return False
            self._status_marks[table] = mark
            return True

    def _check_checkpoint(self, table_id: str, cp: Any) -> None:
        public = self.keys[table_id]
        if not isinstance(cp, dict) or not isinstance(cp.get("seq"), int) or not isinstance(cp.get("head"), str):
            raise ForgedMessage("not a signed checkpoint (seq, head, sig)")
        why = check_signed(cp, {key_id_of(public): public})
        if why is not None or cp.get("table_id") != table_id:
            raise ForgedMessage(f"a checkpoint not signed by table {table_id}'s key ({why or 'another table_id'})")

    def _refuse(self, topic: str, why: str, counter: str) -> None:
        parts = _table_topic(topic)
        table = parts[2] if parts else "?"
        reason = why[:60] if counter != "unknown_table" else "no public key for the topic's table"
        with self._cv:
            self.counts.received += 1
            setattr(self.counts, counter, getattr(self.counts, counter) + 1)
            if reason not in self.counts.by_reason and len(self.counts.by_reason) >= MAX_REASONS:
                reason = "other"  # bounded: a stream of new reasons counts here
            n = self.counts.by_reason.get(reason, 0) + 1
            self.counts.by_reason[reason] = n
            self._cv.notify_all()
        if n == 1 or n % 1000 == 0:  # logged, not flooded
            log.warning("floor_message_refused", topic=topic[:200], error=why[:200], count=n)
        if table in self.keys:  # one alarm row per known table, gaming day and kind of refusal (bounded)
            day = self.day.of(_now())
            # the kind (counter), not the text: a refusal's text carries what the sender chose (the key id
            # of a forged envelope), and a new row per chosen text would flood the alarm list
            aid = _digest("refused", table, day, counter)
            if aid not in self._forged_alarms:
                if len(self._forged_alarms) >= 10_000:  # the rows stay; only the memory of them is bounded
                    self._forged_alarms.clear()
                self._forged_alarms.add(aid)
                self._enqueue_alarm(aid, table, "forged_message", f"a message on {topic[:120]} was refused: {why[:200]}")

    def _enqueue_alarm(self, aid: str, table: str | None, kind: str, text: str) -> None:
        with self._lock:
            full = len(self._items) >= 2 * self.queue_max  # never waits: alarms have room past queue_max
            if not full:
                self._pending += 1
                self._items.append(("alarm", "", table or "", {"alarm_id": aid, "kind": kind, "text": text}))
                if len(self._items) in (1, self.batch_max):
                    self._work.notify()
        if full:
            log.error("floor_alarm_not_queued", table=table, kind=kind, text=text[:200])

    # -- writing (the writer thread) ------------------------------------------------------------

    def start(self) -> "Floor":
        """Start the writer thread."""
        self._thread = threading.Thread(target=self._write_loop, name="floor-writer", daemon=True)
        self._thread.start()
        return self

    def _take_batch(self) -> list[tuple] | None:
        """Up to ``batch_max`` queued messages, gathered for at most :data:`LINGER_S` after the
        first; None once stopped with nothing queued."""
        with self._lock:
            while not self._items:
                if self._stop.is_set():
                    return None
                self._work.wait(0.5)
            deadline = time.monotonic() + LINGER_S
            while len(self._items) < self.batch_max and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._work.wait(left)
            batch = [self._items.popleft() for _ in range(min(len(self._items), self.batch_max))]
            self._room.notify_all()
        return batch

    def _write_loop(self) -> None:
        pending: list[tuple] = []
        backoff = 0.5
        while True:
            if not pending:
                batch = self._take_batch()
                if batch is None:
                    return
                pending = batch
            try:
                after = self._write(pending)
            except StoreError as exc:  # the database is away: keep the batch, try again (bounded queue)
                with self._cv:
                    self.counts.write_errors += 1
                log.error("floor_write_failed", error=str(exc)[:300], batch=len(pending))
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, 10.0)
                continue
            backoff = 0.5
            for fn in after:  # counted and logged before anyone waiting on the write is woken
                fn()
            with self._cv:
                self._pending -= len(pending)
                self.counts.stored += sum(1 for item in pending if item[0] != "announce")
                self._cv.notify_all()
            pending = []

    def _write(self, batch: list[tuple]) -> list[Callable[[], None]]:
        after: list[Callable[[], None]] = []
        with self.store.transaction(pipeline=True) as tx:
            for kind, floor, table, message in batch:
                if kind == "status":
                    after += self._status(tx, floor, table, message)
                elif kind == "checkpoint":
                    after += self._checkpoint(tx, table, message, retained=True, floor=floor)
                elif kind == "receipt":
                    after += self._receipt_seen(tx, table, message)
                elif kind == "announce":
                    after += self._announce(tx)
                elif kind == "alarm":
                    self._alarm(tx, message["alarm_id"], table or None, "floor", message["kind"], message["text"],
                                message)
                else:
                    after += self._event(tx, table, message, floor)
        return after

    def _alarm(self, tx: Tx, aid: str, table: str | None, source: str, kind: str, text: str,
               detail: dict[str, Any]) -> None:
        # the floor's own alarms are signed by its key (table.floor.record); a table's are its own word
        insert_alarm(tx, self.key if source == "floor" else None,
                     {"alarm_id": aid, "table_id": table, "source": source, "kind": kind, "text": text[:1000],
                      "ts": _now(), "detail": json.dumps(detail, separators=(",", ":"))[:8000]})

    def _status(self, tx: Tx, floor: str, table: str, status: dict[str, Any]) -> list[Callable[[], None]]:
        """Keep a table's status (``tables_seen``) and its alarms; the receipt it presents
        (``receipt``: the latest its journal holds, :mod:`table.floor_anchor`) is compared
        with the database (:meth:`_receipt_seen`)."""
        now = _now()
        online = 1 if status.get("online") is True else 0
        text = json.dumps(status, separators=(",", ":"))
        tx.execute("INSERT INTO tables_seen (table_id, floor, key_id, first_seen, last_seen, online, status) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id) DO UPDATE SET floor = excluded.floor, "
                   "key_id = excluded.key_id, last_seen = excluded.last_seen, online = excluded.online, "
                   "status = excluded.status",
                   (table, floor, key_id_of(self.keys[table]), now, now, online, text))
        summary = status.get("table") if isinstance(status.get("table"), dict) else {}
        alarms = summary.get("alarms") if isinstance(summary.get("alarms"), list) else []
        day = self.day.of(now)
        for a in alarms[:32]:
            if isinstance(a, dict):
                k, t = str(a.get("kind", "?"))[:64], str(a.get("text", ""))[:500]
                self._alarm(tx, _digest("table", table, day, k, t), table, "table", k, t, a)
        presented = status.get("receipt")
        if presented is None or self.key is None:
            return []
        try:
            r = verify_receipt(presented, self.key.public, table)
        except ReceiptError as exc:
            log.warning("floor_receipt_presented_refused", table_id=table, error=str(exc)[:200])
            return []
        return self._receipt_seen(tx, table, r)

    def _event(self, tx: Tx, table: str, ev: dict[str, Any], floor: str = "") -> list[Callable[[], None]]:
        etype, data = ev.get("type"), ev.get("data") if isinstance(ev.get("data"), dict) else {}
        seq, ts, rid = ev.get("seq"), str(ev.get("ts", "")), ev.get("round_id")
        if not isinstance(seq, int):
            return []
        if etype == "checkpoint":
            return self._checkpoint(tx, table, data, retained=False, floor=floor)
        try:
            day = self.day.of(ts)
        except ValueError:
            day = self.day.of(_now())
        if etype in ("round_opened", "bets_closed") and isinstance(rid, str) and isinstance(data.get("wagers"), dict):
            # the wagers at the open, replaced by the bets as frozen at bets_closed when it carries them
            wagers = data.get("wagers") if isinstance(data.get("wagers"), dict) else {}
            wagered = sum(_cents(v) for w in wagers.values() if isinstance(w, dict) for v in w.values())
            tx.execute("INSERT INTO round_results (table_id, round_id, game, number, gaming_day, opened_ts, "
                       "wagered_cents, seq, wagers_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, "
                       "round_id) DO UPDATE SET wagered_cents = excluded.wagered_cents, wagers_seq = excluded.wagers_seq "
                       "WHERE round_results.wagers_seq < excluded.wagers_seq",  # a re-delivered open changes nothing
                       (table, rid, GAME, data.get("number") if isinstance(data.get("number"), int) else None, day,
                        ts, wagered, seq, seq))
        elif etype == "round_settled" and isinstance(rid, str):
            nets = data.get("net_cents") if isinstance(data.get("net_cents"), dict) else {}
            players = sum(_cents(v) for v in nets.values())
            handle = _handle(data.get("results"))
            # wagered is the table's handle: every stake settled, the play wager made at the decision
            # included (the wagers at bets_closed have none: ante and side bets only)
            tx.execute("INSERT INTO round_results (table_id, round_id, game, number, gaming_day, opened_ts, "
                       "wagered_cents, settled, players_net_cents, table_win_cents, settled_ts, seq, wagers_seq) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?) ON CONFLICT (table_id, round_id) DO UPDATE SET "
                       "settled = 1, players_net_cents = excluded.players_net_cents, "
                       "table_win_cents = excluded.table_win_cents, settled_ts = excluded.settled_ts"
                       + (", wagered_cents = excluded.wagered_cents, wagers_seq = excluded.wagers_seq"
                          if handle is not None else ""),
                       (table, rid, GAME, data.get("number") if isinstance(data.get("number"), int) else None, day,
                        ts, handle or 0, players, -players, ts, seq, seq if handle is not None else -1))
        elif etype == "day_report":
            gday = data.get("gaming_day") if isinstance(data.get("gaming_day"), str) else day
            tx.execute("INSERT INTO day_reports (table_id, gaming_day, seq, game, table_win_cents, body, received_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, gaming_day, seq) DO NOTHING",
                       (table, gday[:10], seq, GAME, _cents(data.get("table_win_cents")),
                        json.dumps(ev, separators=(",", ":")), _now()))
        if etype == "round_voided" and isinstance(rid, str):
            tx.execute("INSERT INTO round_results (table_id, round_id, game, number, gaming_day, opened_ts, "
                       "wagered_cents, voided, seq) VALUES (?, ?, ?, NULL, ?, ?, 0, 1, ?) ON CONFLICT (table_id, "
                       "round_id) DO UPDATE SET voided = 1", (table, rid, GAME, day, ts, seq))
        if etype in INCIDENT_TYPES:
            what = data.get("what") or data.get("reason") or data.get("rule") or etype
            tx.execute("INSERT INTO incidents (table_id, seq, type, round_id, ts, what) VALUES (?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT (table_id, seq) DO NOTHING",
                       (table, seq, etype, rid if isinstance(rid, str) else None, ts, str(what)[:1000]))
        return []

    def _checkpoint(self, tx: Tx, table: str, cp: dict[str, Any], *, retained: bool,
                    floor: str = "") -> list[Callable[[], None]]:
        lock = " FOR UPDATE" if self.store.kind == "postgresql" else ""
        rows = tx.query("SELECT seq, head FROM notary WHERE table_id = ?" + lock, (table,))
        notary = (int(rows[0][0]), str(rows[0][1])) if rows else None

        def kept(seq: int) -> str | None:
            r = tx.query("SELECT head FROM checkpoints WHERE table_id = ? AND seq = ?", (table, seq))
            return str(r[0][0]) if r else None

        def kept_within(lo: int, hi: int) -> int | None:
            r = tx.query("SELECT MIN(seq) FROM checkpoints WHERE table_id = ? AND seq >= ? AND seq < ?", (table, lo, hi))
            return int(r[0][0]) if r and r[0][0] is not None else None

        def kept_covering(seq: int) -> int | None:
            # Kept checkpoints partition the journal, so only the next one above can cover ``seq``
            # (one indexed row, not a scan of the table's history).
            r = tx.query("SELECT seq, first_seq FROM checkpoints WHERE table_id = ? AND seq > ? ORDER BY seq LIMIT 1",
                         (table, seq))
            return int(r[0][0]) if r and r[0][1] is not None and int(r[0][1]) <= seq else None

        verdict = judge(cp, notary, kept, kept_within, kept_covering, retained=retained)
        signed = json.dumps(cp, separators=(",", ":"), sort_keys=True)
        now = _now()
        if verdict.kind in ("raise", "history"):
            tx.execute("INSERT INTO checkpoints (table_id, seq, head, first_seq, rounds_opened, ts, signed, received_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, seq) DO NOTHING",
                       (table, cp["seq"], cp["head"], cp.get("from") if isinstance(cp.get("from"), int) else None,
                        _cents(cp.get("rounds_opened")), str(cp.get("ts", "")), signed, now))
        if verdict.kind == "raise":
            tx.execute("INSERT INTO notary (table_id, seq, head, signed, updated_at) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT (table_id) DO UPDATE SET seq = excluded.seq, head = excluded.head, "
                       "signed = excluded.signed, updated_at = excluded.updated_at WHERE notary.seq < excluded.seq",
                       (table, cp["seq"], cp["head"], signed, now))
            return self._sign_receipt(tx, table, cp, floor, now)
        if not verdict.refused:
            return []
        text = f"table {table}: checkpoint {cp['seq']} refused by the notary: {verdict.why}"
        self._alarm(tx, _digest("notary", verdict.kind, table, cp["seq"], cp["head"]), table, "floor",
                    f"checkpoint_{verdict.kind}", text, {"checkpoint": cp, "notary_seq": notary[0] if notary else None})

        def tell() -> None:
            with self._cv:
                self.counts.refused_checkpoints += 1
            log.error("floor_checkpoint_refused", table_id=table, verdict=verdict.kind, seq=cp["seq"],
                      notary_seq=notary[0] if notary else None, why=verdict.why)
        return [tell]

    # -- seeding a new database ------------------------------------------------------------------

    def seed(self, checkpoints: Iterable[Any]) -> "SeedCounts":
        """Take ``checkpoints`` (signed journal checkpoints, as the tables signed them, from a
        trusted record: another floor's database) into this floor's checkpoints and notary,
        each checked with its table's key and judged by the notary's rule as if it came on
        the event stream, in seq order per table. For a new database (a lost disk, a move
        to PostgreSQL, a second floor with its own database): without it the notary starts
        empty and adopts whatever a broker retains, an older checkpoint republished too.
        The notary never goes down; a checkpoint that contradicts one kept is refused and
        alarmed as from a broker. Returns :class:`SeedCounts`. Raises
        :class:`~table.floor.store.StoreError` for the database."""
        counts = SeedCounts()
        good: list[tuple[str, dict[str, Any]]] = []
        for cp in checkpoints:
            table = cp.get("table_id") if isinstance(cp, dict) else None
            if not isinstance(table, str) or table not in self.keys:
                counts.unknown_table += 1
                continue
            try:
                self._check_checkpoint(table, cp)
            except ForgedMessage as exc:
                counts.bad_signature += 1
                log.error("floor_seed_refused", table_id=table, seq=cp.get("seq"), why=str(exc))
                continue
            good.append((table, cp))
        good.sort(key=lambda tc: (tc[0], tc[1]["seq"]))
        after: list[Callable[[], None]] = []
        with self.store.transaction() as tx:
            for table, cp in good:
                after += self._checkpoint(tx, table, cp, retained=False)  # a refusal tells, a raise sends a receipt
        refused_before = self.counts.refused_checkpoints
        for tell in after:
            tell()
        counts.refused = self.counts.refused_checkpoints - refused_before
        counts.taken = len(good) - counts.refused
        return counts

    # -- reading ----------------------------------------------------------------------------------

    def notary_checkpoint(self, table_id: str) -> dict[str, Any] | None:
        """The notary's highest signed checkpoint of ``table_id`` (as the table signed it), or None."""
        rows = self.store.query("SELECT signed FROM notary WHERE table_id = ?", (table_id,))
        return json.loads(rows[0][0]) if rows else None

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every message received so far is written or refused (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._pending > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``predicate()`` holds, re-checked after every write (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 1.0))
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued (up to ``timeout_s``), then stop the writer."""
        self.wait_idle(timeout_s)
        self._stop.set()
        with self._lock:
            self._work.notify_all()
            self._room.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)


def client_id() -> str:
    """A broker client id unique to this process (several floors may share a broker)."""
    return f"threecard-floor-{socket.gethostname()[:24]}-{os.getpid()}-{secrets.token_hex(4)}"


class BrokerFeed:
    """One broker's messages into a :class:`Floor` (paho-mqtt, its loop a
    :class:`~table.interfaces.mqtt.ReceiverLoop`; reconnects 1..30 s by itself).
    ``broker``: a :class:`table.interfaces.brokers.BrokerAddress` (``mqtt://HOST:PORT/PREFIX``: the
    tables' topics under ``PREFIX/``, as a bridge puts them); ``floors``: the topic segments
    to follow (default every one, ``+``); ``password``/``ca_file`` as the pit view's."""

    #: subscribed in this order, so the broker hands the retained ones over in it: the floor's
    #: own retained receipt before the table's retained checkpoint. A floor whose database was
    #: restored from an older copy compares the receipt with its notary first (the
    #: ``floor_database_behind`` alarm); taking the newer checkpoint first, it signed that one
    #: again and the receipt then matched: the rounds between were gone with no alarm
    KINDS = ("events", "status", "receipt", "checkpoint")

    def __init__(self, floor: Floor, broker: Any, *, floors: tuple[str, ...] = ("+",), password: str | None = None,
                 ca_file: str | None = None) -> None:
        import paho.mqtt.client as mqtt

        self.floor = floor
        self.broker = broker
        # ``[PREFIX/]``: the prefix of the broker URL's path, for tables heard over a prefixing bridge
        self.topics = [f"{broker.prefix}threecard/{f}/+/{k}" for f in floors for k in self.KINDS]
        #: set once subscribed (SUBACK), cleared when the connection is lost
        self.connected = threading.Event()
        self.client_id = client_id()
        from table.interfaces.brokers import broker_client

        self._client = broker_client(mqtt, broker, self.client_id, password, ca_file)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_subscribe = self._on_subscribe
        self._client.on_message = lambda client, userdata, msg: floor.receive(msg.topic, msg.payload)
        self._loop: ReceiverLoop | None = None
        floor.receipt_sinks.append(self.publish_receipt)
        floor.notary_sinks.append(self.publish_notary)

    def publish_notary(self, floor: str, table_id: str, payload: bytes) -> None:
        """Publish the floor's statement of what its notary holds for ``table_id`` (a receipt
        of that checkpoint) retained (QoS 1) on ``[PREFIX/]threecard/{floor}/{table_id}/notary``
        (the broker's ACL: only the floor's account writes it; the table reads its own)."""
        self._client.publish(f"{self.broker.prefix}threecard/{floor}/{table_id}/notary", payload, qos=1,
                             retain=True)

    def publish_receipt(self, floor: str, table_id: str, payload: bytes) -> None:
        """Publish the floor's receipt ``payload`` for ``table_id`` retained (QoS 1) on
        ``[PREFIX/]threecard/{floor}/{table_id}/receipt`` (the broker's ACL: only the floor's
        account writes it; the table reads its own)."""
        self._client.publish(f"{self.broker.prefix}threecard/{floor}/{table_id}/receipt", payload, qos=1,
                             retain=True)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if reason.is_failure:
            log.warning("floor_broker_refused", host=self.broker.host, reason=str(reason))
            return
        client.subscribe([(t, 1) for t in self.topics])
        log.info("floor_subscribed", host=self.broker.host, port=self.broker.port, client_id=self.client_id)

    def _on_subscribe(self, *args: Any) -> None:
        self.connected.set()  # subscribed: retained messages follow
        self.floor.announce_notary()  # what the notary holds, for the running tables to compare

    def _on_disconnect(self, *args: Any) -> None:
        self.connected.clear()
        log.warning("floor_broker_lost", host=self.broker.host, port=self.broker.port)

    def start(self) -> "BrokerFeed":
        self._client.connect_async(self.broker.host, self.broker.port, keepalive=15)
        self._loop = ReceiverLoop(self._client, f"floor-feed-{self.broker.host}:{self.broker.port}").start()
        return self

    def close(self) -> None:
        if self.publish_receipt in self.floor.receipt_sinks:
            self.floor.receipt_sinks.remove(self.publish_receipt)
        if self.publish_notary in self.floor.notary_sinks:
            self.floor.notary_sinks.remove(self.publish_notary)
        if self._loop is not None:
            self._loop.stop()
            self._loop = None


def _handle(results: Any) -> int | None:
    """A settled round's handle in cents, as the table counts it (table.day.day_report: every
    wager's stake but the ante bonus, paid on the ante with no stake of its own), from the
    ``round_settled`` event's ``results``; None when they name no stake (an older stream)."""
    if not isinstance(results, dict):
        return None
    total, seen = 0, False
    for seat in results.values():
        for w in (seat.get("wagers") if isinstance(seat, dict) and isinstance(seat.get("wagers"), list) else ()):
            if isinstance(w, dict) and isinstance(w.get("stake"), int) and not isinstance(w.get("stake"), bool):
                seen = True
                if w.get("wager") != "ante_bonus":
                    total += max(0, w["stake"])
    return total if seen else None
