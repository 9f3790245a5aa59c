"""The Unix control and event sockets: roles from the peer's real credentials (SO_PEERCRED,
child processes that drop to another account), one reply per request naming its id, seat
channels only for their seat's terminal, and the bounds (idle clients, malformed lines,
a 100 MB line, descriptor exhaustion) after which the console still answers at once."""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
import structlog
from frontdoor_helpers import (NOBODY, RecordingConsole, control_requests, event_request, group_id, run_as,
                               seat_journal, SEAT_KEY)

from console_helpers import CHEAP, PEOPLE, make_people

from table.events import EventLog
from table.interfaces.auth import Authenticator
from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.dispatch import EventHub
from table.interfaces.event_socket import EventSocket
from table.interfaces.peers import LocalRoles
from table.interfaces.serving import FrontDoorLoop
from table.interfaces.terminal import pin_checker
from table.roles import Actor, Role

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start clients as other accounts")

# Groups that exist on any Debian system; the test config maps them to roles.
ACCESS, DEALERS, SUPERVISORS, SEAT1, SEAT2 = "users", "audio", "video", "floppy", "cdrom"


def roles() -> LocalRoles:
    return LocalRoles({Role.DEALER: [DEALERS], Role.SUPERVISOR: [SUPERVISORS]}, seats=[SEAT1, SEAT2])


@pytest.fixture
def doors():
    tmp_path = Path(tempfile.mkdtemp(prefix="threecard-doors-"))  # pytest's tmp_path is closed to other accounts
    os.chmod(tmp_path, 0o755)
    console = RecordingConsole()
    front = FrontDoorLoop("test-doors")
    events = EventLog(seat_journal(tmp_path / "journal.sqlite3"), "t-unix", key=SEAT_KEY).start()
    hub = EventHub(events, front)
    os.chmod(tmp_path, 0o700)
    make_people(tmp_path / "people.toml")
    os.chmod(tmp_path, 0o755)
    prove = pin_checker(Authenticator(tmp_path / "people.toml", hasher=CHEAP), source="control-socket",
                        origin="other")
    ctl = ControlSocket(tmp_path / "control.sock", console, front=front, roles=roles(), hub=hub,
                        socket_group=ACCESS, prove=prove)
    evs = EventSocket(tmp_path / "events.sock", events, front=front, hub=hub, roles=roles(), socket_group=ACCESS)
    try:
        yield console, ctl, evs
    finally:
        evs.close()
        ctl.close()
        hub.close()
        front.close()
        events.close()
        shutil.rmtree(tmp_path, ignore_errors=True)


PROOF = {"supervisor": "S-17", "pin": PEOPLE["S-17"][1]}  # a person of the people file, proved (issue 24)
SUPERVISOR_ACTIONS = [
    {"id": "v", "action": "void", "reason": "misdeal", **PROOF},
    {"id": "r", "action": "register_deck", "deck_id": "A2", **PROOF},
    {"id": "m", "action": "confirm_card", "card": "Qs", **PROOF},
]


@root_only
def test_a_dealer_account_cannot_void_register_a_deck_or_enter_a_card(doors):
    console, ctl, _ = doors
    replies = run_as(NOBODY, [group_id(ACCESS), group_id(DEALERS)], control_requests(ctl.path, [
        *SUPERVISOR_ACTIONS, {"id": "c", "action": "close_bets"}, {"id": "w", "action": "whoami"}]))
    assert [r["id"] for r in replies] == ["v", "r", "m", "c", "w"]
    assert all(r["ok"] is False and r["code"] == "forbidden" for r in replies[:3])
    assert "void is for supervisor" in replies[0]["error"]
    assert replies[4]["role"] == "dealer" and replies[4]["person"] == "nobody"
    # Only close_bets reached the table, with the dealer's account as its actor.
    assert [(c.action, c.actor.role, c.actor.person, c.request_id) for c in console.seen] == [
        ("close_bets", Role.DEALER, "nobody", "c")]
    assert replies[3]["ok"] is False and "not expected now" in replies[3]["error"]  # the core's own answer


@root_only
def test_a_supervisor_account_reaches_the_table_with_its_actor(doors):
    console, ctl, _ = doors
    replies = run_as(NOBODY, [group_id(ACCESS), group_id(SUPERVISORS)], control_requests(ctl.path, [
        *SUPERVISOR_ACTIONS, {"id": 9, "action": "void", "reason": "misdeal"}]))
    assert [r["id"] for r in replies] == ["v", "r", "m", 9]
    assert all("not expected now" in r["error"] for r in replies[:3])  # passed through from the core
    assert [c.action for c in console.seen] == ["void", "register_deck", "confirm_card"]
    assert {c.actor for c in console.seen} == {Actor("S-17", Role.SUPERVISOR, source="control-socket")}
    # Without naming and proving a person: an account is not a person (issue 24).
    assert replies[3]["code"] == "forbidden" and "PIN" in replies[3]["error"]


@root_only
def test_an_account_without_a_role_is_refused(doors):
    console, ctl, evs = doors
    replies = run_as(NOBODY, [group_id(ACCESS)], control_requests(ctl.path, [{"id": 1, "action": "status"}]))
    assert replies[0]["code"] == "unauthenticated" and "no role" in replies[0]["error"]
    lines = run_as(NOBODY, [group_id(ACCESS)], event_request(evs.path, {"resume_from": 0}, 2))
    assert lines[0]["type"] == "error" and "no role" in lines[0]["error"] and len(lines) == 1
    assert console.seen == []


@root_only
def test_a_seat_terminal_gets_only_its_own_seat(doors):
    _, _, evs = doors
    seat1 = [group_id(ACCESS), group_id(SEAT1)]
    own = run_as(NOBODY, seat1, event_request(evs.path, {"resume_from": 0}, 9))
    hello, events = own[0], own[1:]
    assert hello["type"] == "hello" and hello["seat"] == 1  # asked for none: its own seat's channel
    dealt = [e["data"] for e in events if e["type"] == "card_dealt"]
    assert [d.get("card") for d in dealt] == ["As", None, None, "Ah", None]  # its own cards, nobody else's
    asked_own = run_as(NOBODY, seat1, event_request(evs.path, {"resume_from": 0, "seat": 1}, 1))
    assert asked_own[0]["type"] == "hello" and asked_own[0]["seat"] == 1
    other = run_as(NOBODY, seat1, event_request(evs.path, {"resume_from": 0, "seat": 2}, 2))
    assert other == [{"type": "error", "error": other[0]["error"]}] and "only for seat 2's terminal" in other[0]["error"]
    # The same rule over the control socket's subscribe.
    sub = run_as(NOBODY, seat1, control_requests(evs.path.with_name("control.sock"), [
        {"id": 1, "action": "subscribe", "resume_from": 0, "seat": 2}]))
    assert sub[0]["code"] == "forbidden"


@root_only
def test_a_seat_channel_is_refused_to_staff(doors):
    _, ctl, evs = doors
    staff = [group_id(ACCESS), group_id(SUPERVISORS)]
    lines = run_as(NOBODY, staff, event_request(evs.path, {"resume_from": 0, "seat": 1}, 2))
    assert lines[0]["type"] == "error" and "table-wide" in lines[0]["error"]
    table_wide = run_as(NOBODY, staff, event_request(evs.path, {"resume_from": 0}, 9))
    assert all("card" not in e["data"] for e in table_wide[1:] if e["type"] == "card_dealt")


def test_each_request_gets_one_reply_naming_its_id(tmp_path):
    console = RecordingConsole()
    ctl = ControlSocket(tmp_path / "c.sock", console)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(ctl.path))
            s.sendall(b'{"id": "a", "action": "status"}\n{"id": 2, "action": "close_bets"}\n'
                      b'{"action": "status"}\nnot json\n[1, 2]\n{"id": {"x": 1}, "action": "status"}\n'
                      b'{"id": "b", "action": "fly"}\n{"id": "c"}\n\n')
            f = s.makefile("rb")
            replies = [json.loads(f.readline()) for _ in range(8)]
        by_id = {r.get("id"): r for r in replies}
        assert by_id["a"]["ok"] is True and by_id["a"]["rounds_played"] == 7
        assert by_id[2]["ok"] is False and "not expected now" in by_id[2]["error"]
        assert by_id["b"]["code"] == "unknown_action" and by_id["c"]["code"] == "bad_request"
        unnamed = [r for r in replies if "id" not in r]
        assert len(unnamed) == 4  # status without id, and three requests whose id could not be read
        assert [r["code"] for r in unnamed if not r["ok"]] == ["bad_request"] * 3
    finally:
        ctl.close()


def test_names_and_reasons_are_validated_before_the_table_sees_them(tmp_path):
    console = RecordingConsole()
    ctl = ControlSocket(tmp_path / "c.sock", console)
    try:
        bad = [{"action": "void", "reason": "x", "supervisor": " "},
               {"action": "void", "reason": "x", "supervisor": {"name": "S"}},
               {"action": "void", "reason": "r" * 1_000_000, "supervisor": "S-1"},
               {"action": "void", "reason": "a\x00b", "supervisor": "S-1"},
               {"action": "decide", "seat": 9, "decision": "play"},
               {"action": "confirm_card", "card": "Zz"}]
        replies = [send(ctl.path, r, timeout_s=10) for r in bad[:2]]
        with socket.socket(socket.AF_UNIX) as s:  # a 1 MB reason is longer than a line may be
            s.connect(str(ctl.path))
            try:
                s.sendall(json.dumps(bad[2]).encode() + b"\n")
            except BrokenPipeError:
                pass  # the server read 64 KiB, answered and closed: the rest is not wanted
            replies.append(json.loads(s.makefile("rb").readline()))
        replies += [send(ctl.path, r, timeout_s=10) for r in bad[3:]]
    finally:
        ctl.close()
    assert [r["code"] for r in replies] == ["bad_request", "bad_request", "too_large", "bad_request",
                                           "bad_request", "bad_request"]
    assert all(len(r["error"]) < 300 for r in replies)
    assert console.seen == []


@pytest.fixture
def captured_logs():
    out = io.StringIO()
    saved = structlog.get_config()
    structlog.configure(processors=[structlog.processors.JSONRenderer()],
                        logger_factory=structlog.PrintLoggerFactory(out), cache_logger_on_first_use=False)
    try:
        yield out
    finally:
        structlog.configure(**saved)


def _status_time(path) -> float:
    t0 = time.monotonic()
    reply = send(path, {"action": "status"}, timeout_s=5)
    assert reply["ok"] is True and reply["rounds_played"] == 7
    return time.monotonic() - t0


@pytest.mark.alone  # bounds wall time (status within 1 s): run apart from the parallel run
def test_idle_clients_malformed_lines_and_a_100_mb_line_leave_the_console_answering(tmp_path, captured_logs):
    console = RecordingConsole()
    ctl = ControlSocket(tmp_path / "c.sock", console, max_connections=256)
    idle: list[socket.socket] = []
    try:
        for _ in range(2000):  # more than the listener holds: the longest idle are closed to make room
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(ctl.path))
            idle.append(s)
        assert _status_time(ctl.path) < 1.0
        assert ctl.guard.counts["evicted"] >= 2000 - 256
        with socket.socket(socket.AF_UNIX) as s:  # 5,000 malformed lines, each answered
            s.connect(str(ctl.path))
            f = s.makefile("rwb")
            for i in range(5000):
                f.write(b"{not json %d\n" % i if i % 2 else b'{"action": 5}\n')
            f.flush()
            answers = [json.loads(f.readline()) for _ in range(5000)]
        assert all(a["ok"] is False and a["code"] == "bad_request" for a in answers)
        assert _status_time(ctl.path) < 1.0
        marker = b"Z" * 1024
        with socket.socket(socket.AF_UNIX) as s:  # a 100 MB line: refused at 64 KiB, the connection closed
            s.connect(str(ctl.path))
            s.settimeout(10)
            sent = 0
            try:
                while sent < 100 * 1024 * 1024:
                    s.sendall(marker * 1024)
                    sent += len(marker) * 1024
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = s.makefile("rb").readline()
        assert json.loads(reply)["code"] == "too_large"
        assert sent < 100 * 1024 * 1024  # the server stopped reading long before the end
        assert _status_time(ctl.path) < 1.0
    finally:
        for s in idle:
            s.close()
        ctl.close()
    logged = captured_logs.getvalue()
    assert "ZZZZZZZZ" not in logged and "not json" not in logged
    assert max((len(line) for line in logged.splitlines()), default=0) < 1000


@pytest.mark.alone  # bounds wall time (an answer within 1 s): run apart from the parallel run
def test_descriptor_exhaustion_turns_clients_away_then_the_console_answers_again(tmp_path):
    console = RecordingConsole()
    ctl = ControlSocket(tmp_path / "c.sock", console)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    clients = [socket.socket(socket.AF_UNIX) for _ in range(2)]  # made before the table runs out
    filler: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
        while True:
            try:
                filler.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        clients[0].settimeout(5)
        clients[0].connect(str(ctl.path))
        turned_away = clients[0].makefile("rb").readline()
        assert json.loads(turned_away)["code"] == "busy"  # an answer, not a hang
        assert ctl.guard.counts["exhausted"] >= 1
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        t0 = time.monotonic()
        clients[1].settimeout(5)
        clients[1].connect(str(ctl.path))
        clients[1].sendall(b'{"id": 1, "action": "status"}\n')
        reply = json.loads(clients[1].makefile("rb").readline())
        assert reply["id"] == 1 and reply["ok"] is True
        assert time.monotonic() - t0 < 1.0
    finally:
        for c in clients:
            c.close()
        ctl.close()


def test_binding_a_socket_never_changes_the_process_umask(tmp_path, monkeypatch):
    """``unix_listener`` set the umask to 0177 around its bind: a file another thread
    created meanwhile got mode 0600 instead of what its own umask gave (issue 24, point 7).
    The socket is now bound in a private 0700 folder and linked into place."""
    import threading

    from table.interfaces.serving import unix_listener

    calls = []
    real_umask = os.umask
    monkeypatch.setattr(os, "umask", lambda m: calls.append(m) or real_umask(m))
    made, stop = [], threading.Event()

    def create_files() -> None:  # another thread of the process, making files all along
        n = 0
        while not stop.is_set():
            p = tmp_path / "files" / f"f{n}"
            fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            os.close(fd)
            made.append(p)
            n += 1

    (tmp_path / "files").mkdir()
    (tmp_path / "socks").mkdir()
    before = real_umask(0o022)
    worker = threading.Thread(target=create_files)
    worker.start()
    try:
        for i in range(100):
            sock = unix_listener(tmp_path / "socks" / f"s{i}.sock", mode=0o660)
            sock.close()
    finally:
        stop.set()
        worker.join(10)
        real_umask(before)
    assert calls == []  # the umask was never touched
    assert made and {oct(os.stat(p).st_mode & 0o777) for p in made} == {"0o644"}
    modes = {oct(os.lstat(tmp_path / "socks" / f"s{i}.sock").st_mode & 0o777) for i in range(100)}
    assert modes == {"0o660"} and sorted(os.listdir(tmp_path / "socks"))[:1] == ["s0.sock"]
    assert not [n for n in os.listdir(tmp_path / "socks") if not n.endswith(".sock")]  # no private folder left
