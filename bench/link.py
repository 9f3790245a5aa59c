"""Link benchmarks: round trips, decode rate, a fault soak, idle CPU.

    python bench/link.py [--json] [--exchanges N] [--soak N] [--idle-s S] [--baseline DIR]

``--baseline DIR``: also time the link of another checkout (DIR holds its
``firmware_bridge/``, e.g. ``git worktree add /tmp/old <commit>``) in the same
alternating turns, and print its ratio to raw echo beside this one's.

Prints one JSON object with ``--json``; a table otherwise. Timing goals are
checked here, not in unit tests:

| figure | target |
| --- | --- |
| rtt_ratio (link round trip ÷ raw pyserial echo, same pty) | ≤ 1.5, and ≤ baseline_rtt_ratio |
| event_after_request_p50_ms (an event emitted just after a reply, to its delivery) | no linger: well under 2 ms |
| decode_frames_per_s (16-byte payloads) | ≥ 100,000 |
| soak lost / duplicated / out_of_order | 0 |
| idle_cpu_pct (connected, no traffic) | < 1 |

Both far ends of the round trips (the shoe emulator for the link, a bare echo
loop for the raw figure) run in a process of their own, as a device would.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import multiprocessing
import queue
import resource
import select
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import serial  # noqa: E402
import structlog  # noqa: E402

from devices import CardShoe, Shuffler  # noqa: E402
from firmware_bridge.faults import FaultPlan, FaultyTransport  # noqa: E402
from firmware_bridge.link import Link, LinkConfig  # noqa: E402
from firmware_bridge.transport import SerialTransport  # noqa: E402
from protocols.frame import FrameParser, encode_frame  # noqa: E402
from protocols.cards import BackColour, Card  # noqa: E402
from protocols.messages import CardDrawn, DeviceKind, Echo, EchoReply, decode_message  # noqa: E402
from simulators.devices import ShoeEmulator  # noqa: E402
from simulators.pty_port import PtyPort  # noqa: E402
from simulators.table import SimulatedTable  # noqa: E402

PAYLOAD = bytes(range(16))


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _peer(conn, kind: str) -> None:
    """The far end in its own process (as a real device is): the shoe emulator, or a
    bare echo loop blocking in select. Sends back the pty path, runs until told."""
    port = PtyPort()
    if kind == "emulator":
        _running = ShoeEmulator(port).start()  # noqa: F841 - serves until the process ends
    else:
        def echo() -> None:
            while True:
                if select.select([port.fd], [], [], 0.5)[0]:
                    data = port.read(4096)
                    if data:
                        port.write(data)

        threading.Thread(target=echo, daemon=True).start()
    conn.send(port.path)
    conn.recv()


class Peer:
    """Context manager running :func:`_peer` in a forked process."""

    def __init__(self, kind: str) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_peer, args=(child, kind), daemon=True)

    def __enter__(self) -> str:
        self._proc.start()
        return self._conn.recv()

    def __exit__(self, *exc) -> None:
        self._conn.send("stop")
        self._proc.join(5)


def load_baseline(root: str):
    """The ``firmware_bridge`` package of another checkout at ``root``, imported
    as ``fb_baseline`` (its own link and transport; this tree's protocols).
    Returns ``(link module, transport module)``."""
    pkg = Path(root) / "firmware_bridge"
    spec = importlib.util.spec_from_file_location("fb_baseline", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    if spec is None or not (pkg / "link.py").exists():
        raise SystemExit(f"--baseline {root}: no firmware_bridge/link.py there")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fb_baseline"] = mod
    spec.loader.exec_module(mod)
    return importlib.import_module("fb_baseline.link"), importlib.import_module("fb_baseline.transport")


def rtt_pair(n: int, batches: int = 10, baseline: str | None = None) -> tuple[list[float], list[float], list[float]]:
    """Round trips (ms) of the full link to the shoe emulator, of a raw pyserial
    echo of the same 22-byte frame and (with ``baseline``, a checkout's root) of
    that checkout's link to a second shoe emulator: all over ptys, every far end
    in a process of its own. They are measured in alternating turns so that
    whatever else the machine does weighs on all alike (one exchange of each in turn).
    Returns ``(link, raw, baseline link)``; the last is empty without ``baseline``."""
    frame = encode_frame(1, Echo.TYPE, PAYLOAD)
    with contextlib.ExitStack() as stack:
        emu_path = stack.enter_context(Peer("emulator"))
        echo_path = stack.enter_context(Peer("echo"))
        links = [Link(SerialTransport(emu_path), name="bench")]
        if baseline:
            old_link, old_transport = load_baseline(baseline)
            base_path = stack.enter_context(Peer("emulator"))
            links.append(old_link.Link(old_transport.SerialTransport(base_path), name="baseline"))
        ser = serial.serial_for_url(echo_path, timeout=1, exclusive=True)
        stack.callback(ser.close)
        for link in links:
            stack.callback(link.close)
            link.open()
            link.handshake(DeviceKind.SHOE)
        raw: list[float] = []
        timed: list[list[float]] = [[] for _ in links]
        warm = n // batches  # the first exchanges warm up
        for i in range(n + warm):
            # One exchange of each in turn (the order rotating), so that a burst of load
            # from elsewhere on the machine lands on all of them alike.
            order = [None, *links]
            order = order[i % len(order):] + order[:i % len(order)]
            for who in order:
                t0 = time.perf_counter()
                if who is None:
                    ser.write(frame)
                    got = ser.read(len(frame))
                    dt = (time.perf_counter() - t0) * 1000
                    assert got == frame
                else:
                    who.request(Echo(PAYLOAD), EchoReply)
                    dt = (time.perf_counter() - t0) * 1000
                if i >= warm:
                    (raw if who is None else timed[links.index(who)]).append(dt)
        return timed[0], raw, (timed[1] if baseline else [])


def event_after_request(n: int) -> list[float]:
    """ms from the shoe emitting a card event right after it answered a request
    to the host's link delivering it (the emulator in this process, on a pty).
    This is what a reader that stays off the line after each request (the old
    ``burst_linger_ms``) adds to an event."""
    port = PtyPort()
    emu = ShoeEmulator(port).start()
    events: queue.Queue = queue.Queue()
    link = Link(SerialTransport(port.path), name="bench-events", events=events)
    out: list[float] = []
    try:
        link.open()
        link.handshake(DeviceKind.SHOE)
        for i in range(n + 20):
            link.request(Echo(PAYLOAD), EchoReply)
            t0 = time.perf_counter()
            emu.emit(CardDrawn(i % 52, Card.from_index(i % 52), BackColour.RED))
            ev = events.get(timeout=5)
            assert isinstance(ev.message, CardDrawn), ev
            if i >= 20:  # warm-up
                out.append((time.perf_counter() - t0) * 1000)
    finally:
        link.close()
        emu.stop()
    return out


def decode_rate(n: int = 200_000) -> float:
    """Frames per second through FrameParser.feed and decode_message (16-byte payloads)."""
    wire = b"".join(encode_frame(i % 256, Echo.TYPE, PAYLOAD) for i in range(n))
    parser = FrameParser()
    count = 0
    t0 = time.perf_counter()
    for i in range(0, len(wire), 4096):
        for frame in parser.feed(wire[i : i + 4096]):
            decode_message(frame.type, frame.payload)
            count += 1
    dt = time.perf_counter() - t0
    assert count == n
    return n / dt


def soak(exchanges: int) -> dict:
    """Echo exchanges over a pty with 1% of bytes corrupted (both ways) and the
    cable pulled at the device every 1,000 exchanges; counted against the
    emulator's record of what it carried out."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shoe"
        port = PtyPort(path)
        emu = ShoeEmulator(port, retransmit_initial_ms=25, retransmit_max_ms=200, history=exchanges + 64).start()
        plan = FaultPlan(seed=2026, bit_flip=0.01)
        faulty = FaultyTransport(SerialTransport(str(path), read_timeout_s=0.05), plan)
        cfg = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=200, max_attempts=20,
                         reconnect_initial_ms=20, reconnect_max_ms=200, read_timeout_ms=50)
        link = Link(faulty, name="soak", config=cfg)
        lost = 0
        disconnects = 0
        t0 = time.perf_counter()
        try:
            link.open()
            link.handshake(DeviceKind.SHOE)
            for i in range(exchanges):
                if i and i % 1000 == 0:
                    emu.disconnect()
                    disconnects += 1
                data = i.to_bytes(4, "big") + PAYLOAD[:12]
                try:
                    reply = link.request(Echo(data), EchoReply)
                    if reply.data != data:
                        lost += 1
                except Exception:  # noqa: BLE001 - counted, the soak goes on
                    lost += 1
        finally:
            link.close()
            emu.stop()
        done = [int.from_bytes(m.data[:4], "big") for _, m in emu.executed if isinstance(m, Echo)]
        seen: set[int] = set()
        duplicated = sum(1 for x in done if x in seen or seen.add(x))
        out_of_order = sum(1 for a, b in zip(done, done[1:]) if b < a)
        lost += len(set(range(exchanges)) - seen)
        return {
            "exchanges": exchanges,
            "lost": lost,
            "duplicated": duplicated,
            "out_of_order": out_of_order,
            "bytes_corrupted": faulty.injected["bit_flip"],
            "disconnects": disconnects,
            "reconnects": link.stats.reconnects,
            "retransmits": link.stats.retransmits,
            "seconds": round(time.perf_counter() - t0, 1),
        }


def idle_cpu(seconds: float) -> float:
    """CPU use (% of one core) of this process with both devices connected and the
    links idle (heartbeats only). Includes the two emulators, which run in-process."""
    with SimulatedTable(seed=1) as sim:
        events: queue.Queue = queue.Queue()
        with Shuffler.open(sim.shuffler_url, events=events), CardShoe.open(sim.shoe_url, events=events):
            time.sleep(1.0)
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            time.sleep(seconds)
            r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return 100 * cpu / (t1 - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--exchanges", type=int, default=3000, help="round trips timed per side")
    ap.add_argument("--soak", type=int, default=10_000, help="soak exchanges")
    ap.add_argument("--idle-s", type=float, default=10.0, help="idle measurement window (s)")
    ap.add_argument("--baseline", metavar="DIR", help="another checkout whose link is timed alongside")
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))

    lnk, raw, base = rtt_pair(args.exchanges, baseline=args.baseline)
    ev = event_after_request(min(args.exchanges, 1000))
    result = {
        "rtt_p50_ms": round(statistics.median(lnk), 4),
        "rtt_p99_ms": round(pct(lnk, 0.99), 4),
        "raw_echo_p50_ms": round(statistics.median(raw), 4),
        "rtt_ratio": round(statistics.median(lnk) / statistics.median(raw), 3),
        **({"baseline_rtt_p50_ms": round(statistics.median(base), 4),
            "baseline_rtt_ratio": round(statistics.median(base) / statistics.median(raw), 3)} if base else {}),
        "event_after_request_p50_ms": round(statistics.median(ev), 4),
        "event_after_request_p99_ms": round(pct(ev, 0.99), 4),
        "decode_frames_per_s": round(decode_rate()),
        "soak": soak(args.soak),
        "idle_cpu_pct": round(idle_cpu(args.idle_s), 3),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:22} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
