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

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a table drops its drivers' privileges only as root")


@pytest.fixture
def table_files(tmp_path):
    """The table's files as the service keeps them: the key (0600), the people file (0640),
    the journal (0600), in a folder anyone may traverse (so the files' own modes decide)."""
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(state, 0o755)
    key = generate()
    key_path, _ = save(key, state / "table.key")
    people = state / "people.toml"
    write_atomic(people, b'[people.d1]\nrole = "dealer"\npin = "$argon2id$..."\n', mode=0o640)
    journal = Journal(state / "journal.sqlite3", key=key)
    journal.close()
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
    """0, 1, 2 (/dev/null), its socket to the table, and the one listing /proc/self/fd."""
    keep = open(table_files["targets"][2], "rb")  # the table holds its journal open, inheritable
    os.set_inheritable(keep.fileno(), True)
    try:
        got = _attack_apart(table_files, service=False)
    finally:
        keep.close()
    assert len(got["fds"].split(",")) == 5, got["fds"]
