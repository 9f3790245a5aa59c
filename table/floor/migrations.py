"""The floor database's schema as numbered migrations, the same SQL on SQLite and PostgreSQL.

Each migration is applied once, in order, inside one transaction that also records
it in ``schema_version``; a database newer than this code (a version it does not
know) is refused rather than written. No migration tool: the schema is a few
tables with natural keys, and the SQL below is the portable subset both engines
read alike (``TEXT``, ``BIGINT``, ``INSERT ... ON CONFLICT``). A new migration is a
new entry at the end; an applied one is never edited.

Tables (every one keyed by what the tables signed, so an insert is idempotent and
several floor processes can write the same message without a duplicate):

* ``tables_seen``: each table heard from, its floor (topic segment), key id, last status.
* ``checkpoints``: every signed journal checkpoint received, by (table, seq), with
  its signed text; ``notary``: per table the highest one, which never goes down.
* ``round_results``: one row per round, made at ``round_opened`` (the wagers),
  completed at ``round_settled`` (the players' net) or ``round_voided``.
* ``incidents``: incidents, custody violations, held and voided rounds, by (table, seq).
* ``alarms``: the floor's own (a refused checkpoint, forged messages) and the tables'
  (their status's alarms), by a digest of what they say; (3) the floor's own signed by
  the floor key (``key_id``, ``sig``: :mod:`table.floor.record`).
* ``day_reports``: the tables' signed day reports when they publish them.
* ``notes``: fluctuation investigation notes, who wrote them, hash-chained, and (2)
  signed by the floor key (``key_id``, ``sig``: :mod:`table.floor.record`).
* (4) ``floor_sessions``: the people signed in to the floor's pages, by the SHA-256 of
  their token (never the token), with when they expire (:mod:`table.floor.sessions`).
"""

from __future__ import annotations

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "the floor's first schema", [
        """CREATE TABLE tables_seen (
            table_id TEXT PRIMARY KEY, floor TEXT NOT NULL, key_id TEXT NOT NULL,
            first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, online INTEGER, status TEXT)""",
        """CREATE TABLE checkpoints (
            table_id TEXT NOT NULL, seq BIGINT NOT NULL, head TEXT NOT NULL, first_seq BIGINT,
            rounds_opened BIGINT NOT NULL, ts TEXT NOT NULL, signed TEXT NOT NULL, received_at TEXT NOT NULL,
            PRIMARY KEY (table_id, seq))""",
        """CREATE TABLE notary (
            table_id TEXT PRIMARY KEY, seq BIGINT NOT NULL, head TEXT NOT NULL, signed TEXT NOT NULL,
            updated_at TEXT NOT NULL)""",
        """CREATE TABLE round_results (
            table_id TEXT NOT NULL, round_id TEXT NOT NULL, game TEXT NOT NULL, number BIGINT,
            gaming_day TEXT NOT NULL, opened_ts TEXT NOT NULL, wagered_cents BIGINT NOT NULL,
            settled INTEGER NOT NULL DEFAULT 0, voided INTEGER NOT NULL DEFAULT 0,
            players_net_cents BIGINT NOT NULL DEFAULT 0, table_win_cents BIGINT NOT NULL DEFAULT 0,
            settled_ts TEXT, seq BIGINT NOT NULL, wagers_seq BIGINT NOT NULL DEFAULT -1,
            PRIMARY KEY (table_id, round_id))""",
        "CREATE INDEX round_results_day ON round_results (gaming_day, table_id)",
        """CREATE TABLE incidents (
            table_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, round_id TEXT, ts TEXT NOT NULL,
            what TEXT NOT NULL, PRIMARY KEY (table_id, seq))""",
        """CREATE TABLE alarms (
            alarm_id TEXT PRIMARY KEY, table_id TEXT, source TEXT NOT NULL, kind TEXT NOT NULL,
            text TEXT NOT NULL, ts TEXT NOT NULL, detail TEXT NOT NULL)""",
        "CREATE INDEX alarms_ts ON alarms (ts)",
        """CREATE TABLE day_reports (
            table_id TEXT NOT NULL, gaming_day TEXT NOT NULL, seq BIGINT NOT NULL, game TEXT NOT NULL,
            table_win_cents BIGINT, body TEXT NOT NULL, received_at TEXT NOT NULL,
            PRIMARY KEY (table_id, gaming_day, seq))""",
        """CREATE TABLE notes (
            note_id TEXT PRIMARY KEY, n BIGINT NOT NULL UNIQUE, table_id TEXT, gaming_day TEXT,
            author TEXT NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, ts TEXT NOT NULL,
            prev_hash TEXT NOT NULL)""",
    ]),
    (2, "notes signed by the floor key", [
        "ALTER TABLE notes ADD COLUMN key_id TEXT",
        "ALTER TABLE notes ADD COLUMN sig TEXT",
    ]),
    (3, "the floor's own alarms signed by the floor key", [
        "ALTER TABLE alarms ADD COLUMN key_id TEXT",
        "ALTER TABLE alarms ADD COLUMN sig TEXT",
    ]),
    (4, "floor sessions that survive a restart of the floor", [
        """CREATE TABLE floor_sessions (
            digest TEXT PRIMARY KEY, person TEXT NOT NULL, role TEXT NOT NULL, created_us BIGINT NOT NULL,
            last_used_us BIGINT NOT NULL, expires_us BIGINT NOT NULL)""",
        "CREATE INDEX floor_sessions_person ON floor_sessions (person)",
    ]),
    (5, "the highest receipt the floor signed or heard back, per table (table/floor_anchor.py)", [
        """CREATE TABLE floor_receipts (
            table_id TEXT PRIMARY KEY, seq BIGINT NOT NULL, head TEXT NOT NULL, envelope TEXT NOT NULL,
            ts TEXT NOT NULL)""",
    ]),
    (6, "a receipt of this floor whose head the database contradicts: the table stays held", [
        "ALTER TABLE floor_receipts ADD COLUMN conflict TEXT",
    ]),
]

#: the newest schema this code reads and writes
LATEST = MIGRATIONS[-1][0]
