"""USB transport: the link over a device's vendor-specific bulk interface, with pyusb.

A device is named by a *USB selector*, written like a URL so the CLI and
configuration files can name it wherever they name a serial port::

    usb://VID:PID            e.g. usb://1209:0001
    usb://VID:PID/SERIAL     e.g. usb://1209:0002/SHOE-SIM-0001

VID and PID are 4 hex digits; SERIAL is the device's USB serial-number string
(percent-encode any ``/``, ``%`` or space in it). Without a serial number the
selector must match exactly one device.

:class:`UsbTransport` finds the device with ``usb.core.find`` (the pyusb
``backend`` is injectable: tests pass the emulators' pure-Python one), finds
the interface of class 0xFF and its bulk IN and OUT endpoints in the
descriptors, detaches a kernel driver bound to that interface (and reattaches
it on close), and claims the interface. It does not set the configuration of
a device that already has one: that would reset it (docs/pitfalls.md, "USB").

Errors: :class:`~firmware_bridge.errors.TransportError` with a ``hint`` when
the device cannot be opened (no libusb, EACCES, EBUSY, no such device);
:class:`~firmware_bridge.errors.LinkLost` when an open device fails (ENODEV,
EIO: unplugged). A lost USB link is reopened exactly like a serial one: a new
:meth:`UsbTransport.open` finds the device again (at its new bus address),
and the link handshakes again.
"""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import usb.core
import usb.util

from .errors import LinkLost, TransportError

#: Scheme of USB selectors.
USB_SCHEME = "usb://"

#: The USB IDs the host looks for, by device role: the one place they are set.
#: The defaults are the emulators' IDs (pid.codes' open-source VID 0x1209 with
#: two PIDs from its range reserved for testing); a table with real devices
#: names them by selector (``--shuffler-url usb://VID:PID``) or in its config.
DEFAULT_USB_IDS: dict[str, tuple[int, int]] = {
    "shuffler": (0x1209, 0x0001),
    "shoe": (0x1209, 0x0002),
}

#: The interface class of the link interface (vendor-specific).
VENDOR_SPECIFIC_CLASS = 0xFF

HINT_NO_BACKEND = (
    "pyusb found no libusb: install it with `apt install libusb-1.0-0` "
    "(or `pip install 'threecard-table[usb]'`, which brings the `libusb-package` wheel)"
)
HINT_ACCESS = (
    "permission denied: install the project's udev rules (udev/README.md), "
    "add the user to their group, then re-plug the device"
)
HINT_BUSY = (
    "another process or a kernel driver holds the device's interface: "
    "stop the other program (e.g. another tablectl) or unbind the driver"
)
HINT_NOT_FOUND = "no such USB device: check the cable and power, and `tablectl devices`"
HINT_GONE = "the device went away: check the cable and power"


@dataclass(frozen=True)
class UsbSelector:
    """Which USB device to open: vendor ID, product ID (0..0xFFFF) and optional serial number."""

    vendor_id: int
    product_id: int
    serial_number: str | None = None

    def __post_init__(self) -> None:
        for name in ("vendor_id", "product_id"):
            value = getattr(self, name)
            if not 0 <= value <= 0xFFFF:
                raise ValueError(f"{name} {value!r} is not a 16-bit number")
        if self.serial_number == "":
            object.__setattr__(self, "serial_number", None)

    @classmethod
    def parse(cls, text: str) -> "UsbSelector":
        """Parse ``usb://VID:PID[/SERIAL]`` (hex IDs, percent-encoded serial).

        Raises ``ValueError`` with the expected form when ``text`` is not one.
        """
        form = "expected usb://VID:PID[/SERIAL] with VID and PID in hex, e.g. usb://1209:0001/SHF-0042"
        if not text.lower().startswith(USB_SCHEME):
            raise ValueError(f"{text!r} is not a USB selector: {form}")
        rest = text[len(USB_SCHEME):]
        ids, _, serial = rest.partition("/")
        vid, sep, pid = ids.partition(":")
        try:
            if not sep or not vid or not pid or len(vid) > 4 or len(pid) > 4:
                raise ValueError
            return cls(int(vid, 16), int(pid, 16), unquote(serial) or None)
        except ValueError:
            raise ValueError(f"{text!r}: {form}") from None

    def __str__(self) -> str:
        base = f"{USB_SCHEME}{self.vendor_id:04x}:{self.product_id:04x}"
        return base + (f"/{quote(self.serial_number, safe='')}" if self.serial_number else "")

    def matches(self, device: Any) -> bool:
        """True when ``device`` (a ``usb.core.Device``) has these IDs (serial not checked)."""
        same: bool = device.idVendor == self.vendor_id and device.idProduct == self.product_id
        return same


def is_usb_selector(url: str) -> bool:
    """True when ``url`` names a USB device (``usb://...``), not a pyserial URL."""
    return isinstance(url, str) and url.lower().startswith(USB_SCHEME)


def find_usb_devices(
    vendor_id: int | None = None, product_id: int | None = None, *, backend: Any = None
) -> list[Any]:
    """Every ``usb.core.Device`` with these IDs (None: any), in bus order.

    Raises :class:`TransportError` (hint: install libusb) when pyusb has no
    backend, or with the matching hint when the bus cannot be enumerated.
    """
    query = {k: v for k, v in (("idVendor", vendor_id), ("idProduct", product_id)) if v is not None}
    try:
        try:
            return list(usb.core.find(find_all=True, backend=backend, **query))
        except usb.core.NoBackendError:
            fallback = None if backend is not None else _packaged_libusb_backend()
            if fallback is None:
                raise
            return list(usb.core.find(find_all=True, backend=fallback, **query))
    except usb.core.NoBackendError as exc:
        raise TransportError(f"cannot enumerate USB devices: {exc}", HINT_NO_BACKEND) from exc
    except usb.core.USBError as exc:
        raise _open_error("cannot enumerate USB devices", exc) from exc


def _packaged_libusb_backend() -> Any:
    """libusb from the optional ``libusb-package`` wheel (the ``usb`` extra), or None."""
    try:
        import libusb_package  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return libusb_package.get_libusb1_backend()
    except Exception:  # a broken wheel is the same state as no wheel
        return None


def read_serial_number(device: Any) -> str | None:
    """The device's serial-number string, or None when it has none or it cannot be
    read (reading it opens the device, which needs permission)."""
    try:
        serial: str | None = device.serial_number
        return serial
    except (usb.core.USBError, ValueError, NotImplementedError):
        return None


def _dispose(device: Any) -> None:
    """Close whatever pyusb opened on ``device`` (handles, claims); errors ignored."""
    try:
        usb.util.dispose_resources(device)
    except (usb.core.USBError, ValueError):
        pass


def _open_error(action: str, exc: usb.core.USBError) -> TransportError:
    hint = {
        errno.EACCES: HINT_ACCESS,
        errno.EPERM: HINT_ACCESS,
        errno.EBUSY: HINT_BUSY,
        errno.ENODEV: HINT_NOT_FOUND,
        errno.ENOENT: HINT_NOT_FOUND,
    }.get(exc.errno, "")
    return TransportError(f"{action}: {exc}", hint)


class UsbTransport:
    """The link's byte stream over a USB device's vendor-specific bulk endpoints.

    ``selector``: a :class:`UsbSelector` or its ``usb://`` text.
    ``backend``: a pyusb backend for ``usb.core.find`` (None: pyusb picks
    libusb). ``read_timeout_ms`` bounds one bulk IN transfer, so the link's
    reader thread wakes that often when idle; ``write_timeout_ms`` bounds one
    bulk OUT transfer. ``interface_class``: the class of the interface to
    use (0xFF, vendor-specific).

    Implements the :class:`~firmware_bridge.transport.Transport` protocol:
    :meth:`read` returns 1..max_bytes bytes or b"" after ``read_timeout_ms``;
    :meth:`write` writes all bytes. Raises :class:`TransportError` from
    :meth:`open`, :class:`LinkLost` from :meth:`read` / :meth:`write`.
    """

    def __init__(
        self,
        selector: "UsbSelector | str",
        *,
        backend: Any = None,
        read_timeout_ms: int = 250,
        write_timeout_ms: int = 1000,
        interface_class: int = VENDOR_SPECIFIC_CLASS,
    ) -> None:
        self.selector = UsbSelector.parse(selector) if isinstance(selector, str) else selector
        self.name = str(self.selector)
        self.backend = backend
        self.read_timeout_ms = read_timeout_ms
        self.write_timeout_ms = write_timeout_ms
        self.interface_class = interface_class
        self._dev: Any = None
        self._intf_number: int | None = None
        self._ep_in: Any = None
        self._ep_out: Any = None
        self._reattach = False
        self._rx = b""
        self._rx_lock = threading.Lock()
        #: (bus, address) of the open device; None when closed. The address changes on re-plug.
        self.bus_address: tuple[int, int] | None = None

    # -- open / close ------------------------------------------------------------------

    def _find(self) -> Any:
        """The one device the selector names; the others looked at are closed again."""
        sel = self.selector
        devices = find_usb_devices(sel.vendor_id, sel.product_id, backend=self.backend)
        try:
            chosen = self._choose(devices)
        finally:
            for d in devices:  # reading a serial number opened them
                _dispose(d)
        return chosen

    def _choose(self, devices: list[Any]) -> Any:
        sel = self.selector
        if sel.serial_number is not None:
            serials = [read_serial_number(d) for d in devices]
            matching = [d for d, s in zip(devices, serials) if s == sel.serial_number]
            if not matching:
                unreadable = devices and all(s is None for s in serials)
                raise TransportError(
                    f"no USB device {sel}: {len(devices)} device(s) with ID "
                    f"{sel.vendor_id:04x}:{sel.product_id:04x}"
                    + (f", serial numbers {[s for s in serials if s is not None]}" if not unreadable else ""),
                    HINT_ACCESS if unreadable else HINT_NOT_FOUND,
                )
            return matching[0]
        if not devices:
            raise TransportError(f"no USB device {sel}", HINT_NOT_FOUND)
        if len(devices) > 1:
            serials = [read_serial_number(d) or "?" for d in devices]
            raise TransportError(
                f"{len(devices)} USB devices match {sel} (serial numbers {serials})",
                f"name one: {sel}/SERIAL",
            )
        return devices[0]

    def open(self) -> None:
        """Find the device, claim its vendor-specific interface. Raises :class:`TransportError`."""
        if self._dev is not None:
            return
        dev = self._find()
        action = f"cannot open {self.name}"
        number: int | None = None
        try:
            try:
                cfg = dev.get_active_configuration()
            except usb.core.USBError as exc:
                # pyusb's "Configuration not set" carries no errno: the device is
                # unconfigured, and only then is set_configuration harmless. Any
                # other error (I/O, timeout) must not reset a configured device.
                if exc.errno is not None:
                    raise
                cfg = None
            if cfg is None:
                dev.set_configuration()
                cfg = dev.get_active_configuration()
            intf = usb.util.find_descriptor(cfg, bInterfaceClass=self.interface_class)
            if intf is None:
                raise TransportError(
                    f"{action}: no interface of class 0x{self.interface_class:02x} in its descriptors",
                    "is this the right device? `tablectl devices` lists the IDs it expects",
                )
            ep_in = self._bulk_endpoint(intf, usb.util.ENDPOINT_IN)
            ep_out = self._bulk_endpoint(intf, usb.util.ENDPOINT_OUT)
            if ep_in is None or ep_out is None:
                raise TransportError(f"{action}: interface {intf.bInterfaceNumber} lacks a bulk IN or OUT endpoint",
                                     "is this the right device?")
            number = intf.bInterfaceNumber
            self._reattach = False
            try:
                if dev.is_kernel_driver_active(number):
                    dev.detach_kernel_driver(number)
                    self._reattach = True
            except NotImplementedError:
                pass  # the platform has no kernel-driver query (not Linux)
            usb.util.claim_interface(dev, number)
            if intf.bAlternateSetting != 0:
                dev.set_interface_altsetting(number, intf.bAlternateSetting)
        except usb.core.USBError as exc:
            self._release(dev, number)
            raise _open_error(action, exc) from exc
        except BaseException:
            self._release(dev, number)
            raise
        self._dev, self._intf_number, self._ep_in, self._ep_out = dev, number, ep_in, ep_out
        self._rx = b""
        self.bus_address = (dev.bus, dev.address)

    @staticmethod
    def _bulk_endpoint(intf: Any, direction: int) -> Any:
        return usb.util.find_descriptor(
            intf,
            custom_match=lambda e: usb.util.endpoint_direction(e.bEndpointAddress) == direction
            and usb.util.endpoint_type(e.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK,
        )

    def _release(self, dev: Any, number: int | None) -> None:
        if number is not None:
            try:
                usb.util.release_interface(dev, number)
            except (usb.core.USBError, ValueError):
                pass
            if self._reattach:
                try:
                    dev.attach_kernel_driver(number)
                except (usb.core.USBError, NotImplementedError):
                    pass
        self._reattach = False
        try:
            usb.util.dispose_resources(dev)
        except usb.core.USBError:
            pass

    @property
    def is_open(self) -> bool:
        return self._dev is not None

    def close(self) -> None:
        """Release the interface, reattach a detached kernel driver, close the
        device handle; safe to call twice and after the device went away."""
        dev, self._dev = self._dev, None
        if dev is not None:
            self._release(dev, self._intf_number)
        self._intf_number = self._ep_in = self._ep_out = None
        self.bus_address = None

    # -- I/O ---------------------------------------------------------------------------

    def read(self, max_bytes: int = 512) -> bytes:
        """Block up to ``read_timeout_ms`` for bytes; return 1..max_bytes of them, or
        b"" on timeout. Raises :class:`LinkLost` when the device fails or is closed.

        Each bulk IN transfer asks for a whole number of max-size packets (so the
        device can never overflow it); bytes beyond ``max_bytes`` are kept for the
        next call.
        """
        with self._rx_lock:
            if self._rx:
                out, self._rx = self._rx[:max_bytes], self._rx[max_bytes:]
                return out
            ep = self._ep_in
            if ep is None:
                raise LinkLost(f"{self.name} is closed")
            packet = ep.wMaxPacketSize or 64
            size = max(1, -(-max_bytes // packet)) * packet
            try:
                data = bytes(ep.read(size, self.read_timeout_ms))
            except usb.core.USBTimeoutError:
                return b""
            except usb.core.USBError as exc:
                raise LinkLost(f"{self.name}: read failed: {exc} ({HINT_GONE})") from exc
            except (AttributeError, TypeError, ValueError) as exc:  # closed under a blocked read
                raise LinkLost(f"{self.name}: read failed: {exc}") from exc
            out, self._rx = data[:max_bytes], data[max_bytes:]
            return out

    def write(self, data: bytes) -> None:
        """Write all of ``data`` within ``write_timeout_ms`` per transfer, or raise :class:`LinkLost`."""
        ep = self._ep_out
        if ep is None:
            raise LinkLost(f"{self.name} is closed")
        view = memoryview(bytes(data))
        try:
            while view:
                n = ep.write(view, self.write_timeout_ms)
                view = view[n:]
        except usb.core.USBTimeoutError as exc:
            raise LinkLost(f"{self.name}: the device accepted no data for {self.write_timeout_ms} ms") from exc
        except usb.core.USBError as exc:
            raise LinkLost(f"{self.name}: write failed: {exc} ({HINT_GONE})") from exc
        except (AttributeError, TypeError, ValueError) as exc:
            raise LinkLost(f"{self.name}: write failed: {exc}") from exc

    def cancel_read(self) -> None:
        """End a blocked :meth:`read` early when the backend can (the emulator backend's
        ``cancel_transfers``); with libusb a blocked read ends within ``read_timeout_ms``."""
        dev = self._dev
        if dev is None:
            return
        cancel = getattr(dev.backend, "cancel_transfers", None)
        handle = dev._ctx.handle
        if cancel is not None and handle is not None:
            cancel(handle)

    def __repr__(self) -> str:
        return f"UsbTransport({self.name!r}, open={self.is_open})"
