"""What the screens stand on, without a browser: the shuffle-check and audit queries (supervisor and
auditor only: the table refuses a dealer), the chi-square curve, the pit grid's refusal of forged
and replayed messages, and the static assets (shipped in the package, nothing from another site)."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from table.interfaces.audit_view import AuditQueries
from table.interfaces.mqtt import sign_message
from table.interfaces.brokers import BrokerAddress, PitSetupError
from table.keys import generate
from table.shuffle_check import PositionCounts, chi_square_report, chi_square_series

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "table" / "interfaces" / "web_static"


@pytest.fixture(scope="module")
def dealt_journal(tmp_path_factory):
    folder = tmp_path_factory.mktemp("screens")
    journal = folder / "journal.sqlite3"
    subprocess.run([sys.executable, "-c", "from table.cli import main; main()", "run", "--simulate", "--rounds", "60",
                    "--seats", "3", "--seed", "3", "--journal", str(journal), "--weak-shuffle"],
                   check=True, capture_output=True, timeout=120)
    return journal


def test_the_shuffle_check_curve_ends_at_the_whole_records_verdict(dealt_journal):
    reply = AuditQueries(dealt_journal).shuffle_check()["shuffle_check"]
    assert reply["rounds"] == 60 and set(reply["decks"]) == {"A", "B"}
    for deck, curve in reply["decks"].items():
        assert curve["rounds"] == 30 and len(curve["points"]) == 30
        last = curve["points"][-1]
        assert last["statistic"] == pytest.approx(curve["statistic"], abs=1e-3)
        assert last["critical_value"] == pytest.approx(curve["critical_value"], abs=1e-3)
        # fewer than 52 rounds of a deck: one card expected per cell is not reached, never a pass
        assert {p["verdict"] for p in curve["points"]} == {"insufficient"}


def test_the_curve_is_the_statistic_recomputed_after_every_round():
    import random

    rng = random.Random(5)
    rounds = [("A" if i % 2 else "B", rng.sample(range(52), 12)) for i in range(140)]
    series = chi_square_series(rounds, max_points=1000)
    counts = PositionCounts()
    for i, (deck, cards) in enumerate(rounds, start=1):
        counts.add_round(deck, cards)
        if i in (30, 111, 140):
            report = chi_square_report(counts)
            for d in ("A", "B"):
                n = counts.rounds(d)
                point = next(p for p in series[d]["points"] if p["round"] == n)
                assert point["statistic"] == pytest.approx(report["decks"][d]["statistic"], abs=1e-3)
                assert point["verdict"] == report["decks"][d]["verdict"]
    thinned = chi_square_series(rounds, max_points=10)
    assert len(thinned["A"]["points"]) == 10 and thinned["A"]["points"][-1]["round"] == 70


def test_the_audit_status_says_the_journal_verifies_and_names_its_last_checkpoint(dealt_journal):
    from table.keys import load_private_key

    public = load_private_key(dealt_journal.with_name(dealt_journal.name + ".key")).public
    audit = AuditQueries(dealt_journal, public_keys=(public,)).audit_status()["audit"]
    assert audit["status"] == "ok" and audit["ok"] and audit["checkpoints"] >= 60
    assert audit["last_checkpoint"]["signed"] and audit["last_checkpoint"]["rounds_opened"] == 60


def test_only_supervisors_and_auditors_may_ask_the_audit_queries(dealt_journal, tmp_path):
    import asyncio

    from frontdoor_helpers import RecordingConsole

    from table.interfaces.dispatch import Channel, Dispatcher
    from table.interfaces.serving import FrontDoorLoop
    from table.roles import Actor, Role

    front = FrontDoorLoop("test-audit")
    try:
        dispatcher = Dispatcher(RecordingConsole(), front, queries=AuditQueries(dealt_journal).handlers())

        def ask(role, action):
            channel = Channel("websocket", Actor("X-1", role), signed_in=True)
            return asyncio.run_coroutine_threadsafe(dispatcher.answer(channel, {"id": 1, "action": action}),
                                                    front.loop).result(30)

        for action in ("shuffle_check", "audit_status"):
            for role in (Role.DEALER, Role.PIT, Role.SEAT):
                reply = ask(role, action)
                assert reply["ok"] is False and reply["code"] == "forbidden", reply
            for role in (Role.SUPERVISOR, Role.AUDITOR):
                assert ask(role, action)["ok"] is True
        no_journal = Dispatcher(RecordingConsole(), front)
        reply = asyncio.run_coroutine_threadsafe(
            no_journal.answer(Channel("websocket", Actor("S-1", Role.SUPERVISOR), signed_in=True),
                              {"action": "shuffle_check"}), front.loop).result(30)
        assert reply["ok"] is False and "without a journal" in reply["error"]
    finally:
        front.close()


def _status(key, table_id, online=True, age_s=0.0, **extra):
    topic = f"threecard/pit7/{table_id}/status"
    ts = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=age_s)
    msg = {"schema": "threecard.status/1", "table_id": table_id, "floor": "pit7", "online": online,
           "ts": ts.isoformat(), "head_seq": 0, **extra}
    return topic, sign_message(key, topic, msg).encode()


def _wall(tmp_path, keys):
    from table.floor.ingest import Floor
    from table.floor.store import open_store

    store = open_store(str(tmp_path / "floor.sqlite3"))
    return store, Floor(store, keys).start()


def _pit(store) -> dict:
    from table.floor.pit_screen import Clock, grid

    return {t["table_id"]: t for t in grid(store, None, clock=Clock(), pit="pit7")["tables"]}


def test_the_pit_grid_believes_only_each_tables_own_signature_and_no_replayed_online(tmp_path):
    """The pit's screens (the floor's grid, its wall page) show what the floor took: the same rule."""
    k1, k2, mallory = generate(), generate(), generate()
    store, floor = _wall(tmp_path, {"t-1": k1.public, "t-2": k2.public})
    try:
        assert floor.receive(*_status(k1, "t-1", table={"links": {"shuffler": {"up": True, "state": "up"}}}))
        assert floor.receive(*_status(k2, "t-2"))
        old = _status(k1, "t-1", age_s=1)  # a genuine "online" captured a moment earlier
        assert floor.receive(*_status(k1, "t-1", online=False))
        assert floor.wait_idle(10)
        assert _pit(store)["t-1"]["state"] == "offline"
        assert not floor.receive(*old)                                # replayed: the table stays offline
        assert not floor.receive(*_status(mallory, "t-1"))            # someone else's key
        assert not floor.receive(*_status(k2, "t-1"))                 # another table's key
        assert not floor.receive("threecard/pit7/t-1/status", b'{"online": true}')  # not signed at all
        assert not floor.receive(*_status(k1, "t-9"))  # a table the floor has no key for: not shown
        assert floor.wait_idle(10)
        shown = _pit(store)
        assert shown["t-1"]["state"] == "offline" and sorted(shown) == ["t-1", "t-2"]
        assert floor.counts.forged >= 4
    finally:
        floor.close()
        store.close()


def test_broker_urls():
    assert BrokerAddress.parse("mqtt://broker.floor:1884") == BrokerAddress("broker.floor", 1884, False)
    assert BrokerAddress.parse("mqtts://pit-reader@broker") == BrokerAddress("broker", 8883, True, "pit-reader")
    for bad in ("http://x", "mqtt://", "mqtt://u:secret@host", "mqtt://h:99999"):
        with pytest.raises(PitSetupError):
            BrokerAddress.parse(bad)


def test_static_assets_ship_in_the_package_and_load_nothing_from_elsewhere():
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "table.interfaces"]
    files = [p for p in STATIC.rglob("*") if p.is_file()]
    assert files
    for f in files:
        rel = f.relative_to(STATIC.parent).as_posix()
        assert any(Path(rel).match(p) for p in patterns), f"{rel} is not shipped (pyproject package-data)"
        text = f.read_text()
        assert not re.search(r"(?:src|href)=[\"']?(?:https?:)?//", text), f"{rel} loads from another site"
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") or f.suffix == ".md"
        if f.suffix == ".js":  # every module import resolves to a shipped file
            for imp in re.findall(r'from "(\./[^"]+)"', text):
                assert (f.parent / imp).is_file(), (rel, imp)
        if f.suffix == ".html":
            for ref in re.findall(r'(?:src|href)="(/[^"]+)"', text):
                if not ref.startswith("/api/"):
                    assert (STATIC / ref.lstrip("/")).is_file(), (rel, ref)
            assert "<script>" not in text and "style=" not in text  # the CSP allows no inline script or style


def test_the_floor_status_names_no_card():
    from table.interfaces.status_view import floor_status

    out = floor_status({"rounds_played": 4, "round": {"round_id": "r1", "number": 5, "state": "held"},
                        "waiting_for": {"action": "void", "what": "a supervisor to void: Qs has blue backs",
                                        "role": "supervisor"},
                        "alarms": [{"kind": "held", "text": "round r1 held: Kd has blue backs"}],
                        "links": {"shuffler": {"up": True, "state": "up", "serial": "S1"}}})
    text = json.dumps(out)
    assert "Qs" not in text and "Kd" not in text and "??" in text
    assert out["links"] == {"shuffler": {"up": True, "state": "up"}}
