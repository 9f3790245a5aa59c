"""What the floor sees of a table's status.

The web console (``web_static/``), the pit view and the floor's MQTT status
read one status object, the core's :meth:`table.controller.TableController.status`
(docs/decisions/0005-one-status-contract.md)::

    {"places", "rounds_played", "round": {"round_id", "number", "state", ...} | null,
     "held": {"round_id", "reason" (masked), "settled", ...} | null,
     "waiting_for": {"action", "what", "role", "seat"?, "draw_index"?} | null,
     "decks": [{"deck_id", "back_colour", "place"}],
     "links": {"shuffler": {"up", "state", "serial", "firmware"}, "shoe": {...}},
     "alarms": [{"id", "kind", "text", "since"}],
     "void_needs_second_supervisor": bool}

:func:`floor_status` is the part of it a table publishes to the floor (MQTT) and
the pit view shows: step, alarms, links, rounds played. Nothing sealed is read
here (58 Pa. Code 816a.1): deck places, link states, masked texts.
"""

from __future__ import annotations

import re
from typing import Any

from table.sealing import mask_cards

#: a round id as the journal writes it (``r00011-79645365``: the number, then 8 hex digits)
ROUND_ID = re.compile(r"\b(?:round )?r0*(\d+)-[0-9a-f]{8}\b")


def rounds_as_people_say(text: str) -> str:
    """A table's text with every round id said as people count rounds: ``"collect settled
    round r00011-79645365"`` -> ``"collect settled round 11"`` (the id's number is the
    round's number). For texts from tables that still name rounds by id."""
    return ROUND_ID.sub(lambda m: f"round {int(m.group(1))}", text)


def floor_status(status: dict[str, Any]) -> dict[str, Any]:
    """What the floor sees of a table's status (published signed on MQTT): the round's
    step, what the table waits for (in words), alarms (masked), link health, rounds
    played. Nothing that names a card."""
    rnd = status.get("round") or None
    waiting = status.get("waiting_for") or None
    links = {name: {"up": bool(link.get("up")), "state": str(link.get("state", ""))[:32]}
             for name, link in (status.get("links") or {}).items() if name in ("shuffler", "shoe")}
    return {
        "rounds_played": status.get("rounds_played"),
        "round": {"number": rnd.get("number"), "state": rnd.get("state")} if rnd else None,
        "waiting_for": rounds_as_people_say(mask_cards(str(waiting.get("what", ""))))[:200] if waiting else None,
        "alarms": [{"kind": a.get("kind"), "text": rounds_as_people_say(mask_cards(str(a.get("text", ""))))[:300]}
                   for a in (status.get("alarms") or [])][:20],
        "links": links,
    }
