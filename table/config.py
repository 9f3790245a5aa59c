"""The table configuration file (TOML, read with ``tomllib``), validated at load.

A table PC's service reads :data:`DEFAULT_PATH` (``/etc/threecard/table.toml``);
``deploy/table.example.toml`` is a documented example. Shape::

    [table]
    id = "pit2-tcp-07"              # required; letters, digits, '.', '_', '-'; 1..32
    seats = 6                       # required; 1..7

    [[decks]]                       # exactly two, different ids and back colours
    id = "A"
    back_colour = "red"
    [[decks]]
    id = "B"
    back_colour = "blue"

    [devices.shuffler]
    url = "/dev/threecard/shuffler" # or usb://1209:0001/SHF-0042, socket://host:port, ...
    [devices.shoe]
    driver = "spec"                 # the default; or a driver package's name (docs/drivers.md)
    url = "/dev/threecard/shoe"     # ... and that driver's own keys

    [paytables]                     # shipped names or TOML files (relative to this file)
    ante_bonus = "pa-649a12b-1"
    pair_plus = "example-pp-649a12d" # optional, as are six_card_bonus and progressive

    [limits]                        # the table's limits, cents (optional; defaults: table.bets)
    chip_cents = 500                # the smallest chip
    [limits.ante]
    minimum_cents = 1000
    maximum_cents = 100000          # also pair_plus, six_card, progressive (often min == max)

    [link]                          # units are in the key names
    retransmit_initial_ms = 50
    ...

    [journal]
    path = "/var/lib/threecard/journal.sqlite3"

    [firmware]                      # signed firmware updates (docs/firmware.md)
    vendor_keys = ["/etc/threecard/vendor-acme.pub"]  # vendors' public keys accepted
    activation_timeout_s = 60

    [gaming_day]                    # COMAR 36.05.03.25: figures by gaming day
    start_hour = 6                  # local hour the gaming day starts (0..23)
    timezone = "America/New_York"   # IANA name (default UTC)
    shift_hours = 8                 # divides 24; shift changes people journal end shifts instead
    procedures_required = true      # no round on a closed table: open it with a signed slip (COMAR 36.05.03.10)

    [log]
    format = "json"                 # json | console
    level = "info"                  # debug | info | warning | error

    [floor]                         # the floor's notary (docs/integration.md)
    url = "http://floor1:8091"
    public_key = "/etc/threecard/floor.key.pub"
    unreachable = "refuse"          # refuse | hold | warn

Validation collects every problem before raising :class:`ConfigError`: unknown
keys, missing required keys, wrong types, values out of range, unknown colours,
paytables and URL forms. Each problem names the key as a dotted path
(``devices.shoe.url``, ``decks[1].back_colour``), the allowed values, and the
file and line where the key is (TOML syntax errors: where ``tomllib`` stopped).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from protocols.cards import BackColour
from protocols.errors import CardError

from .rules import kinds as _wager_kinds

DEFAULT_PATH = Path("/etc/threecard/table.toml")
DEFAULT_JOURNAL = Path("/var/lib/threecard/journal.sqlite3")

LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
COLOURS = tuple(c.name.lower() for c in BackColour if c is not BackColour.NONE)
URL_FORMS = (
    "/dev/PATH (e.g. /dev/threecard/shoe)",
    "usb://VID:PID[/SERIAL] (hex ids, e.g. usb://1209:0002/SHOE-0042)",
    "socket://HOST:PORT",
    "rfc2217://HOST:PORT",
    "loop://",
)


# -- errors -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: ``key`` (dotted path, ``""`` for the file),
    ``message`` (what and the allowed values), ``line`` (1-based, or ``None``)."""

    key: str
    message: str
    line: int | None = None

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line else source
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(ValueError):
    """The config file cannot be read or is invalid.

    ``problems``: every :class:`Problem` found; ``source``: the file name. The
    message has one ``FILE:LINE: KEY: MESSAGE`` line per problem.
    """

    def __init__(self, problems: list[Problem], source: str) -> None:
        self.problems = problems
        self.source = source
        super().__init__("\n".join(p.render(source) for p in problems))


# -- value checks (each returns the normalised value or raises ValueError) ----------------------

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}\Z")
_DECK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,7}\Z")
_HOSTPORT_RE = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})(?:\?.*)?\Z")
_USB_RE = re.compile(r"^[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}(?:/[^/]*)?\Z")


def _table_id(v: str) -> str:
    if not _ID_RE.match(v):
        raise ValueError(f"{v!r} is not a table id; allowed: 1-32 letters, digits, '.', '_', '-', starting with a letter or digit")
    return v


def _deck_id(v: str) -> str:
    if not _DECK_ID_RE.match(v):
        raise ValueError(f"{v!r} is not a deck id; allowed: 1-8 letters, digits, '_', '-'")
    return v


def _colour(v: str) -> BackColour:
    try:
        colour = BackColour.parse(v)
    except CardError:
        colour = BackColour.NONE
    if colour is BackColour.NONE:
        raise ValueError(f"unknown back colour {v!r}; allowed: {', '.join(COLOURS)}")
    return colour


def check_device_url(v: str) -> str:
    """Return ``v`` when it is a device URL the transports open; raises ``ValueError``
    naming the allowed forms otherwise."""
    ok = False
    low = v.lower()
    if v.startswith("/"):
        ok = len(v) > 1 and "\0" not in v
    elif low.startswith("usb://"):
        ok = bool(_USB_RE.match(v[6:]))
    elif low.startswith(("socket://", "rfc2217://")):
        m = _HOSTPORT_RE.match(v.split("://", 1)[1])
        ok = bool(m) and 1 <= int(m.group("port")) <= 65535
    elif low.startswith("loop://"):
        ok = True
    if not ok:
        raise ValueError(f"{v!r} is not a device URL; allowed: {'; '.join(URL_FORMS)}")
    return v


def _group_name(v: str) -> str:
    if not re.match(r"^[a-z_][a-z0-9_-]{0,31}\Z", v):
        raise ValueError(f"{v!r} is not a group name; allowed: a POSIX group name such as threecard-audit")
    return v


def _abs_path(v: str) -> Path:
    p = Path(v)
    if not p.is_absolute():
        raise ValueError(f"{v!r} is not an absolute path; allowed: an absolute path such as {DEFAULT_JOURNAL}")
    return p


def _spec(default: Any = dataclasses.MISSING, *, range: tuple[float, float] | None = None,
          choices: tuple[str, ...] | None = None, check: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field with validation metadata for :func:`_build`: ``range``
    (inclusive bounds), ``choices`` (allowed strings), ``check`` (returns the
    normalised value or raises ``ValueError`` naming the allowed values)."""
    return field(default=default, metadata={"range": range, "choices": choices, "check": check})


def _patterns(v: list) -> tuple[str, ...]:
    if not all(isinstance(p, str) and p and p.isprintable() and len(p) <= 64 for p in v):
        raise ValueError(f"{v!r} is not a list of version patterns; allowed: strings such as \"1.4.*\"")
    return tuple(v)


def _screens(v: list) -> tuple[str, ...]:
    import ipaddress

    if not isinstance(v, list) or len(v) > 64:
        raise ValueError(f"{v!r} is not a list of at most 64 addresses")
    for a in v:
        try:
            ipaddress.ip_network(a, strict=False)
        except (ValueError, TypeError):
            raise ValueError(f"{a!r} is not an IP address or network; allowed: strings such as \"10.1.2.3\" "
                             "or \"10.1.2.0/28\"") from None
    return tuple(v)


def _serial(v: str) -> str:
    if not v or len(v) > 64 or not v.isprintable():
        raise ValueError(f"{v!r} is not a serial number; allowed: 1-64 printable characters")
    return v


def _driver_name(v: str) -> str:
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z", v):
        raise ValueError(f"{v!r} is not a driver name; allowed: \"spec\" or an installed driver's name "
                         "(letters, digits, '.', '_', '-'; tablectl conformance --list-drivers)")
    return v


def _key_paths(v: list) -> tuple[str, ...]:
    if not all(isinstance(p, str) and p and "\0" not in p and p.isprintable() for p in v):
        raise ValueError(f"{v!r} is not a list of key file paths; allowed: strings such as "
                         "\"/etc/threecard/vendor-acme.pub\"")
    if len(v) > 16:
        raise ValueError(f"{len(v)} vendor keys; allowed: at most 16")
    return tuple(v)


class _KeyedError(ValueError):
    """A cross-field problem found by a section's ``__post_init__``, naming its key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _range_of(cls: type, name: str) -> tuple[float, float]:
    return next(f.metadata["range"] for f in dataclasses.fields(cls) if f.name == name)


# -- the dataclass tree -------------------------------------------------------------------


@dataclass(frozen=True)
class TableSection:
    """``[table]``: ``id`` (the table's name on the floor), ``seats`` (1..7)."""

    id: str = _spec(check=_table_id)
    seats: int = _spec(range=(1, 7))


@dataclass(frozen=True)
class DeckConfig:
    """One ``[[decks]]`` entry: ``id`` (``"A"``) and ``back_colour``."""

    id: str = _spec(check=_deck_id)
    back_colour: BackColour = _spec(check=_colour)


def _check_decks(decks: "tuple[DeckConfig, ...]", path: tuple, errs: "_Collector") -> None:
    """Exactly two decks, different ids, different back colours."""
    if len(decks) != 2:
        errs.add(path, f"the table uses exactly two decks (58 Pa. Code 649a.3(b)); got {len(decks)}")
        return
    if decks[0].id == decks[1].id:
        errs.add(path + (1, "id"), f"deck id {decks[1].id!r} is used twice; the two decks need different ids")
    if decks[0].back_colour == decks[1].back_colour:
        others = ", ".join(c for c in COLOURS if c != str(decks[0].back_colour))
        errs.add(path + (1, "back_colour"),
                 f"both decks are {decks[0].back_colour}: the two decks need different back colours "
                 f"(58 Pa. Code 649a.3(b)); allowed: {others}")


@dataclass(frozen=True)
class DeviceConfig:
    """``[devices.NAME]``: ``url``, a pyserial URL or a ``usb://VID:PID[/SERIAL]`` selector;
    ``serial_number`` (optional): the serial the device must report at handshake;
    ``firmware_allowlist`` (optional): ``fnmatch`` patterns such as ``"1.4.*"`` the
    firmware version must match (empty: any), checked at every (re)connect (SPEC §6.1).
    ``driver``: the device driver's name (``"spec"``, the default: protocols/SPEC.md;
    else an installed ``threecard.devices`` entry point, docs/drivers.md); every other
    key of the table is that driver's own (``options``), checked by the driver at load:
    a driver that is not installed, fails to load, or is for another contract version
    is an error naming ``devices.NAME.driver`` and the package."""

    url: str = _spec(check=check_device_url)
    serial_number: str | None = _spec(None, check=_serial)
    firmware_allowlist: tuple = _spec((), check=_patterns)
    driver: str = _spec("spec", check=_driver_name)
    #: the driver's own keys (all but the four above); internal: not a key of its own
    options: dict = field(default_factory=dict, compare=False, metadata={"internal": True})


@dataclass(frozen=True)
class DevicesConfig:
    """``[devices]``: the ``shuffler`` and the ``shoe``."""

    shuffler: DeviceConfig
    shoe: DeviceConfig


@dataclass(frozen=True)
class _PaytablesKeys:
    """``[paytables]``: shipped paytable names or TOML file paths, one per paytable slot:
    ``ante_bonus``, required for settlement (default ``pa-649a12b-1``), and one key per
    side wager kind's slot (:mod:`table.rules.kinds`: ``pair_plus``, ``six_card_bonus``,
    ``progressive``), each only when the table offers that wager."""

    ante_bonus: str = "pa-649a12b-1"

    def slots(self) -> dict[str, str | None]:
        """slot -> the name or path given (``None`` when none), ``ante_bonus`` first."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    if TYPE_CHECKING:  # the side kinds' keys, made from table.rules.kinds below
        def __getattr__(self, name: str) -> str | None: ...


if TYPE_CHECKING:
    PaytablesConfig = _PaytablesKeys
else:
    PaytablesConfig = dataclasses.make_dataclass(
        "PaytablesConfig", [(k.paytable_slot, "str | None", None) for k in _wager_kinds.side_kinds()],
        bases=(_PaytablesKeys,), frozen=True)
    PaytablesConfig.__doc__, PaytablesConfig.__module__ = _PaytablesKeys.__doc__, __name__


_CENTS = (1, 100_000_000)  # table.rules.wagers.MAX_WAGER_CENTS: no single wager is above $1,000,000


@dataclass(frozen=True)
class WagerLimitSection:
    """``[limits.KIND]`` (``ante``, ``pair_plus``, ``six_card``, ``progressive``): the
    table ``minimum_cents`` and ``maximum_cents`` of that wager (equal for a fixed
    amount, as most progressives are) and, optionally, its own ``chip_cents`` (default:
    ``[limits] chip_cents``)."""

    minimum_cents: int = _spec(range=_CENTS)
    maximum_cents: int = _spec(range=_CENTS)
    chip_cents: int | None = _spec(None, range=_CENTS)


@dataclass(frozen=True)
class _LimitsKeys:
    """``[limits]``: the table's limits (``table.bets.TableLimits``; 58 Pa. Code 816a.1 has
    the table minimum and maximum posted). ``chip_cents``: the smallest chip, every bet a
    multiple of it, for each ``[limits.KIND]`` given without its own; one ``[limits.KIND]``
    per wager kind of :mod:`table.rules.kinds` (``ante``, ``pair_plus``, ``six_card``,
    ``progressive``); a kind not given keeps its default (ante, Pair Plus, Six Card Bonus
    $1..$1,000; progressive a fixed $1; a $1 chip: ``table.bets.DEFAULT_LIMITS``, which take
    the fixed bets of ``tablectl run --ante-cents 1000 --side-cents 500 --progressive-cents 100``)."""

    chip_cents: int = _spec(100, range=_CENTS)

    if TYPE_CHECKING:  # the kinds' sections, made from table.rules.kinds below
        def __getattr__(self, name: str) -> WagerLimitSection | None: ...

    def given(self) -> Any:
        """:meth:`table_limits` when the config sets a limit of its own, else None (the
        documented defaults; a dealer who only closes bets then gets the fixed bet)."""
        if self.chip_cents == 100 and all(getattr(self, k) is None for k in _wager_kinds.keys()):
            return None
        return self.table_limits()

    def table_limits(self) -> Any:
        """The :class:`table.bets.TableLimits` of these keys. Raises
        :class:`table.bets.LimitsError` (``key`` ``"KIND.FIELD"``), already checked at load."""
        from .bets import TableLimits

        given = {}
        for kind in _wager_kinds.keys():
            sec = getattr(self, kind)
            if sec is not None:
                given[kind] = {"minimum_cents": sec.minimum_cents, "maximum_cents": sec.maximum_cents,
                               **({"chip_cents": sec.chip_cents} if sec.chip_cents is not None else {})}
        return TableLimits.from_dict(given, chip_cents=self.chip_cents)


if TYPE_CHECKING:
    LimitsSection = _LimitsKeys
else:
    LimitsSection = dataclasses.make_dataclass(
        "LimitsSection", [(k, "WagerLimitSection | None", None) for k in _wager_kinds.keys()],
        bases=(_LimitsKeys,), frozen=True)
    LimitsSection.__doc__, LimitsSection.__module__ = _LimitsKeys.__doc__, __name__


@dataclass(frozen=True)
class LinkSection:
    """``[link]``: device link and controller timing. Units are in the names
    (``_ms`` milliseconds, ``_s`` seconds)."""

    retransmit_initial_ms: int = _spec(50, range=(25, 5000))
    retransmit_max_ms: int = _spec(2000, range=(25, 5000))
    max_attempts: int = _spec(6, range=(1, 100))
    event_queue_size: int = _spec(256, range=(1, 65_536))
    heartbeat_interval_ms: int = _spec(1000, range=(50, 600_000))
    heartbeat_timeout_ms: int = _spec(500, range=(25, 60_000))
    heartbeat_misses: int = _spec(3, range=(1, 100))
    reconnect_initial_ms: int = _spec(100, range=(10, 600_000))
    reconnect_max_ms: int = _spec(5000, range=(10, 600_000))
    reconnect_wait_s: float = _spec(30.0, range=(0, 3600))
    read_timeout_ms: int = _spec(250, range=(10, 5000))
    #: Obsolete: accepted so older config files still load, and ignored;
    #: the link no longer lingers after a request (protocols/SPEC.md §7.1).
    burst_linger_ms: int = _spec(2, range=(0, 100))
    event_timeout_s: float = _spec(10.0, range=(0.1, 3600))
    shuffle_timeout_s: float = _spec(180.0, range=(1, 3600))

    def __post_init__(self) -> None:
        for low, high in (("retransmit_initial_ms", "retransmit_max_ms"), ("reconnect_initial_ms", "reconnect_max_ms")):
            if getattr(self, high) < getattr(self, low):
                raise _KeyedError(high, f"{getattr(self, high)} is below {low} ({getattr(self, low)}); "
                                        f"allowed: {low}..{int(_range_of(LinkSection, high)[1])}")

    def link_config(self, device: DeviceConfig | None = None) -> Any:
        """A :class:`firmware_bridge.link.LinkConfig` from these keys (those the
        link has) and ``device``'s ``serial_number`` as the pinned serial.
        Raises ``ValueError`` when the link refuses a value."""
        from firmware_bridge.link import LinkConfig

        names = {f.name for f in dataclasses.fields(LinkConfig)}
        kw = {k: v for k, v in dataclasses.asdict(self).items() if k in names}
        if device is not None and device.serial_number and "pinned_serial" in names:
            kw["pinned_serial"] = device.serial_number
        if device is not None and device.firmware_allowlist:
            kw["firmware_allowlist"] = device.firmware_allowlist
        return LinkConfig(**kw)

    def table_timing(self) -> Any:
        """A :class:`table.controller.TableTiming` (event and shuffle timeouts, s)."""
        from .controller import TableTiming  # the controller's own type; imported late to keep config light

        return TableTiming(event_timeout_s=self.event_timeout_s, shuffle_timeout_s=self.shuffle_timeout_s)


@dataclass(frozen=True)
class JournalSection:
    """``[journal]``: ``path`` of the SQLite journal (absolute); ``key_file``: the table
    key (PEM, 0600) when it is not in systemd credentials (``threecard-table-key``);
    ``anchors``: a file of signed checkpoints saved off the table (JSON lines, as a
    floor subscriber saves them): a journal behind one is not resumed until a
    supervisor acknowledges it (docs/journal.md); ``audit_group``: a group given read
    access to the journal files (mode 0640; else they are 0600); ``archive``: the folder
    (it must exist) the gaming days are archived to: set, the journal is one segment a
    gaming day, archived at the day's close as ``ARCHIVE/YYYY-MM-DD.journal.xz``
    (docs/journal.md, "Gaming days and archives"); unset, one journal as before."""

    path: Path = _spec(DEFAULT_JOURNAL, check=_abs_path)
    key_file: Path | None = _spec(None, check=_abs_path)
    anchors: Path | None = _spec(None, check=_abs_path)
    audit_group: str | None = _spec(None, check=lambda v: _group_name(v))
    archive: Path | None = _spec(None, check=_abs_path)


def _groups(v: list) -> tuple[str, ...]:
    if not all(isinstance(g, str) and _GROUP_RE.match(g) for g in v):
        raise ValueError(f"{v!r} is not a list of group names; allowed: names such as \"threecard-dealer\" "
                         "(letters, digits, '.', '_', '-'; at most 32)")
    return tuple(v)


def _seat_groups(v: list) -> tuple[str, ...]:
    if len(v) > 7 or not all(isinstance(g, str) and (g == "" or _GROUP_RE.match(g)) for g in v):
        raise ValueError(f"{v!r} is not a list of at most 7 group names (seat 1's first; \"\" for a seat "
                         "without a terminal)")
    return tuple(v)


def _listen(v: str) -> str:
    m = _HOSTPORT_RE.match(v)
    if not m or "?" in v or not 0 <= int(m.group("port")) <= 65535:
        raise ValueError(f"{v!r} is not an address to listen on; allowed: HOST:PORT such as 127.0.0.1:8080 "
                         "or [::1]:8080 (port 0: any free port)")
    return v


_GROUP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}\Z")


@dataclass(frozen=True)
class FirmwareSection:
    """``[firmware]``: signed firmware updates (docs/firmware.md). ``vendor_keys``: files
    holding the *public* halves of the vendor signing keys this table accepts (PEM or
    64 hex digits; a relative path is read from the config file's folder); none: the
    table refuses every update. Each file must be safe from other users (not
    writable by them, nor its folders): a replaced key file would let anyone sign
    firmware for this table. ``activation_timeout_s``: how long ``tablectl firmware
    update`` waits for the device to come back after an activation (s)."""

    vendor_keys: tuple = _spec((), check=_key_paths)
    activation_timeout_s: float = _spec(60.0, range=(1, 3600))

    def key_paths(self, base_dir: Path | None = None) -> list[Path]:
        """The key files, relative ones resolved against ``base_dir``."""
        return [Path(p) if Path(p).is_absolute() or base_dir is None else base_dir / p for p in self.vendor_keys]

    def accepted_keys(self, base_dir: Path | None = None) -> dict[str, Any]:
        """Key id -> Ed25519 public key, for every vendor key listed. Raises
        ``table.keys.KeyFileError`` for a missing, unreadable, unsafe or non-Ed25519 file."""
        from .files import unsafe_permissions
        from .keys import KeyFileError, key_id, load_public_key

        out: dict[str, Any] = {}
        for path in self.key_paths(base_dir):
            why = unsafe_permissions(path)
            if why is not None:
                raise KeyFileError(f"vendor key {path} cannot be trusted: {why}")
            key = load_public_key(path)
            out[key_id(key)] = key
        return out


@dataclass(frozen=True)
class ConsoleSection:
    """``[console]``: ``control_socket``, the Unix socket for dealer and supervisor
    commands (docs/console.md; absolute). A table run as a service needs one: the
    dealer confirms bets closed, decisions and the collect there. ``event_socket``:
    the event stream's socket (optional). ``socket_group``: the group both sockets
    are given (mode 0660), so the accounts of ``[roles]`` can connect;
    ``max_connections`` per socket; ``idle_timeout_s``: a control connection with
    no request for this long is closed. ``two_person_void``: a void once the
    decisions are final needs a second, different supervisor to confirm it
    (default on; off only where the jurisdiction's rules let one supervisor
    void such a round: the house's internal controls, docs/console.md)."""

    control_socket: Path = _spec(Path("/run/threecard/control.sock"), check=_abs_path)
    event_socket: Path | None = _spec(None, check=_abs_path)
    socket_group: str | None = _spec(None, check=lambda v: _groups([v])[0])
    max_connections: int = _spec(256, range=(1, 10_000))
    idle_timeout_s: float = _spec(300.0, range=(1, 86_400))
    two_person_void: bool = _spec(True)


@dataclass(frozen=True)
class RolesSection:
    """``[roles]``: the role of a local account on the Unix sockets (``SO_PEERCRED``), by
    its groups: ``dealer``, ``supervisor``, ``pit``, ``auditor`` (lists of group
    names); ``seats``: the group of each seat's terminal, seat 1's first (``""``:
    none); ``owner``: the role of root and of the service's own account
    (``none``: no role of their own). The strongest role wins (supervisor, dealer,
    auditor, pit, seat); an account in no group has no role and is refused."""

    dealer: tuple = _spec((), check=_groups)
    supervisor: tuple = _spec((), check=_groups)
    pit: tuple = _spec((), check=_groups)
    auditor: tuple = _spec((), check=_groups)
    seats: tuple = _spec((), check=_seat_groups)
    owner: str = _spec("supervisor", choices=("supervisor", "dealer", "auditor", "pit", "none"))


@dataclass(frozen=True)
class WebSection:
    """``[web]``: the HTTP + WebSocket API (docs/console.md). ``listen``: HOST:PORT
    (unset: no HTTP); ``tls_certfile``/``tls_keyfile``: serve HTTPS (PEM; both or
    neither); ``max_connections``; ``idle_timeout_s``: a connection with no
    request for this long is closed; ``max_websockets``: WebSocket connections
    at most."""

    listen: str | None = _spec(None, check=_listen)
    tls_certfile: Path | None = _spec(None, check=_abs_path)
    tls_keyfile: Path | None = _spec(None, check=_abs_path)
    max_connections: int = _spec(256, range=(1, 10_000))
    idle_timeout_s: float = _spec(10.0, range=(1, 3600))
    max_websockets: int = _spec(64, range=(1, 10_000))

    def __post_init__(self) -> None:
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise _KeyedError("tls_keyfile" if self.tls_keyfile is None else "tls_certfile",
                              "give both tls_certfile and tls_keyfile, or neither")


@dataclass(frozen=True)
class AuthSection:
    """``[auth]``: signing in over HTTP/WebSocket. ``people_file``: who may sign in,
    their role and PIN hash (``tablectl people add``; absolute); ``session_ttl_s``:
    a session ends this long after sign-in; ``session_idle_s``: or after this long
    unused; ``max_failures``: failed sign-ins of one person (at one origin) before a
    lock-out of ``lockout_s`` (doubling with each further failure, at most an hour);
    ``table_screens``: IP addresses or networks of the table's own screens besides
    loopback: failures from anywhere else never lock a person out there (docs/decisions/0003-an-account-is-not-a-person.md;
    ``table.interfaces.auth``)."""

    people_file: Path = _spec(Path("/etc/threecard/people.toml"), check=_abs_path)
    session_ttl_s: float = _spec(8 * 3600.0, range=(60, 7 * 86_400))
    session_idle_s: float = _spec(900.0, range=(30, 86_400))
    max_failures: int = _spec(5, range=(1, 100))
    lockout_s: float = _spec(30.0, range=(1, 3600))
    table_screens: tuple = _spec((), check=_screens)


def _timezone(v: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        if not v or len(v) > 64 or v.startswith("/") or ".." in v:
            raise ValueError(v)
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"{v!r} is not a time zone; allowed: an IANA name such as \"America/New_York\" "
                         "or \"UTC\"") from None
    return v


@dataclass(frozen=True)
class GamingDaySection:
    """``[gaming_day]``: when the casino's gaming day starts (COMAR 36.05.03.25 and
    K.A.R. 112-108-51 ask for figures by gaming day). ``start_hour``: the local
    hour (0..23) a gaming day starts, in ``timezone`` (an IANA name); a round
    belongs to the gaming day its settlement falls in. ``shift_hours``: the length
    of a shift (dividing 24), the shifts starting at ``start_hour``; a shift change
    journaled by people (table/day/gaming_day.py) is where a shift ends instead.
    ``procedures_required``: no round is dealt while the table is closed for the gaming
    day: the dealer and a supervisor open it with an opening inventory slip (COMAR
    36.05.03.10; ``docs/reporting.md``). Absent: false, so a table upgraded in the middle
    of a gaming day (with no opening slip journaled) goes on dealing; a casino sets it
    true, as the shipped config does.
    ``retention_years`` (K.A.R. 112-108-51: at least seven) or ``keep_days`` (wins when
    given): how long an archived gaming day (``[journal] archive``) is kept; one is
    removed only past it and once the floor's notary (``[floor] url``) holds a checkpoint
    at or after its end: without a floor, no archive is ever removed."""

    start_hour: int = _spec(6, range=(0, 23))
    timezone: str = _spec("UTC", check=_timezone)
    shift_hours: int = _spec(8, range=(1, 24))
    procedures_required: bool = _spec(False)
    retention_years: int = _spec(7, range=(1, 100))
    keep_days: int | None = _spec(None, range=(1, 36600))

    def __post_init__(self) -> None:
        if 24 % self.shift_hours:
            raise _KeyedError("shift_hours", f"{self.shift_hours} does not divide the day; "
                                             "allowed: 1, 2, 3, 4, 6, 8, 12 or 24")


@dataclass(frozen=True)
class LogSection:
    """``[log]``: ``format`` (``json`` lines for journald, ``console`` for people) and ``level``."""

    format: str = _spec("json", choices=LOG_FORMATS)
    level: str = _spec("info", choices=LOG_LEVELS)


@dataclass(frozen=True)
class MqttSettings:
    """Where and how to publish. ``host``/``port``: the broker (TCP); ``floor``: the
    floor's topic segment; ``state_path``: file for the acknowledged seq
    (created); ``keepalive_s``: MQTT keepalive (s); ``window``: events in
    flight at most; ``client_id``: default ``threecard-{table_id}``;
    ``username``/``password`` (or ``password_file``): broker credentials;
    ``tls``: connect with TLS, verifying the broker against ``ca_file`` (default: the
    system's CAs), with a client certificate ``cert_file``/``key_file`` when given;
    ``status_interval_s``: the retained status is published again this often, so
    a subscriber can tell a fresh status from a replayed one; ``table_key``: the
    :class:`~table.keys.TableKey` every message is signed with (required to publish)."""

    host: str = "127.0.0.1"
    port: int = 1883
    floor: str = "floor1"
    state_path: Path = Path("/var/lib/threecard/mqtt-state.json")
    keepalive_s: int = 30
    window: int = 100
    client_id: str | None = None
    username: str | None = None
    password: str | None = None
    password_file: Path | None = None
    tls: bool = False
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    status_interval_s: float = 30.0
    table_key: Any = None


@dataclass(frozen=True)
class MqttSection:
    """``[mqtt]``: floor telemetry to a broker (docs/integration.md). ``host``: the
    broker (unset: no MQTT); ``port``; ``floor``: the topic segment
    ``threecard/{floor}/{table.id}/...``; ``keepalive_s``; ``state_path``: where
    the last seq the broker acknowledged is kept (absolute); ``username`` and
    ``password_file`` (a file only the service may read, holding the password);
    ``tls`` with ``ca_file`` (the broker's CA; default the system's) and an
    optional client certificate ``cert_file``/``key_file``; ``status_interval_s``:
    how often the retained status is refreshed. Every message is signed with the
    table key (``tablectl run --table-key``, or the systemd credential)."""

    host: str | None = None
    port: int = _spec(1883, range=(1, 65535))
    floor: str = _spec("floor1", check=_table_id)
    keepalive_s: int = _spec(30, range=(5, 3600))
    state_path: Path = _spec(Path("/var/lib/threecard/mqtt-state.json"), check=_abs_path)
    username: str | None = _spec(None, check=lambda v: _mqtt_user(v))
    password_file: Path | None = _spec(None, check=_abs_path)
    tls: bool = False
    ca_file: Path | None = _spec(None, check=_abs_path)
    cert_file: Path | None = _spec(None, check=_abs_path)
    key_file: Path | None = _spec(None, check=_abs_path)
    status_interval_s: int = _spec(30, range=(5, 3600))

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise _KeyedError("key_file" if self.key_file is None else "cert_file",
                              "give both cert_file and key_file (the client certificate), or neither")
        if self.password_file is not None and self.username is None:
            raise _KeyedError("username", "password_file is given without a username")
        if not self.tls and (self.ca_file or self.cert_file):
            raise _KeyedError("tls", "ca_file/cert_file are given but tls is false; set tls = true")

    def settings(self, table_key: Any = None) -> "MqttSettings":
        """The :class:`MqttSettings` of these keys, signing with ``table_key``."""
        return MqttSettings(host=self.host or "127.0.0.1", port=self.port, floor=self.floor,
                            keepalive_s=self.keepalive_s, state_path=self.state_path, username=self.username,
                            password_file=self.password_file, tls=self.tls, ca_file=self.ca_file,
                            cert_file=self.cert_file, key_file=self.key_file,
                            status_interval_s=float(self.status_interval_s), table_key=table_key)


def _floor_url(v: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.password is not None:
        raise ValueError(f"{v!r} is not the floor's address; allowed: http://HOST:PORT or https://HOST:PORT "
                         "(no password in the URL)")
    return v.rstrip("/")


@dataclass(frozen=True)
class FloorSection:
    """``[floor]``: the floor's notary (``tablectl floor serve``, docs/integration.md). ``url``:
    the floor (unset: no notary); ``public_key``: the floor key's public half (PEM), which
    signs its answers; ``unreachable``: what the table does at start when the floor cannot be
    reached or its answer does not verify, ``"refuse"`` (the default: it does not start),
    ``"hold"`` (it starts, journals an incident and deals nothing until a supervisor
    acknowledges it) or ``"warn"`` (it starts on its own head file and the broker's
    checkpoint, with a warning in the log); ``timeout_s``: the request's deadline."""

    url: str | None = _spec(None, check=lambda v: _floor_url(v))
    public_key: Path | None = _spec(None, check=_abs_path)
    unreachable: str = _spec("refuse", choices=("refuse", "hold", "warn"))
    timeout_s: float = _spec(3.0, range=(0.1, 60.0))

    def __post_init__(self) -> None:
        if self.url is not None and self.public_key is None:
            raise _KeyedError("public_key", "url is given without the floor's public_key: its answers could not "
                                            "be checked")


def _mqtt_user(v: str) -> str:
    if not 1 <= len(v) <= 64 or not v.isprintable() or " " in v:
        raise ValueError(f"{v!r} is not an MQTT username; allowed: 1-64 printable characters without spaces")
    return v


def _default_decks() -> tuple[DeckConfig, DeckConfig]:
    return (DeckConfig("A", BackColour.RED), DeckConfig("B", BackColour.BLUE))


@dataclass(frozen=True)
class TableConfig:
    """A validated table config (see the module docstring for the file's shape).

    ``source``: the file it was read from (``None`` when built in code);
    relative paytable paths are resolved against its directory.
    """

    table: TableSection
    devices: DevicesConfig
    decks: tuple[DeckConfig, ...] = field(default_factory=_default_decks, metadata={"check_all": _check_decks})
    paytables: PaytablesConfig = field(default_factory=PaytablesConfig)
    limits: LimitsSection = field(default_factory=LimitsSection)
    link: LinkSection = field(default_factory=LinkSection)
    journal: JournalSection = field(default_factory=JournalSection)
    console: ConsoleSection = field(default_factory=ConsoleSection)
    roles: RolesSection = field(default_factory=RolesSection)
    web: WebSection = field(default_factory=WebSection)
    auth: AuthSection = field(default_factory=AuthSection)
    log: LogSection = field(default_factory=LogSection)
    gaming_day: GamingDaySection = field(default_factory=GamingDaySection)
    mqtt: MqttSection = field(default_factory=MqttSection)
    firmware: FirmwareSection = field(default_factory=FirmwareSection)
    floor: FloorSection = field(default_factory=FloorSection)
    source: Path | None = field(default=None, compare=False, metadata={"internal": True})

    @property
    def base_dir(self) -> Path | None:
        """Directory relative paytable paths are resolved against."""
        return self.source.parent if self.source else None

    def vendor_keys(self) -> dict[str, Any]:
        """The vendor public keys this table accepts for firmware, by key id
        (:meth:`FirmwareSection.accepted_keys`). Raises ``KeyFileError``."""
        return self.firmware.accepted_keys(self.base_dir)

    def deck_colours(self) -> tuple[BackColour, BackColour]:
        """The two decks' back colours, in file order."""
        return (self.decks[0].back_colour, self.decks[1].back_colour)

    def unsafe_files(self) -> list[str]:
        """Why this config, a paytable file it names or its table key could be replaced or
        edited by anyone on the machine (a world-writable file, or a folder above it
        anyone may write): one line each, empty when none. ``config check`` warns of
        them; the service refuses to start on them (docs/journal.md)."""
        from .files import unsafe_permissions

        paths: list[Path] = [self.source] if self.source else []
        for v in self.paytables.slots().values():
            if v and (v.endswith(".toml") or "/" in v):
                p = Path(v)
                paths.append(p if p.is_absolute() or self.base_dir is None else self.base_dir / p)
        if self.journal.key_file is not None:
            paths.append(self.journal.key_file)
        return [why for why in (unsafe_permissions(p) for p in paths) if why]

    def load_tables(self) -> Any:
        """The :class:`table.rules.settlement.Tables` the file names. Raises
        ``PaytableError`` / ``SettlementError`` (already checked at load)."""
        from .rules.settlement import Tables

        return Tables.load(**self.paytables.slots(), base_dir=self.base_dir)

    def to_dict(self) -> dict[str, Any]:
        """The effective config as plain TOML/JSON values (colours and paths as strings,
        unset optional keys left out). ``mqtt`` is ``None`` when no ``[mqtt] host`` is set:
        MQTT is then off, and its other keys would only look as if it were on."""
        def conv(obj: Any) -> Any:
            if isinstance(obj, DeviceConfig):  # the driver's own keys sit beside the table's
                return {**{f.name: conv(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                           if not f.metadata.get("internal") and getattr(obj, f.name) is not None},
                        **obj.options}
            if dataclasses.is_dataclass(obj):
                return {f.name: conv(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                        if not f.metadata.get("internal") and getattr(obj, f.name) is not None}
            if isinstance(obj, (tuple, list)):
                return [conv(x) for x in obj]
            if isinstance(obj, (BackColour, Path)):
                return str(obj)
            return obj

        out = conv(self)
        if self.mqtt.host is None:
            out["mqtt"] = None
        return out

    def to_toml(self) -> str:
        """The effective config as TOML text that :func:`parse_config` reads back. With MQTT
        off (no ``[mqtt] host``) there is no ``[mqtt]`` section, only a comment saying so."""
        d = self.to_dict()
        off = d["mqtt"] is None
        if off:
            del d["mqtt"]
        text = _to_toml(d)
        if off:
            text += "\n# [mqtt] is off: no host is set, so nothing is published (docs/integration.md)\n"
        return text


# -- building and validating ---------------------------------------------------------------


class _Locator:
    """Best-effort map from a dotted key to the line it is on, from the TOML text
    (``tomllib`` keeps no positions). Unknown paths fall back to their parent."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = {}
        current: tuple = ()
        for n, line in enumerate(text.splitlines(), 1):
            m = self._HEADER.match(line)
            if m:
                parts = tuple(self._split(m.group(2)))
                if m.group(1) == "[[":
                    idx = counts.get(parts, -1) + 1
                    counts[parts] = idx
                    current = parts + (idx,)
                else:
                    current = parts
                self.lines.setdefault(current, n)
                continue
            m = self._KEY.match(line)
            if m:
                self.lines.setdefault(current + tuple(self._split(m.group(1))), n)

    @staticmethod
    def _split(dotted: str) -> list[str]:
        return [p.strip().strip("\"'") for p in dotted.split(".")]

    def line(self, path: tuple) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _dotted(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


class _Collector:
    def __init__(self, locator: _Locator | None, base_dir: Path | None = None) -> None:
        self.problems: list[Problem] = []
        self.locator = locator
        self.base_dir = base_dir

    def add(self, path: tuple, message: str) -> None:
        line = self.locator.line(path) if self.locator else None
        self.problems.append(Problem(_dotted(path), message, line))


def _type_name(t: Any) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            Path: "a string (a path)", BackColour: "a string (a colour name)", tuple: "an array of strings"}.get(t, getattr(t, "__name__", str(t)))


def _toml_type(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string", dict: "a table",
            list: "an array"}.get(type(v), type(v).__name__)


def _scalar(typ: Any, f: dataclasses.Field, raw: Any, path: tuple, errs: _Collector) -> Any:
    """Check one scalar value; returns the normalised value or ``_BAD``."""
    want = str if typ in (Path, BackColour) else (list if typ is tuple else typ)
    ok = isinstance(raw, want) and not (isinstance(raw, bool) and want is not bool)
    if want is float and isinstance(raw, int) and not isinstance(raw, bool):
        raw, ok = float(raw), True
    if not ok:
        extra = f"; allowed: {', '.join(f.metadata['choices'])}" if f.metadata.get("choices") else ""
        errs.add(path, f"expected {_type_name(typ)}, got {_toml_type(raw)} {raw!r}{extra}")
        return _BAD
    meta = f.metadata
    if meta.get("range") is not None:
        lo, hi = meta["range"]
        if not lo <= raw <= hi:
            errs.add(path, f"{raw!r} is out of range; allowed: {lo:g}..{hi:g}")
            return _BAD
    if meta.get("choices") is not None and raw not in meta["choices"]:
        errs.add(path, f"{raw!r} is not allowed; allowed: {', '.join(meta['choices'])}")
        return _BAD
    if meta.get("check") is not None:
        try:
            return meta["check"](raw)
        except ValueError as exc:
            errs.add(path, str(exc))
            return _BAD
    return raw


_BAD = object()


def _build(cls: type, data: Any, path: tuple, errs: _Collector) -> Any:
    """Build dataclass ``cls`` from TOML table ``data``, adding problems to ``errs``.
    Returns the instance, or ``_BAD`` when anything under ``path`` was wrong."""
    if not isinstance(data, dict):
        errs.add(path, f"expected a table ([{_dotted(path)}]), got {_toml_type(data)}")
        return _BAD
    before = len(errs.problems)
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]
    names = [f.name for f in fields]
    extra: dict[str, Any] = {}
    if cls is DeviceConfig and data.get("driver", "spec") != "spec":
        # a driver's own keys are the driver's to check (_check_device), not unknown keys
        extra = {k: v for k, v in data.items() if k not in names}
        data = {k: v for k, v in data.items() if k in names}
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            errs.add(path + (key,), f"unknown key{hint}; allowed in [{_dotted(path) or 'top level'}]: {', '.join(names)}")
    values: dict[str, Any] = {}
    for f in fields:
        sub = path + (f.name,)
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                errs.add(sub, "missing required key")
            continue
        typ, raw = hints[f.name], data[f.name]
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if typing.get_origin(typ) in (typing.Union, types.UnionType) and len(args) == 1:
            typ = args[0]  # X | None
        if dataclasses.is_dataclass(typ):
            values[f.name] = _build(typ, raw, sub, errs)
        elif typing.get_origin(typ) is tuple:
            item = typing.get_args(typ)[0]
            if not isinstance(raw, list):
                errs.add(sub, f"expected an array of tables ([[{_dotted(sub)}]]), got {_toml_type(raw)}")
                continue
            built = tuple(_build(item, x, sub + (i,), errs) for i, x in enumerate(raw))
            values[f.name] = built
            if _BAD not in built and f.metadata.get("check_all"):
                f.metadata["check_all"](built, sub, errs)
        else:
            values[f.name] = _scalar(typ, f, raw, sub, errs)
    if len(errs.problems) > before:
        return _BAD
    if extra:
        values["options"] = extra
    try:
        obj = cls(**values)
    except ValueError as exc:
        key = getattr(exc, "key", None)
        errs.add(path + ((key,) if key else ()), str(exc))
        return _BAD
    hook = _AFTER_BUILD.get(cls)
    if hook is not None:
        hook(obj, path, errs)
    return obj if len(errs.problems) == before else _BAD


def _check_paytables(tables: PaytablesConfig, path: tuple, errs: _Collector) -> None:
    from .rules.paytables import PaytableError, list_paytables, load_paytable

    for slot, name in tables.slots().items():
        if name is None:
            continue
        allowed = ", ".join(p.name for p in list_paytables(slot)) or "(none shipped)"
        try:
            pt = load_paytable(name, base_dir=errs.base_dir)
        except PaytableError as exc:
            msg = str(exc).split("; shipped:")[0]
            errs.add(path + (slot,), f"{msg}; allowed: {allowed}, or a path to a paytable .toml file")
            continue
        if pt.kind != slot:
            errs.add(path + (slot,), f"{name!r} is a {pt.kind} paytable, not {slot}; allowed: {allowed}")


def _check_limits(limits: LimitsSection, path: tuple, errs: _Collector) -> None:
    """Limits a bet can keep: a minimum of at least one chip, a maximum not below it, both
    multiples of the chip (table.bets.Limit)."""
    from .bets import LimitsError

    try:
        limits.table_limits()
    except LimitsError as exc:
        kind, _, key = exc.key.partition(".")
        if key == "chip_cents" and getattr(limits, kind).chip_cents is None:
            errs.add(path + ("chip_cents",), f"{exc} (the chip of [limits.{kind}], from [limits] chip_cents)")
        else:
            errs.add(path + (kind, key), f"{exc}; allowed: a whole number of chips from one chip up to "
                                         "maximum_cents")


def _check_link(link: LinkSection, path: tuple, errs: _Collector) -> None:
    """Whatever else the link itself refuses (its own bounds may be tighter)."""
    try:
        link.link_config()
    except ValueError as exc:
        m = re.search(r"link config (\w+)=", str(exc))
        errs.add(path + ((m.group(1),) if m else ()), str(exc))


def device_address(url: str) -> str:
    """What identifies the device ``url`` reaches, for comparing two URLs: a USB
    selector normalised (``usb://1209:0001/SN``, hex ids in lower case), a local path
    with symlinks resolved (``/dev/threecard/shoe`` and the ``/dev/ttyUSB1`` it points
    at are one port), anything else as written."""
    text = url.strip()
    if text.lower().startswith("usb:"):
        try:
            from firmware_bridge.usb import UsbSelector

            return str(UsbSelector.parse(text))
        except (ImportError, ValueError):
            return text.lower()
    if text.startswith("/"):
        return os.path.realpath(text)
    if text.lower().startswith(("socket://", "rfc2217://")):
        return text.lower()  # scheme and host name are not case-sensitive
    return text


def _check_devices(devices: DevicesConfig, path: tuple, errs: _Collector) -> None:
    """The shuffler and the shoe are two devices: two URLs that reach the same port (or
    USB device) would have the controller talk to one device as both."""
    a, b = devices.shuffler.url, devices.shoe.url
    if a.lower().startswith("loop://"):  # each loop:// is a loopback of its own
        return
    addr = device_address(a)
    if addr == device_address(b):
        same = "the same URL as devices.shuffler.url" if a == b else \
            f"the same device as devices.shuffler.url {a!r} (both are {addr})"
        errs.add(path + ("shoe", "url"), f"{b!r} is {same}: the shuffler and the shoe each need their own port")


def _check_vendor_keys(fw: FirmwareSection, path: tuple, errs: _Collector) -> None:
    """Each vendor key file loads as an Ed25519 public key and is safe from other users."""
    from .files import unsafe_permissions
    from .keys import KeyFileError, load_public_key

    for i, key_path in enumerate(fw.key_paths(errs.base_dir)):
        why = unsafe_permissions(key_path)
        try:
            if why is not None:
                raise KeyFileError(f"it cannot be trusted: {why}")
            load_public_key(key_path)
        except KeyFileError as exc:
            errs.add(path + ("vendor_keys",), f"vendor key {i + 1} ({key_path}): {exc}; allowed: the public half "
                                              "of a vendor signing key (`tablectl firmware keygen` writes FILE.pub)")


def _check_device(device: DeviceConfig, path: tuple, errs: _Collector) -> None:
    """The driver named is installed, loads, is for a contract version this table
    supports and drives this kind; its own keys are what it accepts
    (``devices.plugins.prepare``; docs/drivers.md)."""
    from devices.contract import DriverError, DriverOptionError
    from devices.apart.choose import prepare_apart as prepare  # a plugin is checked in its own process

    kind = path[-1] if path and path[-1] in ("shuffler", "shoe") else None
    if kind is None:
        return
    try:
        prepare(device.driver, kind, device.options)
    except DriverOptionError as exc:
        errs.add(tuple(exc.key.split(".")), str(exc).split(": ", 1)[1])
    except DriverError as exc:
        errs.add(path + ("driver",), str(exc))


_AFTER_BUILD: dict[type, Callable[[Any, tuple, "_Collector"], None]] = {
    DeviceConfig: _check_device,
    PaytablesConfig: _check_paytables,
    LinkSection: _check_link,
    LimitsSection: _check_limits,
    DevicesConfig: _check_devices,
    FirmwareSection: _check_vendor_keys,
}


def parse_config(text: str, source: str | Path = "<string>") -> TableConfig:
    """Parse and validate config ``text``; ``source`` names the file in errors and
    anchors relative paytable paths. Raises :class:`ConfigError` listing every problem."""
    src = str(source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        raise ConfigError([Problem("", f"not valid TOML: {exc}", int(m.group(1)) if m else None)], src) from None
    path = Path(src) if src != "<string>" else None
    errs = _Collector(_Locator(text), path.parent if path else None)
    cfg = _build(TableConfig, data, (), errs)
    if errs.problems:
        raise ConfigError(errs.problems, src)
    return dataclasses.replace(cfg, source=path)


def load_config(path: str | Path = DEFAULT_PATH) -> TableConfig:
    """Read and validate the config file at ``path`` (default :data:`DEFAULT_PATH`).
    Raises :class:`ConfigError` when it cannot be read or is invalid."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([Problem("", f"cannot read the config: {reason}")], str(path)) from None
    return parse_config(text, path)


# -- TOML output ------------------------------------------------------------------------------


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def _to_toml(d: dict[str, Any], prefix: str = "") -> str:
    out: list[str] = []
    def is_tables(v: Any) -> bool:  # an array of tables, not of strings
        return isinstance(v, list) and any(isinstance(x, dict) for x in v)

    scalars = {k: v for k, v in d.items() if not isinstance(v, dict) and not is_tables(v)}
    if scalars and prefix:
        out.append(f"[{prefix}]")
    out += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    if scalars:
        out.append("")
    for k, v in d.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.append(_to_toml(v, name))
        elif is_tables(v):
            for item in v:
                out.append(f"[[{name}]]")
                out += [f"{ik} = {_toml_value(iv)}" for ik, iv in item.items()]
                out.append("")
    return "\n".join(x for x in out if x is not None).rstrip("\n") + "\n"
