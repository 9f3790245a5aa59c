"""What a driver process may reach, applied by the process itself before it imports any driver code.

Each driver process holds only its device (docs/drivers.md, "What a driver can reach"):

* every file descriptor it inherited is closed but its socket to the table (and
  0, 1, 2, which are ``/dev/null``): no journal, key or people file left open;
* no core dumps (``RLIMIT_CORE`` 0) and not dumpable (``PR_SET_DUMPABLE`` 0: no
  other process of its user can read its memory or ptrace it, and it cannot gain
  privileges again, ``PR_SET_NO_NEW_PRIVS``);
* in service mode (started as root, :attr:`Isolation.user` set): no network (a network
  namespace of its own holding only a loopback that is down, ``unshare(CLONE_NEWNET)``,
  as systemd's ``PrivateNetwork=yes``), then its own user and group, no supplementary
  group but the device's (:attr:`Isolation.device_group`): the table's key, journal and
  people file (0600/0640, the table's user) cannot be opened, and the table's memory
  (``/proc/PID/mem``, the kernel's ptrace access check: another user) cannot be read.

:func:`apply` raises :class:`IsolationError` when a step asked for cannot be taken: a
driver is never run with less isolation than configured.
"""

from __future__ import annotations

import ctypes
import os
import resource
from dataclasses import dataclass, field
from typing import Any

#: the first user id the table gives its drivers: systemd's DynamicUser= range (61184-65519)
DRIVER_UID_BASE = 61184
#: linux/sched.h
CLONE_NEWNET = 0x40000000
#: linux/prctl.h
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38


class IsolationError(OSError):
    """A step of a driver process's isolation failed (its name and the OS error)."""


@dataclass(frozen=True)
class Isolation:
    """How a driver process is confined.

    ``user``/``group``: the numeric ids it runs as (None: the table's own, a bench:
    only the descriptors, core and dumpable steps are taken); ``device_group``: a
    supplementary group that may open the device node (the udev rule's ``GROUP=``),
    or None; ``network``: False (the default) takes the network away, True keeps it
    (a device reached at ``socket://``: docs/drivers.md says what that costs).
    """

    user: int | None = None
    group: int | None = None
    device_group: int | None = None
    network: bool = False
    keep_fds: tuple[int, ...] = field(default=())

    @classmethod
    def service(cls, index: int, *, device_group: int | None = None, network: bool = False) -> "Isolation":
        """The service-mode isolation of the ``index``-th driver (0 shuffler, 1 shoe): user
        and group ``DRIVER_UID_BASE + index``, one of its own, as systemd's DynamicUser= gives."""
        uid = DRIVER_UID_BASE + index
        return cls(user=uid, group=uid, device_group=device_group, network=network)

    def to_wire(self) -> dict[str, Any]:
        return {"user": self.user, "group": self.group, "device_group": self.device_group, "network": self.network}

    @classmethod
    def from_wire(cls, obj: dict[str, Any]) -> "Isolation":
        return cls(user=obj.get("user"), group=obj.get("group"), device_group=obj.get("device_group"),
                   network=bool(obj.get("network", False)))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(name: str, rc: int) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"driver isolation: {name} failed: {os.strerror(err)}")


def close_inherited(keep: tuple[int, ...]) -> None:
    """Close every open descriptor but 0, 1, 2 and ``keep`` (read from ``/proc/self/fd``)."""
    keep_all = {0, 1, 2, *keep}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep_all:
            try:
                os.close(fd)
            except OSError:  # the directory's own descriptor, already closed
                pass


def apply(iso: Isolation, keep: tuple[int, ...]) -> None:
    """Confine this process as ``iso`` says (module docstring); ``keep``: the descriptors
    it keeps (its socket). Raises :class:`IsolationError`."""
    close_inherited(keep)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    libc = _libc()
    if not iso.network:
        _check("unshare(CLONE_NEWNET)", libc.unshare(CLONE_NEWNET))
    if iso.user is not None:
        gid = iso.group if iso.group is not None else iso.user
        os.setgroups([iso.device_group] if iso.device_group is not None else [])
        os.setresgid(gid, gid, gid)
        os.setresuid(iso.user, iso.user, iso.user)
        try:
            os.setuid(0)
        except PermissionError:
            pass
        else:  # pragma: no cover - the kernel gave root back: never run a driver so
            raise IsolationError(1, "driver isolation: the driver's user could become root again")
    _check("prctl(PR_SET_NO_NEW_PRIVS)", libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
    _check("prctl(PR_SET_DUMPABLE, 0)", libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
