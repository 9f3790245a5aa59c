"""Issue 26, point 6: ``tablectl run`` imports a front door (the control socket, the
API dispatcher and its JSON Schemas, the web, MQTT, the event stream) only when an
option asks for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: what the run loaded, written to stderr's last line as it exits
PROBE = ("import atexit, json, sys\n"
         "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
         "from table.cli import main\n"
         "main()\n")
FRONT_DOORS = ("jsonschema", "table.interfaces.control_socket", "table.interfaces.dispatch",
               "table.interfaces.serving", "table.interfaces.web", "table.interfaces.mqtt",
               "table.interfaces.event_socket", "table.interfaces.terminal")


def loaded(tmp_path: Path, *extra: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, "run", "--simulate", "--rounds", "1", "--seats", "1",
                           "--seed", "1", "--json", "--journal", str(tmp_path / "j.sqlite3"),
                           "--log-file", str(tmp_path / "run.log"), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["rounds"], "no round dealt"
    line = next(x for x in reversed(proc.stderr.splitlines()) if x.startswith("MODULES "))
    return set(json.loads(line[len("MODULES "):]))


def test_a_plain_journaled_run_imports_no_front_door(tmp_path):
    mods = loaded(tmp_path)
    assert "table.journal" in mods and "table.cli.run" in mods  # the probe sees the run's own modules
    assert not [m for m in FRONT_DOORS if m in mods]


def test_the_control_socket_option_brings_its_door_and_the_dispatcher(tmp_path):
    mods = loaded(tmp_path, "--control-socket", str(tmp_path / "c.sock"))
    assert {"table.interfaces.control_socket", "table.interfaces.dispatch", "jsonschema"} <= mods
    assert "table.interfaces.web" not in mods
