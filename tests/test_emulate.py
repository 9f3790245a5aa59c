"""``tablectl emulate``: a standalone emulator process a host reaches over TCP or a pty."""

from __future__ import annotations

import json
import queue
import signal
import socket
import subprocess
from pathlib import Path

import click
import pytest

from devices import CardShoe, Shuffler
from firmware_bridge.errors import RequestRefused
from firmware_bridge.link import LinkConfig, LinkNotice
from protocols.cards import BackColour
from protocols.messages import (CardDrawn, CardUnreadable, DeckInserted, DeckVerified, DeviceKind, DeviceState,
                                NakCode, ShoeLoaded, ShufflerFault)
from simulators.standalone import ControlError, EmulatorOptions, StandaloneEmulator, parse_address

from hil_helpers import CLI, EmulatorProcess

FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=400, max_attempts=10, heartbeat_interval_ms=60_000,
                  reconnect_initial_ms=20, reconnect_max_ms=200, reconnect_wait_s=10, read_timeout_ms=50)


def next_message(events: queue.Queue, timeout_s: float = 10.0):
    while True:
        msg = events.get(timeout=timeout_s).message
        if not isinstance(msg, LinkNotice):
            return msg


def test_shuffler_over_tcp_handshakes_answers_and_stops_on_sigterm(tmp_path):
    with EmulatorProcess("shuffler", "--tcp", "127.0.0.1:0", "--seed", "5", "--serial", "SHF-BENCH-7",
                         log_path=tmp_path / "shuffler.log") as emu:
        assert emu.url.startswith("socket://127.0.0.1:") and not emu.url.endswith(":0")
        events: queue.Queue = queue.Queue()
        with Shuffler.open(emu.url, config=FAST, events=events) as shuffler:
            ident = shuffler.identity
            assert (ident.kind, ident.serial_number, ident.protocol_major) == (DeviceKind.SHUFFLER, "SHF-BENCH-7", 1)
            assert shuffler.status().state is DeviceState.IDLE
            with pytest.raises(RequestRefused) as info:
                shuffler.shuffle()
            assert info.value.code is NakCode.NO_DECK
            assert emu.control("insert blue") == "ok inserted blue cards=52"
            inserted = next_message(events)
            assert isinstance(inserted, DeckInserted) and inserted.back_colour is BackColour.BLUE
            shuffler.shuffle()
            verified = next_message(events)
            assert isinstance(verified, DeckVerified) and verified.complete
            assert emu.control("jam") == "ok the next shuffle jams"
            shuffler.shuffle()
            assert isinstance(next_message(events), ShufflerFault)
            assert emu.control("door open").startswith("ok")
            with pytest.raises(RequestRefused) as info:
                shuffler.shuffle()
            assert info.value.code is NakCode.DOOR_OPEN
        assert emu.stop(signal.SIGTERM) == 0
        assert '"event": "stopped"' in emu.logs() and "SIGTERM" in emu.logs()
    host, port = parse_address(emu.url.removeprefix("socket://"))
    with pytest.raises(ConnectionRefusedError):  # the port went with the process
        socket.create_connection((host, port), timeout=5).close()


def test_shoe_over_a_pty_symlink_logs_frames_and_stops_on_sigint(tmp_path):
    link = tmp_path / "bench" / "shoe"
    link.parent.mkdir()
    with EmulatorProcess("shoe", "--pty", str(link), "--log-frames", "--log-format", "json",
                         log_path=tmp_path / "shoe.log") as emu:
        assert emu.url == str(link) and link.is_symlink()
        events: queue.Queue = queue.Queue()
        with CardShoe.open(str(link), config=FAST, events=events) as shoe:
            assert shoe.identity.kind is DeviceKind.SHOE
            assert emu.control("load red ordered") == "ok loaded red cards=52"
            assert isinstance(next_message(events), ShoeLoaded)
            assert emu.control("unreadable 1").startswith("ok")
            assert emu.control("draw 3") == "ok drew 2c 2d 2h"
            first, *rest = (next_message(events) for _ in range(3))
            assert isinstance(first, CardUnreadable) and first.draw_index == 0
            assert [(d.draw_index, str(d.card)) for d in rest] == [(1, "2d"), (2, "2h")]
            assert all(isinstance(d, CardDrawn) for d in rest)
            assert shoe.status().cards == 49
        assert emu.stop(signal.SIGINT) == 0
    assert not link.exists() and not link.is_symlink()  # the symlink went with the emulator
    frames = [json.loads(line) for line in emu.logs().splitlines() if '"frame"' in line]
    assert {f["direction"] for f in frames} == {"rx", "tx"}
    identify = next(f for f in frames if f["direction"] == "rx")
    assert identify["message"]["message"] == "Identify" and identify["hex"].startswith("a504")
    assert any(f["message"]["message"] == "CardDrawn" for f in frames)


def test_a_control_socket_takes_the_same_commands(tmp_path):
    with EmulatorProcess("shoe", "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0", "--no-stdin",
                         log_path=tmp_path / "shoe.log") as emu:
        assert emu.extra[0].startswith("control 127.0.0.1:")
        host, port = parse_address(emu.extra[0].split()[1])
        with socket.create_connection((host, port)) as ctl, ctl.makefile("rwb") as f:
            f.write(b"load green ordered\nstatus\nfly\n")
            f.flush()
            assert f.readline() == b"ok loaded green cards=52\n"
            assert b"cards=52 colour=green" in f.readline()
            assert f.readline().startswith(b"error unknown command")
        assert emu.stop() == 0


def test_bad_usage_exits_2(tmp_path):
    from click.testing import CliRunner

    from table.cli import main

    r = CliRunner().invoke(main, ["emulate", "shoe"])
    assert r.exit_code == 2 and "exactly one of --pty" in r.output
    r = CliRunner().invoke(main, ["emulate", "shoe", "--tcp", "nohost"])
    assert r.exit_code == 2 and "HOST:PORT" in r.output
    r = CliRunner().invoke(main, ["emulate", "shoe", "--tcp", "127.0.0.1:0", "--weak-shuffle"])
    assert r.exit_code == 2 and "shuffler" in r.output


def emulate(*args: str) -> subprocess.CompletedProcess:
    """``tablectl emulate ARGS...`` expected to exit at once (a refusal); a time limit, not a hang, if not."""
    return subprocess.run([*CLI, "emulate", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=30)


def test_pty_refuses_to_replace_a_file_that_is_not_a_pty_symlink(tmp_path):
    data = tmp_path / "f"
    data.write_text("data\n")
    r = emulate("shoe", "--pty", str(data))
    assert r.returncode == 2 and str(data) in r.stderr and "not a symlink to a pty" in r.stderr
    assert data.read_text() == "data\n"
    elsewhere = tmp_path / "ttyUSB0"  # e.g. a udev name: a symlink, but not to a pty
    elsewhere.write_text("device\n")
    named = tmp_path / "shoe"
    named.symlink_to(elsewhere)
    r = emulate("shoe", "--pty", str(named))
    assert r.returncode == 2 and str(named) in r.stderr
    assert named.is_symlink() and named.read_text() == "device\n"
    folder = tmp_path / "dir"
    folder.mkdir()
    r = emulate("shoe", "--pty", str(folder))
    assert r.returncode == 2 and folder.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "f", "shoe", "ttyUSB0"]  # no temp link left


def test_pty_refuses_a_missing_parent_folder_and_creates_none(tmp_path):
    link = tmp_path / "a" / "b" / "shoe"
    r = emulate("shoe", "--pty", str(link))
    assert r.returncode == 2 and str(tmp_path / "a" / "b") in r.stderr and "no such folder" in r.stderr
    assert not (tmp_path / "a").exists()


def test_pty_port_replaces_a_leftover_pty_symlink_but_not_a_file(tmp_path):
    from simulators.pty_port import PtyLinkError, PtyPort

    leftover = tmp_path / "shoe"
    leftover.symlink_to("/dev/pts/999999")  # a previous run's, killed before it could clean up
    with EmulatorProcess("shoe", "--pty", str(leftover), log_path=tmp_path / "shoe.log") as emu:
        assert emu.url == str(leftover) and leftover.resolve() != Path("/dev/pts/999999")
        assert emu.control("status").startswith("ok")
        assert emu.stop() == 0
    assert not leftover.is_symlink()
    data = tmp_path / "f"
    data.write_text("data\n")
    with pytest.raises(PtyLinkError, match="not a symlink to a pty"):
        PtyPort(data)
    assert data.read_text() == "data\n" and sorted(p.name for p in tmp_path.iterdir()) == ["f", "shoe.log"]
    port = PtyPort(tmp_path / "made" / "shoe")  # the library still makes its own link folders
    try:
        assert (tmp_path / "made" / "shoe").is_symlink()
    finally:
        port.close()
    assert not (tmp_path / "made" / "shoe").is_symlink()


def test_control_commands_in_process(tmp_path):
    emu = StandaloneEmulator(EmulatorOptions("shuffler", tcp=("127.0.0.1", 0), seed=1))
    try:
        assert emu.command("insert red -As +Kd foreign=2") == "inserted red cards=54"
        assert "cards=54" in emu.command("status")
        with pytest.raises(ControlError, match="no verified deck"):
            emu.command("take")
        with pytest.raises(ControlError, match="unknown back colour"):
            emu.command("insert mauve")
        with pytest.raises(ControlError, match="shoe command"):
            emu.command("draw")
        with pytest.raises(ControlError, match="door open"):
            emu.command("door ajar")
        assert emu.command("reboot").startswith("rebooted boot_id=")
    finally:
        emu.stop()


def next_notice(events: queue.Queue, timeout_s: float = 10.0) -> str:
    while True:
        msg = events.get(timeout=timeout_s).message
        if isinstance(msg, LinkNotice):
            return msg.kind


def test_disconnect_and_reboot_commands_reach_the_host(tmp_path):
    link = tmp_path / "shoe"
    with EmulatorProcess("shoe", "--pty", str(link), log_path=tmp_path / "shoe.log") as emu:
        events: queue.Queue = queue.Queue()
        with CardShoe.open(str(link), config=FAST, events=events) as shoe:
            boot = shoe.identity.boot_id
            assert emu.control("disconnect").startswith("ok disconnected")
            assert next_notice(events) == "link_down"
            assert next_notice(events) == "link_up"  # found again behind the symlink
            assert emu.control("reboot").startswith("ok rebooted")
            assert shoe.status().state is DeviceState.IDLE  # NOT_IDENTIFIED, re-identify, resend
            assert next_notice(events) == "device_rebooted"
            assert shoe.identity.boot_id != boot
        assert emu.stop() == 0


def test_weak_shuffle_option_makes_a_one_riffle_shuffler():
    emu = StandaloneEmulator(EmulatorOptions("shuffler", tcp=("127.0.0.1", 0), shuffle="riffle1", seed=2))
    try:
        assert emu.device.shuffle_mode == "riffle1"
    finally:
        emu.stop()
    with pytest.raises(ValueError, match="shuffler mode"):
        EmulatorOptions("shoe", tcp=("127.0.0.1", 0), shuffle="riffle1")


def test_every_option_of_emulate_has_help():
    from click.testing import CliRunner

    from table.cli import main

    text = " ".join(CliRunner().invoke(main, ["emulate", "--help"]).output.split())
    assert "--log-format [json|console|auto] Logs on stderr: json (one object a line)" in text, text
    from table.cli.emulate import emulate_command

    assert all(p.help for p in emulate_command.params if isinstance(p, click.Option) and not p.hidden)


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_unplug_keeps_the_cable_out_until_plug(tmp_path, transport):
    """``unplug`` drops the host and keeps it out (a TCP connect is refused, the pty
    symlink is gone) until ``plug``; an event emitted meanwhile reaches the host after."""
    where = ["--tcp", "127.0.0.1:0"] if transport == "tcp" else ["--pty", str(tmp_path / "shoe")]
    with EmulatorProcess("shoe", *where, log_path=tmp_path / "shoe.log") as emu:
        events: queue.Queue = queue.Queue()
        cfg = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=400, max_attempts=10,
                         heartbeat_interval_ms=100, heartbeat_timeout_ms=100, heartbeat_misses=2,
                         reconnect_initial_ms=20, reconnect_max_ms=100, reconnect_wait_s=10, read_timeout_ms=50)
        with CardShoe.open(emu.url, config=cfg, events=events) as shoe:
            assert emu.control("unplug").startswith("ok unplugged")
            assert next_notice(events) == "link_down"
            assert emu.control("unplug").startswith("error the cable is already out")
            assert "cable=out" in emu.control("status")
            if transport == "tcp":
                host, port = parse_address(emu.url.split("://", 1)[1])
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection((host, port), timeout=2).close()
            else:
                assert not (tmp_path / "shoe").exists()
            assert emu.control("load red ordered") == "ok loaded red cards=52"  # the device works unplugged
            with pytest.raises(queue.Empty):  # nothing reaches the host while the cable is out
                next_message(events, timeout_s=0.5)
            assert emu.control("plug").startswith("ok plugged")
            assert next_notice(events) == "link_up"
            assert next_message(events) == ShoeLoaded(BackColour.RED)  # resent once the host is back
            assert shoe.status().state is DeviceState.HAS_DECK
        assert emu.stop() == 0


def test_slip_puts_a_card_of_another_back_colour_on_top_of_the_shoe(tmp_path):
    emu = StandaloneEmulator(EmulatorOptions("shoe", tcp=("127.0.0.1", 0), seed=1))
    try:
        with pytest.raises(ControlError, match="no deck"):
            emu.command("slip As")
        emu.command("load red ordered")
        assert emu.command("slip Kd") == "slipped Kd (blue back) on top cards=53"
        assert emu.command("draw") == "drew Kd"
        emu.command("unload")
        emu.command("load blue ordered")
        assert emu.command("slip 9h") == "slipped 9h (red back) on top cards=53"
        assert emu.command("slip 2c green") == "slipped 2c (green back) on top cards=54"
        with pytest.raises(ControlError, match="slip CARD"):
            emu.command("slip")
        with pytest.raises(ControlError, match="shuffler"):
            emu.command("insert red")
    finally:
        emu.stop()


def test_a_slipped_card_reaches_the_host_with_its_own_back_colour(tmp_path):
    with EmulatorProcess("shoe", "--tcp", "127.0.0.1:0", log_path=tmp_path / "shoe.log") as emu:
        events: queue.Queue = queue.Queue()
        with CardShoe.open(emu.url, config=FAST, events=events):
            assert emu.control("load red ordered") == "ok loaded red cards=52"
            assert emu.control("slip Qh") == "ok slipped Qh (blue back) on top cards=53"
            assert emu.control("draw 2") == "ok drew Qh 2c"
            assert next_message(events) == ShoeLoaded(BackColour.RED)
            first, second = next_message(events), next_message(events)
            assert (first.card, first.back_colour) == (first.card.parse("Qh"), BackColour.BLUE)
            assert second.back_colour is BackColour.RED
        assert emu.stop() == 0
