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

from dataclasses import dataclass, field
from typing import Any, Iterable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .files import json_lines
from .journal import check_signed
from .keys import key_id
from .sealing import commitment


@dataclass
class StreamCheck:
    """Outcome of :func:`check_stream`: ``problems`` (one line each; empty: it holds),
    ``rounds`` revealed or voided and checked, ``cards`` whose commitment was
    opened and matched, ``checkpoints`` whose signature verified."""

    problems: list[str] = field(default_factory=list)
    rounds: int = 0
    cards: int = 0
    checkpoints: int = 0

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
        last_seq = seq if isinstance(seq, int) else last_seq
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
