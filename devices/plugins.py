"""Driver plugins found by name: the built-in SPEC driver and entry points of ``threecard.devices``.

The table config names a driver per device (``[devices.shoe] driver = "NAME"``,
docs/drivers.md); :func:`load_plugin` finds it the way python-can finds a bus
backend (``can.interfaces``): an entry point of group
:data:`~devices.contract.ENTRY_POINT_GROUP` in an installed package, or the
built-in :data:`SPEC` (``"spec"``, the default: :class:`devices.Shuffler` and
:class:`devices.CardShoe` over ``firmware_bridge``). A driver that cannot be
loaded, declares a contract version this table does not support, does not drive
the kind asked, or lacks what the table cannot make up for is a
:class:`~devices.contract.DriverError` naming the driver and its package.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any, Mapping

from .contract import (
    ENTRY_POINT_GROUP,
    FULL,
    SUPPORTED_CONTRACT_VERSIONS,
    CONTRACT_VERSION,
    Capabilities,
    DriverError,
    DriverKind,
    DriverOptionError,
    DriverPlugin,
    OpenRequest,
    check_capabilities,
)
from .drivers import CardShoe, Shuffler

#: The table's own keys of ``[devices.KIND]``; every other key is the driver's.
TABLE_KEYS = frozenset({"driver", "url", "serial_number", "firmware_allowlist"})


class SpecPlugin:
    """The built-in driver: a device speaking protocols/SPEC.md (any transport
    ``firmware_bridge.factory.transport_for`` opens). No options of its own."""

    name = "spec"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHUFFLER, DriverKind.SHOE})
    option_keys: frozenset[str] = frozenset()
    package = "threecard-table"

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Capabilities:
        return FULL

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None:
        for key in options:
            raise DriverOptionError(f"devices.{kind}.{key}", "the spec driver has no options of its own")

    def open(self, request: OpenRequest) -> Shuffler | CardShoe:
        cls = Shuffler if request.kind is DriverKind.SHUFFLER else CardShoe
        return cls.open(request.url, events=request.events, name=request.name, config=request.link_config,
                        ack_on_delivery=request.ack_on_delivery, resume=request.resume,
                        usb_backend=request.extras.get("usb_backend"),
                        frame_trace=request.extras.get("frame_trace"))


SPEC = SpecPlugin()


def _package_of(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else ep.value.split(":")[0]


def installed() -> dict[str, str]:
    """Every driver name this table can load -> the package providing it."""
    found = {SPEC.name: SPEC.package}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, _package_of(ep))
    return found


def load_plugin(name: str, kind: DriverKind | str) -> DriverPlugin:
    """The plugin registered as ``name`` for a device of ``kind``.

    Raises :class:`DriverError` naming the driver and its package when: no package
    provides it (the installed names are listed); importing it fails (the import
    error is in the message); it lacks the contract's attributes; its
    ``contract_version`` is not in :data:`SUPPORTED_CONTRACT_VERSIONS`; it does not
    drive ``kind``; or it is a shuffler without the deck count (:func:`check_capabilities`).
    """
    kind = DriverKind(kind)
    if name == SPEC.name:
        plugin: Any = SPEC
        package = SPEC.package
    else:
        eps = list(entry_points(group=ENTRY_POINT_GROUP, name=name))
        if not eps:
            names = ", ".join(sorted(installed()))
            raise DriverError(f"no device driver {name!r} is installed (entry point group {ENTRY_POINT_GROUP}; "
                              f"installed: {names}); pip install the driver's package into the table's environment")
        ep = eps[0]
        package = _package_of(ep)
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - any failure of a third party's import is reported as one
            raise DriverError(f"device driver {name!r} (package {package}, {ep.value}) failed to load: "
                              f"{type(exc).__name__}: {exc}") from exc
        if isinstance(plugin, type):
            try:
                plugin = plugin()
            except Exception as exc:  # noqa: BLE001
                raise DriverError(f"device driver {name!r} (package {package}): its plugin class could not be "
                                  f"made: {type(exc).__name__}: {exc}") from exc
    missing = [a for a in ("contract_version", "kinds", "option_keys", "capabilities", "check_options", "open")
               if not hasattr(plugin, a)]
    if missing:
        raise DriverError(f"device driver {name!r} (package {package}) is not a driver plugin: it lacks "
                          f"{', '.join(missing)} (docs/drivers.md, 'The plugin')")
    version = plugin.contract_version
    if version not in SUPPORTED_CONTRACT_VERSIONS:
        raise DriverError(f"device driver {name!r} (package {package}) is written for driver contract version "
                          f"{version!r}; this table supports {sorted(SUPPORTED_CONTRACT_VERSIONS)} "
                          "(upgrade the table or install a driver release for this contract)")
    if kind not in {DriverKind(k) for k in plugin.kinds}:
        raise DriverError(f"device driver {name!r} (package {package}) does not drive a {kind} "
                          f"(it drives: {', '.join(sorted(str(DriverKind(k)) for k in plugin.kinds))})")
    checked: DriverPlugin = plugin  # every member of the contract is there (checked above)
    return checked


def split_options(kind: DriverKind | str, section: Mapping[str, Any]) -> dict[str, Any]:
    """The driver's own keys of a ``[devices.KIND]`` table (all but :data:`TABLE_KEYS`)."""
    return {k: v for k, v in section.items() if k not in TABLE_KEYS}


def prepare(name: str, kind: DriverKind | str, options: Mapping[str, Any]) -> tuple[DriverPlugin, Capabilities]:
    """Load driver ``name`` for ``kind``, check its ``options`` and capabilities: what a
    table does at start-up before opening any device. Raises :class:`DriverError`
    (:class:`DriverOptionError` for an option: its key is ``devices.KIND.KEY``)."""
    kind = DriverKind(kind)
    plugin = load_plugin(name, kind)
    unknown = sorted(set(options) - set(plugin.option_keys))
    if unknown:
        allowed = ", ".join(sorted(plugin.option_keys)) or "none"
        raise DriverOptionError(f"devices.{kind}.{unknown[0]}", f"not an option of driver {name!r} "
                                f"(its options: {allowed})")
    plugin.check_options(kind, options)
    caps = plugin.capabilities(kind, options)
    check_capabilities(kind, caps, name)
    return plugin, caps


def open_driver(name: str, request: OpenRequest) -> Any:
    """Load, check and open driver ``name`` for ``request.kind``: a connected driver
    (:class:`~devices.contract.ShoeDriver` or :class:`~devices.contract.ShufflerDriver`).
    Raises :class:`DriverError` (load, version, options) or the driver's
    :class:`~devices.contract.LinkError` (cannot open, no answer, refused)."""
    plugin, _caps = prepare(name, request.kind, request.options)
    driver = plugin.open(request)
    try:
        setattr(driver, "driver_name", name)  # not in the contract's protocols; what the table journals beside the device's identity (describe())
    except AttributeError:  # a driver with __slots__: describe() says "unknown"
        pass
    return driver


def describe(driver: Any) -> dict[str, Any]:
    """What the table records about a driver beside its device's identity: ``driver``
    (its name, ``"spec"`` for the built-in), ``missing`` (the capabilities its device
    lacks, each with a weaker custody guarantee, docs/drivers.md). For the controller's
    ``device`` journal entry at each (re)connect."""
    caps = getattr(driver, "capabilities", FULL)
    # the driver's own kind: the table's wrapper (GuardedDriver, ``inner``) has a shuffle()
    # whatever it wraps, so the kind is read from the driver it wraps
    own = getattr(driver, "inner", driver)
    kind = DriverKind.SHUFFLER if callable(getattr(own, "shuffle", None)) else DriverKind.SHOE
    return {"driver": getattr(driver, "driver_name", "spec"), "missing": list(caps.missing(kind))}
