"""Attack: a floor note edited in the database. The notes are signed with the floor key
(table/floor/record.py), checked when the floor starts and each time the page asks for its
alarms or notes: the edit is an alarm at start and on the page, even when the attacker
recomputes the hash chain after the edit (which the chain alone cannot see). A floor with
no key yet makes one (0600, never over an existing one)."""

from __future__ import annotations

import json
import stat

import pytest

from table.floor.config import parse_floor_config
from table.floor.record import ALARM_KIND, RecordCheck, check_notes, note_hash
from table.floor.reports import notes_chain_holds
from table.floor.service import FloorService
from table.interfaces.auth import PeopleFile
from table.keys import load_private_key
from table.roles import Role

from console_helpers import CHEAP
from floor_helpers import SignedTable, call
from mqtt_broker import free_port

PIN = "739201"
DAY = "2026-03-05"
TABLE = "pit1-tcp-04"


def config(tmp_path):
    return parse_floor_config(f"""
[floor]
database = "{tmp_path / 'floor.sqlite3'}"
key_file = "{tmp_path / 'keys-folder' / 'floor.key'}"
table_keys = "{tmp_path / 'keys'}"
people_file = "{tmp_path / 'people.toml'}"
listen = "127.0.0.1:0"
[[broker]]
url = "mqtt://127.0.0.1:{free_port()}"
""")


@pytest.fixture
def floor_with_notes(tmp_path):
    """A floor service (its broker away: the table's messages are handed to it) whose floor
    manager wrote three notes on a table's day through the API."""
    t = SignedTable(tmp_path / "t", TABLE)
    t.publish_key(tmp_path / "keys")
    (tmp_path / "keys-folder").mkdir()
    PeopleFile(tmp_path / "people.toml").add("FM-1", Role.FLOOR_MANAGER, PIN, hasher=CHEAP)
    service = FloorService(config(tmp_path)).start()
    for topic, payload in [t.status()] + t.round(1, ts=f"{DAY}T20:00:00+00:00"):
        service.floor.receive(topic, payload.encode())
    assert service.floor.wait_idle(30)
    status, who = call(service.server, "/api/v1/floor/session", {"person": "FM-1", "pin": PIN})
    assert status == 200, who
    for text in ("count re-run: seat 1 mispaid twice", "video reviewed", "surveillance report filed"):
        status, body = call(service.server, "/api/v1/floor/notes", {"table_id": TABLE, "gaming_day": DAY,
                                                                    "text": text}, token=who["token"])
        assert status == 200, body
    try:
        yield service, who["token"]
    finally:
        service.close()
        t.close()


def edit_note(store, n: int, text: str, *, rechain: bool) -> None:
    """What an attacker with the database does: change note ``n``'s words; with ``rechain``,
    recompute every later note's ``prev_hash`` so the hash chain holds again."""
    with store.transaction() as tx:
        tx.execute("UPDATE notes SET text = ? WHERE n = ?", (text, n))
        if rechain:
            cols = ("n", "note_id", "table_id", "gaming_day", "author", "role", "text", "ts", "prev_hash")
            rows = [dict(zip(cols, r)) for r in tx.query(f"SELECT {', '.join(cols)} FROM notes ORDER BY n")]
            for prev, note in zip(rows, rows[1:]):
                note["prev_hash"] = note_hash(prev)
                tx.execute("UPDATE notes SET prev_hash = ? WHERE n = ?", (note["prev_hash"], note["n"]))


def record_alarms(store) -> list[str]:
    return [r[0] for r in store.query("SELECT text FROM alarms WHERE kind = ?", (ALARM_KIND,))]


@pytest.mark.parametrize("rechain", [False, True], ids=["edited", "edited-and-rechained"])
def test_an_edited_note_is_an_alarm_on_the_page_and_at_start(tmp_path, floor_with_notes, rechain):
    service, token = floor_with_notes
    store = service.floor.store
    status, page = call(service.server, "/api/v1/floor/alarms", token=token)
    assert status == 200 and page["record"] == {"holds": True, "problems": []}
    assert check_notes(store, service.floor_key.public) == [] and record_alarms(store) == []

    edit_note(store, 1, "nothing found, no mispay", rechain=rechain)
    assert notes_chain_holds(store) is rechain  # rechained: the hash chain alone no longer sees it

    # on the page: the next ask for alarms checks the record, raises the alarm and says so
    status, page = call(service.server, "/api/v1/floor/alarms", token=token)
    assert status == 200 and page["record"]["holds"] is False
    assert any("note 1 was changed after the floor signed it" in p for p in page["record"]["problems"])
    assert any(a["kind"] == ALARM_KIND and a["table_id"] == TABLE for a in page["alarms"])
    status, listed = call(service.server, "/api/v1/floor/notes", token=token)
    assert status == 200 and listed["record"]["holds"] is False

    # at start: the alarm rows deleted too, a restarted floor raises it again
    service.close()
    with_rows = sqlite_rows(tmp_path)
    with_rows("DELETE FROM alarms")
    again = FloorService(config(tmp_path)).start()
    try:
        assert any(p.n == 1 for p in again.record_problems)
        assert any("note 1 was changed" in text for text in record_alarms(again.store))
        assert again.key_created is False  # the floor's key, kept: not a new one that would sign the edit
    finally:
        again.close()


def sqlite_rows(tmp_path):
    import sqlite3

    def run(sql: str) -> None:
        con = sqlite3.connect(tmp_path / "floor.sqlite3")
        try:
            con.execute(sql)
            con.commit()
        finally:
            con.close()
    return run


def test_a_note_taken_out_of_the_middle_is_an_alarm(floor_with_notes):
    service, token = floor_with_notes
    with service.floor.store.transaction() as tx:
        tx.execute("DELETE FROM notes WHERE n = 2")
    status, page = call(service.server, "/api/v1/floor/alarms", token=token)
    assert page["record"]["holds"] is False and any("taken out" in p for p in page["record"]["problems"])


def test_a_floor_with_no_key_makes_one_0600_and_keeps_it(tmp_path, floor_with_notes):
    service, _ = floor_with_notes
    key_file = tmp_path / "keys-folder" / "floor.key"
    assert service.key_created is True
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert load_private_key(key_file).key_id == service.floor_key.key_id
    assert (tmp_path / "keys-folder" / "floor.key.pub").read_bytes().startswith(b"-----BEGIN PUBLIC KEY")
    rows = service.floor.store.query("SELECT key_id, sig FROM notes ORDER BY n")
    assert rows and all(kid == service.floor_key.key_id and len(sig) == 88 for kid, sig in rows)
    assert json.dumps(rows)  # plain text columns


def test_an_edited_floor_alarm_is_an_alarm_on_the_page_and_at_start(tmp_path, floor_with_notes):
    """The floor's own alarms (a refused message here) are signed too: one whose words are
    changed in the database (to hide what was refused) is a record alarm."""
    service, token = floor_with_notes
    store = service.floor.store
    assert not service.floor.receive(f"threecard/pit1/{TABLE}/status", b'{"not": "signed"}')  # refused: an alarm
    assert service.floor.wait_idle(10)
    (aid, text), = store.query("SELECT alarm_id, text FROM alarms WHERE kind = 'forged_message'")
    status, page = call(service.server, "/api/v1/floor/alarms", token=token)
    assert page["record"] == {"holds": True, "problems": []}
    with store.transaction() as tx:
        tx.execute("UPDATE alarms SET text = ? WHERE alarm_id = ?", ("a test message, nothing to see", aid))
    status, page = call(service.server, "/api/v1/floor/alarms", token=token)
    assert page["record"]["holds"] is False
    assert any(f"alarm {aid}" in p and "changed after the floor signed it" in p for p in page["record"]["problems"])
    service.close()
    sqlite_rows(tmp_path)(f"DELETE FROM alarms WHERE kind = '{ALARM_KIND}'")
    again = FloorService(config(tmp_path)).start()
    try:
        assert any(p.alarm_id == aid for p in again.record_problems)
        assert any(aid in text for text in record_alarms(again.store))
        assert RecordCheck(again.floor_key.public).check(again.store)  # still there: the row stays edited
    finally:
        again.close()
