"""``tablectl probe URL``: identify, status and echo by hand, with the replies and their hex,
never taking a port another process holds and never acknowledging a device's events."""

from __future__ import annotations

import json
import queue
import subprocess
import sys

from click.testing import CliRunner

from devices import CardShoe
from firmware_bridge.link import LinkConfig, LinkNotice
from firmware_bridge.probe import Probe
from firmware_bridge.transport import SerialTransport
from protocols.cards import BackColour, Card
from protocols.frame import encode_frame
from protocols.messages import CardDrawn, DeviceKind, IdentifyReply, ShoeLoaded, encode_message
from simulators.standalone import EmulatorOptions, StandaloneEmulator
from table.cli import main

CLI = [sys.executable, "-c", "from table.cli import main; main()"]
FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=400, max_attempts=10, heartbeat_interval_ms=60_000,
                  reconnect_initial_ms=20, reconnect_max_ms=200, reconnect_wait_s=10, read_timeout_ms=50)


def emulator(tmp_path, kind="shoe"):
    return StandaloneEmulator(EmulatorOptions(kind, pty=str(tmp_path / kind), seed=7,
                                              serial_number="SHOE-LAB-3")).start()


def test_identify_status_echo_print_each_reply_decoded_and_in_hex(tmp_path):
    emu = emulator(tmp_path)
    try:
        r = CliRunner().invoke(main, ["probe", emu.url, "identify", "status", "echo hello", "echo hex:00ff"])
    finally:
        emu.stop()
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "> Identify" in out and "< IdentifyReply kind=shoe" in out and "serial_number=SHOE-LAB-3" in out
    assert "< StatusReply state=idle" in out
    assert "< EchoReply data=68656c6c6f" in out and "< EchoReply data=00ff" in out
    assert "  tx a5 05" in out and "68 65 6c 6c 6f" in out  # the request's bytes, spaced
    assert out.count("  rx a5 ") == 4


def test_steps_from_stdin_and_json_frames(tmp_path):
    emu = emulator(tmp_path)
    try:
        r = CliRunner().invoke(main, ["probe", emu.url, "--json"], input="identify\n# a comment\n\nstatus\nquit\nstatus\n")
    finally:
        emu.stop()
    assert r.exit_code == 0, r.output
    frames = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(f["step"], f["direction"], f["message"]["message"]) for f in frames] == [
        ("identify", "tx", "Identify"), ("identify", "rx", "IdentifyReply"),
        ("status", "tx", "GetStatus"), ("status", "rx", "StatusReply")]  # nothing after quit
    assert all(f["hex"].startswith("a5 ") for f in frames)


def test_a_request_before_identify_is_refused_and_exits_1(tmp_path):
    emu = emulator(tmp_path)
    try:
        r = CliRunner().invoke(main, ["probe", emu.url, "status"])
    finally:
        emu.stop()
    assert r.exit_code == 1 and "< Nak code=not_identified" in r.stdout


def test_a_port_another_process_holds_is_refused(tmp_path):
    """pyserial's exclusive lock: the controller's port is never shared with a probe."""
    emu = emulator(tmp_path)
    holder = SerialTransport(emu.url)
    holder.open()
    try:
        proc = subprocess.run([*CLI, "probe", emu.url, "identify"], capture_output=True, text=True, timeout=60)
    finally:
        holder.close()
        emu.stop()
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "another process holds the port" in proc.stderr and proc.stdout == ""


def test_events_are_shown_and_left_for_the_controller(tmp_path):
    emu = emulator(tmp_path)
    try:
        emu.command("load red")
        card = emu.command("draw 1").split()[-1]
        r = CliRunner().invoke(main, ["probe", emu.url, "identify", "status", "--timeout", "0.3"])
        assert r.exit_code == 0, r.output
        # The device resends its first event until someone acks it: the probe never does.
        assert "< event ShoeLoaded back_colour=red" in r.stdout and "not acknowledged" in r.stdout
        # The controller connecting afterwards still gets every event, the card included.
        events: queue.Queue = queue.Queue()
        seen = []
        with CardShoe.open(emu.url, config=FAST, events=events):
            while not seen or not isinstance(seen[-1], CardDrawn):
                msg = events.get(timeout=10).message
                if not isinstance(msg, LinkNotice):
                    seen.append(msg)
        assert [type(m) for m in seen] == [ShoeLoaded, CardDrawn] and str(seen[-1].card) == card
    finally:
        emu.stop()


class _Wire:
    """A transport that answers each write with canned frames (a CardDrawn event first)."""

    name = "fake://"
    timed_read = False

    def __init__(self, frames):
        self.frames, self.out = list(frames), []

    def open(self):
        pass

    def close(self):
        pass

    def write(self, data):
        self.out.append(data)

    def read(self, n=512, timeout_s=None):
        return self.frames.pop(0) if self.frames else b""


def test_a_card_drawn_event_is_masked_in_the_probes_output():
    t, p = encode_message(CardDrawn(3, Card.parse("Qs"), BackColour.RED))
    event = encode_frame(7, t, p)
    probe = Probe("fake://", transport=_Wire([event, encode_frame(0, *encode_message(IdentifyReply(
        DeviceKind.SHOE, 1, 0, (1, 0, 0), "SHOE-X", 5)))]), reply_timeout_s=0.5)
    with probe:
        ex = probe.identify()
    assert ex.answered and ex.others == [(event, "event")]
    lines: list[str] = []
    from table.cli.probe import _show

    _show(ex, "identify", False, lines.append)
    text = "\n".join(lines)
    assert "< event CardDrawn draw_index=3 card=?? back_colour=red" in text
    rx = next(line for line in lines if line.startswith("  rx a5 04 07 51"))
    assert "Qs" not in text
    assert rx.split()[6:8] == ["??", "??"] and rx.split()[-2:] == ["??", "??"]  # rank, suit and the CRC


def test_no_reply_by_the_deadline_exits_4_and_bad_steps_2():
    r = CliRunner().invoke(main, ["probe", "loop://", "status", "--timeout", "0.1"])
    assert r.exit_code == 4 and "no reply" in r.stdout
    r = CliRunner().invoke(main, ["probe", "loop://", "reboot"])
    assert r.exit_code == 2 and "unknown step" in r.stderr
    r = CliRunner().invoke(main, ["probe", "loop://", "echo " + "x" * 65])
    assert r.exit_code == 2 and "at most 64 bytes" in r.stderr
    r = CliRunner().invoke(main, ["probe", "/no/such/port", "identify"])
    assert r.exit_code == 4 and "cannot open" in r.stderr and "Traceback" not in r.output


def test_with_no_step_at_all_probe_runs_identify_status_and_echo(tmp_path):
    emu = emulator(tmp_path)
    try:
        r = CliRunner().invoke(main, ["probe", emu.url], input="")
    finally:
        emu.stop()
    assert r.exit_code == 0, r.output
    assert [line.split()[1] for line in r.stdout.splitlines() if line.startswith("< ")] == [
        "IdentifyReply", "StatusReply", "EchoReply"]
