"""docs/integration.md: its Python examples run as written against the simulated table,
and its [mqtt] config example is a valid table config section."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from table.api import API_VERSION
from table.config import parse_config

DOC = Path(__file__).resolve().parent.parent / "docs" / "integration.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_python_examples_run():
    code = blocks("python")
    assert len(code) >= 3
    namespace: dict = {"__name__": "integration_doc"}
    out = io.StringIO()
    import structlog

    saved = structlog.get_config()  # the logging example configures structlog globally
    try:
        with contextlib.redirect_stdout(out):
            for block in code:  # one namespace: later examples use the first one's `work` folder
                exec(compile(block, str(DOC), "exec"), namespace)
    finally:
        structlog.configure(**saved)
    text = out.getvalue()
    assert f"API {API_VERSION}" in text and "sealed:" in text and "refused:" in text
    assert "seat 1 saw its own cards as dealt:" in text
    assert "commitments: all hold" in text


def test_mqtt_config_example_is_valid():
    (toml,) = [b for b in blocks("toml") if "[mqtt]" in b]
    cfg = parse_config('[table]\nid = "pit2-tcp-07"\nseats = 3\n[devices.shuffler]\nurl = "/dev/a"\n'
                       '[devices.shoe]\nurl = "/dev/b"\n' + toml)
    assert cfg.mqtt.floor == "pit2" and cfg.mqtt.port == 1883 and cfg.mqtt.settings().host == "broker.floor.example"
