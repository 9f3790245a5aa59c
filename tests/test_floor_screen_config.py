"""The floor screen's config keys: ``display_timezone`` (the zone the pages show times in; by
default the floor machine's own) and ``wall_pits`` (the pits with a read-only wall page)."""

from __future__ import annotations

import pytest

from table.floor.config import FloorConfigError, parse_floor_config
from table.floor.pit_screen import Clock, local_zone_name

BASE = '[[broker]]\nurl = "mqtt://127.0.0.1:1883"\n[floor]\ndatabase = "/tmp/f.sqlite3"\nkey_file = "k"\ntable_keys = "t"\n'


def test_bad_display_zone_and_wall_pits_are_named_in_the_error(tmp_path):
    with pytest.raises(FloorConfigError) as exc:
        parse_floor_config(BASE + 'display_timezone = "Mars/Olympus"\nwall_pits = ["pit1", "../x"]\n',
                           tmp_path / "floor.toml")
    text = str(exc.value)
    assert "floor.toml" in text and "floor.display_timezone: 'Mars/Olympus'" in text and "floor.wall_pits" in text


def test_the_keys_are_read_and_left_out_they_default_to_the_machines_zone_and_no_wall(tmp_path, monkeypatch):
    c = parse_floor_config(BASE + 'display_timezone = "America/Chicago"\nwall_pits = ["pit1", "pit2", "pit1"]\n',
                           tmp_path / "floor.toml")
    assert c.display_timezone == "America/Chicago" and c.wall_pits == ("pit1", "pit2")
    c = parse_floor_config(BASE, tmp_path / "floor.toml")
    assert c.display_timezone is None and c.wall_pits == ()
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert local_zone_name() == "Asia/Tokyo"
    monkeypatch.setenv("TZ", "Not/AZone")
    assert local_zone_name() != "Not/AZone"  # the machine's link or UTC, never a name that is no zone


def test_a_time_is_said_in_the_floors_zone_and_a_bad_one_is_none():
    assert Clock("America/Chicago").at("2026-03-05T22:00:00+00:00") == "2026-03-05 16:00:00 CST"
    assert Clock("America/Chicago").at("2026-07-05T22:00:00+00:00") == "2026-07-05 17:00:00 CDT"
    assert Clock("UTC").at("2026-03-05T22:00:00") is None  # no offset: not guessed
    assert Clock("UTC").at("yesterday") is None and Clock("UTC").at(None) is None
