"""The device end of a pseudo-terminal, in raw mode, for firmware emulators.

Pitfalls handled (docs/pitfalls.md, "Pseudo-terminals"): a new pty starts in echo/line mode, so the slave
is put in raw mode at once; the slave fd stays open for the emulator's life so
reads on the master never fail with EIO while the host is between opens.

A symlink path is **claimed** for as long as its emulator runs: a second
emulator asked for the same path is refused rather than repointing the link
under the first one's host (and deleting it when it exits). The claim is an
abstract-namespace Unix socket named after the path (Linux): the kernel drops
it when the process ends, however it ends, so a ``kill -9`` leaves no stale
claim and nothing is left on disk. Where abstract sockets do not exist the
claim is skipped.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import socket
import threading
import tty
from pathlib import Path
from typing import Callable

from protocols.clock import REAL_CLOCK, Clock

# Where a pty's slave lives (Linux /dev/pts/N, macOS /dev/ttysNNN): a symlink to one
# of these is a pty link (a previous emulator's, perhaps left by a kill -9) and may go.
_PTY_SLAVE = re.compile(r"/dev/(pts/\d+|ttys\d+)")


class PtyLinkError(OSError):
    """The symlink path asked for cannot be used: something that is not a symlink
    to a pty is there (a file, a folder, a device node, a udev name), which would be
    destroyed, or (for :func:`check_link_path`) its folder does not exist."""


def _claim_name(link: Path) -> bytes:
    absolute = os.path.join(os.path.realpath(link.parent), link.name)
    return b"\0threecard-pty/" + hashlib.sha256(absolute.encode()).hexdigest()[:48].encode()


def claim_link(link: str | os.PathLike[str]) -> socket.socket | None:
    """Claim ``link`` for this process: the returned socket holds the claim until it is
    closed (or the process ends). ``None`` where claims are not supported. Raises
    :class:`PtyLinkError` when a running emulator holds it."""
    link = Path(link)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(_claim_name(link))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            target = ""
            try:
                target = f" (-> {os.readlink(link)})"
            except OSError:
                pass
            raise PtyLinkError(f"{link}{target} is served by an emulator that is still running; refusing to take "
                               "it over (stop that emulator, or choose another path)") from None
        return None  # no abstract namespace here: no claims
    return sock


def is_pty_link(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a symlink to a pty slave (the target need not exist any more)."""
    try:
        return _PTY_SLAVE.fullmatch(os.readlink(path)) is not None
    except OSError:  # not a symlink, or not there
        return False


def _check_replaceable(link: Path) -> None:
    if (link.exists() or link.is_symlink()) and not is_pty_link(link):
        raise PtyLinkError(f"{link} exists and is not a symlink to a pty; refusing to replace it "
                           "(remove it or choose another path)")


def check_link_path(link: str | os.PathLike[str]) -> None:
    """Raise :class:`PtyLinkError` unless ``link`` can be made a pty symlink without
    destroying or creating anything else, or taking it from a live emulator: its
    folder exists, ``link`` is either absent or a symlink to a pty, and no running
    emulator claims it. For a user-given path (``tablectl emulate --pty``);
    :class:`PtyPort` itself creates missing folders (for its callers' temp folders)."""
    link = Path(link)
    if not link.parent.is_dir():
        raise PtyLinkError(f"{link.parent}: no such folder for the pty symlink {link} (create it first)")
    claim = claim_link(link)
    if claim is not None:
        claim.close()
    _check_replaceable(link)


class PtyPort:
    """A pty pair: the emulator reads/writes ``fd`` (the master); the host opens ``path``.

    ``link``: optional path of a symlink to create to the slave (e.g.
    ``/tmp/threecard/shoe``); its folder is created if missing; a symlink to a pty
    already there (a previous run's) is replaced; anything else there raises
    :class:`PtyLinkError` and is left alone. The link is removed on :meth:`close`
    if it still points at this pty. The link is claimed for this port's life
    (:func:`claim_link`): a link another running emulator serves raises
    :class:`PtyLinkError`. Raises ``OSError`` if the pty cannot be created.
    """

    def __init__(self, link: str | os.PathLike[str] | None = None, *, clock: Clock = REAL_CLOCK) -> None:
        self.link: Path | None = Path(link) if link is not None else None
        self.clock = clock  # an unplug's ``down_s`` runs on it (protocols.clock)
        self.on_change: Callable[[], None] = lambda: None  # set by the firmware emulator
        self._closed = False
        self._replug: threading.Timer | None = None
        self._claim: socket.socket | None = None
        if self.link is not None:
            self.link.parent.mkdir(parents=True, exist_ok=True)  # first: the claim names the real folder
            self._claim = claim_link(self.link)
        try:
            self._open()
        except BaseException:
            self._release_claim()
            raise

    def _release_claim(self) -> None:
        if self._claim is not None:
            self._claim.close()
            self._claim = None

    def _open(self) -> None:
        if self.link is not None:
            _check_replaceable(self.link)  # before the pty is made: nothing to undo on refusal
        self.fd, self._slave = os.openpty()
        try:
            tty.setraw(self._slave)
            tty.setraw(self.fd)
            os.set_blocking(self.fd, False)
            self.path = os.ttyname(self._slave)
            if self.link is not None:
                self.link.parent.mkdir(parents=True, exist_ok=True)
                # A fresh name, so that no file of the user's can be in the way (or be removed).
                tmp = self.link.with_name(f".{self.link.name}.{secrets.token_hex(6)}.new")
                tmp.symlink_to(self.path)
                try:
                    _check_replaceable(self.link)  # again, just before: the name may have been taken
                    tmp.replace(self.link)  # atomic: a host never sees the name missing
                except BaseException:
                    tmp.unlink(missing_ok=True)
                    raise
        except BaseException:
            for fd in (self.fd, self._slave):
                os.close(fd)
            self.fd = self._slave = -1
            raise

    def _owns_link(self) -> bool:
        try:
            return self.link is not None and os.readlink(self.link) == self.path
        except OSError:
            return False

    def disconnect(self, down_s: float = 0.0) -> None:
        """Model a USB-serial adapter pulled and plugged back: this pty is destroyed
        (the host's reads fail with EIO) and a new one appears behind the symlink,
        at once or after ``down_s`` seconds (the symlink is gone meanwhile, as the
        udev name of an unplugged adapter is). Without a symlink the host cannot
        find the device again."""
        old = (self.fd, self._slave)
        if down_s > 0:
            self.fd = self._slave = -1
            if self.link is not None and self._owns_link():
                self.link.unlink()
            self._replug = self.clock.timer(down_s, self._plug_back)
        else:
            self._open()
        for fd in old:
            try:
                os.close(fd)
            except OSError:
                pass

    def _plug_back(self) -> None:
        if self._closed:
            return
        self._open()
        self.on_change()

    @property
    def unplugged(self) -> bool:
        """True while the adapter is out (between :meth:`unplug` and :meth:`plug`)."""
        return self.fd < 0 and not self._closed

    def unplug(self) -> None:
        """Pull the USB-serial adapter and keep it out until :meth:`plug`: the pty is
        destroyed (the host's reads fail) and the symlink is removed, as the udev name
        of an unplugged adapter is."""
        if self.fd < 0:
            return
        if self._replug is not None:
            self._replug.cancel()
            self._replug = None
        old = (self.fd, self._slave)
        self.fd = self._slave = -1
        if self.link is not None and self._owns_link():
            self.link.unlink()
        for fd in old:
            try:
                os.close(fd)
            except OSError:
                pass

    def plug(self) -> None:
        """Plug the adapter back in: a new pty behind the symlink (the host finds it again)."""
        if self.fd >= 0 or self._closed:
            return
        self._open()
        self.on_change()

    @property
    def name(self) -> str:
        """The path a host should open: the symlink if one was asked for, else the slave."""
        return str(self.link) if self.link else self.path

    def fileno(self) -> int:
        return self.fd

    def read(self, max_bytes: int = 4096) -> bytes:
        """Non-blocking read from the master; b"" when nothing is waiting or unplugged."""
        if self.fd < 0:
            return b""
        try:
            return os.read(self.fd, max_bytes)
        except BlockingIOError:
            return b""

    def write(self, data: bytes) -> None:
        """Write all of ``data`` to the master (the host reads it from the slave)."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                import select

                select.select([], [self.fd], [], 1.0)
                continue
            view = view[n:]

    def close(self) -> None:
        """Close both ends and remove the symlink; safe to call twice."""
        self._closed = True
        if self._replug is not None:
            self._replug.cancel()
        for fd in (self.fd, self._slave):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd = self._slave = -1
        if self.link is not None and self._owns_link():  # not one another emulator has put there since
            self.link.unlink()
        self._release_claim()
