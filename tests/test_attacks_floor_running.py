"""A running table held when the floor goes behind it (table/floor_anchor.py, "A running table learns it too").

The attack: while a table deals, an insider stops the floor, puts back an older copy of
its database and starts it again. The floor alarms at once (it hears its newer receipt
retained on the broker), but the running table went on dealing: it was held only at its
next start. The floor now states what its notary holds, retained on the broker, each time
it subscribes; the table compares it with the latest receipt it journaled, journals an
incident and holds before its next round, for a supervisor (never an exit in service; with
no front door to ask, ``tablectl run`` stops held, exit 3).

And ``[floor] unreachable = "warn"``: a table that starts without the notary's answer
journals an incident saying so (it was only a log line).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from table.floor.config import load_floor_config
from table.floor.ingest import Floor
from table.floor.service import FloorService
from table.floor.store import open_store
from table.floor_anchor import ReceiptBook, latest_receipt, sign_receipt, verify_receipt
from table.journal import Journal
from table.keys import generate

from console_helpers import tablectl, wait_until
from floor_helpers import SignedTable, broker, database, needs_mosquitto, rows  # noqa: F401
from test_attacks_floor_receipts import _copy_db, _floor_files, _run, _simulated_devices, signing_floor
from test_attacks_floor_rollback import TABLE, _last_checkpoint, _table_config

NOW = "2026-12-06T06:00:00+00:00"


def test_the_tables_book_says_the_floor_is_behind_when_its_statement_is_below_the_receipt_it_holds(tmp_path):
    floor_key = generate()
    t = SignedTable(tmp_path, "pit1-tcp-01")
    try:
        cp1, cp2 = t.checkpoint(), t.checkpoint()
        book = ReceiptBook(t.journal, floor_key.public, t.table_id).attach()
        heard: list[str] = []
        book.on_behind.append(heard.append)

        def statement(cp, key=floor_key, head=None):
            return json.dumps(sign_receipt(key, t.table_id, cp["seq"], head or cp["head"], NOW)).encode()

        assert book.floor_statement(statement(cp1)) is None  # no receipt held yet: nothing to compare
        assert book.take(statement(cp2))  # the floor's receipt of cp2, kept to journal
        assert book.floor_statement(statement(cp2)) is None and book.floor_statement(statement(cp1)) is not None
        book.flush()  # journaled
        assert book.floor_statement(statement(cp2)) is None  # the floor holds what the table holds
        why = book.floor_statement(statement(cp1))  # the floor's notary went back to cp1
        assert why is not None and f"checkpoint {cp1['seq']}" in why and "restored from an older copy" in why
        assert "replaced" in book.floor_statement(statement(cp2, head="ab" * 32))  # another head at its place
        assert book.floor_statement(statement(cp1, key=generate())) is None  # not the floor's word: nothing
        assert book.floor_statement(b"{not json") is None
        assert len(heard) == 3  # the two above, and cp1 against the receipt kept before it was journaled
    finally:
        t.close()


def test_the_floor_states_what_its_notary_holds_with_each_receipt_and_when_it_subscribes(tmp_path, database):
    floor_key, t, store, floor = signing_floor(tmp_path, database)
    stated: list[tuple[str, str, bytes]] = []
    floor.notary_sinks.append(lambda f, table, payload: stated.append((f, table, payload)))
    try:
        cp1 = t.checkpoint()
        floor.receive(*t.status())
        floor.receive(*t.retained(cp1))
        assert floor.wait_idle(10)
        assert [(f, table) for f, table, _ in stated] == [("pit1", t.table_id)]
        assert verify_receipt(stated[0][2], floor_key.public, t.table_id).seq == cp1["seq"]
        floor.announce_notary()  # a broker feed subscribed (a start, a reconnect)
        assert floor.wait_idle(10) and len(stated) == 2
        said = verify_receipt(stated[1][2], floor_key.public, t.table_id)
        assert (said.seq, said.head) == (cp1["seq"], cp1["head"])
    finally:
        floor.close()
        store.close()
        t.close()


def _journaled_receipt_seq(journal, floor_public) -> int:
    try:
        with Journal(journal, read_only=True) as j:
            env = latest_receipt(j)
    except Exception:  # noqa: BLE001 - the running table is writing: look again
        return -1
    return verify_receipt(env, floor_public, TABLE).seq if env else -1


@needs_mosquitto
@pytest.mark.long
def test_a_floor_database_restored_while_the_table_runs_holds_the_table_before_its_next_round(tmp_path, broker):
    floor_toml = _floor_files(tmp_path, broker.port)
    service = FloorService(load_floor_config(floor_toml)).start()
    journal = tmp_path / "j.sqlite3"
    db = str(tmp_path / "floor.sqlite3")
    config = _table_config(tmp_path, broker.port, journal, service.url)
    table = None
    try:
        with _simulated_devices(tmp_path):
            first = _run(tmp_path, config, journal, 2)
            assert first.returncode == 0, first.stderr[-2000:]
            old_head = _last_checkpoint(journal)
            assert service.floor.wait_for(lambda: bool(rows(
                service.floor, "SELECT 1 FROM floor_receipts WHERE table_id = ? AND seq = ?",
                (TABLE, old_head["seq"]))), 30)
            service.close()  # the insider's copy of the floor's database of now
            _copy_db(db, str(tmp_path / "floor-old.sqlite3"))
            service = FloorService(load_floor_config(floor_toml)).start()
            assert not service.wait_following(20)
            floor_public = service.floor_key.public

            table = subprocess.Popen(
                tablectl() + ["run", "--config", config, "--journal", str(journal), "--dealer-socket",
                              str(tmp_path / "dealer.sock"), "--rounds", "60", "--seats", "2",
                              "--log-file", str(tmp_path / "log")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            # the running table journals a receipt of a checkpoint newer than the insider's copy
            wait_until(lambda: _journaled_receipt_seq(journal, floor_public) > old_head["seq"], 120,
                       "the running table to journal a newer receipt")
            assert table.poll() is None, "the table finished its rounds before the attack"

            service.close()  # the attack: the older database put back while the table deals
            _copy_db(str(tmp_path / "floor-old.sqlite3"), db)
            service = FloorService(load_floor_config(floor_toml)).start()

            out, err = table.communicate(timeout=180)
            assert table.returncode == 3, err[-2000:]  # held; was 0: it dealt every round
            with Journal(journal, read_only=True) as j:
                held = [e for e in j.entries("incident") if "the floor is behind this table" in e.body["what"]]
                assert len(held) == 1, [e.body for e in j.entries("incident")]
                opened = [e for e in j.entries("round") if e.seq > held[0].seq and e.body.get("step") == "open"]
                assert not opened  # held before the next round
                assert j.last("round").body.get("step") in ("closed", "voided")  # the round in play went on
            assert "restored from an older copy" in held[0].body["what"]
            assert service.floor.wait_for(lambda: ("floor_database_behind",) in rows(
                service.floor, "SELECT kind FROM alarms WHERE table_id = ?", (TABLE,)), 30)  # the floor alarms too
    finally:
        if table is not None and table.poll() is None:
            table.kill()
            table.communicate()
        service.close()


@needs_mosquitto
@pytest.mark.long
def test_a_table_started_without_the_notary_under_warn_journals_an_incident(tmp_path, broker):
    _floor_files(tmp_path, broker.port)
    journal = tmp_path / "j.sqlite3"
    config = _table_config(tmp_path, broker.port, journal, "http://127.0.0.1:9")  # no floor listens there
    with open(config, "a") as f:
        f.write('unreachable = "warn"\ntimeout_s = 1\n')
    with _simulated_devices(tmp_path):
        run = _run(tmp_path, config, journal, 1)
    assert run.returncode == 0, run.stderr[-2000:]  # "warn": it deals
    with Journal(journal, read_only=True) as j:
        said = [e.body["what"] for e in j.entries("incident")]
    assert any("without the floor's notary" in w and "unreachable" in w for w in said), said


def test_a_replayed_older_receipt_on_the_notary_topic_does_not_hold_the_table(tmp_path):
    """A fresh attacker with a write on the broker (no ACL deployed, a leaked account)
    replays the floor's own older receipt, genuine and signed, on ``.../notary``: a
    statement and a receipt are signed alike, so the table took it for the floor going
    back and held (a denial of service with nothing forged). The floor signs each
    statement when it makes it (``Floor.announce_notary``): a statement signed before the
    receipt the table holds cannot say the floor went behind it. A floor restored since
    states its older notary at a later time, and still holds the table."""
    floor_key = generate()
    t = SignedTable(tmp_path, "pit1-tcp-02")
    try:
        cp1, cp2 = t.checkpoint(), t.checkpoint()
        book = ReceiptBook(t.journal, floor_key.public, t.table_id).attach()

        def signed(cp, ts):
            return json.dumps(sign_receipt(floor_key, t.table_id, cp["seq"], cp["head"], ts)).encode()

        old = signed(cp1, "2026-12-06T05:00:00+00:00")  # the floor's receipt of cp1, retained back then
        assert book.take(signed(cp2, "2026-12-06T05:30:00+00:00")) and (book.flush() or True)
        assert book.floor_statement(old) is None  # replayed: said before the receipt the table holds
        restored = book.floor_statement(signed(cp1, "2026-12-06T06:00:00+00:00"))  # a floor gone back since
        assert restored is not None and "restored from an older copy" in restored
    finally:
        t.close()
