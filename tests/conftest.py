"""Shared fixtures. An autouse fixture fails any test that leaks a thread or a file descriptor."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings


# pytest rewrites each test module's asserts and caches the result as bytecode under
# __pycache__, unless bytecode writing is off (PYTHONDONTWRITEBYTECODE, set on some machines):
# then every xdist worker rewrote and compiled all 465 test modules again, 6 s of CPU each
# (collection 6.1 s -> 1.8 s with the cache). The cache is pytest's own, beside the tests.
sys.dont_write_bytecode = False

# Hypothesis's per-example deadline (200 ms) and its "too slow" health check bound wall
# time: on a loaded machine (the suite on 2 cores with another beside it) an example that
# takes 444 ms fails a test that asserts nothing about time. Properties here assert
# behaviour; timing goals are benchmarks or tests marked ``alone``.
hypothesis_settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("suite")

#: the project's own packages, run in hundreds of ``tablectl`` child processes
_PACKAGES = ("table", "protocols", "devices", "firmware_bridge", "simulators", "examples/ascii-shoe")


def pytest_configure(config):
    """Compile the project's bytecode once, before any test: the suite starts hundreds of
    ``tablectl`` processes, and where PYTHONDONTWRITEBYTECODE is set (or the tree was never
    imported) each one compiled every module it imports again (~0.1 s of CPU apiece)."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    import compileall

    root = Path(__file__).resolve().parent.parent
    for name in _PACKAGES:
        if (root / name).is_dir():
            compileall.compile_dir(root / name, quiet=2, workers=1)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command): three workers a core this process may run on.
    Half of a worker's time is spent waiting (on a device's answer over a pty, a child
    ``tablectl``, a browser, a server's start), so with one worker a core the cores sat 36 %
    idle (measured on 2 cores: one worker a core 663 s for the parallel phase; two 475 s,
    idle 7 %; later, on a cheaper suite, two 375 s and three 344 s, idle 3 %). Tests that
    bound wall time are marked ``alone`` and run after."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 3 * max(1, cores)


#: a line of pytest's ``--durations`` report: seconds, phase, test id (up to a space in a parameter)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call)\s+(\S+)")


def _slowest() -> dict[str, float]:
    """Seconds of each test in ``tests/slowest.txt`` (setup + call), by test id; {} without the file."""
    seconds: dict[str, float] = {}
    try:
        lines = (Path(__file__).parent / "slowest.txt").read_text().splitlines()
    except OSError:
        return seconds
    for line in lines:
        m = _DURATION.match(line)
        if m:
            seconds[m[3]] = seconds.get(m[3], 0.0) + float(m[1])
    return seconds


#: how many times its own hang guard a ``long`` test gets: on 2 cores shared with another
#: suite (load average ~25) the long tests took 5-8 times their idle wall time, past their
#: guards (the 300,000-request emulator test 120 s, the bit flips 600 s, the SIGKILL test
#: 900 s) while still making progress. A hang still ends, only later.
LONG_GUARD_FACTOR = 4


def _loaded_guard(config, items) -> None:
    """Give each ``long`` test ``LONG_GUARD_FACTOR`` times its hang guard (its own
    ``timeout`` mark, else the ini's ``timeout``): a long test is slow under load, not hung.
    The mark is put first, so pytest-timeout (which reads the closest mark) takes it."""
    try:
        default = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    except ValueError:  # pytest-timeout not installed: no guard to scale
        return
    for item in items:
        if item.get_closest_marker("long") is None:
            continue
        own = item.get_closest_marker("timeout")
        seconds = default if own is None else float(own.args[0] if own.args else own.kwargs.get("timeout", default))
        if seconds > 0:
            item.add_marker(pytest.mark.timeout(seconds * LONG_GUARD_FACTOR), append=False)


def pytest_collection_modifyitems(config, items):
    """Long tests first; then the modules of the last measured run's slowest tests
    (``tests/slowest.txt``), the module of the slowest first, each module's tests together
    and in their order (a module's fixtures, a browser or a bench set up once a module,
    are not set up again for a test taken out of it); the rest in their order (the sort
    is stable). pytest-xdist hands tests out in this order (``--dist worksteal``: a worker
    that runs out takes half of another's queue from its end), so the longest start at
    once and the run ends on short ones."""
    seconds = _slowest()
    module_s: dict[str, float] = {}
    for nodeid, s in seconds.items():
        module = nodeid.split("::", 1)[0]
        module_s[module] = max(module_s.get(module, 0.0), s)

    _loaded_guard(config, items)
    items.sort(key=lambda item: (item.get_closest_marker("long") is None,
                                 -module_s.get(item.nodeid.split("::", 1)[0], 0.0)))


def _fds() -> set[int]:
    try:
        return {int(n) for n in os.listdir("/proc/self/fd")}
    except OSError:
        return set()


def _leak_check(ignore=lambda thread: False):
    threads = set(threading.enumerate())
    fds = _fds()
    yield
    deadline = time.monotonic() + 2.0
    while True:
        extra = [t for t in threading.enumerate() if t not in threads and t.is_alive() and not ignore(t)]
        leaked_fds = _fds() - fds
        if not extra and not leaked_fds:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    details = []
    if extra:
        details.append(f"threads: {[t.name for t in extra]}")
    if leaked_fds:
        targets = []
        for fd in sorted(leaked_fds):
            try:
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                targets.append(str(fd))
        details.append(f"descriptors: {targets}")
    pytest.fail("test leaked " + "; ".join(details))


@pytest.fixture(autouse=True)
def no_leaks():
    """Fail the test if it leaves a thread running or a descriptor (pty, socket) open."""
    yield from _leak_check()


@pytest.fixture
def no_leaks_but():
    """The leak check with some threads ignored: ``yield from no_leaks_but(lambda t: ...)``
    in a module's own ``no_leaks`` (a tool's threads that outlive a test by design)."""
    return _leak_check


@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL cluster a test process (an xdist worker), each test taking a
    database of its own (``pg_cluster.create_database()``). Here and only here: a session
    fixture imported into several test modules is set up once for each of them (each import
    is a fixture of its own), and every floor module started and kept its own cluster."""
    from pg_server import PgCluster, pg_bin

    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed (scripts/test-deps installs it)")
    cluster = PgCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture
def sim():
    """A simulated table (both emulators on ptys), seeded, stopped after the test."""
    from simulators.table import SimulatedTable

    with SimulatedTable(seed=1234) as table:
        yield table


def pytest_terminal_summary(terminalreporter):
    """Say where the browser tests saved their screenshots (a CI artefact)."""
    folder = os.environ.get("THREECARD_SCREENSHOTS") or os.path.join(os.getcwd(), "test-artifacts", "screenshots")
    if os.path.isdir(folder) and any(name.endswith(".png") for name in os.listdir(folder)):
        terminalreporter.write_line(f"browser screenshots (final pages): {folder}")


@pytest.fixture(scope="session")
def _worker_chromium():
    """The worker's one Chromium (console_helpers.WorkerChromium), launched on first use."""
    from console_helpers import WorkerChromium, chromium_path

    path = chromium_path()
    if path is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    shared = WorkerChromium(path).start()
    yield shared
    shared.close()


@pytest.fixture
def chromium(_worker_chromium):
    """The worker's Chromium for one test: the test makes its own contexts (a person each);
    they are closed after it."""
    browser = _worker_chromium.acquire()
    try:
        yield browser
    finally:
        _worker_chromium.release()
