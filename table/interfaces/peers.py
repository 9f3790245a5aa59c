"""Who is on the other end of a Unix socket, and which role that gives them (``SO_PEERCRED`` + ``[roles]``).

The kernel tells the control and event sockets the peer's uid, gid and
supplementary groups at connect time (``SO_PEERCRED``; ``SO_PEERGROUPS`` on
Linux 4.13+, else the group database). :class:`LocalRoles` maps those groups
to a role through the table config's ``[roles]`` section::

    [roles]
    dealer = ["threecard-dealer"]          # groups whose members are dealers
    supervisor = ["threecard-supervisor"]
    pit = ["threecard-pit"]
    auditor = ["threecard-audit"]
    seats = ["threecard-seat1", "threecard-seat2"]   # seat N's terminal: the N-th group
    owner = "supervisor"                   # the service's own account and root

A peer in several groups gets the strongest role (supervisor, dealer,
auditor, pit, seat). A peer in none has no role and is refused. The service's
own account and root hold the table key and the journal anyway, so they get
``owner`` (default ``supervisor``; ``"none"`` treats them like anyone else).
The person recorded with a command is the account's name (``uid:N`` without one).
"""

from __future__ import annotations

import array
import functools
import grp
import os
import pwd
import socket
from dataclasses import dataclass
from typing import Any, Iterable

from table.roles import Actor, Role

#: SO_PEERGROUPS (Linux 4.13+; Python's socket module does not name it): the peer's groups at connect
SO_PEERGROUPS = 59

@functools.lru_cache(maxsize=4096)
def _group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


@functools.lru_cache(maxsize=4096)
def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


#: strongest first: a peer in several groups gets the first role it has
PRECEDENCE = (Role.SUPERVISOR, Role.DEALER, Role.AUDITOR, Role.PIT, Role.SEAT)


@dataclass(frozen=True)
class PeerCredentials:
    """The peer of a Unix socket as the kernel says: ``pid``, ``uid``, ``gid``,
    ``groups`` (every gid, the primary one included), ``user`` (the account
    name, ``None`` when the uid has none)."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int]
    user: str | None

    @property
    def person(self) -> str:
        """The id recorded for this peer's commands: the account name, else ``uid:N``."""
        return self.user or f"uid:{self.uid}"

    def group_names(self) -> frozenset[str]:
        """The names of the peer's groups (gids without a name are left out; names are
        cached for the process's life, so a renamed group needs a restart)."""
        return frozenset(n for n in map(_group_name, self.groups) if n is not None)


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """The credentials of the peer of connected Unix socket ``sock``. Raises ``OSError``."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid, uid, gid = array.array("i", raw).tolist()
    user = _user_name(uid)
    try:
        buf = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * 256)
        groups = set(array.array("I", buf[: len(buf) - len(buf) % 4]).tolist())
    except OSError:
        groups = set(os.getgrouplist(user, gid)) if user else set()
    return PeerCredentials(pid, uid, gid, frozenset(groups | {gid}), user)


class LocalRoles:
    """Maps a Unix peer to an :class:`~table.roles.Actor` through group names.

    ``groups``: role -> group names; ``seats``: the group of seat N's terminal at
    index N-1 (``""`` for none); ``owner``: the role of root and of the account the
    server runs as (``None``: no special role). Unknown group names are allowed
    (a group not created yet grants nothing).
    """

    def __init__(self, groups: dict[Role, Iterable[str]] | None = None, seats: Iterable[str] = (),
                 owner: Role | None = Role.SUPERVISOR, *, server_uid: int | None = None) -> None:
        self.groups = {role: frozenset(names) for role, names in (groups or {}).items()}
        self.seats = tuple(seats)
        self.owner = owner
        self.server_uid = os.geteuid() if server_uid is None else server_uid

    @classmethod
    def from_config(cls, section: Any) -> "LocalRoles":
        """From a :class:`~table.config.RolesSection` (``None``: owner only)."""
        if section is None:
            return cls()
        groups = {Role.DEALER: section.dealer, Role.SUPERVISOR: section.supervisor, Role.PIT: section.pit,
                  Role.AUDITOR: section.auditor}
        owner = None if section.owner == "none" else Role(section.owner)
        return cls(groups, section.seats, owner)

    def actor(self, peer: PeerCredentials, source: str) -> Actor | None:
        """The actor ``peer`` acts as on front door ``source``, or ``None`` (no role)."""
        names = peer.group_names()
        found: list[tuple[int, Actor]] = []
        for role in (Role.SUPERVISOR, Role.DEALER, Role.AUDITOR, Role.PIT):
            if self.groups.get(role, frozenset()) & names:
                found.append((PRECEDENCE.index(role), Actor(peer.person, role, source=source)))
        for seat, group in enumerate(self.seats, start=1):
            if group and group in names:
                found.append((PRECEDENCE.index(Role.SEAT), Actor(peer.person, Role.SEAT, seat=seat, source=source)))
                break
        if self.owner is not None and self._is_owner(peer):
            found.append((PRECEDENCE.index(self.owner), Actor(peer.person, self.owner, source=source)))
        return min(found, key=lambda f: f[0])[1] if found else None

    def _is_owner(self, peer: PeerCredentials) -> bool:
        return peer.uid == 0 or peer.uid == self.server_uid

    def describe(self) -> str:
        """One line for an error message: which groups give which role."""
        parts = [f"{r.value}: {', '.join(sorted(g))}" for r, g in self.groups.items() if g]
        if any(self.seats):
            parts.append("seats: " + ", ".join(f"{i}={g}" for i, g in enumerate(self.seats, 1) if g))
        return "; ".join(parts) or "no groups are configured ([roles] in the table config)"
