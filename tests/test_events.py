"""The public event stream (issue 9): derived from the journal, consecutive seq, resumable
over the Unix socket (also across a controller restart), valid against docs/schemas,
and sealed (58 Pa. Code 816a.1) on the table-wide stream and on a seat's channel."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from event_checks import assert_gapless, assert_sealed, assert_valid, validator
from hil_helpers import CLI

from table.api import CardDealt, CommandRefused, DealerRevealed, Event, Sealed, Table, event_from_dict
from table.config import DevicesConfig, DeviceConfig, JournalSection, TableConfig, TableSection
from table.interfaces.event_socket import read_events
from table.events import EventLog, EventStreamError


def config(tmp_path: Path, seats: int = 3, table_id: str = "pit1-tcp-01") -> TableConfig:
    return TableConfig(TableSection(table_id, seats),
                       DevicesConfig(DeviceConfig("/dev/threecard/shuffler"), DeviceConfig("/dev/threecard/shoe")),
                       journal=JournalSection(tmp_path / "journal.sqlite3"))


def _socket_request(path: Path, request: bytes) -> list[dict]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(path))
        s.sendall(request)
        with s.makefile("rb") as f:
            return [json.loads(f.readline())]


def test_live_replay_resume_schema_and_sealing(tmp_path):
    sock = tmp_path / "events.sock"
    live: list[dict] = []
    seat2: list[Event] = []
    with Table(config(tmp_path), simulate=True, seed=11, rounds=4, event_socket=sock) as t:
        stop = threading.Event()
        reader = threading.Thread(target=lambda: live.extend(read_events(sock, since=0, stop=stop)), daemon=True)
        reader.start()
        t.subscribe(CardDealt, seat2.append, seat=2, since=0)
        revealed: list[Event] = []
        t.subscribe(DealerRevealed, revealed.append)
        # A consumer that drops after 10 events and comes back with resume_from.
        first = []
        for ev in read_events(sock, since=0):
            first.append(ev)
            if len(first) == 10:
                break
        t.wait(60)
        head = t.head_seq
        resumed = list(read_events(sock, since=first[-1]["seq"], follow=False))
        deadline = time.monotonic() + 10
        while (not live or live[-1]["seq"] < head) and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()
        hello = _socket_request(sock, b'{"resume_from": 3}\n')
        bad = [_socket_request(sock, b'{"resume_from": 999999}\n'), _socket_request(sock, b'[1]\n'),
               _socket_request(sock, b'{"seat": 9}\n')]
        with EventLog(t.journal_path, t.table_id, key=t.controller.journal.key) as log:
            replayed = list(log.replay(0))
            seat2_replayed = list(log.replay(0, seat=2))
    reader.join(5)

    # table_opened and its checkpoint; per round 2 + 12 cards + 4, its shuffle opened, and the signed
    # checkpoint at its close; and each deck's commitment at its count (SPEC 4.2.1), two before the first round
    commitments = sum(e["type"] == "shuffle_committed" for e in replayed)
    assert commitments >= 2 + 3
    assert head == len(replayed) == 2 + 4 * 20 + commitments
    assert live == replayed  # live == replay, byte for byte
    assert first + resumed == replayed  # reconnect with resume_from: nothing missing or repeated
    assert_gapless(live)
    assert_valid(live)
    assert_valid(seat2_replayed)
    assert_sealed(live)
    assert_sealed(seat2_replayed, seat=2)
    assert {e["table_id"] for e in live} == {"pit1-tcp-01"}
    assert all(e["round_id"] for e in live if e["type"] not in ("table_opened", "checkpoint", "shuffle_committed"))
    # The seat's channel has its own cards as they are dealt, nobody else's.
    mine = [e for e in seat2 if e.seat == 2]
    assert len(mine) == 12 and all(e.card for e in mine)
    assert all(e.card is None for e in seat2 if e.seat != 2)
    assert len(revealed) == 4 and all(len(e.dealer_hand) == 3 for e in revealed)
    # The socket's hello and error lines follow their schema.
    assert hello[0]["type"] == "hello" and hello[0]["resume_from"] == 3
    assert_valid(hello + [b[0] for b in bad], "hello-v1.schema.json")
    assert [b[0]["type"] for b in bad] == ["error"] * 3


def test_event_from_dict_round_trip(tmp_path):
    with Table(config(tmp_path, seats=1), simulate=True, seed=5, rounds=1) as t:
        t.wait(30)
        t.events.wait_for(t.events.head, 5)
        events = [event_from_dict(d) for d in t.events.replay(0)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [type(e).__name__ for e in events if e.TYPE not in ("checkpoint", "shuffle_committed")][:3] == [
        "TableOpened", "RoundOpened", "BetsClosed"]
    assert all(e.ts.tzinfo is not None and e.table_id == "pit1-tcp-01" for e in events)


def _wait_for(events: list, etype: str, n: int = 1, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(e.TYPE == etype for e in events) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum(e.TYPE == etype for e in events) >= n, f"no {etype} within {timeout_s} s"


def test_api_commands_views_and_errors(tmp_path):
    with Table(config(tmp_path, seats=2), simulate=True, seed=3, rounds=None, auto_dealer=False) as t:
        got: list[Event] = []
        t.subscribe(None, got.append, since=0)
        _wait_for(got, "round_opened")  # the round waits for the dealer to close bets
        with pytest.raises(Sealed):
            t.dealer_hand()
        assert t.seat_view(1).dealer_hand is None and t.seat_view(1).cards == ()
        t.close_bets()
        _wait_for(got, "round_settled")  # then it waits for the dealer's collect
        view = t.seat_view(1)
        assert view.seat == 1 and len(view.cards) == 3 and view.dealer_hand is not None
        assert len(t.dealer_hand()) == 3
        assert [str(c) for c in view.dealer_hand] == t.dealer_hand()
        # The table waits for the collect, never for a deck: the command waits its timeout
        # for the table to ask, then is refused (1 s here; the default is 30 s).
        with pytest.raises(CommandRefused, match="not expected now"):
            t.register_deck("C", "S-1", timeout_s=1)
        t.confirm_collect()
        status = t.status()
        assert status["table_id"] == "pit1-tcp-01" and status["head_seq"] >= 9
        with pytest.raises(ValueError):
            t.subscribe("no_such_event", got.append)
        with pytest.raises(EventStreamError):
            t.subscribe(None, got.append, since=10**6)
        _wait_for(got, "round_opened", 2)
        t.close_bets()  # deal the second round, stop after it
        t._stop.set()
        t.confirm_collect()
    assert [e.seq for e in got] == list(range(1, len(got) + 1))
    assert_sealed([_as_dict(e) for e in got])


def _as_dict(e: Event) -> dict:
    import dataclasses

    d = dataclasses.asdict(e)
    head = {k: d.pop(k) for k in ("seq", "journal_seq", "table_id", "round_id", "ts")}
    if d.get("card", "") is None:
        del d["card"]
    return {**head, "ts": head["ts"].isoformat(), "type": e.TYPE, "data": d}


#: enough rounds that a consumer joining each controller live finds it still dealing
FIRST_ROUNDS, SECOND_ROUNDS = 100, 40


@pytest.mark.long  # two controllers dealing 140 rounds: ~24 s, minutes on a loaded machine
def test_restart_consumer_resumes_from_journal_without_gaps(tmp_path):
    """Two controller processes in a row on one journal (the table outlives them); one
    consumer following the socket throughout, and `tablectl events tail`."""
    dealer, dev = tmp_path / "dealer.sock", tmp_path / "dev"
    journal, sock = tmp_path / "journal.sqlite3", tmp_path / "events.sock"
    sim = subprocess.Popen(CLI + ["simulate-table", "--link-dir", str(dev), "--dealer-socket", str(dealer),
                                  "--seed", "9"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    got: list[dict] = []
    stop = threading.Event()
    reader = tail3 = None
    try:
        assert sim.stdout.readline().startswith("ready")
        run = CLI + ["run", "--shuffler-url", str(dev / "shuffler"), "--shoe-url", str(dev / "shoe"),
                     "--dealer-socket", str(dealer), "--journal", str(journal), "--event-socket", str(sock),
                     "--seats", "2", "--rounds", "2", "--log-file", str(tmp_path / "run.log")]
        # `events tail --count 3` on the socket without --since waits for the next three
        # events, reconnecting until a controller is there. Started before the first
        # controller and collected after the second: it waited for the first alone, and
        # on a loaded machine it joined after the first had dealt its rounds and waited
        # for ever (the second started only after it). Now it takes its three events
        # from whichever controller it joins.
        tail3 = subprocess.Popen(CLI + ["events", "tail", "--socket", str(sock), "--count", "3"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = subprocess.Popen(run[:-4] + ["--rounds", str(FIRST_ROUNDS)] + run[-2:],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # a following reader connects once the socket is there (it retries until then)
        reader = threading.Thread(target=lambda: got.extend(read_events(sock, since=0, stop=stop, retry_s=0.1)),
                                  daemon=True)
        reader.start()
        assert first.wait() == 0, first.stderr.read()
        first.stderr.close()
        n_first = len(got)
        second = subprocess.Popen(run[:-4] + ["--rounds", str(SECOND_ROUNDS)] + run[-2:],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert second.wait() == 0, second.stderr.read()
        second.stderr.close()
        out3, err3 = tail3.communicate()
        assert tail3.returncode == 0, err3
        seqs = [json.loads(x)["seq"] for x in out3.splitlines()]
        assert len(seqs) == 3 and seqs == list(range(seqs[0], seqs[0] + 3))
    finally:
        stop.set()
        if tail3 is not None and tail3.poll() is None:  # an assertion above failed
            tail3.kill()
            tail3.communicate()
        if reader is not None:
            reader.join(10)
        sim.send_signal(signal.SIGTERM)
        sim.wait(10)
        sim.stdout.close()
    tail = subprocess.run(CLI + ["events", "tail", "--journal", str(journal), "--since", "0"],
                          capture_output=True, text=True, timeout=60)
    assert tail.returncode == 0, tail.stderr
    from_journal = [json.loads(line) for line in tail.stdout.splitlines()]
    # Every event once, in order, though the controller went away and came back.
    assert got == from_journal[:len(got)]
    # the last round_closed and its checkpoint (one transaction) may land after the exit
    assert len(got) >= len(from_journal) - 2 and n_first < len(got)
    assert_gapless(from_journal)
    assert_valid(from_journal)
    assert_sealed(from_journal)
    types = [e["type"] for e in from_journal]
    assert types.count("round_closed") == FIRST_ROUNDS + SECOND_ROUNDS and "table_restarted" in types
    since = subprocess.run(CLI + ["events", "tail", "--journal", str(journal), "--since", "5", "--count", "3"],
                           capture_output=True, text=True, timeout=60)
    assert [json.loads(x)["seq"] for x in since.stdout.splitlines()] == [6, 7, 8]


def test_a_following_reader_rides_through_a_connection_closed_before_its_hello(tmp_path):
    """A controller stopping as a consumer connects closes the connection before its hello:
    a following reader takes that as a drop (reconnects and resumes), as it does a refused
    connection; it ended with ConnectionError("no hello"), and the consumer missed the
    next controller's events (seen under load in the restart test above)."""
    path = tmp_path / "events.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    asked: list[dict] = []

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with conn, conn.makefile("rb") as f:
                f.readline()  # the stopping controller reads the request, and closes without a hello
            conn, _ = server.accept()
            with conn, conn.makefile("rwb") as f:
                asked.append(json.loads(f.readline()))
                f.write(b'{"type": "hello", "resume_from": 4, "head_seq": 5}\n{"type": "event", "seq": 5}\n')
                f.flush()

    t = threading.Thread(target=serve)
    t.start()
    stop = threading.Event()
    try:
        for msg in read_events(path, since=4, stop=stop, retry_s=0.01, timeout_s=30):
            assert msg["seq"] == 5
            stop.set()
            break
    finally:
        t.join(30)
    assert asked == [{"resume_from": 4, "seat": None}]


def test_tail_usage_and_unreadable_sources(tmp_path):
    r = subprocess.run(CLI + ["events", "tail"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--socket" in r.stderr
    r = subprocess.run(CLI + ["events", "tail", "--socket", str(tmp_path / "none.sock")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot read the event socket" in r.stderr
    (tmp_path / "not-a-journal").write_text("hello")
    r = subprocess.run(CLI + ["events", "tail", "--journal", str(tmp_path / "not-a-journal")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not a readable journal" in r.stderr


def test_schema_files_are_valid_json_schema():
    for name in ("event-v1.schema.json", "hello-v1.schema.json", "request-v1.schema.json", "status-v1.schema.json"):
        validator(name)


def test_a_notify_while_the_pump_reads_is_not_lost(tmp_path, monkeypatch):
    """The controller's notify can come while the event log is reading the journal;
    the pump must look again at once, not sleep poll_s first (issue 18: a card read
    reaches the socket in milliseconds). Here poll_s is an hour: only the notify can
    bring the events out."""
    with Table(config(tmp_path), simulate=True, seed=3, rounds=1) as t:
        t.wait(60)
    log = EventLog(tmp_path / "journal.sqlite3", "pit1-tcp-01", poll_s=3600)
    real_poll = log.poll
    calls = []

    def poll_racing_a_write():
        calls.append(1)
        if len(calls) == 1:
            log.notify()  # a new entry was journaled while this look was under way
            return 0
        return real_poll()

    monkeypatch.setattr(log, "poll", poll_racing_a_write)
    log.start()
    try:
        deadline = time.monotonic() + 10
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) >= 2, "the notify that came during a read was lost: the pump slept poll_s"
        assert log.head > 0
    finally:
        log.close()


def test_the_live_stream_is_the_journal_in_order_fed_from_memory(tmp_path, monkeypatch):
    """Issue 26, point 2: in the controller's process the stream is fed each entry the
    journal commits, from memory. Its events are the journal's publishable entries, one
    for one and in order (batches and single commits alike, a checkpoint included), and
    equal what a replay from the file gives; while the table writes, the stream runs no
    SQL on the file at all (its read-only connections are traced from the start)."""
    import sqlite3

    from table.journal import Journal
    from table.keys import generate

    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced_connect(database, *args, **kwargs):
        db = real_connect(database, *args, **kwargs)
        if "mode=ro" in str(database):  # a reader's connection: the stream's, never the writer's
            db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    key = generate()
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path, key=key, table_id="t-mem")
    journal.append("table_open", places={"A": "verified", "B": "off_table"})
    log = EventLog(path, "t-mem", key=key, journal=journal).start()
    sub = log.subscribe()  # from the head on: nothing to replay
    assert statements, "the stream indexes the file when it starts"
    indexed = len(statements)
    rid = "r00001-0000abcd"
    with journal.batch():
        journal.append("round", round_id=rid, step="open", number=1, wagers={"1": {"ante": 500}})
        journal.append("device_event", source="shoe", seq=1)  # not published
    for i in range(6):  # card reads one commit each, then a batch of them
        journal.append("card_read", round_id=rid, deck_id="A", to=i % 2, draw_index=i, back_colour="red")
    with journal.batch():
        for i in range(6, 9):
            journal.append("card_read", round_id=rid, deck_id="A", to=1, draw_index=i, back_colour="red")
        journal.append("round", round_id=rid, step="closed", number=1)
        journal.checkpoint(rounds_opened=1)
    try:
        with pytest.raises(RuntimeError):  # rolled back: never on the stream
            with journal.batch():
                journal.append("card_read", round_id=rid, deck_id="A", to=1, draw_index=99, back_colour="red")
                raise RuntimeError("the step failed")
        head = log.catch_up()
        live = []
        while len(live) < head - 1:
            ev = sub.get(timeout=10)
            assert ev is not None, f"the stream stopped at {live[-1]['seq'] if live else 0} of {head}"
            live.append(ev)
        assert statements[indexed:] == [], "the live stream read the journal file back"
        public = [e.seq for e in journal.entries() if e.kind != "device_event"]
        assert [e["journal_seq"] for e in live] == public[1:]
        assert [e["seq"] for e in live] == list(range(2, head + 1))
        assert live == list(log.replay(1))  # the file, read back now, says the same
    finally:
        log.close()
        journal.close()
