"""Recovery from the journal: what the table was doing when the controller stopped.

The journal carries deltas, not snapshots (docs/decisions/0001-one-commit-per-step.md): each device event, each
custody step the controller took (``custody`` entries with an ``op``), each
card read, each deck registered. A signed ``checkpoint`` at every round's
close holds the whole state at that moment. :func:`restore` starts from the
last checkpoint and re-applies what came after it with :func:`apply`, the
same rules the live controller applied, so a restart costs one round of
entries, however long the journal.

A round that was in progress is held for a supervisor; it is never silently
resumed. Device events journaled but never ACKed are resent by the
devices (SPEC §6.3); :class:`DeviceCursor` tells each link which of its
events the journal already has, so a resend is not taken as new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from firmware_bridge.link import DeviceIdentity
from protocols.cards import BackColour, Card
from protocols.messages import DeckVerified

from .custody import CustodyViolation, DeckCustody, DeckPlace, commitment_from_hex
from .journal import Entry, Journal, SealError
from .round import HeldRound

if TYPE_CHECKING:
    from .rules.settlement import Wagers

#: ``record(kind, **body)``: journal an entry (the controller's own writer).
Record = Callable[..., None]


class DeviceCursor:
    """The last device event the journal holds, per device: ``{serial: (boot_id, seq)}``,
    and which device each link name last spoke to (``{source: (serial, boot_id)}``).

    The controller updates it as it journals; :meth:`resume` answers a link's
    handshake (``Link.resume``): the SEQ of the last event journaled for that
    device in its current boot, or None (a new boot: its SEQs start again)."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        state = state or {}
        self.by_serial: dict[str, tuple[int, int]] = {
            s: (int(v["boot_id"]), int(v["seq"])) for s, v in state.get("by_serial", {}).items()}
        self.by_source: dict[str, tuple[str, int]] = {
            s: (str(v["serial"]), int(v["boot_id"])) for s, v in state.get("by_source", {}).items()}

    def identified(self, source: str, serial: str, boot_id: int) -> None:
        """Link ``source`` now speaks to device ``serial`` in boot ``boot_id``."""
        self.by_source[source] = (serial, boot_id)

    def journaled(self, source: str, seq: int) -> None:
        """The event with device SEQ ``seq`` from ``source`` is in the journal."""
        ident = self.by_source.get(source)
        if ident is not None:
            self.by_serial[ident[0]] = (ident[1], seq)

    def resume(self, ident: DeviceIdentity) -> int | None:
        """For ``Link.resume``: the last journaled SEQ of this device in this boot."""
        got = self.by_serial.get(ident.serial_number)
        return got[1] if got is not None and got[0] == ident.boot_id else None

    def resume_for(self, source: str) -> Callable[[DeviceIdentity], int | None]:
        """:meth:`resume` for link ``source`` only: None for a serial another link speaks
        to (``by_source``), so a driver (a process of its own, docs/drivers.md) asking the
        journal's place of another device, the shoe's driver the shuffler's, learns
        nothing; its own device (or one new to this link) is answered as :meth:`resume`."""

        def resume(ident: DeviceIdentity) -> int | None:
            if any(serial == ident.serial_number for other, (serial, _) in self.by_source.items() if other != source):
                return None
            return self.resume(ident)

        return resume

    def to_dict(self) -> dict[str, Any]:
        return {"by_serial": {s: {"boot_id": b, "seq": q} for s, (b, q) in self.by_serial.items()},
                "by_source": {s: {"serial": n, "boot_id": b} for s, (n, b) in self.by_source.items()}}


@dataclass
class Restored:
    """The table's state as the journal left it.

    ``custody``: the decks' places; ``rounds_played`` (closed, not voided),
    ``rounds_opened``, ``cards_read``: the counts; ``open_round_id``: the round
    in progress, if any; ``held``: that round, to hold for a supervisor
    (:class:`~table.round.HeldRound`: ``settled`` when its results were
    recorded and stand, 816a.1), or None;
    ``next_draw``: the draw index the shoe's next card should carry;
    ``cursor``: the devices' last journaled events.
    """

    custody: DeckCustody
    rounds_played: int
    rounds_opened: int
    cards_read: int
    open_round_id: str | None
    held: HeldRound | None
    next_draw: int = 0
    cursor: DeviceCursor = field(default_factory=DeviceCursor)


def device_cursor(journal: Journal) -> DeviceCursor:
    """The devices' last journaled events: the last checkpoint's, brought up to date with
    the entries after it (for the links' ``resume`` hook, before the controller runs)."""
    cp = journal.last("checkpoint")
    cursor = DeviceCursor(cp.body["state"].get("devices") if cp is not None else None)
    for e in journal.entries(since=cp.seq if cp is not None else 0):
        if e.kind == "device":
            cursor.identified(e.body["source"], e.body["serial"], int(e.body["boot_id"]))
        elif e.kind in ("device_event", "card_read", "incident") and "dseq" in e.body:
            cursor.journaled(e.body.get("source", "shoe"), int(e.body["dseq"]))
    return cursor


def checkpoint_state(custody: DeckCustody, *, rounds_played: int, rounds_opened: int, cards_read: int,
                     next_draw: int, cursor: DeviceCursor, held: HeldRound | None = None) -> dict[str, Any]:
    """What a checkpoint records for :func:`restore`. ``held``: a round still held
    for a supervisor (a controller stopped before anyone resolved it). The cards
    already read from a deck still in play are left out: they may be sealed
    (816a.1); :func:`restore` replays that round's card entries instead."""
    snap = custody.snapshot()
    for d in snap["decks"]:
        if d["place"] in (DeckPlace.IN_PLAY.value, DeckPlace.IN_SHOE.value):
            d["cards_read"] = []
    state = {"custody": snap, "rounds_played": rounds_played, "rounds_opened": rounds_opened,
             "cards_read": cards_read, "next_draw": next_draw, "devices": cursor.to_dict()}
    if held is not None:
        state["held"] = held.to_dict()
    return state


def restore(journal: Journal, custody: DeckCustody) -> Restored:
    """Rebuild the table's state from a non-empty ``journal``: the last checkpoint's state,
    then every entry after it re-applied. ``custody`` is the table's registered decks
    (used when the journal holds no checkpoint yet). Needs the journal's key to
    open sealed card entries. Raises :class:`~table.journal.JournalError`."""
    cp = journal.last("checkpoint")
    since = 0
    played = opened = cards = next_draw = 0
    cursor = DeviceCursor()
    if cp is not None:
        st = cp.body["state"]
        custody = DeckCustody.restore(st["custody"])
        played, opened, cards = st["rounds_played"], st["rounds_opened"], st["cards_read"]
        next_draw, cursor = st.get("next_draw", 0), DeviceCursor(st.get("devices"))
        since = cp.seq
    open_round: dict[str, Any] | None = None
    if cp is not None and cp.body["state"].get("held"):
        h = cp.body["state"]["held"]
        open_round = {**h, "steps": {"settle"} if h.get("settled") else set(), "wagers": None, "decisions": {}}
        for e in journal.entries("card_read", since=int(h.get("open_seq", 1)), upto=since):
            apply(custody, e, journal)  # the held round's cards, left out of the checkpoint
    for e in journal.entries(since=since):
        if e.kind == "round":
            open_round, played, opened = _round_step(e, open_round, played, opened)
        elif (e.kind == "console" and e.body.get("action") == "place_bets" and open_round is not None
              and e.round_id == open_round["round_id"] and "close_bets" not in open_round["steps"]):
            open_round["wagers"] = bets_placed(open_round["wagers"] or {}, e.body)  # what a void returns
        elif e.kind == "card_read" and e.body.get("source", "shoe") == "shoe":
            next_draw = int(e.body.get("draw_index", next_draw - 1)) + 1
            if not e.body.get("refused"):
                cards += 1
        elif e.kind == "device_event":
            name = e.body.get("message", {}).get("message")
            if name == "ShoeLoaded" and e.body.get("source") == "shoe":
                next_draw = 0
            elif name == "CardUnreadable":
                next_draw = int(e.body["message"].get("draw_index", next_draw - 1)) + 1
        elif e.kind == "device":
            cursor.identified(e.body["source"], e.body["serial"], int(e.body["boot_id"]))
        elif (e.kind == "supervisor" and e.body.get("action") == "void_requested" and open_round is not None
              and e.round_id == open_round["round_id"]):
            open_round["void_request"] = {"supervisor": e.body.get("supervisor"), "reason": e.body.get("reason"),
                                          "by": e.body.get("by")}
        if e.kind in ("device_event", "card_read", "incident") and "dseq" in e.body:
            cursor.journaled(e.body.get("source", "shoe"), int(e.body["dseq"]))
        apply(custody, e, journal)
    held: dict[str, Any] | None = None
    if open_round is not None:
        held = {"round_id": open_round["round_id"], "deck_id": open_round["deck_id"],
                "settled": "settle" in open_round["steps"],  # results recorded and posted: they stand (816a.1)
                "reason": open_round.get("reason") or "the controller restarted during the round",
                "number": open_round["number"], "open_seq": open_round["open_seq"],
                "placed": (placed(open_round["wagers"], open_round["decisions"]) if open_round["wagers"] is not None
                           else open_round.get("placed", {})),
                # a restart is released by a supervisor; a round held before it stays held for what held it
                "cause": open_round.get("cause") or "restart",
                # the outcome may be known: a void then needs a second supervisor (the two-person rule)
                "decisions_final": bool(open_round.get("decisions_final"))
                or bool(open_round["steps"] & {"decisions_done", "dealer_reveal"})}
        if open_round.get("void_request"):
            held["void_request"] = open_round["void_request"]
    return Restored(custody, played, opened, cards, held["round_id"] if held else None,
                    HeldRound.from_dict(held) if held is not None else None, next_draw, cursor)


def _round_step(e: Entry, open_round: dict[str, Any] | None, played: int,
                opened: int) -> tuple[dict[str, Any] | None, int, int]:
    """One ``round`` entry replayed by :func:`restore`: the round it opens, steps, holds or
    closes. Returns ``(open_round, rounds_played, rounds_opened)`` after it."""
    step = e.body.get("step")
    if step == "open":
        opened += 1
        open_round = {"round_id": e.round_id, "deck_id": e.deck_id, "number": e.body.get("number"),
                      "open_seq": e.seq, "steps": set(), "wagers": e.body.get("wagers", {}), "decisions": {}}
    elif open_round is not None and e.round_id == open_round["round_id"]:
        open_round["steps"].add(step)
        if step == "close_bets" and isinstance(e.body.get("wagers"), dict):
            open_round["wagers"] = e.body["wagers"]  # the bets as frozen (816a.1)
        if step == "decisions_done":
            open_round["decisions"] = e.body.get("decisions", {})
        if step == "held":  # held before the restart: it stays held for what held it
            open_round["cause"] = e.body.get("cause", "custody")
            open_round["reason"] = e.body.get("reason")
            # held with its decisions final (the two-person rule), even if not journaled yet
            open_round["decisions_final"] = bool(open_round.get("decisions_final") or e.body.get("decisions_final"))
        if step == "closed":
            if not e.body.get("voided"):
                played += 1
            open_round = None
    elif step == "closed" and not e.body.get("voided"):
        played += 1  # a held round from before the checkpoint, closed after it
    return open_round, played, opened


def bets_placed(wagers: dict[str, dict[str, int]], entry: dict[str, Any]) -> dict[str, dict[str, int]]:
    """A round's bets after one journaled ``place_bets`` (its ``seats``: seat -> the
    seat's whole new bet, or null for an empty seat), as journaled: only wagers placed."""
    out = dict(wagers)
    for seat, amounts in (entry.get("seats") or {}).items():
        kept = {k: int(v) for k, v in (amounts or {}).items() if v}
        if kept:
            out[str(seat)] = kept
        else:
            out.pop(str(seat), None)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))

def placed(wagers: dict[str, dict[str, int]], decisions: dict[str, str]) -> dict[str, int]:
    """Cents each seat placed: every wager of its ``wagers`` (ante, side wagers), and the
    play wager (equal to the ante, 649a.11) once it decided to play. What a void returns."""
    out = {s: sum(int(v) for v in w.values()) for s, w in wagers.items()}
    for s, d in decisions.items():
        if d == "play" and s in wagers:
            out[s] += int(wagers[s].get("ante", 0))
    return out


def apply(c: DeckCustody, e: Entry, journal: Journal | None = None) -> None:
    """Re-apply one journaled entry's effect on custody, as the live controller applied it.

    ``device_event``: the deck events (a shuffler fault returns the deck being
    shuffled to the shuffler); ``command`` ``shuffle``: the deck starts its
    shuffle; ``custody``: the controller's own steps
    (``op``: ``start_shuffle``, ``start_round``, ``collect``,
    ``fail_verification``, ``recount``); ``card_read``: a card taken into custody, dealt to a
    seat or the dealer, or read late for a held round (its face is sealed:
    ``journal`` opens it; a card refused or beyond the deal never entered
    custody), or ``stray``: read with no round in progress, out of the deck in
    the shoe; ``supervisor`` ``register_deck``: a
    replacement deck. A rule broken again here was broken live and is already
    journaled: it is not raised."""
    body = e.body
    try:
        if e.kind == "device_event":
            msg = body.get("message", {})
            name = msg.get("message")
            colour = BackColour.parse(msg["back_colour"]) if "back_colour" in msg else None
            if name == "DeckInserted":
                c.on_deck_inserted(_on_table(c, colour))
            elif name == "DeckVerified":
                count, foreign, present = msg["card_count"], msg["foreign_count"], _present(msg)
                duplicates, commitment = frozenset(msg["duplicates"]), commitment_from_hex(msg.get("commitment"))
                c.on_deck_verified(DeckVerified(_on_table(c, colour), count, foreign, present, duplicates,
                                                commitment))
            elif name == "DeckDelivered":
                c.on_deck_delivered(_on_table(c, colour))
            elif name == "ShoeLoaded":
                c.on_shoe_loaded(_on_table(c, colour))
            elif name == "ShufflerFault":
                shuffling = [d for d in c.decks.values() if d.place is DeckPlace.SHUFFLING]
                if shuffling:
                    c.on_shuffle_fault(shuffling[0].back_colour)
        elif e.kind == "command" and body.get("command") == "shuffle" and not body.get("repeated"):
            c.on_shuffle_started(BackColour.parse(body["colour"]))
        elif e.kind == "custody":
            op = body.get("op")
            colour = BackColour.parse(body["colour"]) if "colour" in body else None
            if op == "start_shuffle":
                c.on_shuffle_started(_on_table(c, colour))
            elif op == "start_round":
                c.start_round()
            elif op == "collect":
                if c.in_play is None:
                    c.in_play = next((d for d in c.decks.values()
                                      if d.place in (DeckPlace.IN_SHOE, DeckPlace.IN_PLAY)), None)
                if c.in_play is not None:
                    c.collect()
            elif op == "fail_verification":
                c.take_out_of_service(_on_table(c, colour))
            elif op == "recount":
                c.recount()
        elif (e.kind == "card_read" and not body.get("refused") and not body.get("voided") and journal is not None
              and "sealed" in body and (body.get("to") is not None or body.get("late"))):
            opened = journal.unseal(e)
            if "card" in opened and c.in_play is not None:
                c.on_card_read(Card.parse(opened["card"]), BackColour.parse(body["back_colour"]))
        elif (e.kind == "card_read" and body.get("stray") and not body.get("refused") and journal is not None
              and "sealed" in body):
            opened = journal.unseal(e)
            if "card" in opened:  # read with no round in progress: out of the deck in the shoe all the same
                c.on_card_read_between_rounds(Card.parse(opened["card"]), BackColour.parse(body["back_colour"]))
        elif e.kind == "supervisor" and body.get("action") == "register_deck":
            c.replace_deck(BackColour.parse(body["colour"]), body["new_deck_id"])
    except (CustodyViolation, ValueError):
        return
    except SealError:
        raise


def _on_table(c: DeckCustody, colour: BackColour | None) -> BackColour:
    """A journaled entry's ``colour`` (None: the entry names none) as the custody step
    takes it: the colour of a deck on this table. Any other (None included) raises the
    ``UNKNOWN_BACK_COLOUR`` violation :meth:`DeckCustody.deck` records, the one the step
    itself raises first, so replay goes as it would with ``colour`` handed on."""
    return c.deck(colour).back_colour


def _present(msg: dict[str, Any]) -> frozenset[int]:
    """The cards a journaled ``DeckVerified`` found: ``present``, or (journal format 3)
    every card of the 52 but those ``missing``."""
    if "present" in msg:
        return frozenset(msg["present"])
    return frozenset(range(52)) - frozenset(msg["missing"])



#: how far back (entries) a restart looks for the last round's bets: many rounds' worth
LAST_BETS_WINDOW = 4096


def last_bets(journal: Journal | None) -> "dict[int, Wagers] | None":
    """The wagers the last round closed with (its ``close_bets`` entry), by seat: what
    "same as last round" repeats after a restart. Looks back at most
    :data:`LAST_BETS_WINDOW` entries (a restart's cost stays bounded); None without a
    journal or a round in that window."""
    from .rules.settlement import Wagers

    if journal is None or not journal.last_seq:
        return None
    last = None
    for e in journal.entries("round", since=max(0, journal.last_seq - LAST_BETS_WINDOW)):
        if e.body.get("step") == "close_bets" and isinstance(e.body.get("wagers"), dict):
            last = e.body["wagers"]
    return {int(s): Wagers.from_record(w) for s, w in last.items()} if last is not None else None
