"""pytest plugin ``threecard`` (entry point ``pytest11``): device fixtures for conformance and HIL tests.

Loaded in every pytest run of an environment where threecard-table is
installed, so it only adds options, a marker and fixtures; it collects
nothing by itself and imports the heavy modules lazily.

Options::

    --shuffler-url URL        a shuffler to test: /dev/ttyUSB0, /dev/threecard/shuffler, socket://host:port
    --shoe-url URL            a shoe to test
    --shuffler-usb SELECTOR   a USB shuffler: usb://VID:PID[/SERIAL] (libusb)
    --shoe-usb SELECTOR       a USB shoe
    --shuffler-control H:P    control socket of a standalone emulator (tablectl emulate --control)
    --shoe-control H:P
    --operator-prompt         a person does the physical steps (insert a deck, draw cards); use with -s
    --threecard-transport pty|usb   where the default in-process emulators run (default pty)
    --shuffler-driver NAME    the device's driver plugin (docs/drivers.md; default spec: protocols/SPEC.md)
    --shoe-driver NAME
    --driver-option KIND.KEY=VALUE  one of that driver's own options (a TOML value), e.g. shoe.baudrate=9600

With none of the device options, the fixtures give in-process emulators (a
fresh pair per test). With any of them the run is *hardware in the loop*:
the fixtures reach the devices named, and every test using them is marked
``hil`` (select with ``-m hil``, leave out with ``-m "not hil"``); a device
not named is not under test and its tests are skipped.

Fixtures: ``threecard_target`` (a :class:`devices.conformance.suite.Target`),
``threecard_shuffler`` and ``threecard_shoe`` (connected drivers, closed
after the test, opened through the driver named), ``threecard_driver_target``
(a :class:`devices.conformance.drivers.DriverTarget` for one kind, for the
drivers' suite ``devices/conformance/test_drivers.py``). A device whose driver
is not ``spec`` speaks another protocol: the SPEC suite's checks skip it as not
under test, the drivers' suite checks it.

The plugin lives in ``table/`` because it is the one layer allowed to import
both the emulators (``simulators``, which never import the host side) and the
host's drivers (``devices``, which must not depend on emulators).
"""

from __future__ import annotations

from typing import Iterator

import pytest

HIL_OPTIONS = ("shuffler_url", "shoe_url", "shuffler_usb", "shoe_usb")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("threecard", "Three Card Poker devices: conformance and hardware-in-the-loop tests")
    group.addoption("--shuffler-url", metavar="URL", default=None,
                    help="shuffler under test (pyserial URL: /dev/..., socket://host:port); marks tests hil")
    group.addoption("--shoe-url", metavar="URL", default=None, help="shoe under test; marks tests hil")
    group.addoption("--shuffler-usb", metavar="usb://VID:PID[/SERIAL]", default=None,
                    help="USB shuffler under test (libusb); marks tests hil")
    group.addoption("--shoe-usb", metavar="usb://VID:PID[/SERIAL]", default=None,
                    help="USB shoe under test (libusb); marks tests hil")
    group.addoption("--shuffler-control", metavar="HOST:PORT", default=None,
                    help="control socket of a standalone shuffler emulator (tablectl emulate --control)")
    group.addoption("--shoe-control", metavar="HOST:PORT", default=None,
                    help="control socket of a standalone shoe emulator")
    group.addoption("--operator-prompt", action="store_true", default=False,
                    help="ask a person at the bench for physical steps (insert a deck, draw cards)")
    group.addoption("--threecard-transport", choices=("pty", "usb"), default="pty",
                    help="where the default in-process emulators run (default: pty)")
    group.addoption("--device-event-timeout", type=float, default=10.0, metavar="S",
                    help="seconds to wait for a device event after a physical step (default 10)")
    group.addoption("--shuffle-timeout", type=float, default=180.0, metavar="S",
                    help="seconds a shuffle may take to verify (default 180, SPEC 7)")
    group.addoption("--shuffler-driver", metavar="NAME", default="spec",
                    help="the shuffler's driver plugin (docs/drivers.md; default spec)")
    group.addoption("--shoe-driver", metavar="NAME", default="spec", help="the shoe's driver plugin (default spec)")
    group.addoption("--driver-option", metavar="KIND.KEY=VALUE", action="append", default=[],
                    help="a driver's own option, e.g. shoe.baudrate=9600 (a TOML value)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hil: runs against real devices or external emulators (hardware in the loop)")
    for device in ("shuffler", "shoe"):
        url = config.getoption(f"{device}_url")
        usb = config.getoption(f"{device}_usb")
        if url and usb:
            raise pytest.UsageError(f"give --{device}-url or --{device}-usb, not both")
        if usb:
            from table.hil.conformance import usb_url

            try:
                usb_url(usb)
            except ValueError as exc:
                raise pytest.UsageError(f"--{device}-usb {usb}: {exc}") from None


def hil_mode(config: pytest.Config) -> bool:
    """True when a device option names real devices or external emulators."""
    return any(config.getoption(name) for name in HIL_OPTIONS)


_FIXTURES = ("threecard_target", "threecard_shuffler", "threecard_shoe", "threecard_driver_target")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hil_mode(config):
        return
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in _FIXTURES):
            item.add_marker(pytest.mark.hil)


def pytest_report_header(config: pytest.Config) -> str | None:
    if not hil_mode(config):
        return None
    shuffler = config.getoption("shuffler_url") or config.getoption("shuffler_usb") or "-"
    shoe = config.getoption("shoe_url") or config.getoption("shoe_usb") or "-"
    return f"threecard hil: shuffler {shuffler}, shoe {shoe}"


def _address(config: pytest.Config, name: str) -> tuple[str, int] | None:
    value = config.getoption(name)
    if not value:
        return None
    from simulators.standalone import parse_address

    try:
        return parse_address(value)
    except ValueError as exc:
        raise pytest.UsageError(f"--{name.replace('_', '-')}: {exc}") from None


@pytest.fixture
def threecard_target(request: pytest.FixtureRequest) -> Iterator[object]:
    """The devices under test: in-process emulators by default, else those named on the command line."""
    config = request.config
    if not hil_mode(config):
        from table.hil.conformance import InProcessBench

        with InProcessBench(transport=config.getoption("threecard_transport")) as bench:
            yield bench.target
        return
    from table.hil.conformance import hil_target

    ask = None
    if config.getoption("operator_prompt"):
        capman = config.pluginmanager.getplugin("capturemanager")

        def ask(text: str) -> None:
            with capman.global_and_fixture_disabled():
                input(f"\n[threecard] {text} ")

    spec = {d: config.getoption(f"{d}_driver") == "spec" for d in ("shuffler", "shoe")}
    yield hil_target(  # a device on another protocol is not a SPEC device under test
        shuffler_url=(config.getoption("shuffler_url") or config.getoption("shuffler_usb")) if spec["shuffler"] else None,
        shoe_url=(config.getoption("shoe_url") or config.getoption("shoe_usb")) if spec["shoe"] else None,
        shuffler_control=_address(config, "shuffler_control"), shoe_control=_address(config, "shoe_control"),
        ask=ask, event_timeout_s=config.getoption("device_event_timeout"),
        shuffle_timeout_s=config.getoption("shuffle_timeout"),
    )


def driver_options(config: pytest.Config, device: str) -> dict:
    """``--driver-option`` values for ``device`` (``"shoe"``), as the config's own keys."""
    import tomllib

    out = {}
    for item in config.getoption("driver_option"):
        where, eq, raw = item.partition("=")
        kind, dot, key = where.partition(".")
        if not (eq and dot and key):
            raise pytest.UsageError(f"--driver-option {item!r}: expected KIND.KEY=VALUE (shoe.baudrate=9600)")
        if kind == device:
            try:
                out[key] = tomllib.loads(f"v = {raw}")["v"]
            except tomllib.TOMLDecodeError:
                out[key] = raw
    return out


def _driver(request: pytest.FixtureRequest, target, device: str):
    config = request.config
    name = config.getoption(f"{device}_driver")
    url = target.url(device) or (config.getoption(f"{device}_url") if name != "spec" else None)
    if url is None:
        pytest.skip(f"no {device} under test (give --{device}-url or --{device}-usb)")
    import queue

    from devices.apart.choose import open_device
    from devices.contract import DriverError, DriverKind, OpenRequest

    try:  # as a table opens it: in a process of its own (an in-process USB emulator stays here)
        return open_device(name, OpenRequest(DriverKind(device), url, device, queue.Queue(256),
                                             options=driver_options(config, device), link_config=target.config,
                                             ack_on_delivery=True, extras={"usb_backend": target.usb_backend}))
    except DriverError as exc:
        raise pytest.UsageError(f"--{device}-driver {name}: {exc}") from None


@pytest.fixture
def threecard_shuffler(request, threecard_target) -> Iterator[object]:
    """A connected shuffler driver (:class:`devices.Shuffler` unless ``--shuffler-driver``),
    handshake done, closed after the test."""
    drv = _driver(request, threecard_target, "shuffler")
    try:
        yield drv
    finally:
        drv.close()


@pytest.fixture
def threecard_shoe(request, threecard_target) -> Iterator[object]:
    """A connected shoe driver (:class:`devices.CardShoe` unless ``--shoe-driver``), closed after the test."""
    drv = _driver(request, threecard_target, "shoe")
    try:
        yield drv
    finally:
        drv.close()


@pytest.fixture
def threecard_driver_target(request: pytest.FixtureRequest) -> Iterator[object]:
    """``threecard_driver_target(kind)``: a :class:`devices.conformance.drivers.DriverTarget`
    for the device of ``kind`` named on the command line (its ``--KIND-driver``, options,
    control socket), or None when that device is not under test."""
    from devices.conformance.drivers import DriverTarget
    from devices.conformance.suite import ControlOperator, Operator

    config = request.config

    def make(kind: str):
        url = config.getoption(f"{kind}_url") or config.getoption(f"{kind}_usb")
        if url is None:
            return None
        control = _address(config, f"{kind}_control")
        operator = ControlOperator(**{kind: control}) if control else Operator()
        return DriverTarget(config.getoption(f"{kind}_driver"), kind, url, options=driver_options(config, kind),
                            operator=operator, event_timeout_s=config.getoption("device_event_timeout"),
                            shuffle_timeout_s=config.getoption("shuffle_timeout"))

    yield make
