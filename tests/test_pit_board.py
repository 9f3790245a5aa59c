"""The pit view at scale (issue 28): pages get only the tables that changed, coalesced per tick;
a table past the limit is refused loudly (logged, counted, listed); two pit views of one pit on
one broker do not knock each other off (a unique MQTT client id each)."""

from __future__ import annotations

import asyncio
import datetime
import json

import pytest
from console_helpers import wait_until
from mqtt_broker import Broker, mosquitto_path
from structlog.testing import capture_logs

from table.interfaces.mqtt import sign_message
from table.interfaces.pit import BrokerAddress, PitBoard, PitServer, PitSetupError, PitSubscriber
from table.keys import generate

pytestmark = pytest.mark.timeout(120)
KEY = generate()  # one key for every synthetic table here: each is still checked as its own table


def status(table_id: str, pit: str = "pit7", **extra) -> tuple[str, bytes]:
    topic = f"threecard/{pit}/{table_id}/status"
    msg = {"schema": "threecard.status/1", "table_id": table_id, "floor": pit, "online": True,
           "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(), "head_seq": 0, **extra}
    return topic, sign_message(KEY, topic, msg).encode()


def event(table_id: str, seq: int, kind: str = "round_opened", pit: str = "pit7") -> tuple[str, bytes]:
    topic = f"threecard/{pit}/{table_id}/events"
    ev = {"schema": "threecard.events/1", "seq": seq, "table_id": table_id, "round_id": f"r{seq:05d}-00000000",
          "ts": "2026-12-01T10:00:00+00:00", "type": kind, "data": {"number": seq}}
    return topic, sign_message(KEY, topic, ev).encode()


def test_a_table_past_the_limit_is_refused_loudly():
    ids = [f"t-{n:03d}" for n in range(1, 5)]
    with capture_logs() as logs:
        board = PitBoard("pit7", {t: KEY.public for t in ids}, max_tables=3)
    assert [e for e in logs if e["event"] == "pit_table_refused"][0]["tables"] == ["t-004"]
    assert [c["table_id"] for c in board.snapshot()["tables"]] == ids[:3]
    with capture_logs() as logs:
        assert not board.receive(*status("t-004"))
        assert not board.receive(*event("t-004", 1))
    assert [e["table"] for e in logs if e["event"] == "pit_table_refused"] == ["t-004"]  # logged at its first
    snap = board.snapshot()
    assert snap["refused"] == [{"table_id": "t-004", "messages": 2, "reason": "past the pit's table limit (3)"}]
    assert snap["counts"]["refused_tables"] == 1 and snap["counts"]["refused_messages"] == 2
    assert "t-004" not in {c["table_id"] for c in snap["tables"]}
    assert board.take_delta()["refused"][0]["messages"] == 2  # the page hears of it
    # The default limit is 500, and a limit is a whole number >= 1.
    assert PitBoard("pit7", {"t-1": KEY.public}).max_tables == 500
    with pytest.raises(PitSetupError):
        PitBoard("pit7", {"t-1": KEY.public}, max_tables=0)


def test_table_501_at_the_default_limit_is_refused_loudly():
    ids = [f"t-{n:03d}" for n in range(1, 502)]  # 501 tables' keys, the default limit of 500
    with capture_logs() as logs:
        board = PitBoard("pit7", {t: KEY.public for t in ids})
        board.receive(*status("t-501"))
    refused = [e for e in logs if e["event"] == "pit_table_refused"]
    assert refused[0]["tables"] == ["t-501"] and refused[0]["max_tables"] == 500  # logged when the pit starts
    assert refused[1]["table"] == "t-501"  # and at its first message
    snap = board.snapshot()
    assert len(snap["tables"]) == 500 and "t-501" not in {c["table_id"] for c in snap["tables"]}
    assert snap["refused"] == [{"table_id": "t-501", "messages": 1, "reason": "past the pit's table limit (500)"}]
    assert snap["counts"]["refused_tables"] == 1 and snap["counts"]["refused_messages"] == 1


def _stalled_page(port: int):
    """A page that opens the pit's WebSocket and then reads nothing (a stalled phone): a raw
    socket with a small receive window, the upgrade done by hand, never read again."""
    import base64
    import os
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /api/v1/pit/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)
    assert b" 101 " in answer.split(b"\r\n")[0], answer
    return sock


def test_a_page_that_does_not_read_holds_no_other_page_up():
    """One page stops reading; the other keeps getting every change within a tick or two and
    is never sent the whole board again; the stalled one falls MAX_QUEUED frames behind and
    is marked for the whole board instead (counted: page_resyncs), its frames not queued
    without end."""
    import time

    from websockets.asyncio.client import connect

    ids = [f"t-{n:03d}" for n in range(200)]
    board = PitBoard("pit7", {t: KEY.public for t in ids})
    server = PitServer(board, "127.0.0.1", 0)
    seq = {"n": 0}

    def change_every_table() -> None:  # a delta of every table: ~50 KB, so the stalled socket fills soon
        seq["n"] += 1
        for t in ids:
            board.receive(*event(t, seq["n"]))

    async def pages() -> tuple[list[float], int]:
        lags, fulls = [], 0
        async with connect(f"ws://127.0.0.1:{server.port}/api/v1/pit/ws", max_size=None) as fast:
            assert json.loads(await fast.recv())["type"] == "full"
            deadline = time.monotonic() + 90
            while board.snapshot()["counts"]["page_resyncs"] == 0:
                assert time.monotonic() < deadline, "the stalled page was never marked for a resync"
                await asyncio.to_thread(change_every_table)
                changed_at, want = time.monotonic(), seq["n"]
                while True:  # the reading page gets this change, whatever the stalled one does
                    frame = json.loads(await asyncio.wait_for(fast.recv(), 10))
                    fulls += frame["type"] == "full"
                    if any(c["last_seq"] == want for c in frame["tables"]):
                        lags.append(time.monotonic() - changed_at)
                        break
        return lags, fulls

    stalled = _stalled_page(server.port)
    try:
        lags, fulls = asyncio.run(pages())
    finally:
        stalled.close()
        server.close()
    assert len(lags) > 32  # the stalled page was MAX_QUEUED frames behind while the other took each one
    assert fulls == 0  # the reading page was never sent the whole board again
    assert max(lags) < 5.0, lags  # a tick (0.1 s) and the checks of 200 signatures, on a busy machine


def test_several_pits_and_prefixed_topics_on_one_board():
    board = PitBoard(["pit7", "pit8"], {"t-1": KEY.public, "t-2": KEY.public})
    assert board.topics == ["threecard/pit7/+/status", "threecard/pit7/+/events", "threecard/pit8/+/status",
                            "threecard/pit8/+/events"]
    assert board.receive(*status("t-1", pit="pit7"))
    topic, raw = status("t-2", pit="pit8")
    assert board.receive("site-b/" + topic, raw)
    assert not board.receive(*status("t-2", pit="pit9"))  # not a pit of this board
    assert {c["table_id"]: c["state"] for c in board.snapshot()["tables"]} == {"t-1": "online", "t-2": "online"}
    assert BrokerAddress.parse("mqtt://central:1883/site-a/pits").prefix == "site-a/pits/"
    for bad in ("mqtt://central/site-a/#", "mqtt://central/+", "mqtt://central/a?b=1"):
        with pytest.raises(PitSetupError):
            BrokerAddress.parse(bad)


def test_a_genuine_status_moved_to_another_pits_topic_is_refused_and_counted():
    """Attack: a table's signature covers its table and the kind of message, not the pit's
    topic segment, so a genuine ``online: true`` of t-2 (pit8) republished under
    ``threecard/pit7/t-2/status`` checks out. The pit takes the pit from the signed body:
    refused and counted as forged, the table not shown online; a bridge's prefix before the
    table's own topic is still taken."""
    board = PitBoard("pit7", {"t-1": KEY.public, "t-2": KEY.public})
    topic, raw = status("t-2", pit="pit8")
    with capture_logs() as logs:
        assert not board.receive(topic.replace("/pit8/", "/pit7/"), raw)
        assert not board.receive("site-b/" + topic.replace("/pit8/", "/pit7/"), raw)
    snap = board.snapshot()
    assert snap["counts"]["forged"] == 2 and snap["counts"]["accepted"] == 0
    assert {c["table_id"]: c["state"] for c in snap["tables"]}["t-2"] != "online"
    assert [e for e in logs if e["event"] == "pit_message_refused"][0]["reason"].startswith("the status names pit")
    assert board.receive("site-b/" + status("t-2")[0], status("t-2")[1])  # its own pit's status, prefixed
    assert {c["table_id"]: c["state"] for c in board.snapshot()["tables"]}["t-2"] == "online"


def test_changes_are_coalesced_into_one_delta_of_the_changed_tables_only():
    ids = [f"t-{n:03d}" for n in range(500)]
    board = PitBoard("pit7", {t: KEY.public for t in ids})
    woken = []
    board.listeners.append(lambda: woken.append(1))
    for t in ids:
        board.receive(*status(t))
    assert len(woken) == 1  # one wake for everything until the next frame is taken
    assert len(board.take_delta()["tables"]) == 500
    for seq in (1, 2, 3):  # three changes of one table, one of another, before the next tick
        board.receive(*event("t-007", seq))
    board.receive(*event("t-300", 1))
    assert len(woken) == 2
    delta = board.take_delta()
    assert delta["type"] == "delta" and [c["table_id"] for c in delta["tables"]] == ["t-007", "t-300"]
    assert delta["tables"][0]["last_seq"] == 3
    quiet = board.take_delta()
    assert quiet["tables"] == [] and quiet["version"] == delta["version"]


def test_pages_get_the_board_once_then_only_the_tables_that_changed():
    from websockets.asyncio.client import connect

    ids = [f"t-{n:03d}" for n in range(500)]
    board = PitBoard("pit7", {t: KEY.public for t in ids})
    for t in ids:
        board.receive(*status(t))
    server = PitServer(board, "127.0.0.1", 0)

    async def page() -> tuple[dict, dict]:
        async with connect(f"ws://127.0.0.1:{server.port}/api/v1/pit/ws", max_size=None) as ws:
            full = json.loads(await asyncio.wait_for(ws.recv(), 20))
            await asyncio.to_thread(lambda: [board.receive(*event("t-042", s)) for s in (1, 2)])
            while True:  # heartbeats (empty deltas) may come first
                frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
                if frame["tables"]:
                    return full, frame

    try:
        full, delta = asyncio.run(page())
    finally:
        server.close()
    assert full["type"] == "full" and len(full["tables"]) == 500
    assert delta["type"] == "delta" and [c["table_id"] for c in delta["tables"]] == ["t-042"]
    assert delta["tables"][0]["last_seq"] == 2 and delta["tables"][0]["round"]["number"] == 2


@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed (.ci/run installs it)")
def test_two_pit_views_of_one_pit_on_one_broker_both_stay_connected(tmp_path):
    import paho.mqtt.client as mqtt

    broker = Broker(tmp_path / "broker").start()
    boards = [PitBoard("pit7", {"t-1": KEY.public}) for _ in range(2)]
    address = BrokerAddress.parse(f"mqtt://127.0.0.1:{broker.port}")
    views = []
    try:
        views = [PitSubscriber(b, address).start() for b in boards]
        assert views[0].client_id != views[1].client_id
        wait_until(lambda: all(v.connected for v in views), 15, "both pit views connected")
        pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="t-1-test")
        pub.connect("127.0.0.1", broker.port, 5)
        pub.loop_start()
        try:
            for seq in (1, 2, 3):
                pub.publish(*event("t-1", seq), qos=1).wait_for_publish(10)
        finally:
            pub.disconnect()
            pub.loop_stop()
            pub._reset_sockets()
        wait_until(lambda: all(b.snapshot()["tables"][0]["last_seq"] == 3 for b in boards), 15, "both boards")
        # Neither was knocked off by the other (one client id would make them take turns).
        assert [v.connects for v in views] == [1, 1] and all(v.connected for v in views)
    finally:
        for v in views:
            v.close()
        broker.stop()


def test_a_table_gone_quiet_is_sent_as_no_news_while_others_keep_talking():
    now = [1000.0]
    board = PitBoard("pit7", {"t-1": KEY.public, "t-2": KEY.public}, stale_s=30, clock=lambda: now[0])
    board.receive(*status("t-1"))
    board.receive(*status("t-2"))
    assert {c["state"] for c in board.take_delta()["tables"]} == {"online"}
    now[0] += 31
    board.receive(*event("t-2", 1))  # t-2 keeps talking; t-1 has said nothing for 31 s
    board.expire()
    cards = {c["table_id"]: c for c in board.take_delta()["tables"]}
    assert cards["t-1"]["state"] == "no news" and cards["t-2"]["state"] == "online"
    board.expire()
    assert board.take_delta()["tables"] == []  # said once
