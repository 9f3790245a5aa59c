"""``tablectl emulate --pty PATH`` never takes PATH from an emulator still serving it
(issue 19): it used to repoint the link under the first emulator's host and delete it
on exit. A link left by a killed emulator may still be taken over."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from devices import CardShoe
from firmware_bridge.link import LinkConfig
from simulators.pty_port import PtyLinkError, PtyPort, check_link_path, is_pty_link

from hil_helpers import CLI, EmulatorProcess

FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=400, max_attempts=10, heartbeat_interval_ms=60_000,
                  reconnect_initial_ms=20, reconnect_max_ms=200, reconnect_wait_s=10, read_timeout_ms=50)


def test_a_second_port_on_a_served_link_is_refused_and_the_first_keeps_it(tmp_path):
    link = tmp_path / "shoe"
    first = PtyPort(link)
    try:
        target = os.readlink(link)
        with pytest.raises(PtyLinkError, match="still running"):
            PtyPort(link)
        with pytest.raises(PtyLinkError, match="still running"):
            check_link_path(link)
        assert os.readlink(link) == target
    finally:
        first.close()
    assert not link.exists() and not link.is_symlink()
    again = PtyPort(link)  # free once the first is gone
    again.close()


def test_emulate_refuses_a_live_pty_and_the_running_one_still_serves(tmp_path):
    link = tmp_path / "shoe"
    with EmulatorProcess("shoe", "--pty", str(link), "--seed", "1", log_path=tmp_path / "a.log") as emu:
        target = os.readlink(link)
        proc = subprocess.run([*CLI, "emulate", "shoe", "--pty", str(link), "--no-stdin"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "still running" in proc.stderr and "Traceback" not in proc.stderr
        assert os.readlink(link) == target  # not repointed
        with CardShoe.open(emu.url, config=FAST) as shoe:  # and the first emulator still answers there
            assert shoe.identity.serial_number == "SHOE-SIM-0001"
    assert not link.is_symlink()


def test_the_link_of_a_killed_emulator_can_be_taken_over(tmp_path):
    link = tmp_path / "shoe"
    emu = EmulatorProcess("shoe", "--pty", str(link), log_path=tmp_path / "a.log")
    assert emu.stop(signal.SIGKILL) == -signal.SIGKILL
    assert is_pty_link(link)  # left behind: nothing removed it
    check_link_path(link)  # the kernel dropped the claim with the process
    with EmulatorProcess("shoe", "--pty", str(link), log_path=tmp_path / "b.log") as again:
        assert again.url == str(link)
