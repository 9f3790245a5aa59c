"""Read-only audit queries of the table API: the shuffle check per deck, and the journal's audit status.

Both are front-door queries (``table/interfaces/api_schema.py``: ``shuffle_check``
and ``audit_status``, for supervisors and auditors), answered from the journal
file opened read-only, never from the controller's memory:

* ``shuffle_check``: per deck, the chi-square statistic on how often each card
  was dealt at each position, after each of the deck's rounds, with the value
  the test fails above at 95 % (:func:`table.shuffle_check.chi_square_series`),
  and the verdict on the whole record (:func:`table.shuffle_check.chi_square_report`).
  Only cards of rounds that are over are counted: their faces were disclosed
  by the round's reveal or void (:func:`table.journal.disclosed_cards`); the
  round in progress stays sealed (58 Pa. Code 816a.1).
* ``audit_status``: whether the journal verifies (:func:`table.journal.verify`:
  the chain, every checkpoint's signature, the head file) and its last signed
  checkpoint.

Each answer is computed in the front doors' thread pool and kept until the
journal grows, so a screen that asks again costs one SQL query.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from protocols.cards import Card
from table.journal import Journal, JournalError, disclosed_cards, verify
from table.shuffle_check import PositionCounts, chi_square_report, chi_square_series

from .history import history


def dealt_rounds(journal: Journal) -> list[tuple[str, list[int]]]:
    """Per round, in order: the deck it was dealt from and the card indices in dealt
    position (draw index) order, read from the journal's card reads, which are all
    the host ever learns of a deck's order (protocols/SPEC.md §4.2). Rounds still sealed are left
    out."""
    rounds: dict[str | None, tuple[str, dict[int, int]]] = {}
    # Faces are sealed until a round is over; its reveal discloses its key (docs/journal.md).
    for e, opened in disclosed_cards(journal):
        if e.body.get("to") is None or e.body.get("manual") or e.body.get("late") or e.body.get("replayed"):
            continue  # only the cards dealt as the shoe read them, in draw order
        deck, cards = rounds.setdefault(e.round_id, (e.deck_id or "?", {}))
        cards[int(e.body["draw_index"])] = Card.parse(opened["card"]).index
    return [(deck, [cards[i] for i in sorted(cards)]) for deck, cards in rounds.values()]


class AuditQueries:
    """The audit queries of one table's journal at ``journal_path``. ``public_keys``:
    the table key's public half (to check the checkpoints' signatures); ``max_points``:
    points per deck in the shuffle check's curve; ``archive``: the folder of archived
    gaming days (``[journal] archive``), which the history reads on into. Each
    ``*_query`` method blocks (run it in a thread) and returns the reply's fields."""

    def __init__(self, journal_path: str | Path, *, public_keys: tuple[Any, ...] = (), max_points: int = 200,
                 anchors: Callable[[], list[dict[str, Any]]] | None = None,
                 archive: str | Path | None = None) -> None:
        self.path = Path(journal_path)
        self.archive = Path(archive) if archive is not None else None
        self.public_keys = tuple(public_keys)
        self.max_points = max_points
        self.anchors = anchors
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, dict[str, Any]]] = {}

    def _head(self) -> int:
        with Journal(self.path, read_only=True) as j:
            return j.last_seq

    def _cached(self, name: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        with self._lock:  # one computation at a time: a flood of requests costs one
            head = self._head()
            hit = self._cache.get(name)
            if hit is not None and hit[0] == head:
                return hit[1]
            result = compute()
            self._cache[name] = (head, result)
            return result

    def shuffle_check(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """``{"shuffle_check": {"confidence", "verdict", "p_value", "rounds", "decks": {deck:
        {"rounds", "verdict", "p_value", "points": [...]}}}}`` (raises ``JournalError``)."""
        return self._cached("shuffle_check", self._shuffle_check)

    def _shuffle_check(self) -> dict[str, Any]:
        with Journal(self.path, read_only=True) as j:
            rounds = dealt_rounds(j)
        counts = PositionCounts()
        for deck, cards in rounds:
            counts.add_round(deck, cards)
        report = chi_square_report(counts)
        series = chi_square_series(rounds, max_points=self.max_points)
        decks = {}
        for deck_id, curve in series.items():
            whole = report["decks"].get(deck_id, {})
            decks[deck_id] = {**curve, "verdict": whole.get("verdict", curve["verdict"]),
                              "p_value": whole.get("p_value", curve["p_value"]),
                              "critical_value": whole.get("critical_value"), "statistic": whole.get("statistic")}
        return {"shuffle_check": {"confidence": report["confidence"], "verdict": report["verdict"],
                                  "p_value": report["p_value"], "rounds": report["rounds"], "decks": decks}}

    def audit_status(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """``{"audit": {"status", "ok", "entries", "checkpoints", "unsigned_tail", "tail_kinds", "reason",
        "first_bad", "last_checkpoint": {"seq", "ts", "rounds_opened", "key_id"} | None}}``."""
        return self._cached("audit_status", self._audit_status)

    def _audit_status(self) -> dict[str, Any]:
        result = verify(self.path, public_keys=self.public_keys, anchors=self.anchors() if self.anchors else ())
        last = None
        try:
            with Journal(self.path, read_only=True) as j:
                e = j.last("checkpoint")
                if e is not None:
                    cp = e.body.get("checkpoint", {})
                    last = {"seq": e.seq, "ts": e.ts, "rounds_opened": cp.get("rounds_opened"),
                            "key_id": cp.get("key_id"), "signed": bool(cp.get("sig"))}
        except JournalError:
            pass
        return {"audit": {"status": result.status, "ok": result.ok, "entries": result.entries,
                          "checkpoints": result.checkpoints, "unsigned_tail": result.unsigned_tail,
                          "tail_kinds": result.tail_kinds,
                          "reason": result.reason[:300], "first_bad": result.first_bad,
                          "last_checkpoint": last}}

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """Query name -> blocking handler, for :class:`~table.interfaces.dispatch.Dispatcher`."""
        return {"shuffle_check": self.shuffle_check, "audit_status": self.audit_status, "history": self.history}

    def history(self, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """One page of the history panel (:func:`table.interfaces.history.history`): ``args``
        ``before`` (journal seq) and ``limit`` (rounds)."""
        args = args or {}
        return history(self.path, before=args.get("before"), limit=args.get("limit", 10), archive=self.archive)
