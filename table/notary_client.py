"""The table's side of the floor's notary: at start, ask the floor for this table's last
signed checkpoint, so a journal rolled back behind it is held as an incident.

Why (docs/decisions/0004-anchors-off-the-table.md): the broker's retained checkpoint is not off the table's reach. An
insider who stops the table, restores an older journal with its genuine head file
and republishes the older genuine retained checkpoint gets a controller that
resumes without an incident. The floor (``tablectl floor serve``, ``table/floor/``)
keeps per table the highest signed checkpoint it has seen and never takes a lower
or forked one, so its answer is an anchor no one at the table can take back.

The request (``docs/integration.md``, "The floor's notary")::

    GET {floor.url}/api/v1/notary/{table_id}?nonce={32 hex digits}

The answer is a JSON envelope signed with the **floor's** Ed25519 key::

    {"schema": "threecard.floor-signed/1", "key_id": "<the floor key's id>",
     "payload": "{\\"schema\\":\\"threecard.notary/1\\",\\"table_id\\":...}", "sig": "<base64>"}

the signature over ``b"threecard.floor-signed/1\\n" + b"notary " + table_id + b"\\n" + payload``;
the payload ``{"schema": "threecard.notary/1", "table_id", "nonce", "ts", "checkpoint"}``,
``checkpoint`` the table's own signed checkpoint (as in its head file) or null when
the floor has none yet. The table checks the floor's key and signature, its own
table id, the nonce it sent (an old answer replayed is refused) and the
checkpoint's own signature by the table key: both must hold.

When the floor cannot be reached (or its answer does not verify), the table config's
``[floor] unreachable`` decides: ``"refuse"`` (the default: the table does not start,
exit 2, the message names the floor and the key) or ``"warn"`` (logged; the table
starts on its own head file and the broker's checkpoint only).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .journal import check_signed
from .keys import TableKey, key_id as key_id_of, verify_signature

log = structlog.get_logger("table.notary")

#: the envelope of everything the floor signs
FLOOR_SIGNED_SCHEMA = "threecard.floor-signed/1"
#: the notary's answer inside it
NOTARY_SCHEMA = "threecard.notary/1"
#: the most bytes of an answer read (a checkpoint is ~1 kB; its digests up to ~40 kB)
MAX_ANSWER = 1 << 20


class NotaryError(RuntimeError):
    """The floor's notary gave no usable answer. ``reason``: ``"unreachable"`` (no
    connection, a timeout, an HTTP error) or ``"refused"`` (an answer that does not
    verify: another key, a bad signature, another table, a stale nonce, a checkpoint
    the table did not sign). The message says which and names the floor's URL."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def answer_signing_input(table_id: str, payload: str) -> bytes:
    """The bytes the floor signs for the notary ``payload`` (JSON text) about ``table_id``."""
    return FLOOR_SIGNED_SCHEMA.encode() + b"\nnotary " + table_id.encode() + b"\n" + payload.encode()


def sign_answer(floor_key: TableKey, table_id: str, nonce: str, checkpoint: dict[str, Any] | None,
                ts: str, held: str | None = None) -> bytes:
    """The floor's signed answer (JSON bytes) giving ``checkpoint`` (or None) for
    ``table_id``, echoing the table's ``nonce``; ``ts``: the floor's time (ISO 8601);
    ``held``: why the floor holds the table (its database is behind a receipt it signed:
    :mod:`table.floor_anchor`), carried as the payload's ``held`` only when given."""
    answer = {"schema": NOTARY_SCHEMA, "table_id": table_id, "nonce": nonce, "ts": ts, "checkpoint": checkpoint}
    if held is not None:
        answer["held"] = str(held)[:1000]
    payload = json.dumps(answer, separators=(",", ":"))
    sig = base64.b64encode(floor_key.sign(answer_signing_input(table_id, payload))).decode()
    return json.dumps({"schema": FLOOR_SIGNED_SCHEMA, "key_id": floor_key.key_id, "payload": payload, "sig": sig},
                      separators=(",", ":")).encode()


def verify_answer(raw: bytes, *, floor_public: Ed25519PublicKey, table_id: str, nonce: str,
                  table_public: Ed25519PublicKey) -> dict[str, Any] | None:
    """The table's checkpoint in the floor's answer ``raw`` (or None: the floor has none),
    after checking the floor's signature, the table id, the ``nonce`` sent and the
    checkpoint's signature by ``table_public``. Raises :class:`NotaryError` (``refused``)."""
    return verify_answer_held(raw, floor_public=floor_public, table_id=table_id, nonce=nonce,
                              table_public=table_public)[0]


def verify_answer_held(raw: bytes, *, floor_public: Ed25519PublicKey, table_id: str, nonce: str,
                       table_public: Ed25519PublicKey) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`verify_answer`, and why the floor holds the table (the payload's ``held``,
    None when it does not). Raises :class:`NotaryError` (``refused``)."""
    def bad(why: str) -> NotaryError:
        return NotaryError("refused", f"the floor's notary answer is refused: {why}")

    try:
        env = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise bad("not JSON") from None
    if not isinstance(env, dict) or env.get("schema") != FLOOR_SIGNED_SCHEMA or set(env) != {"schema", "key_id",
                                                                                             "payload", "sig"}:
        raise bad(f"not a {FLOOR_SIGNED_SCHEMA} envelope")
    if not all(isinstance(env[k], str) for k in ("key_id", "payload", "sig")):
        raise bad("envelope members of the wrong type")
    if env["key_id"] != key_id_of(floor_public):
        raise bad(f"signed with key {env['key_id'][:16]!r}, not the floor key of [floor] public_key")
    try:
        sig = base64.b64decode(env["sig"], validate=True)
    except (binascii.Error, ValueError):
        raise bad("the signature is not base64") from None
    if len(sig) != 64 or not verify_signature(floor_public, sig, answer_signing_input(table_id, env["payload"])):
        raise bad("bad signature (not the floor's, or about another table)")
    try:
        answer = json.loads(env["payload"])
    except (ValueError, RecursionError):
        raise bad("the payload is not JSON") from None
    if not isinstance(answer, dict) or answer.get("schema") != NOTARY_SCHEMA:
        raise bad(f"not a {NOTARY_SCHEMA} answer")
    if answer.get("table_id") != table_id:
        raise bad("it is about another table")
    if answer.get("nonce") != nonce:
        raise bad("it does not answer this request (another nonce: an old answer replayed)")
    held = answer.get("held")
    if held is not None and not isinstance(held, str):
        raise bad("its held is not text")
    cp = answer.get("checkpoint")
    if cp is None:
        return None, held
    if not isinstance(cp, dict) or cp.get("table_id") != table_id:
        raise bad("its checkpoint is not this table's")
    why = check_signed(cp, {key_id_of(table_public): table_public})
    if why is not None:
        raise bad(f"its checkpoint is not signed by this table's key ({why})")
    return cp, held


def fetch_floor_checkpoint(url: str, *, floor_public: Ed25519PublicKey, table_id: str,
                           table_public: Ed25519PublicKey, timeout_s: float = 3.0) -> dict[str, Any] | None:
    """Ask the floor at ``url`` (``http(s)://HOST:PORT``) for ``table_id``'s last signed
    checkpoint (see the module docstring); ``timeout_s``: the network deadline (start-up
    only). Returns it verified, or None when the floor has none. Raises
    :class:`NotaryError` (``unreachable`` or ``refused``)."""
    return fetch_floor_answer(url, floor_public=floor_public, table_id=table_id, table_public=table_public,
                              timeout_s=timeout_s)[0]


def fetch_floor_answer(url: str, *, floor_public: Ed25519PublicKey, table_id: str, table_public: Ed25519PublicKey,
                       timeout_s: float = 3.0, receipt: dict[str, Any] | None = None
                       ) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`fetch_floor_checkpoint`, presenting ``receipt`` (the latest floor receipt the
    table's journal holds, :mod:`table.floor_anchor`; the request's ``&receipt=``) for the
    floor to compare with its database; returns ``(checkpoint, held)``: ``held`` is why the
    floor holds this table (its database is behind a receipt it signed), or None."""
    from .floor_anchor import encode_for_url

    nonce = secrets.token_hex(16)
    target = f"{url.rstrip('/')}/api/v1/notary/{urllib.parse.quote(table_id, safe='')}?nonce={nonce}"
    if receipt is not None:
        target += f"&receipt={encode_for_url(receipt)}"
    if urllib.parse.urlsplit(target).scheme not in ("http", "https"):
        raise NotaryError("refused", f"[floor] url {url!r} is not http:// or https://")
    request = urllib.request.Request(target, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # noqa: S310 - scheme checked above
            raw = resp.read(MAX_ANSWER + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NotaryError("unreachable", f"the floor's notary at {url} cannot be reached: {exc}") from None
    if len(raw) > MAX_ANSWER:
        raise NotaryError("refused", f"the floor's notary at {url} answered more than {MAX_ANSWER} bytes")
    return verify_answer_held(raw, floor_public=floor_public, table_id=table_id, nonce=nonce,
                              table_public=table_public)


def floor_anchors(section: Any, *, table_id: str, table_public: Ed25519PublicKey,
                  receipt: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The anchors the floor's notary gives the table at start: ``[checkpoint]``, or ``[]``
    when the floor has none; when it cannot be reached and ``section.unreachable`` is
    ``"warn"``, a noted anchor (:func:`table.anchors.noted_anchor`: the table starts, and
    journals an incident saying it started without the notary); an answer that does not verify is, under ``"warn"``, a refused
    anchor (:func:`table.anchors.refused_anchor`: an incident at start-up).
    ``section``: the table config's ``[floor]`` (:class:`table.config.FloorSection`: ``url``, ``public_key``,
    ``unreachable``, ``timeout_s``); no ``url``: no notary, ``[]``. Raises
    :class:`NotaryError` under ``unreachable = "refuse"`` or ``"hold"`` (the caller then
    holds the table for a supervisor: ``TableController(unconfirmed=...)``), and ``KeyFileError`` for an
    unreadable ``public_key``. ``receipt``: the latest floor receipt the journal holds,
    presented to the floor (:mod:`table.floor_anchor`); a floor that answers it holds this
    table (its database is behind a receipt it signed) gives a refused anchor naming why:
    the table holds for a supervisor, as for a journal behind a checkpoint."""
    if section is None or not getattr(section, "url", None):
        return []
    from .anchors import noted_anchor, refused_anchor
    from .keys import load_public_key

    floor_public = load_public_key(section.public_key)
    try:
        cp, held = fetch_floor_answer(section.url, floor_public=floor_public, table_id=table_id,
                                      table_public=table_public, timeout_s=section.timeout_s, receipt=receipt)
    except NotaryError as exc:
        if section.unreachable in ("refuse", "hold"):
            raise  # "hold": the caller starts the table held for a supervisor (TableController unconfirmed=)
        log.warning("floor_notary_not_used", reason=exc.reason, error=str(exc)[:300], policy="warn")
        if exc.reason == "refused" and "answer" in str(exc):
            # An answer that came and does not verify is not the absence of an anchor: an
            # incident the table holds for (table.anchors).
            return [refused_anchor(f"the floor's notary at {section.url}", str(exc))]
        return [noted_anchor(f"the floor's notary at {section.url}",
                             f"{exc} ([floor] unreachable = \"warn\")")]
    out = []
    if held is not None:
        # The floor's database is behind a receipt it signed: restored from an older copy or
        # seeded from one. Its checkpoint is not the table's latest; the table holds.
        log.error("floor_holds_table", table_id=table_id, why=held[:300])
        out.append(refused_anchor(f"the floor's notary at {section.url}", f"the floor holds this table: {held}"))
    if cp is None:
        log.info("floor_notary_empty", table_id=table_id)
        return out
    log.info("floor_notary_anchor", table_id=table_id, seq=cp.get("seq"))
    return [cp, *out]
