"""Helpers for the front-door tests: a console that records what reaches it, a small journal
with seat cards, and clients that connect as another Unix account (SO_PEERCRED is real)."""

from __future__ import annotations

import grp
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from table.console import Command, Console
from table.journal import Journal
from table.keys import generate

#: an account with no other privilege, for clients that must not be root
NOBODY = 65534


def group_id(name: str) -> int:
    return grp.getgrnam(name).gr_gid


class RecordingConsole(Console):
    """A Console whose commands are answered at once by a stand-in for the core, which
    records each (action, args, actor, request id). It answers like the core does
    when the table waits for nothing: ``not expected now``; ``status`` as usual."""

    def __init__(self) -> None:
        super().__init__()
        self.attached = True
        self.status = lambda: {"rounds_played": 7, "round": None}
        self.seen: list[Command] = []
        self.lock = threading.Lock()

    def submit(self, cmd: Command) -> None:
        if cmd.action == "status":
            super().submit(cmd)
            return
        with self.lock:
            self.seen.append(cmd)
        cmd.answer(ok=False, error=f"{cmd.action} is not expected now; the table waits for nothing (test)")


#: the table key of :func:`seat_journal` (an EventLog given it serves a seat its own cards)
SEAT_KEY = generate()


def seat_journal(path: Path) -> Path:
    """A journal of one round: opened, bets closed, two cards to each of seats 1 and 2 and
    one to the dealer, then nothing more (decisions not final: the cards are sealed)."""
    with Journal(path, key=SEAT_KEY) as j:
        j.append("table_open", places={"A": "in_shoe", "B": "verified"})
        rid = "r00001-00000000"
        j.append("round", round_id=rid, step="open", number=1, wagers={"1": {"ante": 1000}, "2": {"ante": 1000}})
        j.append("round", round_id=rid, step="close_bets", number=1)
        for i, (to, card) in enumerate([(1, "As"), (2, "Kd"), (0, "Qc"), (1, "Ah"), (2, "Kh")]):
            # Sealed until the reveal, as the controller writes it; SEAT_KEY opens it for a seat's channel.
            j.append("card_read", round_id=rid, back_colour="red", draw_index=i, to=to,
                     sealed={"card": card, "nonce": "00" * 16})
    return path


def run_as(uid: int, groups: list[int], code: str, timeout_s: float = 30.0) -> Any:
    """Run Python ``code`` in a child process as ``uid`` with supplementary ``groups`` (the
    first is also its primary group); return the JSON its last stdout line holds."""
    prelude = (f"import os, json, socket, sys\nos.setgroups({groups!r})\nos.setgid({groups[0]})\n"
               f"os.setuid({uid})\n")
    proc = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if proc.returncode != 0:
        raise AssertionError(f"child failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def control_requests(path: Path, requests: list[dict]) -> str:
    """Child code: send each request on one connection to the control socket at ``path``
    and print the replies as a JSON list."""
    return (f"s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); f = s.makefile('rwb')\n"
            f"out = []\n"
            f"for r in {requests!r}:\n"
            f"    try:\n"
            f"        f.write((json.dumps(r) + '\\n').encode()); f.flush()\n"
            f"    except BrokenPipeError:\n"
            f"        pass\n"
            f"    line = f.readline()\n"
            f"    out.append(json.loads(line) if line else None)\n"
            f"    if not line: break\n"
            f"print(json.dumps(out))\n")


def event_request(path: Path, request: dict, lines: int) -> str:
    """Child code: send ``request`` to the event socket at ``path``, print the first ``lines``
    lines it answers (fewer if it closes) as a JSON list."""
    return (f"s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect({str(path)!r}); f = s.makefile('rwb')\n"
            f"try:\n"
            f"    f.write((json.dumps({request!r}) + '\\n').encode()); f.flush()\n"
            f"except BrokenPipeError:\n"
            f"    pass\n"
            f"out = []\n"
            f"for _ in range({lines}):\n"
            f"    line = f.readline()\n"
            f"    if not line: break\n"
            f"    out.append(json.loads(line))\n"
            f"print(json.dumps(out))\n")


def lines_of(sock: socket.socket, n: int) -> list[dict]:
    f = sock.makefile("rb")
    return [json.loads(f.readline()) for _ in range(n)]
