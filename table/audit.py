"""Checks anyone can run on a table's public event stream, without trusting the operator.

Each ``card_dealt`` event carries a commitment to its card (:func:`table.sealing.commitment`),
published before anyone may see the card (58 Pa. Code 816a.1); the round's
``dealer_revealed`` (or ``round_voided``) publishes the openings (card and
nonce). :func:`check_stream` recomputes every commitment from its opening and
holds the openings to the hands the stream revealed: a revealed card that
differs from the one committed at deal time, a committed card never opened, or
an opening that names another card than the revealed hand, fails. Checkpoint
events are checked against the table's public keys when given.

The same recipe in 20 lines is in ``docs/integration.md``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from protocols.cards import Card

from .files import json_lines
from .journal import check_signed
from .keys import key_id
from .sealing import commitment


@dataclass
class StreamCheck:
    """Outcome of :func:`check_stream`: ``problems`` (one line each; empty: it holds),
    ``rounds`` revealed or voided and checked, ``cards`` whose commitment was
    opened and matched, ``checkpoints`` whose signature verified, ``shuffles``
    whose opening matched the commitment published at the count (SPEC §4.2.1);
    ``shuffles_earlier``: of those, the ones whose deck was counted before a stream that
    does not begin at seq 1 (a later gaming day's segment, ``events tail`` of the live
    journal): its commitment is in an earlier segment's stream, so the opening is checked
    against itself (its salt and order hash to the commitment it names, the deal follows
    that order), not against the count."""

    problems: list[str] = field(default_factory=list)
    rounds: int = 0
    cards: int = 0
    checkpoints: int = 0
    shuffles: int = 0
    shuffles_earlier: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def check_stream(events: Iterable[dict[str, Any]], public_keys: Iterable[Ed25519PublicKey] = ()) -> StreamCheck:
    """Check a table's public event stream (dicts as the event socket, MQTT or
    ``tablectl events tail`` give them, in ``seq`` order). Never raises for a
    malformed event: it is a problem of the result."""
    keys = {key_id(k): k for k in public_keys}
    out = StreamCheck()
    committed: dict[str, dict[int, str]] = {}  # round -> draw index -> commitment
    seat_hands: dict[str, dict[str, list[str]]] = {}
    ledger = _ShuffleLedger(out)
    last_seq = 0
    for ev in events:
        try:
            seq, etype, rid, data = ev["seq"], ev["type"], ev.get("round_id"), ev["data"]
            table_id = ev["table_id"]
        except (KeyError, TypeError):
            out.problems.append(f"an event without seq, type, table_id or data: {str(ev)[:80]}")
            continue
        if isinstance(seq, int) and seq != last_seq + 1 and last_seq:
            out.problems.append(f"seq {seq} follows {last_seq}: the stream has a gap")
        if not last_seq and isinstance(seq, int):
            ledger.whole = seq == 1  # else the decks counted before its first event were counted in an earlier segment
        last_seq = seq if isinstance(seq, int) else last_seq
        ledger.see(etype, rid, data)
        if etype == "card_dealt" and data.get("commitment"):
            committed.setdefault(rid, {})[data.get("draw_index")] = data["commitment"]
        elif etype == "decisions_final":
            seat_hands[rid] = {s: v.get("cards", []) for s, v in data.get("seats", {}).items()}
        elif etype in ("dealer_revealed", "round_voided") and (etype == "dealer_revealed" or "openings" in data):
            out.rounds += 1
            _check_round(out, table_id, rid, data.get("openings", []), committed.pop(rid, {}),
                         data.get("dealer_hand") if etype == "dealer_revealed" else None, seat_hands.pop(rid, None))
        elif etype == "checkpoint" and keys:
            why = check_signed(data, keys)
            if why is None:
                out.checkpoints += 1
            else:
                out.problems.append(f"checkpoint event {seq}: {why}")
    return out


class _ShuffleLedger:
    """The shuffle commitments of a stream (SPEC §4.2.1): the last one published per back
    colour, each round's colour and revealed cards, and whether its shuffle was opened
    and matched; problems go to ``out``."""

    def __init__(self, out: StreamCheck) -> None:
        self.out = out
        self.committed: dict[str, str] = {}  # back colour -> commitment (hex) at the last count
        self.colour: dict[str, str] = {}  # round -> back colour of its cards
        self.revealed: dict[str, dict[int, str]] = {}  # round -> draw index -> card opened
        self.opened: dict[str, bool] = {}  # round -> its deal followed the shuffle
        #: the stream begins at seq 1: every deck's count is in it (else a deck counted before
        #: its first event has its commitment in an earlier segment's stream)
        self.whole = True
        self.counted_here: set[str] = set()  # back colours whose count (shuffle_committed) is in this stream

    def see(self, etype: str, rid: str | None, data: dict[str, Any]) -> None:
        """Take one event (never raises for a malformed one: a problem of the result)."""
        try:
            if etype == "shuffle_committed":
                self.committed[str(data.get("back_colour"))] = str(data.get("commitment"))
                self.counted_here.add(str(data.get("back_colour")))
            elif etype == "card_dealt" and rid:
                self.colour.setdefault(rid, str(data.get("back_colour")))
            elif etype in ("dealer_revealed", "round_voided") and rid:
                self.revealed[rid] = {int(o["draw_index"]): str(o["card"]) for o in data.get("openings", [])}
            elif etype == "shuffle_opened":
                self.opened[str(rid)] = self._check(rid, data)
            elif etype == "round_settled" and rid:
                self._settled(rid)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.out.problems.append(f"round {rid}: a malformed {etype} event ({type(exc).__name__})")

    def _check(self, rid: str | None, data: dict[str, Any]) -> bool:
        colour, commit = str(data.get("back_colour")), str(data.get("commitment"))
        earlier = not self.whole and colour not in self.counted_here
        if earlier:
            # counted before this stream began: the commitment published then is not in it; the
            # opening is checked against the commitment it names (salt and order, the deal)
            self.committed[colour] = commit
        if self.committed.get(colour) != commit:
            self.out.problems.append(f"round {rid}: the shuffle opened ({commit[:16]}...) is not the commitment "
                                     f"published when the {colour} deck was counted")
            return False
        order = [Card.parse(c) for c in data["order"]]
        if sorted(c.index for c in order) != list(range(52)):
            self.out.problems.append(f"round {rid}: the shuffle opened does not name each of the 52 cards once")
            return False
        if hashlib.sha256(bytes.fromhex(data["salt"]) + bytes(c.index for c in order)).hexdigest() != commit:
            self.out.problems.append(f"round {rid}: the shuffle's salt and order do not hash to its commitment")
            return False
        dealt = self.revealed.get(str(rid), {})
        follows = all(0 <= i < 52 and str(order[i]) == card for i, card in dealt.items())
        if follows != bool(data.get("matched")):
            self.out.problems.append(f"round {rid}: the table says the deal {'did' if data.get('matched') else 'did not'}"
                                     f" follow the shuffle, the opened cards say it {'did' if follows else 'did not'}")
        if follows:
            self.out.shuffles += 1
            self.out.shuffles_earlier += earlier
        return follows

    def _settled(self, rid: str) -> None:
        colour = self.colour.get(rid)
        if rid in self.opened:
            if not self.opened[rid]:
                self.out.problems.append(f"round {rid} was settled though its deal did not follow the shuffle")
        elif colour in self.committed:
            self.out.problems.append(f"round {rid} was settled from a {colour} deck with a shuffle commitment, "
                                     "without the shuffle opened")


def _check_round(out: StreamCheck, table_id: str, rid: str | None, openings: list[dict[str, Any]],
                 committed: dict[int, str], dealer_hand: list[str] | None,
                 seat_hands: dict[str, list[str]] | None) -> None:
    opened: dict[int, dict[str, Any]] = {}
    for o in openings:
        try:
            index, card, nonce = o["draw_index"], o["card"], o["nonce"]
        except (KeyError, TypeError):
            out.problems.append(f"round {rid}: a malformed opening {str(o)[:60]}")
            continue
        want = committed.get(index)
        if want is None:
            out.problems.append(f"round {rid}: draw {index} is opened but was never committed to")
            continue
        if commitment(table_id, rid, index, card, nonce) != want:
            out.problems.append(f"round {rid}: draw {index} opens as {card}, which is not the card committed "
                                "to when it was dealt")
            continue
        opened[index] = o
        out.cards += 1
    for index in sorted(set(committed) - set(opened)):
        out.problems.append(f"round {rid}: draw {index} was committed to but never opened")
    if dealer_hand is not None:
        dealt = [o["card"] for i, o in sorted(opened.items()) if o.get("to") == "dealer"]
        if sorted(dealt) != sorted(dealer_hand):
            out.problems.append(f"round {rid}: the dealer's revealed hand is not the cards committed to the dealer")
    if seat_hands is not None:
        for seat, cards in seat_hands.items():
            dealt = [o["card"] for i, o in sorted(opened.items()) if o.get("to") == f"seat{seat}"]
            if sorted(dealt) != sorted(cards):
                out.problems.append(f"round {rid}: seat {seat}'s published hand is not the cards committed to it")


def read_stream(text: str) -> list[dict[str, Any]]:
    """Events from JSON lines (``tablectl events tail`` output). Raises ``ValueError``
    naming the first line that is not a JSON object."""
    out = []
    for n, obj in json_lines(text):
        if not isinstance(obj, dict):
            raise ValueError(f"line {n}: not a JSON object")
        out.append(obj)
    return out
