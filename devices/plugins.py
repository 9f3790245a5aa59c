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

from dataclasses import dataclass, fields
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


def entry_point_of(name: str) -> str:
    """Where driver ``name`` comes from, in the words an error names it by: ``entry point
    NAME = module:OBJECT (package P V)`` of group :data:`ENTRY_POINT_GROUP`, or ``the
    built-in driver`` for :data:`SPEC`."""
    if name == SPEC.name:
        return "the built-in driver 'spec'"
    eps = list(entry_points(group=ENTRY_POINT_GROUP, name=name))
    if not eps:
        return f"driver {name!r} (no entry point)"
    return f"entry point {name} = {eps[0].value} (package {_package_of(eps[0])})"


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
    check_plugin(plugin, name, package, kind)
    checked: DriverPlugin = plugin  # every member of the contract is there (check_plugin)
    return checked


def check_plugin(plugin: Any, name: str, package: str, kind: DriverKind | str) -> None:
    """What :func:`load_plugin` checks of a loaded plugin (the contract's attributes, its
    contract version, the kind): also run by a driver process on the plugin it imports
    (:mod:`devices.apart.host`). Raises :class:`DriverError`."""
    kind = DriverKind(kind)
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


def split_options(kind: DriverKind | str, section: Mapping[str, Any]) -> dict[str, Any]:
    """The driver's own keys of a ``[devices.KIND]`` table (all but :data:`TABLE_KEYS`)."""
    return {k: v for k, v in section.items() if k not in TABLE_KEYS}


def prepare(name: str, kind: DriverKind | str, options: Mapping[str, Any]) -> tuple[DriverPlugin, Capabilities]:
    """Load driver ``name`` for ``kind``, check its ``options`` and its declared capabilities:
    what a table does at start-up before opening any device. Returns the plugin and its
    declaration (``plugin.capabilities(kind, options)``), which is what the table then
    goes by (docs/drivers.md, "Capabilities"). Raises :class:`DriverError`
    (:class:`DriverOptionError` for an option: its key is ``devices.KIND.KEY``): a
    plugin that declares nothing (its ``capabilities`` returns no
    :class:`~devices.contract.Capabilities`) is refused, naming its entry point."""
    kind = DriverKind(kind)
    plugin = load_plugin(name, kind)
    unknown = sorted(set(options) - set(plugin.option_keys))
    if unknown:
        allowed = ", ".join(sorted(plugin.option_keys)) or "none"
        raise DriverOptionError(f"devices.{kind}.{unknown[0]}", f"not an option of driver {name!r} "
                                f"(its options: {allowed})")
    plugin.check_options(kind, options)
    return plugin, declared(plugin, name, kind, options)


def declared(plugin: Any, name: str, kind: DriverKind, options: Mapping[str, Any]) -> Capabilities:
    """``plugin``'s declaration for a ``kind`` with ``options`` (its
    ``capabilities(kind, options)``), checked: what the table goes by (docs/drivers.md,
    "Capabilities"), in the table's process or in a driver's own. Raises
    :class:`DriverError` naming driver ``name``'s entry point when it declares nothing
    (no :class:`~devices.contract.Capabilities`), fails to, or declares what a ``kind``
    cannot have."""
    try:
        caps = plugin.capabilities(kind, options)
    except Exception as exc:  # noqa: BLE001 - a third party's declaration is outside input
        raise DriverError(f"device driver {name!r} ({entry_point_of(name)}) failed to declare its capabilities "
                          f"for a {kind}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(caps, Capabilities):
        raise DriverError(f"device driver {name!r} ({entry_point_of(name)}) declares no capabilities for a {kind}: "
                          f"its capabilities(kind, options) returned {type(caps).__name__}, not a Capabilities; "
                          "the table does not guess what a device provides (docs/drivers.md, 'Capabilities')")
    check_capabilities(kind, caps, name)
    return caps


@dataclass(frozen=True)
class Declaration:
    """What a driver plugin declared when the table opened it: ``name`` (the config's
    ``driver``), ``origin`` (its entry point and package, :func:`entry_point_of`),
    ``contract_version``, ``kind`` and ``capabilities`` (its
    ``capabilities(kind, options)``). The table journals and acts on this, never on what
    the driver object says of itself (docs/drivers.md, "Capabilities")."""

    name: str
    origin: str
    contract_version: int
    kind: DriverKind
    capabilities: Capabilities


def narrowed(declared: Capabilities, own: Any) -> Capabilities:
    """``declared``, less what the driver's ``own`` :class:`Capabilities` lacks (a device
    found at connect to have less, e.g. a SPEC shuffler of protocol 1.0 without the
    commitment, SPEC §4.2.1). A driver never adds to its declaration: ``own`` claiming
    more is ignored (the conformance suite fails it, ``identity``)."""
    if not isinstance(own, Capabilities):
        return declared
    return Capabilities(**{f.name: bool(getattr(declared, f.name) and getattr(own, f.name))
                           for f in fields(Capabilities)})


class DeclaredDriver:
    """A driver as the table holds it: the opened driver (``inner``) and its plugin's
    :class:`Declaration`. ``capabilities`` is the declaration (:func:`narrowed` by what
    the driver learnt of its device); ``driver_name`` the declared name; everything
    else (``link``, ``status``, ``shuffle``, ``open_shuffle``, ``close``) is the
    driver's own. A driver run as a process of its own presents the same surface."""

    def __init__(self, driver: Any, declaration: Declaration) -> None:
        self.inner = driver
        self.declaration = declaration

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def capabilities(self) -> Capabilities:
        """The declared capabilities, less what the device was found to lack."""
        return narrowed(self.declaration.capabilities, getattr(self.inner, "capabilities", None))

    @property
    def driver_name(self) -> str:
        return self.declaration.name

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> "DeclaredDriver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_driver(name: str, request: OpenRequest) -> DeclaredDriver:
    """Load, check and open driver ``name`` for ``request.kind``: a connected driver
    (:class:`~devices.contract.ShoeDriver` or :class:`~devices.contract.ShufflerDriver`)
    carrying its plugin's :class:`Declaration` (:class:`DeclaredDriver`).
    Raises :class:`DriverError` (load, version, options, no declaration) or the driver's
    :class:`~devices.contract.LinkError` (cannot open, no answer, refused)."""
    plugin, caps = prepare(name, request.kind, request.options)
    driver = plugin.open(request)
    return DeclaredDriver(driver, Declaration(name, entry_point_of(name), plugin.contract_version,
                                              DriverKind(request.kind), caps))


def describe(driver: Any) -> dict[str, Any]:
    """What the table records about a driver beside its device's identity: ``driver``
    (its name, ``"spec"`` for the built-in), ``missing`` (the capabilities its device
    lacks, each with a weaker custody guarantee, docs/drivers.md). ``driver``'s
    ``capabilities`` are its declaration (:class:`DeclaredDriver`; a driver built by
    hand, a SPEC driver's class attribute). For the controller's ``device`` journal
    entry at each (re)connect."""
    caps = driver.capabilities
    # the driver's own kind: the table's wrapper (GuardedDriver, ``inner``) has a shuffle()
    # whatever it wraps, so the kind is read from the driver it wraps
    own = getattr(driver, "inner", driver)
    kind = DriverKind.SHUFFLER if callable(getattr(own, "shuffle", None)) else DriverKind.SHOE
    return {"driver": getattr(driver, "driver_name", "spec"), "missing": list(caps.missing(kind))}
