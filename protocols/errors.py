"""Typed errors raised by the pure protocol layer.

Every failure to parse or decode bytes raises a subclass of :class:`ProtocolError`,
so callers (and the fuzz tests) can rely on nothing else escaping.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Base of every error the ``protocols`` package raises on bad input."""


class FrameError(ProtocolError):
    """A frame could not be built or parsed (bad length, bad CRC, bad sync)."""


class MessageError(ProtocolError):
    """A frame's payload does not decode as the message its type byte names."""


class UnknownMessageType(MessageError):
    """The type byte names no message in the catalogue (protocols/SPEC.md §4)."""


class CardError(ProtocolError):
    """A rank, suit, card text or back colour that cannot exist in a 52-card deck."""
