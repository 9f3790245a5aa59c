"""`tablectl config check|show` answers a supervisor can trust (issue 19): one URL for
both devices is refused, and an [mqtt] without a host does not look enabled."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from table.cli import main
from table.config import ConfigError, parse_config

BASE = """\
[table]
id = "t1"
seats = 3

[devices.shuffler]
url = "{shuffler}"

[devices.shoe]
url = "{shoe}"
"""


def cfg(shuffler: str, shoe: str, extra: str = "") -> str:
    return BASE.format(shuffler=shuffler, shoe=shoe) + extra


@pytest.mark.parametrize("shuffler,shoe", [
    ("/dev/threecard/shoe", "/dev/threecard/shoe"),
    ("socket://127.0.0.1:7101", "socket://127.0.0.1:7101"),
    ("socket://Bench-PC:7101", "socket://bench-pc:7101"),
    ("usb://1209:0002/SHOE-1", "usb://1209:0002/SHOE-1"),
    ("usb://1209:000A", "usb://1209:000a"),
])
def test_the_same_device_for_shuffler_and_shoe_is_refused(shuffler, shoe):
    with pytest.raises(ConfigError) as info:
        parse_config(cfg(shuffler, shoe), "table.toml")
    text = str(info.value)
    assert "table.toml:9: devices.shoe.url:" in text and "each need their own port" in text


def test_a_symlink_to_the_other_devices_port_is_the_same_device(tmp_path):
    port = tmp_path / "ttyUSB0"
    port.write_text("")
    (tmp_path / "shoe").symlink_to(port)
    with pytest.raises(ConfigError, match="same device as devices.shuffler.url"):
        parse_config(cfg(str(port), str(tmp_path / "shoe")))
    parse_config(cfg(str(port), str(tmp_path / "other")))  # two ports: fine


def test_config_check_exits_1_naming_the_key(tmp_path):
    f = tmp_path / "table.toml"
    f.write_text(cfg("/dev/threecard/x", "/dev/threecard/x"))
    r = CliRunner().invoke(main, ["config", "check", str(f)])
    assert r.exit_code == 1 and f"{f}:9: devices.shoe.url:" in r.stderr


def test_show_without_an_mqtt_host_says_mqtt_is_off(tmp_path):
    f = tmp_path / "table.toml"
    f.write_text(cfg("/dev/threecard/shuffler", "/dev/threecard/shoe"))
    r = CliRunner().invoke(main, ["config", "show", str(f)])
    assert r.exit_code == 0
    assert "[mqtt]" not in [line.strip() for line in r.stdout.splitlines()]
    assert "# [mqtt] is off" in r.stdout
    assert "mqtt" not in tomllib.loads(r.stdout)  # what it prints reads back without MQTT
    assert parse_config(r.stdout).mqtt.host is None
    out = json.loads(CliRunner().invoke(main, ["config", "show", "--json", str(f)]).stdout)
    assert out["mqtt"] is None


def test_show_with_an_mqtt_host_shows_the_section(tmp_path):
    f = tmp_path / "table.toml"
    f.write_text(cfg("/dev/threecard/shuffler", "/dev/threecard/shoe", '\n[mqtt]\nhost = "broker.floor"\n'))
    r = CliRunner().invoke(main, ["config", "show", str(f)])
    assert r.exit_code == 0 and "[mqtt]" in r.stdout and 'host = "broker.floor"' in r.stdout
    assert "is off" not in r.stdout
    assert parse_config(r.stdout).mqtt.host == "broker.floor"
    out = json.loads(CliRunner().invoke(main, ["config", "show", "--json", str(f)]).stdout)
    assert out["mqtt"]["host"] == "broker.floor" and out["mqtt"]["port"] == 1883
