"""The floor's ingest through a real mosquitto broker into SQLite and a real PostgreSQL (issue 28):
what is kept, idempotently; what is refused (forged, unknown table); the notary that only grows;
two floor processes on one database."""

from __future__ import annotations

import json

import pytest

from table.keys import generate
from table.interfaces.mqtt import sign_message

from floor_helpers import (Publisher, SignedTable, broker, database, needs_mosquitto, rows,  # noqa: F401
                           running_floor, settle)

pytestmark = needs_mosquitto


def test_a_tables_signed_stream_is_kept_once(tmp_path, broker, database):
    t = SignedTable(tmp_path / "t", "pit1-tcp-01")
    t.publish_key(tmp_path / "keys")
    cp = t.checkpoint()
    stream = [t.status(alarms=[{"kind": "held", "text": "round 2 held: shoe jam"}]), *t.round(1),
              t.event("incident", {"what": "the shoe read a card twice"}), t.event("checkpoint", cp), t.retained(cp)]
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            pub.send(stream)
            settle(floor, len(stream))
            pub.send(stream[1:])  # QoS 1 is at-least-once: the same messages again
            settle(floor, 2 * len(stream) - 1)
            assert rows(floor, "SELECT round_id, number, wagered_cents, settled, players_net_cents, table_win_cents "
                               "FROM round_results") == [("r00001-pit1-tcp-01", 1, 2000, 1, -1000, 1000)]
            assert rows(floor, "SELECT type, what FROM incidents") == [("incident", "the shoe read a card twice")]
            assert rows(floor, "SELECT seq, head FROM checkpoints") == [(cp["seq"], cp["head"])]
            assert floor.notary_checkpoint("pit1-tcp-01") == cp
            assert rows(floor, "SELECT table_id, floor, online FROM tables_seen") == [("pit1-tcp-01", "pit1", 1)]
            assert rows(floor, "SELECT source, kind, text FROM alarms") == [("table", "held",
                                                                            "round 2 held: shoe jam")]
            assert floor.counts.forged == 0 and floor.counts.refused_checkpoints == 0
    finally:
        pub.close()
        t.close()


def test_a_floor_behind_a_prefixing_bridge_keeps_the_tables_and_refuses_the_forged(tmp_path):
    from mqtt_broker import start_bridged

    t = SignedTable(tmp_path / "t", "pit1-tcp-03")
    t.publish_key(tmp_path / "keys")
    opened, card, settled = t.round(4)
    env = json.loads(settled[1])
    payload = json.loads(env["payload"])
    payload["data"]["net_cents"]["1"] = 900_000  # a player's win raised after signing
    forged = json.dumps({**env, "payload": json.dumps(payload, separators=(",", ":"))})
    edge, central = start_bridged(tmp_path, "site-a/")  # the tables publish on the edge, the floor reads the centre
    pub = Publisher(edge.port)
    try:
        with running_floor(str(tmp_path / "floor.sqlite3"), tmp_path / "keys", central.port,
                           prefix="site-a/") as floor:
            pub.send([opened, card, (settled[0], forged), settled])
            settle(floor, 4)
            assert rows(floor, "SELECT round_id, wagered_cents, settled, players_net_cents FROM round_results") == [
                ("r00004-pit1-tcp-03", 2000, 1, -1000)]
            assert floor.counts.verified == 3 and floor.counts.forged == 1
    finally:
        pub.close()
        t.close()
        edge.stop()
        central.stop()


def test_a_genuine_status_moved_to_another_floors_topic_is_refused_behind_a_prefixing_bridge(tmp_path):
    """Attack: what the table signs names its table and the kind of message, not the floor's
    topic segment, so a genuine retained status of table pit2-tcp-05 (floor pit2) republished
    by anyone with broker access under ``threecard/pit1/pit2-tcp-05/status`` checks out. The
    floor takes the floor from the signed body and refuses the one whose topic disagrees
    (counted, logged, alarmed), while the genuine one, prefixed by the bridge, is kept."""
    from structlog.testing import capture_logs

    from mqtt_broker import start_bridged

    t = SignedTable(tmp_path / "t", "pit2-tcp-05", floor="pit2")
    t.publish_key(tmp_path / "keys")
    topic, genuine = t.status()
    moved = topic.replace("threecard/pit2/", "threecard/pit1/")
    edge, central = start_bridged(tmp_path, "site-a/")
    pub = Publisher(edge.port)
    try:
        with running_floor(str(tmp_path / "floor.sqlite3"), tmp_path / "keys", central.port,
                           prefix="site-a/") as floor, capture_logs() as logs:
            pub.send([(moved, genuine)])
            settle(floor, 1)
            assert floor.counts.forged == 1 and floor.counts.verified == 0
            assert rows(floor, "SELECT COUNT(*) FROM tables_seen") == [(0,)]
            pub.send([(topic, genuine)])  # the same bytes on the table's own topic, through the bridge's prefix
            settle(floor, 2)
            assert floor.counts.verified == 1 and floor.counts.forged == 1
            assert rows(floor, "SELECT table_id, floor FROM tables_seen") == [("pit2-tcp-05", "pit2")]
            assert rows(floor, "SELECT table_id, kind FROM alarms") == [("pit2-tcp-05", "forged_message")]
        refused = [e for e in logs if e["event"] == "floor_message_refused"]
        assert len(refused) == 1 and refused[0]["topic"] == "site-a/" + moved and "pit2" in refused[0]["error"]
    finally:
        pub.close()
        t.close()
        edge.stop()
        central.stop()


def test_a_forged_table_message_is_refused_and_nothing_is_kept(tmp_path, broker, database):
    t = SignedTable(tmp_path / "t", "pit1-tcp-02")
    t.publish_key(tmp_path / "keys")
    topic, genuine = t.round(7)[2]
    env = json.loads(genuine)
    payload = json.loads(env["payload"])
    payload["data"]["net_cents"] = {"1": 500_000}  # a player's win raised after signing
    tampered = json.dumps({**env, "payload": json.dumps(payload, separators=(",", ":"))})
    other_key = sign_message(generate(), topic, payload)  # signed, by someone else's key
    stranger = SignedTable(tmp_path / "s", "pit1-tcp-99")  # a table the floor has no key for
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            pub.send([(topic, tampered), (topic, other_key), (topic, "not json"), *stranger.round(1)])
            settle(floor, 6)
            assert rows(floor, "SELECT COUNT(*) FROM round_results") == [(0,)]
            assert floor.counts.forged == 3 and floor.counts.unknown_table == 3 and floor.counts.verified == 0
            alarms = rows(floor, "SELECT table_id, kind FROM alarms")
            assert alarms and set(alarms) == {("pit1-tcp-02", "forged_message")}  # one row a reason, known table
            assert len(alarms) <= 3
    finally:
        pub.close()
        t.close()
        stranger.close()


def test_the_notary_only_grows_a_lower_retained_checkpoint_is_refused_and_alarmed(tmp_path, broker, database):
    t = SignedTable(tmp_path / "t", "pit1-tcp-03")
    t.publish_key(tmp_path / "keys")
    old, new = t.checkpoint(), t.checkpoint()
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            pub.send([t.retained(old), t.retained(new)])
            settle(floor, 2)
            assert floor.notary_checkpoint("pit1-tcp-03")["seq"] == new["seq"]
            pub.send([t.retained(old)])  # the older genuine checkpoint republished: the rollback of issue 28
            settle(floor, 3)
            assert floor.notary_checkpoint("pit1-tcp-03") == new
            assert floor.counts.refused_checkpoints == 1
            assert rows(floor, "SELECT kind FROM alarms WHERE source = 'floor'") == [("checkpoint_lower",)]
            # The same older checkpoint on the event stream (a publisher replaying after a restart) is no alarm.
            pub.send([t.event("checkpoint", old)])
            settle(floor, 4)
            assert floor.counts.refused_checkpoints == 1 and floor.notary_checkpoint("pit1-tcp-03") == new
    finally:
        pub.close()
        t.close()


def test_a_forked_checkpoint_is_refused(tmp_path, broker, database):
    import shutil

    t = SignedTable(tmp_path / "t", "pit1-tcp-04")
    t.publish_key(tmp_path / "keys")
    base = t.checkpoint()
    t.journal.close()
    for copy in ("copy1", "copy2"):
        for suffix in ("", ".head"):  # copies of the journal as it stood, signed by the same key
            shutil.copy(f"{t.path}{suffix}", tmp_path / f"{copy}.sqlite3{suffix}")
    t.journal = type(t.journal)(t.path, key=t.key, table_id=t.table_id)
    mine = t.checkpoint(entries=3)
    from table.journal import Journal

    with Journal(tmp_path / "copy1.sqlite3", key=t.key, table_id=t.table_id) as other:
        for i in range(3):
            other.append("note", n=f"the other branch {i}")
        same_seq = other.checkpoint(rounds_opened=0)  # same seq as `mine`, another head
    with Journal(tmp_path / "copy2.sqlite3", key=t.key, table_id=t.table_id) as other:
        for i in range(11):
            other.append("note", n=f"a third branch {i}")
        further = other.checkpoint(rounds_opened=0)  # higher seq, grown from before `mine`
    assert same_seq["seq"] == mine["seq"] and same_seq["head"] != mine["head"] and further["seq"] > mine["seq"]
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            pub.send([t.retained(base), t.retained(mine)])
            settle(floor, 2)
            pub.send([t.event("checkpoint", same_seq), t.retained(further)])
            settle(floor, 4)
            assert floor.notary_checkpoint("pit1-tcp-04") == mine
            assert sorted(k for (k,) in rows(floor, "SELECT kind FROM alarms")) == ["checkpoint_fork"] * 2
            assert floor.counts.refused_checkpoints == 2
    finally:
        pub.close()
        t.close()


def test_a_branch_checkpoint_inside_a_kept_stretch_is_a_fork_not_history(tmp_path, broker, database):
    """A checkpoint lower than the notary's, arriving on the event stream (where missed history
    comes), whose seq falls inside the stretch of a checkpoint the floor kept: an honest
    table's checkpoints partition its journal, so it is another branch's, refused and alarmed,
    never stored as the table's history."""
    import shutil

    t = SignedTable(tmp_path / "t", "pit1-tcp-06")
    t.publish_key(tmp_path / "keys")
    base = t.checkpoint()
    t.journal.close()
    for suffix in ("", ".head"):  # the journal as it stood at `base`, signed by the same key
        shutil.copy(f"{t.path}{suffix}", tmp_path / f"branch.sqlite3{suffix}")
    t.journal = type(t.journal)(t.path, key=t.key, table_id=t.table_id)
    kept = t.checkpoint(entries=10)  # covers base+1 .. base+10 (and its own entry)
    from table.journal import Journal

    with Journal(tmp_path / "branch.sqlite3", key=t.key, table_id=t.table_id) as other:
        for i in range(3):
            other.append("note", n=f"the other branch {i}")
        inside = other.checkpoint(rounds_opened=0)
    assert base["seq"] < inside["seq"] < kept["seq"] and kept["from"] <= inside["seq"]
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            pub.send([t.retained(base), t.retained(kept)])
            settle(floor, 2)
            pub.send([t.event("checkpoint", inside)])
            settle(floor, 3)
            assert rows(floor, "SELECT seq FROM checkpoints ORDER BY seq") == [(base["seq"],), (kept["seq"],)]
            assert rows(floor, "SELECT kind FROM alarms") == [("checkpoint_fork",)]
            assert floor.counts.refused_checkpoints == 1 and floor.notary_checkpoint("pit1-tcp-06") == kept
    finally:
        pub.close()
        t.close()


def test_two_floor_processes_share_one_database_and_one_broker(tmp_path, broker, database):
    t = SignedTable(tmp_path / "t", "pit1-tcp-05")
    t.publish_key(tmp_path / "keys")
    cp = t.checkpoint()
    stream = [*t.round(1), *t.round(2), t.retained(cp)]
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as a, \
                running_floor(database, tmp_path / "keys", broker.port) as b:
            pub.send(stream)  # both floors get every message (unique client ids: neither knocks the other off)
            settle(a, len(stream))
            settle(b, len(stream))
            assert rows(a, "SELECT round_id, table_win_cents FROM round_results ORDER BY round_id") == [
                ("r00001-pit1-tcp-05", 1000), ("r00002-pit1-tcp-05", 1000)]
            assert a.notary_checkpoint("pit1-tcp-05") == b.notary_checkpoint("pit1-tcp-05") == cp
            assert a.counts.refused_checkpoints == b.counts.refused_checkpoints == 0
    finally:
        pub.close()
        t.close()


@pytest.mark.parametrize("bad", ["newer", "unknown"])
def test_a_database_of_another_schema_is_refused(tmp_path, bad):
    from table.floor.store import StoreError, open_store

    url = str(tmp_path / "f.sqlite3")
    s = open_store(url)
    with s.transaction() as tx:
        tx.execute("INSERT INTO schema_version (version, note, applied_at) VALUES (99, 'from the future', 'x')")
    s.close()
    with pytest.raises(StoreError, match="newer than this floor"):
        open_store(url)
    with pytest.raises(StoreError, match="not an absolute path"):
        open_store("floor.sqlite3")


def test_a_flood_of_messages_for_unknown_tables_is_counted_in_bounded_memory(tmp_path):
    from table.floor.ingest import MAX_REASONS, Floor
    from table.floor.store import open_store
    from table.interfaces.brokers import load_table_keys

    t = SignedTable(tmp_path / "t", "pit1-tcp-06")
    t.publish_key(tmp_path / "keys")
    store = open_store(str(tmp_path / "floor.sqlite3"))
    floor = Floor(store, load_table_keys(tmp_path / "keys")).start()
    try:
        for n in range(300):  # each names a table of its own, and a reason of its own
            stranger = f"threecard/pit1/x{n:04d}/events"
            floor.receive(stranger, sign_message(generate(), stranger, {"table_id": f"x{n:04d}"}).encode())
            floor.receive(f"threecard/pit1/pit1-tcp-06/bogus{n}", b"{}")
        assert floor.wait_idle(30)
        assert floor.counts.unknown_table == 300 and floor.counts.forged == 300
        assert len(floor.counts.by_reason) <= MAX_REASONS
        assert rows(floor, "SELECT COUNT(*) FROM alarms")[0][0] <= MAX_REASONS  # rows only for the known table
    finally:
        floor.close()
        store.close()
        t.close()


def test_a_message_nested_past_the_stack_is_refused_and_the_floor_hears_on(tmp_path, broker, database):
    """Attack (a fresh review of issue 28): ``b"[" * 200_000`` (under the size bound) made
    ``json.loads`` raise RecursionError, which killed paho's network thread: the floor stayed
    up, deaf, and its notary stopped rising. It is refused as forged and the feed goes on."""
    t = SignedTable(tmp_path / "t", "pit1-tcp-03")
    t.publish_key(tmp_path / "keys")
    topic = t.round(1)[0][0]
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            deep = "[" * 200_000
            inner = json.dumps({"schema": "threecard.signed/2", "key_id": "x", "payload": deep, "sig": "x"})
            pub.send([(topic, deep), (topic, inner)])
            settle(floor, 2)
            assert floor.counts.forged == 2
            after = t.round(2)
            pub.send(after)  # genuine messages after the attack are still heard and kept
            settle(floor, 2 + len(after))
            assert floor.counts.verified == len(after)
            assert rows(floor, "SELECT number FROM round_results") == [(2,)]
    finally:
        pub.close()
        t.close()


def test_the_floors_wagered_is_the_tables_handle_the_play_wager_included(tmp_path, broker, database):
    """The floor's "wagered" left out the play wager ($1,887 against the table's $2,982 handle
    for one day): it counted the wagers at the round's open (ante and side bets). A settled
    round's wagered is its handle as the table counts it (every stake settled but the ante
    bonus, which is paid on the ante), whatever order the events arrive in."""
    t = SignedTable(tmp_path / "t", "pit1-tcp-05")
    t.publish_key(tmp_path / "keys")
    opened, card, _ = t.round(7)
    results = {"1": {"decision": "play", "net": 2000, "wagers": [
                   {"wager": "ante", "stake": 1000, "amount": 1000, "outcome": "win"},
                   {"wager": "play", "stake": 1000, "amount": 1000, "outcome": "win"},
                   {"wager": "ante_bonus", "stake": 1000, "amount": 0, "outcome": "lose"}]},
               "2": {"decision": "fold", "net": -1000, "wagers": [
                   {"wager": "ante", "stake": 1000, "amount": -1000, "outcome": "lose"}]}}
    settled = t.event("round_settled", {"number": 7, "results": results, "net_cents": {"1": 2000, "2": -1000}},
                      "r00007-pit1-tcp-05")
    handle = sum(w["stake"] for r in results.values() for w in r["wagers"] if w["wager"] != "ante_bonus")
    pub = Publisher(broker.port)
    try:
        with running_floor(database, tmp_path / "keys", broker.port) as floor:
            pub.send([opened, card, settled, opened])  # the open again after the settle: changes nothing
            settle(floor, 4)
            assert rows(floor, "SELECT wagered_cents, table_win_cents FROM round_results") == [(handle, -1000)]
            assert handle == 3000
    finally:
        pub.close()
        t.close()
