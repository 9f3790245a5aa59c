"""HTTP + WebSocket: 401 without a session, sign-in with an Argon2id PIN, lock-out, expiry,
roles (a dealer cannot void, register a deck or enter a card), seat terminals get only their
own seat, cross-site requests refused, bounded bodies, the OpenAPI document, static pages."""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request

import argon2
import pytest
from frontdoor_helpers import SEAT_KEY, RecordingConsole, seat_journal
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from table.events import EventLog
from table.interfaces.auth import Authenticator, PeopleFile, PinHasher
from table.interfaces.dispatch import Dispatcher, EventHub
from table.interfaces.serving import FrontDoorLoop
from table.interfaces.web import WebFrontDoor
from table.roles import Role

CHEAP = PinHasher(argon2.PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1))
PINS = {"D-1": "482913", "S-1": "739201", "S-2": "615048", "seat-1": "907312", "P-1": "550917"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def web(tmp_path):
    os.chmod(tmp_path, 0o700)
    people = PeopleFile(tmp_path / "people.toml")
    people.add("D-1", Role.DEALER, PINS["D-1"], hasher=CHEAP)
    people.add("S-1", Role.SUPERVISOR, PINS["S-1"], hasher=CHEAP)
    people.add("S-2", Role.SUPERVISOR, PINS["S-2"], hasher=CHEAP)
    people.add("seat-1", Role.SEAT, PINS["seat-1"], seat=1, hasher=CHEAP)
    people.add("P-1", Role.PIT, PINS["P-1"], hasher=CHEAP)
    clock = Clock()
    console = RecordingConsole()
    front = FrontDoorLoop("test-web")
    events = EventLog(seat_journal(tmp_path / "journal.sqlite3"), "t-web", key=SEAT_KEY).start()
    hub = EventHub(events, front)
    auth = Authenticator(tmp_path / "people.toml", hasher=CHEAP, session_idle_s=60, session_ttl_s=600,
                         max_failures=3, lockout_s=30, clock=clock)
    door = WebFrontDoor("127.0.0.1", 0, Dispatcher(console, front, hub=hub), auth, front)
    door.console, door.clock, door.people = console, clock, people  # for the tests
    try:
        yield door
    finally:
        door.close()
        hub.close()
        front.close()
        events.close()


def call(door, method, path, body=None, token=None, headers=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    h = {"content-type": "application/json", **(headers or {})}
    if token:
        h["authorization"] = f"Bearer {token}"
    req = urllib.request.Request(door.url + path, method=method, data=data, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), exc.headers


def sign_in(door, person):
    status, body, headers = call(door, "POST", "/api/v1/session", {"person": person, "pin": PINS[person]})
    assert status == 200, body
    return body["token"]


def ws_url(door):
    return door.url.replace("http://", "ws://") + "/api/v1/ws"


def test_unauthenticated_requests_get_401(web):
    for method, path, body in [("GET", "/api/v1/status", None), ("GET", "/api/v1/events", None),
                               ("GET", "/api/v1/session", None),
                               ("POST", "/api/v1/commands", {"id": 1, "action": "status"}),
                               ("POST", "/api/v1/commands/void", {"reason": "x"})]:
        for token in (None, "not-a-token"):
            status, reply, headers = call(web, method, path, body, token=token)
            assert status == 401 and reply["code"] == "unauthenticated", (path, reply)
            assert headers["www-authenticate"].startswith("Bearer")
    for extra in ({}, {"additional_headers": {"authorization": "Bearer nope"}}):
        with pytest.raises(InvalidStatus) as exc:
            connect(ws_url(web), **extra)
        assert exc.value.response.status_code == 401
    assert web.console.seen == []


def test_sign_in_wrong_pin_is_refused_and_repeated_failures_lock_the_person_out(web):
    for _ in range(3):
        status, reply, _ = call(web, "POST", "/api/v1/session", {"person": "S-1", "pin": "000000"})
        assert status == 401 and reply["error"] == "unknown person or wrong PIN"
    status, reply, headers = call(web, "POST", "/api/v1/session", {"person": "S-1", "pin": PINS["S-1"]})
    assert status == 429 and reply["code"] == "locked" and int(headers["retry-after"]) >= 1  # even the right PIN
    status, reply, _ = call(web, "POST", "/api/v1/session", {"person": "nobody-here", "pin": "123457"})
    assert status == 401 and reply["error"] == "unknown person or wrong PIN"  # the same words: no oracle
    web.clock.now += 31
    assert sign_in(web, "S-1")


def test_a_signed_in_dealer_cannot_void_register_a_deck_or_enter_a_card(web):
    token = sign_in(web, "D-1")
    for action, args in [("void", {"reason": "misdeal"}), ("register_deck", {"deck_id": "A2"}),
                         ("confirm_card", {"card": "Qs"}), ("release_hold", {}), ("acknowledge_incident", {})]:
        status, reply, _ = call(web, "POST", f"/api/v1/commands/{action}", args, token=token)
        assert status == 403 and reply["code"] == "forbidden", reply
        status, reply, _ = call(web, "POST", "/api/v1/commands", {"id": action, "action": action, **args}, token=token)
        assert status == 403 and reply["id"] == action
    with connect(ws_url(web), additional_headers={"authorization": f"Bearer {token}"}) as ws:
        ws.send(json.dumps({"id": "w1", "action": "void", "reason": "misdeal", "supervisor": "D-1"}))
        reply = json.loads(ws.recv(10))
    assert reply == {"id": "w1", "ok": False, "code": "forbidden",
                     "error": "void is for supervisor; D-1 is signed in as dealer"}
    status, reply, _ = call(web, "POST", "/api/v1/commands/close_bets", {"id": 5}, token=token)
    assert status == 409 and reply["id"] == 5 and "not expected now" in reply["error"]  # the core's answer
    assert [(c.action, c.actor.person, c.actor.role, c.actor.source) for c in web.console.seen] == [
        ("close_bets", "D-1", Role.DEALER, "http")]


def test_a_supervisor_acts_as_the_person_signed_in(web):
    token = sign_in(web, "S-1")
    status, reply, _ = call(web, "POST", "/api/v1/commands/void", {"id": "v1", "reason": "foreign card"}, token=token)
    assert status == 409 and reply["id"] == "v1"
    status, reply, _ = call(web, "POST", "/api/v1/commands/void", {"reason": "x", "supervisor": "S-2"}, token=token)
    assert status == 403 and "signed in as S-1" in reply["error"]  # nobody signs for another supervisor
    assert [(c.action, c.args, c.actor.person, c.request_id) for c in web.console.seen] == [
        ("void", {"reason": "foreign card", "supervisor": "S-1"}, "S-1", "v1")]
    status, reply, _ = call(web, "GET", "/api/v1/status", token=token)
    assert status == 200 and reply["rounds_played"] == 7


def test_sessions_expire_when_idle_and_end_when_the_person_is_removed(web):
    token = sign_in(web, "S-1")
    assert call(web, "GET", "/api/v1/session", token=token)[0] == 200
    web.clock.now += 61  # idle longer than session_idle_s
    assert call(web, "GET", "/api/v1/status", token=token)[0] == 401
    token = sign_in(web, "P-1")
    assert call(web, "GET", "/api/v1/status", token=token)[0] == 200
    assert web.people.remove("P-1")
    assert call(web, "GET", "/api/v1/status", token=token)[0] == 401
    token = sign_in(web, "S-2")
    assert call(web, "DELETE", "/api/v1/session", token=token)[0] == 200
    assert call(web, "GET", "/api/v1/status", token=token)[0] == 401


def test_a_seat_terminal_receives_only_its_own_seat(web):
    token = sign_in(web, "seat-1")
    with connect(ws_url(web), additional_headers={"authorization": f"Bearer {token}"}) as ws:
        ws.send(json.dumps({"id": 1, "action": "subscribe", "resume_from": 0, "seat": 2}))
        refused = json.loads(ws.recv(10))
        ws.send(json.dumps({"id": 2, "action": "subscribe", "resume_from": 0}))
        hello = json.loads(ws.recv(10))
        pushed = [json.loads(ws.recv(10)) for _ in range(8)]
    assert refused["id"] == 1 and refused["code"] == "forbidden" and "only for seat 2's terminal" in refused["error"]
    assert hello["id"] == 2 and hello["subscribed"]["seat"] == 1
    assert [e["seq"] for e in pushed] == list(range(1, 9))
    cards = [e["data"].get("card") for e in pushed if e["type"] == "card_dealt"]
    assert cards == ["As", None, None, "Ah", None]
    status, reply, _ = call(web, "GET", "/api/v1/events?after=0&seat=2", token=token)
    assert status == 403
    status, reply, _ = call(web, "GET", "/api/v1/events?after=0", token=token)
    assert status == 200 and reply["seat"] == 1 and [e["data"].get("card") for e in reply["events"]
                                                     if e["type"] == "card_dealt"] == cards
    staff = sign_in(web, "S-1")
    status, reply, _ = call(web, "GET", "/api/v1/events?after=0&seat=1", token=staff)
    assert status == 403 and "table-wide" in reply["error"]
    status, reply, _ = call(web, "GET", "/api/v1/events?after=0", token=staff)
    assert all("card" not in e["data"] for e in reply["events"] if e["type"] == "card_dealt")


def test_cross_site_requests_and_oversized_bodies_are_refused(web):
    token = sign_in(web, "S-1")
    status, reply, _ = call(web, "POST", "/api/v1/commands/void", {"reason": "x"}, token=token,
                            headers={"origin": "http://evil.example"})
    assert status == 403 and "cross-site" in reply["error"]
    with pytest.raises(InvalidStatus) as exc:
        connect(ws_url(web), additional_headers={"authorization": f"Bearer {token}"}, origin="http://evil.example")
    assert exc.value.response.status_code == 403
    status, reply, _ = call(web, "POST", "/api/v1/commands", b'{"action": "void", "reason": "' + b"x" * 100_000 + b'"}',
                            token=token)
    assert status == 413 and reply["code"] == "too_large"
    assert web.console.seen == []


def test_openapi_and_static_pages_are_served(web):
    status, doc, _ = call(web, "GET", "/api/v1/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    assert "/api/v1/commands/void" in doc["paths"] and "/api/v1/session" in doc["paths"]
    with urllib.request.urlopen(web.url + "/", timeout=10) as resp:
        assert resp.status == 200 and b"openapi.json" in resp.read()
        assert "frame-ancestors 'none'" in resp.headers["content-security-policy"]


def test_idle_http_connections_do_not_lock_out_a_client(web):
    idle = []
    try:
        for _ in range(web.max_connections + 50):
            idle.append(socket.create_connection(web.address))
        token = sign_in(web, "S-1")
        assert call(web, "GET", "/api/v1/status", token=token)[0] == 200
        assert web.guard.counts["evicted"] >= 50
    finally:
        for s in idle:
            s.close()
