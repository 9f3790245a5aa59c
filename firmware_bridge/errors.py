"""Typed errors of the host-to-firmware link.

One small tree (python-can style): every link failure is a :class:`LinkError`;
a timeout is also a builtin ``TimeoutError`` and a lost link also a
``ConnectionError``, so generic handlers work too.
"""

from __future__ import annotations


class LinkError(Exception):
    """Base of every error raised by ``firmware_bridge``."""


class TransportError(LinkError, OSError):
    """The transport could not be opened or used. ``hint`` says what to do about it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message}" + (f" (hint: {hint})" if hint else ""))
        self.hint = hint


class LinkLost(LinkError, ConnectionError):
    """The device went away (EIO, ENODEV, socket closed) or the link was closed."""


class LinkTimeout(LinkError, TimeoutError):
    """No answer after every retransmission (SPEC §6.2)."""


class RequestRefused(LinkError):
    """The device answered a request with a NAK; ``code`` is the :class:`~protocols.messages.NakCode`."""

    def __init__(self, request: str, code: object) -> None:
        super().__init__(f"device refused {request}: {code}")
        self.request = request
        self.code = code


class HandshakeError(LinkError):
    """The device's identity is not acceptable (SPEC §6.1)."""


class ProtocolVersionMismatch(HandshakeError):
    """The device speaks another major protocol version than this host."""


class WrongDevice(HandshakeError):
    """The device at this address is not the kind of device expected."""
