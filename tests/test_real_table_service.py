"""The service as it runs on a real table: no virtual dealer, nothing on stdin.

The devices are the simulated table in its own process; this test plays the
person at the table: it does what the controller's prompts (stderr) ask,
through the simulation's dealer socket, and confirms bets closed, each
seat's decision and the collect on the control socket named in the config,
as docs/console.md documents.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time

import pytest

from table.interfaces.control_socket import send
from table.journal import Journal, verify
from table.keys import generate, save
from tests.tables import table_toml
from tests.test_crash import tablectl


@pytest.mark.timeout(120)
def test_service_deals_a_round_with_a_person_at_the_table(tmp_path):
    dev, dealer_sock = tmp_path / "dev", tmp_path / "dealer.sock"
    table = subprocess.Popen(tablectl() + ["simulate-table", "--link-dir", str(dev), "--dealer-socket",
                                           str(dealer_sock), "--seed", "4"], stdout=subprocess.PIPE, text=True)
    assert table.stdout.readline().startswith("ready")
    control, journal = tmp_path / "control.sock", tmp_path / "journal.sqlite3"
    key_file = tmp_path / "table.key"  # a service needs its table key (docs/journal.md)
    save(generate(), key_file)
    cfg = tmp_path / "table.toml"
    cfg.write_text(table_toml("real-01", 2, dev / "shuffler", dev / "shoe",
                              f'[console]\ncontrol_socket = "{control}"\n[journal]\npath = "{journal}"\n'
                              f'key_file = "{key_file}"'))
    run = subprocess.Popen(tablectl() + ["run", "--service", "--config", str(cfg), "--rounds", "1"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()
    console_replies: list[dict] = []

    def person_at_the_console() -> None:
        plan = {"open_for_bets": [{"action": "close_bets"}],
                "decisions": [{"action": "decide", "seat": 1, "decision": "play"},
                              {"action": "decide", "seat": 2, "decision": "fold"}],
                "settle": [{"action": "confirm_collect"}]}
        while not done.is_set() and plan:
            try:
                state = ((send(control, {"action": "status"}, timeout_s=2).get("round") or {}).get("state"))
            except (OSError, ValueError, ConnectionError):
                time.sleep(0.02)
                continue
            for request in plan.pop(state, []):
                console_replies.append(send(control, request, timeout_s=30))
            time.sleep(0.01)

    t = threading.Thread(target=person_at_the_console)
    t.start()
    actions = {
        r"Put the (\w+) deck into the shuffler": lambda m: {"action": "insert_deck", "colour": m.group(1)},
        r"Take the shuffled deck out": lambda m: {"action": "take_from_shuffler"},
        r"Load the (\w+) deck into the shoe": lambda m: {"action": "load_shoe", "colour": m.group(1)},
        r"Draw the next card": lambda m: {"action": "draw_card"},
        r"Collect the round's cards": lambda m: {"action": "collect"},
    }
    prompts = 0
    try:
        for line in run.stderr:  # the prompts; a person does each
            for pattern, make in actions.items():
                m = re.search(pattern, line)
                if m:
                    prompts += 1
                    assert send(dealer_sock, make(m), timeout_s=10)["ok"]
        assert run.wait(30) == 0
    finally:
        done.set()
        t.join()
        if run.poll() is None:
            run.kill()
        table.send_signal(signal.SIGTERM)
        table.wait(10)
        table.stdout.close()
    logs = [json.loads(x) for x in run.stdout.read().splitlines()]
    run.stdout.close()
    run.stderr.close()
    assert all(r.get("ok") for r in console_replies) and len(console_replies) == 4
    assert prompts == 4 + 9 + 1  # insert, take, load, insert to open the table; 9 draws; the collect
    result = next(x for x in logs if x["event"] == "round_result")
    assert [s["decision"] for s in result["seats"]] == ["play", "fold"]
    assert verify(journal).ok
    with Journal(journal) as j:
        assert [e.body["step"] for e in j.entries("round")][-1] == "closed"
