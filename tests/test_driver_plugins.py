"""Device drivers found by name (devices/plugins.py, docs/drivers.md): the built-in SPEC
driver, entry points of ``threecard.devices``, and the startup errors that name the package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devices.conformance.drivers import DRIVER_CHECKS, DriverTarget, run_driver_suite
from devices.conformance.suite import CallOperator
from devices.contract import CONTRACT_VERSION, Capabilities, DriverError, DriverKind, DriverOptionError
from devices.plugins import SPEC, installed, load_plugin, prepare
from simulators.standalone import EmulatorOptions, StandaloneEmulator
from table.config import ConfigError, parse_config

from tables import install_drivers

PLUGINS = '''
from devices.contract import CONTRACT_VERSION, Capabilities, DriverKind

class Plugin:
    name = "x"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHOE, DriverKind.SHUFFLER})
    option_keys = frozenset()
    def __init__(self, caps=Capabilities(), version=CONTRACT_VERSION):
        self.caps, self.contract_version = caps, version
    def capabilities(self, kind, options):
        return self.caps
    def check_options(self, kind, options):
        pass
    def open(self, request):
        raise NotImplementedError

FUTURE = Plugin(version=CONTRACT_VERSION + 1)
NO_COUNT = Plugin(caps=Capabilities(deck_count=False))
NOT_A_PLUGIN = object()
'''


@pytest.fixture
def vendor_packages(tmp_path, monkeypatch):
    """An installed distribution 'acme-drivers 2.1' whose entry points are a driver whose import
    fails, one for a later contract, one that is no plugin, one shuffler without a deck count."""
    return install_drivers(
        tmp_path, monkeypatch, "acme-drivers", "2.1",
        {"acme_drivers": PLUGINS, "acme_broken": "raise ImportError('libacme.so: cannot open shared object file')\n"},
        {"acme-broken": "acme_broken:PLUGIN", "acme-future": "acme_drivers:FUTURE",
         "acme-thing": "acme_drivers:NOT_A_PLUGIN", "acme-nocount": "acme_drivers:NO_COUNT"})


def test_spec_is_built_in_and_installed_plugins_are_listed(vendor_packages):
    assert load_plugin("spec", "shoe") is SPEC
    found = installed()
    assert found["spec"] == "threecard-table" and found["acme-future"] == "acme-drivers 2.1"


@pytest.mark.parametrize("name, kind, message", [
    ("acme-broken", "shoe", r"device driver 'acme-broken' \(package acme-drivers 2.1, acme_broken:PLUGIN\) failed "
                            r"to load: ImportError: libacme.so"),
    ("acme-future", "shoe", rf"'acme-future' \(package acme-drivers 2.1\) is written for driver contract version "
                            rf"{CONTRACT_VERSION + 1}; this table supports \[{CONTRACT_VERSION}\]"),
    ("acme-thing", "shoe", r"'acme-thing' \(package acme-drivers 2.1\) is not a driver plugin: it lacks "
                           r"contract_version"),
    ("acme-nocount", "shuffler", r"a shuffler without the deck count at verification cannot verify a deck"),
    ("nobody", "shoe", r"no device driver 'nobody' is installed .*installed: .*acme-broken.*spec"),
])
def test_a_driver_that_cannot_serve_is_an_error_naming_its_package(vendor_packages, name, kind, message):
    with pytest.raises(DriverError, match=message):
        prepare(name, kind, {})


def test_a_shoe_without_a_deck_count_is_accepted_it_has_none_to_give(vendor_packages):
    plugin, caps = prepare("acme-nocount", "shoe", {})
    assert caps == Capabilities(deck_count=False)


def test_the_config_names_the_key_and_line_of_a_driver_that_cannot_load(vendor_packages):
    text = textwrap.dedent("""
        [table]
        id = "t1"
        seats = 2
        [[decks]]
        id = "A"
        back_colour = "red"
        [[decks]]
        id = "B"
        back_colour = "blue"
        [devices.shuffler]
        url = "/dev/threecard/shuffler"
        [devices.shoe]
        driver = "acme-future"
        url = "/dev/threecard/shoe"
    """)
    with pytest.raises(ConfigError) as err:
        parse_config(text, "table.toml")
    assert "table.toml:14: devices.shoe.driver: device driver 'acme-future' (package acme-drivers 2.1)" in str(err.value)


def _config(shoe: str) -> str:
    return textwrap.dedent("""
        [table]
        id = "t1"
        seats = 2
        [[decks]]
        id = "A"
        back_colour = "red"
        [[decks]]
        id = "B"
        back_colour = "blue"
        [devices.shuffler]
        url = "/dev/threecard/shuffler"
        [devices.shoe]
    """) + shoe


def test_the_driver_options_are_the_drivers_to_check():
    cfg = parse_config(_config('driver = "ascii-shoe"\nurl = "/dev/ttyUSB1"\nbaudrate = 19200\n'))
    assert (cfg.devices.shoe.driver, cfg.devices.shoe.options) == ("ascii-shoe", {"baudrate": 19200})
    assert cfg.devices.shuffler.driver == "spec"
    with pytest.raises(ConfigError, match=r"devices.shoe.baudrate: 'fast' is not a baud rate"):
        parse_config(_config('driver = "ascii-shoe"\nurl = "/dev/ttyUSB1"\nbaudrate = "fast"\n'))
    with pytest.raises(ConfigError, match=r"devices.shoe.parity: not an option of driver 'ascii-shoe'"):
        parse_config(_config('driver = "ascii-shoe"\nurl = "/dev/ttyUSB1"\nparity = "N"\n'))
    # the SPEC driver has no options: an extra key is the unknown key it always was
    with pytest.raises(ConfigError, match=r"devices.shoe.baudrate: unknown key"):
        parse_config(_config('url = "/dev/ttyUSB1"\nbaudrate = 9600\n'))


@pytest.mark.parametrize("kind", ["shoe", "shuffler"])
def test_the_spec_driver_passes_the_drivers_suite(kind):
    """The suite's self-test: the built-in driver against the SPEC emulators: every check passes
    (the SPEC emulators have every hand the suite asks for, 'garble' and 'hold-shuffle' too)."""
    emu = StandaloneEmulator(EmulatorOptions(kind, tcp=("127.0.0.1", 0))).start()
    try:
        results = run_driver_suite(DriverTarget("spec", kind, emu.url, operator=CallOperator({kind: emu.command}),
                                                event_timeout_s=10, shuffle_timeout_s=30))
    finally:
        emu.stop()
    assert [r.check.id for r in results] == [c.id for c in DRIVER_CHECKS if c.kind == kind]
    outcomes = {r.check.name: r.outcome for r in results}
    assert {n for n, o in outcomes.items() if o != "pass"} == set(), results


def test_tablectl_conformance_lists_drivers_and_refuses_options_without_one():
    out = subprocess.run([sys.executable, "-m", "table.cli", "conformance", "--list-drivers"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "spec\tthreecard-table" in out.stdout
    out = subprocess.run([sys.executable, "-m", "table.cli", "conformance", "--shoe", "socket://127.0.0.1:9",
                          "--driver-option", "baudrate=9600"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--driver-option needs --driver NAME" in out.stderr


def test_a_driver_option_error_is_a_usage_error_naming_the_key():
    with pytest.raises(DriverOptionError) as err:
        prepare("spec", DriverKind.SHOE, {"baudrate": 9600})
    assert err.value.key == "devices.shoe.baudrate"


def test_the_pytest_plugin_runs_the_drivers_suite_on_a_driver_packages_emulator():
    """HIL: ``--shoe-driver ascii-shoe`` with the example's emulator as a process of its own; the
    SPEC checks leave that shoe alone (another protocol), the drivers' checks pass."""
    emu = subprocess.Popen([sys.executable, "-m", "threecard_ascii_shoe.emulator", "--tcp", "127.0.0.1:0",
                            "--control", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        url, control = emu.stdout.readline().strip(), emu.stdout.readline().split()[-1]
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--pyargs",
                              "devices.conformance.test_drivers", "--shoe-driver", "ascii-shoe", "--shoe-url", url,
                              "--shoe-control", control, "-m", "hil", "-k", "shoe"],
                             capture_output=True, text=True, timeout=300)
    finally:
        emu.terminate()
        emu.wait(timeout=10)
        emu.stdout.close()
    assert out.returncode == 0, out.stdout[-3000:]
    assert "8 passed" in out.stdout and "skipped" not in out.stdout, out.stdout[-2000:]


def test_the_effective_config_shows_the_drivers_options_beside_the_tables_keys():
    cfg = parse_config(_config('driver = "ascii-shoe"\nurl = "/dev/ttyUSB1"\ndraw_index = false\n'))
    shoe = cfg.to_dict()["devices"]["shoe"]
    assert shoe["driver"] == "ascii-shoe" and shoe["draw_index"] is False and "options" not in shoe
