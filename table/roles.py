"""Who may do what at the table: roles, the person behind each command, and what each role may ask.

Every command reaches the core as a :class:`~table.console.Command` carrying an
:class:`Actor`: the person (authenticated by the front door it came through:
``SO_PEERCRED`` on the Unix socket, a signed-in session over HTTP) and the
role that person holds. The core checks :data:`PERMISSIONS` itself, so no
front door can forget to. Supervisor-only actions are the ones a dealer
working with a player could abuse: voiding a losing round, bringing a deck
into play, entering a card, releasing a held round, acknowledging an incident.
Names and reasons are validated here (non-blank, bounded, printable), so a
1 MB reason or an object as a name never reaches the journal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Role(str, enum.Enum):
    """A role at the table. ``seat``: a seat terminal, which sees its own seat's channel.
    ``pit_boss`` and ``floor_manager`` are the floor's roles (``tablectl floor serve``'s
    reports, which show money; COMAR 36.05.03.25): they may ask a table nothing."""

    DEALER = "dealer"
    SUPERVISOR = "supervisor"
    PIT = "pit"
    AUDITOR = "auditor"
    SEAT = "seat"
    PIT_BOSS = "pit_boss"
    FLOOR_MANAGER = "floor_manager"


@dataclass(frozen=True)
class Actor:
    """The person behind a command. ``person``: their id (``"S-17"``, ``"uid:1001"``);
    ``role``; ``seat``: for a seat terminal, its seat; ``source``: the front door
    (``"control-socket"``, ``"http"``, ``"terminal"``, ``"api"``)."""

    person: str
    role: Role
    seat: int | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"person": self.person, "role": self.role.value}
        if self.seat is not None:
            d["seat"] = self.seat
        if self.source:
            d["source"] = self.source
        return d


#: the floor service's roles (table/floor/reports.py): no table action is theirs
FLOOR_ROLES = frozenset({Role.PIT_BOSS, Role.FLOOR_MANAGER})
#: every role at the table
ALL = frozenset(Role) - FLOOR_ROLES
FLOOR_STAFF = frozenset({Role.DEALER, Role.SUPERVISOR})
SUPERVISOR_ONLY = frozenset({Role.SUPERVISOR})

#: action -> the roles that may ask it (docs/console.md)
PERMISSIONS: dict[str, frozenset[Role]] = {
    "status": ALL,
    "place_bets": FLOOR_STAFF,
    "close_bets": FLOOR_STAFF,
    "confirm_collect": FLOOR_STAFF,
    "decide": FLOOR_STAFF,
    "dealer_hands": FLOOR_STAFF,
    "void": SUPERVISOR_ONLY,
    "confirm_void": SUPERVISOR_ONLY,
    "register_deck": SUPERVISOR_ONLY,
    "confirm_card": SUPERVISOR_ONLY,
    "release_hold": SUPERVISOR_ONLY,
    "acknowledge_incident": SUPERVISOR_ONLY,
    # the gaming day's procedures: asked by a supervisor, countersigned by a dealer (COMAR 36.05.03.10)
    "table_procedure": SUPERVISOR_ONLY,
}

#: longest person id and reason accepted (characters)
MAX_NAME = 64
MAX_REASON = 500


class InvalidArgument(ValueError):
    """A command argument that is missing, of the wrong type, blank, too long or not
    printable; the message names the argument and the rule."""


def allowed(actor: Actor | None, action: str) -> bool:
    """Whether ``actor`` may ask ``action``. ``None`` (an in-process caller that holds
    the controller, such as the vendor facade or a test) may ask anything."""
    if actor is None:
        return True
    return actor.role in PERMISSIONS.get(action, frozenset())


def text_arg(args: dict[str, Any], key: str, *, max_len: int, what: str | None = None) -> str:
    """``args[key]`` as a stripped, non-blank, printable string of at most ``max_len``
    characters. Raises :class:`InvalidArgument`."""
    what = what or key
    value = args.get(key)
    if value is None:
        raise InvalidArgument(f"{what} is required")
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > max_len:
        raise InvalidArgument(f"{what} is {len(value)} characters; at most {max_len}")
    value = value.strip()
    if not value:
        raise InvalidArgument(f"{what} must not be blank")
    if not value.isprintable():
        raise InvalidArgument(f"{what} must be printable text (no control characters)")
    return value


def person_name(value: Any, what: str = "person") -> str:
    """A person id: non-blank printable text of at most :data:`MAX_NAME` characters."""
    return text_arg({what: value}, what, max_len=MAX_NAME)


def reason_text(value: Any, what: str = "reason") -> str:
    """A reason: non-blank printable text of at most :data:`MAX_REASON` characters."""
    return text_arg({what: value}, what, max_len=MAX_REASON)
