"""The host side's view of the wire: every frame on a device link, as text a person can read.

:func:`describe_frame` turns one frame's bytes into its fields (``seq``,
``type``, ``kind``, spaced ``hex`` and the decoded ``message``);
:class:`FrameTrace` writes one JSON object a line for every frame of the
links it is hooked to (``tablectl run --trace-frames FILE``; the link calls
the hook, :class:`firmware_bridge.link.Link` ``frame_trace``), and
``tablectl probe`` prints the same description of each reply.

Sealed cards (58 Pa. Code 816a.1; protocols/SPEC.md §4.2: the host never stores or logs a
deck's order). A ``CardDrawn`` frame names a card the moment it is read, long
before the round may reveal it, and a trace is a file anyone who can read it
could use. So unless the caller asks for card faces (``card_faces=True``,
which the CLI allows only for emulated decks), a CardDrawn frame is masked:
the decoded ``card`` is ``"??"``, and in the hex the rank and suit bytes are
``??`` **and so is the CRC**, because the CRC-16 over the payload would give
the card back to anyone trying the 52 candidates. The draw index and back
colour stay: they say that a card was read, and from which deck, not which.

The trace file is created the way :mod:`table.files` creates state files:
``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600 from the start, so it is never
written through a symlink someone planted at the path, never appended to an
existing file, and never readable by other users. It stops growing at
``max_bytes`` (one last line says so), so a forgotten trace cannot fill the disk.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import threading
import time
from typing import Any, Callable

from protocols.errors import FrameError, MessageError
from protocols.frame import decode_frame
from protocols.messages import CardDrawn, catalogue, decode_message, direction_of
from protocols.vectors import message_to_dict

from .files import UnsafeFile

#: CardDrawn payload offsets that name the card (SPEC §4.3: draw_index, rank, suit, back_colour).
_CARD_BYTES = (1, 2)
#: Frame layout (SPEC §2): SYNC LEN SEQ TYPE, then the payload, then the CRC-16.
_HEADER = 4
_CRC = 2
MASK = "??"
#: Default size at which a trace stops (bytes).
DEFAULT_MAX_BYTES = 100 * 1024 * 1024


def _masked_hex(wire: bytes, masked: set[int]) -> str:
    return " ".join(MASK if i in masked else f"{b:02x}" for i, b in enumerate(wire))


def describe_frame(wire: bytes, *, card_faces: bool = False) -> dict[str, Any]:
    """One frame's bytes as JSON-ready fields: ``seq``, ``type`` (``"0x51"``), ``kind``
    (request, event or reply), ``hex`` (bytes spaced, ``??`` where masked) and
    ``message`` (the decoded message's fields, or ``{"error": why}`` when it does not
    decode). A CardDrawn frame's card is masked unless ``card_faces`` (module
    docstring). Never raises for any ``wire``."""
    masked: set[int] = set()
    try:
        frame = decode_frame(wire)
    except FrameError as exc:
        # Not one whole frame: still hide what could be a card (a CardDrawn type byte).
        if len(wire) > _HEADER and wire[3] == CardDrawn.TYPE and not card_faces:
            masked = set(range(_HEADER, len(wire)))
        return {"hex": _masked_hex(wire, masked), "message": {"error": str(exc)}}
    out: dict[str, Any] = {"seq": frame.seq, "type": f"0x{frame.type:02x}", "kind": direction_of(frame.type).value}
    hide = frame.type == CardDrawn.TYPE and not card_faces
    if hide:
        masked = {_HEADER + i for i in _CARD_BYTES if i < len(frame.payload)}
        masked |= set(range(len(wire) - _CRC, len(wire)))
    try:
        fields = message_to_dict(decode_message(frame.type, frame.payload))
    except MessageError as exc:
        name = catalogue().get(frame.type)
        fields = {"message": name.__name__ if name else None, "error": str(exc)}
        if hide:  # a CardDrawn that does not decode still carries what may be a card: all of its payload
            masked = set(range(_HEADER, len(wire)))
    else:
        if hide:
            fields["card"] = MASK
    out["hex"] = _masked_hex(wire, masked)
    out["message"] = fields
    return out


def summary_text(fields: dict[str, Any]) -> str:
    """A decoded message as one short line: ``CardDrawn draw_index=0 card=?? back_colour=red``."""
    msg = dict(fields)
    name = msg.pop("message", None) or "?"
    return " ".join([str(name)] + [f"{k}={v}" for k, v in msg.items()])


def _now_iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def create_private(path: str | os.PathLike[str]) -> int:
    """Create ``path`` for writing, mode 0600, refusing an existing file or a symlink at
    the path (``O_CREAT | O_EXCL | O_NOFOLLOW``); returns the file descriptor. Raises
    :class:`~table.files.UnsafeFile` (something is already there: a file or a planted
    symlink) or ``OSError`` (no such folder, no permission...)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise UnsafeFile(errno.EEXIST, f"{path} already exists (a file, or a symlink someone put there); "
                                       "a trace is always a new file: choose another name") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, f"refusing to follow a symlink at {path}") from None
        raise OSError(exc.errno, f"cannot create {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o600)  # whatever the umask: never wider than the owner
    except OSError:
        os.close(fd)
        raise
    return fd


class FrameTrace:
    """A frame trace file: one JSON object a line, ``{"time", "device", "direction",
    "seq", "type", "kind", "hex", "message"}`` per frame (``direction``: ``"tx"`` host
    to device, ``"rx"`` device to host; ``time``: ISO 8601 UTC, microseconds).

    ``path``: a new file (see :func:`create_private` for what is refused);
    ``card_faces``: leave CardDrawn cards unmasked (emulated decks only);
    ``max_bytes``: stop writing past this size; ``clock``: seconds since the epoch.
    Raises ``OSError`` (:class:`~table.files.UnsafeFile`) when the file cannot be
    created. Writing never raises into the link: a failed write stops the trace and
    is counted in :attr:`errors`. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, card_faces: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES, clock: Callable[[], float] = time.time) -> None:
        self.path = os.fspath(path)
        self.card_faces = card_faces
        self.max_bytes = max_bytes
        self.clock = clock
        self.frames = 0
        self.errors = 0
        self.written = 0
        self._lock = threading.Lock()
        self._fd: int | None = create_private(self.path)

    def hook(self, device: str) -> Callable[[str, bytes], None]:
        """The ``frame_trace`` callable for one device's link (``device``: its name in
        the trace, e.g. ``"shoe"``)."""
        return lambda direction, wire: self.record(device, direction, wire)

    def record(self, device: str, direction: str, wire: bytes) -> None:
        """Write one frame's line. Never raises."""
        try:
            fields = describe_frame(bytes(wire), card_faces=self.card_faces)
            line = json.dumps({"time": _now_iso(self.clock()), "device": device, "direction": direction, **fields},
                              separators=(",", ":")) + "\n"
        except Exception:  # noqa: BLE001 - a trace must never take the link down
            self.errors += 1
            return
        data = line.encode()
        with self._lock:
            fd = self._fd
            if fd is None:
                return
            try:
                if self.written + len(data) > self.max_bytes:
                    end = json.dumps({"time": _now_iso(self.clock()), "note": "trace stopped",
                                      "reason": f"reached {self.max_bytes} bytes", "frames": self.frames}) + "\n"
                    os.write(fd, end.encode())
                    self._close_locked()
                    return
                os.write(fd, data)
                self.written += len(data)
                self.frames += 1
            except OSError:
                self.errors += 1
                self._close_locked()

    def _close_locked(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def close(self) -> None:
        """Stop tracing and close the file; safe to call twice."""
        with self._lock:
            self._close_locked()

    def __enter__(self) -> "FrameTrace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
