"""Checks shared by the event stream and MQTT tests: schema validation and sealing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"
_CARD = re.compile(r'"([2-9TJQKA][shdc])"')


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def assert_valid(events: list[dict], name: str = "event-v1.schema.json") -> None:
    v = validator(name)
    for ev in events:
        errors = sorted(v.iter_errors(ev), key=str)
        assert not errors, (ev, [e.message for e in errors])


def assert_gapless(events: list[dict], first: int = 1) -> None:
    assert [e["seq"] for e in events] == list(range(first, first + len(events)))


def assert_sealed(events: list[dict], seat: int | None = None) -> None:
    """58 Pa. Code 816a.1 on a stream, in stream order: no dealer card before the
    round's dealer_revealed; no seat card before decisions_final, except (on seat
    ``seat``'s channel) that seat's own cards in its card_dealt events.

    The faces are learnt from the reveal events themselves, so the check looks back
    over every earlier event of the round for any mention of them."""
    by_round: dict[str, list[dict]] = {}
    for ev in events:
        if ev["round_id"]:
            by_round.setdefault(ev["round_id"], []).append(ev)
    for rid, evs in by_round.items():
        types = [e["type"] for e in evs]
        for i, e in enumerate(evs):
            if e["type"] == "card_dealt":
                if e["data"]["to"] == "dealer" or seat is None or e["data"].get("seat") != seat:
                    assert "card" not in e["data"], e
                else:
                    assert "card" in e["data"], e
        if "dealer_revealed" in types:
            k = types.index("dealer_revealed")
            dealer = set(evs[k]["data"]["dealer_hand"])
            assert "decisions_final" in types[:k], f"{rid}: dealer revealed before decisions were final"
            for e in evs[:k]:
                seen = set(_CARD.findall(json.dumps(e)))
                assert not (seen & dealer), (rid, e, seen & dealer)
        if "decisions_final" in types:
            k = types.index("decisions_final")
            for s, d in evs[k]["data"]["seats"].items():
                others = set(d["cards"])
                for e in evs[:k]:
                    seen = set(_CARD.findall(json.dumps(e)))
                    if seat is not None and int(s) == seat and e["type"] == "card_dealt":
                        continue
                    assert not (seen & others), (rid, s, e)
        else:  # never decided (held, voided): no seat card at all, except one's own
            for e in evs:
                if e["type"] == "card_dealt" and seat is not None and e["data"].get("seat") == seat:
                    continue
                assert not _CARD.findall(json.dumps(e)), e
