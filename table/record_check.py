"""Before a report counts a record: does the record hold? (docs/reporting.md, "The record first").

A report is only as good as the journal it is counted from. :func:`check_record`
checks the journal (:func:`table.journal.verify`) or the archived gaming days and
the live segment as one chain (:func:`table.day.segments.verify_chain`) with whatever
keys are at hand, and says in one place what was checked and what could not be:

* ``tampered``, ``unreadable``, ``gap``, ``misfiled``: the record does not hold; the
  report is flagged, naming the day or the entry (an edited fill printed without a
  word is what this stops);
* ``unanchored``, ``unsigned``: the record holds as far as could be checked, but no
  signature was checked (no public key) or entries after the last signed checkpoint
  are covered by nothing checked: the report says so plainly, unflagged;
* ``ok``: chain, signatures (and with the private key, every entry's MAC) hold.

Pure reading; never raises for a bad record (that is its answer), only
:class:`~table.journal.JournalError` for a path that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

#: statuses that mean the record does not hold (a report counted from it is flagged)
BROKEN = ("tampered", "unreadable", "gap", "misfiled")


@dataclass
class RecordCheck:
    """What :func:`check_record` found: ``status`` (``ok``, ``unanchored``, ``unsigned``,
    or one of :data:`BROKEN`), ``what`` (the record checked, in words), ``problems`` (each
    naming the day's archive or the entry), ``notes`` (what could not be checked),
    ``signatures_checked`` (a public or private key was at hand)."""

    status: str
    what: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    signatures_checked: bool = False
    #: the record is a history migrated from format 1: no signature ever covered any of it, so
    #: whoever could write its folder could have rewritten every figure (docs/journal.md, "Formats")
    never_signed: bool = False

    @property
    def broken(self) -> bool:
        """True when the record does not hold (:data:`BROKEN`)."""
        return self.status in BROKEN

    def as_json(self) -> dict[str, Any]:
        """The check as the report's ``record`` field."""
        return {"status": self.status, "checked": self.what, "signatures_checked": self.signatures_checked,
                "problems": list(self.problems), "notes": list(self.notes)}

    def sentence(self) -> str:
        """One line for people: what was checked and what it found, plainly."""
        if self.broken:
            return (f"record: DOES NOT VERIFY ({self.status}): {self.problems[0] if self.problems else ''}; "
                    "the figures below are counted from a record that does not hold")
        if self.status == "ok":
            return f"record: {self.what} verify (hash chain, signed checkpoints)"
        return f"record: {self.what}: not fully checked ({self.status}): " + "; ".join(self.notes[:3])


def check_record(journal: str | Path | None, archive_dir: str | Path | None, *,
                 public_keys: Iterable[Any] = (), key: Any = None) -> RecordCheck:
    """Check the record a report is counted from: the journal at ``journal`` alone, or
    the archived days in ``archive_dir`` with it (``journal``: the live segment, or
    None) as one chain. ``public_keys``: the table's Ed25519 public keys; ``key``: its
    private key (also checks every entry's MAC). Returns a :class:`RecordCheck`.
    Raises :class:`~table.journal.JournalError` for a journal or folder that does not exist."""
    from .journal import JournalError, verify
    from .day.segments import verify_chain

    keys = list(public_keys)
    signed = bool(keys) or key is not None
    if archive_dir is not None:
        chain = verify_chain(archive_dir, live=journal, public_keys=keys, key=key)
        what = f"the archived days in {archive_dir}" + (f" and the journal {journal}" if journal else "")
        problems = [why for s, why in chain.problems if s in BROKEN]
        notes = [why for s, why in chain.problems if s not in BROKEN]
        return RecordCheck(chain.status, what, problems, notes, signed)
    if journal is None:
        raise JournalError("no journal and no archive folder to check")
    r = verify(journal, public_keys=keys, key=key)
    what = f"the journal {journal}"
    if r.status in BROKEN:
        where = f" (first bad entry {r.first_bad})" if r.first_bad else ""
        return RecordCheck(r.status, what, [f"{Path(journal).name}: {r.reason}{where}"], [], signed)
    notes = []
    if not signed:
        notes.append("no public key given: no checkpoint's signature was checked (give --public-key)")
    if r.status == "unanchored":
        notes.append(r.reason or "nothing outside the journal vouches for its end")
    if r.status == "unsigned" and not r.checkpoints:  # a history migrated from format 1: it says what it is
        notes += r.notes
    elif r.status == "unsigned":
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.tail_kinds.items()))
        notes.append(f"{r.unsigned_tail} entries after the last signed checkpoint ({kinds}) are covered by no "
                     "signature and no key checked their MACs")
    status = r.status if r.status != "ok" or signed else "unanchored"
    return RecordCheck(status, what, [], notes, signed, never_signed=r.format1)
