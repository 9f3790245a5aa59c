"""Signing in over HTTP/WebSocket: people, PINs hashed with Argon2id, sessions that expire, lock-outs.

**People file** (``[auth] people_file``, default ``/etc/threecard/people.toml``;
``tablectl people add`` writes it)::

    # threecard-table people (tablectl people add / remove); keep it 0640 root:threecard
    [[person]]
    id = "S-17"
    role = "supervisor"
    pin = "$argon2id$v=19$m=65536,t=3,p=4$..."

    [[person]]
    id = "seat-3"
    role = "seat"
    seat = 3
    pin = "$argon2id$..."

    [[person]]
    id = "PB-2"
    role = "pit_boss"
    pits = ["pit1", "pit2"]     # the floor's reports of these pits only
    pin = "$argon2id$..."

A PIN is never stored: only its Argon2id hash (argon2-cffi, RFC 9106; its
default profile: 64 MiB, 3 passes, 4 lanes), which makes each guess cost
memory and time. The file is written atomically (``table.files.write_atomic``:
``O_EXCL|O_NOFOLLOW`` temporary, rename), mode 0640, given the group of its
folder so the service can read it; it is refused when other users may read
or write it, when it is a symlink, or when its folder is world-writable
(the hashes of short PINs must not be handed to an offline attack).

**Sign-in**: ``person`` + ``pin``. An unknown person costs the same hash as
a known one (no timing oracle). Each sign-in has an **origin**:
``table``, the table's own screens (``127.0.0.1``, ``::1`` and the addresses
or networks of ``[auth] table_screens``), or ``other``, everything else.
Failures are counted per person *and origin*: after ``max_failures`` failed
sign-ins a person is locked out *at that origin* for ``lockout_s``, doubling
with each further failure (at most an hour). So wrong PINs sent from the floor
network, from any number of addresses, never lock a supervisor out of the
table's own screens. The floor's reports (``tablectl floor serve``) sign people in
with origin ``floor``: bounded exactly as ``other`` (the floor has no screens of its
own, so loopback there earns nothing), and logged as ``floor`` with the peer's address. From ``other`` an address that fails often is locked out
the same way (a PIN cannot be guessed by trying every person), a person's
failures are forgotten only a day after the last one (a sign-in does not
reset them, so the guess budget :func:`guess_budget` holds), and at most
:data:`MAX_OTHER_IN_FLIGHT` sign-ins are checked at once, on their own hashing
slot: a flood can neither take the table's own slot nor the front doors'
worker threads. Guesses still being checked count against the limit, so a
burst sent at once gets no more tries than ``max_failures``.

**A person's own addresses.** From outside the table's screens, an address a person
signed in from (a right PIN) in the last :data:`KNOWN_ADDRESS_S` is theirs (at most
:data:`MAX_KNOWN_ADDRESSES`, the oldest forgotten first; kept in memory, so forgotten
at a restart): their failures from it count apart, on their own schedule, and its
sign-ins are checked on a hashing slot and an in-flight bound of their own. So wrong
PINs for a supervisor or a floor manager from any number of other addresses lock
them out of no address they sign in from, and a flood does not queue their sign-in
behind its own. Every other address shares one count per person. The guesses per
person from elsewhere are therefore at most ``1 + MAX_KNOWN_ADDRESSES`` times
:func:`guess_budget`, and all but one of those shares only from addresses the person
signed in from (``docs/web-console.md``). At most three hashes run at once (each
takes 64 MiB: the table's screens, a person's own addresses, every other address),
in the front doors' worker pool, never on the loop.

**Sessions**: a random 256-bit token (``secrets``), kept only as its SHA-256;
it ends ``session_ttl_s`` after sign-in, after ``session_idle_s`` unused, at
sign-out, when the person is removed from the file or their role changes, and
when the controller restarts. At most :data:`MAX_SESSIONS_PER_PERSON` per
person (the oldest ends) and :data:`MAX_SESSIONS` in all.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import ipaddress
import os
import re
import secrets
import stat
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import argon2
import structlog

from table.files import UnsafeFile, read_regular, unsafe_permissions, write_atomic
from table.roles import Actor, Role

log = structlog.get_logger("table.auth")

DEFAULT_PEOPLE_FILE = Path("/etc/threecard/people.toml")
#: a person id: what ``tablectl people add`` accepts (it goes into cookies, logs and the journal)
PERSON_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")
#: a pit's name: a table's ``[mqtt] floor`` (the topic segment its status names, signed)
PIT_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")
#: most pits one pit boss may be given
MAX_PITS = 32
MIN_PIN, MAX_PIN = 6, 64
MAX_SESSIONS = 1024
MAX_SESSIONS_PER_PERSON = 4
#: failed sign-ins from one address before it is locked out like a person
MAX_ADDRESS_FAILURES = 20
MAX_LOCKOUT_S = 3600.0
#: a person's failures from outside the table's screens are forgotten this long after the last
FORGET_AFTER_S = 86_400.0
#: sign-ins from outside the table's screens being checked at once, at most (each lane:
#: a person's known addresses, and every other address)
MAX_OTHER_IN_FLIGHT = 2
#: addresses remembered per person as theirs (each a right PIN from it), the oldest forgotten first
MAX_KNOWN_ADDRESSES = 4
#: an address is a person's for this long after their last right PIN from it (s)
KNOWN_ADDRESS_S = 30 * 86_400.0
#: the table's own screens, always (the kiosk browser on the table PC)
LOOPBACK_SCREENS = ("127.0.0.1", "::1")
TABLE, OTHER = "table", "other"
#: sign-ins to the floor's reports (``tablectl floor serve``): counted and bounded as ``other``
#: (the floor has no screens of its own; loopback there is a proxy or anyone with a shell), logged
#: as ``floor``
FLOOR = "floor"


def guess_budget(max_failures: int, lockout_s: float, seconds: float) -> int:
    """The most wrong PINs one person can be sent from one origin in ``seconds``
    (``max_failures`` at once, then one per lock-out, each twice as long as the one
    before, at most :data:`MAX_LOCKOUT_S`). ``docs/web-console.md`` gives the figures
    for the defaults."""
    n, t = max_failures, 0.0
    while True:
        t += min(lockout_s * 2 ** (n - max_failures), MAX_LOCKOUT_S)
        if t > seconds:
            return n
        n += 1


def screen_networks(addresses: Any = ()) -> tuple[Any, ...]:
    """The table's own screens: :data:`LOOPBACK_SCREENS` and ``addresses`` (IP addresses
    or networks, ``"10.1.2.3"``, ``"10.1.2.0/28"``), as ``ipaddress`` networks. Raises
    ``ValueError`` naming one that is not an address."""
    out = []
    for a in (*LOOPBACK_SCREENS, *addresses):
        try:
            out.append(ipaddress.ip_network(str(a), strict=False))
        except ValueError:
            raise ValueError(f"[auth] table_screens: {a!r} is not an IP address or network") from None
    return tuple(out)


class PeopleFileError(ValueError):
    """The people file cannot be read, is unsafe, or is invalid; the message names the
    file and what to do."""


class PinRejected(ValueError):
    """A new PIN breaks the PIN rules (length, printable, not trivially guessable)."""


@dataclass(frozen=True)
class Person:
    """One person who may sign in: ``id``, ``role``, ``seat`` (seat terminals only),
    ``pin`` (the Argon2id hash, never the PIN), ``pits`` (a pit boss only: the pits,
    tables' ``[mqtt] floor``, whose reports they may see on the floor)."""

    id: str
    role: Role
    pin: str
    seat: int | None = None
    pits: tuple[str, ...] = ()

    def actor(self, source: str) -> Actor:
        return Actor(self.id, self.role, seat=self.seat, source=source)


def check_person_id(value: str) -> str:
    """``value`` when it is a valid person id (1-64 of letters, digits, ``.``, ``_``, ``@``,
    ``-``, starting with a letter or digit). Raises ``ValueError``."""
    if not isinstance(value, str) or not PERSON_ID_RE.match(value):
        raise ValueError(f"{value!r} is not a person id; allowed: 1-64 letters, digits, '.', '_', '@', '-', "
                         "starting with a letter or digit")
    return value


def check_pits(role: Role, pits: Any) -> tuple[str, ...]:
    """``pits`` as a sorted tuple when ``role`` may have them: a pit boss names 1 to
    :data:`MAX_PITS` pits (:data:`PIT_RE`), nobody else names any. Raises ``ValueError``."""
    pits = tuple(pits or ())
    if role is not Role.PIT_BOSS:
        if pits:
            raise ValueError("only a pit boss (role pit_boss) has pits")
        return ()
    if not pits:
        raise ValueError("a pit boss names the pits they run (tablectl people add --pit NAME, once per pit)")
    if len(pits) > MAX_PITS or not all(isinstance(p, str) and PIT_RE.match(p) for p in pits):
        raise ValueError(f"pits: 1-{MAX_PITS} pit names of letters, digits, '.', '_', '-' (a table's [mqtt] floor)")
    return tuple(sorted(set(pits)))


def check_pin(pin: str) -> str:
    """``pin`` when it may be used: :data:`MIN_PIN`..:data:`MAX_PIN` printable
    characters, not one character repeated, not a run such as 123456 or 654321.
    Raises :class:`PinRejected`."""
    if not MIN_PIN <= len(pin) <= MAX_PIN:
        raise PinRejected(f"a PIN has {MIN_PIN} to {MAX_PIN} characters; this one has {len(pin)}")
    if not pin.isprintable():
        raise PinRejected("a PIN is printable characters only")
    if len(set(pin)) == 1:
        raise PinRejected("a PIN of one character repeated is the first one guessed")
    steps = {ord(b) - ord(a) for a, b in zip(pin, pin[1:])}
    if steps in ({1}, {-1}):
        raise PinRejected("a PIN counting up or down (123456, 654321) is among the first guessed")
    return pin


def _unmatchable(hasher: argon2.PasswordHasher) -> str:
    """An encoded Argon2 hash with ``hasher``'s parameters (type, version, memory, time,
    lanes, lengths) over a random salt and random hash bytes: checking a PIN against it costs
    what checking against a real one does (the cost is the parameters') and never matches
    (but with chance 2**-(8*hash_len)). Built without hashing: hashing a random PIN for it
    cost a whole Argon2 run (~0.2 s of CPU, >1 s of wall on a loaded table PC) at every start."""
    def b64(data: bytes) -> str:  # the PHC string format's base64: standard alphabet, no padding
        return base64.b64encode(data).decode("ascii").rstrip("=")

    return (f"$argon2{hasher.type.name.lower()}$v={argon2.low_level.ARGON2_VERSION}"
            f"$m={hasher.memory_cost},t={hasher.time_cost},p={hasher.parallelism}"
            f"${b64(secrets.token_bytes(hasher.salt_len))}${b64(secrets.token_bytes(hasher.hash_len))}")


class PinHasher:
    """Argon2id PIN hashes (argon2-cffi). ``hasher``: an ``argon2.PasswordHasher`` (default
    parameters: RFC 9106's low-memory profile); tests may pass a cheaper one."""

    def __init__(self, hasher: argon2.PasswordHasher | None = None) -> None:
        self.hasher = hasher or argon2.PasswordHasher()
        self._dummy = _unmatchable(self.hasher)

    def hash(self, pin: str) -> str:
        return self.hasher.hash(pin)

    def verify(self, encoded: str | None, pin: str) -> bool:
        """True when ``pin`` matches ``encoded``; an unknown person (``None``) costs the same."""
        try:
            return self.hasher.verify(encoded or self._dummy, pin) and encoded is not None
        except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError, ValueError):
            return False


# -- the people file -----------------------------------------------------------------------------


def _check_safe(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise PeopleFileError(f"{path} is a symlink; the people file must be a regular file")
    if st.st_mode & (stat.S_IROTH | stat.S_IWOTH | stat.S_IWGRP):
        raise PeopleFileError(f"{path} may be read or changed by other users (mode {stat.S_IMODE(st.st_mode):04o}); "
                              f"chmod 640 {path}")
    why = unsafe_permissions(path)
    if why:
        raise PeopleFileError(why)


def load_people(path: str | Path) -> dict[str, Person]:
    """The people in the file at ``path`` (id -> :class:`Person`); a missing file holds
    nobody. Raises :class:`PeopleFileError` naming every problem."""
    p = Path(path)
    try:
        _check_safe(p)
        data = read_regular(p, max_bytes=4 << 20)
    except FileNotFoundError:
        return {}
    except (UnsafeFile, OSError) as exc:
        raise PeopleFileError(f"cannot read the people file {p}: {exc}") from None
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PeopleFileError(f"{p} is not valid TOML: {exc}") from None
    unknown = sorted(set(doc) - {"person"})
    problems = [f"unknown key {k!r} (allowed: person)" for k in unknown]
    out: dict[str, Person] = {}
    entries = doc.get("person", [])
    if not isinstance(entries, list):
        entries, problems = [], problems + ["person must be an array of tables ([[person]])"]
    for i, e in enumerate(entries):
        where = f"person[{i}]"
        if not isinstance(e, dict):
            problems.append(f"{where} is not a table")
            continue
        extra = sorted(set(e) - {"id", "role", "pin", "seat", "pits"})
        if extra:
            problems.append(f"{where}: unknown key {extra[0]!r} (allowed: id, role, seat, pits, pin)")
        try:
            pid = check_person_id(e.get("id"))
        except ValueError as exc:
            problems.append(f"{where}.id: {exc}")
            continue
        try:
            role = Role(e.get("role"))
        except ValueError:
            problems.append(f"{where}.role: {e.get('role')!r}; allowed: {', '.join(r.value for r in Role)}")
            continue
        seat = e.get("seat")
        if role is Role.SEAT and not (isinstance(seat, int) and not isinstance(seat, bool) and 1 <= seat <= 7):
            problems.append(f"{where}.seat: a seat terminal names its seat, 1..7")
            continue
        if role is not Role.SEAT and seat is not None:
            problems.append(f"{where}.seat: only a seat terminal (role seat) has a seat")
            continue
        pits: tuple[str, ...] = ()
        if "pits" in e:  # a pit boss without pits is kept (an older file): the floor refuses them at sign-in
            if role is not Role.PIT_BOSS or not isinstance(e["pits"], list):
                problems.append(f"{where}.pits: a list of pit names, for a pit boss (role pit_boss) only")
                continue
            try:
                pits = check_pits(role, e["pits"])
            except ValueError as exc:
                problems.append(f"{where}.pits: {exc}")
                continue
        pin = e.get("pin")
        if not isinstance(pin, str) or not pin.startswith("$argon2"):
            problems.append(f"{where}.pin: not an Argon2 hash (set it with tablectl people add --replace)")
            continue
        if pid in out:
            problems.append(f"{where}.id: {pid} is listed twice")
            continue
        out[pid] = Person(pid, role, pin, seat, pits)
    if problems:
        raise PeopleFileError(f"{p}: " + "; ".join(problems))
    return out


def _render(people: dict[str, Person]) -> bytes:
    import json

    lines = ["# threecard-table people: who may sign in to the HTTP/WebSocket API.",
             "# Edit with `tablectl people add|remove`; PINs are Argon2id hashes. Keep it mode 0640.", ""]
    for person in sorted(people.values(), key=lambda x: x.id):
        lines += ["[[person]]", f"id = {json.dumps(person.id)}", f"role = {json.dumps(person.role.value)}"]
        if person.seat is not None:
            lines.append(f"seat = {person.seat}")
        if person.pits:
            lines.append(f"pits = {json.dumps(list(person.pits))}")
        lines += [f"pin = {json.dumps(person.pin)}", ""]
    return "\n".join(lines).encode()


def save_people(path: str | Path, people: dict[str, Person]) -> None:
    """Write ``people`` to ``path`` atomically (mode 0640, the group of its folder).
    Raises ``OSError`` (:class:`~table.files.UnsafeFile` for a planted temporary file)."""
    p = Path(path)
    write_atomic(p, _render(people), mode=0o640)
    try:
        os.chown(p, -1, os.stat(p.parent).st_gid)
    except OSError:
        pass  # not ours to give away (a non-root admin): the file keeps the admin's group


class PeopleFile:
    """Edits of the people file under an exclusive lock (``.NAME.lock`` beside it), so two
    ``tablectl people`` runs cannot lose each other's change."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _locked(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(f".{self.path.name}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def add(self, person_id: str, role: Role, pin: str, *, seat: int | None = None, replace: bool = False,
            hasher: PinHasher | None = None, pits: Any = ()) -> Person:
        """Add (or with ``replace``, replace) a person; ``pits``: a pit boss's pits
        (:func:`check_pits`). Raises ``ValueError`` (a bad id, seat, pits, an existing
        person), :class:`PinRejected`, :class:`PeopleFileError`, ``OSError``."""
        check_person_id(person_id)
        pits = check_pits(role, pits)
        check_pin(pin)
        if role is Role.SEAT and not (seat is not None and 1 <= seat <= 7):
            raise ValueError("a seat terminal (role seat) needs --seat 1..7")
        if role is not Role.SEAT and seat is not None:
            raise ValueError("only a seat terminal (role seat) has a seat")
        encoded = (hasher or PinHasher()).hash(pin)
        fd = self._locked()
        try:
            people = load_people(self.path)
            if person_id in people and not replace:
                raise ValueError(f"{person_id} is already in {self.path}; give --replace to set a new PIN or role")
            person = Person(person_id, role, encoded, seat, pits)
            people[person_id] = person
            save_people(self.path, people)
            return person
        finally:
            os.close(fd)

    def remove(self, person_id: str) -> bool:
        """Remove a person; False when they were not there."""
        fd = self._locked()
        try:
            people = load_people(self.path)
            if people.pop(person_id, None) is None:
                return False
            save_people(self.path, people)
            return True
        finally:
            os.close(fd)


# -- sign-in and sessions --------------------------------------------------------------------------


@dataclass
class Session:
    """A signed-in person: ``actor``, when it was made and last used (monotonic s)."""

    actor: Actor
    created: float
    last_used: float
    expires_at_unix: float
    digest: str = field(repr=False)


class SignInLocked(Exception):
    """Too many failed sign-ins: ``retry_after_s`` until the next try is heard."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many failed sign-ins; try again in {int(retry_after_s) + 1} s")
        self.retry_after_s = retry_after_s


@dataclass
class _Failures:
    count: int = 0
    locked_until: float = 0.0
    last: float = 0.0


class Authenticator:
    """Signs people in against the people file and keeps their sessions (thread-safe).

    ``people_file``: re-read whenever it changes (size, mtime or inode), so a
    person added or removed takes effect without a restart; ``hasher``: the PIN
    hasher; ``session_ttl_s``, ``session_idle_s``, ``max_failures``, ``lockout_s``
    as ``[auth]`` (``table.config.AuthSection``). ``clock``: monotonic seconds
    (tests may pass their own). ``table_screens``: addresses or networks of the table's
    own screens besides loopback (``[auth] table_screens``; see the module docstring).
    """

    def __init__(self, people_file: str | Path, *, hasher: PinHasher | None = None,
                 session_ttl_s: float = 8 * 3600.0, session_idle_s: float = 900.0, max_failures: int = 5,
                 lockout_s: float = 30.0, clock: Any = time.monotonic, table_screens: Any = ()) -> None:
        self.screens = screen_networks(table_screens)
        self.people_file = Path(people_file)
        self.hasher = hasher or PinHasher()
        self.session_ttl_s = session_ttl_s
        self.session_idle_s = session_idle_s
        self.max_failures = max_failures
        self.lockout_s = lockout_s
        self.clock = clock
        self._lock = threading.Lock()
        self._people: dict[str, Person] = {}
        self._stamp: tuple[int, int, int] | None = None
        self._sessions: dict[str, Session] = {}
        self._person_failures: dict[tuple[str, str], _Failures] = {}  # (person, origin)
        self._address_failures: dict[str, _Failures] = {}
        #: sign-ins being checked now, per person id and per address (a burst is bounded)
        self._in_flight: dict[tuple[int, str], int] = {}
        self._hashing = threading.BoundedSemaphore(1)  # sign-ins from outside the table's screens
        self._hashing_table = threading.BoundedSemaphore(1)  # the table's own screens': never a flood's
        self._hashing_known = threading.BoundedSemaphore(1)  # a person's own addresses': never a flood's
        self._other_in_flight = 0
        self._known_in_flight = 0
        #: person id -> {address: when they last signed in from it (clock s)}, at most MAX_KNOWN_ADDRESSES each
        self._known: dict[str, dict[str, float]] = {}
        self.people()  # a broken file is reported at start, not at the first sign-in

    @classmethod
    def from_config(cls, section: Any, **kw: Any) -> "Authenticator":
        """From a :class:`~table.config.AuthSection`."""
        return cls(section.people_file, session_ttl_s=section.session_ttl_s, session_idle_s=section.session_idle_s,
                   max_failures=section.max_failures, lockout_s=section.lockout_s,
                   table_screens=getattr(section, "table_screens", ()), **kw)

    def origin(self, address: str) -> str:
        """``"table"`` when ``address`` (the peer's IP) is one of the table's own screens,
        else ``"other"`` (an unparsable or empty address too)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return OTHER
        mapped = getattr(ip, "ipv4_mapped", None)
        ip = mapped or ip
        return TABLE if any(ip.version == n.version and ip in n for n in self.screens) else OTHER

    def people(self) -> dict[str, Person]:
        """The people now in the file (re-read when it changed). Raises :class:`PeopleFileError`."""
        try:
            st = os.stat(self.people_file)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp == self._stamp and (stamp is not None or not self._people):
                return self._people
        people = load_people(self.people_file) if stamp is not None else {}
        with self._lock:
            self._people, self._stamp = people, stamp
            return people

    # -- sign-in ----------------------------------------------------------------------------

    def _locked_for(self, table: dict[Any, _Failures], key: Any, now: float) -> float:
        f = table.get(key)
        return max(0.0, f.locked_until - now) if f else 0.0

    def _fail(self, table: dict[Any, _Failures], key: Any, limit: int, now: float) -> None:
        f = table.setdefault(key, _Failures())
        if f.count and now - f.last > FORGET_AFTER_S:
            f.count = 0
        f.count += 1
        f.last = now
        if f.count >= limit:
            f.locked_until = now + min(self.lockout_s * 2 ** (f.count - limit), MAX_LOCKOUT_S)
        if len(table) > 10_000:  # bound memory: forget the oldest unlocked entries, never a known person's
            known = self._people
            for k in [k for k, v in table.items() if v.locked_until <= now
                      and (k[0] if isinstance(k, tuple) else None) not in known][:5000]:
                table.pop(k, None)

    def _known_address(self, person_id: str, address: str, now: float) -> bool:
        """True when ``person_id`` signed in from ``address`` (a right PIN from outside the
        table's screens) within :data:`KNOWN_ADDRESS_S` (caller holds the lock)."""
        seen = self._known.get(person_id, {}).get(address) if address else None
        return seen is not None and now - seen <= KNOWN_ADDRESS_S

    def _remember_address(self, person_id: str, address: str, now: float) -> None:
        """``address`` is ``person_id``'s from now on (at most :data:`MAX_KNOWN_ADDRESSES`, the
        oldest forgotten first); caller holds the lock."""
        mine = self._known.setdefault(person_id, {})
        mine[address] = now
        while len(mine) > MAX_KNOWN_ADDRESSES:
            mine.pop(min(mine, key=mine.__getitem__))

    def _open_session(self, person: Any, source: str, now: float) -> tuple[str, Session]:
        """A new session for ``person`` (caller holds the lock): (token, session); the person's
        oldest beyond :data:`MAX_SESSIONS_PER_PERSON` and the table's least used beyond
        :data:`MAX_SESSIONS` end."""
        token = secrets.token_urlsafe(32)
        digest = hashlib.sha256(token.encode()).hexdigest()
        session = Session(person.actor(source), now, now, time.time() + self.session_ttl_s, digest)
        mine = sorted((s for s in self._sessions.values() if s.actor.person == person.id), key=lambda s: s.created)
        for old in mine[: max(0, len(mine) - MAX_SESSIONS_PER_PERSON + 1)]:
            self._sessions.pop(old.digest, None)
        if len(self._sessions) >= MAX_SESSIONS:
            oldest = min(self._sessions.values(), key=lambda s: s.last_used)
            self._sessions.pop(oldest.digest, None)
        self._sessions[digest] = session
        return token, session

    def sign_in(self, person_id: str, pin: str, *, address: str = "", source: str = "http",
                origin: str | None = None) -> tuple[str, Session]:
        """Check ``pin`` for ``person_id``; returns (token, session). ``address``: the
        peer's IP, which decides the origin (:meth:`origin`) unless ``origin`` is given
        (the terminal at the table: ``"table"``; the control socket: ``"other"``; the floor's
        reports: ``"floor"``, bounded as ``"other"``, logged as itself). Raises
        :class:`SignInLocked` while locked out (at that origin), ``PermissionError`` for
        an unknown person or a wrong PIN (one message for both), :class:`PeopleFileError`.
        Blocking (an Argon2 hash): call it from a worker thread."""
        now = self.clock()
        origin = self.origin(address) if origin not in (TABLE, OTHER, FLOOR) else origin
        pid = person_id if isinstance(person_id, str) else ""
        strict = origin != TABLE  # from outside the table's own screens (the floor's too): every bound
        with self._lock:
            known = strict and self._known_address(pid, address, now)
        # At the table's own screens, the person's count there. From elsewhere, an address the person
        # signed in from before counts apart (its own budget: failures from other addresses never lock
        # them out there); every other address shares one count per person.
        pkey: tuple[str, ...] = (pid, origin) if not strict else (pid, origin, address if known else "")
        keys: list[tuple[dict[Any, _Failures], Any, int]] = [(self._person_failures, pkey, self.max_failures)]
        if strict:  # at the table's own screens, the person's count alone
            keys.append((self._address_failures, address, MAX_ADDRESS_FAILURES))
        with self._lock:
            wait = max(self._locked_for(table, key, now) for table, key, _ in keys)
            if wait > 0:
                raise SignInLocked(wait)
            # Guesses in flight count as failures until answered: a burst sent at once
            # gets no more tries than the lock-out allows (after a lock-out, one at a time).
            for table, key, limit in keys:
                f = table.get(key)
                if self._in_flight.get((id(table), key), 0) >= max(1, limit - (f.count if f else 0)):
                    raise SignInLocked(1.0)
            if strict and known:
                if self._known_in_flight >= MAX_OTHER_IN_FLIGHT:
                    raise SignInLocked(1.0)
                self._known_in_flight += 1
            elif strict:
                if self._other_in_flight >= MAX_OTHER_IN_FLIGHT:
                    raise SignInLocked(1.0)
                self._other_in_flight += 1
            for table, key, _ in keys:
                self._in_flight[(id(table), key)] = self._in_flight.get((id(table), key), 0) + 1
        try:
            person = self.people().get(person_id) if isinstance(person_id, str) else None
            slot = self._hashing_table if origin == TABLE else self._hashing_known if known else self._hashing
            if not slot.acquire(timeout=30):
                raise SignInLocked(1.0)
            try:
                good = self.hasher.verify(person.pin if person else None, pin if isinstance(pin, str) else "")
            finally:
                slot.release()
        finally:
            with self._lock:
                if strict and known:
                    self._known_in_flight -= 1
                elif strict:
                    self._other_in_flight -= 1
                for table, key, _ in keys:
                    n = self._in_flight.pop((id(table), key), 1) - 1
                    if n > 0:
                        self._in_flight[(id(table), key)] = n
        now = self.clock()
        with self._lock:
            if not good:
                if isinstance(person_id, str) and len(person_id) <= 64:
                    self._fail(self._person_failures, pkey, self.max_failures, now)
                if strict:
                    self._fail(self._address_failures, address, MAX_ADDRESS_FAILURES, now)
                log.warning("sign_in_failed", person=person_id[:64] if isinstance(person_id, str) else None,
                            address=address[:64], origin=origin)
                raise PermissionError("unknown person or wrong PIN")
            assert person is not None
            if origin == TABLE:  # from outside, failures are forgotten only with time (the budget holds)
                self._person_failures.pop(pkey, None)
            elif address:  # this address is theirs from now on (its own count: see the module docstring)
                self._remember_address(person.id, address, now)
            token, session = self._open_session(person, source, now)
        log.info("signed_in", person=person.id, role=person.role.value, seat=person.seat, address=address[:64],
                 origin=origin)
        return token, session

    def check_pin(self, person_id: str, pin: str, *, address: str = "", source: str = "http",
                  origin: str | None = None) -> Actor:
        """Prove ``person_id`` by ``pin`` with the same check and lock-outs as
        :meth:`sign_in` (the same failure counts: a PIN guessed here is a sign-in
        guessed), leaving no session behind. Returns the person's actor. Raises as
        :meth:`sign_in`. Blocking (an Argon2 hash)."""
        token, session = self.sign_in(person_id, pin, address=address, source=source, origin=origin)
        self.sign_out(token)
        return session.actor

    def session(self, token: str | None, *, touch: bool = True) -> Session | None:
        """The live session of ``token``, or None (unknown, expired, idle too long, or the
        person left the file or changed role). ``touch``: this use keeps it alive (a
        request does; pushing an event to it does not)."""
        if not token or len(token) > 128:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        with self._lock:
            s = self._sessions.get(digest)
            if s is None:
                return None
            if now - s.created > self.session_ttl_s or now - s.last_used > self.session_idle_s:
                self._sessions.pop(digest, None)
                return None
        try:
            person = self.people().get(s.actor.person)
        except PeopleFileError as exc:
            log.error("people_file_unreadable", error=str(exc)[:300])
            person = None
        with self._lock:
            if person is None or person.role is not s.actor.role or person.seat != s.actor.seat:
                self._sessions.pop(digest, None)
                return None
            if touch:
                s.last_used = now
            return s

    def end_sessions(self, person: str) -> int:
        """End every session of ``person`` (a dealer whose shift was handed over: the
        outgoing dealer places no more bets nor signs at this table's screens). Returns how
        many ended."""
        with self._lock:
            gone = [d for d, s in self._sessions.items() if s.actor.person == person]
            for d in gone:
                self._sessions.pop(d, None)
        if gone:
            log.info("sessions_ended", person=person, sessions=len(gone), why="shift handed over")
        return len(gone)

    def sign_out(self, token: str | None) -> bool:
        if not token:
            return False
        with self._lock:
            return self._sessions.pop(hashlib.sha256(token.encode()).hexdigest(), None) is not None

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)
