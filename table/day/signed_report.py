"""A report signed by the table: what a regulator files, checked by a third party with the table's public key.

The file (``tablectl report ... --signed OUT``, the supervisor's shift page's
download) is one JSON object, written in the journal's canonical JSON (sorted
keys, no spaces, ASCII) and one newline::

    {"report": {... the `tablectl report --json` object ...},
     "signature": {"alg": "Ed25519", "key_id": "...", "schema": "threecard.signed-report/1",
                   "sig": "...", "signed_at": "2026-12-02T07:00:00.000000Z", "table_id": "..."}}

``sig`` is the table key's Ed25519 signature (:mod:`table.keys`) of the canonical
JSON of the same object without ``sig`` (the report and every other field of
``signature``), as a checkpoint of the journal signs its fields
(:meth:`table.journal.Journal.checkpoint`). The check
(:func:`check_signed_report`, ``tablectl audit report FILE --public-key K``)
accepts a file only when it *is* the canonical encoding of what was signed,
byte for byte, so no byte of it is outside the signature: a changed figure
breaks the signature; a changed space, key order, number spelling, newline or
signature spelling makes the file not canonical; a changed key id names a key
that is not the one given. Records of the day are kept seven years
(K.A.R. 112-108-51); a signed copy can be checked by anyone holding the public
key, without the table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ..journal import _canonical, b64, unb64
from ..keys import TableKey, key_id, verify_signature

SCHEMA = "threecard.signed-report/1"
ALG = "Ed25519"
#: the fields of ``signature`` besides ``sig``
SIGNED_FIELDS = frozenset({"alg", "key_id", "schema", "signed_at", "table_id"})
#: a signed report larger than this is refused unread (a report of a year is a few hundred KB)
MAX_BYTES = 16 * 1024 * 1024


class SignedReportError(ValueError):
    """A report cannot be signed (not a JSON object of JSON values)."""


def _material(doc: dict[str, Any]) -> bytes:
    """What ``sig`` signs: the canonical JSON of ``doc`` with ``signature.sig`` left out."""
    sig_block = {k: v for k, v in doc["signature"].items() if k != "sig"}
    return _canonical({"report": doc["report"], "signature": sig_block}).encode("ascii")


def sign_report(report: dict[str, Any], key: TableKey, table_id: str, *, now: datetime | None = None) -> bytes:
    """The signed report file's bytes for ``report`` (the ``tablectl report --json``
    object), signed by the table ``key`` of table ``table_id`` at ``now`` (UTC; default
    the clock). Raises :class:`SignedReportError` when ``report`` is not a dict of JSON
    values, or holds a float that is not finite (JSON has no NaN)."""
    if not isinstance(report, dict):
        raise SignedReportError(f"a report is a JSON object, not {type(report).__name__}")
    when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    doc = {"report": report, "signature": {"alg": ALG, "key_id": key.key_id, "schema": SCHEMA,
                                           "signed_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                                           "table_id": str(table_id)}}
    try:
        material = _material(doc)
        doc = json.loads(material)  # what is signed is exactly what is written (tuples -> lists ...)
    except (TypeError, ValueError) as exc:
        raise SignedReportError(f"the report is not plain JSON: {exc}") from None
    doc["signature"]["sig"] = b64(key.sign(material))
    return (_canonical(doc) + "\n").encode("ascii")


@dataclass
class ReportCheck:
    """What :func:`check_signed_report` found. ``ok``: every byte is covered by a good
    signature of one of the keys given; else ``problem`` says, in words, what failed.
    ``key_id``, ``table_id``, ``signed_at``: as the file says (None when unreadable);
    ``report``: the report object, only when ``ok``."""

    ok: bool
    problem: str = ""
    key_id: str | None = None
    table_id: str | None = None
    signed_at: str | None = None
    report: dict[str, Any] | None = field(default=None, repr=False)


def _shape_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict) or set(doc) != {"report", "signature"}:
        return "the file is not a signed report: it must hold exactly \"report\" and \"signature\""
    if not isinstance(doc["report"], dict):
        return "its \"report\" is not a JSON object"
    sig = doc["signature"]
    if not isinstance(sig, dict) or set(sig) != SIGNED_FIELDS | {"sig"}:
        return f"its \"signature\" must hold exactly {', '.join(sorted(SIGNED_FIELDS | {'sig'}))}"
    if sig["schema"] != SCHEMA:
        return f"its signature's schema is {sig['schema']!r}, not {SCHEMA!r}"
    if sig["alg"] != ALG:
        return f"its signature's algorithm is {sig['alg']!r}, not {ALG}"
    if not all(isinstance(sig[k], str) for k in sig):
        return "its signature's fields must be text"
    return None


def check_signed_report(data: bytes, public_keys: Iterable[Ed25519PublicKey],
                        tables: Mapping[str, str] | None = None) -> ReportCheck:
    """Check the signed report file ``data`` against the table's ``public_keys`` (every
    key the table has used). ``tables``: key id -> the table id that key is (the
    auditor's word: ``--table``, ``TABLE_ID=KEY.pub``); a key bound to a table signs
    only that table's reports, so a report naming table A signed by table B's key is
    refused even when both keys are given (one key signing as every table proves
    nothing of which table counted it). Without ``tables``, the keys are one table's.
    Never raises for what the file holds: a :class:`ReportCheck` whose ``problem``
    names the first thing that failed (not JSON, not canonical, not the shape, no key
    given matches its key id, the key is another table's, the signature does not
    verify)."""
    keys = {key_id(k): k for k in public_keys}
    bound = dict(tables or {})
    if not keys:
        return ReportCheck(False, "no public key given: nothing could check the signature")
    if len(data) > MAX_BYTES:
        return ReportCheck(False, f"the file is {len(data)} bytes, over the {MAX_BYTES} a signed report may be")
    try:
        text = data.decode("ascii")
        doc = json.loads(text)
    except UnicodeDecodeError as exc:
        return ReportCheck(False, f"byte {exc.start} is not ASCII: a signed report is written in ASCII")
    except ValueError as exc:
        return ReportCheck(False, f"the file is not JSON ({exc})")
    shape = _shape_problem(doc)
    if shape:
        return ReportCheck(False, shape)
    sig = doc["signature"]
    found = ReportCheck(False, key_id=sig["key_id"], table_id=sig["table_id"], signed_at=sig["signed_at"])
    canonical = _canonical(doc) + "\n"
    if text != canonical:
        at = next((i for i, (a, b) in enumerate(zip(text, canonical)) if a != b), min(len(text), len(canonical)))
        found.problem = (f"the file is not the canonical JSON that was signed (it differs at byte {at}): "
                         "a byte was changed, added or removed")
        return found
    try:
        raw = unb64(sig["sig"])
        if b64(raw) != sig["sig"]:
            raise ValueError("not canonical")
    except ValueError:
        found.problem = "its signature is not spelled in canonical base64url"
        return found
    public = keys.get(sig["key_id"])
    if public is None:
        found.problem = (f"it says it is signed by key {sig['key_id']}, not by the key(s) given "
                         f"({', '.join(sorted(keys))})")
        return found
    if not verify_signature(public, raw, _material(doc)):
        found.problem = f"the signature does not verify with key {sig['key_id']}: the report was changed after signing"
        return found
    named = doc["report"].get("table_id")
    if "table_id" in doc["report"] and named != sig["table_id"]:
        found.problem = (f"the report names table {named!r} but its signature names table {sig['table_id']!r}: "
                         "a report is signed by the table it counts")
        return found
    owner = bound.get(sig["key_id"])
    if owner is not None and owner != sig["table_id"]:
        found.problem = (f"it names table {sig['table_id']!r} but is signed by key {sig['key_id']}, the key of "
                         f"table {owner!r}: a table's key signs only its own reports")
        return found
    found.ok, found.report = True, doc["report"]
    return found
