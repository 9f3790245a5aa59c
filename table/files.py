"""Files created safely: private, atomic, never through a planted symlink.

A state file (the journal head, a signed checkpoint, the MQTT state, a key)
is written to a fresh temporary file beside it, opened with
``O_CREAT | O_EXCL | O_NOFOLLOW`` (so a symlink or a file someone else put at
the temporary path is refused, not followed), given its mode at creation,
flushed to disk, then renamed over the target and the folder synced. A
reader never sees half a file and a crash leaves the old one.

:func:`unsafe_permissions` finds what an attacker could replace: a file or
a folder on its path that anyone may write.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Iterator


class UnsafeFile(OSError):
    """A file cannot be written or trusted safely (a symlink planted at its temporary
    path, a world-writable file or folder). The message says which and why."""


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically, the new file created with ``mode``.

    The temporary file ``.NAME.RANDOM.tmp`` in the same folder is opened with
    ``O_EXCL | O_NOFOLLOW``; ``durable``: fsync the file and the folder.
    Raises :class:`UnsafeFile` when something already sits at the temporary
    path (a planted symlink), ``OSError`` on disk errors (ENOSPC, EROFS...);
    the target is then unchanged.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, mode)
    except FileExistsError:
        raise UnsafeFile(errno.EEXIST, f"refusing to write through {tmp}: something already sits there") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, f"refusing to follow a symlink at {tmp}") from None
        raise
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have narrowed it; never widen beyond mode
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        _fsync_dir(target.parent)


def read_regular(path: str | Path, *, max_bytes: int = 1 << 20) -> bytes:
    """The bytes of the regular file at ``path`` (at most ``max_bytes``), opened without
    following a symlink at its last component. Raises ``FileNotFoundError``,
    :class:`UnsafeFile` (a symlink, not a regular file, too large) or ``OSError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, f"{path} is a symlink; refusing to follow it") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(errno.EINVAL, f"{path} is not a regular file")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeFile(errno.EFBIG, f"{path} is larger than {max_bytes} bytes")
    return data


def open_append_private(path: str | Path) -> int:
    """Open (or create, mode 0600) the regular file at ``path`` for appending, without
    following a symlink at its last component: a log another account cannot point
    elsewhere or read. Returns the file descriptor. Raises :class:`UnsafeFile` (a
    symlink, not a regular file) or ``OSError``."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, f"{path} is a symlink; refusing to follow it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, f"{path} is not a regular file")
    return fd


def unsafe_permissions(path: str | Path) -> str | None:
    """Why ``path`` could be replaced or edited by anyone on the machine, or None.

    Checks the file (world-writable, or group-writable by a group other than
    its owner's) and every folder above it up to ``/`` (world-writable without
    the sticky bit). A missing file gives None: loading it reports that.
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return None
    if st.st_mode & stat.S_IWOTH:
        return f"{p} is writable by every user (mode {stat.S_IMODE(st.st_mode):04o}); chmod o-w {p}"
    folder = p.resolve().parent
    while True:
        try:
            dst = folder.stat()
        except OSError:
            break
        if dst.st_mode & stat.S_IWOTH and not dst.st_mode & stat.S_ISVTX:
            return f"folder {folder} is writable by every user (mode {stat.S_IMODE(dst.st_mode):04o}): {p} could be replaced"
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def json_lines(text: str) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of JSON Lines ``text`` (1-based).
    Raises ``ValueError`` naming the first line that is not JSON."""
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"line {n}: not JSON ({exc})") from None

