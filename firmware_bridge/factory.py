"""Pick the transport for a device address: a pyserial URL or a USB selector.

``transport_for("/dev/threecard/shoe")`` gives a
:class:`~firmware_bridge.transport.SerialTransport`;
``transport_for("usb://1209:0002/SHOE-0042")`` gives a
:class:`~firmware_bridge.usb.UsbTransport`. The CLI, the configuration and
the drivers name devices the same way whichever bus they are on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import TransportError
from .transport import SerialTransport, Transport

if TYPE_CHECKING:
    from .usb import UsbSelector

#: the scheme of a USB selector (:data:`firmware_bridge.usb.USB_SCHEME`): a serial URL never
#: loads :mod:`firmware_bridge.usb` and pyusb (a table over ptys or TCP starts without them)
_USB_SCHEME = "usb://"


def transport_for(
    url: "str | UsbSelector", *, usb_backend: Any = None, read_timeout_ms: int | None = None
) -> Transport:
    """An unopened transport for ``url`` (the link opens it).

    ``url``: a :class:`UsbSelector` or ``usb://VID:PID[/SERIAL]`` (hex IDs) for
    USB; anything else is a pyserial URL (``/dev/ttyUSB0``, ``socket://h:p``,
    ``rfc2217://``, ``loop://``). ``usb_backend``: the pyusb backend for USB
    selectors (None: libusb); ignored for serial URLs. ``read_timeout_ms``:
    how long one blocking read may wait (None: the transport's default).
    Raises :class:`TransportError` for a malformed ``usb://`` selector (its
    hint gives the expected form).
    """
    if isinstance(url, str) and not url.lower().startswith(_USB_SCHEME):
        return _serial(url, read_timeout_ms)
    from .usb import UsbSelector, UsbTransport, is_usb_selector

    if isinstance(url, UsbSelector) or is_usb_selector(url):
        try:
            selector = url if isinstance(url, UsbSelector) else UsbSelector.parse(url)
        except ValueError as exc:
            raise TransportError(f"cannot open {url}: not a USB selector",
                                 str(exc).split(": ", 1)[-1]) from None
        if read_timeout_ms is None:
            return UsbTransport(selector, backend=usb_backend)
        return UsbTransport(selector, backend=usb_backend, read_timeout_ms=read_timeout_ms)
    return _serial(url, read_timeout_ms)


def _serial(url: Any, read_timeout_ms: int | None) -> Transport:
    if read_timeout_ms is None:
        return SerialTransport(url)
    return SerialTransport(url, read_timeout_s=read_timeout_ms / 1000)
