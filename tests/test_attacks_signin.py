"""Attacks on sign-in turned against the people it protects (issue 24, row 4).

Ten wrong PINs for supervisor S-2 from ten addresses locked S-2 out everywhere:
S-2's right PIN from a fresh address was refused with 429. Anyone who could
reach the web port could keep the supervisors, and with them the two-person
void, out of the screens. Failures now count per person *and origin* (the
table's own screens: loopback and ``[auth] table_screens``; everything else):
a flood from elsewhere never locks a person out at the table's own screens,
and the guesses it gets per person stay within the documented budget
(``docs/web-console.md``; :func:`table.interfaces.auth.guess_budget`).

The sign-in flood of point 8 (1,000 sign-ins a second for 30 s: the table deals
on, the screens answer) is the test marked ``alone`` at the end; the bounded
flood before it (40 addresses x 50, as fast as they go) runs with the rest.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time

import pytest

from table.interfaces.auth import Authenticator, PeopleFile, SignInLocked, guess_budget
from table.roles import Role

from test_web import CHEAP, PINS, call, web  # noqa: F401 - the web fixture


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingHasher:
    """The cheap test hasher, counting the PINs it was asked to check."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    def hash(self, pin: str) -> str:
        return CHEAP.hash(pin)

    def verify(self, encoded, pin) -> bool:
        self.checked.append(pin)
        return CHEAP.verify(encoded, pin)


@pytest.fixture
def people(tmp_path):
    os.chmod(tmp_path, 0o700)
    pf = PeopleFile(tmp_path / "people.toml")
    pf.add("S-2", Role.SUPERVISOR, PINS["S-2"], hasher=CHEAP)
    return tmp_path / "people.toml"


def _try(auth, person, pin, address) -> str:
    try:
        auth.sign_in(person, pin, address=address)
        return "in"
    except SignInLocked:
        return "locked"
    except PermissionError:
        return "wrong"


def test_fifty_addresses_guessing_for_a_minute_do_not_lock_s2_out_at_the_table(people):
    clock, hasher = Clock(), CountingHasher()
    auth = Authenticator(people, hasher=hasher, max_failures=5, lockout_s=30, clock=clock)
    attackers = [f"10.9.0.{i}" for i in range(1, 51)]
    outcomes = []
    for _ in range(600):  # 60 s, every attacker every 0.1 s
        for address in attackers:
            outcomes.append(_try(auth, "S-2", "000000", address))
        clock.now += 0.1
    assert outcomes.count("wrong") <= guess_budget(5, 30, 60) and "locked" in outcomes
    # From a fresh address elsewhere S-2 is locked out (that origin's count) ...
    assert _try(auth, "S-2", PINS["S-2"], "10.9.1.1") == "locked"
    # ... but at the table's own screen S-2 signs in at once (was: 429).
    assert _try(auth, "S-2", PINS["S-2"], "127.0.0.1") == "in"


def test_a_listed_table_screen_is_the_tables_too(people):
    clock = Clock()
    auth = Authenticator(people, hasher=CHEAP, max_failures=3, lockout_s=30, clock=clock,
                         table_screens=["10.1.2.0/28"])
    for i in range(10):
        _try(auth, "S-2", "000000", f"10.9.0.{i + 1}")
    assert auth.origin("10.1.2.7") == "table" and auth.origin("10.1.2.17") == "other"
    assert auth.origin("::ffff:127.0.0.1") == "table" and auth.origin("127.0.0.2") == "other"
    assert _try(auth, "S-2", PINS["S-2"], "10.1.2.7") == "in"


def test_an_attackers_guesses_per_person_stay_within_the_documented_budget(people):
    clock, hasher = Clock(), CountingHasher()
    auth = Authenticator(people, hasher=hasher, max_failures=5, lockout_s=30, clock=clock)
    per_hour = []
    address = 0
    for hour in range(6):
        before = len(hasher.checked)
        for _ in range(3600):  # a guess a second, each from a fresh address
            address += 1
            _try(auth, "S-2", "000000", f"10.{address // 65536 % 256}.{address // 256 % 256}.{address % 256}")
            clock.now += 1
        per_hour.append(len(hasher.checked) - before)
        # S-2 signs in now and then from elsewhere: that does not give the attacker a fresh count
        auth.sign_in("S-2", PINS["S-2"], address="127.0.0.1")
    assert per_hour[0] <= guess_budget(5, 30, 3600) == 11, per_hour  # as docs/web-console.md says
    assert all(n <= 2 for n in per_hour[2:]), per_hour  # then about one an hour
    assert sum(per_hour) <= guess_budget(5, 30, 6 * 3600)


def _post_from(port: int, source: str, person: str, pin: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        conn.request("POST", "/api/v1/session", json.dumps({"person": person, "pin": pin}),
                     {"content-type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _flood(door, stop: threading.Event, counts: dict, addresses: int = 50, each: int = 20,
           person: str = "S-2") -> list[threading.Thread]:
    port = door.address[1]

    def attacker(i: int) -> None:
        for _ in range(each):
            if stop.is_set():
                return
            try:
                status = _post_from(port, f"127.0.0.{i + 2}", person, "000000")
            except OSError:
                status = "refused"
            with counts["lock"]:
                counts[status] = counts.get(status, 0) + 1

    threads = [threading.Thread(target=attacker, args=(i,), daemon=True) for i in range(addresses)]
    for t in threads:
        t.start()
    return threads


def test_a_flood_of_wrong_pins_over_http_leaves_s2_signing_in_at_the_table(web):  # noqa: F811
    stop, counts = threading.Event(), {"lock": threading.Lock()}
    threads = _flood(web, stop, counts)
    try:
        # While 50 addresses send wrong PINs for S-2, S-2 signs in at the table's screen (127.0.0.1).
        while sum(v for k, v in counts.items() if k != "lock") < 100:
            time.sleep(0.01)
        status, body, _ = call(web, "POST", "/api/v1/session", {"person": "S-2", "pin": PINS["S-2"]})
        assert status == 200, body  # was 429
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert counts.get(429, 0) > 0  # the flood was throttled, not let through
    status, _, _ = call(web, "GET", "/api/v1/status")
    assert status in (200, 401)  # the screens answer


@pytest.mark.alone
def test_s2_is_signed_in_at_the_table_within_2_s_during_a_flood(web):  # noqa: F811
    stop, counts = threading.Event(), {"lock": threading.Lock()}
    threads = _flood(web, stop, counts, each=200)
    try:
        while sum(v for k, v in counts.items() if k != "lock") < 200:
            time.sleep(0.01)
        t0 = time.monotonic()
        status, body, _ = call(web, "POST", "/api/v1/session", {"person": "S-2", "pin": PINS["S-2"]})
        assert status == 200 and time.monotonic() - t0 < 2.0, (status, time.monotonic() - t0)
    finally:
        stop.set()
        for t in threads:
            t.join(60)


def test_a_sign_in_flood_leaves_the_table_dealing_and_the_screens_answering(tmp_path):
    """Sign-ins as fast as 40 clients from 40 addresses can send them (bounded: 40 x 50)
    while a simulated table deals: every round is dealt and settled, the screens answer,
    and S-17 signs in at the table's own screen in the middle of it."""
    import subprocess

    from console_helpers import PEOPLE, make_people, wait_until, web_url_in_log
    from test_crash import tablectl

    os.chmod(tmp_path, 0o700)
    people = make_people(tmp_path / "people.toml")
    # --web on port 0: the table picks a free port itself and logs it (web_listening); a port found
    # free beforehand and then probed could meanwhile be another process's on a loaded machine
    proc = subprocess.Popen(tablectl() + ["run", "--simulate", "--rounds", "30", "--seed", "5", "--json",
                                          "--journal", str(tmp_path / "j.sqlite3"), "--web", "127.0.0.1:0",
                                          "--people-file", str(people), "--log-file", str(tmp_path / "run.log")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    class Door:
        address = ("127.0.0.1", 0)

    stop, counts = threading.Event(), {"lock": threading.Lock()}
    try:
        url = wait_until(lambda: web_url_in_log(proc, tmp_path / "run.log"), 60, "the table's web front door")
        port = int(url.rsplit(":", 1)[1])
        Door.address = ("127.0.0.1", port)
        threads = _flood(Door, stop, counts, addresses=40, each=50, person="S-17")
        wait_until(lambda: sum(v for k, v in counts.items() if k != "lock") >= 200, 120, "the flood to start")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/api/v1/session", json.dumps({"person": "S-17", "pin": PEOPLE["S-17"][1]}),
                     {"content-type": "application/json"})
        assert conn.getresponse().status == 200  # at the table's own screen, during the flood
        conn.close()
        for t in threads:
            t.join(120)
        out, err = proc.communicate(timeout=300)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert len(json.loads(out)["rounds"]) == 30  # the table dealt on
    assert counts.get(429, 0) > 0 and counts.get(200, 0) == 0


@pytest.mark.alone  # 30 s of flood, and wall-time bounds on the screens' answers
def test_1000_sign_ins_a_second_for_30_s_leave_the_table_dealing_and_the_screens_answering(tmp_path):
    """Issue 24, point 8: a wrong PIN for S-17, 1,000 sign-ins a second for 30 s from 50
    addresses (open loop, ``tests/signin_flood.py`` in its own process), while the table
    deals (``tablectl run --simulate``). Every second the table's own screen asks for the
    status (answered within 2 s), the table deals in every 5 s of it, S-17 signs in at
    the table's screen in the middle of it, and no guess of the flood gets in."""
    import subprocess
    import sys
    from pathlib import Path

    from console_helpers import PEOPLE
    from idle_helpers import DealingTable

    table = DealingTable(tmp_path)
    flood = None
    try:
        flood = subprocess.Popen([sys.executable, str(Path(__file__).with_name("signin_flood.py")), str(table.port),
                                  "--rate", "1000", "--seconds", "30", "--addresses", "50", "--person", "S-17"],
                                 stdout=subprocess.PIPE, text=True)
        seen = []  # (seconds since the flood began, status answer s, rounds played)
        signed_in = None
        t0 = time.monotonic()
        while flood.poll() is None:
            _, took = table.ask("web")  # a signed-in supervisor's status, at the table's screen
            seen.append((time.monotonic() - t0, took, table.rounds_played()))
            if signed_in is None and seen[-1][0] > 15:
                status, body = table._http("POST", "/api/v1/session",
                                           {"person": "S-17", "pin": PEOPLE["S-17"][1]})
                signed_in = status
            time.sleep(max(0.0, 1.0 - took))
        figures = json.loads(flood.stdout.read())
    finally:
        if flood is not None:
            if flood.poll() is None:
                flood.kill()
                flood.wait(10)
            flood.stdout.close()
        table.close()
    print("sign-in flood:", figures, "status answers (s): max", max(t for _, t, _ in seen))
    assert figures["sent"] >= 29_000 and figures["sending_s"] < 31, figures  # the flood was as stated
    assert figures["answers"].get("200", 0) == 0 and figures["answered"] > 0, figures
    assert signed_in == 200  # at the table's own screen, mid-flood
    assert len(seen) >= 20 and max(t for _, t, _ in seen) < 2.0, seen
    for start in range(0, 25, 5):  # the table dealt in every 5 s of the flood
        window = [r for at, _, r in seen if start <= at <= start + 6]
        assert window and window[-1] > window[0], (start, seen)
