"""A driver's failure is a device fault (docs/drivers.md "A driver's process", docs/device-faults.md):
a driver process that raises, hangs past its deadline or exits makes the call a LinkError the
table's ride-through holds on, journaled naming the driver and its version; the process is
started again and the table goes on. Never an exit of the table."""

from __future__ import annotations

import queue

import pytest

from devices.apart import open_apart
from devices.apart.wire import DriverProcessFailed, DriverRaised
from devices.contract import DriverKind, OpenRequest
from simulators.table import SimulatedTable
from table.errors import DeviceFault
from test_drivers_apart import BLUE, PLUGINS, RED, apart_table

FLAKY = "threecard_test_drivers.flaky:PLUGIN"


def _incidents(journal) -> tuple[list[dict], list[dict]]:
    held = [e.body for e in journal.entries("device_fault") if e.body["step"] == "held"]
    links = [e.body for e in journal.entries("link") if e.body["source"] == "shuffler"]
    return held, links


@pytest.mark.parametrize("mode", ["raise", "hang", "exit"])
def test_a_driver_that_fails_once_is_a_device_fault_ridden_through_and_started_again(tmp_path, mode):
    arm = tmp_path / "arm"
    with apart_table(tmp_path, shuffler=(FLAKY, {"mode": mode, "arm_file": str(arm)}),
                     call_deadline_s=1.5) as (ctl, sim, journal, drivers):
        ctl.prepare()
        ctl.play_round()
        arm.write_text("")  # the shuffler's driver fails at its next status
        for _ in range(2):
            ctl.play_round()
        assert ctl.rounds_played == 3  # the table held, then went on
        assert not arm.exists()  # the failure did happen
        held, links = _incidents(journal)
        assert held and held[0]["source"] == "shuffler"
        assert "'flaky-spec' (threecard_test_drivers 0.0.1)" in held[0]["reason"]
        assert "its driver failed" in held[0]["waiting_for"]  # not "check its cable"
        assert "Q" not in held[0]["reason"] and "♠" not in held[0]["reason"]  # a driver's text never shown
        notices = [b["notice"] for b in links]
        assert notices[-2:] == ["link_down", "link_up"]
        assert "'flaky-spec' (threecard_test_drivers 0.0.1)" in links[-2]["detail"]
        assert drivers["shuffler"].process.starts == 2
        assert [e.body["step"] for e in journal.entries("device_fault")][-1] == "back"


def test_a_driver_that_raises_in_every_call_holds_the_table_never_a_crash(tmp_path):
    with apart_table(tmp_path, shuffler=(FLAKY, {"mode": "raise"}), attached=False,
                     timing={"fault_deadline_s": 3}) as (ctl, sim, journal, drivers):
        with pytest.raises(DeviceFault, match="not back within 3 s"):  # a bench's deadline, never a ValueError
            ctl.prepare()
        held, links = _incidents(journal)
        assert held and "raised ValueError" in held[0]["reason"] and "0.0.1" in held[0]["reason"]
        # started again after each failure (its process may still be starting when the table's
        # bench deadline ends the wait: on a loaded machine a start takes seconds)
        assert drivers["shuffler"].process.wait_starts(2, timeout_s=60)
        # one outage, one incident: the driver failing again and again is not journaled each time
        assert [b["notice"] for b in links].count("link_down") == 1, links
        assert "reinstall the driver's package or call its vendor" in links[0]["detail"]


def test_a_driver_that_crashes_as_it_starts_is_started_again_backing_off_never_in_a_flood(tmp_path):
    """A reviewer's finding: a driver that crashed at each start was started again every
    0.2 s, each time journaled. Now: at once after its first failure, then waits doubling to
    a cap while it keeps failing; one link_down (what to do) and one link_up for the outage."""
    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=11) as sim:
        shf = open_apart(FLAKY, OpenRequest(DriverKind.SHUFFLER, sim.shuffler_url, "shuffler", events,
                                            options={"mode": "die"}), paths=(PLUGINS,),
                         restart_first_s=0.05, restart_max_s=0.2)
        try:
            assert shf.process.wait_starts(6, timeout_s=120)
            assert shf.process.waits[:5] == [0.0, 0.05, 0.1, 0.2, 0.2]  # at once, then doubling to the cap
        finally:
            shf.close()
    notices = []
    while not events.empty():
        notices.append(events.get_nowait().message)
    assert [n.kind for n in notices] == ["link_down", "link_up"], notices
    assert "'flaky-spec' (threecard_test_drivers 0.0.1)" in notices[0].detail and "up to 0.2 s" in notices[0].detail


@pytest.mark.parametrize(("mode", "error"), [("raise", DriverRaised), ("hang", DriverProcessFailed),
                                             ("exit", DriverProcessFailed), ("forge", DriverProcessFailed),
                                             ("card", DriverProcessFailed), ("deep", DriverProcessFailed)])
def test_the_proxy_makes_each_failure_a_link_error_naming_the_driver(tmp_path, mode, error):
    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=11) as sim:
        shf = open_apart(FLAKY, OpenRequest(DriverKind.SHUFFLER, sim.shuffler_url, "shuffler", events,
                                            options={"mode": mode}), paths=(PLUGINS,), call_deadline_s=1.0)
        try:
            with pytest.raises(error, match=r"'flaky-spec' \(threecard_test_drivers 0.0.1\)"):
                shf.status()
            notice = events.get(timeout=10).message  # the process ended: said on the table's queue
            assert notice.kind == "link_down" and "flaky-spec" in notice.detail
            if mode in ("forge", "card", "deep"):  # a line that is not the wire's (an event without its
                # message; a shoe's card drawn from the shuffler's driver; a line nested too deep)
                assert "broke the wire" in notice.detail
            if mode == "card":
                assert "CardDrawn event from the shuffler's driver" in notice.detail
            assert events.get(timeout=10).message.kind == "link_up"  # and started again
            assert shf.link.alive and shf.process.starts == 2
        finally:
            shf.close()



class SocketActivation:
    """What systemd does for deploy/threecard-driver@.socket (Accept=no): it listens on the
    driver's socket and, when a table connects and no driver runs, starts
    ``python -m devices.apart.host --listen-fd 3``; the driver serves that one table and
    ends when it goes (or fails), and the next connection starts it again."""

    def __init__(self, path) -> None:
        import socket
        import subprocess
        import sys
        import threading

        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.stop = threading.Event()
        self.wake_r, self.wake_w = socket.socketpair()
        self.started = 0
        self._sub, self._sys = subprocess, sys
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import select

        while not self.stop.is_set():
            ready, _, _ = select.select([self.listener, self.wake_r], [], [])  # systemd's epoll on the socket
            if self.stop.is_set():
                return
            fd = self.listener.fileno()
            proc = self._sub.Popen([self._sys.executable, "-m", "devices.apart.host", "--listen-fd", str(fd)],
                                   pass_fds=(fd,), stdin=self._sub.DEVNULL, stdout=self._sub.DEVNULL,
                                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": PLUGINS})
            self.started += 1
            proc.wait()

    def close(self) -> None:
        self.stop.set()
        self.wake_w.send(b"x")
        self.thread.join(timeout=30)
        for s in (self.listener, self.wake_r, self.wake_w):
            s.close()


def test_a_driver_systemd_starts_on_its_socket_is_reached_there_and_started_again_after_it_exits(tmp_path):
    from devices.apart.choose import open_device

    arm = tmp_path / "arm"
    (tmp_path / "sockets").mkdir()
    activation = SocketActivation(tmp_path / "sockets" / "shuffler.sock")
    events: queue.Queue = queue.Queue()
    try:
        with SimulatedTable((RED, BLUE), seed=11) as sim:
            shf = open_device(FLAKY, OpenRequest(DriverKind.SHUFFLER, sim.shuffler_url, "shuffler", events,
                                                 options={"mode": "exit", "arm_file": str(arm)}),
                              apart="all", service=True, sockets=str(tmp_path / "sockets"))
            try:
                assert shf.process.connect == str(tmp_path / "sockets" / "shuffler.sock")
                assert shf.status().cards == 0 and activation.started == 1
                arm.write_text("")
                with pytest.raises(DriverProcessFailed, match="flaky-spec"):
                    shf.status()
                assert events.get(timeout=10).message.kind == "link_down"
                assert events.get(timeout=20).message.kind == "link_up"  # a new connection, a new driver
                assert shf.status().cards == 0 and activation.started == 2
            finally:
                shf.close()
    finally:
        activation.close()


def test_a_driver_whose_process_ends_in_every_call_backs_off_with_one_incident_for_the_outage(tmp_path):
    """A fresh attacker's driver: it starts and says ready, then its process ends in each
    call the table makes. The call failed with its process's end was taken for a contract
    error ("the driver itself works"), which ended the outage: every failure was started
    again at once and journaled as a new link_down and link_up, a flood at the table's
    call rate. Now: one outage, backing off, one link_down for it."""
    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=11) as sim:
        shf = open_apart(FLAKY, OpenRequest(DriverKind.SHUFFLER, sim.shuffler_url, "shuffler", events,
                                            options={"mode": "exit"}), paths=(PLUGINS,), call_deadline_s=5.0,
                         restart_first_s=0.05, restart_max_s=0.2)
        try:
            for n in range(4):
                with pytest.raises(DriverProcessFailed):
                    shf.status()
                assert shf.process.wait_starts(n + 2, timeout_s=60)
            assert shf.process.waits[:4] == [0.0, 0.05, 0.1, 0.2], shf.process.waits
        finally:
            shf.close()
    notices = []
    while not events.empty():
        notices.append(events.get_nowait().message.kind)
    assert notices.count("link_down") == 1, notices


def test_a_count_reply_sent_behind_the_events_does_not_leave_the_table_with_a_stale_link():
    """A driver process sends a call's reply behind the events delivered before it: the reply
    must carry the link as it is when sent, not as it was when the call returned. Here the
    shoe's line is down as the count is returned and back before the event delivered during
    the call is sent: the table's link is up after the count. It was left down (the reply's
    older state came last, and the process's link watch, told "up" with the event, never sent
    it again): the table took a working shoe for one away."""
    from pathlib import Path

    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        shoe = open_apart("threecard_test_drivers.dropping:PLUGIN",
                          OpenRequest(DriverKind.SHOE, sim.shoe_url, "shoe", events),
                          paths=(str(Path(__file__).parent / "apart_drivers"),))
        try:
            for n in range(5):
                shoe.status()
                assert shoe.link.alive, f"count {n}: the table's link is {shoe.link.state.value}, the shoe's up"
                assert not events.empty()  # the event delivered during the count came before it
                while not events.empty():
                    events.get_nowait()
        finally:
            shoe.close()


def test_a_driver_delivering_what_is_no_event_ends_its_process_not_left_to_the_calls_deadline():
    """Replies go behind the driver's events, through one sender: a driver that delivers
    something that is no device event (here a string, as its count is asked) stopped that
    sender, and with it every reply; the table's call waited out its whole deadline (here
    30 s) for a reply that could not come. The driver process now ends its connection at
    once: the call fails as a driver process that ended, and the process is started again."""
    from pathlib import Path

    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        shoe = open_apart("threecard_test_drivers.junk:PLUGIN",
                          OpenRequest(DriverKind.SHOE, sim.shoe_url, "shoe", events), call_deadline_s=30,
                          paths=(str(Path(__file__).parent / "apart_drivers"),))
        try:
            with pytest.raises(DriverProcessFailed) as info:
                shoe.status()
            assert "not answered within" not in str(info.value), str(info.value)
        finally:
            shoe.close()
