"""Start-up: the table's state restored from the journal, and checked against anchors.

Custody and the counts are restored from the journal (:mod:`table.recovery`);
a round found in progress is held for a supervisor, never silently resumed
(docs/decisions/0002-held-rounds-wait-for-a-supervisor.md). Entries after the last signed checkpoint must carry valid MACs
(nobody edited them while the controller was down). A journal behind a signed
checkpoint seen off its own files (cut short, deleted, or an older copy put in
its place) is not resumed until a supervisor acknowledges the incident; round
numbers then go on past the anchor's, so none is used twice. An
anchor that must be refused (forged, another table's, malformed) is the same
incident (:mod:`table.anchors`; docs/decisions/0004-anchors-off-the-table.md).

May touch: the journal (read, and the restart's entries), custody and the
counts in :class:`~table.procedure.state.TableState`, the device cursor, the
console (a supervisor's acknowledgement). Never a device beyond its identity.
"""

from __future__ import annotations

from typing import Any

import structlog

from .. import anchors as anchor_check, recovery
from ..floor_anchor import LINK_KIND, floor_of_record
from ..console import Console
from ..errors import TableError
from .intake import DeviceIntake
from .state import TableDevices, TableState, by

log = structlog.get_logger("table")


class JournalTampered(TableError):
    """Entries after the last signed checkpoint were changed while the controller was
    down (their MACs do not hold): the controller refuses to resume and sign over them."""


class Startup:
    """Restores the table from its journal (:meth:`recover`).

    ``anchors``: signed checkpoints seen off the journal's own files (the floor's,
    MQTT's retained one); the journal's head file is added to them. ``unconfirmed``: why
    the floor could not confirm the journal's end (``[floor] unreachable = "hold"``):
    an incident a supervisor acknowledges before the table deals. ``floor``: the
    :class:`~table.floor_anchor.FloorLink` this start reports to, or None (:meth:`check_floor`)."""

    def __init__(self, state: TableState, devices: TableDevices, intake: DeviceIntake, console: Console,
                 anchors: list[dict[str, Any]], *, unconfirmed: str | None = None, floor: Any = None) -> None:
        self.t = state
        self.d = devices
        self.intake = intake
        self.console = console
        self.anchors = anchors
        self.unconfirmed = unconfirmed
        self.floor = floor

    def recover(self) -> None:
        """Restore custody and counts from the journal; hold a round found in progress
        for a supervisor. Raises :class:`JournalTampered` when an entry after the last
        signed checkpoint fails its MAC."""
        t = self.t
        j = t.journal
        if j is None:
            return
        for source in self.d.links:
            t.cursor.identified(source, *self.d.ident(source))
        if j.last_seq == 0:
            with t.batch():
                t.record("decks_registered", decks=t.custody.snapshot()["decks"], seats=t.seats)
                for source in self.d.links:
                    self.intake.identify(source)
            # An empty journal where a signed checkpoint says there was one (the journal deleted
            # or moved away): cut short to nothing, as much an incident as a tail cut short.
            self.check_anchors()
            self.check_floor()
            return
        bad = j.check_tail()
        if bad is not None:
            raise JournalTampered(f"journal entry {bad} was changed after it was written (its MAC does not hold); "
                                  "a supervisor must examine the journal (tablectl audit verify)")
        restored = recovery.restore(j, t.custody)
        t.custody = restored.custody
        t.rounds_played, t.rounds_opened = restored.rounds_played, restored.rounds_opened
        self.check_anchors()
        self.check_floor()
        t.cards_read = restored.cards_read
        t.next_draw = restored.next_draw
        with t.batch():
            if restored.held is not None:
                t.held = h = restored.held
                final: dict[str, Any] = {"decisions_final": True} if h.decisions_final else {}
                j.append("round", round_id=h.round_id, deck_id=h.deck_id, step="held", reason=h.reason,
                         settled=h.settled, number=h.number, **final)
                log.error("round_held", round_id=h.round_id, reason=h.reason, settled=h.settled)
            t.record("restart", places=t.custody.places(), rounds_played=t.rounds_played)
            for source in self.d.links:
                self.intake.identify(source)
        log.info("recovered", places=t.custody.places(), rounds_played=t.rounds_played, held=t.held is not None)

    def check_anchors(self) -> None:
        """A journal behind a signed checkpoint seen elsewhere (cut short, or an older copy
        swapped in) is not resumed until a supervisor acknowledges it; the incident and
        the acknowledgement are journaled, and round numbers go on past the anchor's so
        none is used twice. An anchor refused (not this table's signature,
        another table's, malformed: :func:`table.anchors.classify`) is an incident too,
        held for a supervisor the same way."""
        t = self.t
        j = t.journal
        assert j is not None
        check = anchor_check.classify(self.anchors, j)
        for n in check.noted:  # started without an anchor, as the config allows: said, not held
            t.record("incident", what=f"the table started without the floor's notary ({n.source}): {n.reason}",
                     anchor_source=n.source, journal_seq=j.last_seq)
            log.warning("anchor_missing", source=n.source, reason=n.reason)
        if not check.incident:
            if self.unconfirmed:
                self._hold_unconfirmed(self.unconfirmed)
            return
        for r in check.refused:
            what = (f"an anchor was refused ({r.source}): {r.reason}; a forged or malformed anchor is an attack "
                    "in progress, not the absence of one")
            t.record("incident", what=what, anchor_source=r.source, anchor_refused=r.reason, anchor_seq=r.seq,
                     journal_seq=j.last_seq)
            log.error("anchor_refused", source=r.source, reason=r.reason, journal_seq=j.last_seq)
            t.publish("incident", what=what)
        cp = max(check.behind, key=lambda c: c["seq"]) if check.behind else None
        if cp is not None:
            what = (f"the journal is behind a signed checkpoint seen off the table (entry {cp['seq']}, "
                    f"{cp.get('rounds_opened')} rounds opened): it was cut short or an older copy was put in its place")
            t.record("incident", what=what, anchor_seq=cp["seq"], anchor_head=cp.get("head"), journal_seq=j.last_seq)
            log.error("journal_behind_anchor", anchor_seq=cp["seq"], journal_seq=j.last_seq)
            t.publish("incident", what=what)
            waiting = f"a supervisor to acknowledge that the journal is behind checkpoint {cp['seq']}"
        else:
            waiting = f"a supervisor to acknowledge {len(check.refused)} refused anchor(s) (a forged anchor?)"
        cmd = self.console.wait(("acknowledge_incident",), waiting, role="supervisor", voids=False)
        refused: dict[str, Any] = {"anchors_refused": len(check.refused)} if check.refused else {}
        t.record("supervisor", action="acknowledge_incident", supervisor=cmd.person,
                 anchor_seq=cp["seq"] if cp is not None else None, **refused, **by(cmd))
        if cp is not None:
            t.rounds_opened = max(t.rounds_opened, int(cp.get("rounds_opened") or 0))
            self._recount_decks("the journal is behind a signed checkpoint")
        cmd.answer(ok=True, acknowledged=cp["seq"] if cp is not None else "refused anchors")

    def check_floor(self) -> None:
        """The floor the journal names against the floor this start reports to
        (:mod:`table.floor_anchor`, "The floor of record"). A journal that names a floor,
        started without one, holds for a supervisor's sign-off (``acknowledge_incident``,
        the person named in the journal) before the table deals; the sign-off is journaled
        with the floor's end (``floor_link`` with no ``url``), so removing ``[floor]`` is an
        act on the record, never a silent way around the notary (RFC 9162 section 8.3: a
        client that stops asking its log is not told from one whose log went back). A
        changed floor (another address or key) holds the same way; a first floor is
        journaled as the floor of record."""
        t = self.t
        j = t.journal
        assert j is not None
        recorded = floor_of_record(j)
        before = recorded.get("url") if recorded is not None else None
        before_key = recorded.get("key_id") if recorded is not None else None
        if self.floor is not None:
            new = (self.floor.url, self.floor.key_id)
            if before and new != (before, before_key):
                # another floor, or the same address with another key: a floor whose database
                # holds nothing of this table would vouch for any journal; as a removal, an act
                # of a named supervisor
                self._sign_off_floor(before, "changed", f"this start reports to the floor at {self.floor.url} "
                                     f"(key {self.floor.key_id})", new=new)
            elif recorded is None or new != (before, before_key):
                t.record(LINK_KIND, url=self.floor.url, key_id=self.floor.key_id)
                log.info("floor_of_record", url=self.floor.url, key_id=self.floor.key_id)
            return
        if before:
            self._sign_off_floor(before, "removed", "this start has no [floor]", new=(None, None))

    def _sign_off_floor(self, url: str, how: str, why: str, *, new: "tuple[str | None, str | None]") -> None:
        """Hold, before the table deals, for a supervisor to sign off that it no longer reports
        to the floor at ``url`` (``how``: ``removed`` or ``changed``); journaled (incident,
        the supervisor's act ``floor_removed``/``floor_changed``, the new floor of record ``new``)."""
        t = self.t
        j = t.journal
        assert j is not None
        what = (f"the table's record says it reports to the floor at {url}, and {why}: the journal's end is not "
                "checked with that floor's notary; a supervisor signs off that the table no longer reports to "
                "that floor before it deals")
        t.record("incident", what=what, floor_url=url, journal_seq=j.last_seq)
        log.error(f"floor_{how}", floor_url=url, journal_seq=j.last_seq)
        t.publish("incident", what=what)
        cmd = self.console.wait(("acknowledge_incident",),
                                f"a supervisor to sign off that the table no longer reports to the floor at {url}",
                                role="supervisor", voids=False)
        with t.batch():
            t.record("supervisor", action=f"floor_{how}", supervisor=cmd.person, floor_url=url, **by(cmd))
            signed_off: dict[str, Any] = {f"{how}_by": cmd.person}
            t.record(LINK_KIND, url=new[0], key_id=new[1], **signed_off)
        cmd.answer(ok=True, acknowledged=f"floor {how}")

    def _recount_decks(self, why: str) -> None:
        """A journal that may be behind what happened says where the decks were, not where
        they are, nor which shuffle (and commitment, SPEC §4.2.1) each one holds: every deck
        not in play goes off the table and is counted again in the shuffler before it is
        dealt (custody step ``recount``, journaled and replayed; 58 Pa. Code 649a.3(b))."""
        t = self.t
        text = f"{why}: every deck not in play is counted again in the shuffler before it is dealt"
        with t.batch():
            t.op("recount", rule="journal_unconfirmed")
            t.custody.recount()
            t.record("incident", what=text)
        log.error("deck_custody_recount", rule="journal_unconfirmed", detail=why)
        t.publish("incident", what=text)

    def _hold_unconfirmed(self, why: str) -> None:
        """The floor's notary could not confirm the journal's end (``[floor] unreachable =
        "hold"``): nothing says it was not rolled back, so a supervisor acknowledges that
        before the table deals (journaled, as for a journal behind an anchor)."""
        t = self.t
        j = t.journal
        assert j is not None
        what = f"the journal's end could not be checked with the floor's notary: {why}"
        t.record("incident", what=what, journal_seq=j.last_seq)
        log.error("journal_end_unconfirmed", journal_seq=j.last_seq, error=why[:300])
        t.publish("incident", what=what)
        cmd = self.console.wait(("acknowledge_incident",),
                                "a supervisor to acknowledge that the floor could not confirm the journal's end",
                                role="supervisor", voids=False)
        t.record("supervisor", action="acknowledge_incident", supervisor=cmd.person, unconfirmed=True, **by(cmd))
        self._recount_decks("the journal's end could not be checked with the floor's notary")
        cmd.answer(ok=True, acknowledged="unconfirmed")
