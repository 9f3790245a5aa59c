"""Emulated USB devices behind a pure-Python pyusb backend.

:class:`EmulatorUsbBackend` is a ``usb.backend.IBackend``: pass it to
``usb.core.find(..., backend=...)`` and the host's real pyusb code finds,
opens, claims and talks to the shuffler and shoe emulators as if they were on
the bus. No libusb is loaded. Each :class:`EmulatedUsbDevice` presents:

* a device descriptor (VID/PID, strings for manufacturer, product, serial);
* one configuration with two interfaces: 0 is a DFU-style interface with no
  endpoints (class 0xFE, as real firmware-updatable devices have), 1 is the
  link interface, vendor-specific class 0xFF, with a bulk IN endpoint
  (``EP_IN`` 0x81) listed before a bulk OUT endpoint (``EP_OUT`` 0x01), both
  ``MAX_PACKET_SIZE`` (64) bytes: full-speed bulk;
* bulk transfers carried over a ``socket.socketpair()`` whose device end is
  the emulator's :class:`~simulators.firmware.DevicePort`.

It behaves as libusb does where the host can tell the difference: errors are
``usb.core.USBError`` with libusb's error code and the matching errno
(EACCES, EBUSY, ENODEV, EOVERFLOW, EPIPE), a timeout is
``usb.core.USBTimeoutError``, a timeout of 0 ms waits for ever, a missing
configuration, interface, alternate setting or endpoint index raises
``IndexError`` (pyusb iterates alternate settings until it does), claiming an
interface held by a kernel driver or another handle raises EBUSY, and
``set_configuration`` on a configured device resets it (counted in
``config_resets``, docs/pitfalls.md, "USB").

Injectable faults (:class:`UsbFaults`, per device, and :meth:`EmulatedUsbDevice.unplug`):
IN transfers that time out, EBUSY on claim, EACCES on open, ENODEV in the
middle of a bulk OUT transfer, and unplugging while a bulk IN transfer is
blocked (ENODEV mid-transfer).

Imports ``protocols`` and pyusb's backend API only, never ``firmware_bridge``
or ``devices`` (docs/architecture.md, "The layer rule"). Blocking transfers wait in
``selectors`` on the host end of the socket and a wake-up pipe, never in a
polling loop.
"""

from __future__ import annotations

import array
import errno
import itertools
import os
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Iterable, Iterator

import usb.backend
from usb.core import USBError, USBTimeoutError

from protocols.messages import DeviceKind

# -- the emulators' USB identity ---------------------------------------------------

#: pid.codes' vendor ID for open-source hardware. Its PIDs 0x0000-0x0FFF are
#: reserved for common tasks such as testing: the emulators use two of them.
#: Never ship a device with these IDs; real devices carry their vendor's IDs,
#: which the host is configured with.
EMULATOR_VENDOR_ID = 0x1209
#: PID of the emulated shuffler (a pid.codes test PID).
EMULATOR_SHUFFLER_PRODUCT_ID = 0x0001
#: PID of the emulated shoe (a pid.codes test PID).
EMULATOR_SHOE_PRODUCT_ID = 0x0002
EMULATOR_PRODUCT_IDS = {DeviceKind.SHUFFLER: EMULATOR_SHUFFLER_PRODUCT_ID, DeviceKind.SHOE: EMULATOR_SHOE_PRODUCT_ID}

LINK_INTERFACE = 1
EP_IN = 0x81
EP_OUT = 0x01
MAX_PACKET_SIZE = 64  # bytes, full-speed bulk
LANGID_EN_US = 0x0409

# libusb error codes, as usb.backend.libusb1 reports them in ``backend_error_code``.
LIBUSB_ERROR_IO = -1
LIBUSB_ERROR_INVALID_PARAM = -2
LIBUSB_ERROR_ACCESS = -3
LIBUSB_ERROR_NO_DEVICE = -4
LIBUSB_ERROR_NOT_FOUND = -5
LIBUSB_ERROR_BUSY = -6
LIBUSB_ERROR_TIMEOUT = -7
LIBUSB_ERROR_OVERFLOW = -8
LIBUSB_ERROR_PIPE = -9

_ERRNO = {
    LIBUSB_ERROR_IO: errno.EIO,
    LIBUSB_ERROR_INVALID_PARAM: errno.EINVAL,
    LIBUSB_ERROR_ACCESS: errno.EACCES,
    LIBUSB_ERROR_NO_DEVICE: errno.ENODEV,
    LIBUSB_ERROR_NOT_FOUND: errno.ENOENT,
    LIBUSB_ERROR_BUSY: errno.EBUSY,
    LIBUSB_ERROR_TIMEOUT: errno.ETIMEDOUT,
    LIBUSB_ERROR_OVERFLOW: errno.EOVERFLOW,
    LIBUSB_ERROR_PIPE: errno.EPIPE,
}
_MESSAGES = {
    LIBUSB_ERROR_IO: "Input/Output Error",
    LIBUSB_ERROR_INVALID_PARAM: "Invalid parameter",
    LIBUSB_ERROR_ACCESS: "Access denied (insufficient permissions)",
    LIBUSB_ERROR_NO_DEVICE: "No such device (it may have been disconnected)",
    LIBUSB_ERROR_NOT_FOUND: "Entity not found",
    LIBUSB_ERROR_BUSY: "Resource busy",
    LIBUSB_ERROR_TIMEOUT: "Operation timed out",
    LIBUSB_ERROR_OVERFLOW: "Overflow",
    LIBUSB_ERROR_PIPE: "Pipe error",
}


def _usb_error(code: int) -> USBError:
    """The exception libusb1's backend raises for ``code``."""
    cls = USBTimeoutError if code == LIBUSB_ERROR_TIMEOUT else USBError
    return cls(_MESSAGES[code], code, _ERRNO[code])


# -- device side ---------------------------------------------------------------------


@dataclass
class UsbFaults:
    """Faults to inject on one emulated device (tests and scenarios).

    * ``in_timeouts``: the next N bulk IN transfers that find data waiting
      time out instead, after their full timeout (the data is held back, not
      lost): a reply delayed past the host's retransmit timeout.
    * ``busy_on_claim``: claiming any interface fails with EBUSY, as when
      another process or a kernel driver holds it.
    * ``access_denied``: opening the device fails with EACCES, as when the
      udev rules are not installed.
    * ``unplug_during_write``: the next bulk OUT transfer delivers the first
      half of its bytes, then the device is unplugged and it fails with ENODEV.
    * ``kernel_driver``: interface numbers a kernel driver is bound to;
      claiming them raises EBUSY until the host detaches the driver.
    """

    in_timeouts: int = 0
    busy_on_claim: bool = False
    access_denied: bool = False
    unplug_during_write: bool = False
    kernel_driver: set[int] = field(default_factory=set)


class UsbDevicePort:
    """The emulator's end of the device's socket pair (a :class:`~simulators.firmware.DevicePort`).

    ``read`` is non-blocking (b"" when nothing waits); ``write`` sends all
    bytes, or drops them while the device is unplugged (an unpowered device
    sends nothing). Raises ``OSError`` once closed.
    """

    def __init__(self, sock: socket.socket, device: "EmulatedUsbDevice") -> None:
        self._sock = sock
        self._device = device
        self.name = f"usb:{device.vendor_id:04x}:{device.product_id:04x}/{device.serial_number}"

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self, max_bytes: int = 4096) -> bytes:
        try:
            return self._sock.recv(max_bytes)
        except BlockingIOError:
            return b""

    def write(self, data: bytes) -> None:
        if not self._device.connected:
            return
        view = memoryview(data)
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._sock, selectors.EVENT_WRITE)
            while view:
                try:
                    n = self._sock.send(view)
                except BlockingIOError:
                    if not sel.select(1.0) and not self._device.connected:
                        return
                    continue
                view = view[n:]
        finally:
            sel.close()

    def disconnect(self) -> None:
        """A cable pull and re-plug (the firmware's ``disconnect`` hook): the host's
        handle fails with ENODEV and the device enumerates again at a new address."""
        self._device.unplug()
        self._device.plug()

    def close(self) -> None:
        self._sock.close()


class EmulatedUsbDevice:
    """One emulated USB device: descriptors, string descriptors and a bulk IN/OUT pipe.

    ``kind`` picks the product ID (:data:`EMULATOR_PRODUCT_IDS`) unless
    ``product_id`` is given. :attr:`port` is the emulator's end of the pipe;
    give it to a :class:`~simulators.firmware.FirmwareEmulator`. The bus is
    1; the address is given by the backend and changes on every re-plug, as
    on a real bus, and handles opened before an unplug stay dead (ENODEV)
    after the device comes back. Call :meth:`close` (or the backend's) when done.
    """

    def __init__(
        self,
        kind: DeviceKind,
        *,
        serial_number: str,
        product: str | None = None,
        manufacturer: str = "threecard-table emulators",
        vendor_id: int = EMULATOR_VENDOR_ID,
        product_id: int | None = None,
        bcd_device: int = 0x0100,
        self_powered: bool = True,
    ) -> None:
        self.kind = kind
        self.vendor_id = vendor_id
        self.product_id = EMULATOR_PRODUCT_IDS[kind] if product_id is None else product_id
        self.serial_number = serial_number
        self.product = product or f"Three Card {kind} (emulated)"
        self.manufacturer = manufacturer
        self.bcd_device = bcd_device
        self.self_powered = self_powered
        self.faults = UsbFaults()
        self.bus = 1
        self.address = 0
        self.session = 0  # +1 on every plug: handles and enumerations of an older one are stale
        self.backend: "EmulatorUsbBackend | None" = None
        self.connected = True
        self.configuration = 1  # Linux configures a device when it enumerates
        self.config_resets = 0
        self.device_resets = 0
        self.claims: dict[int, object] = {}  # interface number -> handle holding it
        self.detached: set[int] = set()  # interfaces whose kernel driver a host detached
        self.open_handles = 0  # handles opened and not yet closed (a host's leak shows here)
        self.altsettings: dict[int, int] = {}
        self.lock = threading.RLock()
        host, dev = socket.socketpair()
        host.setblocking(False)
        dev.setblocking(False)
        self._host = host
        self._rx = bytearray()  # bytes the device sent that no IN transfer has taken yet
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._interrupts = 0  # cancel requests not yet seen by a blocked IN transfer
        self.port = UsbDevicePort(dev, self)
        self._strings = {1: self.manufacturer, 2: self.product, 3: self.serial_number, 4: "Three Card link v1", 5: "DFU"}
        self._build_descriptors()

    # -- descriptors ---------------------------------------------------------------

    def _build_descriptors(self) -> None:
        def ep(address: int) -> SimpleNamespace:
            return SimpleNamespace(bLength=7, bDescriptorType=5, bEndpointAddress=address, bmAttributes=0x02,
                                   wMaxPacketSize=MAX_PACKET_SIZE, bInterval=0, bRefresh=0, bSynchAddress=0,
                                   extra_descriptors=[])

        dfu = SimpleNamespace(bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0,
                              bNumEndpoints=0, bInterfaceClass=0xFE, bInterfaceSubClass=0x01,
                              bInterfaceProtocol=0x01, iInterface=5, extra_descriptors=[])
        link = SimpleNamespace(bLength=9, bDescriptorType=4, bInterfaceNumber=LINK_INTERFACE, bAlternateSetting=0,
                               bNumEndpoints=2, bInterfaceClass=0xFF, bInterfaceSubClass=0x00,
                               bInterfaceProtocol=0x00, iInterface=4, extra_descriptors=[])
        # interfaces[i][alt] -> (descriptor, [endpoint descriptors])
        self.interfaces: list[list[tuple[SimpleNamespace, list[SimpleNamespace]]]] = [
            [(dfu, [])],
            [(link, [ep(EP_IN), ep(EP_OUT)])],
        ]
        total = 9 + sum(9 + 7 * len(eps) for alts in self.interfaces for _, eps in alts)
        self.config_descriptor = SimpleNamespace(
            bLength=9, bDescriptorType=2, wTotalLength=total, bNumInterfaces=len(self.interfaces),
            bConfigurationValue=1, iConfiguration=0, bmAttributes=0xC0 if self.self_powered else 0x80,
            bMaxPower=50, extra_descriptors=[])

    def device_descriptor(self) -> SimpleNamespace:
        """The device descriptor pyusb reads (fields as libusb1's backend gives them)."""
        return SimpleNamespace(
            bLength=18, bDescriptorType=1, bcdUSB=0x0200, bDeviceClass=0, bDeviceSubClass=0, bDeviceProtocol=0,
            bMaxPacketSize0=64, idVendor=self.vendor_id, idProduct=self.product_id, bcdDevice=self.bcd_device,
            iManufacturer=1, iProduct=2, iSerialNumber=3, bNumConfigurations=1,
            bus=self.bus, address=self.address, port_number=self.address, port_numbers=(self.address,),
            speed=2)  # libusb: 2 = full speed

    def _raw_descriptor(self, dtype: int, index: int, langid: int) -> bytes:
        """The bytes a GET_DESCRIPTOR control request returns. Raises EPIPE (a stall) if absent."""
        if dtype == 3:  # string
            if index == 0:
                return bytes([4, 3]) + LANGID_EN_US.to_bytes(2, "little")
            text = self._strings.get(index)
            if text is None or langid != LANGID_EN_US:
                raise _usb_error(LIBUSB_ERROR_PIPE)
            body = text.encode("utf-16-le")
            return bytes([2 + len(body), 3]) + body
        if dtype == 1 and index == 0:
            d = self.device_descriptor()
            return bytes([18, 1]) + d.bcdUSB.to_bytes(2, "little") + bytes([0, 0, 0, 64]) + \
                d.idVendor.to_bytes(2, "little") + d.idProduct.to_bytes(2, "little") + \
                d.bcdDevice.to_bytes(2, "little") + bytes([1, 2, 3, 1])
        if dtype == 2 and index == 0:
            c = self.config_descriptor
            out = bytes([9, 2]) + c.wTotalLength.to_bytes(2, "little") + bytes(
                [c.bNumInterfaces, c.bConfigurationValue, c.iConfiguration, c.bmAttributes, c.bMaxPower])
            for alts in self.interfaces:
                for i, eps in alts:
                    out += bytes([9, 4, i.bInterfaceNumber, i.bAlternateSetting, i.bNumEndpoints, i.bInterfaceClass,
                                  i.bInterfaceSubClass, i.bInterfaceProtocol, i.iInterface])
                    for e in eps:
                        out += bytes([7, 5, e.bEndpointAddress, e.bmAttributes]) + \
                            e.wMaxPacketSize.to_bytes(2, "little") + bytes([e.bInterval])
            return out
        raise _usb_error(LIBUSB_ERROR_PIPE)

    def _interface(self, number: int) -> list[tuple[SimpleNamespace, list[SimpleNamespace]]]:
        for alts in self.interfaces:
            if alts[0][0].bInterfaceNumber == number:
                return alts
        raise _usb_error(LIBUSB_ERROR_NOT_FOUND)

    def _endpoint(self, address: int, intf: int) -> SimpleNamespace:
        alts = self._interface(intf)
        _, eps = alts[self.altsettings.get(intf, 0)]
        for e in eps:
            if e.bEndpointAddress == address:
                return e
        raise _usb_error(LIBUSB_ERROR_NOT_FOUND)

    # -- plugging ------------------------------------------------------------------

    def unplug(self) -> None:
        """Pull the cable: transfers in progress and later ones fail with ENODEV,
        the backend stops listing the device, bytes in flight are lost."""
        with self.lock:
            self.connected = False
            self.claims.clear()
            self._rx.clear()
            _drain(self._host)
            _drain(self.port._sock)
        self._wake()

    def plug(self, address: int | None = None) -> None:
        """Plug the device (back) in at a new bus ``address`` (default: the backend's next)."""
        with self.lock:
            if address is None:
                address = self.backend.next_address() if self.backend is not None else self.address + 1
            _drain(self._host)
            self._rx.clear()
            self.address = address
            self.session += 1
            self.configuration = 1
            self.altsettings.clear()
            self.connected = True

    # -- transfers -----------------------------------------------------------------

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except OSError:
            pass

    def interrupt(self) -> None:
        """Make one blocked (or the next) IN transfer return early with a timeout."""
        with self.lock:
            self._interrupts += 1
        self._wake()

    def _alive(self, session: int) -> None:
        if not self.connected or session != self.session:
            raise _usb_error(LIBUSB_ERROR_NO_DEVICE)

    def bulk_in(self, buff: array.array, timeout_ms: int, session: int) -> int:
        """Fill ``buff`` with what the device has sent, waiting up to ``timeout_ms``
        (0: no limit). Returns the byte count. Raises USBTimeoutError, USBError
        (ENODEV unplugged, EOVERFLOW when more bytes wait than a buffer that is not a
        multiple of ``MAX_PACKET_SIZE`` can take)."""
        size = len(buff) * buff.itemsize
        deadline = None if timeout_ms == 0 else time.monotonic() + timeout_ms / 1000
        timed_out = False  # this transfer was picked by the ``in_timeouts`` fault
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._wake_r, selectors.EVENT_READ)
            sel.register(self._host, selectors.EVENT_READ)
            while True:
                with self.lock:
                    self._alive(session)
                    if self._interrupts:
                        self._interrupts -= 1
                        raise _usb_error(LIBUSB_ERROR_TIMEOUT)
                    if not timed_out:
                        try:
                            chunk = self._host.recv(65536)
                        except BlockingIOError:
                            chunk = None
                        if chunk == b"":  # the emulator closed its end: the device is gone
                            raise _usb_error(LIBUSB_ERROR_NO_DEVICE)
                        self._rx += chunk or b""
                        if self._rx and self.faults.in_timeouts > 0:
                            self.faults.in_timeouts -= 1
                            timed_out = True
                            sel.unregister(self._host)
                        elif self._rx:
                            if size % MAX_PACKET_SIZE and len(self._rx) > size:
                                del self._rx[:size]
                                raise _usb_error(LIBUSB_ERROR_OVERFLOW)
                            n = min(size, len(self._rx))
                            buff[:n] = array.array("B", self._rx[:n])
                            del self._rx[:n]
                            return n
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise _usb_error(LIBUSB_ERROR_TIMEOUT)
                for key, _ in sel.select(remaining):
                    if key.fileobj == self._wake_r:
                        try:
                            os.read(self._wake_r, 512)
                        except BlockingIOError:
                            pass
        finally:
            sel.close()

    def bulk_out(self, data: array.array, timeout_ms: int, session: int) -> int:
        """Send ``data`` to the device; returns the byte count. Raises USBTimeoutError
        when the device takes nothing for ``timeout_ms`` (0: no limit), USBError ENODEV."""
        payload = bytes(data)
        with self.lock:
            self._alive(session)
            if self.faults.unplug_during_write:
                self.faults.unplug_during_write = False
                self._send_all(payload[: len(payload) // 2], timeout_ms, session)
                self.unplug()
                raise _usb_error(LIBUSB_ERROR_NO_DEVICE)
        return self._send_all(payload, timeout_ms, session)

    def _send_all(self, payload: bytes, timeout_ms: int, session: int) -> int:
        view = memoryview(payload)
        deadline = None if timeout_ms == 0 else time.monotonic() + timeout_ms / 1000
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._host, selectors.EVENT_WRITE)
            while view:
                self._alive(session)
                try:
                    view = view[self._host.send(view):]
                    continue
                except BlockingIOError:
                    pass
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise _usb_error(LIBUSB_ERROR_TIMEOUT)
                sel.select(remaining)
        finally:
            sel.close()
        return len(payload)

    def close(self) -> None:
        """Close the host end, the emulator's end and the wake pipe; safe to call twice."""
        self.connected = False
        self._host.close()
        self.port.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = -1


def _drain(sock: socket.socket) -> None:
    """Discard the bytes waiting on a non-blocking socket."""
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


# -- backend ---------------------------------------------------------------------------


class _Enumerated:
    """What ``enumerate_devices`` yields: a device as enumerated in one plug session."""

    def __init__(self, device: EmulatedUsbDevice) -> None:
        self.device = device
        self.session = device.session


class _Handle:
    """What ``open_device`` returns: one host's open of one device in one plug session."""

    def __init__(self, device: EmulatedUsbDevice, session: int) -> None:
        self.device = device
        self.session = session
        self.open = True


class EmulatorUsbBackend(usb.backend.IBackend):
    """A pyusb backend whose bus holds only :class:`EmulatedUsbDevice` objects.

    Usage::

        backend = EmulatorUsbBackend([EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-1")])
        dev = usb.core.find(idVendor=0x1209, idProduct=0x0002, backend=backend)

    Device identifications (what ``enumerate_devices`` yields) and handles
    are private and belong to one plug session: after a re-plug the host must
    find the device again, as with libusb. Only connected devices are listed.
    Beyond ``IBackend``: :meth:`cancel_transfers` ends a blocked IN transfer
    early (hosts may call it to stop a reader at once), :meth:`close`.
    """

    def __init__(self, devices: Iterable[EmulatedUsbDevice] = ()) -> None:
        super().__init__()
        self.devices: list[EmulatedUsbDevice] = []
        self._addresses = itertools.count(2)  # address 1 is the root hub's
        for d in devices:
            self.add(d)

    def add(self, device: EmulatedUsbDevice) -> EmulatedUsbDevice:
        """Put ``device`` on the bus at the next free address; returns it."""
        device.backend = self
        device.plug(self.next_address())
        self.devices.append(device)
        return device

    def next_address(self) -> int:
        """A bus address not given out before (addresses grow, as Linux assigns them)."""
        return next(self._addresses)

    def close(self) -> None:
        """Close every device's sockets and pipes; safe to call twice."""
        for d in self.devices:
            d.close()

    # -- enumeration and descriptors ------------------------------------------------

    def enumerate_devices(self) -> Iterator[_Enumerated]:
        return iter([_Enumerated(d) for d in self.devices if d.connected])

    def get_parent(self, dev):
        return None

    def get_device_descriptor(self, dev: _Enumerated):
        return dev.device.device_descriptor()

    def get_configuration_descriptor(self, dev: _Enumerated, config: int):
        if config != 0:
            raise IndexError(f"no configuration at index {config}")
        return dev.device.config_descriptor

    def get_interface_descriptor(self, dev: _Enumerated, intf: int, alt: int, config: int):
        dev = dev.device
        if config != 0 or not 0 <= intf < len(dev.interfaces) or not 0 <= alt < len(dev.interfaces[intf]):
            raise IndexError(f"no interface {intf} alternate setting {alt} in configuration {config}")
        return dev.interfaces[intf][alt][0]

    def get_endpoint_descriptor(self, dev: _Enumerated, ep: int, intf: int, alt: int, config: int):
        dev = dev.device
        if config != 0 or not 0 <= intf < len(dev.interfaces) or not 0 <= alt < len(dev.interfaces[intf]):
            raise IndexError(f"no interface {intf} alternate setting {alt} in configuration {config}")
        eps = dev.interfaces[intf][alt][1]
        if not 0 <= ep < len(eps):
            raise IndexError(f"no endpoint {ep} in interface {intf} alternate setting {alt}")
        return eps[ep]

    # -- handles -----------------------------------------------------------------------

    def _check(self, handle: _Handle) -> EmulatedUsbDevice:
        if not handle.open:
            raise _usb_error(LIBUSB_ERROR_INVALID_PARAM)
        handle.device._alive(handle.session)
        return handle.device

    def open_device(self, dev: _Enumerated) -> _Handle:
        device = dev.device
        device._alive(dev.session)
        if device.faults.access_denied:
            raise _usb_error(LIBUSB_ERROR_ACCESS)
        with device.lock:
            device._interrupts = 0
            device.open_handles += 1
        return _Handle(device, dev.session)

    def close_device(self, dev_handle: _Handle) -> None:
        dev = dev_handle.device
        with dev.lock:
            for intf, holder in list(dev.claims.items()):
                if holder is dev_handle:
                    del dev.claims[intf]
            if dev_handle.open:
                dev.open_handles -= 1
        dev_handle.open = False

    def get_configuration(self, dev_handle: _Handle) -> int:
        return self._check(dev_handle).configuration

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        dev = self._check(dev_handle)
        with dev.lock:
            if config_value not in (0, dev.config_descriptor.bConfigurationValue):
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            if dev.claims:
                raise _usb_error(LIBUSB_ERROR_BUSY)
            if dev.configuration:
                dev.config_resets += 1  # a SET_CONFIGURATION resets the device's endpoints
            dev.configuration = config_value
            dev.altsettings.clear()

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        dev = self._check(dev_handle)
        alts = dev._interface(intf)
        if not any(d.bAlternateSetting == altsetting for d, _ in alts):
            raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
        with dev.lock:
            dev.altsettings[intf] = [d.bAlternateSetting for d, _ in alts].index(altsetting)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        dev._interface(intf)
        with dev.lock:
            holder = dev.claims.get(intf)
            if holder is dev_handle:
                return
            if dev.faults.busy_on_claim or intf in dev.faults.kernel_driver or holder is not None:
                raise _usb_error(LIBUSB_ERROR_BUSY)
            if not dev.configuration:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            dev.claims[intf] = dev_handle

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        with dev.lock:
            if dev.claims.get(intf) is not dev_handle:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            del dev.claims[intf]

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        dev = self._check(dev_handle)
        dev._interface(intf)
        return intf in dev.faults.kernel_driver

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        with dev.lock:
            if intf not in dev.faults.kernel_driver:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            dev.faults.kernel_driver.discard(intf)
            dev.detached.add(intf)

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        dev = self._check(dev_handle)
        with dev.lock:
            if dev.claims.get(intf) is not None:
                raise _usb_error(LIBUSB_ERROR_BUSY)
            dev.faults.kernel_driver.add(intf)
            dev.detached.discard(intf)

    # -- transfers -----------------------------------------------------------------------

    def _claimed(self, dev_handle: _Handle, ep: int, intf: int, direction_in: bool) -> EmulatedUsbDevice:
        dev = self._check(dev_handle)
        with dev.lock:
            if dev.claims.get(intf) is not dev_handle:
                raise _usb_error(LIBUSB_ERROR_BUSY if intf in dev.claims else LIBUSB_ERROR_NOT_FOUND)
            e = dev._endpoint(ep, intf)
        if bool(e.bEndpointAddress & 0x80) != direction_in or e.bmAttributes & 0x3 != 0x2:
            raise _usb_error(LIBUSB_ERROR_INVALID_PARAM)
        return dev

    def bulk_write(self, dev_handle: _Handle, ep: int, intf: int, data: array.array, timeout: int) -> int:
        return self._claimed(dev_handle, ep, intf, False).bulk_out(data, timeout, dev_handle.session)

    def bulk_read(self, dev_handle: _Handle, ep: int, intf: int, buff: array.array, timeout: int) -> int:
        return self._claimed(dev_handle, ep, intf, True).bulk_in(buff, timeout, dev_handle.session)

    def ctrl_transfer(self, dev_handle: _Handle, bmRequestType: int, bRequest: int, wValue: int, wIndex: int,
                      data: array.array, timeout: int):
        dev = self._check(dev_handle)
        if bmRequestType == 0x80 and bRequest == 0x06:  # standard GET_DESCRIPTOR to the device
            raw = dev._raw_descriptor(wValue >> 8, wValue & 0xFF, wIndex)
            n = min(len(raw), len(data) * data.itemsize)
            data[:n] = array.array("B", raw[:n])
            return n
        if bmRequestType == 0x80 and bRequest == 0x08:  # GET_CONFIGURATION
            if len(data):
                data[0] = dev.configuration
            return min(1, len(data))
        raise _usb_error(LIBUSB_ERROR_PIPE)  # the device stalls requests it does not know

    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        self._check(dev_handle)

    def reset_device(self, dev_handle: _Handle) -> None:
        dev = self._check(dev_handle)
        with dev.lock:
            dev.device_resets += 1
            dev.claims.clear()
            dev.altsettings.clear()

    # -- extension ---------------------------------------------------------------------------

    def cancel_transfers(self, dev_handle: _Handle) -> None:
        """End the IN transfer blocked on this handle's device (or the next one) with a
        timeout, so a host's reader thread can stop at once. Not part of ``IBackend``:
        libusb's synchronous transfers cannot be cancelled; hosts call it if present."""
        dev_handle.device.interrupt()
