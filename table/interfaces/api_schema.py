"""The table API, defined once: every command and query, its arguments, who may ask it, and the replies.

Every front door (the Unix control socket, HTTP, WebSocket) serves this one
definition through :mod:`table.interfaces.dispatch`; the JSON Schemas under
``docs/schemas/`` and the OpenAPI document served at
``/api/v1/openapi.json`` are generated from it (``python -m
table.interfaces.api_schema --write``; ``--check`` fails when the files differ,
and so does ``tests/test_api_schema.py``).

A **request** is one JSON object (``docs/schemas/api-request-v1.schema.json``)::

    {"id": "c-17", "action": "void", "reason": "misdeal", "supervisor": "S-17"}

``id`` (a string of 1..64 printable characters, or an integer) is echoed in
the reply; ``action`` names the command or query; the other members are its
arguments. A **reply** (``api-reply-v1.schema.json``) names the request's id
and says ``ok``; a refusal carries ``error`` (words for a person) and, when a
front door refused it before the table saw it, ``code`` (:data:`ERROR_CODES`);
the table's own refusals carry one of :data:`TABLE_CODES` (a bet refused: the
seat, the wager and the limit too).
A command's reply is the table's own answer (accepted, refused with a reason,
or not expected now), passed through.

Who may ask what is :data:`table.roles.PERMISSIONS` (the core checks it too);
queries that only a front door answers (``whoami``, ``subscribe``,
``unsubscribe``, ``events``) are in :data:`QUERY_ROLES`.

Versioning: :data:`API_SCHEMA` carries the major version in its name
(``threecard.api/1``); :data:`API_VERSION` is semver: a minor version adds
actions, optional arguments or reply fields; a major version changes or
removes them. A client ignores reply fields it does not know.

Adding a command: one entry in :data:`COMMANDS` (and the core's
``PERMISSIONS``), then ``python -m table.interfaces.api_schema --write``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from table.bets import REFUSAL_CODES as BET_CODES
from table.events import SCHEMA as EVENT_SCHEMA
from table.rules import kinds
from table.rules.wagers import MAX_WAGER_CENTS
from table.roles import ALL, MAX_NAME, MAX_REASON, PERMISSIONS, Role

API_SCHEMA = "threecard.api/1"
API_VERSION = "1.8.0"  # 1.1.0: a void's outcome pushed as a "result"; 1.2.0: place_bets, bets_closed wagers; 1.3.0: the history query, confirm_card's draw_index; 1.4.0: table_procedure, day_report, status table_day; 1.5.0: dealer_hands (training at a person's pace); 1.6.0: table_procedure's request_id (a retry makes no second slip); 1.7.0: a shift change's opener_pin (the incoming dealer signs too); 1.8.0: slip.empty_confirmed (a $0 inventory confirmed by the supervisor)

#: codes of refusals a front door gives before the table sees the request
ERROR_CODES = {
    "bad_request": (400, "the request is not valid JSON, not an object, or its arguments break the schema"),
    "too_large": (413, "the request line or body is longer than the limit"),
    "unknown_action": (400, "no such action"),
    "unauthenticated": (401, "sign in first (HTTP/WebSocket), or the socket peer has no role"),
    "forbidden": (403, "the role of the person who asked may not ask this"),
    "busy": (503, "too many requests or connections now; try again"),
    "timeout": (504, "the table did not answer in time; the command may still take effect, ask for status"),
    "locked": (429, "too many failed sign-ins for this person or address; wait"),
    "internal": (500, "a front door failed; the table's state is unchanged by it"),
}

#: codes of the table's own refusals (the core's answer, passed through; HTTP 409): a command
#: not expected now, a void refused, and each way a bet is refused (table.bets.REFUSAL_CODES)
TABLE_CODES = {
    "not_expected": "the table does not wait for this now; the answer says what it waits for",
    "refused": "the table refused it; the answer says why",
    **BET_CODES,
}

_PRINTABLE = r"^[^\u0000-\u001f\u007f-\u009f]*$"


def _str(max_len: int, description: str, pattern: str = _PRINTABLE) -> dict[str, Any]:
    """A bounded, printable string (blank text is refused by the table.roles validators)."""
    return {"type": "string", "minLength": 1, "maxLength": max_len, "pattern": pattern, "description": description}


SUPERVISOR = _str(MAX_NAME, "the supervisor's id; over HTTP/WebSocket the signed-in person (filled in when "
                            "absent, refused when it names someone else); on the Unix socket a person of the "
                            "people file, proved by their pin (required there)")
PIN = _str(64, "the supervisor's PIN (the people file): on the Unix control socket every supervisor action "
                "names a person of the people file (supervisor) and proves it; never journaled nor logged")
REASON = _str(MAX_REASON, "why, in words (journaled; card faces are masked in the public stream)")
SEAT = {"type": "integer", "minimum": 1, "maximum": 7, "description": "a seat, 1..7"}
CENTS = {"type": "integer", "minimum": 0, "maximum": MAX_WAGER_CENTS}
ROUND_ID = _str(64, "the round this is meant for; refused when another round is running", r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class Action:
    """One action of the API. ``kind``: ``command`` (changes the table; the core
    answers) or ``query`` (changes nothing; ``status`` is the core's, the queries of
    :data:`QUERY_ROLES` a front door's own); ``args``: JSON Schema of each
    argument; ``required``: those that must be given; ``push``: needs a channel the
    server can push on (WebSocket, a socket connection), not plain HTTP."""

    name: str
    kind: str
    summary: str
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    push: bool = False

    @property
    def roles(self) -> frozenset[Role]:
        return PERMISSIONS.get(self.name) or QUERY_ROLES.get(self.name, frozenset())

    def args_schema(self) -> dict[str, Any]:
        """JSON Schema of a request for this action (the envelope's members included)."""
        props = {"id": copy.deepcopy(REQUEST_ID), "action": {"const": self.name}, **copy.deepcopy(self.args)}
        return {"type": "object", "required": ["action", *self.required], "properties": props,
                "additionalProperties": False}


REQUEST_ID = {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 64, "pattern": _PRINTABLE},
                        {"type": "integer", "minimum": -(2 ** 53) + 1, "maximum": 2 ** 53 - 1}],
              "description": "the client's id for this request, echoed in its one reply"}

COMMANDS: tuple[Action, ...] = (
    Action("status", "query", "The table's state in words and figures: deck places, the round and its step, "
                              "the held round, violations (nothing sealed)."),
    Action("close_bets", "command", "Betting is closed; the deal may start (a real table, before the deal)."),
    Action("place_bets", "command", "Set one seat's wagers for the round open for bets (or every seat's, "
                                    "all_seats): amounts in cents, or empty, same_as_last, table_minimum. Refused "
                                    "with a code (below_minimum, above_maximum, not_chip_multiple, needs_ante, "
                                    "no_such_seat, ...) naming the seat, the wager and the limit; final once bets "
                                    "close (58 Pa. Code 649a.7, 816a.1). Since 1.2.0.",
           {"seat": SEAT,
            "all_seats": {"const": True, "description": "every seat of the layout, all or nothing (instead of seat)"},
            **{k.key: {**CENTS, "description": k.describe} for k in kinds.kinds()},
            "empty": {"const": True, "description": "the seat bets nothing this round (it is not dealt)"},
            "same_as_last": {"const": True, "description": "what the seat bet last round (empty if it was)"},
            "table_minimum": {"const": True, "description": "the ante at the table minimum, no side wager"}}),
    Action("confirm_collect", "command", "The round's cards are in the discard rack (a real table, after "
                                         "settlement)."),
    Action("decide", "command", "A seat plays or folds, entered by the dealer, each seat in turn (649a.11).",
           {"seat": SEAT, "decision": {"enum": ["play", "fold"], "description": "play (the play wager, equal to "
                                                                                "the ante) or fold"}},
           ("seat", "decision")),
    Action("dealer_hands", "command", "Training (tablectl run --simulate --pace person): the dealer's hands do the "
           "physical step the table waits for (insert, take or load a deck; deal the next card) through the "
           "simulated table's control socket; refused on any other table, and for a step already done. Since 1.5.0.",
           {"step": {"enum": ["insert_deck", "take_from_shuffler", "load_shoe", "draw_card"],
                     "description": "the step this press is for (waiting_for.action): refused when the table "
                                    "waits for another"},
            "draw_index": {"type": "integer", "minimum": 0, "maximum": 51,
                           "description": "for draw_card: the card this press deals (waiting_for.draw_index): "
                                          "a double tap is refused, never dealt as the next card"}}),
    Action("void", "command", "Void the round: wagers returned, cards collected (58 Pa. Code 816a.1: refused once "
                              "results are recorded).",
           {"reason": REASON, "supervisor": SUPERVISOR, "pin": PIN, "round_id": ROUND_ID}, ("reason",)),
    Action("confirm_void", "command", "A second supervisor confirms a void asked after the decisions were final "
                                      "(the two-person rule): not the supervisor who asked it.",
           {"supervisor": SUPERVISOR, "pin": PIN, "round_id": ROUND_ID}),
    Action("register_deck", "command", "Register a replacement deck (same back colour) for one out of service.",
           {"deck_id": _str(8, "the new deck's id: 1-8 letters, digits, '_', '-'", r"^[A-Za-z0-9][A-Za-z0-9_-]*$"),
            "colour": {"enum": ["red", "blue", "green", "black", "grey", "purple", "orange", "brown"],
                       "description": "its back colour (must be the out-of-service deck's)"},
            "supervisor": SUPERVISOR, "pin": PIN}, ("deck_id",)),
    Action("confirm_card", "command", "Enter a card the shoe could not read.",
           {"card": _str(3, "rank and suit: 'Qs', 'Td', '10h'", r"^(10|[2-9TJQKAtjqka])[cdhsCDHS]$"),
            "draw_index": {"type": "integer", "minimum": 0, "maximum": 63,
                           "description": "the draw this card is for (waiting_for.draw_index, counted from 0): "
                                          "refused when the table waits for another card, so an entry sent "
                                          "twice is never taken for the next unreadable card"},
            "supervisor": SUPERVISOR, "pin": PIN}, ("card",)),
    Action("release_hold", "command", "Release a held round so it goes on (e.g. after a restart mid-round).",
           {"supervisor": SUPERVISOR, "pin": PIN, "reason": REASON, "round_id": ROUND_ID}),
    Action("acknowledge_incident", "command", "Acknowledge an incident or alarm the table raised.",
           {"supervisor": SUPERVISOR, "pin": PIN, "incident": {"oneOf": [{"type": "integer", "minimum": 0},
                                                             _str(64, "the incident's id", r"^[A-Za-z0-9_.:-]+$")],
                                                  "description": "which incident (its id or event seq)"},
            "note": REASON}),
    Action("table_procedure", "command", "One of the gaming day's procedures, signed by two people of the people "
                                         "file (COMAR 36.05.03.10): the supervisor (over HTTP/WebSocket the "
                                         "signed-in one; on the Unix socket named and proved by pin) and a "
                                         "dealer, who countersigns with dealer and dealer_pin on every front "
                                         "door. Carried out between rounds (before the first bet of the round "
                                         "open for bets; a simulated table at the next round's start). The "
                                         "reply's slip is the journaled slip. A retry with the same request_id "
                                         "and the same ask is answered with the first ask's slip and "
                                         "\"repeated\": true, journaling nothing; the same id with a different "
                                         "ask is refused. Since 1.4.0; request_id since 1.6.0; a shift change's "
                                         "incoming dealer proves themself with opener_pin since 1.7.0.",
           {"procedure": {"enum": ["open", "shift_change", "fill", "credit", "close", "drop"],
                          "description": "open (opening inventory), shift_change (closer's inventory; slip.opener "
                                         "is the incoming dealer), fill and credit (chips brought to / taken "
                                         "from the table: slip.amount), close (closing inventory), drop (the "
                                         "count's drop of slip.gaming_day, after the close)"},
            "slip": {"type": "object", "additionalProperties": False, "maxProperties": 4,
                     "description": "the slip: inventory (open, shift_change, close), amount (fill, credit, drop), "
                                    "gaming_day, counted_by, verified_by (drop), opener (shift_change)",
                     "properties": {
                         "inventory": {"type": "object", "maxProperties": 64,
                                       "description": "chips by denomination: denomination in cents (text) -> "
                                                      "chips, e.g. {\"2500\": 40, \"500\": 100}",
                                       "propertyNames": {"pattern": "^[0-9]{1,9}$"},
                                       "additionalProperties": {"type": "integer", "minimum": 0,
                                                                "maximum": 100000}},
                         "amount": {"type": "integer", "minimum": 0, "maximum": 10_000_000_000,
                                    "description": "cents"},
                         "gaming_day": _str(10, "the gaming day counted, YYYY-MM-DD", r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
                         "opener": _str(MAX_NAME, "the incoming dealer's id (shift_change)",
                                        r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"),
                         "counted_by": _str(MAX_NAME, "drop: who counted it in the count room",
                                            r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"),
                         "verified_by": _str(MAX_NAME, "drop: who verified the count (not who counted it)",
                                             r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"),
                         "empty_confirmed": {"type": "boolean",
                                             "description": "open, close: the supervisor confirms the table truly "
                                                            "holds no chips (an empty, $0 inventory is refused "
                                                            "without it)"}}},
            "dealer": _str(MAX_NAME, "the dealer who signs the slip: a person of the people file with the dealer "
                                     "role, not the supervisor", r"^[A-Za-z0-9][A-Za-z0-9._@-]*$"),
            "dealer_pin": _str(64, "the dealer's PIN (the people file), checked with the sign-in's lock-outs; "
                                   "never journaled nor logged"),
            "opener_pin": _str(64, "shift_change: the incoming dealer's (slip.opener) PIN: a dealer of the people "
                                   "file other than the outgoing one, who takes over the inventory counted; "
                                   "checked like dealer_pin. Since 1.7.0"),
            "request_id": _str(64, "the front door's own id of this ask, chosen once (e.g. a UUID) and sent again "
                                   "with every retry of it: a retry after a lost answer makes no second slip",
                               r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"),
            "supervisor": SUPERVISOR, "pin": PIN}, ("procedure", "dealer", "dealer_pin")),
    Action("day_report", "query", "The table's figures for the current shift or gaming day from its journal "
                                  "(the tablectl report --json shape) and a series, one item per settled round "
                                  "in order: the cumulative settled house win, the cumulative expected win given "
                                  "the decisions and its 95 % band (cents), for a plot. Since 1.4.0.",
           {"period": {"enum": ["shift", "day"], "description": "the current shift, or the gaming day with its "
                                                                 "shifts"},
            "gaming_day": _str(10, "the gaming day (YYYY-MM-DD); absent: the current one",
                               r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
            "shift": {"type": "integer", "minimum": 1, "maximum": 24,
                      "description": "with period shift: which shift of the day (absent: the current one)"}},
           ("period",)),
    Action("whoami", "query", "The person, role and seat this connection acts as."),
    Action("events", "query", "Public events after a seq, from the journal (at most 'limit'); for polling "
                              "clients. A seat terminal gets its own seat's channel.",
           {"after": {"type": "integer", "minimum": 0, "description": "the last seq you have (0: from the first)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "at most this many (100)"},
            "seat": SEAT}),
    Action("subscribe", "query", "Push the public events after 'resume_from' (replayed, then live) on this "
                                 "connection, then a 'status' object after each event when 'status' is true. "
                                 "A seat terminal gets only its own seat's channel (816a.1).",
           {"resume_from": {"type": ["integer", "null"], "minimum": 0,
                            "description": "the last seq you have; 0: from the first; null/absent: live from now"},
            "seat": SEAT, "status": {"type": "boolean", "description": "also push the status after each event"}},
           push=True),
    Action("unsubscribe", "query", "Stop the events this connection's subscription pushes.", push=True),
    Action("shuffle_check", "query", "The shuffle check per deck from the journal: the chi-square statistic on "
                                     "the dealt position of each card after each of the deck's rounds, the value "
                                     "it fails above at 95 %, and the verdict (rounds still sealed are left out)."),
    Action("audit_status", "query", "Whether the journal verifies (chain, checkpoint signatures, head file) and "
                                    "its last signed checkpoint."),
    Action("history", "query", "The last rounds with their results (once settled, after the reveal: nothing of "
                               "a round before it) and the incidents with who handled them, newest first, one "
                               "page at a time.",
           {"before": {"type": "integer", "minimum": 0, "description": "the journal seq to page back from "
                                                                        "(next_before of the last page); absent: "
                                                                        "the newest"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "rounds per page (10)"}}),
)

#: roles of the queries a front door answers itself (commands: table.roles.PERMISSIONS)
QUERY_ROLES: dict[str, frozenset[Role]] = {
    "whoami": ALL, "events": ALL, "subscribe": ALL, "unsubscribe": ALL,
    "shuffle_check": frozenset({Role.SUPERVISOR, Role.AUDITOR}),
    "audit_status": frozenset({Role.SUPERVISOR, Role.AUDITOR}),
    "history": frozenset({Role.DEALER, Role.SUPERVISOR, Role.AUDITOR, Role.PIT}),
    # what the table won and holds is money: for supervisors and auditors (COMAR 36.05.03.25)
    "day_report": frozenset({Role.SUPERVISOR, Role.AUDITOR}),
}

ACTIONS: dict[str, Action] = {a.name: a for a in COMMANDS}


def request_schema() -> dict[str, Any]:
    """The JSON Schema of every request (``docs/schemas/api-request-v1.schema.json``)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{API_SCHEMA}/request",
        "title": f"threecard-table API request (schema version {API_VERSION})",
        "description": "One request on any front door (Unix control socket line, HTTP body, WebSocket message). "
                       "Members other than id and action are the action's arguments.",
        "type": "object",
        "required": ["action"],
        "properties": {"id": REQUEST_ID, "action": {"enum": list(ACTIONS)}},
        "allOf": [{"if": {"properties": {"action": {"const": a.name}}, "required": ["action"]},
                   "then": {"$ref": f"#/$defs/{a.name}"}} for a in COMMANDS],
        "$defs": {a.name: {"description": f"{a.summary} Roles: {', '.join(sorted(r.value for r in a.roles))}.",
                           **a.args_schema()} for a in COMMANDS},
    }


def reply_schema() -> dict[str, Any]:
    """The JSON Schema of every reply (``docs/schemas/api-reply-v1.schema.json``)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{API_SCHEMA}/reply",
        "title": f"threecard-table API reply (schema version {API_VERSION})",
        "description": "Exactly one per request, naming its id (absent only when a Unix-socket request gave none). "
                       "ok: true = accepted or answered; ok: false = refused, with error in words and, when a "
                       "front door refused it before the table saw it, a code.",
        "type": "object",
        "required": ["ok"],
        "properties": {
            "id": {"oneOf": [{"type": "string", "maxLength": 64}, {"type": "integer"}, {"type": "null"}]},
            "ok": {"type": "boolean"},
            "error": {"type": "string", "maxLength": 2000},
            "code": {"enum": [*ERROR_CODES, *TABLE_CODES],
                     "description": "a front door's refusal (ERROR_CODES) or the table's own (TABLE_CODES)"},
            "seat": {"type": "integer", "description": "place_bets refused: the seat"},
            "wager": {"enum": list(kinds.keys()),
                      "description": "place_bets refused: the wager at fault"},
            "limit_cents": {"type": "integer", "description": "place_bets refused: the limit broken, in cents"},
        },
        "if": {"properties": {"ok": {"const": False}}},
        "then": {"required": ["ok", "error"]},
        "additionalProperties": True,
    }


def push_schema() -> dict[str, Any]:
    """What a subscribed connection receives besides replies (``api-push-v1.schema.json``)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{API_SCHEMA}/push",
        "title": f"threecard-table API push message (schema version {API_VERSION})",
        "description": "On a subscribed connection: each public event as it is on the event socket "
                       f"(event-v1.schema.json, \"schema\": \"{EVENT_SCHEMA}\"), a status object after an event "
                       "when asked for, an end message when the subscription ends (fell behind: resubscribe "
                       "with resume_from = last_seq), and, on any connection that can take a push, the outcome "
                       "of a void accepted earlier (type result, naming the request's id; since 1.1.0).",
        "oneOf": [
            {"$ref": "event-v1.schema.json"},
            {"type": "object", "required": ["type", "status"],
             "properties": {"type": {"const": "status"}, "status": {"type": "object"}}},
            {"type": "object", "required": ["type", "error", "last_seq"],
             "properties": {"type": {"const": "subscription_ended"}, "error": {"type": "string"},
                            "last_seq": {"type": "integer", "minimum": 0}}},
            {"type": "object", "required": ["type", "action", "ok"],
             "properties": {"type": {"const": "result"}, "action": {"type": "string"},
                            "id": {"type": ["string", "integer"]}, "ok": {"type": "boolean"},
                            "round_id": {"type": "string"}, "voided": {"type": "boolean"},
                            "pending": {"type": "boolean"}, "error": {"type": "string"}}},
        ],
    }


def schema_files() -> dict[str, dict[str, Any]]:
    """File name -> schema, for ``docs/schemas/``."""
    return {"api-request-v1.schema.json": request_schema(), "api-reply-v1.schema.json": reply_schema(),
            "api-push-v1.schema.json": push_schema()}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def openapi(title: str = "threecard-table") -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP API (served at ``/api/v1/openapi.json``)."""
    def reply_ref() -> dict[str, Any]:
        return {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Reply"}}}}

    errors = {str(status): {"description": f"{code}: {text}", **reply_ref()}
              for code, (status, text) in ERROR_CODES.items() if code != "unknown_action"}
    paths: dict[str, Any] = {
        "/api/v1/session": {
            "post": {"summary": "Sign in with a person id and PIN; returns a session token (also set as the "
                                "HttpOnly cookie threecard_session).",
                     "security": [],
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {
                         "type": "object", "required": ["person", "pin"], "additionalProperties": False,
                         "properties": {"person": _str(MAX_NAME, "the person's id"),
                                        "pin": {"type": "string", "minLength": 1, "maxLength": 64}}}}}},
                     "responses": {"200": {"description": "signed in", **reply_ref()},
                                   "401": {"description": "unknown person or wrong PIN", **reply_ref()},
                                   "429": {"description": "locked after failed sign-ins", **reply_ref()}}},
            "get": {"summary": "Who this session is (whoami).", "responses": {"200": {"description": "the person",
                                                                                      **reply_ref()}, **errors}},
            "delete": {"summary": "Sign out.", "responses": {"200": {"description": "signed out", **reply_ref()}}},
        },
        "/api/v1/status": {"get": {"summary": ACTIONS["status"].summary,
                                   "responses": {"200": {"description": "the status", **reply_ref()}, **errors}}},
        "/api/v1/events": {"get": {"summary": ACTIONS["events"].summary,
                                   "parameters": [{"name": n, "in": "query", "schema": ACTIONS["events"].args[n]}
                                                  for n in ("after", "limit", "seat")],
                                   "responses": {"200": {"description": "events", **reply_ref()}, **errors}}},
        "/api/v1/commands": {"post": {"summary": "Any request object (docs/schemas/api-request-v1.schema.json).",
                                      "requestBody": {"required": True, "content": {"application/json": {
                                          "schema": {"$ref": "#/components/schemas/Request"}}}},
                                      "responses": {"200": {"description": "accepted", **reply_ref()},
                                                    "409": {"description": "refused by the table (the reply "
                                                                           "says why)", **reply_ref()}, **errors}}},
        "/api/v1/ws": {"get": {"summary": "WebSocket: request objects in, replies and pushed events out "
                                          "(docs/console.md). 401 without a session.",
                               "responses": {"101": {"description": "switching protocols"},
                                             "401": {"description": "no session"}}}},
    }
    for a in COMMANDS:
        if a.push or a.name in ("status", "events", "whoami"):
            continue
        body = {k: v for k, v in a.args_schema().items()}
        body["properties"] = {k: v for k, v in body["properties"].items() if k != "action"}
        body["required"] = [r for r in body["required"] if r != "action"]
        paths[f"/api/v1/commands/{a.name}"] = {"post": {
            "summary": f"{a.summary} Roles: {', '.join(sorted(r.value for r in a.roles))}.",
            "requestBody": {"required": False, "content": {"application/json": {"schema": body}}},
            "responses": {"200": {"description": "accepted", **reply_ref()},
                          "409": {"description": "refused by the table, or not expected now", **reply_ref()},
                          **errors}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": f"{title} table API", "version": API_VERSION,
                 "description": "One API on every front door (docs/console.md). Sign in at /api/v1/session; send "
                                "the token as 'Authorization: Bearer TOKEN' or the session cookie."},
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                "cookie": {"type": "apiKey", "in": "cookie", "name": "threecard_session"}},
            "schemas": {"Request": request_schema(), "Reply": reply_schema()},
        },
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": paths,
    }


def main(argv: list[str] | None = None) -> int:
    """``--write``: regenerate docs/schemas/api-*.json; ``--check``: exit 1 when they differ."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--folder", type=Path, default=Path(__file__).resolve().parents[2] / "docs" / "schemas")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    ns = p.parse_args(argv)
    stale = []
    for name, schema in schema_files().items():
        path = ns.folder / name
        text = render(schema)
        if ns.write:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            stale.append(name)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python -m table.interfaces.api_schema --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
