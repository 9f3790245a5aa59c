"""Device drivers run apart from the table (devices/apart/, docs/drivers.md "A driver's process"):
one process per driver, the contract over a socket pair, a proxy the controller cannot tell
from a driver in its own process; the table learns the driver's name, version and
capabilities from the driver process and never imports a plugin's code."""

from __future__ import annotations

import queue
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from devices.apart import open_apart
from devices.apart.proxy import runs_apart
from devices.contract import Capabilities, DriverError, DriverKind, OpenRequest, TransportError
from protocols.cards import BackColour
from simulators.table import SimulatedTable
from table.console import Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.journal import Journal, verify
from table.keys import generate
from table.rules.settlement import Tables

RED, BLUE = BackColour.RED, BackColour.BLUE
KEY = generate()
PLUGINS = str(Path(__file__).parent / "apart_drivers")


@contextmanager
def apart_table(tmp_path, *, shuffler=("spec", {}), shoe=("spec", {}), attached=True, timing=None, **opts):
    """A table whose two drivers each run in a process of their own, on the simulated devices."""
    with SimulatedTable((RED, BLUE), seed=11, link_dir=tmp_path / "dev") as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        drivers = {}
        for kind, url, (name, options) in (("shuffler", sim.shuffler_url, shuffler), ("shoe", sim.shoe_url, shoe)):
            drivers[kind] = open_apart(name, OpenRequest(DriverKind(kind), url, kind, events, options=options),
                                       paths=(PLUGINS,), **opts)
        console = Console()
        console.attached = attached
        ctl = TableController(drivers["shuffler"], drivers["shoe"], events, sim.dealer,
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=2, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                              timing=TableTiming(**{"event_timeout_s": 6, **(timing or {})}))
        try:
            yield ctl, sim, journal, drivers
        finally:
            for d in drivers.values():
                d.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


def test_a_table_deals_and_settles_with_both_drivers_in_processes_of_their_own(tmp_path):
    with apart_table(tmp_path) as (ctl, sim, journal, drivers):
        ctl.prepare()
        for _ in range(2):
            ctl.play_round()
        assert ctl.rounds_played == 2
        cards = [e for e in journal.entries("device_event") if e.body["source"] == "shoe"]
        assert cards  # the shoe's events came over the socket and were journaled, then acknowledged
        for d in drivers.values():
            assert d.process.starts == 1 and d.link.alive


def test_the_table_learns_name_version_and_capabilities_from_the_driver_process(tmp_path):
    before = set(sys.modules)  # (another test may have imported the attack plugin here on purpose)
    with SimulatedTable((RED, BLUE), seed=11) as sim:
        shoe = open_apart("threecard_test_drivers.flaky:PLUGIN",
                          OpenRequest(DriverKind.SHOE, sim.shoe_url, "shoe", queue.Queue(), options={"arm_file": "/nonexistent"}),
                          paths=(PLUGINS,))
        try:
            assert (shoe.driver_name, shoe.driver_version) == ("flaky-spec", "threecard_test_drivers 0.0.1")
            assert shoe.process.declared == Capabilities(commitment=True)
            assert shoe.link.identity.serial_number == "SHOE-SIM-0001"
            assert shoe.status().cards == 0
            assert not callable(getattr(shoe, "shuffle", None))  # a shoe is a shoe (describe())
        finally:
            shoe.close()
    # the plugin's code ran in the driver process only: the table never imported it
    assert not [m for m in set(sys.modules) - before if m.startswith("threecard_test_drivers")]


def test_a_driver_that_cannot_open_its_device_says_so_as_in_process(tmp_path):
    with pytest.raises(TransportError):
        open_apart("spec", OpenRequest(DriverKind.SHOE, str(tmp_path / "no-such-tty"), "shoe", queue.Queue()))
    with pytest.raises(DriverError, match="no device driver 'nope'"):
        open_apart("nope", OpenRequest(DriverKind.SHOE, str(tmp_path / "tty"), "shoe", queue.Queue()))


def test_which_drivers_run_apart():
    assert [runs_apart(s, d) for s in ("all", "plugins", "none") for d in ("spec", "ascii-shoe")] == \
        [True, True, False, True, False, False]
    with pytest.raises(DriverError, match="devices.apart"):
        runs_apart("some", "spec")


@pytest.fixture
def installed_test_drivers(tmp_path, monkeypatch):
    """The test drivers as a vendor's package installs them: an entry point of
    ``threecard.devices`` (a dist-info on the path), its code on the path."""
    site = tmp_path / "site"
    dist = site / "threecard_test_drivers-0.0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: threecard-test-drivers\nVersion: 0.0.1\n")
    (dist / "entry_points.txt").write_text("[threecard.devices]\nflaky-spec = threecard_test_drivers.flaky:PLUGIN\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(PLUGINS)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{PLUGINS}")
    return site


def test_checking_a_config_that_names_a_plugin_never_imports_it_into_the_table(tmp_path, installed_test_drivers):
    from table.config import ConfigError, load_config
    from tables import table_toml

    before = set(sys.modules)
    path = tmp_path / "table.toml"
    text = table_toml("t1", 2, "/dev/ttyUSB0", "/dev/ttyUSB1").replace(
        'url = "/dev/ttyUSB1"', 'url = "/dev/ttyUSB1"\ndriver = "flaky-spec"\nmode = "MODE"')
    path.write_text(text.replace("MODE", "hang"))
    cfg = load_config(path)
    assert cfg.devices.shoe.driver == "flaky-spec"
    path.write_text(text.replace("MODE", "sideways"))
    with pytest.raises(ConfigError, match=r"devices\.shoe\.mode.*one of raise, hang, exit"):
        load_config(path)
    assert not [m for m in set(sys.modules) - before if m.startswith("threecard_test_drivers")]  # checked apart


def test_the_service_not_root_and_without_the_driver_units_refuses_to_run_a_plugin_unconfined(tmp_path, mocker):
    """A fresh attacker's finding: a table run as the service under its own user (not root),
    the systemd driver sockets not installed, started the plugin itself in the table's user,
    with its network and its files, without a word. Refused, naming what to install."""
    import queue

    from devices.apart.choose import open_device
    from devices.contract import DriverError

    mocker.patch("devices.apart.choose.os.geteuid", return_value=999)
    request = OpenRequest(DriverKind.SHOE, "/dev/null", "shoe", queue.Queue())
    with pytest.raises(DriverError, match=r"cannot be confined.*threecard-driver@\.socket"):
        open_device("threecard_test_drivers.flaky:PLUGIN", request, service=True, sockets=str(tmp_path))


def test_a_driver_process_finds_the_tables_packages_from_any_folder(tmp_path):
    """The driver process starts without ``site`` (no ``*.pth`` file before it is confined):
    it is given the folder of the table's own packages, so a table started from any folder,
    its packages installed editable (found through a ``.pth`` finder), still starts it; a
    process that cannot start is a DriverProcessFailed naming it, never an exit 70."""
    import subprocess
    import sys

    script = ("import queue\n"
              "from devices.apart import open_apart\n"
              "from devices.contract import DriverKind, OpenRequest, TransportError\n"
              "try:\n"
              "    open_apart('ascii-shoe', OpenRequest(DriverKind.SHOE, 'socket://127.0.0.1:9', 'shoe', queue.Queue()))\n"
              "except TransportError as exc:\n"
              "    print('opened the port:', exc)\n")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "opened the port:" in r.stdout and "cannot open socket://127.0.0.1:9" in r.stdout, r.stdout + r.stderr
