"""The host-side frame trace (``tablectl run --trace-frames FILE``, table.frame_trace):
every frame both ways, decoded, and nothing in it that reveals a card (816a.1).
``tests/test_run_cli.py`` runs it through ``tablectl run``."""

from __future__ import annotations

import json
import os
import queue
import stat

import pytest

from devices import CardShoe
from firmware_bridge.link import LinkConfig
from protocols.cards import BackColour, Card
from protocols.frame import crc16, encode_frame
from protocols.messages import CardDrawn, encode_message
from simulators.standalone import EmulatorOptions, StandaloneEmulator
from table.files import UnsafeFile
from table.frame_trace import FrameTrace, describe_frame

from frame_helpers import card_drawn_frame, recover_card

FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=400, max_attempts=10, heartbeat_interval_ms=60_000,
                  reconnect_initial_ms=20, reconnect_max_ms=200, reconnect_wait_s=10, read_timeout_ms=50)


def test_a_card_drawn_is_masked_decoded_and_in_hex_including_its_crc():
    wire = card_drawn_frame("Qs")
    d = describe_frame(wire)
    assert d["message"] == {"message": "CardDrawn", "draw_index": 4, "card": "??", "back_colour": "red"}
    assert d["hex"].split()[5:7] == ["??", "??"] and d["hex"].split()[-2:] == ["??", "??"]
    assert d["hex"].split()[:5] == wire.hex(" ").split()[:5]  # sync, len, seq, type, draw index stay
    # The CRC alone would give the card back: with it masked, all 52 cards fit.
    assert len(recover_card(d["hex"])) == 52
    unmasked_crc = d["hex"].split()[:-2] + wire.hex(" ").split()[-2:]
    assert recover_card(" ".join(unmasked_crc)) == ["Qs"]  # what masking only rank and suit would have leaked
    faces = describe_frame(wire, card_faces=True)
    assert faces["message"]["card"] == "Qs" and faces["hex"] == wire.hex(" ")


def test_a_malformed_card_drawn_hides_its_whole_payload():
    t, p = encode_message(CardDrawn(0, Card.parse("Ah"), BackColour.RED))
    wire = encode_frame(1, t, p[:3])  # one byte short: does not decode
    d = describe_frame(wire)
    assert "error" in d["message"] and d["hex"].split()[4:] == ["??"] * (len(wire) - 4)
    assert describe_frame(b"\xa5\x04\x01\x51\x00\x0e")["hex"].split()[4:] == ["??", "??"]  # not even a frame


def test_other_frames_are_shown_whole():
    wire = encode_frame(3, 0x02, b"")
    d = describe_frame(wire)
    assert d == {"seq": 3, "type": "0x02", "kind": "request", "hex": wire.hex(" "), "message": {"message": "GetStatus"}}
    assert describe_frame(b"\x00\x01")["message"]["error"]


def test_the_trace_file_is_private_and_never_replaces_or_follows(tmp_path):
    old = os.umask(0)
    try:
        path = tmp_path / "trace.jsonl"
        with FrameTrace(path, clock=lambda: 0.0) as trace:
            trace.hook("shoe")("rx", card_drawn_frame("Kd"))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        line = json.loads(path.read_text())
        assert line["time"] == "1970-01-01T00:00:00.000000Z" and line["device"] == "shoe" and line["direction"] == "rx"
        assert "Kd" not in path.read_text()
        with pytest.raises(UnsafeFile):
            FrameTrace(path)  # never appended to, never truncated
        assert path.read_text().count("\n") == 1
        target = tmp_path / "victim"
        target.write_text("keep\n")
        planted = tmp_path / "planted.jsonl"
        planted.symlink_to(target)
        with pytest.raises(UnsafeFile):
            FrameTrace(planted)
        assert target.read_text() == "keep\n"
        dangling = tmp_path / "dangling.jsonl"
        dangling.symlink_to(tmp_path / "would-be-created")
        with pytest.raises(UnsafeFile):
            FrameTrace(dangling)
        assert not (tmp_path / "would-be-created").exists()
    finally:
        os.umask(old)


def test_the_trace_stops_at_its_size_limit(tmp_path):
    path = tmp_path / "t.jsonl"
    with FrameTrace(path, max_bytes=600) as trace:
        for i in range(50):
            trace.record("shuffler", "tx", encode_frame(i % 255 + 1, 0x02, b""))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[-1]["note"] == "trace stopped" and len(lines) < 50
    assert path.stat().st_size < 600 + 200


def test_the_link_traces_every_frame_both_ways_from_the_handshake(tmp_path):
    emu = StandaloneEmulator(EmulatorOptions("shoe", pty=str(tmp_path / "shoe"), seed=7)).start()
    try:
        with FrameTrace(tmp_path / "t.jsonl") as trace:
            events: queue.Queue = queue.Queue()
            with CardShoe.open(emu.url, config=FAST, events=events, frame_trace=trace.hook("shoe")) as shoe:
                shoe.status()
                emu.command("load red")
                drawn = emu.command("draw 1").split()[-1]
                while not isinstance(events.get(timeout=10).message, CardDrawn):
                    pass
        lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    finally:
        emu.stop()
    names = [(x["direction"], x["message"].get("message")) for x in lines]
    assert names[:2] == [("tx", "Identify"), ("rx", "IdentifyReply")]
    assert ("tx", "GetStatus") in names and ("rx", "StatusReply") in names and ("rx", "ShoeLoaded") in names
    assert ("rx", "CardDrawn") in names and ("tx", "Ack") in names
    drawn_lines = [x for x in lines if x["message"].get("message") == "CardDrawn"]
    assert drawn_lines and all(x["message"]["card"] == "??" and len(recover_card(x["hex"])) == 52 for x in drawn_lines)
    decoded = json.dumps([{k: v for k, v in x.items() if k != "hex"} for x in lines])  # hex bytes like 6d are bytes
    assert drawn not in decoded


def test_crc16_is_the_frames_crc():  # the attack above relies on it
    wire = card_drawn_frame("2c")
    assert int.from_bytes(wire[-2:], "big") == crc16(wire[1:-2])
