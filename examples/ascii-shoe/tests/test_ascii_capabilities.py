"""The table's fallback for each capability this shoe can lack (the table's docs/drivers.md,
"Capabilities"), through the product: ``tablectl run`` with the SPEC shuffler's emulator and
this package's emulator of the model lacking it, the config declaring it (``draw_index = false``,
``resend = false``), and the fault made by the emulator's control socket before the deal (the
dealer's hands: a card that leaves the shoe past the reader; noise as a card is reported).
What the journal holds says what the table did."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from test_ascii_table_run import _start

EXIT_CUSTODY = 3  # tablectl run: a custody violation held a round and no supervisor could be asked


@pytest.fixture
def bench():
    """``bench(*emulator_flags)`` -> the SPEC shuffler's emulator and an ASCII shoe's of that model."""
    procs = []

    def _bench(*flags: str) -> dict[str, str]:
        shf, (shf_url, shf_ctl) = _start([sys.executable, "-m", "table.cli", "emulate", "shuffler",
                                          "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0"])
        procs.append(shf)
        shoe, (shoe_url, shoe_ctl) = _start([sys.executable, "-m", "threecard_ascii_shoe.emulator",
                                             "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0",
                                             "--serial", "ASH-CAP-1", *flags])
        procs.append(shoe)
        return {"shuffler": shf_url, "shuffler_control": shf_ctl.split()[-1],
                "shoe": shoe_url, "shoe_control": shoe_ctl.split()[-1]}

    yield _bench
    for p in procs:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        p.stdout.close()


def _control(address: str, line: str) -> str:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(line.encode() + b"\n")
        return s.makefile().readline().strip()


def _run(bench: dict[str, str], tmp_path: Path, options: str, rounds: int = 1) -> tuple[subprocess.CompletedProcess,
                                                                                       list[tuple[str, dict]]]:
    config = tmp_path / "table.toml"
    config.write_text(f"""
[table]
id = "bench-caps"
seats = 2
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
{options}
""")
    journal = tmp_path / "journal.sqlite3"
    out = subprocess.run([sys.executable, "-m", "table.cli", "run", "--config", str(config), "--rounds", str(rounds),
                          "--journal", str(journal), "--json", "--shuffler-control", bench["shuffler_control"],
                          "--shoe-control", bench["shoe_control"]],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    return out, _journal_entries(journal)


def _journal_entries(journal):
    """Every entry of ``journal`` as ``(kind, body)``, read with ``tablectl audit export`` (the
    journal's readable form: its bodies are stored compressed, docs/journal.md)."""
    out = subprocess.run([sys.executable, "-m", "table.cli", "audit", "export", str(journal)],
                         capture_output=True, text=True, timeout=120, check=True)
    return [(e["kind"], e["body"]) for e in map(json.loads, out.stdout.splitlines())]


def _kinds(entries, kind, key):
    return [b[key] for k, b in entries if k == kind]


def test_without_a_draw_index_the_table_numbers_the_reads_and_deals_as_usual(bench, tmp_path):
    b = bench("--no-draw-index")
    out, entries = _run(b, tmp_path, "draw_index = false", rounds=2)
    assert out.returncode == 0, out.stderr[-3000:]
    shoe = [body for k, body in entries if k == "device" and body["source"] == "shoe"]
    assert shoe and all(d["missing"] == ["draw_index"] and d["driver"] == "ascii-shoe" for d in shoe)
    reads = _kinds(entries, "card_read", "draw_index")
    assert reads == list(range(9)) * 2  # two seats and the dealer, three cards each; numbered from 0 per load


@pytest.mark.parametrize("model", ["numbered", "basic"])
def test_a_card_that_leaves_the_shoe_unread_holds_the_round(bench, tmp_path, model):
    """With its draw index, the next card's gap holds the round at once; without, the table's
    own numbering cannot see it and the shoe's count at the end of the deal does."""
    b = bench(*(("--no-draw-index",) if model == "basic" else ()))
    out, entries = _run_with_slip(b, tmp_path, "" if model == "numbered" else "draw_index = false")
    assert out.returncode == EXIT_CUSTODY, out.stderr[-3000:]
    rules = _kinds(entries, "violation", "rule")
    incidents = _kinds(entries, "incident", "what")
    assert rules == ["card_unaccounted"], (rules, incidents)
    reads = _kinds(entries, "card_read", "draw_index")
    if model == "numbered":
        assert reads == [0, 1, 3]  # the gap: card 3 dealt to nobody, the round held there
        assert [b.get("gap") for k, b in entries if k == "card_read"] == [None, None, True]
    else:
        assert "shoe count ahead of the reads" in incidents
        assert reads == list(range(9))  # nine reads numbered on, ten cards out: held before any decision
    assert not [b for k, b in entries if k == "round" and b.get("step") == "decisions_done"]


def _run_with_slip(b, tmp_path, options):
    """The round's third draw: a card leaves past the reader and the dealer, who saw it come out,
    draws the next one (a shoe-control proxy that counts the draws it forwards arms it)."""
    proxy = _SlipAtDraw(b["shoe_control"], 3)
    with proxy:
        return _run({**b, "shoe_control": proxy.address}, tmp_path, options)


class _SlipAtDraw:
    """A control-socket proxy (the bench dealer's hands on the shoe): forwards each line, and
    at the ``n``-th ``draw`` sends ``slip 1`` and draws two: the first leaves the shoe with no
    event, the second is read (a dealer drawing on)."""

    def __init__(self, upstream: str, n: int) -> None:
        import threading
        self.upstream, self.n, self.draws = upstream, n, 0
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self._srv.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._srv.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not, on Linux)
        self._srv.close()
        self._thread.join(timeout=5)

    def _serve(self):
        while True:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            with conn, conn.makefile("rw") as f:
                for line in f:
                    if line.startswith("draw"):
                        self.draws += 1
                        if self.draws == self.n:
                            _control(self.upstream, "slip 1")
                            line = "draw 2"
                    f.write(_control(self.upstream, line.strip()) + "\n")
                    f.flush()


def test_without_resend_a_card_event_lost_on_the_line_holds_the_round_at_once(bench, tmp_path):
    b = bench("--no-resend")
    assert _control(b["shoe_control"], "garble-card 1").startswith("ok")  # the first card's line is noise
    out, entries = _run(b, tmp_path, "resend = false")
    assert out.returncode == EXIT_CUSTODY, out.stderr[-3000:]
    shoe = [body for k, body in entries if k == "device" and body["source"] == "shoe"]
    assert shoe and all(d["missing"] == ["resend"] for d in shoe)
    assert _kinds(entries, "violation", "rule") == ["card_unaccounted"]
    assert "card event lost: the shoe cannot resend" in _kinds(entries, "incident", "what")
    assert _kinds(entries, "card_read", "draw_index") == []


def test_with_resend_the_same_noise_costs_nothing(bench, tmp_path):
    b = bench()
    assert _control(b["shoe_control"], "garble-card 1").startswith("ok")
    out, entries = _run(b, tmp_path, "")
    assert out.returncode == 0, out.stderr[-3000:]
    assert _kinds(entries, "violation", "rule") == []
    assert _kinds(entries, "card_read", "draw_index") == list(range(9))
