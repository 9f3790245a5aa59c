"""Device drivers run apart from the table: one process per driver (docs/drivers.md, "A driver's process").

The table starts each device's driver (the built-in SPEC driver or a plugin) as a
process of its own, ``python -m devices.apart.host``, and speaks the published driver
contract (:mod:`devices.contract`) to it over a socket pair (:mod:`devices.apart.wire`).
The parent side, :func:`open_apart`, returns a proxy with the same surface as an
in-process driver (``link``, ``status()``, ``shuffle()``, ``open_shuffle()``,
``capabilities``, ``close()``), so the controller cannot tell; it learns the driver's
name, version and capabilities from the driver process and never imports a plugin's
code. A driver's failure (an exception, a hang past its deadline, its process ending)
is a :class:`~devices.contract.LinkError` the table's ride-through holds on, and the
driver is started again (:class:`devices.apart.proxy.DriverProcess`).

In service mode (the table started as root) each driver process drops to its own
user and group, loses the network, core dumps and ptrace, and keeps no file of the
table's open (:mod:`devices.apart.isolation`).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .isolation import Isolation
    from .proxy import APART_SETTING, ApartShoe, ApartShuffler, DriverProcess, DriverProcessFailed, open_apart

#: where each name of this package is defined: imported when first asked for (PEP 562), so a
#: driver process (``devices.apart.host``) does not load the table's side (:mod:`.proxy`)
_WHERE = {"APART_SETTING": "proxy", "ApartShoe": "proxy", "ApartShuffler": "proxy", "DriverProcess": "proxy",
          "DriverProcessFailed": "wire", "Isolation": "isolation", "open_apart": "proxy"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)

__all__ = ["APART_SETTING", "ApartShoe", "ApartShuffler", "DriverProcess", "DriverProcessFailed", "Isolation",
           "open_apart"]
