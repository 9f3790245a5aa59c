"""The USB transport against the emulators' pure-Python pyusb backend, and that backend itself.

Each typed error of :mod:`firmware_bridge.usb` is checked with its hint; the
backend is checked against what pyusb and libusb promise (IndexError for a
missing alternate setting, EOVERFLOW for a short buffer, sessions that die
with an unplug).
"""

from __future__ import annotations

import errno
import queue
import random
import threading

import pytest
import usb.backend.libusb0
import usb.backend.libusb1
import usb.backend.openusb
import usb.control
import usb.core
import usb.util

import firmware_bridge.usb as fusb
from devices import CardShoe, Shuffler
from firmware_bridge.errors import LinkLost, TransportError
from firmware_bridge.factory import transport_for
from firmware_bridge.link import LinkConfig, LinkNotice
from firmware_bridge.transport import SerialTransport
from firmware_bridge.usb import DEFAULT_USB_IDS, UsbSelector, UsbTransport
from protocols.cards import BackColour
from protocols.frame import FrameParser, encode_frame
from protocols.messages import DeckVerified, DeviceKind, GetStatus, Identify, encode_message
from simulators.devices import ShoeEmulator, ShufflerEmulator, new_deck
from simulators.usb_backend import (
    EMULATOR_PRODUCT_IDS,
    EMULATOR_VENDOR_ID,
    EP_IN,
    MAX_PACKET_SIZE,
    EmulatedUsbDevice,
    EmulatorUsbBackend,
)

SHOE = "usb://1209:0002/SHOE-1"


@pytest.fixture
def bus():
    """An emulated bus with one shoe (serial SHOE-1), no firmware attached."""
    shoe = EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-1")
    backend = EmulatorUsbBackend([shoe])
    yield backend, shoe
    backend.close()


@pytest.fixture
def shoe_bus():
    """An emulated bus with a shoe whose firmware emulator runs."""
    dev = EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-1")
    backend = EmulatorUsbBackend([dev])
    emu = ShoeEmulator(dev.port, serial_number="SHOE-1").start()
    yield backend, dev, emu
    emu.stop()
    backend.close()


def opened(backend, selector=SHOE, **kw) -> UsbTransport:
    t = UsbTransport(selector, backend=backend, **kw)
    t.open()
    return t


# -- selectors ----------------------------------------------------------------------------


@pytest.mark.parametrize("text, sel", [
    ("usb://1209:0001", UsbSelector(0x1209, 0x0001)),
    ("USB://1209:ABCD/SHF-0042", UsbSelector(0x1209, 0xABCD, "SHF-0042")),
    ("usb://1209:2/a%2Fb%20c", UsbSelector(0x1209, 0x0002, "a/b c")),
    ("usb://1209:0002/", UsbSelector(0x1209, 0x0002)),
])
def test_selector_parses_hex_ids_and_a_percent_encoded_serial(text, sel):
    assert UsbSelector.parse(text) == sel
    assert UsbSelector.parse(str(sel)) == sel


def test_selector_text_is_canonical():
    assert str(UsbSelector(0x1209, 0x2, "a/b c")) == "usb://1209:0002/a%2Fb%20c"


@pytest.mark.parametrize("text", ["usb://1209", "usb://xyz:0001", "usb://12345:0001", "usb://:0001", "/dev/ttyUSB0"])
def test_a_malformed_selector_says_what_form_is_expected(text):
    with pytest.raises(ValueError, match=r"usb://VID:PID\[/SERIAL\]"):
        UsbSelector.parse(text)


def test_a_malformed_selector_given_to_a_driver_is_a_transport_error_with_the_form():
    with pytest.raises(TransportError, match="not a USB selector") as info:
        Shuffler.open("usb://12x9:0001")
    assert "usb://VID:PID[/SERIAL]" in info.value.hint


def test_transport_for_picks_usb_or_serial_by_url():
    assert isinstance(transport_for("usb://1209:0001"), UsbTransport)
    assert isinstance(transport_for(UsbSelector(0x1209, 1)), UsbTransport)
    assert isinstance(transport_for("/dev/ttyUSB0"), SerialTransport)
    assert isinstance(transport_for("socket://localhost:1"), SerialTransport)
    assert transport_for("usb://1209:0001", read_timeout_ms=30).read_timeout_ms == 30


def test_host_and_emulator_agree_on_the_usb_ids():
    assert DEFAULT_USB_IDS["shuffler"] == (EMULATOR_VENDOR_ID, EMULATOR_PRODUCT_IDS[DeviceKind.SHUFFLER])
    assert DEFAULT_USB_IDS["shoe"] == (EMULATOR_VENDOR_ID, EMULATOR_PRODUCT_IDS[DeviceKind.SHOE])


# -- typed errors and their hints ------------------------------------------------------------


def test_no_libusb_is_a_typed_error_with_the_install_hint(monkeypatch):
    def no_backend(*a, **kw):
        raise usb.core.NoBackendError("No backend available")

    monkeypatch.setattr(usb.core, "find", no_backend)
    monkeypatch.setattr(fusb, "_packaged_libusb_backend", lambda: None)
    with pytest.raises(TransportError, match="No backend available") as info:
        UsbTransport("usb://1209:0001").open()
    assert "apt install libusb-1.0-0" in info.value.hint
    assert "libusb-package" in info.value.hint


def test_without_any_libusb_on_the_machine_the_real_lookup_gives_the_same_error(monkeypatch):
    for module in (usb.backend.libusb1, usb.backend.libusb0, usb.backend.openusb):
        monkeypatch.setattr(module, "get_backend", lambda *a, **kw: None)
    monkeypatch.setattr(fusb, "_packaged_libusb_backend", lambda: None)
    with pytest.raises(TransportError) as info:
        Shuffler.open("usb://1209:0001")
    assert info.value.hint == fusb.HINT_NO_BACKEND


def test_the_packaged_libusb_is_tried_when_the_system_has_none(monkeypatch, bus):
    backend, _ = bus
    real_find = usb.core.find

    def find(*a, backend=None, **kw):
        if backend is None:
            raise usb.core.NoBackendError("No backend available")
        return real_find(*a, backend=backend, **kw)

    monkeypatch.setattr(usb.core, "find", find)
    monkeypatch.setattr(fusb, "_packaged_libusb_backend", lambda: backend)
    assert [d.serial_number for d in fusb.find_usb_devices(0x1209, 0x0002)] == ["SHOE-1"]


def test_permission_denied_hints_at_the_udev_rules(bus):
    backend, shoe = bus
    shoe.faults.access_denied = True
    for selector in ("usb://1209:0002", SHOE):  # without a serial, and with one (reading it needs access)
        with pytest.raises(TransportError) as info:
            opened(backend, selector)
        assert info.value.hint == fusb.HINT_ACCESS
        assert "udev rules" in str(info.value)


def test_a_busy_interface_hints_at_another_process_or_driver(bus):
    backend, shoe = bus
    shoe.faults.busy_on_claim = True
    with pytest.raises(TransportError, match="Resource busy") as info:
        opened(backend)
    assert info.value.hint == fusb.HINT_BUSY
    assert not shoe.claims


def test_a_second_host_cannot_claim_a_claimed_interface(bus):
    backend, shoe = bus
    first = opened(backend)
    try:
        with pytest.raises(TransportError) as info:
            opened(backend)
        assert info.value.hint == fusb.HINT_BUSY
    finally:
        first.close()
    opened(backend).close()  # free again once the first host let go


def test_a_missing_device_says_so(bus):
    backend, _ = bus
    with pytest.raises(TransportError, match="no USB device usb://1209:0001") as info:
        opened(backend, "usb://1209:0001")
    assert info.value.hint == fusb.HINT_NOT_FOUND
    with pytest.raises(TransportError, match=r"serial numbers \['SHOE-1'\]"):
        opened(backend, "usb://1209:0002/SHOE-2")


def test_two_matching_devices_need_a_serial_number(bus):
    backend, _ = bus
    backend.add(EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-2"))
    with pytest.raises(TransportError, match=r"2 USB devices match .*'SHOE-1', 'SHOE-2'") as info:
        opened(backend, "usb://1209:0002")
    assert "usb://1209:0002/SERIAL" in info.value.hint
    assert [d.open_handles for d in backend.devices] == [0, 0], "devices opened to read serials were left open"
    t = opened(backend, "usb://1209:0002/SHOE-2")
    assert t.bus_address == (1, backend.devices[1].address)
    assert [d.open_handles for d in backend.devices] == [0, 1]
    t.close()
    assert [d.open_handles for d in backend.devices] == [0, 0]


def test_a_device_without_a_vendor_interface_is_refused(bus):
    backend, shoe = bus
    shoe.interfaces[1][0][0].bInterfaceClass = 0x02
    with pytest.raises(TransportError, match="no interface of class 0xff"):
        opened(backend)


# -- descriptors, claiming, kernel driver ------------------------------------------------------


def test_open_finds_the_vendor_interface_and_its_bulk_endpoints(bus):
    backend, shoe = bus
    t = opened(backend)
    try:
        assert t._intf_number == 1
        assert t._ep_in.bEndpointAddress == EP_IN and t._ep_out.bEndpointAddress == 0x01
        assert shoe.claims and 1 in shoe.claims
        assert shoe.config_resets == 0, "set_configuration on a configured device resets it"
    finally:
        t.close()
    assert not shoe.claims and shoe.open_handles == 0


def test_an_unconfigured_device_is_configured(bus):
    backend, shoe = bus
    shoe.configuration = 0
    t = opened(backend)
    assert shoe.configuration == 1
    t.close()


def test_a_kernel_driver_is_detached_on_open_and_reattached_on_close(bus):
    backend, shoe = bus
    shoe.faults.kernel_driver = {1}
    t = opened(backend)
    assert shoe.detached == {1} and shoe.faults.kernel_driver == set()
    t.close()
    assert shoe.faults.kernel_driver == {1} and shoe.detached == set()


def test_a_kernel_driver_is_reattached_when_the_claim_fails(bus):
    backend, shoe = bus
    shoe.faults.kernel_driver = {1}
    shoe.faults.busy_on_claim = True
    with pytest.raises(TransportError):
        opened(backend)
    assert shoe.faults.kernel_driver == {1}


def test_pyusb_reads_the_descriptors_and_strings(bus):
    backend, shoe = bus
    dev = usb.core.find(idVendor=0x1209, idProduct=0x0002, backend=backend)
    assert (dev.manufacturer, dev.product, dev.serial_number) == (
        "threecard-table emulators", "Three Card shoe (emulated)", "SHOE-1")
    cfg = dev[0]
    interfaces = list(cfg)  # pyusb walks alternate settings until IndexError
    assert [(i.bInterfaceNumber, i.bInterfaceClass) for i in interfaces] == [(0, 0xFE), (1, 0xFF)]
    assert [e.wMaxPacketSize for e in interfaces[1]] == [MAX_PACKET_SIZE] * 2
    raw = usb.control.get_descriptor(dev, 18, usb.util.DESC_TYPE_DEVICE, 0)
    assert int.from_bytes(bytes(raw[8:10]), "little") == 0x1209
    usb.util.dispose_resources(dev)


def test_a_missing_alternate_setting_raises_index_error(bus):
    backend, _ = bus
    (enumerated,) = backend.enumerate_devices()
    assert backend.get_interface_descriptor(enumerated, 1, 0, 0).bInterfaceClass == 0xFF
    with pytest.raises(IndexError):
        backend.get_interface_descriptor(enumerated, 1, 1, 0)
    with pytest.raises(IndexError):
        backend.get_endpoint_descriptor(enumerated, 2, 1, 0, 0)
    with pytest.raises(IndexError):
        backend.get_configuration_descriptor(enumerated, 1)


def test_the_fake_backend_never_loads_libusb(monkeypatch, bus):
    backend, _ = bus

    def forbidden(*a, **kw):
        raise AssertionError("libusb was looked up")

    for module in (usb.backend.libusb1, usb.backend.libusb0, usb.backend.openusb):
        monkeypatch.setattr(module, "get_backend", forbidden)
    t = opened(backend)
    t.close()


# -- transfers ------------------------------------------------------------------------------------


def test_bytes_flow_both_ways_and_reads_keep_what_does_not_fit(bus):
    backend, shoe = bus
    t = opened(backend)
    try:
        t.write(b"host->device")
        assert shoe.port.read() == b"host->device"
        shoe.port.write(bytes(range(100)))
        got = t.read(30)
        assert got == bytes(range(30))
        rest = b""
        while len(rest) < 70:
            rest += t.read(512)
        assert rest == bytes(range(30, 100))
    finally:
        t.close()


def test_a_short_buffer_overflows_as_on_libusb(bus):
    backend, shoe = bus
    dev = usb.core.find(idVendor=0x1209, idProduct=0x0002, backend=backend)
    shoe.port.write(bytes(100))
    with pytest.raises(usb.core.USBError) as info:
        dev.read(EP_IN, 10, 100)
    assert info.value.errno == errno.EOVERFLOW
    usb.util.dispose_resources(dev)


def test_a_timed_out_in_transfer_is_an_empty_read_and_the_data_waits(bus):
    backend, shoe = bus
    t = opened(backend, read_timeout_ms=20)
    try:
        shoe.port.write(b"late")
        shoe.faults.in_timeouts = 1
        assert t.read(64) == b""
        assert t.read(64) == b"late"
    finally:
        t.close()


def test_unplugging_during_a_blocked_read_is_link_lost(bus):
    backend, shoe = bus
    t = opened(backend, read_timeout_ms=10_000)
    outcome: queue.Queue = queue.Queue()

    def reader():
        try:
            outcome.put(t.read(64))
        except LinkLost as exc:
            outcome.put(exc)

    th = threading.Thread(target=reader)
    th.start()
    shoe.unplug()  # whether the read has started yet or not, it must end in ENODEV
    th.join()
    t.close()
    err = outcome.get_nowait()
    assert isinstance(err, LinkLost) and "No such device" in str(err)


def test_unplugging_during_a_write_is_link_lost(bus):
    backend, shoe = bus
    t = opened(backend)
    shoe.faults.unplug_during_write = True
    with pytest.raises(LinkLost, match="No such device"):
        t.write(b"0123456789")
    t.close()
    with pytest.raises(TransportError, match="no USB device"):
        opened(backend)


def test_after_a_replug_the_transport_finds_the_device_at_its_new_address(bus):
    backend, shoe = bus
    t = opened(backend)
    old = t.bus_address
    shoe.unplug()
    shoe.plug()
    with pytest.raises(LinkLost):
        t.write(b"x")  # the old handle died with the unplug
    t.close()
    t.open()
    assert t.bus_address != old
    t.write(b"again")
    assert shoe.port.read() == b"again"
    t.close()


def test_closed_transport_raises_link_lost(bus):
    backend, _ = bus
    t = opened(backend)
    t.close()
    t.close()
    with pytest.raises(LinkLost):
        t.read(1)
    with pytest.raises(LinkLost):
        t.write(b"x")


# -- the link over USB -------------------------------------------------------------------------------

FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=200, max_attempts=12, heartbeat_interval_ms=60_000,
                  reconnect_initial_ms=20, reconnect_max_ms=200, reconnect_wait_s=10, read_timeout_ms=50)


def test_a_reply_held_back_by_in_timeouts_is_retransmitted_and_acted_on_once():
    dev = EmulatedUsbDevice(DeviceKind.SHUFFLER, serial_number="SHF-1")
    backend = EmulatorUsbBackend([dev])
    emu = ShufflerEmulator(dev.port, rng=random.Random(1), serial_number="SHF-1").start()
    events: queue.Queue = queue.Queue()
    try:
        with Shuffler.open("usb://1209:0001", usb_backend=backend, config=FAST, events=events) as shuffler:
            emu.insert(new_deck(BackColour.RED))
            events.get(timeout=5)
            dev.faults.in_timeouts = 4  # each holds the reply back for a 50 ms read; the retransmit timeout is 25 ms
            shuffler.shuffle()
            assert shuffler.link.stats.retransmits >= 1
            assert emu.shuffles == 1
            assert isinstance(events.get(timeout=5).message, DeckVerified)
    finally:
        emu.stop()
        backend.close()


def test_a_cable_pull_takes_the_reconnect_path_and_handshakes_again(shoe_bus):
    backend, dev, emu = shoe_bus
    events: queue.Queue = queue.Queue()
    with CardShoe.open("usb://1209:0002", usb_backend=backend, config=FAST, events=events) as shoe:
        first = shoe.link.transport.bus_address
        dev.unplug()
        assert _next_notice(events) == "link_down"
        dev.plug()
        assert _next_notice(events) == "link_up"
        assert shoe.status().cards == 0
        assert shoe.link.stats.reconnects == 1
        assert shoe.link.transport.bus_address != first


def test_a_device_that_stays_away_fails_requests_with_link_lost(shoe_bus):
    backend, dev, emu = shoe_bus
    config = LinkConfig(retransmit_initial_ms=25, heartbeat_interval_ms=60_000, reconnect_initial_ms=20,
                        reconnect_max_ms=50, reconnect_wait_s=0.2, read_timeout_ms=50)
    with CardShoe.open(SHOE, usb_backend=backend, config=config) as shoe:
        dev.unplug()
        with pytest.raises(LinkLost):
            shoe.status()


def test_raw_frames_round_trip_over_usb(shoe_bus):
    """Below the link: an Identify and a GetStatus frame written by hand get replies."""
    backend, dev, emu = shoe_bus
    t = opened(backend, read_timeout_ms=1000)
    try:
        parser = FrameParser()
        for seq, msg in ((0, Identify()), (1, GetStatus())):
            t.write(encode_frame(seq, *encode_message(msg)))
            frames = []
            while not frames:
                frames = list(parser.feed(t.read(512)))
            assert frames[0].seq == seq
    finally:
        t.close()


def _next_notice(events: queue.Queue) -> str:
    while True:
        ev = events.get(timeout=10)
        if isinstance(ev.message, LinkNotice):
            return ev.message.kind


def _libusb_present() -> bool:
    try:
        return usb.backend.libusb1.get_backend() is not None
    except Exception:
        return False


@pytest.mark.skipif(not _libusb_present(), reason="libusb-1.0 is not installed (apt install libusb-1.0-0)")
def test_the_real_libusb_backend_enumerates_and_reports_a_missing_device():
    """With libusb, the default backend path works; the emulators' IDs are not on a real bus."""
    assert isinstance(fusb.find_usb_devices(0x1209, 0x7FFF), list)
    with pytest.raises(TransportError) as info:
        UsbTransport("usb://1209:7fff/NOT-HERE").open()
    assert info.value.hint == fusb.HINT_NOT_FOUND
