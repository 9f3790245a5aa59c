"""Where a table opens a device's driver: in a process of its own or in the table's.

:func:`open_device` is the one call a table's assembly makes per device: the config's
driver name and the :class:`~devices.contract.OpenRequest`, as
:func:`devices.plugins.open_driver` takes them. Under the setting
:data:`~devices.apart.proxy.APART_SETTING` (``"all"`` by default: every driver, the
built-in ``spec`` and plugins alike, runs apart; ``"plugins"``: all but ``spec``;
``"none"``: the in-process form, which tests and benches choose explicitly where it is
cheaper) it returns a driver in its own process (:func:`devices.apart.proxy.open_apart`)
or in this one, behind the same surface. Benches and tests that hand the SPEC driver an
in-process USB emulator (``extras["usb_backend"]``) keep it here: a Python object cannot
cross a process.
"""

from __future__ import annotations

import os
from typing import Any

from devices.contract import DriverError, DriverKind, OpenRequest

from .isolation import Isolation
from .proxy import check_apart, open_apart, runs_apart

#: URL schemes that reach a device over the network (pyserial): the driver keeps the network
NETWORK_SCHEMES = ("socket://", "rfc2217://", "loop://")
#: where systemd listens for the table on each kind's driver (deploy/threecard-driver@.socket)
DRIVER_SOCKETS = "/run/threecard-drivers"


def driver_socket(kind: DriverKind | str, folder: str = DRIVER_SOCKETS) -> str | None:
    """The systemd socket of ``kind``'s driver (``FOLDER/KIND.sock``) when it is installed, else None."""
    path = os.path.join(folder, f"{DriverKind(kind)}.sock")
    return path if os.path.exists(path) else None


def isolation_for(request: OpenRequest, *, service: bool, by_path: bool = True) -> Isolation:
    """The isolation of ``request``'s driver process: in service mode as root, a user and
    group of its own (:meth:`Isolation.service`), no network unless the device is reached
    over one, and, when the driver opens its device's node by its path (``by_path``: a
    plugin), the node's group (the udev rule's ``GROUP=``); the built-in ``spec`` driver is
    handed its node's descriptor by the table (:func:`devices.apart.proxy.serve_device`)
    and gets no group at all. Else a bench's (descriptors, core, dumpable only)."""
    network = request.url.startswith(NETWORK_SCHEMES)
    if not (service and os.geteuid() == 0):
        return Isolation(network=True)
    device_group = None
    if by_path and request.url.startswith("/"):
        try:
            device_group = os.stat(request.url).st_gid
        except OSError:  # not there yet (unplugged): the driver's open says so
            device_group = None
    index = 0 if DriverKind(request.kind) is DriverKind.SHUFFLER else 1
    return Isolation.service(index, device_group=device_group or None, network=network)


def open_device(driver: str, request: OpenRequest, *, apart: str = "all", service: bool = False,
                sockets: str = DRIVER_SOCKETS) -> Any:
    """Driver ``driver`` for ``request``, apart or in this process (module docstring).
    ``service``: the table runs as the service: a driver whose systemd socket is installed
    (:func:`driver_socket` in ``sockets``) is reached there, systemd confining it
    (deploy/threecard-driver@.service); else the table starts it, with
    :func:`isolation_for`'s service isolation when it runs as root. Raises as
    :func:`devices.plugins.open_driver`."""
    if runs_apart(apart, driver) and not (request.extras or {}).get("usb_backend"):
        extras = {k: v for k, v in (request.extras or {}).items() if k == "frame_trace" and v is not None}
        request = OpenRequest(request.kind, request.url, request.name, request.events, options=request.options,
                              link_config=request.link_config, ack_on_delivery=request.ack_on_delivery,
                              resume=request.resume, extras=extras)
        connect = driver_socket(request.kind, sockets) if service else None
        if connect is not None:  # systemd gave it its user, no network, its device: the rest is the process's
            return open_apart(driver, request, isolation=Isolation(network=True), connect=connect)
        if service and os.geteuid() != 0:
            # the service can confine a driver only through systemd's units or as root: never a
            # plugin in the table's user, its network and its files without a word
            raise DriverError(f"driver {driver!r} cannot be confined: the table runs as the service, not as root, "
                              f"and no driver socket {os.path.join(sockets, str(request.kind) + '.sock')} is there "
                              "(install deploy/threecard-driver@.socket and .service, docs/drivers.md, "
                              "\"A driver's process\")")
        return open_apart(driver, request, isolation=isolation_for(request, service=service,
                                                                   by_path=driver != "spec"))
    from devices.plugins import open_driver  # the in-process form: the table loads the driver itself

    return open_driver(driver, request)


def prepare_apart(driver: str, kind: DriverKind | str, options: Any) -> tuple[None, Any]:
    """:func:`devices.plugins.prepare` for a config check that never imports a plugin's code
    into this process: the built-in ``spec`` is checked here, any other driver in a driver
    process (:func:`devices.apart.proxy.check_apart`). Returns ``(None, capabilities)``
    (the plugin object stays in its process). Raises :class:`~devices.contract.DriverError`
    (:class:`~devices.contract.DriverOptionError` for an option)."""
    if driver == "spec":
        from devices.plugins import prepare

        _, caps = prepare(driver, kind, options)
        return None, caps
    return None, check_apart(driver, kind, dict(options))["capabilities"]
