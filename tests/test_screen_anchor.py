"""A journal put back behind its signed checkpoint, handled from the supervisor's screen (issue 25,
"every procedure through the web screens"): an older copy of the table's journal is put in place
and the table started with the checkpoint seen off the table (`--anchors`); it deals nothing and
waits for a supervisor to acknowledge the incident. The supervisor does it with the banner's one
button; the dealer's screen says what the table waits for and offers no button, and the table
refuses the dealer's acknowledgement (403) whatever a page sends. Real Chromium, a real table
(`tablectl run --web`) on standalone emulators."""

from __future__ import annotations

import json
import shutil

import pytest

from console_helpers import ApiDealer, BenchTable
from table.journal import head_path
from test_web_console import (CHROMIUM, STEP_S, api, events_of, no_leaks, shoot,  # noqa: F401
                              waiting)
from test_web_console_states import sign_in

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: "
                                                          "apt-get install chromium)"),
              pytest.mark.timeout(300)]

SUFFIXES = ("", "-wal", "-shm")


def journal_files(bench):
    return [bench.journal.with_name(bench.journal.name + s) for s in SUFFIXES] + [head_path(bench.journal)]


@pytest.fixture
def rolled_back(tmp_path):
    """A table whose journal is an older copy, started with the newer signed checkpoint as its anchor."""
    bench = BenchTable(tmp_path / "bench", rounds=5)
    try:
        old = tmp_path / "old"
        old.mkdir()
        bench.kill()  # the insider's copy, taken before a round was dealt
        for f in journal_files(bench):
            if f.exists():
                shutil.copy2(f, old / f.name)
        bench.start()
        dealer = ApiDealer(bench)
        try:
            dealer.deal(1)
        finally:
            dealer.close()
        bench.kill()
        checkpoint = json.loads(head_path(bench.journal).read_text())
        anchors = tmp_path / "anchors.jsonl"  # the floor's copy of the table's checkpoints
        anchors.write_text(json.dumps(checkpoint) + "\n")
        for f in journal_files(bench):  # the older copy put in place of the journal
            f.unlink(missing_ok=True)
            if (old / f.name).exists():
                shutil.copy2(old / f.name, f)
        bench.run_args = ["--anchors", str(anchors)]
        bench.start()
        bench.checkpoint = checkpoint
        yield bench
    finally:
        bench.stop()


def test_a_supervisor_acknowledges_a_journal_behind_its_anchor_on_the_screen_a_dealer_cannot(chromium, rolled_back):
    bench = rolled_back
    dealer = sign_in(chromium, bench, "D-4")
    dealer.wait_for_function("() => (document.getElementById('now-what') || {}).dataset?.waitingAction"
                             " === 'acknowledge_incident'", timeout=STEP_S * 1000)
    said = dealer.inner_text("#now")
    assert f"behind checkpoint {bench.checkpoint['seq']}" in said and "a supervisor" in said, said
    assert dealer.locator("#ack-now").count() == 0  # nothing for a dealer to press
    refused = dealer.evaluate("() => window.threecard.request({action: 'acknowledge_incident'})")
    assert refused["ok"] is False and refused["code"] == "forbidden", refused
    status, reply = api(bench, "POST", "/api/v1/commands/acknowledge_incident", "D-4", {})
    assert status == 403 and reply["code"] == "forbidden"
    assert waiting(dealer) == "acknowledge_incident"  # still waiting: nothing was acknowledged
    sup = sign_in(chromium, bench, "S-17")
    sup.wait_for_selector("#ack-now", timeout=STEP_S * 1000)
    assert "behind checkpoint" in sup.inner_text("#now")
    sup.fill("#ack-note", "older journal copy found in place; disk image kept for the investigation")
    sup.click("#ack-now")
    # Acknowledged: the table goes on to the first deck, on every screen.
    for page in (dealer, sup):
        page.wait_for_function("() => { const w = document.getElementById('now-what');"
                               " return w && w.dataset.waitingAction && w.dataset.waitingAction !== 'acknowledge_incident'; }",
                               timeout=STEP_S * 1000)
    acks = [e for e in events_of(bench, "supervisor_action") if e["data"].get("action") == "acknowledge_incident"]
    assert len(acks) == 1 and acks[0]["data"]["supervisor"] == "S-17", acks
    behind = [e["data"] for e in events_of(bench, "incident") if "behind a signed checkpoint" in e["data"].get("what", "")]
    # one start-up incident (the anchor it is behind), and once acknowledged, one saying every deck
    # not in play is counted again in the shuffler before it is dealt
    assert len([d for d in behind if "seen off the table" in d["what"]]) == 1, behind
    assert len([d for d in behind if "counted again in the shuffler" in d["what"]]) == 1, behind
    assert len(behind) == 2, behind
    assert dealer.errors == [] and sup.errors == []
    shoot(sup, "supervisor-acknowledged-journal-behind-anchor")
