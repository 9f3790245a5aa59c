"""The pit view (`tablectl pit serve`) in real Chromium, from a real mosquitto with three tables
(`tablectl run --web` against standalone emulators, publishing signed MQTT): every table on one
page with its step and link health; one table killed shows OFFLINE within 5 s (its Last Will);
a forged status on the broker is dropped and counted, never shown."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from console_helpers import (CHROMIUM_ARGS, BenchTable, chromium_path, screenshot_dir, tablectl, wait_until)
from mqtt_broker import Broker, mosquitto_path

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
              pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto is not installed (.ci/run installs it)"),
              pytest.mark.timeout(180)]


@pytest.fixture(autouse=True)
def no_leaks(no_leaks_but):
    yield from no_leaks_but(lambda t: t.name.startswith("asyncio_"))


@pytest.fixture
def floor(tmp_path):
    broker = Broker(tmp_path / "broker").start()
    tables = []
    keys = tmp_path / "keys"
    keys.mkdir()
    try:
        for n in (1, 2, 3):
            table_id = f"pit7-tcp-0{n}"
            mqtt = (f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\nfloor = "pit7"\nkeepalive_s = 5\n'
                    f'state_path = "{tmp_path / table_id / "mqtt-state.json"}"\n')
            tables.append(BenchTable(tmp_path / table_id, table_id=table_id, seed=10 + n, extra=mqtt))
            shutil.copy(tables[-1].public_key_file, keys / f"{table_id}.pub")
        pit = subprocess.Popen(tablectl() + ["pit", "serve", "--mqtt", f"mqtt://127.0.0.1:{broker.port}", "--pit", "pit7",
                                             "--web", "127.0.0.1:0", "--table-keys", str(keys)],
                               stdout=subprocess.PIPE, stderr=open(tmp_path / "pit.log", "wb"), text=True)
        url = pit.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (tmp_path / "pit.log").read_text()[-2000:]
        yield broker, tables, url
    finally:
        for t in tables:
            t.stop()
        if "pit" in locals():
            pit.terminate()
            pit.wait(10)
            pit.stdout.close()
        broker.stop()


def publish_forged_online(port: int, table_id: str) -> None:
    import datetime

    import paho.mqtt.client as mqtt

    from table.interfaces.mqtt import sign_message
    from table.keys import generate

    topic = f"threecard/pit7/{table_id}/status"
    status = {"schema": "threecard.status/1", "table_id": table_id, "floor": "pit7", "online": True,
              "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(), "head_seq": 999}
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="floor-prankster")
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        client.publish(topic, sign_message(generate(), topic, status), qos=1, retain=True).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()
        getattr(client, "_reset_sockets", lambda: None)()


def test_three_tables_on_the_pit_page_one_killed_shows_offline_within_5_s(floor):
    from playwright.sync_api import sync_playwright

    broker, tables, url = floor
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            for t in tables:  # each table online, its step in words and both links up, from the broker
                page.wait_for_selector(f'[data-table="{t.table_id}"][data-state="online"]', timeout=20_000)
                card = page.locator(f'[data-table="{t.table_id}"]')
                page.wait_for_function("id => (document.querySelector(`[data-table=\"${id}\"] .waiting`) || {})"
                                       ".textContent", arg=t.table_id, timeout=20_000)
                assert "put the red deck in the shuffler" in card.locator(".waiting").inner_text()
                assert "ONLINE" in card.inner_text()
                assert card.locator('[data-link="shuffler"]').inner_text().strip().endswith("up")
            killed = tables[1]
            start = time.monotonic()
            killed.kill()
            page.wait_for_selector(f'[data-table="{killed.table_id}"][data-state="offline"]', timeout=5_000)
            took = time.monotonic() - start
            assert took < 5.0
            dead = page.locator(f'[data-table="{killed.table_id}"]').inner_text()
            assert "OFFLINE" in dead and "unknown while offline" in dead  # no stale "up" for a dead table
            for t in (tables[0], tables[2]):  # the others stay online
                assert page.get_attribute(f'[data-table="{t.table_id}"]', "data-state") == "online"
            # Someone on the floor network publishes a retained "online: true" for the dead table,
            # signed with a key of their own: the pit drops it and says so; the table stays offline.
            publish_forged_online(broker.port, killed.table_id)
            wait_until(lambda: "forged" in page.inner_text("#forged"), 10, "the forged message counted")
            assert page.get_attribute(f'[data-table="{killed.table_id}"]', "data-state") == "offline"
            assert errors == []
            page.screenshot(path=str(screenshot_dir() / "pit-one-table-offline.png"), full_page=True)
            print(f"table {killed.table_id} showed offline {took:.2f} s after it was killed")
        finally:
            browser.close()


def test_a_changed_table_updates_alone_and_a_table_past_the_limit_is_shown_refused(tmp_path):
    """`tablectl pit serve --max-tables 2` with three tables' keys, fed signed messages on a real
    mosquitto: the page shows the two, lists the third as refused with its messages counted,
    and a table that changes is redrawn alone (the others' elements stay as they were)."""
    import datetime

    import paho.mqtt.client as mqtt
    from playwright.sync_api import sync_playwright

    from table.interfaces.mqtt import sign_message
    from table.keys import generate, save

    broker = Broker(tmp_path / "broker").start()
    keys_dir = tmp_path / "keys"
    keys_dir.mkdir()
    table_keys = {t: generate() for t in ("pit7-a", "pit7-b", "pit7-c")}
    for t, k in table_keys.items():
        save(k, tmp_path / f"{t}.pem")
        shutil.copy(tmp_path / f"{t}.pem.pub", keys_dir / f"{t}.pub")
    pit = subprocess.Popen(tablectl() + ["pit", "serve", "--broker", f"mqtt://127.0.0.1:{broker.port}", "--pit", "pit7",
                                         "--web", "127.0.0.1:0", "--table-keys", str(keys_dir), "--max-tables", "2"],
                           stdout=subprocess.PIPE, stderr=open(tmp_path / "pit.log", "wb"), text=True)
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="synthetic-tables")
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()

    def send(table_id: str, kind: str, message: dict) -> None:
        topic = f"threecard/pit7/{table_id}/{kind}"
        pub.publish(topic, sign_message(table_keys[table_id], topic, {"table_id": table_id, **message}), qos=1,
                    retain=kind == "status").wait_for_publish(10)

    def online(table_id: str) -> None:
        send(table_id, "status", {"schema": "threecard.status/1", "floor": "pit7", "online": True, "head_seq": 0,
                                  "ts": datetime.datetime.now(datetime.timezone.utc).isoformat()})

    def opened(table_id: str, seq: int) -> None:
        send(table_id, "events", {"schema": "threecard.events/1", "seq": seq, "round_id": f"r{seq:05d}-00000000",
                                  "ts": "2026-12-01T10:00:00+00:00", "type": "round_opened", "data": {"number": seq}})

    try:
        url = pit.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (tmp_path / "pit.log").read_text()[-2000:]
        for t in table_keys:
            online(t)  # retained: the pit gets them whenever it subscribes
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                errors = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(url)
                for t in ("pit7-a", "pit7-b"):
                    page.wait_for_selector(f'[data-table="{t}"][data-state="online"]', timeout=20_000)
                wait_until(lambda: "connected" in page.inner_text("#brokers") and "NOT" not in page.inner_text("#brokers"),
                           20, "the page saying its broker is connected")
                opened("pit7-c", 1)  # the refused table keeps talking: counted, listed, never shown as a table
                page.wait_for_selector('[data-refused="pit7-c"]', timeout=20_000)
                wait_until(lambda: "2 message(s) refused" in page.inner_text('[data-refused="pit7-c"]'), 20,
                           "the refused table's messages counted on the page")
                assert "REFUSED" in page.inner_text("#refused") and "limit of 2 tables" in page.inner_text("#refused")
                assert page.locator('[data-table="pit7-c"]').count() == 0
                # Mark the cards as they are now; then one table changes.
                page.evaluate("document.querySelectorAll('[data-table]').forEach(n => { n.dataset.seen = '1'; })")
                opened("pit7-a", 5)
                page.wait_for_function("() => document.querySelector('[data-table=\"pit7-a\"] .step')"
                                       ".textContent.includes('Round 5: open for bets')", timeout=20_000)
                assert page.get_attribute('[data-table="pit7-a"]', "data-seen") is None  # redrawn
                assert page.get_attribute('[data-table="pit7-b"]', "data-seen") == "1"  # untouched
                assert [n for n in page.eval_on_selector_all("[data-table]", "ns => ns.map(n => n.dataset.table)")] \
                    == ["pit7-a", "pit7-b"]
                assert errors == []
                page.screenshot(path=str(screenshot_dir() / "pit-refused-table.png"), full_page=True)
            finally:
                browser.close()
        log = (tmp_path / "pit.log").read_text()
        assert "pit_table_refused" in log and "pit7-c" in log  # and logged
    finally:
        pub.disconnect()
        pub.loop_stop()
        getattr(pub, "_reset_sockets", lambda: None)()
        pit.terminate()
        pit.wait(10)
        pit.stdout.close()
        broker.stop()
