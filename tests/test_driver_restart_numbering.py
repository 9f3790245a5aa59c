"""A shoe without a draw index across a host restart (issue 29, docs/drivers.md "Capabilities"):
the table numbers the shoe's reads itself, from its journal, not from what the driver guesses.

The example package's shoe of the basic model (``--no-draw-index``, ``draw_index = false``),
the SPEC shuffler's emulator, a bench dealer on their control sockets. The host is SIGKILLed
mid-deal, the dealer draws two more cards while it is away (the shoe keeps their events),
the host restarts, the round is held and a supervisor voids it on the control socket: the
cards read after the restart are journaled numbered on from the journal's last read. The
driver alone would number them from the shoe's count at connect (52 less the cards left:
two too far), a jump in the journal's draw numbers the table would have taken as told."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console_helpers import PEOPLE, make_people
from table.interfaces.control_socket import send
from tests.tables import table_toml
from tests.journal_rows import reader

pytest.importorskip("threecard_ascii_shoe", reason="the example driver package is installed by CI (docs/drivers.md)")


def _start(argv: list[str]) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True)
    url, control = proc.stdout.readline().strip(), proc.stdout.readline().strip().split()[-1]
    assert url and control, argv
    return proc, url, control


def _control(address: str, line: str) -> str:
    import socket
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(line.encode() + b"\n")
        return s.makefile().readline().strip()


def _reads(journal: Path) -> list[dict]:
    try:
        with contextlib.closing(reader(journal)) as db:
            return [json.loads(b) for (b,) in db.execute("select body from entries where kind = 'card_read' "
                                                         "order by seq")]
    except sqlite3.OperationalError:
        return []  # not made yet


def _wait(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def bench():
    shf, shf_url, shf_ctl = _start([sys.executable, "-m", "table.cli", "emulate", "shuffler", "--tcp", "127.0.0.1:0",
                                    "--control", "127.0.0.1:0", "--no-stdin"])
    shoe, shoe_url, shoe_ctl = _start([sys.executable, "-m", "threecard_ascii_shoe.emulator", "--tcp", "127.0.0.1:0",
                                       "--control", "127.0.0.1:0", "--no-draw-index"])
    yield shf_url, shf_ctl, shoe_url, shoe_ctl
    for p in (shf, shoe):
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        p.stdout.close()


def test_after_a_restart_the_table_numbers_the_reads_from_its_journal(bench, tmp_path):
    shf_url, shf_ctl, shoe_url, shoe_ctl = bench
    journal, control = tmp_path / "journal.sqlite3", tmp_path / "control.sock"
    cfg = tmp_path / "table.toml"
    cfg.write_text(table_toml("restart-basic", 3, shf_url, shoe_url,
                              f'[console]\ncontrol_socket = "{control}"\ntwo_person_void = false')
                   .replace(f'url = "{shoe_url}"', f'driver = "ascii-shoe"\nurl = "{shoe_url}"\ndraw_index = false'))
    run = [sys.executable, "-m", "table.cli", "run", "--config", str(cfg), "--journal", str(journal),
           "--shuffler-control", shf_ctl, "--shoe-control", shoe_ctl, "--control-socket", str(control),
           "--people-file", str(make_people(tmp_path / "people.toml"))]

    first = subprocess.Popen(run + ["--rounds", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: len(_reads(journal)) >= 4, 120, "four cards journaled")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    before = _reads(journal)
    assert [r["draw_index"] for r in before] == list(range(len(before)))
    assert _control(shoe_ctl, "draw 2").startswith("ok drew")  # drawn while the host is away
    status = _control(shoe_ctl, "status")  # "ok loaded colour=red cards=N draws=D boot=..."
    drawn = int(status.split("draws=")[1].split()[0])
    assert drawn >= len(before) + 2, status
    if control.exists():
        control.unlink()  # the killed host's socket file

    second = subprocess.Popen(run + ["--rounds", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    held = threading.Event()

    def follow() -> None:
        for line in second.stderr:
            if '"round_held"' in line or "waiting for a supervisor" in line:
                held.set()
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        assert held.wait(120), "the restarted host did not hold the round"
        # a restart logs the held round while it recovers, before it takes a void: asked again until taken
        _wait(lambda: (r := _void(control)) is not None and r.get("ok"), 60, "the void to be taken")
        assert second.wait(timeout=180) == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
        reader.join(timeout=10)
        second.stderr.close()
    after = _reads(journal)
    round_one = [r for r in after if r["back_colour"] == before[0]["back_colour"]][:drawn]
    # every read of the interrupted round, before and after the restart, numbered on with no jump
    assert [r["draw_index"] for r in round_one] == list(range(drawn)), round_one
    # the ones after the restart journaled as such: read for the held round, dealt to nobody
    assert all(r["to"] is None and (r.get("late") or r.get("voided")) for r in round_one[len(before):]), round_one


def _void(control: Path) -> dict | None:
    try:
        return send(control, {"action": "void", "reason": "restart test", "supervisor": "S-17",
                              "pin": PEOPLE["S-17"][1]}, timeout_s=10)
    except (OSError, ValueError, ConnectionError):
        return None
