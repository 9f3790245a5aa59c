"""Logging modes: JSON lines, console on a terminal, stdlib loggers through the same
renderer, bound context, and journald priority prefixes."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest
import structlog

from table.logs import configure_logging, is_journal_stream


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {n: logging.getLogger(n).level for n in ("transitions", "usb")}
    saved = structlog.get_config()
    yield
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, lvl in levels.items():
        logging.getLogger(name).setLevel(lvl)
    structlog.configure(**saved)


def lines(buf: io.StringIO) -> list[str]:
    return [l for l in buf.getvalue().splitlines() if l]


def test_json_lines_carry_bound_context_for_structlog_and_stdlib_loggers():
    buf = io.StringIO()
    configure_logging(stream=buf, fmt="json", level="info")
    structlog.contextvars.bind_contextvars(round_id="r00003-abcd", deck_id="B")
    structlog.get_logger("firmware_bridge.link").bind(device_serial="SHOE-SIM-0001").info("frame_retransmit", seq=4)
    logging.getLogger("serial").warning("port %s reopened", "/dev/threecard/shoe")  # pyserial's kind of record
    logging.getLogger("usb.core").error("libusb says %d", -4)  # pyusb's
    a, b, c = (json.loads(l) for l in lines(buf))
    assert a["event"] == "frame_retransmit" and a["device_serial"] == "SHOE-SIM-0001" and a["seq"] == 4
    for rec in (a, b, c):
        assert rec["round_id"] == "r00003-abcd" and rec["deck_id"] == "B" and "timestamp" in rec
    assert (b["event"], b["level"], b["logger"]) == ("port /dev/threecard/shoe reopened", "warning", "serial")
    assert (c["event"], c["level"], c["logger"]) == ("libusb says -4", "error", "usb.core")


def test_transitions_state_changes_hidden_below_debug():
    buf = io.StringIO()
    configure_logging(stream=buf, fmt="json", level="info")
    logging.getLogger("transitions.core").info("Entered state dealing")
    logging.getLogger("transitions.core").warning("no transition")
    assert [json.loads(l)["event"] for l in lines(buf)] == ["no transition"]
    configure_logging(stream=buf, fmt="json", level="debug")
    logging.getLogger("transitions.core").info("Entered state dealing")
    assert json.loads(lines(buf)[-1])["event"] == "Entered state dealing"


def test_console_renderer_for_people():
    buf = io.StringIO()
    configure_logging(stream=buf, fmt="console", level="info")
    structlog.get_logger("table").info("round_open", number=1)
    logging.getLogger("serial").warning("stdlib line")
    out = lines(buf)
    assert len(out) == 2 and "round_open" in out[0] and "number=1" in out[0] and "stdlib line" in out[1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(out[0])
    assert "\x1b[" not in buf.getvalue()  # no colours when the stream is not a terminal


def test_auto_is_json_in_a_pipe_and_console_on_a_terminal():
    buf = io.StringIO()
    configure_logging(stream=buf, fmt="auto")
    structlog.get_logger().info("piped")
    assert json.loads(lines(buf)[0])["event"] == "piped"

    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as tty:
            configure_logging(stream=tty, fmt="auto")
            structlog.get_logger().info("on_a_terminal", x=1)
            tty.flush()
            out = os.read(master, 4096).decode()
        assert "on_a_terminal" in out and not out.lstrip().startswith("{")
    finally:
        logging.getLogger().handlers.clear()
        os.close(master)
        os.close(slave)


def test_journald_priority_prefix_when_stdout_is_the_journal_stream(tmp_path, monkeypatch):
    with open(tmp_path / "journal", "w+") as stream:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        assert is_journal_stream(stream)
        configure_logging(stream=stream, fmt="json", level="debug")
        log = structlog.get_logger("table")
        log.debug("d"), log.info("i"), log.warning("w"), log.error("e")
        logging.getLogger("serial").critical("c")
        stream.seek(0)
        got = stream.read().splitlines()
    assert [l[:3] for l in got] == ["<7>", "<6>", "<4>", "<3>", "<2>"]
    assert json.loads(got[1][3:])["event"] == "i"


def test_no_prefix_on_another_stream(tmp_path, monkeypatch):
    monkeypatch.setenv("JOURNAL_STREAM", "1:2")
    buf = io.StringIO()
    assert not is_journal_stream(buf)
    configure_logging(stream=buf, fmt="json")
    structlog.get_logger().info("plain")
    assert lines(buf)[0].startswith("{")


@pytest.mark.parametrize("kw", [{"fmt": "xml"}, {"level": "loud"}])
def test_bad_format_or_level(kw):
    with pytest.raises(ValueError):
        configure_logging(stream=io.StringIO(), **kw)
