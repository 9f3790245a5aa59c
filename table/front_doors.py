"""Front doors the core opens without importing them: entry points of group ``threecard.interfaces``.

The core (this folder's top) never imports ``table/interfaces/``
(``docs/architecture.md``); the vendor facade :mod:`table.api` still serves a
journal's event stream on a socket or to MQTT when asked. It finds those
servers by name here, as python-can finds its bus backends: each is an entry
point in ``pyproject.toml`` (``event_socket``, ``mqtt``), and a vendor's own
package may add one under a new name.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from .errors import TableError

GROUP = "threecard.interfaces"


def front_door(name: str) -> Any:
    """The object registered as entry point ``name`` of :data:`GROUP` (a class or a
    factory). Raises :class:`TableError` when no installed package provides it."""
    found = entry_points(group=GROUP, name=name)
    for ep in found:
        return ep.load()
    raise TableError(f"no '{name}' interface is installed (entry point group {GROUP}); "
                     "install the package with pip (pip install .) so its entry points exist")
