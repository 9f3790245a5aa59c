"""The table assembled in one place (table/assembly.py) and the capabilities a driver declares
(devices/plugins.py, docs/drivers.md "Capabilities"): what the table goes by is the plugin's
declaration; a plugin that declares nothing is refused at start, naming its entry point; the
conformance suite holds the declaration against the driver; the vendor facade assembles the
table as ``tablectl run`` does (the config's drivers, the gaming day's archive)."""

from __future__ import annotations

import queue
from types import SimpleNamespace

import pytest

from devices.conformance.drivers import DRIVER_CHECKS, DriverTarget, run_driver_check
from devices.conformance.suite import CallOperator
from devices.contract import Capabilities, DriverError, DriverKind, TransportError
from devices.plugins import prepare
from protocols.cards import BackColour
from simulators.standalone import EmulatorOptions, StandaloneEmulator
from simulators.table import SimulatedTable
from table.assembly import AssemblyError, DeviceSpec, DriverRefused, People, TableSpec, assemble
from table.config import parse_config
from table.errors import TableError
from table.journal import Journal
from table.keys import table_key_for
from table.rules.settlement import Tables

from tables import install_drivers, table_toml

RED, BLUE = BackColour.RED, BackColour.BLUE

#: A vendor's package: drivers over the SPEC devices (the built-in driver inside), each declaring
#: something of its own. QUIET's driver object says nothing of its capabilities; BOAST's says it
#: has them all while its plugin declares no resend; SILENT declares nothing; LEDGER records what
#: it opened and closed, and its shoe cannot be opened.
PLUGINS = '''
from devices.contract import CONTRACT_VERSION, Capabilities, DriverKind, TransportError
from devices.plugins import SPEC

OPENED = []
CLOSED = []


class Hidden:
    """The SPEC driver with no word of its own on its capabilities."""
    def __init__(self, inner):
        self._inner = inner
    def __getattr__(self, name):
        if name == "capabilities":
            raise AttributeError(name)
        return getattr(self._inner, name)


class Plugin:
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHOE, DriverKind.SHUFFLER})
    option_keys = frozenset()
    def __init__(self, name, declared, wrap=lambda d: d):
        self.name, self.declared, self.wrap = name, declared, wrap
    def capabilities(self, kind, options):
        return self.declared
    def check_options(self, kind, options):
        pass
    def open(self, request):
        return self.wrap(SPEC.open(request))


class Recorded:
    def __init__(self, kind):
        self.kind = kind
        self.link = None
    def close(self):
        CLOSED.append(self.kind)


class Ledger(Plugin):
    def open(self, request):
        if request.kind is DriverKind.SHOE:
            raise TransportError("no shoe at " + request.url)
        OPENED.append(str(request.kind))
        return Recorded(str(request.kind))


QUIET = Plugin("acme-quiet", Capabilities(resend=False), Hidden)
BOAST = Plugin("acme-boast", Capabilities(resend=False))
SILENT = Plugin("acme-silent", None)
LEDGER = Ledger("acme-ledger", Capabilities())
'''


@pytest.fixture
def vendor(tmp_path, monkeypatch):
    """The installed distribution 'acme-drivers 2.1' with the drivers above; its module."""
    install_drivers(tmp_path, monkeypatch, "acme-drivers", "2.1", {"acme_assembly": PLUGINS},
                    {name: f"acme_assembly:{attr}" for name, attr in
                     (("acme-quiet", "QUIET"), ("acme-boast", "BOAST"), ("acme-silent", "SILENT"),
                      ("acme-ledger", "LEDGER"))})
    import importlib

    return importlib.import_module("acme_assembly")


def _spec(shuffler: DeviceSpec, shoe: DeviceSpec) -> TableSpec:
    return TableSpec(shuffler=shuffler, shoe=shoe, decks=(("A", RED), ("B", BLUE)),
                     tables=Tables.load("pa-649a12b-1"), seats=2)


def _device_entries(journal: Journal) -> dict[str, dict]:
    return {e.body["source"]: e.body for e in journal.entries("device")}


# -- a driver that declares nothing --------------------------------------------------------------


def test_a_plugin_that_declares_nothing_is_refused_naming_its_entry_point(vendor):
    with pytest.raises(DriverError) as err:
        prepare("acme-silent", "shoe", {})
    text = str(err.value)
    assert "entry point acme-silent = acme_assembly:SILENT (package acme-drivers 2.1)" in text
    assert "declares no capabilities" in text


def test_the_config_refuses_a_plugin_that_declares_nothing(vendor):
    with pytest.raises(Exception, match=r"devices\.shoe\.driver: .*acme-silent = acme_assembly:SILENT"):
        parse_config(_config("/dev/threecard/shuffler", "/dev/threecard/shoe", 'driver = "acme-silent"'))


def test_the_table_refuses_a_driver_built_by_hand_that_declares_nothing():
    """No guess: a driver object without capabilities is not taken for one with all of them."""
    bare = SimpleNamespace(link=SimpleNamespace(name="shoe", config=None), status=lambda: None,
                           close=lambda: None)
    shuffler = SimpleNamespace(link=SimpleNamespace(name="shuffler", config=None), capabilities=Capabilities(),
                               shuffle=lambda: None, status=lambda: None, close=lambda: None)
    from table.assembly import build_controller

    with pytest.raises(TableError, match=r"the shoe's driver .* declares no capabilities"):
        build_controller(_spec(DeviceSpec(DriverKind.SHUFFLER, ""), DeviceSpec(DriverKind.SHOE, "")),
                         People(dealer=None), shuffler, bare, queue.Queue())


# -- the declaration is what the table goes by ----------------------------------------------------


def test_the_journal_names_what_the_shoe_declares_it_lacks(vendor, tmp_path):
    """A shoe whose plugin declares no resend, and whose driver object says nothing of its own:
    the table goes by the declaration (the lost-event watch, the device entry), it does not
    assume the shoe resends (the journal said missing=[] before)."""
    path = tmp_path / "j.sqlite3"
    with SimulatedTable((RED, BLUE), seed=3) as sim, \
            Journal(path, key=table_key_for(path)[0]) as journal:
        spec = _spec(DeviceSpec(DriverKind.SHUFFLER, sim.shuffler_url),
                     DeviceSpec(DriverKind.SHOE, sim.shoe_url, driver="acme-quiet"))
        with assemble(spec, People(sim.dealer), journal=journal) as table:
            assert table.shoe.capabilities.missing() == ("resend",)
            table.controller.prepare()
            shoe = _device_entries(journal)["shoe"]
    assert shoe["driver"] == "acme-quiet" and shoe["missing"] == ["resend"]


def test_the_conformance_suite_holds_the_declaration_against_the_driver(vendor):
    """A driver object that says its shoe resends while its plugin declares it does not fails the
    identity check, naming the capability; the built-in driver passes it."""
    identity = next(c for c in DRIVER_CHECKS if c.kind == "shoe" and c.name == "identity")
    emu = StandaloneEmulator(EmulatorOptions("shoe", tcp=("127.0.0.1", 0))).start()
    try:
        results = {name: run_driver_check(identity, DriverTarget(name, "shoe", emu.url,
                                                                 operator=CallOperator({"shoe": emu.command})))
                   for name in ("acme-boast", "spec")}
    finally:
        emu.stop()
    assert results["acme-boast"].outcome == "fail" and "resend" in results["acme-boast"].detail, results
    assert results["spec"].outcome == "pass", results


# -- one assembly ----------------------------------------------------------------------------------


def test_what_was_opened_is_closed_when_a_later_device_fails(vendor):
    """The shoe cannot be opened: the shuffler's driver, opened first, is closed, and the error
    is the shoe's."""
    # in this process (apart="none"): the test reads what the plugin's module recorded
    spec = _spec(DeviceSpec(DriverKind.SHUFFLER, "socket://127.0.0.1:9", driver="acme-ledger", apart="none"),
                 DeviceSpec(DriverKind.SHOE, "socket://127.0.0.1:9", driver="acme-ledger", apart="none"))
    with pytest.raises(TransportError, match="no shoe at"):
        assemble(spec, People(dealer=None))
    assert vendor.OPENED == ["shuffler"] and vendor.CLOSED == ["shuffler"]


def test_a_driver_that_cannot_load_is_refused_naming_the_config_key():
    spec = _spec(DeviceSpec(DriverKind.SHUFFLER, "socket://127.0.0.1:9", driver="nobody-makes-this"),
                 DeviceSpec(DriverKind.SHOE, "socket://127.0.0.1:9"))
    with pytest.raises(DriverRefused, match=r"^devices\.shuffler\.driver: no device driver 'nobody-makes-this'"):
        assemble(spec, People(dealer=None))


def _config(shuffler_url: str, shoe_url: str, shoe: str = "", extra: str = "") -> str:
    """Table t1's config: 2 seats, the devices at the URLs, ``shoe``: more of the shoe's keys."""
    return table_toml("t1", 2, shuffler_url, shoe_url, shoe + "\n" + extra)


def test_the_vendor_facade_opens_the_drivers_the_config_names(vendor, tmp_path):
    """table.api.Table at a real table: the config's plugin drives the shoe (it opened the built-in
    driver whatever the config said), and its declaration is on the record."""
    from table.api import Table

    with SimulatedTable((RED, BLUE), seed=5) as sim:
        cfg = parse_config(_config(sim.shuffler_url, sim.shoe_url, 'driver = "acme-quiet"'))
        t = Table(cfg, journal=tmp_path / "j.sqlite3", dealer=sim.dealer, auto_dealer=True, rounds=1)
        with t:
            t.wait(120)
        with Journal(tmp_path / "j.sqlite3", key=table_key_for(tmp_path / "j.sqlite3")[0]) as journal:
            shoe = _device_entries(journal)["shoe"]
    assert shoe["driver"] == "acme-quiet" and shoe["missing"] == ["resend"]


def test_the_vendor_facade_keeps_the_gaming_days_archive_policy(tmp_path):
    """``[journal] archive`` is the vendor facade's too: a folder that does not exist is refused
    naming the key, before anything is opened (the facade ignored the archive before)."""
    from table.api import Table

    missing = tmp_path / "no-such-archive"
    cfg = parse_config(_config("/dev/threecard/shuffler", "/dev/threecard/shoe",
                               extra=f'[journal]\npath = "{tmp_path / "j.sqlite3"}"\narchive = "{missing}"\n'))
    with pytest.raises(AssemblyError) as err:
        Table(cfg, simulate=True, seed=1, rounds=1).start()
    assert err.value.key == "journal.archive" and str(missing) in str(err.value)
