"""The built-in SPEC driver apart, holding only its device (docs/drivers.md, "What a driver can reach").

The table opens a driver process's device node and hands it the open descriptor
(SCM_RIGHTS, :func:`devices.apart.proxy.serve_device`): the SPEC driver, confined to a
user of its own with no group, needs no access to the node's path, so a pty (0620,
root's) or a node of another group works as a udev-managed one does. The descriptor
handed over is its own device's only, and only a character device.
"""

from __future__ import annotations

import errno
import os
import queue
import socket
import threading

import pytest

from devices.apart.choose import open_device
from devices.apart.host import DeviceOpener
from devices.apart.proxy import serve_device
from devices.contract import DriverKind, OpenRequest
from protocols.cards import BackColour
from simulators.table import SimulatedTable
from table.assembly import DeviceSpec
from table.console import Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.journal import Journal, verify
from table.keys import generate
from table.rules.settlement import Tables

RED, BLUE = BackColour.RED, BackColour.BLUE


def _opener(url: str) -> tuple[DeviceOpener, socket.socket]:
    table, driver = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    threading.Thread(target=serve_device, args=(table, url), daemon=True).start()
    return DeviceOpener(driver, url), table


def test_the_table_hands_a_driver_its_device_and_nothing_else(tmp_path):
    opener, table = _opener("/dev/null")
    try:
        fd = opener("/dev/null")  # a character device: handed over, open
        try:
            assert os.write(fd, b"x") == 1
        finally:
            os.close(fd)
        with pytest.raises(PermissionError):  # another path: never asked of the table
            opener("/etc/passwd")
    finally:
        opener.sock.close()
        table.close()
    key = tmp_path / "table.key"
    key.write_bytes(b"secret")
    opener, table = _opener(str(key))  # a config pointing a device at a file: refused, not handed over
    try:
        with pytest.raises(OSError) as got:
            opener(str(key))
        assert got.value.errno == errno.ENODEV
    finally:
        opener.sock.close()
        table.close()


def test_a_driver_asking_for_a_device_that_is_not_there_gets_the_tables_errno(tmp_path):
    opener, table = _opener(str(tmp_path / "unplugged"))
    try:
        with pytest.raises(FileNotFoundError):
            opener(str(tmp_path / "unplugged"))
    finally:
        opener.sock.close()
        table.close()


def test_the_default_is_every_driver_apart():
    assert DeviceSpec(DriverKind.SHOE, "/dev/x").apart == "all"


@pytest.mark.skipif(os.geteuid() != 0, reason="a table drops its drivers' privileges only as root")
def test_the_spec_drivers_in_service_isolation_deal_on_ptys_they_cannot_open_by_path(tmp_path):
    """Service mode as root: each SPEC driver runs as a user of its own with no group; the
    emulators' ptys (root's, 0620) cannot be opened by that user, yet the table deals,
    because the table opens them and hands the descriptors over. Without the hand-over the
    driver process's open is refused (EACCES) and no table starts."""
    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=5, link_dir=tmp_path / "dev") as sim:
        drivers = {}
        try:
            for kind, url in (("shuffler", sim.shuffler_url), ("shoe", sim.shoe_url)):
                drivers[kind] = open_device("spec", OpenRequest(DriverKind(kind), url, kind, events), service=True)
                iso = drivers[kind].process.isolation
                assert iso.user is not None and iso.user != 0 and iso.device_group is None and not iso.network
                # the node itself is closed to that user
                st = os.stat(url)
                assert st.st_uid != iso.user and not st.st_mode & 0o006
            journal = Journal(tmp_path / "journal.sqlite3", key=generate())
            console = Console()
            console.attached = True
            ctl = TableController(drivers["shuffler"], drivers["shoe"], events, sim.dealer,
                                  DeckCustody([("A", RED), ("B", BLUE)]), seats=2, ante_cents=1000,
                                  tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                                  timing=TableTiming(event_timeout_s=6))
            ctl.prepare()
            ctl.play_round()
            assert ctl.rounds_played == 1
            assert [e for e in journal.entries("device_event") if e.body["source"] == "shoe"]
            ctl.close()
            journal.close()
        finally:
            for d in drivers.values():
                d.close()
    assert verify(tmp_path / "journal.sqlite3").ok
