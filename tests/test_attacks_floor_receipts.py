"""The notary anchored both ways (table/floor_anchor.py): the floor's receipts, and the floor of record.

The attacks. (1) An insider stops the floor, puts back an older copy of its database,
replays the table's older retained checkpoint (or clears it), restarts the floor, then
the table with its journal rolled back to the same day: before receipts, the notary
answered the older checkpoint, the journal matched it, and the table resumed with no
incident and no floor alarm. The floor's receipt of the newer checkpoint, retained on
the broker under the floor's own account, is heard again by the restarted floor: its
database is behind it (``floor_database_behind``), it holds the table, and the table
holds for a supervisor before it deals. (2) The same restore with the receipt cleared
too and the table's journal intact: the table presents the receipt its journal holds,
and the floor compares. (3) Root removes ``[floor]`` from the table's config: the journal
names the floor it reports to, so the table holds for a named supervisor's sign-off.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading

import pytest

from devices import CardShoe, Shuffler
from simulators.table import SimulatedTable
from table.console import Command, Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.errors import SupervisorRequired
from table.floor.config import load_floor_config
from table.floor.ingest import Floor
from table.floor.service import FloorService
from table.floor.store import open_store
from table.floor_anchor import (FloorLink, ReceiptBook, ReceiptError, latest_receipt, sign_receipt,
                                verify_receipt)
from table.interfaces.mqtt import sign_message
from table.journal import Journal
from table.keys import generate, save
from table.recovery import device_cursor
from table.roles import Actor, Role
from table.rules.settlement import Tables

from console_helpers import tablectl
from floor_helpers import SignedTable, broker, database, needs_mosquitto, now, rows  # noqa: F401
from mqtt_broker import free_port
from test_attacks_floor_rollback import TABLE, _last_checkpoint, _republish, _retained, _table_config
from test_controller import BLUE, KEY, RED, kinds

FLOOR = FloorLink("http://floor1:8091", "f" * 16)


# -- the receipt itself ------------------------------------------------------------------------------

def test_a_receipt_verifies_only_as_the_floors_word_about_its_table():
    floor_key = generate()
    env = sign_receipt(floor_key, "pit1-tcp-01", 12, "ab" * 32, "2026-12-06T06:00:00+00:00")
    r = verify_receipt(env, floor_key.public, "pit1-tcp-01")
    assert (r.table_id, r.seq, r.head) == ("pit1-tcp-01", 12, "ab" * 32)
    with pytest.raises(ReceiptError, match="not the floor's"):
        verify_receipt(env, generate().public, "pit1-tcp-01")  # another floor's key
    with pytest.raises(ReceiptError, match="not 'pit1-tcp-02'"):
        verify_receipt(env, floor_key.public, "pit1-tcp-02")  # presented as another table's
    raised = {**env, "payload": env["payload"].replace('"seq":12', '"seq":99')}
    with pytest.raises(ReceiptError, match="bad signature"):
        verify_receipt(raised, floor_key.public, "pit1-tcp-01")  # a receipt moved up by hand


def test_the_table_journals_only_a_newer_receipt_of_a_checkpoint_it_holds(tmp_path):
    floor_key = generate()
    t = SignedTable(tmp_path, "pit1-tcp-01")
    try:
        cp1, cp2 = t.checkpoint(), t.checkpoint()
        book = ReceiptBook(t.journal, floor_key.public, t.table_id)
        now = "2026-12-06T06:00:00+00:00"
        book.attach()
        assert book.take(json.dumps(sign_receipt(floor_key, t.table_id, cp2["seq"], cp2["head"], now)).encode())
        assert latest_receipt(t.journal) is None  # kept until the next checkpoint, which covers it
        cp3 = t.checkpoint(entries=1)
        assert latest_receipt(t.journal)["payload"].count(f'"seq":{cp2["seq"]}') == 1
        assert [e.seq for e in t.journal.entries("floor_receipt")] == [cp3["seq"]]
        older = json.dumps(sign_receipt(floor_key, t.table_id, cp1["seq"], cp1["head"], now))
        assert not book.take(older.encode())  # not newer than the one held
        elsewhere = json.dumps(sign_receipt(floor_key, t.table_id, cp2["seq"] + 50, "cd" * 32, now))
        assert not book.take(elsewhere.encode())  # a checkpoint this journal does not hold
        forged = json.dumps(sign_receipt(generate(), t.table_id, cp2["seq"], cp2["head"], now))
        assert not book.take(forged.encode())
        t.checkpoint(entries=1)
        assert len(kinds(t.journal, "floor_receipt")) == 1
    finally:
        t.close()


def signing_floor(tmp_path, database):
    """``(floor_key, table, store, floor)``: a started floor that signs receipts with its own
    key, on a fresh store of ``database``, and one signed table it knows (pit1-tcp-01). The
    caller closes the floor, the store and the table, in that order."""
    floor_key = generate()
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    store = open_store(database)
    return floor_key, t, store, Floor(store, {t.table_id: t.key.public}, key=floor_key).start()


def test_the_floor_signs_a_receipt_for_each_checkpoint_that_moves_its_notary_and_holds_a_table_it_is_behind(
        tmp_path, database):
    floor_key, t, store, floor = signing_floor(tmp_path, database)
    sent: list[tuple[str, str, bytes]] = []
    floor.receipt_sinks.append(lambda f, table, payload: sent.append((f, table, payload)))
    try:
        cp1 = t.checkpoint()
        floor.receive(*t.retained(cp1))
        assert floor.wait_idle(10)
        assert [(f, table) for f, table, _ in sent] == [("pit1", t.table_id)]
        first = verify_receipt(sent[0][2], floor_key.public, t.table_id)
        assert (first.seq, first.head) == (cp1["seq"], cp1["head"])
        floor.receive(*t.retained(cp1))  # the same checkpoint again: no new receipt
        assert floor.wait_idle(10) and len(sent) == 1 and floor.held(t.table_id) is None
        # A receipt this floor signed for a checkpoint its database never took (as after a restore)
        later = sign_receipt(floor_key, t.table_id, cp1["seq"] + 40, "ef" * 32, "2026-12-06T06:00:00+00:00")
        floor.present_receipt(t.table_id, json.dumps(later).encode())
        assert "behind the receipt" in floor.held(t.table_id)
        assert ("floor_database_behind",) in rows(floor, "SELECT kind FROM alarms WHERE table_id = ?", (t.table_id,))
        cp2 = t.checkpoint()  # above the notary, below the receipt: no receipt lower than the one heard back
        floor.receive(*t.retained(cp2))
        assert floor.wait_idle(10) and len(sent) == 1
        floor.present_receipt(t.table_id, json.dumps(
            sign_receipt(generate(), t.table_id, 10**6, "00" * 32, "x")).encode())  # not this floor's: nothing
        assert len(rows(floor, "SELECT 1 FROM alarms WHERE kind = 'floor_database_behind'")) == 1
    finally:
        floor.close()
        store.close()
        t.close()


def test_a_database_seeded_from_an_older_copy_is_behind_the_receipt_retained_on_the_broker(tmp_path):
    """tablectl floor seed follows the rule of a restore: a new database seeded from an older
    one holds the older notary, and the receipt the floor signed since (retained on the
    broker, delivered when it subscribes) shows it is behind."""
    floor_key = generate()
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    old_store, new_store = open_store(str(tmp_path / "old.sqlite3")), open_store(str(tmp_path / "new.sqlite3"))
    old = Floor(old_store, {t.table_id: t.key.public}, key=floor_key).start()
    retained: dict[str, bytes] = {}
    old.receipt_sinks.append(lambda f, table, payload: retained.__setitem__(f"threecard/{f}/{table}/receipt", payload))
    new = None
    try:
        cp1 = t.checkpoint()
        old.receive(*t.retained(cp1))
        assert old.wait_idle(10)
        copy = [old.notary_checkpoint(t.table_id)]  # the older copy the new database is seeded from
        old.receive(*t.retained(t.checkpoint()))
        assert old.wait_idle(10)
        new = Floor(new_store, {t.table_id: t.key.public}, key=floor_key).start()
        assert new.seed(copy).taken == 1
        assert new.held(t.table_id) is None
        (topic, payload), = retained.items()
        assert new.receive(topic, payload)  # the broker's retained receipt, as the new floor subscribes
        assert new.wait_idle(10)
        assert "behind the receipt" in new.held(t.table_id)
        assert ("floor_database_behind",) in rows(new, "SELECT kind FROM alarms WHERE table_id = ?", (t.table_id,))
        assert not new.receive(topic, json.dumps(sign_receipt(generate(), t.table_id, 999, "00" * 32, "x")).encode())
    finally:
        old.close()
        if new is not None:
            new.close()
        old_store.close()
        new_store.close()
        t.close()


def test_a_receipt_presented_in_a_tables_status_is_compared_with_the_floors_database(tmp_path, database):
    """A table presents its latest receipt in each online status (as it connects): a floor whose
    database was put back behind it, with the table running on, alarms and holds the table."""
    floor_key, t, store, floor = signing_floor(tmp_path, database)
    try:
        cp = t.checkpoint()
        floor.receive(*t.retained(cp))
        assert floor.wait_idle(10)
        (kept,) = rows(floor, "SELECT envelope FROM floor_receipts WHERE table_id = ?", (t.table_id,))
        topic, _ = t.status()

        def status(receipt: dict) -> bytes:
            return sign_message(t.key, topic, {"schema": "threecard.status/1", "table_id": t.table_id,
                                               "floor": "pit1", "online": True, "ts": now(), "head_seq": 1,
                                               "table": {"alarms": []}, "receipt": receipt}).encode()

        assert floor.receive(topic, status(json.loads(kept[0])))  # the receipt the database holds: nothing
        assert floor.wait_idle(10) and floor.held(t.table_id) is None
        ahead = sign_receipt(floor_key, t.table_id, cp["seq"] + 30, "ab" * 32, "2026-12-06T06:00:00+00:00")
        assert floor.receive(topic, status(ahead))
        assert floor.wait_idle(10)
        assert "behind the receipt" in floor.held(t.table_id)
        assert ("floor_database_behind",) in rows(floor, "SELECT kind FROM alarms WHERE table_id = ?", (t.table_id,))
    finally:
        floor.close()
        store.close()
        t.close()


def test_a_floor_database_holding_another_head_where_its_receipt_names_one_holds_the_table_for_good(tmp_path,
                                                                                                  database):
    """A fresh attacker's fork: the floor's database replaced by one that holds another
    checkpoint at a receipt's place (same table key, another chain). Compared only by place,
    the hold was never raised (the notary was at the place already), and a fork dealt past
    it would lift it. Held, the conflict kept, no new receipt signed over it."""
    floor_key, t, store, floor = signing_floor(tmp_path, database)
    sent: list[tuple[str, str, bytes]] = []
    floor.receipt_sinks.append(lambda f, table, payload: sent.append((f, table, payload)))
    try:
        cp = t.checkpoint()
        floor.receive(*t.retained(cp))
        assert floor.wait_idle(10) and len(sent) == 1
        genuine = sign_receipt(floor_key, t.table_id, cp["seq"], "cd" * 32, "2026-12-06T06:00:00+00:00")
        floor.present_receipt(t.table_id, json.dumps(genuine).encode())
        assert "another head" in (floor.held(t.table_id) or "")
        later = t.checkpoint()  # the fork deals on past the receipt's place
        floor.receive(*t.retained(later))
        assert floor.wait_idle(10)
        assert "another head" in (floor.held(t.table_id) or ""), "the fork dealt past the receipt lifted the hold"
        assert len(sent) == 1  # no receipt signed over the conflict
    finally:
        floor.close()
        store.close()
        t.close()


# -- the floor of record -------------------------------------------------------------------------------

@contextlib.contextmanager
def _life(tmp_path, sim, *, floor, attached):
    events: queue.Queue = queue.Queue()
    journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
    cursor = device_cursor(journal)
    shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False,
                             resume=cursor.resume)
    shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False, resume=cursor.resume)
    console = Console()
    console.attached = attached
    ctl = TableController(shuffler, shoe, events, sim.dealer, DeckCustody([("A", RED), ("B", BLUE)]), seats=2,
                          ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                          timing=TableTiming(event_timeout_s=3, settle_s=0.1), cursor=cursor, floor=floor)
    try:
        yield ctl, console, journal
    finally:
        ctl.close()
        shuffler.close()
        shoe.close()
        journal.close()


class _SignOff:
    """A named supervisor who, once the table asks for an incident's sign-off on ``console``,
    signs it off there (over the web's front door, in a thread of their own, as a person does)."""

    def __init__(self, console: Console, supervisor: str) -> None:
        self._console, self._supervisor = console, supervisor
        self._asked = threading.Event()
        self._answered = threading.Event()
        self._reply: dict | None = None
        console.on_expectation(self._ask)

    def _ask(self, exp) -> None:
        if exp is None or "acknowledge_incident" not in exp.accepts or self._asked.is_set():
            return
        self._asked.set()
        threading.Thread(target=self._console.submit, args=(Command(
            "acknowledge_incident", {"supervisor": self._supervisor}, self._answer,
            actor=Actor(self._supervisor, Role.SUPERVISOR, source="http")),)).start()

    def _answer(self, reply: dict) -> None:
        self._reply = reply
        self._answered.set()

    def answer(self, timeout_s: float = 60.0) -> dict:
        """The table's answer to the sign-off (waits for it; the timeout only bounds a table that never asks)."""
        asked = "asked" if self._asked.is_set() else "never asked"
        assert self._answered.wait(timeout_s), f"no answer to the sign-off within {timeout_s:g} s ({asked})"
        assert self._reply is not None
        return self._reply


@pytest.fixture
def sign_off():
    """``sign_off(console, supervisor)``: a :class:`_SignOff` listening on ``console``."""
    return _SignOff


def test_a_table_whose_record_names_a_floor_holds_without_one_until_a_named_supervisor_signs_it_off(tmp_path,
                                                                                                   sign_off):
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        with _life(tmp_path, sim, floor=FLOOR, attached=False) as (ctl, console, journal):
            ctl.prepare()
            ctl.play_round()
            assert [(b["url"], b["key_id"]) for b in kinds(journal, "floor_link")] == [(FLOOR.url, FLOOR.key_id)]
        with _life(tmp_path, sim, floor=None, attached=False) as (ctl, console, journal):
            with pytest.raises(SupervisorRequired, match="no longer reports to the floor"):
                ctl.prepare()  # was: resumed, the notary no longer asked, nothing journaled
            assert any(FLOOR.url in b["what"] for b in kinds(journal, "incident"))
        with _life(tmp_path, sim, floor=None, attached=True) as (ctl, console, journal):
            signed = sign_off(console, "S-7")
            ctl.prepare()
            assert signed.answer()["ok"] is True
            ctl.play_round()
            removed = [b for b in kinds(journal, "supervisor") if b["action"] == "floor_removed"]
            assert [(b["supervisor"], b["floor_url"]) for b in removed] == [("S-7", FLOOR.url)]
            assert kinds(journal, "floor_link")[-1]["url"] is None
        with _life(tmp_path, sim, floor=None, attached=False) as (ctl, console, journal):
            ctl.prepare()  # signed off and journaled: no second hold
            ctl.play_round()


def test_a_table_pointed_at_another_floor_holds_until_a_named_supervisor_signs_it_off(tmp_path, sign_off):
    """A fresh attacker's way round the removal's hold: [floor] pointed at another floor (an
    empty database, its own key), which vouches for any journal. Held like a removal."""
    other = FloorLink("http://floor2:8091", "e" * 16)
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        with _life(tmp_path, sim, floor=FLOOR, attached=False) as (ctl, console, journal):
            ctl.prepare()
            ctl.play_round()
        for changed in (other, FloorLink(FLOOR.url, "e" * 16)):  # another floor; the same address, another key
            with _life(tmp_path, sim, floor=changed, attached=False) as (ctl, console, journal):
                with pytest.raises(SupervisorRequired, match="no longer reports to the floor"):
                    ctl.prepare()  # was: journaled as the new floor of record, dealt on
                assert kinds(journal, "floor_link")[-1]["url"] == FLOOR.url
        with _life(tmp_path, sim, floor=other, attached=True) as (ctl, console, journal):
            signed = sign_off(console, "S-7")
            ctl.prepare()
            assert signed.answer()["ok"] is True
            ctl.play_round()
            changed = [b for b in kinds(journal, "supervisor") if b["action"] == "floor_changed"]
            assert [(b["supervisor"], b["floor_url"]) for b in changed] == [("S-7", FLOOR.url)]
            assert (kinds(journal, "floor_link")[-1]["url"], kinds(journal, "floor_link")[-1]["key_id"]) == \
                (other.url, other.key_id)
        with _life(tmp_path, sim, floor=other, attached=False) as (ctl, console, journal):
            ctl.prepare()  # signed off and journaled: no second hold
            ctl.play_round()


# -- through the real floor, broker and tablectl run ------------------------------------------------------

def _floor_files(tmp_path, broker_port: int):
    save(generate(), tmp_path / "table.key")
    save(generate(), tmp_path / "floor.key")
    (tmp_path / "keys").mkdir()
    shutil.copy(tmp_path / "table.key.pub", tmp_path / "keys" / f"{TABLE}.pub")
    (tmp_path / "floor.toml").write_text(f"""
[floor]
database = "{tmp_path / 'floor.sqlite3'}"
key_file = "{tmp_path / 'floor.key'}"
table_keys = "{tmp_path / 'keys'}"
listen = "127.0.0.1:{free_port()}"
[[broker]]
url = "mqtt://127.0.0.1:{broker_port}"
""")
    return tmp_path / "floor.toml"


@contextlib.contextmanager
def _simulated_devices(tmp_path):
    sim = subprocess.Popen(tablectl() + ["simulate-table", "--link-dir", str(tmp_path / "dev"), "--dealer-socket",
                                         str(tmp_path / "dealer.sock"), "--seed", "5"], stdout=subprocess.PIPE, text=True)
    try:
        assert sim.stdout.readline().startswith("ready")
        yield
    finally:
        sim.terminate()
        sim.wait(10)
        sim.stdout.close()


def _run(tmp_path, config: str, journal, rounds: int) -> subprocess.CompletedProcess:
    return subprocess.run(tablectl() + ["run", "--config", config, "--journal", str(journal), "--dealer-socket",
                                        str(tmp_path / "dealer.sock"), "--rounds", str(rounds), "--seats", "2",
                                        "--log-file", str(tmp_path / "log")],
                          capture_output=True, text=True, timeout=180)


def _copy_db(src: str, dst: str) -> None:
    for extra in ("-wal", "-shm"):
        if os.path.exists(dst + extra):
            os.unlink(dst + extra)
    for extra in ("", "-wal"):
        if os.path.exists(src + extra):
            shutil.copy(src + extra, dst + extra)


@needs_mosquitto
@pytest.mark.long
@pytest.mark.parametrize("insider", ["checkpoint-replayed", "checkpoint-cleared", "receipt-cleared-journal-intact"])
def test_a_floor_database_restored_behind_a_receipt_holds_the_table(tmp_path, broker, insider):
    floor_toml = _floor_files(tmp_path, broker.port)
    service = FloorService(load_floor_config(floor_toml)).start()
    journal = tmp_path / "j.sqlite3"
    db = str(tmp_path / "floor.sqlite3")
    with_floor = _table_config(tmp_path, broker.port, journal, service.url)
    cp_topic, receipt_topic = f"threecard/pit1/{TABLE}/checkpoint", f"threecard/pit1/{TABLE}/receipt"

    def receipted(svc, seq: int) -> bool:
        return bool(rows(svc.floor, "SELECT 1 FROM floor_receipts WHERE table_id = ? AND seq = ?", (TABLE, seq)))

    try:
        with _simulated_devices(tmp_path):
            first = _run(tmp_path, with_floor, journal, 2)
            assert first.returncode == 0, first.stderr[-2000:]
            old_head = _last_checkpoint(journal)
            assert service.floor.wait_for(lambda: receipted(service, old_head["seq"]), 30)
            captured = _retained(broker.port, cp_topic)  # the insider keeps the retained checkpoint of now
            service.close()  # ... and a copy of the floor's database of now
            _copy_db(db, str(tmp_path / "floor-old.sqlite3"))
            service = FloorService(load_floor_config(floor_toml)).start()
            for suffix in ("", ".head"):
                shutil.copy(f"{journal}{suffix}", f"{journal}.old{suffix}")

            for _ in range(4):  # the table journals a receipt at its next checkpoint after the floor sent it
                second = _run(tmp_path, with_floor, journal, 2)
                assert second.returncode == 0, second.stderr[-2000:]
                new_head = _last_checkpoint(journal)
                assert service.floor.wait_for(lambda: receipted(service, new_head["seq"]), 30)
                with Journal(journal, read_only=True) as j:
                    journaled = latest_receipt(j)  # the receipts the table took while it dealt
                if journaled and verify_receipt(journaled, service.floor_key.public, TABLE).seq > old_head["seq"]:
                    break
            else:
                pytest.fail("the table journaled no receipt of the floor's newer checkpoints")

            # The attack: the floor's older database back, the broker's retained messages as the insider wants.
            service.close()
            _copy_db(str(tmp_path / "floor-old.sqlite3"), db)
            if insider == "checkpoint-replayed":
                _republish(broker.port, cp_topic, captured)
            else:
                _republish(broker.port, cp_topic, b"")  # cleared
            if insider == "receipt-cleared-journal-intact":
                _republish(broker.port, receipt_topic, b"")  # only with the floor's broker account
            else:
                for suffix in ("", ".head"):
                    shutil.copy(f"{journal}.old{suffix}", f"{journal}{suffix}")
                for extra in ("-wal", "-shm"):
                    if os.path.exists(f"{journal}{extra}"):
                        os.unlink(f"{journal}{extra}")
            service = FloorService(load_floor_config(floor_toml)).start()
            assert not service.wait_following(20)
            assert service.floor.notary_checkpoint(TABLE)["seq"] == old_head["seq"]  # the database went back
            with Journal(journal, read_only=True) as j:
                before = j.last_seq

            held = _run(tmp_path, with_floor, journal, 1)
            assert held.returncode == 3, held.stderr[-2000:]  # held: a supervisor must acknowledge
            with Journal(journal, read_only=True) as j:
                incidents = [e.body["what"] for e in j.entries("incident") if e.seq > before]
                opened = [e for e in j.entries("round") if e.seq > before and e.body.get("step") == "open"]
            assert any("the floor holds this table" in w and "behind the receipt" in w for w in incidents), incidents
            assert not opened  # held at start, before any round
            assert ("floor_database_behind",) in rows(service.floor, "SELECT kind FROM alarms WHERE table_id = ?",
                                                      (TABLE,))
    finally:
        service.close()


@needs_mosquitto
@pytest.mark.long
def test_floor_removed_from_the_config_holds_the_table_for_a_supervisor(tmp_path, broker):
    floor_toml = _floor_files(tmp_path, broker.port)
    service = FloorService(load_floor_config(floor_toml)).start()
    journal = tmp_path / "j.sqlite3"
    try:
        with _simulated_devices(tmp_path):
            first = _run(tmp_path, _table_config(tmp_path, broker.port, journal, service.url), journal, 1)
            assert first.returncode == 0, first.stderr[-2000:]
            with Journal(journal, read_only=True) as j:
                before = j.last_seq
            # root takes [floor] out of the config
            removed = _run(tmp_path, _table_config(tmp_path, broker.port, journal, None), journal, 1)
            assert removed.returncode == 3, removed.stderr[-2000:]  # was: 0, dealt without the notary
            with Journal(journal, read_only=True) as j:
                incidents = [e.body for e in j.entries("incident") if e.seq > before]
                opened = [e for e in j.entries("round") if e.seq > before and e.body.get("step") == "open"]
            assert [b["floor_url"] for b in incidents if "floor_url" in b] == [service.url]
            assert not opened
    finally:
        service.close()


@needs_mosquitto
def test_a_restored_floor_hears_its_retained_receipt_before_the_tables_newer_checkpoint(tmp_path, broker):
    """The insider's restore with the table still running: the broker retains the table's
    newest checkpoint and the floor's receipt of it. The floor restarted on the older copy
    subscribes and gets both. It took the checkpoint first (its topic was subscribed first),
    signed it again, and the receipt then matched: the rounds between the copy and now were
    gone from the floor's reports with no alarm (one of six loaded suite runs). The receipt
    now comes first: ``floor_database_behind``."""
    from floor_helpers import Publisher
    from table.floor.ingest import BrokerFeed
    from table.interfaces.brokers import BrokerAddress

    floor_key = generate()
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    db, old = str(tmp_path / "floor.sqlite3"), str(tmp_path / "floor-old.sqlite3")
    receipts: list[bytes] = []

    def floor_on(database: str) -> Floor:
        floor = Floor(open_store(database), {t.table_id: t.key.public}, key=floor_key).start()
        floor.receipt_sinks.append(lambda f, table, payload: receipts.append(payload))
        return floor

    def close(floor: Floor) -> None:
        floor.close()
        floor.store.close()

    try:
        first = floor_on(db)
        first.receive(*t.retained(t.checkpoint()))
        assert first.wait_idle(10)
        close(first)
        _copy_db(db, old)  # the insider's copy of the floor's database of now
        second = floor_on(db)
        newest = t.checkpoint()
        second.receive(*t.retained(newest))
        assert second.wait_idle(10) and len(receipts) == 2
        close(second)
        publisher = Publisher(broker.port)  # what the broker retains since: the checkpoint and its receipt
        publisher.send([t.retained(newest), (f"threecard/pit1/{t.table_id}/receipt", receipts[-1].decode())],
                       retain=True)
        publisher.close()
        _copy_db(old, db)  # the restore
        third = floor_on(db)
        feed = BrokerFeed(third, BrokerAddress("127.0.0.1", broker.port, False)).start()
        try:
            assert feed.connected.wait(20), "the floor did not subscribe"
            assert third.wait_for(lambda: third.counts.received >= 2, 20), third.counts  # both retained ones
            assert third.wait_idle(10)
            assert ("floor_database_behind",) in rows(third, "SELECT kind FROM alarms WHERE table_id = ?",
                                                      (t.table_id,))
        finally:
            feed.close()
            close(third)
    finally:
        t.close()
