"""Fixtures of the ASCII shoe's tests: an emulator on TCP or a pty, and a driver opened
through the table's plugin loader (as a table opens it), with its own event queue."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from devices.contract import DriverKind, OpenRequest
from devices.plugins import open_driver
from threecard_ascii_shoe.emulator import Emulator, ShoeModel

from ascii_helpers import FAST



@pytest.fixture(autouse=True)
def no_thread_leaks():
    """Every emulator and driver thread a test starts has ended when it ends."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 3
    while (extra := [t for t in threading.enumerate() if t not in before and t.is_alive()]) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not extra, f"threads left running: {[t.name for t in extra]}"


@pytest.fixture(params=["tcp", "pty"])
def emulator(request, tmp_path):
    """A running emulated shoe on TCP or on a pty (behind a symlink, so a 'disconnect' is
    followed), with its control socket."""
    model = ShoeModel(serial="ASH-TEST-0001")
    if request.param == "tcp":
        emu = Emulator(model, tcp=("127.0.0.1", 0), control=("127.0.0.1", 0))
    else:
        emu = Emulator(model, pty=True, link=str(tmp_path / "shoe"), control=("127.0.0.1", 0))
    with emu:
        yield emu


@pytest.fixture
def open_shoe():
    """``open_shoe(url, **options)`` -> (driver, events); every driver closed at the end."""
    opened = []

    def _open(url, *, resume=None, ack_on_delivery=False, config=FAST, **options):
        events = queue.Queue(64)
        drv = open_driver("ascii-shoe", OpenRequest(DriverKind.SHOE, url, "shoe", events, options=options,
                                                    link_config=config, ack_on_delivery=ack_on_delivery,
                                                    resume=resume))
        opened.append(drv)
        return drv, events

    yield _open
    for drv in opened:
        drv.close()
