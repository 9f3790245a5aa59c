"""The driver contract on the wire between the table and a driver process: JSON lines.

One JSON object a line (UTF-8, ``\\n``-ended, at most :data:`MAX_LINE` bytes), each
with ``"t"`` (its type). Version :data:`WIRE_VERSION`; the table's ``hello`` carries
it and the driver process refuses any other (the table then reports a driver
install that does not match, docs/drivers.md "A driver's process").

Table -> driver: ``hello`` (what to open, once), ``call`` (``id``, ``op`` one of
:data:`CALLS`, ``args``), ``ack`` (``seq``: the event is journaled), ``resume_reply``
(``id``, ``seq``), ``close``.
Driver -> table: ``ready`` (name, package, version, contract version, capabilities,
link), ``refused`` (``error``), ``reply`` (``id``, ``value`` or ``error``, ``link``),
``event`` (``ev``, ``link``), ``link`` (the link's state, identity, capabilities
and ``frame_errors`` when they changed between events), ``resume`` (``id``,
``identity``), ``trace`` (``dir``, ``hex``).

A message crosses as its SPEC type byte and payload (``protocols.messages``'
own codec, SPEC §4): the table decodes it as it would a frame from the device, so
a driver process can send nothing the catalogue does not hold. Everything from a
driver process is outside input: :func:`decode_line` and the ``from_*`` functions
raise :class:`WireError` for anything malformed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

from devices.contract import (
    Capabilities,
    DeviceEvent,
    DeviceIdentity,
    DeviceKind,
    LinkConfig,
    LinkError,
    LinkLost,
    LinkNotice,
    LinkTimeout,
    Message,
    NakCode,
    RefusedEvent,
    RequestRefused,
    TransportError,
    HandshakeError,
    ProtocolVersionMismatch,
    WrongDevice,
    DriverError,
    DriverOptionError,
)
from firmware_bridge.ledger import FirmwareNotAllowed, TamperDetected
from protocols.messages import catalogue

WIRE_VERSION = 1
#: the longest line either side accepts (bytes): a status, an event or an opening fit in far less
MAX_LINE = 64 * 1024
#: the driver calls a table makes (docs/drivers.md, "The contract")
CALLS = frozenset({"status", "shuffle", "open_shuffle"})

#: the contract's errors a driver process may raise back by name, each rebuilt as itself
_ERRORS: dict[str, type[LinkError]] = {c.__name__: c for c in (
    LinkError, LinkLost, LinkTimeout, TransportError, HandshakeError, ProtocolVersionMismatch, WrongDevice,
    FirmwareNotAllowed, TamperDetected, DriverError)}


class WireError(LinkError):
    """A line from a driver process that is not the wire's (not JSON, too long, a field
    missing or of the wrong type, a message not in the catalogue): the driver process is
    treated as failed."""


class DriverRaised(LinkError):
    """A driver raised outside the contract's error tree in a call (a ``ValueError`` from
    ``status()``): a device fault, named by the driver and its version, never the
    exception's text (it may name a card)."""


class DriverProcessFailed(LinkLost):
    """A driver's process ended (an exit, a crash, a signal), hung in a call past its
    deadline, or broke the wire: the call is a device fault, the process is started again."""


def encode_line(obj: dict[str, Any]) -> bytes:
    """``obj`` as one line of the wire (bytes, ``\\n``-ended)."""
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def decode_line(line: bytes) -> dict[str, Any]:
    """One line of the wire -> its object. Raises :class:`WireError`."""
    if len(line) > MAX_LINE:
        raise WireError(f"a line of {len(line)} bytes (at most {MAX_LINE})")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not a JSON line: {exc}") from None
    except RecursionError:  # a line nested past the interpreter's depth: a broken wire, never a crash
        raise WireError("a JSON line nested too deep") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("t"), str):
        raise WireError("a line without its type ('t')")
    return obj


def _need(obj: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict) or key not in obj or not isinstance(obj[key], kind) or (
            isinstance(obj[key], bool) and kind in (int, (int, float))):
        raise WireError(f"field {key!r} missing or not a {getattr(kind, '__name__', kind)}")
    return obj[key]


# -- messages and events ---------------------------------------------------------------------


def to_message(msg: Message) -> dict[str, Any]:
    return {"m": msg.TYPE, "p": msg.encode().hex()}


def from_message(obj: Any) -> Message:
    """A catalogue message from ``{"m": TYPE, "p": HEX}``. Raises :class:`WireError`."""
    cls = catalogue().get(_need(obj, "m", int))
    if cls is None:
        raise WireError(f"message type {obj['m']!r} is not in the catalogue (SPEC §4)")
    try:
        return cls.decode(bytes.fromhex(_need(obj, "p", str)))
    except Exception as exc:  # noqa: BLE001 - the codec's own errors: a payload that does not fit
        raise WireError(f"{cls.__name__}: {type(exc).__name__}: payload does not decode") from None


def to_event(ev: DeviceEvent) -> dict[str, Any]:
    msg = ev.message
    out: dict[str, Any] = {"seq": ev.seq, "boot": ev.boot_id, "at": ev.received_at}
    if isinstance(msg, LinkNotice):
        out["notice"] = {"kind": msg.kind, "detail": msg.detail}
    elif isinstance(msg, RefusedEvent):
        out["refused"] = {"type": msg.type, "reason": msg.reason, "nak": int(msg.nak), "detail": msg.detail,
                          "payload": msg.payload.hex()}
    else:
        out["msg"] = to_message(msg)
    return out


def from_event(obj: Any, source: str, notice_kinds: Any) -> DeviceEvent:
    """A :class:`DeviceEvent` of link ``source`` (the table's name for it, never the
    driver's). Raises :class:`WireError`."""
    seq, boot, at = _need(obj, "seq", int), _need(obj, "boot", int), _need(obj, "at", (int, float))
    if "notice" in obj:
        n = obj["notice"]
        kind = _need(n, "kind", str)
        if kind not in notice_kinds:
            raise WireError(f"link notice {kind!r} is not one of the contract's")
        message: Any = LinkNotice(kind, _need(n, "detail", str)[:500])
    elif "refused" in obj:
        r = obj["refused"]
        try:
            message = RefusedEvent(_need(r, "type", int), _need(r, "reason", str)[:40], NakCode(_need(r, "nak", int)),
                                   _need(r, "detail", str)[:500], bytes.fromhex(_need(r, "payload", str)))
        except ValueError as exc:
            raise WireError(f"a refused event: {exc}") from None
    else:
        message = from_message(obj.get("msg"))
    return DeviceEvent(source, message, float(at), seq, boot)


# -- identity, capabilities, link state ------------------------------------------------------


def to_identity(ident: DeviceIdentity | None) -> dict[str, Any] | None:
    if ident is None:
        return None
    d = asdict(ident)
    d["kind"] = int(ident.kind)
    return d


def from_identity(obj: Any) -> DeviceIdentity | None:
    if obj is None:
        return None
    try:
        return DeviceIdentity(DeviceKind(_need(obj, "kind", int)), _need(obj, "protocol_major", int),
                              _need(obj, "protocol_minor", int), _need(obj, "firmware_version", str)[:64],
                              _need(obj, "serial_number", str)[:64], _need(obj, "boot_id", int))
    except ValueError as exc:
        raise WireError(f"an identity: {exc}") from None


def to_capabilities(caps: Capabilities) -> dict[str, bool]:
    return {f.name: bool(getattr(caps, f.name)) for f in fields(Capabilities)}


def from_capabilities(obj: Any) -> Capabilities:
    if not isinstance(obj, dict) or not obj:
        raise WireError("no capabilities declared")
    return Capabilities(**{f.name: _need(obj, f.name, bool) for f in fields(Capabilities)})


def to_link_config(cfg: LinkConfig) -> dict[str, Any]:
    return asdict(cfg)


def from_link_config(obj: dict[str, Any]) -> LinkConfig:
    known = {f.name for f in fields(LinkConfig)}
    kw = {k: v for k, v in obj.items() if k in known}
    for key in ("firmware_allowlist",):
        if key in kw:
            kw[key] = tuple(kw[key])
    if "firmware_approved" in kw:
        kw["firmware_approved"] = tuple(tuple(p) for p in kw["firmware_approved"])
    return LinkConfig(**kw)


# -- errors ------------------------------------------------------------------------------------


def to_error(exc: BaseException) -> dict[str, Any]:
    """A driver's exception for the table: a contract error by name with its text; any
    other exception by its type's name only (its text may name a card: never sent)."""
    if isinstance(exc, RequestRefused):
        return {"type": "RequestRefused", "request": str(exc.request), "code": int(exc.code) if isinstance(exc.code, int) else -1}
    if isinstance(exc, DriverOptionError):
        return {"type": "DriverOptionError", "key": exc.key, "message": str(exc).split(": ", 1)[-1]}
    if isinstance(exc, LinkError):
        name = next((c.__name__ for c in type(exc).__mro__ if c.__name__ in _ERRORS), "LinkError")
        return {"type": name, "message": str(exc)[:500], "hint": getattr(exc, "hint", "")}
    return {"type": "raised", "raised": type(exc).__name__[:80]}


def from_error(obj: Any, who: str) -> LinkError:
    """The table's side of :func:`to_error`; ``who`` names the driver (for an error
    outside the contract: ``"the shoe's driver 'x' 1.0"``). Returns the exception to raise."""
    kind = _need(obj, "type", str)
    if kind == "RequestRefused":
        try:
            code: Any = NakCode(_need(obj, "code", int))
        except ValueError:
            code = obj["code"]
        return RequestRefused(str(obj.get("request", "request"))[:80], code)
    if kind == "DriverOptionError":
        return DriverOptionError(_need(obj, "key", str)[:120], _need(obj, "message", str)[:500])
    if kind == "TransportError":
        return TransportError(f"{who}: {_need(obj, 'message', str)}", str(obj.get("hint", ""))[:500])
    if kind in _ERRORS:
        cls = _ERRORS[kind]
        try:
            return cls(f"{_need(obj, 'message', str)}")
        except TypeError:  # an error class with another constructor: its text as a LinkError
            return LinkError(obj["message"])
    return DriverRaised(f"{who} raised {str(obj.get('raised', 'an exception'))[:80]}")
