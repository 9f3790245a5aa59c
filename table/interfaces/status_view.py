"""The status the screens read: the core's ``status()``, with what it does not say yet filled in.

The web console (``web_static/``), the pit view and the floor's MQTT status
read one status object (the contract of issue 15)::

    {"places", "rounds_played", "round": {"round_id", "number", "state"} | null,
     "held": {"round_id", "reason" (masked), "settled"} | null,
     "waiting_for": {"action", "what", "role", "seat"?, "draw_index"?} | null,
     "decks": [{"deck_id", "back_colour", "place"}],
     "links": {"shuffler": {"up", "state", "serial", "firmware"}, "shoe": {...}},
     "alarms": [{"kind", "text", "since"}],
     "void_needs_second_supervisor": bool}

:func:`table_status` returns the core's answer unchanged wherever it already
gives a field, and fills each missing one from what the controller holds
(custody, the device links, the held round), deriving ``waiting_for`` as the
controller's procedure would next ask (:meth:`TableController.advance` and the
round's steps). It is the only place that derives them: once the core says
them itself, this adds nothing. Nothing sealed is read here (58 Pa. Code
816a.1): deck places, back colours, link states, masked reasons.

:func:`floor_status` is the part of it a table publishes to the floor (MQTT):
step, alarms, links, rounds played.
"""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Any

from table.sealing import mask_cards

#: places, and what the dealer does next with a deck there (between rounds)
_DEVICE_ROLE = "device"

_since_lock = threading.Lock()
_since: dict[tuple[int, str], str] = {}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _first_seen(owner: Any, key: str) -> str:
    """When an alarm was first seen by this process (the core will say when it was raised)."""
    k = (id(owner), key)
    with _since_lock:
        if k not in _since:
            if len(_since) > 1000:
                _since.clear()
            _since[k] = _now()
        return _since[k]


def _forget(owner: Any, keep: set[str]) -> None:
    with _since_lock:
        for k in [k for k in _since if k[0] == id(owner) and k[1] not in keep]:
            del _since[k]


def _decks(controller: Any) -> list[dict[str, Any]]:
    return [{"deck_id": d.deck_id, "back_colour": str(d.back_colour), "place": d.place.value}
            for d in controller.custody.decks.values()]


def _links(controller: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for name, device in (("shuffler", controller.shuffler), ("shoe", controller.shoe)):
        link = device.link
        ident = link.identity
        state = getattr(link.state, "value", link.state)
        out[name] = {"up": bool(link.alive), "state": str(state),
                     "serial": ident.serial_number if ident is not None else None,
                     "firmware": ident.firmware_version if ident is not None else None}
    return out


def _wait(action: str | None, what: str, role: str, **extra: Any) -> dict[str, Any]:
    return {"action": action, "what": what, "role": role, **extra}


def _waiting_for(controller: Any, status: dict[str, Any], decks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the table waits for, as the controller's procedure asks next."""
    held = status.get("held")
    if held:
        if held.get("settled"):
            return _wait("confirm_collect", f"the dealer to collect settled round {held.get('round_id')}", "dealer")
        return _wait("void", f"a supervisor to void held round {held.get('round_id')}", "supervisor")
    by_place: dict[str, list[dict[str, Any]]] = {}
    for d in decks:
        by_place.setdefault(d["place"], []).append(d)
    out = by_place.get("out_of_service")
    if out:
        return _wait("register_deck", f"a supervisor to register a replacement for deck {out[0]['deck_id']} "
                                      f"({out[0]['back_colour']} backs)", "supervisor")
    rnd = status.get("round")
    auto = bool(getattr(controller, "auto_dealer", False))
    if rnd:
        state = rnd.get("state")
        if state == "open_for_bets":
            return None if auto else _wait("close_bets", "the dealer to close bets", "dealer")
        if state in ("bets_closed", "dealing"):
            return _wait("draw_card", "the dealer to draw the next card from the shoe", _DEVICE_ROLE)
        if state == "decisions":
            return None if auto else _wait("decide", "each seat in turn to play or fold", "dealer")
        if state == "settle":
            return None if auto else _wait("confirm_collect", "the dealer to collect the round's cards into the "
                                                              "discard rack", "dealer")
        return None
    in_shuffler = next((d for p in ("in_shuffler", "shuffling", "verified") for d in by_place.get(p, [])), None)
    in_shoe = next((d for p in ("delivered", "in_shoe", "in_play") for d in by_place.get(p, [])), None)
    if in_shuffler is not None and in_shuffler["place"] in ("in_shuffler", "shuffling"):
        return _wait(None, f"the shuffler to shuffle and count the {in_shuffler['back_colour']} deck", _DEVICE_ROLE)
    if in_shoe is not None and in_shoe["place"] == "delivered":
        return _wait("load_shoe", f"the dealer to load the {in_shoe['back_colour']} deck into the shoe",
                     _DEVICE_ROLE, colour=in_shoe["back_colour"])
    if in_shuffler is not None and in_shoe is None:
        return _wait("take_from_shuffler", f"the dealer to take the {in_shuffler['back_colour']} deck out of the "
                                           "shuffler", _DEVICE_ROLE, colour=in_shuffler["back_colour"])
    if in_shuffler is None:
        nxt = next((d for p in ("in_discard_rack", "off_table") for d in by_place.get(p, []) if d is not in_shoe),
                   None)
        if nxt is not None:
            return _wait("insert_deck", f"the dealer to put the {nxt['back_colour']} deck into the shuffler",
                         _DEVICE_ROLE, colour=nxt["back_colour"])
    return None


def _alarms(controller: Any, status: dict[str, Any], decks: list[dict[str, Any]],
            links: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    alarms = []
    held = status.get("held")
    if held:
        key = f"held:{held.get('round_id')}"
        alarms.append({"kind": "held", "text": f"round {held.get('round_id')} held: "
                                               f"{mask_cards(str(held.get('reason') or ''))}",
                       "since": _first_seen(controller, key), "key": key})
    for d in decks:
        if d["place"] == "out_of_service":
            key = f"oos:{d['deck_id']}"
            alarms.append({"kind": "out_of_service", "text": f"deck {d['deck_id']} ({d['back_colour']} backs) is out "
                                                             "of service: register a replacement",
                           "since": _first_seen(controller, key), "key": key})
    for name, link in links.items():
        if not link.get("up"):
            key = f"down:{name}"
            alarms.append({"kind": "device_down", "text": f"the {name} does not answer (link {link.get('state')})",
                           "since": _first_seen(controller, key), "key": key})
    _forget(controller, {a.pop("key") for a in alarms})
    return alarms


def table_status(controller: Any) -> dict[str, Any]:
    """``controller.status()`` with every field of the screens' contract present (see
    the module docstring). Call it from any thread, as the core's status."""
    status = dict(controller.status())
    rnd = status.get("round")
    if rnd is not None and "number" not in rnd:
        number = getattr(controller, "rounds_opened", None)
        status["round"] = {**rnd, "number": number}
    decks = status.get("decks")
    if decks is None:
        decks = status["decks"] = _decks(controller)
    if "links" not in status:
        status["links"] = _links(controller)
    if "waiting_for" not in status:
        status["waiting_for"] = _waiting_for(controller, status, decks)
    if "alarms" not in status:
        status["alarms"] = _alarms(controller, status, decks, status["links"])
    status.setdefault("void_needs_second_supervisor", False)
    return status


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
        "waiting_for": mask_cards(str(waiting.get("what", "")))[:200] if waiting else None,
        "alarms": [{"kind": a.get("kind"), "text": mask_cards(str(a.get("text", "")))[:300]}
                   for a in (status.get("alarms") or [])][:20],
        "links": links,
    }
