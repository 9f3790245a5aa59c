"""A table whose shoe is this package's emulator: ``tablectl run`` with the SPEC shuffler's
emulator, the config naming this driver, a journal (every card acknowledged only once it is
in the journal), and a bench dealer on the emulators' control sockets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


def _start(argv, lines=2):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True)
    got = [proc.stdout.readline().strip() for _ in range(lines)]
    if not got[0]:
        proc.kill()
        proc.wait()
        pytest.fail(f"{argv[0]} did not start")
    return proc, got


@pytest.fixture
def bench():
    """The SPEC shuffler's emulator and the ASCII shoe's, each a process of its own."""
    shf, (shf_url, shf_ctl) = _start([sys.executable, "-m", "table.cli", "emulate", "shuffler",
                                      "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0"])
    shoe, (shoe_url, shoe_ctl) = _start([sys.executable, "-m", "threecard_ascii_shoe.emulator",
                                         "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0",
                                         "--serial", "ASH-BENCH-7"])
    try:
        yield {"shuffler": shf_url, "shuffler_control": shf_ctl.split()[-1],
               "shoe": shoe_url, "shoe_control": shoe_ctl.split()[-1]}
    finally:
        for p in (shf, shoe):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
            p.stdout.close()


def test_tablectl_run_deals_rounds_through_the_ascii_shoe(bench, tmp_path: Path):
    config = tmp_path / "table.toml"
    config.write_text(f"""
[table]
id = "bench-ascii"
seats = 3
[[decks]]
id = "A"
back_colour = "red"
[[decks]]
id = "B"
back_colour = "blue"
[devices.shuffler]
url = "{bench['shuffler']}"
[devices.shoe]
driver = "ascii-shoe"
url = "{bench['shoe']}"
serial_number = "ASH-BENCH-7"
baudrate = 9600
""")
    journal = tmp_path / "journal.sqlite3"
    out = subprocess.run([sys.executable, "-m", "table.cli", "run", "--config", str(config), "--rounds", "3",
                          "--journal", str(journal), "--json", "--shuffler-control", bench["shuffler_control"],
                          "--shoe-control", bench["shoe_control"]],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert len(result["rounds"]) == 3 and result["custody_violations"] == 0, result
    assert result["cards_read"] == 3 * 3 * 4  # three seats and the dealer, three cards each, per round
    # the journal says which shoe read them (the ASCII shoe's serial, as its link identified it) and holds
    # every card: each was acknowledged to the shoe only once it was there
    exported = subprocess.run([sys.executable, "-m", "table.cli", "audit", "export", str(journal)],
                              capture_output=True, text=True, timeout=120, check=True)  # bodies stored compressed
    entries = [json.loads(line) for line in exported.stdout.splitlines()]
    devices = [e["body"] for e in entries if e["kind"] == "device"]
    cards = sum(1 for e in entries if e["kind"] == "card_read")
    assert {(d["source"], d["serial"]) for d in devices} == {("shuffler", "SHF-SIM-0001"), ("shoe", "ASH-BENCH-7")}
    # and which driver it was, with the capabilities its shoe lacks (none: it numbers its draws)
    assert {(d["source"], d.get("driver"), tuple(d.get("missing", ()))) for d in devices} == {
        ("shuffler", None, ()), ("shoe", "ascii-shoe", ())}
    assert cards == 36
    audit = subprocess.run([sys.executable, "-m", "table.cli", "audit", "verify", str(journal)],
                           capture_output=True, text=True, timeout=120)
    assert "hash chain intact" in audit.stdout + audit.stderr, audit.stdout + audit.stderr


def test_a_driver_that_is_not_installed_is_a_startup_error_naming_it(tmp_path: Path):
    config = tmp_path / "table.toml"
    config.write_text("""
[table]
id = "t"
seats = 1
[[decks]]
id = "A"
back_colour = "red"
[[decks]]
id = "B"
back_colour = "blue"
[devices.shuffler]
url = "socket://127.0.0.1:9"
[devices.shoe]
driver = "acme-shoe"
url = "socket://127.0.0.1:10"
""")
    out = subprocess.run([sys.executable, "-m", "table.cli", "run", "--config", str(config), "--rounds", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "devices.shoe.driver" in out.stderr and "no device driver 'acme-shoe' is installed" in out.stderr
    assert "ascii-shoe" in out.stderr  # the installed drivers are listed
