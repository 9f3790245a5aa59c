"""Attacks on the tables' signed MQTT messages (table.interfaces.mqtt.verify_message, what the
pit view and the floor believe): a forged message, a genuine one replayed under another table's
topic or as another kind of message, a genuine one changed. Each is refused; a genuine message
that crossed a bridge adding a topic prefix is not (docs/integration.md, "A two-broker bridge")."""

from __future__ import annotations

import base64
import json

import pytest

from table.interfaces.mqtt import ForgedMessage, sign_message, verify_message
from table.keys import generate

T7, T8 = generate(), generate()
KEYS = {"pit2-tcp-07": T7.public, "pit2-tcp-08": T8.public}


def event(table_id: str, seq: int = 5, kind: str = "round_settled") -> dict:
    return {"schema": "threecard.events/1", "seq": seq, "table_id": table_id, "round_id": "r00001-00000000",
            "ts": "2026-12-01T10:00:00+00:00", "type": kind, "data": {"number": 1, "net_cents": {"1": -500}}}


def test_a_message_that_crossed_a_prefixing_bridge_verifies():
    raw = sign_message(T7, "threecard/pit2/pit2-tcp-07/events", event("pit2-tcp-07"))
    for topic in ("threecard/pit2/pit2-tcp-07/events", "site-a/threecard/pit2/pit2-tcp-07/events",
                  "casino/east/site-a/threecard/pit2/pit2-tcp-07/events"):
        assert verify_message(raw, topic, KEYS)["seq"] == 5


def test_a_forged_message_is_refused():
    mallory = generate()
    for topic in ("threecard/pit2/pit2-tcp-07/events", "site-a/threecard/pit2/pit2-tcp-07/events"):
        with pytest.raises(ForgedMessage, match="not table pit2-tcp-07's key"):
            verify_message(sign_message(mallory, topic, event("pit2-tcp-07")), topic, KEYS)
        with pytest.raises(ForgedMessage, match="envelope"):
            verify_message(json.dumps(event("pit2-tcp-07")), topic, KEYS)
    # A forger who knows the key id still cannot sign: a signature by another key fails.
    env = json.loads(sign_message(mallory, "threecard/pit2/pit2-tcp-07/events", event("pit2-tcp-07")))
    env["key_id"] = T7.key_id
    with pytest.raises(ForgedMessage, match="bad signature"):
        verify_message(json.dumps(env), "threecard/pit2/pit2-tcp-07/events", KEYS)


def test_a_genuine_message_replayed_under_another_tables_topic_is_refused():
    genuine = sign_message(T7, "threecard/pit2/pit2-tcp-07/events", event("pit2-tcp-07"))
    for topic in ("threecard/pit2/pit2-tcp-08/events", "site-a/threecard/pit2/pit2-tcp-08/events"):
        with pytest.raises(ForgedMessage):
            verify_message(genuine, topic, KEYS)
    # Even when the subscriber (wrongly) trusts table 7's key for table 8: the signature names table 7.
    with pytest.raises(ForgedMessage, match="bad signature"):
        verify_message(genuine, "threecard/pit2/pit2-tcp-08/events", {"pit2-tcp-08": T7.public})
    # Table 8's own signature over a message naming table 7 is refused too.
    with pytest.raises(ForgedMessage, match="table_id"):
        verify_message(sign_message(T8, "threecard/pit2/pit2-tcp-08/events", event("pit2-tcp-07")),
                       "threecard/pit2/pit2-tcp-08/events", KEYS)


def test_a_genuine_message_replayed_as_another_kind_or_changed_is_refused():
    genuine = sign_message(T7, "threecard/pit2/pit2-tcp-07/events", event("pit2-tcp-07"))
    for kind in ("status", "checkpoint"):
        with pytest.raises(ForgedMessage, match="bad signature"):
            verify_message(genuine, f"threecard/pit2/pit2-tcp-07/{kind}", KEYS)
    env = json.loads(genuine)
    env["payload"] = env["payload"].replace('"1":-500', '"1":500000')
    with pytest.raises(ForgedMessage, match="bad signature"):
        verify_message(json.dumps(env), "threecard/pit2/pit2-tcp-07/events", KEYS)


def test_an_earlier_releases_envelope_verifies_only_on_its_own_unprefixed_topic():
    topic = "threecard/pit2/pit2-tcp-07/events"
    payload = json.dumps(event("pit2-tcp-07"), separators=(",", ":"))
    sig = T7.sign(b"threecard.signed/1\n" + topic.encode() + b"\n" + payload.encode())
    v1 = json.dumps({"schema": "threecard.signed/1", "key_id": T7.key_id, "payload": payload,
                     "sig": base64.b64encode(sig).decode()})
    assert verify_message(v1, topic, KEYS)["seq"] == 5
    with pytest.raises(ForgedMessage, match="prefixed"):
        verify_message(v1, "site-a/" + topic, KEYS)
    with pytest.raises(ForgedMessage, match="bad signature"):
        verify_message(v1, "threecard/pit3/pit2-tcp-07/events", KEYS)


def test_not_a_table_topic():
    with pytest.raises(ForgedMessage, match="not a table topic"):
        verify_message("{}", "pit2-tcp-07/events", KEYS)
    with pytest.raises(ForgedMessage, match="not a table topic"):
        sign_message(T7, "threecard/pit2/+/events", event("pit2-tcp-07"))
