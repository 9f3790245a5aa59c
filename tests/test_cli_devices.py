"""``tablectl devices`` against a fake list of serial ports and the emulated USB bus."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import usb.core
from click.testing import CliRunner

import firmware_bridge.usb as fusb
from protocols.messages import DeviceKind
from simulators.usb_backend import EmulatedUsbDevice, EmulatorUsbBackend
from table.cli import devices as cli_devices
from table.cli import main


@pytest.fixture
def bus():
    backend = EmulatorUsbBackend([
        EmulatedUsbDevice(DeviceKind.SHUFFLER, serial_number="SHF-0042"),
        EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-0007"),
    ])
    backend.add(EmulatedUsbDevice(DeviceKind.SHOE, serial_number="OTHER", vendor_id=0x0403, product_id=0x6001))
    yield backend
    backend.close()


@pytest.fixture
def ports(monkeypatch, tmp_path):
    """One USB-serial adapter with the shoe's IDs and a plain UART; a udev folder with symlinks."""
    tty = tmp_path / "ttyUSB0"
    tty.touch()
    fake = [
        SimpleNamespace(device=str(tty), description="Shoe bridge", vid=0x1209, pid=0x0002, serial_number="SHOE-0007"),
        SimpleNamespace(device="/dev/ttyS0", description="n/a", vid=None, pid=None, serial_number=None),
    ]
    monkeypatch.setattr(cli_devices.list_ports, "comports", lambda: fake)
    udev = tmp_path / "threecard"
    udev.mkdir()
    (udev / "shoe").symlink_to(tty)
    (udev / "shuffler-usb").symlink_to("/dev/bus/usb/001/002")  # the emulated shuffler's node
    return udev


def invoke(*args, backend=None):
    return CliRunner().invoke(main, ["devices", *args], obj={"usb_backend": backend})


def test_lists_ports_and_configured_usb_devices_with_serials_and_symlinks(bus, ports):
    result = invoke("--json", "--udev-dir", str(ports), backend=bus)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    by_device = {p["device"]: p for p in data["serial_ports"]}
    usb_serial = next(p for p in data["serial_ports"] if p["vid"] == 0x1209)
    assert usb_serial["serial_number"] == "SHOE-0007" and usb_serial["role"] == "shoe"
    assert usb_serial["symlinks"] == [str(ports / "shoe")]
    assert by_device["/dev/ttyS0"]["role"] is None
    devices = data["usb"]["devices"]
    assert [(d["role"], d["selector"]) for d in devices] == [
        ("shuffler", "usb://1209:0001/SHF-0042"), ("shoe", "usb://1209:0002/SHOE-0007")]
    assert devices[0]["symlinks"] == [str(ports / "shuffler-usb")]
    assert devices[0]["node"] == "/dev/bus/usb/001/002"
    assert data["usb"]["available"] is True


def test_the_text_listing_names_each_device_by_the_address_to_configure(bus, ports):
    result = invoke("--udev-dir", str(ports), backend=bus)
    assert result.exit_code == 0, result.output
    assert "usb://1209:0001/SHF-0042  shuffler  serial SHF-0042" in result.output
    assert f"<- {ports / 'shuffler-usb'}" in result.output
    assert "OTHER" not in result.output  # not a configured VID:PID


def test_extra_usb_ids_can_be_listed(bus, ports):
    result = invoke("--json", "--usb-id", "bridge=0403:6001", "--udev-dir", str(ports), backend=bus)
    assert result.exit_code == 0, result.output
    roles = [d["role"] for d in json.loads(result.output)["usb"]["devices"]]
    assert roles == ["shuffler", "shoe", "bridge"]
    assert invoke("--usb-id", "nonsense").exit_code == 2


def test_missing_libusb_is_said_plainly_and_exits_0(monkeypatch, ports):
    def no_backend(*a, **kw):
        raise usb.core.NoBackendError("No backend available")

    monkeypatch.setattr(usb.core, "find", no_backend)
    monkeypatch.setattr(fusb, "_packaged_libusb_backend", lambda: None)
    result = invoke("--udev-dir", str(ports))
    assert result.exit_code == 0, result.output
    assert "libusb is not installed" in result.output
    assert "apt install libusb-1.0-0" in result.output
    assert "Serial ports:" in result.output  # the serial part still works
    data = json.loads(invoke("--json", "--udev-dir", str(ports)).output)
    assert data["usb"]["available"] is False and data["usb"]["hint"] == fusb.HINT_NO_BACKEND


def test_unreadable_serial_numbers_point_at_the_udev_rules(bus, ports):
    for d in bus.devices:
        d.faults.access_denied = True
    result = invoke("--udev-dir", str(ports), backend=bus)
    assert result.exit_code == 0, result.output
    assert "serial unreadable: install the udev rules" in result.output
