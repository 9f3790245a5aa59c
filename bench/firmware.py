"""Firmware update benchmark: a signed image's transfer rate against the raw line rate.

    python bench/firmware.py [--json] [--size-kib 1024] [--baud 115200] [--raw-kib 64]

Two transports, each with the device emulator in a process of its own (as a
device would be):

* **pty at 115200 baud.** A pty moves bytes at memory speed whatever baud rate
  is set, so the emulator's end is paced as a UART (``LineRatePort``: 10 bits
  a byte, 8N1): 11,520 bytes/s nominal. The raw rate is measured on the same
  paced line: ``--raw-kib`` of bytes streamed one way with no framing, no
  acknowledgement.
* **emulated USB** (full-speed bulk, 64-byte packets, over the pure-Python
  pyusb backend). The raw rate is bytes streamed one way through the same
  bulk OUT endpoint with no framing; the emulated bus has no nominal rate
  (real full-speed bulk peaks at 1,216,000 bytes/s, shown for reference).

The figure is ``ratio`` = update transfer rate ÷ raw rate on the same line:
the share of the line the update protocol (frames, a 4-byte offset per
chunk, stop-and-wait acknowledgement) gets. The transfer is timed from the
first ``UpdateBegin`` to the last chunk's acknowledgement, through the
product's own ``table.firmware.update_firmware``; commit (the device verifies
the whole image) and activation (restart and handshake) are reported apart.

| figure | target |
| --- | --- |
| pty ratio (1 MiB at 115200 baud) | >= 0.85 |
| usb ratio | reported (the emulated bus is CPU-bound on both ends) |
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import select
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog  # noqa: E402
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402

from firmware_bridge.link import LinkConfig  # noqa: E402
from firmware_bridge.transport import SerialTransport  # noqa: E402
from firmware_bridge.usb import UsbTransport  # noqa: E402
from protocols.firmware_image import build_header  # noqa: E402
from protocols.messages import MAX_CHUNK_DATA, DeviceKind  # noqa: E402
from simulators.devices import ShoeEmulator  # noqa: E402
from simulators.ports import LineRatePort  # noqa: E402
from simulators.pty_port import PtyPort  # noqa: E402
from simulators.usb_backend import EmulatedUsbDevice, EmulatorUsbBackend  # noqa: E402
from table.firmware import update_firmware  # noqa: E402
from table.journal import Journal  # noqa: E402
from table.keys import generate  # noqa: E402

USB_FULL_SPEED_BULK_BPS = 19 * 64 * 1000  # 19 packets of 64 bytes a 1 ms frame


def signed_image(key, size: int) -> bytes:
    body = os.urandom(size)
    header = build_header(DeviceKind.SHOE, "SIM-SHOE", (1, 1, 0), 1, body, bytes.fromhex(key.key_id))
    data = header.encode() + body
    return data + key.sign(data)


# -- the far ends, each in a process of its own -------------------------------------------------


def _sink(port, conn, expect: int) -> None:
    """Read ``expect`` bytes from ``port`` (no framing), then write one byte back."""
    got = 0
    while got < expect:
        if select.select([port.fileno()], [], [], 5)[0]:
            got += len(port.read(65536))
    port.write(b"!")
    conn.recv()


def _pty_peer(conn, kind: str, baud: int, raw_key: bytes, expect: int) -> None:
    port = LineRatePort(PtyPort(), baud=baud)
    if kind == "emulator":
        ShoeEmulator(port, vendor_keys=[raw_key], watchdog_ms=5000).start()
        conn.send(port.port.path)
        conn.recv()
    else:
        conn.send(port.port.path)
        _sink(port, conn, expect)


class Peer:
    """A forked process running ``target(child_conn, *args)``; sends back what it listens on."""

    def __init__(self, target, *args) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=target, args=(child, *args), daemon=True)

    def __enter__(self):
        self._proc.start()
        return self._conn.recv()

    def __exit__(self, *exc) -> None:
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()


def _timed_update(url: str, image: bytes, key, usb_backend=None) -> dict:
    """``update_firmware`` with each phase's start time; the transfer is begin to last ack."""
    stamps: dict[str, float] = {}
    first: list[float] = []

    def phase(name: str) -> None:
        stamps[name] = time.perf_counter()

    def progress(held: int, total: int) -> None:
        if not first:
            first.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(Path(tmp) / "journal.sqlite3")
        try:
            t0 = time.perf_counter()
            out = update_firmware(url, image, accepted_keys={key.key_id: key.public}, journal=journal,
                                  supervisor="bench", link_config=LinkConfig(), usb_backend=usb_backend,
                                  progress=progress, on_phase=phase, activation_timeout_s=60)
            end = time.perf_counter()
        finally:
            journal.close()
    assert out.updated, out
    transfer_s = stamps["commit"] - stamps["transfer"]
    return {"bytes": len(image), "transfer_s": round(transfer_s, 3),
            "transfer_Bps": round(len(image) / transfer_s), "commit_s": round(stamps["activate"] - stamps["commit"], 3),
            "activate_and_verify_s": round(end - stamps["activate"], 3), "total_s": round(end - t0, 3)}


def bench_pty(size: int, baud: int, raw_size: int) -> dict:
    key = generate()
    raw_key = key.public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    image = signed_image(key, size)
    with Peer(_pty_peer, "sink", baud, raw_key, raw_size) as path:
        t = SerialTransport(path)
        t.open()
        try:
            data = os.urandom(raw_size)
            t0 = time.perf_counter()
            t.write(data)
            while not t.read(1, 30.0):
                pass
            raw_s = time.perf_counter() - t0
        finally:
            t.close()
    with Peer(_pty_peer, "emulator", baud, raw_key, 0) as path:
        update = _timed_update(path, image, key)
    raw_bps = raw_size / raw_s
    return {"baud": baud, "line_rate_nominal_Bps": baud // 10, "raw_Bps": round(raw_bps), "raw_bytes": raw_size,
            **update, "ratio": round(update["transfer_Bps"] / raw_bps, 3),
            "ratio_nominal": round(update["transfer_Bps"] / (baud / 10), 3)}


def _usb_peer(conn, dev: EmulatedUsbDevice, kind: str, raw_key: bytes, expect: int) -> None:
    if kind == "emulator":
        ShoeEmulator(dev.port, vendor_keys=[raw_key], watchdog_ms=5000).start()
        conn.send("up")
        conn.recv()
    else:
        conn.send("up")
        _sink(dev.port, conn, expect)


def bench_usb(size: int) -> dict:
    key = generate()
    raw_key = key.public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    image = signed_image(key, size)
    url = "usb://1209:0002/SHOE-SIM-0001"
    # Raw: the same bulk OUT endpoint, bytes and no framing, to a sink in its own process.
    dev = EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-SIM-0001")
    backend = EmulatorUsbBackend([dev])
    try:
        with Peer(_usb_peer, dev, "sink", raw_key, size):
            t = UsbTransport(url, backend=backend)
            t.open()
            try:
                data = os.urandom(size)
                t0 = time.perf_counter()
                for i in range(0, size, 4096):
                    t.write(data[i:i + 4096])
                while not t.read(64):
                    pass
                raw_s = time.perf_counter() - t0
            finally:
                t.close()
    finally:
        backend.close()
    dev = EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-SIM-0001")
    backend = EmulatorUsbBackend([dev])
    try:
        with Peer(_usb_peer, dev, "emulator", raw_key, 0):
            update = _timed_update(url, image, key, backend)
    finally:
        backend.close()
    raw_bps = size / raw_s
    return {"raw_Bps": round(raw_bps), "raw_bytes": size, "full_speed_bulk_nominal_Bps": USB_FULL_SPEED_BULK_BPS,
            **update, "ratio": round(update["transfer_Bps"] / raw_bps, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    ap.add_argument("--size-kib", type=int, default=1024, help="Image body size (KiB); default 1024 (1 MiB).")
    ap.add_argument("--baud", type=int, default=115200, help="The paced pty's line rate (bit/s).")
    ap.add_argument("--raw-kib", type=int, default=64, help="Bytes streamed to measure the pty's raw rate (KiB).")
    ap.add_argument("--only", choices=["pty", "usb"], default=None, help="Run one transport only.")
    args = ap.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    size = args.size_kib * 1024
    result: dict = {"image_body_bytes": size, "chunk_bytes": MAX_CHUNK_DATA}
    if args.only in (None, "pty"):
        result["pty"] = bench_pty(size, args.baud, args.raw_kib * 1024)
    if args.only in (None, "usb"):
        result["usb"] = bench_usb(size)
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("pty", "usb"):
            r = result.get(name)
            if r:
                print(f"{name}: update {r['transfer_Bps']} B/s over {r['transfer_s']} s, raw {r['raw_Bps']} B/s, "
                      f"ratio {r['ratio']}; commit {r['commit_s']} s, activate+verify {r['activate_and_verify_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
