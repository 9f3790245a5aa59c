"""The floor's config file (TOML), read by ``tablectl floor serve --config FILE``::

    [floor]
    database = "/var/lib/threecard/floor.sqlite3"   # or postgresql://floor@db1:5432/floor
    key_file = "/etc/threecard/floor.key"           # the floor key, 0600 (made at the first start if absent)
    table_keys = "/etc/threecard/tables"            # TABLE_ID.pub of every table believed
    listen = "127.0.0.1:8091"                       # the notary, the reports and the floor page
    people_file = "/etc/threecard/floor-people.toml"  # who may sign in to the reports
    timezone = "America/New_York"                   # the gaming day's zone
    day_starts_h = 6                                # the gaming day begins at 06:00
    display_timezone = "America/New_York"           # times on the floor's pages (default: this machine's zone)
    wall_pits = ["pit1"]                            # pits with a read-only wall page, /pit?pit=NAME (default none)

    [[broker]]                                      # one or more
    url = "mqtt://127.0.0.1:1883"                   # mqtts:// for TLS; /PREFIX: topics a bridge prefixed
    floors = ["pit1", "pit2"]                       # topic segments followed (default: all)
    password_file = "/etc/threecard/floor-broker.pw"  # with USER@ in url
    ca_file = "/etc/threecard/broker-ca.pem"

Relative paths are read against the config file's folder. Every problem is
collected and raised at once as :class:`FloorConfigError`, each naming the file,
the key and what is allowed; nothing is started on a bad config.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")
FLOOR_KEYS = {"database", "key_file", "table_keys", "listen", "people_file", "timezone", "day_starts_h",
              "display_timezone", "wall_pits"}
BROKER_KEYS = {"url", "floors", "password_file", "ca_file"}


class FloorConfigError(ValueError):
    """The floor config cannot be used; the message names the file and every bad key."""


@dataclass(frozen=True)
class BrokerConfig:
    """One ``[[broker]]``: ``url`` (``mqtt://[USER@]HOST[:PORT][/PREFIX]``), ``floors`` followed,
    ``password_file``, ``ca_file``."""

    url: str
    floors: tuple[str, ...] = ("+",)
    password_file: Path | None = None
    ca_file: Path | None = None


@dataclass(frozen=True)
class FloorConfig:
    """A validated floor config (see the module docstring)."""

    database: str
    key_file: Path
    table_keys: Path
    brokers: tuple[BrokerConfig, ...]
    listen: str = "127.0.0.1:8091"
    people_file: Path | None = None
    timezone: str = "UTC"
    day_starts_h: int = 0
    source: Path | None = None
    #: the IANA zone the floor's pages show times in; None: the floor machine's own
    display_timezone: str | None = None
    #: pits whose read-only wall page the floor serves without sign-in (``/pit?pit=NAME``)
    wall_pits: tuple[str, ...] = ()


def _config_path(key: str, table: dict[str, Any], prefix: str, required: bool, base: Path,
                 problems: list[str]) -> Path | None:
    """``table[key]`` as a path (relative ones from ``base``), or None with a problem noted
    in ``problems`` when it is missing (and ``required``) or not a path."""
    v = table.get(key)
    if v is None:
        if required:
            problems.append(f"{prefix}.{key}: missing required key")
        return None
    if not isinstance(v, str) or not v or "\0" in v:
        problems.append(f"{prefix}.{key}: {v!r} is not a path")
        return None
    p = Path(v)
    return p if p.is_absolute() else base / p


def _database(database: Any, base: Path, problems: list[str]) -> str:
    """``floor.database`` checked: a PostgreSQL URL without a password in it, a
    ``sqlite://`` URL, or a path (relative ones from ``base``); "" with a problem noted."""
    if not isinstance(database, str) or not database:
        problems.append("floor.database: missing; allowed: an absolute path, sqlite:////PATH or postgresql://...")
        database = ""
    elif database.startswith(("postgresql://", "postgres://")):
        if re.match(r"^postgres(ql)?://[^/@]*:[^/@]*@", database):
            problems.append("floor.database: a password in the URL; give it in PGPASSWORD or ~/.pgpass instead")
    elif not database.startswith("sqlite://"):
        p = Path(database)
        database = str(p if p.is_absolute() else base / p)
    return database


def _brokers(raw: Any, path: Callable[[str, dict[str, Any], str, bool], Path | None],
             problems: list[str]) -> list[BrokerConfig]:
    """The ``[[broker]]`` tables checked, each problem noted in ``problems``; ``path``
    reads a path key as :func:`_config_path` does."""
    brokers = []
    if not isinstance(raw, list) or not raw:
        problems.append("broker: give at least one [[broker]] with its url")
        raw = []
    for i, b in enumerate(raw):
        prefix = f"broker[{i}]"
        if not isinstance(b, dict):
            problems.append(f"{prefix}: not a table")
            continue
        for k in sorted(set(b) - BROKER_KEYS):
            problems.append(f"{prefix}.{k}: unknown key (allowed: {', '.join(sorted(BROKER_KEYS))})")
        url = b.get("url")
        if not isinstance(url, str) or not re.match(r"^mqtts?://", url):
            problems.append(f"{prefix}.url: {url!r}; allowed: mqtt://[USER@]HOST[:PORT][/PREFIX] or mqtts://...")
            continue
        floors = b.get("floors", ["+"])
        if not isinstance(floors, list) or not floors or not all(
                isinstance(x, str) and (x == "+" or _NAME.match(x)) for x in floors):
            problems.append(f"{prefix}.floors: {floors!r}; allowed: a list of floor names (letters, digits, . _ -)")
            continue
        brokers.append(BrokerConfig(url, tuple(floors), path("password_file", b, prefix, False),
                                    path("ca_file", b, prefix, False)))
    return brokers


def parse_floor_config(text: str, source: Path | None = None) -> FloorConfig:
    """The :class:`FloorConfig` of the TOML ``text`` (read from ``source``). Raises
    :class:`FloorConfigError` listing every problem."""
    where = str(source) if source else "<floor config>"
    base = source.parent if source else Path.cwd()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FloorConfigError(f"{where}: not valid TOML: {exc}") from None
    problems: list[str] = []
    for k in sorted(set(doc) - {"floor", "broker"}):
        problems.append(f"unknown section {k!r} (allowed: floor, broker)")
    f = doc.get("floor")
    if not isinstance(f, dict):
        raise FloorConfigError(f"{where}: no [floor] section (it names the database, the floor key and the table keys)")
    for k in sorted(set(f) - FLOOR_KEYS):
        problems.append(f"floor.{k}: unknown key (allowed: {', '.join(sorted(FLOOR_KEYS))})")

    def path(key: str, table: dict[str, Any], prefix: str, required: bool) -> Path | None:
        return _config_path(key, table, prefix, required, base, problems)

    database = _database(f.get("database"), base, problems)
    key_file = path("key_file", f, "floor", True)
    table_keys = path("table_keys", f, "floor", True)
    people = path("people_file", f, "floor", False)
    listen = f.get("listen", "127.0.0.1:8091")
    if not isinstance(listen, str) or not re.match(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}\Z", listen):
        problems.append(f"floor.listen: {listen!r}; allowed: HOST:PORT such as 127.0.0.1:8091")
    tz = f.get("timezone", "UTC")
    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"floor.timezone: {tz!r} is not a time zone; allowed: an IANA name such as America/New_York")
    shown = f.get("display_timezone")
    if shown is not None:
        try:
            ZoneInfo(str(shown))
        except (ZoneInfoNotFoundError, ValueError):
            problems.append(f"floor.display_timezone: {shown!r} is not a time zone; allowed: an IANA name such as "
                            "America/New_York (or leave it out: the floor machine's own zone)")
    wall = f.get("wall_pits", [])
    if not isinstance(wall, list) or not all(isinstance(p, str) and _NAME.match(p) for p in wall):
        problems.append(f"floor.wall_pits: {str(wall)[:80]!r}; allowed: a list of pit names (letters, digits, "
                        "'.', '_', '-'), the pits whose read-only wall page is served without sign-in")
        wall = []
    starts = f.get("day_starts_h", 0)
    if not isinstance(starts, int) or isinstance(starts, bool) or not 0 <= starts <= 23:
        problems.append(f"floor.day_starts_h: {starts!r}; allowed: an hour 0-23")
        starts = 0

    brokers = _brokers(doc.get("broker", []), path, problems)
    if problems:
        raise FloorConfigError(f"{where}: " + "; ".join(problems))
    assert key_file is not None and table_keys is not None
    return FloorConfig(database, key_file, table_keys, tuple(brokers), listen, people, str(tz), starts, source,
                       str(shown) if shown is not None else None, tuple(dict.fromkeys(wall)))


def load_floor_config(path: str | Path) -> FloorConfig:
    """The floor config at ``path``. Raises :class:`FloorConfigError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FloorConfigError(f"cannot read the floor config {p}: {exc}") from None
    return parse_floor_config(text, p.resolve())
