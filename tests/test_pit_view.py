"""The pit's wall page (`tablectl pit serve`: the floor service's read-only page, on a display of
its own, reading the floor's database) in real Chromium, from a real mosquitto with three tables
(`tablectl run --web` against standalone emulators, publishing signed MQTT) and the floor service
taking them: every table on one page with what it waits for and its devices; one table killed
shows offline within 5 s (its Last Will); a forged status on the broker is dropped and counted
by the floor, never shown; no money and nothing to click."""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
import subprocess
import time

import pytest
from playwright.sync_api import expect

from console_helpers import (close_contexts, BenchTable, chromium_path, screenshot_dir, tablectl, wait_until)
from mqtt_broker import Broker, mosquitto_path

CHROMIUM = chromium_path()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
              pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto is not installed (.ci/run installs it)"),
              pytest.mark.timeout(180)]


@pytest.fixture(autouse=True)
def no_leaks(no_leaks_but):
    yield from no_leaks_but(lambda t: t.name.startswith("asyncio_"))


def _floor_config(tmp_path, broker_port: int, keys):
    from mqtt_broker import free_port

    path = tmp_path / "floor.toml"
    path.write_text(f"""
[floor]
database = "{tmp_path / 'floor.sqlite3'}"
key_file = "{tmp_path / 'floor.key'}"
table_keys = "{keys}"
listen = "127.0.0.1:{free_port()}"
display_timezone = "America/New_York"
[[broker]]
url = "mqtt://127.0.0.1:{broker_port}"
""")
    return path


@contextlib.contextmanager
def wall_display(tmp_path, config, *pits: str):
    """`tablectl pit serve --config FLOOR_TOML --pit NAME`: the floor's wall page on a display of its own."""
    pit = subprocess.Popen(tablectl() + ["pit", "serve", "--config", str(config), *[x for p in pits for x in
                                                                                     ("--pit", p)],
                                         "--web", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=open(tmp_path / "pit.log", "wb"), text=True)
    try:
        urls = [pit.stdout.readline().strip() for _ in pits]
        assert all(u.startswith("http://127.0.0.1:") for u in urls), (tmp_path / "pit.log").read_text()[-2000:]
        yield urls
    finally:
        pit.terminate()
        pit.wait(10)
        pit.stdout.close()


@pytest.fixture
def floor(tmp_path):
    from table.floor.config import load_floor_config
    from table.floor.service import FloorService

    broker = Broker(tmp_path / "broker").start()
    tables = []
    keys = tmp_path / "keys"
    keys.mkdir()
    service = None
    try:
        def start(n: int) -> BenchTable:
            table_id = f"pit7-tcp-0{n}"
            mqtt = (f'[mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\nfloor = "pit7"\nkeepalive_s = 5\n'
                    f'state_path = "{tmp_path / table_id / "mqtt-state.json"}"\n')
            return BenchTable(tmp_path / table_id, table_id=table_id, seed=10 + n, extra=mqtt)

        # the three tables start at once (each waits on its own start, a child process's)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            started = [pool.submit(start, n) for n in (1, 2, 3)]
            for f in started:  # every started table is stopped below, even if another failed
                with contextlib.suppress(Exception):
                    tables.append(f.result())
            for f in started:
                f.result()  # a table that failed to start fails the set-up, with its error
        for t in tables:
            shutil.copy(t.public_key_file, keys / f"{t.table_id}.pub")
        service = FloorService(load_floor_config(_floor_config(tmp_path, broker.port, keys))).start()
        with wall_display(tmp_path, service.config.source, "pit7") as (url,):
            yield broker, tables, url, service
    finally:
        for t in tables:
            t.stop()
        if service is not None:
            service.close()
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


def tile(page, table_id: str, state: str | None = None):
    return page.locator(f'[data-grid-table="{table_id}"]' + (f'[data-state="{state}"]' if state else ""))


@pytest.mark.alone  # bounds wall time (offline within 5 s): run apart from the parallel run
def test_three_tables_on_the_pit_page_one_killed_shows_offline_within_5_s(chromium, floor):
    from floor_helpers import call

    broker, tables, url, service = floor
    browser = chromium
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        for t in tables:  # each table online, what it waits for in words and both devices up
            tile(page, t.table_id, "online").wait_for(timeout=20_000)
            card = tile(page, t.table_id)
            expect(card.locator(".waits")).to_contain_text("put the red deck in the shuffler", timeout=20_000)
            assert "shuffler up" in card.inner_text() and "shoe up" in card.inner_text()
        assert page.locator("a, button, form").count() == 0 and "$" not in page.inner_text("body")  # read-only
        killed = tables[1]
        start = time.monotonic()
        killed.kill()
        tile(page, killed.table_id, "offline").wait_for(timeout=5_000)
        took = time.monotonic() - start
        assert took < 5.0
        dead = tile(page, killed.table_id).inner_text()
        assert "since" in dead and "connection lost" in dead and "up" not in dead  # no stale "up" when dead
        for t in (tables[0], tables[2]):  # the others stay online
            assert tile(page, t.table_id).get_attribute("data-state") == "online"
        # Someone on the floor network publishes a retained "online: true" for the dead table,
        # signed with a key of their own: the floor drops it and counts it; the table stays offline.
        forged = service.floor.counts.forged
        publish_forged_online(broker.port, killed.table_id)
        wait_until(lambda: call(service, "/api/v1/floor/health")[1]["counts"]["forged"] > forged, 10,
                   "the forged message counted by the floor")
        shown = page.inner_text("#pit-counts")  # ends with the floor's time of the read
        page.wait_for_function("t => document.getElementById('pit-counts').textContent !== t", arg=shown,
                               timeout=10_000)  # the wall page read the floor again after the forgery
        assert tile(page, killed.table_id).get_attribute("data-state") == "offline"
        assert errors == []
        page.screenshot(path=str(screenshot_dir() / "pit-one-table-offline.png"), full_page=True)
        print(f"table {killed.table_id} showed offline {took:.2f} s after it was killed")
    finally:
        close_contexts(browser)


def test_the_wall_display_shows_its_pit_only_the_tables_the_floor_believes_and_their_changes(chromium, tmp_path):
    """`tablectl pit serve` for two pits on the floor's database, fed signed messages on a real
    mosquitto through the floor service: each page shows its own pit's tables; a table the floor
    has no key for is refused (counted by the floor) and never shown; a round opened on one table
    is shown on its tile; a pit the display was not given is not served."""
    import datetime

    import paho.mqtt.client as mqtt

    from table.floor.config import load_floor_config
    from table.floor.service import FloorService
    from table.interfaces.mqtt import sign_message
    from table.keys import generate, save

    from floor_helpers import call

    broker = Broker(tmp_path / "broker").start()
    keys_dir = tmp_path / "keys"
    keys_dir.mkdir()
    table_keys = {t: generate() for t in ("pit7-a", "pit7-b", "pit8-a", "pit7-c")}
    for t, k in table_keys.items():
        if t != "pit7-c":  # the floor has no key for pit7-c
            save(k, tmp_path / f"{t}.pem")
            shutil.copy(tmp_path / f"{t}.pem.pub", keys_dir / f"{t}.pub")
    service = FloorService(load_floor_config(_floor_config(tmp_path, broker.port, keys_dir))).start()
    assert not service.wait_following(20)
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="synthetic-tables")
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()

    def send(table_id: str, kind: str, message: dict) -> None:
        pit = table_id.split("-")[0]
        topic = f"threecard/{pit}/{table_id}/{kind}"
        pub.publish(topic, sign_message(table_keys[table_id], topic, {"table_id": table_id, **message}), qos=1,
                    retain=kind == "status").wait_for_publish(10)

    def online(table_id: str, **table) -> None:
        send(table_id, "status", {"schema": "threecard.status/1", "floor": table_id.split("-")[0], "online": True,
                                  "head_seq": 0, "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                  "table": table})

    try:
        with wall_display(tmp_path, service.config.source, "pit7", "pit8") as (pit7, pit8):
            for t in table_keys:
                online(t)
            browser = chromium
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                errors = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(pit7)
                for t in ("pit7-a", "pit7-b"):
                    tile(page, t, "online").wait_for(timeout=20_000)
                wait_until(lambda: service.floor.counts.unknown_table >= 1, 20, "the unknown table counted")
                assert tile(page, "pit7-c").count() == 0 and tile(page, "pit8-a").count() == 0
                online("pit7-a", round={"number": 5, "state": "betting"},
                       waiting_for="the players to place their bets")
                expect(tile(page, "pit7-a").locator(".step")).to_have_text("round 5 · betting", timeout=20_000)
                assert "round 5" not in tile(page, "pit7-b").inner_text()
                other = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
                other.goto(pit8)
                tile(other, "pit8-a", "online").wait_for(timeout=20_000)
                assert tile(other, "pit7-a").count() == 0
                assert other.evaluate("document.documentElement.scrollWidth <= 390")
                assert errors == []
                page.screenshot(path=str(screenshot_dir() / "pit-wall-display.png"), full_page=True)
            finally:
                close_contexts(browser)
            base = pit7.split("/pit?")[0]
            import urllib.error
            import urllib.request

            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(base + "/api/v1/floor/wall?pit=pit9", timeout=10)
            exc.value.close()
            assert exc.value.code == 404  # a pit this display was not given
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(base + "/api/v1/notary/pit7-a?nonce=" + "0" * 32, timeout=10)
            exc.value.close()
            assert exc.value.code == 404  # the display serves the wall page only: never the notary
        assert call(service, "/api/v1/floor/health")[0] == 200
    finally:
        pub.disconnect()
        pub.loop_stop()
        getattr(pub, "_reset_sockets", lambda: None)()
        service.close()
        broker.stop()
