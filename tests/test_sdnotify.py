"""sd_notify over a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import os
import socket
import threading
import uuid

import pytest

from table.service.sdnotify import NotifyError, SystemdNotifier, Watchdog, watchdog_interval_s


@pytest.fixture(params=["path", "abstract"])
def manager(request, tmp_path):
    """A datagram socket where systemd's would be; yields (NOTIFY_SOCKET value, socket)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if request.param == "path":
        addr = str(tmp_path / "notify")
        sock.bind(addr)
    else:
        name = f"threecard-test-{uuid.uuid4().hex}"
        sock.bind("\0" + name)
        addr = "@" + name
    sock.settimeout(10)
    yield addr, sock
    sock.close()


def recv(sock: socket.socket) -> str:
    return sock.recv(4096).decode()


def test_messages_arrive_as_documented(manager):
    addr, sock = manager
    with SystemdNotifier.from_env({"NOTIFY_SOCKET": addr}) as n:
        assert n.enabled
        n.ready()
        assert recv(sock) == "READY=1\n"
        n.status("dealing round 3")
        assert recv(sock) == "STATUS=dealing round 3\n"
        n.watchdog()
        assert recv(sock) == "WATCHDOG=1\n"
        n.stopping("SIGTERM")
        assert recv(sock) == "STOPPING=1\nSTATUS=SIGTERM\n"
        n.ready(status="both devices up")
        assert recv(sock) == "READY=1\nSTATUS=both devices up\n"


def test_no_notify_socket_is_a_no_op():
    n = SystemdNotifier.from_env({})
    assert not n.enabled
    n.ready(), n.watchdog(), n.status("x"), n.stopping()  # nothing raised, nothing opened
    n.close()


def test_a_status_line_must_be_one_line(manager):
    addr, _ = manager
    with SystemdNotifier(addr) as n, pytest.raises(ValueError):
        n.status("two\nlines")


def test_missing_socket_raises(tmp_path):
    with SystemdNotifier(str(tmp_path / "gone")) as n, pytest.raises(NotifyError):
        n.ready()


def test_unsupported_address_form():
    with pytest.raises(NotifyError, match="only a path or an @abstract name"):
        SystemdNotifier("vsock:2:1234")


@pytest.mark.parametrize("env, expect", [
    ({"WATCHDOG_USEC": "30000000"}, 30.0),
    ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid())}, 0.5),
    ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": "1"}, None),  # meant for another process
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
    ({}, None),
])
def test_watchdog_interval_from_env(env, expect):
    assert watchdog_interval_s(env) == expect


def test_watchdog_thread_not_started_without_watchdog_usec(manager):
    addr, _ = manager
    with SystemdNotifier(addr) as n, Watchdog(n, healthy=lambda: True, environ={}) as wd:
        assert not wd.active
    assert wd.interval_s is None


def test_watchdog_thread_not_started_without_notify_socket():
    with Watchdog(SystemdNotifier(None), healthy=lambda: True, interval_s=0.01) as wd:
        assert not wd.active


def test_watchdog_interval_is_half_the_timeout(manager):
    addr, _ = manager
    with SystemdNotifier(addr) as n:
        assert Watchdog(n, healthy=lambda: True, environ={"WATCHDOG_USEC": "30000000"}).interval_s == 15.0


def test_watchdog_pings_only_while_healthy(manager):
    """Pings arrive while healthy() is true; once it is false, none does."""
    addr, sock = manager
    state = {"healthy": True, "false_calls": 0}
    checked_false = threading.Condition()

    def healthy() -> bool:
        with checked_false:
            if not state["healthy"]:
                state["false_calls"] += 1
                checked_false.notify_all()
            return state["healthy"]

    def wait_false_calls(n: int) -> None:
        with checked_false:
            assert checked_false.wait_for(lambda: state["false_calls"] >= n, timeout=10)

    with SystemdNotifier(addr) as n, Watchdog(n, healthy, interval_s=0.005) as wd:
        assert wd.active
        assert recv(sock) == "WATCHDOG=1\n"
        assert recv(sock) == "WATCHDOG=1\n"
        with checked_false:
            state["healthy"] = False
        wait_false_calls(1)  # every ping of a healthy tick was sent before this check
        sock.setblocking(False)
        while True:  # drain those
            try:
                assert sock.recv(4096) == b"WATCHDOG=1\n"
            except BlockingIOError:
                break
        wait_false_calls(3)  # two whole unhealthy ticks later...
        with pytest.raises(BlockingIOError):  # ...nothing was sent
            sock.recv(4096)
        with checked_false:
            state["healthy"] = True
        sock.settimeout(10)
        assert recv(sock) == "WATCHDOG=1\n"  # pings resume with the links
    assert not wd.active


def test_watchdog_survives_a_failing_health_check(manager):
    addr, sock = manager
    calls = {"n": 0}

    def healthy() -> bool:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("link object gone")
        return True

    with SystemdNotifier(addr) as n, Watchdog(n, healthy, interval_s=0.005):
        assert recv(sock) == "WATCHDOG=1\n"
    assert calls["n"] >= 2
