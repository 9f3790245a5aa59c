"""What a restarting table makes of its anchors: signed checkpoints seen off the journal.

An anchor is the table's own signed checkpoint kept where the journal's owner
cannot take it back: the head file beside the journal, the floor's saved
checkpoints (``[journal] anchors``), the broker's retained ``.../checkpoint``
message (docs/journal.md). At start-up each one is one of three things
(docs/decisions/0004-anchors-off-the-table.md):

* **matched**: the journal holds the checkpoint entry it names: nothing to do;
* **behind**: a genuine checkpoint of this table the journal does not hold (the
  journal was cut short, deleted, or an older copy put in its place);
* **refused**: not a genuine checkpoint of this table: a signature that does
  not verify with the table's key, another table's id, a malformed object or
  file, or a message the broker held that did not verify. A forged anchor is
  an attack in progress, not the absence of one: it is an incident and holds
  the table for a supervisor exactly as a genuine newer anchor does.

An anchor refused before it reached the controller (the MQTT message's
envelope, checked in ``table.interfaces.mqtt``) is passed on as the dict
:func:`refused_anchor` makes, so that it is classified (and journaled) here too.

An anchor older than the live gaming day's segment (its entries are in the
archive) is matched: the segment's first entry chains to that day.

(An older genuine checkpoint replayed to the broker is *matched*: telling it
from the newest one needs an anchor that only grows; the floor issue's.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .files import read_regular
from .journal import Journal, check_signed, head_path

#: the key a dict from :func:`refused_anchor` carries
REFUSED = "anchor_refused"
#: the key a dict from :func:`noted_anchor` carries
NOTED = "anchor_missing"


@dataclass(frozen=True)
class Refused:
    """An anchor that is not a genuine checkpoint of this table: ``source`` names where it
    came from (``"the head file"``, ``"anchor 2"``, an MQTT topic), ``reason`` why it was
    refused, ``seq`` the entry it claims to cover when it says one."""

    source: str
    reason: str
    seq: int | None = None


@dataclass
class AnchorCheck:
    """Outcome of :func:`classify`: ``behind``, genuine checkpoints the journal does not
    hold (signed dicts); ``refused``, the anchors that are not genuine
    (:class:`Refused`); ``matched``, how many the journal holds."""

    behind: list[dict[str, Any]] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    matched: int = 0
    #: anchors that could not be had and the table starts without, as its config allows
    #: (:func:`noted_anchor`): journaled as an incident, no hold
    noted: list[Refused] = field(default_factory=list)

    @property
    def incident(self) -> bool:
        """True when the table must hold for a supervisor (something behind or refused)."""
        return bool(self.behind or self.refused)


def refused_anchor(source: str, reason: str, seq: int | None = None) -> dict[str, Any]:
    """The stand-in for an anchor refused before it reached the controller (e.g. a retained
    MQTT message that did not verify): a dict :func:`classify` reports as refused."""
    return {REFUSED: str(reason)[:300], "source": str(source)[:200], "seq": seq if isinstance(seq, int) else None}


def noted_anchor(source: str, reason: str) -> dict[str, Any]:
    """The stand-in for an anchor the table starts without because its config allows it
    (``[floor] unreachable = "warn"``: the floor's notary could not be asked): a dict
    :func:`classify` reports as ``noted``, an incident journaled without a hold."""
    return {NOTED: str(reason)[:300], "source": str(source)[:200]}


def read_head(path: str | Path) -> tuple[dict[str, Any] | None, Refused | None]:
    """The head file beside the journal at ``path``: (its checkpoint, None), (None, None)
    when there is none, or (None, why it is refused) when it is unreadable or not a
    JSON object."""
    head = head_path(path)
    try:
        raw = read_regular(head, max_bytes=1 << 20)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, Refused("the head file", f"it cannot be read: {exc}")
    try:
        cp = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return None, Refused("the head file", f"it is not JSON: {exc}")
    if not isinstance(cp, dict):
        return None, Refused("the head file", "it is not a checkpoint object")
    return cp, None


def classify(anchors: Iterable[Any], journal: Journal, *, head: bool = True) -> AnchorCheck:
    """Sort ``anchors`` (signed checkpoints seen off the journal, or :func:`refused_anchor`
    stand-ins) and, with ``head``, the journal's head file, into matched, behind and
    refused (see the module docstring). ``journal``: the open journal, with its table
    key (whose public half checks the signatures). Never raises for a bad anchor:
    it is refused with its reason."""
    if journal.key is None:
        raise ValueError("classifying anchors needs the journal's table key")
    keys = {journal.key.key_id: journal.key.public}
    seen: list[tuple[str, Any]] = [(f"anchor {i}", a) for i, a in enumerate(anchors, 1)]
    out = AnchorCheck()
    if head:
        cp, why = read_head(journal.path)
        if why is not None:
            out.refused.append(why)
        elif cp is not None:
            seen.append(("the head file", cp))
    for source, cp in seen:
        if isinstance(cp, dict) and NOTED in cp:
            out.noted.append(Refused(str(cp.get("source") or source), str(cp[NOTED])))
            continue
        if isinstance(cp, dict) and REFUSED in cp:
            out.refused.append(Refused(str(cp.get("source") or source), str(cp[REFUSED]),
                                       cp.get("seq") if isinstance(cp.get("seq"), int) else None))
            continue
        why = _not_genuine(cp, journal.table_id, keys)
        if why is not None:
            seq = cp.get("seq") if isinstance(cp, dict) and isinstance(cp.get("seq"), int) else None
            out.refused.append(Refused(source, why, seq))
            continue
        seq = cp["seq"]
        opening = journal.segment
        if opening is not None and seq < opening.seq:
            # A checkpoint of an earlier gaming day, now in the archive (docs/journal.md): this
            # segment's first entry chains to that day; `audit verify --archive` checks it.
            out.matched += 1
            continue
        mine = next(iter(journal.entries("checkpoint", since=seq, upto=seq + 1)), None)
        held = mine.body.get("checkpoint") if mine is not None else None
        if isinstance(held, dict) and held.get("head") == cp.get("head"):
            out.matched += 1
        else:
            out.behind.append(cp)
    return out


def _not_genuine(cp: Any, table_id: str, keys: dict[str, Any]) -> str | None:
    if not isinstance(cp, dict):
        return "it is not a checkpoint object"
    if cp.get("table_id") != table_id:
        return f"it names table {str(cp.get('table_id'))[:40]!r}, not this table ({table_id!r})"
    if not isinstance(cp.get("seq"), int) or cp["seq"] < 0 or not isinstance(cp.get("head"), str):
        return "it is malformed (no valid seq or head)"
    why = check_signed(cp, keys)
    if why is not None:
        return f"it is not signed by this table's key: {why}"
    return None
