"""The table API is defined once: docs/schemas/api-*.json are generated from
table/interfaces/api_schema.py, every action the core permits is defined, and the published
request schema accepts and refuses what the dispatcher does."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from table.interfaces import api_schema
from table.roles import PERMISSIONS

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def test_published_schemas_are_the_definition():
    assert api_schema.main(["--check", "--folder", str(SCHEMAS)]) == 0


def test_every_permitted_action_is_defined_and_every_action_has_roles():
    assert set(PERMISSIONS) <= set(api_schema.ACTIONS)
    assert all(a.roles for a in api_schema.COMMANDS)


def test_the_request_schema_accepts_and_refuses_as_documented():
    schema = json.loads((SCHEMAS / "api-request-v1.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema)
    good = [{"id": 1, "action": "status"}, {"id": "c-17", "action": "void", "reason": "misdeal", "supervisor": "S-17"},
            {"action": "decide", "seat": 2, "decision": "fold"}, {"action": "confirm_card", "card": "10h"},
            {"action": "subscribe", "resume_from": None, "seat": 3}]
    bad = [{"action": "void"}, {"action": "void", "reason": "x" * 501}, {"action": "decide", "seat": 8,
                                                                         "decision": "play"},
           {"action": "void", "reason": "x", "extra": 1}, {"action": "fly"}, {"id": {"x": 1}, "action": "status"},
           {"action": "register_deck", "deck_id": "A B"}]
    assert [v.is_valid(r) for r in good] == [True] * len(good)
    assert [v.is_valid(r) for r in bad] == [False] * len(bad)


def test_the_openapi_document_names_every_http_command():
    doc = api_schema.openapi()
    for a in api_schema.COMMANDS:
        if a.name not in api_schema.QUERY_ROLES and a.name != "status":
            assert f"/api/v1/commands/{a.name}" in doc["paths"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
