"""Idle clients on every front door, then one request (issue 24, row 6).

2,000 idle TCP clients, then one status request: the first answer came after
2.6 s (over 5 s in one run); 1.1 s after 2,000 Unix-socket clients. Two causes:
the listeners' kernel queue held 1,024 connections, so the clients beyond it
(and the status request after them) had their SYN dropped and retried a second
later; and each newcomer past ``max_connections`` scanned every connection to
pick the one to evict (~1 ms each, 2,000 times). The queue now holds 4,096
(``net.core.somaxconn``), the listener drains it in batches, and the victim
is found without a scan. Counts are bounded and on loopback; the wall-time
bound (1 s) is asserted only in the test marked ``alone``.
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
