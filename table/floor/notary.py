"""The notary that only grows: per table, the highest signed checkpoint the floor has seen.

A table's journal checkpoints (``docs/journal.md``) carry ``seq`` (the last entry
covered), ``head`` (the chain hash at ``seq``) and ``from`` (the first entry of the
stretch since the previous checkpoint, so an honest table's next checkpoint has
``from = previous seq + 1``). :func:`judge` says what a newly received one is
against the notary's highest and the history kept:

* ``"raise"``: higher than the notary's, and not forked from it: the notary moves up;
* ``"known"``: one already kept (same seq, same head): a re-delivery (QoS 1, a
  table's publisher replaying after a restart), nothing to do;
* ``"history"``: lower, not kept, contradicting nothing kept: a checkpoint the floor
  missed, kept for the record (only from the event stream, never the retained topic);
* ``"lower"``: the retained checkpoint went back below the notary's: refused and
  alarmed (an older genuine checkpoint republished: a rollback, docs/decisions/0004-anchors-off-the-table.md);
* ``"fork"``: the same seq with another head, or a stretch ``[from, seq)`` holding the
  seq of a checkpoint kept (an honest table's stretch starts just after its previous
  checkpoint, so its journal does not hold that one: it grew from an older copy), or a
  seq inside the stretch ``[from, seq)`` of a checkpoint kept (an honest table's
  checkpoints partition its journal, so none falls inside another's stretch: a branch
  that checkpointed where the kept history did not): refused and alarmed.

What it cannot see: a branch that has already shown a forked checkpoint (refused)
and then goes on from it, past the notary, shows no contradiction in its later
checkpoints alone; its first one was alarmed.

The notary's value is never lowered by any message; ``lower`` and ``fork`` are the
floor's alarms (``alarms`` rows, logged, counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Verdict:
    """What :func:`judge` decided: ``kind`` (see the module docstring) and ``why`` (one line)."""

    kind: str
    why: str = ""

    @property
    def refused(self) -> bool:
        return self.kind in ("lower", "fork")


def judge(cp: dict[str, Any], notary: tuple[int, str] | None, kept: Callable[[int], str | None],
          kept_within: Callable[[int, int], int | None], kept_covering: Callable[[int], int | None], *,
          retained: bool) -> Verdict:
    """The verdict on the signed checkpoint ``cp`` (already verified with the table's key).
    ``notary``: the notary's (seq, head) for the table, None when it has none;
    ``kept(seq)``: the head of the checkpoint kept at ``seq``, or None; ``kept_within(lo, hi)``:
    the seq of a checkpoint kept with ``lo <= seq < hi``, or None; ``kept_covering(seq)``:
    the seq of a checkpoint kept whose stretch holds ``seq`` (``from <= seq`` and ``seq``
    below its own), or None; ``retained``:
    ``cp`` came on the retained ``.../checkpoint`` topic (its latest, by the table's
    account), not the event stream."""
    seq, head = int(cp["seq"]), str(cp["head"])
    first = cp.get("from")
    have = kept(seq)
    if have is not None and have != head:
        return Verdict("fork", f"checkpoint {seq} with head {head[:16]} where the floor kept head {have[:16]}: "
                               "two journals signed by one table key")
    inside = kept_within(first, seq) if isinstance(first, int) and have is None else None
    if inside is not None:
        return Verdict("fork", f"checkpoint {seq} covers entries from {first}, so its journal does not hold the "
                               f"checkpoint {inside} the floor kept: it grew from an older copy")
    around = kept_covering(seq) if have is None else None
    if around is not None:
        return Verdict("fork", f"checkpoint {seq} falls inside the stretch of the checkpoint {around} the floor kept, "
                               "which holds no checkpoint there: another branch of the journal")
    if notary is None:
        return Verdict("raise")
    top_seq, top_head = notary
    if seq == top_seq:
        if head != top_head:
            return Verdict("fork", f"checkpoint {seq} with head {head[:16]} where the notary holds {top_head[:16]}")
        return Verdict("known")
    if seq > top_seq:
        return Verdict("raise")
    if retained:
        return Verdict("lower", f"the retained checkpoint went back to {seq} (head {head[:16]}) below the notary's "
                                f"{top_seq}: an older checkpoint republished (a rollback)")
    if have is not None:
        return Verdict("known")
    return Verdict("history")
