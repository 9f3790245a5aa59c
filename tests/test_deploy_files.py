"""The shipped deployment files say what deploy/README.md promises, and the
unit's command line is one `tablectl` accepts. (Their syntax is linted by
scripts/ci-lint-deploy with udevadm verify and systemd-analyze verify.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from table.cli import main

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "deploy" / "threecard-table.service"


def unit_settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


def test_unit_is_a_hardened_notify_service():
    u = unit_settings()
    one = {k: v[-1] for k, v in u.items()}
    assert (one["Type"], one["User"], one["Group"]) == ("notify", "threecard", "threecard")
    assert one["Restart"] == "on-failure" and one["WatchdogSec"] == "30s"
    assert (one["ProtectSystem"], one["PrivateTmp"], one["NoNewPrivileges"]) == ("strict", "yes", "yes")
    assert one["DevicePolicy"] == "closed" and one["StateDirectory"] == "threecard"
    allowed = set(u["DeviceAllow"])
    assert {"/dev/threecard/shuffler rw", "/dev/threecard/shoe rw", "char-usb_device rw"} <= allowed


def test_unit_command_line_is_accepted_by_tablectl():
    argv = shlex.split(unit_settings()["ExecStart"][0].replace("%E", "/etc"))
    assert argv[0] == "/opt/threecard-table/bin/tablectl"
    sub = main.get_command(None, argv[1])
    sub_ctx = sub.make_context(argv[1], argv[2:])  # raises click.UsageError on an option it does not know
    assert sub_ctx.params["service"] is True
    assert sub_ctx.params["config_path"] == "/etc/threecard/table.toml"


@pytest.mark.parametrize("name, symlinks, subsystem", [
    ("70-threecard-serial.rules", ["threecard/shuffler", "threecard/shoe"], 'SUBSYSTEM!="tty"'),
    ("70-threecard-usb.rules", ["threecard/shuffler-usb", "threecard/shoe-usb"], 'ENV{DEVTYPE}!="usb_device"'),
])
def test_udev_rules_name_group_and_hide_from_modemmanager(name, symlinks, subsystem):
    text = (REPO / "udev" / name).read_text()
    rules = [r for r in re.sub(r"\\\n\s*", " ", text).splitlines() if "SYMLINK" in r]
    assert [re.search(r'SYMLINK\+="([^"]+)"', r).group(1) for r in rules] == symlinks
    assert subsystem in text
    for r in rules:
        # one group a device: the shoe's driver process cannot open the shuffler (docs/drivers.md)
        device = "shuffler" if "threecard/shuffler" in r else "shoe"
        for needed in (f'GROUP="threecard-{device}"', 'MODE="0660"', 'ENV{ID_MM_DEVICE_IGNORE}="1"', "idVendor",
                       "idProduct", "{serial}"):
            assert needed in r, (needed, r)


DRIVER_UNIT = REPO / "deploy" / "threecard-driver@.service"


def test_the_driver_unit_holds_only_its_device_and_starts_the_driver_process():
    """docs/drivers.md, "What a driver can reach": its own user, no network, its device only,
    none of the table's files, no core dumps; started on its socket with the command the
    driver process accepts."""
    u: dict[str, list[str]] = {}
    for line in DRIVER_UNIT.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, v = line.split("=", 1)
            u.setdefault(k, []).append(v)
    one = {k: v[-1] for k, v in u.items()}
    assert (one["DynamicUser"], one["PrivateNetwork"], one["IPAddressDeny"]) == ("yes", "yes", "any")
    assert (one["DevicePolicy"], one["LimitCORE"], one["ProtectSystem"], one["NoNewPrivileges"]) == \
        ("closed", "0", "strict", "yes")
    assert "/dev/threecard/%i rw" in u["DeviceAllow"]
    # its own device's group only (udev: one group a device), never the group of both devices
    assert one["SupplementaryGroups"].split() == ["threecard-%i"]
    assert {"-/var/lib/threecard", "-/etc/threecard", "-/run/threecard"} <= set(one["InaccessiblePaths"].split())
    assert "AF_INET" not in one["RestrictAddressFamilies"]
    argv = shlex.split(one["ExecStart"])
    assert argv[1:4] == ["-m", "devices.apart.host", "--listen-fd"]
    socket_unit = (REPO / "deploy" / "threecard-driver@.socket").read_text()
    assert "ListenStream=/run/threecard-drivers/%i.sock" in socket_unit and "Accept=no" in socket_unit
    from devices.apart.choose import DRIVER_SOCKETS

    assert DRIVER_SOCKETS == "/run/threecard-drivers"
