"""Idle clients on every front door, then one request (issue 24, rows 6 and point 6).

2,000 idle TCP clients, then one status request: the first answer came after
2.6 s (over 5 s in one run); 1.1 s after 2,000 Unix-socket clients. First
causes: the listeners' kernel queue held 1,024 connections (clients beyond it,
and the status request after them, had their SYN dropped and retried a second
later), and each newcomer past ``max_connections`` scanned every connection to
pick the one to evict. With those fixed it was still 1.5 s (web), 2.3 s
(control socket) and 3.0 s (event socket) at load 11: each idle client still
cost a task, a stream or an HTTP protocol before it had sent a byte, and the
request sat behind 2,000 of them in the kernel's queue. A connection is now
parked until it speaks (:class:`table.interfaces.serving.Park`: a descriptor
and a selector entry, the longest parked closed first when the park is full),
so the request behind the flood is reached at once. Counts are bounded and on
loopback; the wall-time bound (1 s) is asserted only in the tests marked
``alone`` (``bench/idle_doors.py`` prints the figures).
"""
from __future__ import annotations

import json
import os
import resource
import socket
import time
import urllib.error
import urllib.request

import pytest

from frontdoor_helpers import SEAT_KEY, RecordingConsole, seat_journal
from idle_helpers import DOORS, DealingTable, idle_clients, raise_descriptor_limit
from table.events import EventLog
from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.dispatch import Dispatcher, EventHub
from table.interfaces.event_socket import EventSocket
from table.interfaces.serving import FrontDoorLoop
from table.interfaces.web import WebFrontDoor

IDLE = 2000


@pytest.fixture
def doors(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * IDLE + 512)), hard))
    console = RecordingConsole()
    front = FrontDoorLoop("test-idle")
    events = EventLog(seat_journal(tmp_path / "journal.sqlite3"), "t-idle", key=SEAT_KEY).start()
    hub = EventHub(events, front)
    dispatcher = Dispatcher(console, front, hub=hub)
    web = WebFrontDoor("127.0.0.1", 0, dispatcher, None, front)
    ctl = ControlSocket(tmp_path / "control.sock", console, front=front, dispatcher=dispatcher)
    evs = EventSocket(tmp_path / "events.sock", events, front=front, hub=hub)
    try:
        yield {"web": web, "control": ctl, "events": evs}
    finally:
        evs.close()
        ctl.close()
        web.close()
        hub.close()
        front.close()
        events.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _idle_clients(door, which: str) -> list[socket.socket]:
    out = []
    for _ in range(IDLE):
        if which == "web":
            s = socket.create_connection(door.address, timeout=30)
        else:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(30)
            s.connect(str(door.path))
        out.append(s)
    return out


def _ask(door, which: str) -> dict:
    """One request on a fresh connection, as a person's screen or tool would send it."""
    if which == "web":
        try:
            with urllib.request.urlopen(door.url + "/api/v1/status", timeout=60) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # no sign-in in this test: 401 is the answer
            return json.loads(exc.read())
    if which == "control":
        return send(door.path, {"action": "status"}, timeout_s=60)
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(60)
        s.connect(str(door.path))
        f = s.makefile("rwb")
        f.write(b'{"resume_from": 0}\n')
        f.flush()
        return json.loads(f.readline())


@pytest.mark.parametrize("which", ["web", "control", "events"])
def test_after_2000_idle_clients_a_request_is_answered(doors, which):
    door = doors[which]
    idle = _idle_clients(door, which)
    try:
        reply = _ask(door, which)
        assert reply.get("type") == "hello" or "ok" in reply or "code" in reply, reply
        assert door.guard.counts["evicted"] >= IDLE - door.guard.max_connections
    finally:
        for s in idle:
            s.close()


@pytest.mark.alone
@pytest.mark.parametrize("which", ["web", "control", "events"])
def test_after_2000_idle_clients_a_request_is_answered_within_1_s(doors, which):
    door = doors[which]
    idle = _idle_clients(door, which)
    try:
        t0 = time.monotonic()
        _ask(door, which)
        took = time.monotonic() - t0
        assert took < 1.0, f"{which}: answered {took:.2f} s after {IDLE} idle clients"
    finally:
        for s in idle:
            s.close()


@pytest.fixture
def dealing(tmp_path):
    """A table dealing round after round (its own process), and a list for the idle
    clients the test opens on its doors (closed at the end)."""
    before = raise_descriptor_limit(len(DOORS) * IDLE + 512)
    table = DealingTable(tmp_path)
    held: list = []
    try:
        yield table, held
    finally:
        for s in held:
            s.close()
        table.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


def _flood_then_ask(table: DealingTable, held: list) -> dict[str, float]:
    """On each door in turn: 2,000 idle clients, then at once one status request (the
    web's: a signed-in supervisor's); the idle clients stay. Seconds to each answer."""
    took = {}
    for door in DOORS:
        held += idle_clients(table, door, IDLE)
        reply, took[door] = table.ask(door)  # the event socket's answer is its hello (checked there)
        assert "rounds_played" in reply if door != "events" else reply["head_seq"] >= 0, (door, reply)
    return took


def _deals_on(table: DealingTable, rounds: int = 3) -> None:
    start = table.rounds_played()
    deadline = time.monotonic() + 60
    while table.rounds_played() < start + rounds:
        assert time.monotonic() < deadline, f"the table dealt {table.rounds_played() - start} round(s) in 60 s"
        time.sleep(0.05)


def test_a_dealing_table_with_2000_idle_clients_on_each_door_answers_and_deals_on(dealing):
    table, held = dealing
    _flood_then_ask(table, held)
    _deals_on(table)  # with 6,000 idle clients on its doors


@pytest.mark.alone
def test_a_dealing_table_with_2000_idle_clients_on_each_door_answers_within_1_s(dealing):
    table, held = dealing
    took = _flood_then_ask(table, held)
    assert all(t < 1.0 for t in took.values()), took
    _deals_on(table)


def test_silent_clients_are_closed_oldest_first_and_after_the_idle_timeout(tmp_path):
    """The park's bounds: a newcomer to a full park closes the client parked longest,
    the others wait, one that speaks is served; a silent client is closed after
    ``idle_timeout_s``."""
    console = RecordingConsole()
    ctl = ControlSocket(tmp_path / "c.sock", console, max_connections=4, idle_timeout_s=3.0)
    clients = []
    try:
        for _ in range(5):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(str(ctl.path))
            clients.append(s)
        assert clients[0].recv(1) == b""  # closed by the table: the longest parked
        clients[4].sendall(b'{"id": 1, "action": "status"}\n')
        assert json.loads(clients[4].makefile("rb").readline())["ok"] is True
        clients[1].sendall(b'{"id": 2, "action": "status"}\n')  # parked, not closed: served when it speaks
        assert json.loads(clients[1].makefile("rb").readline())["ok"] is True
        assert clients[2].recv(1) == b""  # silent: closed at its idle timeout
        assert ctl.guard.counts["evicted"] == 1 and ctl.guard.counts["idle"] >= 1
    finally:
        for s in clients:
            s.close()
        ctl.close()
