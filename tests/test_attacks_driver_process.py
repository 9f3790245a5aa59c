"""Attacks by a driver plugin on the table (docs/drivers.md, "What a driver can reach").

A plugin package installed beside the table, as docs/drivers.md tells a vendor to ship
one, tries at ``open`` to read the table's key file, its people file and its journal, to
open a TCP connection, and to read the controller's memory (``/proc/PID/mem``). In the
table's own process it gets all of them (the control: the attack is real). In its
driver process, started by a table in service mode (root), it gets none: its own user
and group, no network, not dumpable, no descriptor of the table's
(devices/apart/isolation.py). Each test fails without that isolation.
"""

from __future__ import annotations

import json
import os
import queue
import socket
from pathlib import Path

import pytest

from devices.apart import open_apart
from devices.apart.choose import isolation_for
from devices.contract import DriverKind, OpenRequest, TransportError
from table.files import write_atomic
from table.journal import Journal
from table.keys import generate, save

PLUGINS = str(Path(__file__).parent / "apart_drivers")


@pytest.fixture(autouse=True, scope="module")
def _plugins_a_confined_driver_can_read():
    """The test plugins where a confined driver's user can read them (as a vendor's package
    is installed, world-readable): a checkout in a private folder (a fresh clone in
    /tmp/fresh-clone.XXXX, 0700) is not, nor pytest's own temporary folder."""
    global PLUGINS
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="threecard-plugins-"))
    os.chmod(folder, 0o755)
    copy = folder / "apart_drivers"
    shutil.copytree(Path(__file__).parent / "apart_drivers", copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for root, dirs, files in os.walk(copy):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    before, PLUGINS = PLUGINS, str(copy)
    try:
        yield
    finally:
        PLUGINS = before
        shutil.rmtree(folder, ignore_errors=True)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a table drops its drivers' privileges only as root")


@pytest.fixture
def table_files():
    """The table's files as the service keeps them: the key (0600), the people file (0640),
    the journal (0600), in a folder every user may traverse, up to ``/`` (a fresh
    ``/tmp`` folder, 0755: never pytest's own temporary folder, 0700, where the folder
    alone would stop another user and a test would pass without the driver's isolation):
    only the files' own modes and the driver process's user and groups decide."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="threecard-state-"))
    try:
        yield from _table_files(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _table_files(folder: Path):
    state = folder / "state"
    state.mkdir()
    os.chmod(folder, 0o755)
    os.chmod(state, 0o755)
    walk = state
    while walk != walk.parent:  # every folder above is one another user may traverse
        assert os.stat(walk).st_mode & 0o001, f"{walk} is closed to other users: the test would prove nothing"
        walk = walk.parent
    key = generate()
    key_path, _ = save(key, state / "table.key")
    people = state / "people.toml"
    write_atomic(people, b'[people.d1]\nrole = "dealer"\npin = "$argon2id$..."\n', mode=0o640)
    journal = Journal(state / "journal.sqlite3", key=key)
    journal.close()
    modes = {p.name: oct(os.stat(p).st_mode & 0o777) for p in (key_path, people, state / "journal.sqlite3")}
    assert modes == {"table.key": "0o600", "people.toml": "0o640", "journal.sqlite3": "0o600"}, modes
    with socket.create_server(("127.0.0.1", 0)) as server:  # what a plugin would phone home to
        yield {"targets": [str(key_path), str(people), str(state / "journal.sqlite3")],
               "tcp": ["127.0.0.1", server.getsockname()[1]], "victim": os.getpid()}


def _attack_in_process(options) -> dict:
    from threecard_test_drivers.attack import attacks  # noqa: PLC0415 - the control: the plugin in the table

    return attacks(options)


def _attack_apart(options, *, service: bool) -> dict:
    request = OpenRequest(DriverKind.SHOE, "/dev/null", "shoe", queue.Queue(), options=options)
    with pytest.raises(TransportError) as caught:  # the plugin's report comes back as its open's error
        open_apart("threecard_test_drivers.attack:PLUGIN", request, paths=(PLUGINS,),
                   isolation=isolation_for(request, service=service))
    text = str(caught.value)
    return json.loads(text[text.index("REPORT ") + 7:])


@pytest.fixture
def in_process(monkeypatch):
    monkeypatch.syspath_prepend(PLUGINS)


def test_in_the_tables_own_process_a_plugin_reaches_the_key_people_journal_network_and_memory(table_files,
                                                                                              in_process):
    got = _attack_in_process(table_files)
    assert {k: v for k, v in got.items() if k != "fds"} == dict.fromkeys(
        [f"file:{p}" for p in table_files["targets"]] + ["tcp", "memory"], "got")


def test_a_plugin_in_its_service_driver_process_cannot_open_the_key_people_or_journal_files(table_files):
    got = _attack_apart(table_files, service=True)
    for path in table_files["targets"]:
        assert got[f"file:{path}"].startswith("denied"), (path, got)


def test_a_plugin_in_its_service_driver_process_cannot_open_a_tcp_socket(table_files):
    got = _attack_apart(table_files, service=True)
    assert got["tcp"].startswith("denied"), got


def test_a_plugin_in_its_service_driver_process_cannot_read_the_controllers_memory(table_files):
    got = _attack_apart(table_files, service=True)
    assert got["memory"].startswith("denied"), got


def test_a_plugin_in_its_driver_process_holds_no_descriptor_of_the_tables(table_files):
    """0, 1, 2 (/dev/null), its socket to the table, its device opener (its device's url is
    a path: the table hands it its node, docs/drivers.md), and the one listing /proc/self/fd."""
    keep = open(table_files["targets"][2], "rb")  # the table holds its journal open, inheritable
    os.set_inheritable(keep.fileno(), True)
    try:
        got = _attack_apart(table_files, service=False)
    finally:
        keep.close()
    assert len(got["fds"].split(",")) == 6, got["fds"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the service isolation drops root: run as root (CI does)")
def _open_a_confined_shoe_driver_beside(tmp_path: Path, plant, marker: Path):
    """A vendor's plugin installed the way the docs warn against: beside the table, in a venv
    whose site-packages ``plant(site_dir)`` fills with what the attacker ships (each writing
    to ``marker``, writable by anyone so that a confined driver could write it too). A script
    in that venv opens the test plugin's shoe driver apart, confined as in service mode;
    returns the finished process (its stdout says whether the open was refused)."""
    import subprocess
    import sys
    import sysconfig
    import textwrap
    import venv

    os.chmod(tmp_path, 0o755)  # the confined driver reads the venv's site-packages
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site_dir = Path(subprocess.run([str(env_dir / "bin" / "python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    marker.touch(mode=0o666)
    os.chmod(marker, 0o666)  # a confined driver could write here: the test sees where it ran
    plant(site_dir)
    repo = str(Path(__file__).resolve().parent.parent)
    ours = [p for p in sys.path if p] + [sysconfig.get_paths()["purelib"]]
    script = textwrap.dedent(f"""
        import queue, sys
        sys.path[:0] = {[repo, *ours]!r}
        from devices.apart import open_apart
        from devices.apart.choose import isolation_for
        from devices.contract import DriverKind, OpenRequest
        from simulators.table import SimulatedTable
        from protocols.cards import BackColour
        with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=3) as sim:
            request = OpenRequest(DriverKind.SHOE, sim.shoe_url, "shoe", queue.Queue(), options={{"mode": "raise"}})
            try:  # confined to another user, the driver cannot open the emulator's pty: refused, said
                open_apart("threecard_test_drivers.flaky:PLUGIN", request, paths=({PLUGINS!r},),
                           isolation=isolation_for(request, service=True)).close()
            except Exception as exc:
                print("refused:", type(exc).__name__)
        """)
    return subprocess.run([str(env_dir / "bin" / "python"), "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)



def test_a_plugins_pth_file_never_runs_in_the_driver_process_before_it_is_confined(tmp_path):
    """A fresh attacker's plugin wheel ships a ``*.pth`` file into site-packages: Python's
    ``site`` module runs it at every interpreter start, as root, before the driver process
    confines itself. The driver process starts without ``site`` (``-S``), so the file does
    not run there (the table's own interpreter still reads it: docs/drivers.md says to
    install vendor drivers in a prefix of their own)."""
    def plant(site_dir: Path) -> None:
        (site_dir / "zz_evil.pth").write_text(
            f"import os; open({str(marker)!r}, 'a').write(str(os.getuid()) + ' ' + open('/proc/self/cmdline').read()"
            f".replace(chr(0), ' ').replace(chr(10), ' ') + chr(10))\n")

    marker = tmp_path / "pth-ran"
    r = _open_a_confined_shoe_driver_beside(tmp_path, plant, marker)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = marker.read_text().splitlines()
    assert lines, "the .pth file was not read at all: the test proves nothing"
    # the table's own start (the venv's lib64 link: read twice); in a driver process only once
    # it is confined (another user), never as root
    assert [line for line in lines if "open_apart" in line], lines
    assert not [line for line in lines if "open_apart" not in line and line.split()[0] == "0"], lines


def test_a_shoe_driver_asking_the_journals_place_of_another_device_learns_nothing():
    """A reviewer's finding: the resume query (``OpenRequest.resume``, asked by a driver
    process over the wire at its handshake) answered for any serial, so a shoe's driver
    learned how far the journal holds the shuffler's events. It answers only for the link's
    own device (table.recovery.DeviceCursor.resume_for, what the assembly passes)."""
    from table.recovery import DeviceCursor

    cursor = DeviceCursor({"by_serial": {"SHUF-1": {"boot_id": 7, "seq": 41}, "SHOE-1": {"boot_id": 7, "seq": 5}},
                           "by_source": {"shuffler": {"serial": "SHUF-1", "boot_id": 7},
                                         "shoe": {"serial": "SHOE-1", "boot_id": 7}}})
    request = OpenRequest(DriverKind.SHOE, "socket://127.0.0.1:9", "shoe", queue.Queue(),
                          options={"ask_resume": ["SHUF-1", "SHOE-1"]}, resume=cursor.resume_for("shoe"))
    with pytest.raises(TransportError) as caught:
        open_apart("threecard_test_drivers.attack:PLUGIN", request, paths=(PLUGINS,))
    text = str(caught.value)
    got = json.loads(text[text.index("REPORT ") + 7:])["resume"]
    assert got == {"SHUF-1": None, "SHOE-1": 5}
    # a device new to the link (replaced) is answered as before; the shuffler's link still gets its own
    assert cursor.resume_for("shuffler")(_ident("SHUF-1")) == 41
    assert cursor.resume_for("shoe")(_ident("SHUF-1")) is None


def _ident(serial: str):
    from devices.contract import DeviceIdentity, DeviceKind

    return DeviceIdentity(DeviceKind.SHOE, 1, 1, "1.0", serial, 7)


def test_a_plugin_module_named_as_the_standard_librarys_never_runs_before_the_driver_is_confined(tmp_path):
    """A fresh attacker's plugin wheel ships a top-level ``argparse.py`` (or ``resource.py``,
    ``socket.py``: any standard module the driver host imports) into site-packages. The
    table's own interpreter never imports it (the standard library comes first on its path),
    but the driver process's import path put site-packages first, so the host imported the
    plugin's module, as root and with the network, before it confined itself."""
    def plant(site_dir: Path) -> None:
        for name in ("argparse", "resource"):
            (site_dir / f"{name}.py").write_text(
                f"import os\nopen({str(marker)!r}, 'a').write({name!r} + ' ' + str(os.getuid()) + chr(10))\n")

    marker = tmp_path / "shadow-ran"
    r = _open_a_confined_shoe_driver_beside(tmp_path, plant, marker)
    assert r.returncode == 0, r.stderr[-2000:]
    assert marker.read_text() == "", marker.read_text()  # neither module of the plugin's was imported
