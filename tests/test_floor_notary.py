"""The floor's notary over HTTP (issue 28): the answer is signed by the floor key, names the
table and the table's nonce, and carries the table's own signed checkpoint; the table checks
all of it (table/notary_client.py), and what it does when the floor is away is its config's."""

from __future__ import annotations

import json
import urllib.request

import pytest

from table.config import parse_config
from table.floor.ingest import Floor
from table.floor.store import open_store
from table.floor.web import FloorServer, floor_app
from table.interfaces.brokers import load_table_keys
from table.keys import generate, save
from table.notary_client import NotaryError, fetch_floor_checkpoint, floor_anchors, verify_answer

from floor_helpers import SignedTable, database  # noqa: F401
from mqtt_broker import free_port


@pytest.fixture
def notary(tmp_path, database):
    """A floor (no broker: checkpoints handed to it as a broker would) serving its notary."""
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    t.publish_key(tmp_path / "keys")
    floor_key = generate()
    save(floor_key, tmp_path / "floor.key")
    store = open_store(database)
    floor = Floor(store, load_table_keys(tmp_path / "keys")).start()
    server = FloorServer(floor_app(floor, floor_key), "127.0.0.1", 0)
    try:
        yield t, floor, server, floor_key
    finally:
        server.close()
        floor.close()
        store.close()
        t.close()


def test_the_table_gets_the_highest_checkpoint_signed_by_the_floor(notary):
    t, floor, server, floor_key = notary
    assert fetch_floor_checkpoint(server.url, floor_public=floor_key.public, table_id=t.table_id,
                                  table_public=t.key.public) is None  # nothing notarised yet
    old, new = t.checkpoint(), t.checkpoint()
    for cp in (new, old):  # the older one after: the notary keeps the highest
        assert floor.receive(*t.retained(cp)[:1], t.retained(cp)[1].encode())
    assert floor.wait_idle(10)
    got = fetch_floor_checkpoint(server.url, floor_public=floor_key.public, table_id=t.table_id,
                                 table_public=t.key.public)
    assert got == new


def test_an_answer_the_table_cannot_trust_is_refused(notary):
    t, floor, server, floor_key = notary
    cp = t.checkpoint()
    floor.receive(t.retained(cp)[0], t.retained(cp)[1].encode())
    assert floor.wait_idle(10)
    nonce = "ab" * 16
    with urllib.request.urlopen(f"{server.url}/api/v1/notary/{t.table_id}?nonce={nonce}", timeout=10) as r:
        raw = r.read()
    ok = dict(floor_public=floor_key.public, table_id=t.table_id, table_public=t.key.public)
    assert verify_answer(raw, nonce=nonce, **ok) == cp
    with pytest.raises(NotaryError, match="another nonce: an old answer replayed"):
        verify_answer(raw, nonce="cd" * 16, **ok)  # an older answer played back to a later start
    with pytest.raises(NotaryError, match="not the floor key"):
        verify_answer(raw, nonce=nonce, **{**ok, "floor_public": generate().public})  # a floor impostor
    with pytest.raises(NotaryError, match="bad signature"):
        verify_answer(raw, nonce=nonce, **{**ok, "table_id": "pit1-tcp-02"})  # an answer about another table
    env = json.loads(raw)
    payload = json.loads(env["payload"])
    payload["checkpoint"]["seq"] -= 1  # changed after signing
    with pytest.raises(NotaryError, match="bad signature"):
        verify_answer(json.dumps({**env, "payload": json.dumps(payload)}).encode(), nonce=nonce, **ok)
    # A floor key that signs a checkpoint the table never signed (a floor gone bad) is refused too.
    from table.notary_client import sign_answer

    forged = sign_answer(floor_key, t.table_id, nonce, {**cp, "seq": cp["seq"] + 50}, "2026-12-01T00:00:00+00:00")
    with pytest.raises(NotaryError, match="not signed by this table's key"):
        verify_answer(forged, nonce=nonce, **ok)
    with urllib.request.urlopen(f"{server.url}/api/v1/floor/health", timeout=10) as r:
        assert json.loads(r.read())["counts"]["verified"] == 1


def _table_config(tmp_path, url: str, pub, unreachable: str | None = None):
    policy = f'unreachable = "{unreachable}"\n' if unreachable else ""
    return parse_config(f"""
[table]
id = "pit1-tcp-01"
seats = 1
[devices.shuffler]
url = "/dev/a"
[devices.shoe]
url = "/dev/b"
[floor]
url = "{url}"
public_key = "{pub}"
timeout_s = 2
{policy}""")


def test_the_tables_config_decides_what_an_unreachable_floor_means(tmp_path, notary):
    t, floor, server, floor_key = notary
    pub = tmp_path / "floor.key.pub"
    cfg = _table_config(tmp_path, server.url, pub)
    cp = t.checkpoint()
    floor.receive(t.retained(cp)[0], t.retained(cp)[1].encode())
    assert floor.wait_idle(10)
    assert floor_anchors(cfg.floor, table_id=t.table_id, table_public=t.key.public) == [cp]
    away = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    assert _table_config(tmp_path, away, pub).floor.unreachable == "refuse"  # the safe default
    with pytest.raises(NotaryError, match="cannot be reached") as exc:
        floor_anchors(_table_config(tmp_path, away, pub).floor, table_id=t.table_id, table_public=t.key.public)
    assert exc.value.reason == "unreachable"
    warned = floor_anchors(_table_config(tmp_path, away, pub, "warn").floor, table_id=t.table_id,
                           table_public=t.key.public)  # no checkpoint: a note the table journals as an incident
    assert [a.get("seq") for a in warned] == [None] and "cannot be reached" in warned[0]["anchor_missing"]
    impostor = generate()
    save(impostor, tmp_path / "impostor.key")
    with pytest.raises(NotaryError, match="not the floor key") as exc:
        floor_anchors(_table_config(tmp_path, server.url, tmp_path / "impostor.key.pub").floor, table_id=t.table_id,
                      table_public=t.key.public)
    assert exc.value.reason == "refused"


def test_a_floor_section_without_the_floors_key_is_a_config_error(tmp_path):
    from table.config import ConfigError

    with pytest.raises(ConfigError, match="floor.public_key"):
        parse_config("""
[table]
id = "t"
seats = 1
[devices.shuffler]
url = "/dev/a"
[devices.shoe]
url = "/dev/b"
[floor]
url = "http://127.0.0.1:8091"
""")
    with pytest.raises(ConfigError, match="floor.unreachable"):
        _table_config(tmp_path, "http://127.0.0.1:8091", "/x.pub", "hope")


def test_the_docs_floor_examples_are_valid_configs():
    import re
    from pathlib import Path

    from table.floor.config import parse_floor_config

    doc = (Path(__file__).resolve().parent.parent / "docs" / "integration.md").read_text()
    section = doc[doc.index("## The floor service"):doc.index("## Benchmark")]
    floor_toml, table_toml = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    cfg = parse_floor_config(floor_toml)
    assert cfg.database.startswith("/var/lib") and [b.floors for b in cfg.brokers] == [("pit1", "pit2"), ("+",)]
    assert cfg.timezone == "America/New_York" and cfg.day_starts_h == 6
    table = parse_config('[table]\nid = "pit2-tcp-07"\nseats = 3\n[devices.shuffler]\nurl = "/dev/a"\n'
                         '[devices.shoe]\nurl = "/dev/b"\n' + table_toml)
    assert table.floor.unreachable == "refuse" and table.floor.url == "http://floor1.floor.example:8091"


def test_a_bad_floor_config_names_every_bad_key(tmp_path):
    from table.floor.config import FloorConfigError, parse_floor_config

    with pytest.raises(FloorConfigError) as exc:
        parse_floor_config('[floor]\ndatabase = "postgresql://floor:hunter2@db/floor"\ntable_keys = "k"\n'
                           'timezone = "Mars/Olympus"\nday_starts_h = 30\ncolour = "red"\n'
                           '[[broker]]\nurl = "http://broker"\n', tmp_path / "floor.toml")
    text = str(exc.value)
    for part in ("floor.toml", "a password in the URL", "floor.key_file: missing", "floor.timezone",
                 "floor.day_starts_h", "floor.colour: unknown key", "broker[0].url"):
        assert part in text, part


def test_a_new_floor_database_seeded_from_the_old_one_refuses_the_republished_older_checkpoint(tmp_path, notary,
                                                                                                database):
    """A floor on an empty database (a lost disk, a move to PostgreSQL, a second floor with its
    own database) adopts whatever a broker retains: an insider's republished older checkpoint
    becomes its notary. `tablectl floor seed --from OLD` gives it the old floor's notary first,
    every checkpoint checked with its table's key; then the republish is a rollback, alarmed."""
    import subprocess

    from console_helpers import tablectl

    t, floor, server, floor_key = notary
    old, new = t.checkpoint(), t.checkpoint()
    for cp in (old, new):
        floor.receive(t.retained(cp)[0], t.retained(cp)[1].encode())
    assert floor.wait_idle(10)

    def fresh(name: str) -> tuple[Floor, object]:
        store = open_store(str(tmp_path / f"{name}.sqlite3"))
        return Floor(store, load_table_keys(tmp_path / "keys")).start(), store

    # Unseeded: the republished older checkpoint is what the new floor's notary holds (the attack).
    bare, store = fresh("bare")
    try:
        bare.receive(t.retained(old)[0], t.retained(old)[1].encode())
        assert bare.wait_idle(10) and bare.notary_checkpoint(t.table_id) == old
    finally:
        bare.close()
        store.close()
    cfg = tmp_path / "new-floor.toml"
    cfg.write_text(f'[floor]\ndatabase = "{tmp_path / "new.sqlite3"}"\nkey_file = "floor.key"\ntable_keys = "keys"\n'
                   f'[[broker]]\nurl = "mqtt://127.0.0.1:{free_port()}"\n')
    done = subprocess.run(tablectl() + ["floor", "seed", "--config", str(cfg), "--from", database],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 checkpoints taken, 0 refused" in done.stdout, done.stdout
    seeded, store = fresh("new")
    try:
        seeded.receive(t.retained(old)[0], t.retained(old)[1].encode())
        assert seeded.wait_idle(10)
        assert seeded.notary_checkpoint(t.table_id) == new
        assert [k for (k,) in seeded.store.query("SELECT kind FROM alarms")] == ["checkpoint_lower"]
    finally:
        seeded.close()
        store.close()
    # A checkpoint in the source whose bytes were changed is not taken: exit 3, counted.
    with floor.store.transaction() as tx:
        tx.execute("UPDATE checkpoints SET signed = ? WHERE seq = ?",
                   (json.dumps({**new, "seq": new["seq"] + 50}), new["seq"]))
    again = subprocess.run(tablectl() + ["floor", "seed", "--config", str(cfg), "--from", database],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 3 and "1 with a bad signature" in again.stdout, (again.stdout, again.stderr[-2000:])
    missing = subprocess.run(tablectl() + ["floor", "seed", "--config", str(cfg), "--from",
                                           str(tmp_path / "nothing.sqlite3")], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and "--from" in missing.stderr and not (tmp_path / "nothing.sqlite3").exists()
