"""Load on the control socket: 2,000 idle clients, 5,000 malformed lines, a 100 MB line and
descriptor exhaustion; after each, how long a status request takes (ms), and what the listener
counted. ``python bench/front_doors.py [--json]``. Everything stays on this machine (a Unix socket)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from table.console import Console  # noqa: E402
from table.interfaces.control_socket import ControlSocket, send  # noqa: E402


def status_ms(path: Path) -> float:
    t0 = time.perf_counter()
    assert send(path, {"action": "status"}, timeout_s=10)["ok"]
    return round((time.perf_counter() - t0) * 1000, 2)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = p.parse_args()
    console = Console()
    console.status = lambda: {"rounds_played": 0}
    folder = Path(tempfile.mkdtemp())
    ctl = ControlSocket(folder / "c.sock", console)
    out: dict[str, object] = {}
    idle = []
    t0 = time.perf_counter()
    for _ in range(2000):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(ctl.path))
        idle.append(s)
    out["idle_2000_connect_s"] = round(time.perf_counter() - t0, 3)
    out["status_after_idle_ms"] = status_ms(ctl.path)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(ctl.path))
        f = s.makefile("rwb")
        t0 = time.perf_counter()
        f.write(b"{bad\n" * 5000)
        f.flush()
        for _ in range(5000):
            f.readline()
        out["malformed_5000_answered_s"] = round(time.perf_counter() - t0, 3)
        f.close()
    out["status_after_malformed_ms"] = status_ms(ctl.path)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(ctl.path))
        sent, chunk = 0, b"Z" * 65536
        try:
            while sent < 100 << 20:
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        out["line_100mb_bytes_sent_before_close"] = sent
    out["status_after_100mb_ms"] = status_ms(ctl.path)
    for s in idle:
        s.close()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    waiting = socket.socket(socket.AF_UNIX)
    filler = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        while True:
            try:
                filler.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        waiting.settimeout(5)
        waiting.connect(str(ctl.path))
        out["answer_while_exhausted"] = json.loads(waiting.makefile("rb").readline()).get("code")
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        waiting.close()
    out["status_after_exhaustion_ms"] = status_ms(ctl.path)
    out["listener_counts"] = dict(ctl.guard.counts)
    ctl.close()
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:38} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
