"""Host side of the firmware update protocol (protocols/SPEC.md §9): transfer, commit, activate.

:class:`FirmwareTransfer` moves an image's bytes over an open, handshaken
:class:`~firmware_bridge.link.Link`: ``UpdateBegin`` with the image header
(the device answers how many bytes it already holds, so an interrupted
transfer resumes), then ``UpdateChunk``\\ s from that offset, each
acknowledged with the device's new offset, then ``UpdateCommit`` (the device
verifies the whole image) and ``UpdateActivate`` (the device restarts into
it once). It applies **no policy**: whether an image may be sent at all is
decided above it (``table/firmware.py``), and the device checks again on its
own. Tests use it to bypass the host's checks and prove the device refuses.

Interruptions: the link resends a request across a reconnect with the same
SEQ (SPEC §6.2), so a cable pull costs nothing here. A device that lost
power answers ``NO_UPDATE`` to a chunk or commit of a transfer it no longer
has in RAM: the transfer then begins again with the same header and the
device says how much of the image its flash kept. A link that stays down
raises :class:`~firmware_bridge.errors.LinkLost`; the same image sent later
resumes where the device stopped.

:func:`await_device` opens a fresh link after an activation (the old link
would call the new firmware version a tamper event, SPEC §6.1) and retries
the handshake until the device answers or a deadline passes.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

import structlog

from protocols.messages import (
    MAX_CHUNK_DATA,
    UPDATE_HEADER_SIZE,
    Ack,
    DeviceKind,
    FirmwareInfo,
    GetFirmwareInfo,
    NakCode,
    UpdateActivate,
    UpdateBegin,
    UpdateChunk,
    UpdateCommit,
    UpdateOffset,
)

from .errors import LinkError, LinkLost, LinkTimeout, RequestRefused, TransportError
from .factory import transport_for
from .link import DeviceIdentity, Link, LinkConfig

log = structlog.get_logger("firmware_bridge.update")

#: ``progress(bytes_held, image_bytes)``: called after each acknowledged chunk
Progress = Callable[[int, int], None]


class UpdateProtocolError(LinkError):
    """The device answered the update protocol with something that cannot be true
    (an offset outside the image, no progress for many chunks)."""


class FirmwareTransfer:
    """Send one image over ``link`` (open and handshaken). ``chunk_size``: data bytes
    per ``UpdateChunk`` (1..251; the device's ``max_chunk`` lowers it).

    Counters after :meth:`send`: ``resumed_from`` (the offset the device held at
    the first begin), ``bytes_sent`` (image bytes sent in chunks), ``chunks``,
    ``rebegins`` (begins after the device lost the transfer in a power cut).
    """

    def __init__(self, link: Link, *, chunk_size: int = MAX_CHUNK_DATA, max_rebegins: int = 8) -> None:
        if not 1 <= chunk_size <= MAX_CHUNK_DATA:
            raise ValueError(f"chunk_size must be 1..{MAX_CHUNK_DATA}")
        self.link = link
        self.chunk_size = chunk_size
        self.max_rebegins = max_rebegins
        self.resumed_from: int | None = None
        self.bytes_sent = 0
        self.chunks = 0
        self.rebegins = 0
        self._image = b""

    def info(self) -> FirmwareInfo:
        """The device's :class:`FirmwareInfo`. Raises ``RequestRefused`` (NOT_SUPPORTED or
        UNKNOWN_MESSAGE: the device takes no signed updates) and the link's errors."""
        reply = self.link.request(GetFirmwareInfo(), FirmwareInfo)
        assert isinstance(reply, FirmwareInfo)
        if reply.max_chunk < self.chunk_size:
            self.chunk_size = reply.max_chunk
        return reply

    def _begin(self) -> int:
        reply = self.link.request(UpdateBegin(self._image[:UPDATE_HEADER_SIZE]), UpdateOffset)
        assert isinstance(reply, UpdateOffset)
        return self._checked(reply.offset, UPDATE_HEADER_SIZE)

    def _rebegin(self, exc: RequestRefused) -> int:
        """The device lost the transfer from RAM (a reset): begin again, same header."""
        if exc.code is not NakCode.NO_UPDATE or self.rebegins >= self.max_rebegins:
            raise exc
        self.rebegins += 1
        log.warning("update_rebegin", reason="the device lost the transfer (reset)", rebegins=self.rebegins)
        return self._begin()

    def _checked(self, offset: int, low: int) -> int:
        if not low <= offset <= len(self._image):
            raise UpdateProtocolError(f"{self.link.name}: the device reports {offset} bytes held of a "
                                      f"{len(self._image)}-byte image")
        return offset

    def send(self, image: bytes, progress: Progress | None = None) -> None:
        """Begin (or resume) and send every byte of ``image`` (the image file's bytes).

        ``progress(held, total)`` is called after each acknowledged chunk, and once
        after the begin. Raises ``RequestRefused`` with the device's code (SPEC §9.4),
        ``LinkLost`` / ``LinkTimeout`` when the link fails for longer than it waits,
        :class:`UpdateProtocolError` for impossible answers.
        """
        if len(image) < UPDATE_HEADER_SIZE:
            raise ValueError(f"an image is at least its {UPDATE_HEADER_SIZE}-byte header")
        self._image = bytes(image)
        total = len(self._image)
        offset = self._begin()
        if self.resumed_from is None:
            self.resumed_from = offset
        if progress:
            progress(offset, total)
        # A bound on requests, so a device that never moves on cannot keep the host forever.
        budget = 4 * math.ceil(total / self.chunk_size) + 64
        while offset < total:
            budget -= 1
            if budget < 0:
                raise UpdateProtocolError(f"{self.link.name}: no end to the transfer at {offset} of {total} bytes")
            data = self._image[offset:offset + self.chunk_size]
            try:
                reply = self.link.request(UpdateChunk(offset, data), UpdateOffset)
            except RequestRefused as exc:
                offset = self._rebegin(exc)
                continue
            assert isinstance(reply, UpdateOffset)
            self.chunks += 1
            self.bytes_sent += len(data)
            offset = self._checked(reply.offset, UPDATE_HEADER_SIZE)
            if progress:
                progress(offset, total)

    def commit(self) -> None:
        """Ask the device to verify the whole image. A device reset since the last chunk
        (NO_UPDATE) is resumed first. Raises ``RequestRefused`` with its code."""
        while True:
            try:
                self.link.request(UpdateCommit(), Ack)
                return
            except RequestRefused as exc:
                if exc.code is not NakCode.NO_UPDATE or not self._image or self.rebegins >= self.max_rebegins:
                    raise
                self.rebegins += 1
                log.warning("update_rebegin", reason="the device lost the transfer before the commit (reset)")
                self.send(self._image)  # begins again: the device says what its flash kept

    def activate(self) -> None:
        """Ask the device to boot the committed image once; it restarts after its ``Ack``.
        Raises ``RequestRefused`` (NOT_COMMITTED, DECK_PRESENT)."""
        self.link.request(UpdateActivate(), Ack)


def await_device(
    url: Any,
    *,
    deadline_s: float,
    config: LinkConfig | None = None,
    usb_backend: Any = None,
    name: str = "firmware",
    expected_kind: DeviceKind | None = None,
    stop: threading.Event | None = None,
) -> tuple[Link, DeviceIdentity]:
    """Open a new link to ``url`` and handshake, trying again until ``deadline_s`` (s from
    now) passes: a device restarting into a new image (or hanging until its watchdog
    resets it) does not answer at once. Between failed opens it waits as the link's
    reconnect does (``reconnect_initial_ms`` doubling to ``reconnect_max_ms``); a
    handshake that times out has already waited its retransmit schedule. Returns the
    open link (the caller closes it) and the identity. Raises ``LinkTimeout`` when the
    deadline passes, ``HandshakeError`` at once for a refused identity.
    """
    cfg = config or LinkConfig()
    wait = stop or threading.Event()
    deadline = time.monotonic() + deadline_s
    backoff = cfg.reconnect_initial_ms / 1000
    last: Exception | None = None
    while True:
        link = Link(transport_for(url, usb_backend=usb_backend, read_timeout_ms=cfg.read_timeout_ms), name=name,
                    config=cfg, auto_reconnect=True)
        try:
            link.open()
            ident = link.handshake(expected_kind)  # type: ignore[arg-type]
            return link, ident
        except (TransportError, LinkLost, LinkTimeout, OSError) as exc:
            link.close()
            last = exc
        except BaseException:
            link.close()
            raise
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            raise LinkTimeout(f"{name}: no handshake with {url} within {deadline_s:g} s ({last})")
        if not isinstance(last, LinkTimeout):  # the open failed at once: back off, as a reconnect does
            wait.wait(min(backoff, left))
            backoff = min(backoff * 2, cfg.reconnect_max_ms / 1000)
