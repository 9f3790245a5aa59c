"""Recovery from the journal: what the table was doing when the controller stopped.

On restart the controller rebuilds deck custody and its counts from the
journal (:func:`restore`) and holds a round that was in progress for a
supervisor; it never silently resumes one (issue 5). Device events that were
journaled but had not reached custody before a crash are applied again
(journal before act, SPEC §6.3: the device resends what was never ACKed, and
:func:`resume_hook` tells the link which of its events the journal already has).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from firmware_bridge.link import DeviceIdentity
from protocols.cards import BackColour, Card
from protocols.messages import DeckVerified

from .custody import CustodyViolation, DeckCustody
from .journal import Journal

#: ``record(kind, **body)``: journal an entry (the controller's own writer).
Record = Callable[..., None]


@dataclass
class Restored:
    """The table's state as the journal left it.

    ``custody``: the decks' places; ``rounds_played`` (closed, not voided),
    ``rounds_opened``, ``cards_read``: the counts; ``open_round_id``: the round
    in progress, if any; ``held``: that round, to hold for a supervisor
    (``round_id``, ``deck_id``, ``settled``: its results were recorded and
    stand, 816a.1; ``reason``; ``number``), or None.
    """

    custody: DeckCustody
    rounds_played: int
    rounds_opened: int
    cards_read: int
    open_round_id: str | None
    held: dict[str, Any] | None


def resume_hook(journal: Journal | None) -> Callable[[DeviceIdentity], int | None]:
    """For ``DeviceDriver.open(resume=...)``: the SEQ of the last event journaled
    for a device identity in its current boot, so its resend is not new."""

    def resume(ident: DeviceIdentity) -> int | None:
        if journal is None:
            return None
        for e in reversed(list(journal.entries("device_event"))):
            if e.body.get("serial") == ident.serial_number:
                return e.body["seq"] if e.body.get("boot_id") == ident.boot_id else None
        return None

    return resume


def restore(journal: Journal, custody: DeckCustody, record: Record) -> Restored:
    """Rebuild custody and the counts from a non-empty ``journal``. ``custody`` is the
    table's registered decks (kept when the journal holds no custody yet);
    ``record`` journals what the replay of unapplied device events produces."""
    j = journal
    last = j.last("round")
    open_round_id = last.round_id if last is not None and last.body.get("step") != "closed" else None
    snap = max((e for e in (j.last("custody"), j.last("card_read")) if e is not None and "snapshot" in e.body),
               key=lambda e: e.seq, default=None)
    if snap is not None:
        custody = DeckCustody.restore(snap.body["snapshot"])
        for e in j.entries("device_event", since=snap.seq):
            _replay(custody, e.body["message"], open_round_id, record)
    rounds = list(j.entries("round"))
    held = None
    if last is not None and last.body.get("step") != "closed":
        steps = {e.body.get("step") for e in rounds if e.round_id == last.round_id}
        held = {"round_id": last.round_id, "deck_id": last.deck_id,
                "settled": "settle" in steps,  # results recorded and posted: they stand (816a.1)
                "reason": "the controller restarted during the round", "number": last.body.get("number")}
    return Restored(
        custody=custody,
        rounds_played=sum(1 for e in rounds if e.body.get("step") == "closed" and not e.body.get("voided")),
        rounds_opened=sum(1 for e in rounds if e.body.get("step") == "open"),
        cards_read=sum(1 for _ in j.entries("card_read")),
        open_round_id=open_round_id,
        held=held,
    )


def _replay(c: DeckCustody, message: dict[str, Any], open_round_id: str | None, record: Record) -> None:
    """Re-apply a journaled device event that had not reached custody before a crash."""
    name = message["message"]
    colour = BackColour.parse(message["back_colour"]) if "back_colour" in message else None
    try:
        if name == "DeckInserted":
            c.on_deck_inserted(colour)
        elif name == "DeckVerified":
            c.on_deck_verified(DeckVerified(colour, message["card_count"], message["foreign_count"],
                                            frozenset(message["present"]), frozenset(message["duplicates"])))
        elif name == "DeckDelivered":
            c.on_deck_delivered(colour)
        elif name == "ShoeLoaded":
            c.on_shoe_loaded(colour)
        elif name == "CardDrawn" and c.in_play is not None:
            c.on_card_read(Card.parse(message["card"]), colour)
            record("card_read", round_id=open_round_id, card=message["card"], back_colour=str(colour),
                   draw_index=message["draw_index"], to=None, replayed=True, snapshot=c.snapshot())
            return
        else:
            return
    except CustodyViolation as v:
        record("violation", rule=v.rule.value, detail=v.detail, citation=v.citation)
        return
    record("custody", trigger=f"replay {name}", snapshot=c.snapshot())
