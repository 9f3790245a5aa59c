"""The device end of a pseudo-terminal, in raw mode, for firmware emulators.

Pitfalls handled (DESIGN.md): a new pty starts in echo/line mode, so the slave
is put in raw mode at once; the slave fd stays open for the emulator's life so
reads on the master never fail with EIO while the host is between opens.
"""

from __future__ import annotations

import os
import threading
import tty
from pathlib import Path
from typing import Callable


class PtyPort:
    """A pty pair: the emulator reads/writes ``fd`` (the master); the host opens ``path``.

    ``link``: optional path of a symlink to create to the slave (e.g.
    ``/tmp/threecard/shoe``); replaced if it exists, removed on :meth:`close`.
    Raises ``OSError`` if the pty cannot be created.
    """

    def __init__(self, link: str | os.PathLike[str] | None = None) -> None:
        self.link: Path | None = Path(link) if link is not None else None
        self.on_change: Callable[[], None] = lambda: None  # set by the firmware emulator
        self._closed = False
        self._replug: threading.Timer | None = None
        self._open()

    def _open(self) -> None:
        self.fd, self._slave = os.openpty()
        tty.setraw(self._slave)
        tty.setraw(self.fd)
        os.set_blocking(self.fd, False)
        self.path = os.ttyname(self._slave)
        if self.link is not None:
            self.link.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.link.with_name(self.link.name + ".new")
            if tmp.is_symlink() or tmp.exists():
                tmp.unlink()
            tmp.symlink_to(self.path)
            tmp.replace(self.link)  # atomic: a host never sees the name missing

    def disconnect(self, down_s: float = 0.0) -> None:
        """Model a USB-serial adapter pulled and plugged back: this pty is destroyed
        (the host's reads fail with EIO) and a new one appears behind the symlink,
        at once or after ``down_s`` seconds (the symlink is gone meanwhile, as the
        udev name of an unplugged adapter is). Without a symlink the host cannot
        find the device again."""
        old = (self.fd, self._slave)
        if down_s > 0:
            self.fd = self._slave = -1
            if self.link is not None and self.link.is_symlink():
                self.link.unlink()
            self._replug = threading.Timer(down_s, self._plug_back)
            self._replug.daemon = True
            self._replug.start()
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
        if self.link is not None and self.link.is_symlink():
            self.link.unlink()
