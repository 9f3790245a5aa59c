"""docs/console.md: its Python examples run as written against `tablectl run --simulate` with a
control socket and the web front door, and its TOML sections are valid config."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from console_helpers import wait_until, web_url_in_log
from hil_helpers import CLI

from table.config import parse_config
from table.interfaces.auth import PeopleFile
from table.roles import Role

DOC = Path(__file__).resolve().parent.parent / "docs" / "console.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.mark.long
def test_python_examples_run_against_a_simulated_table(tmp_path):
    os.chmod(tmp_path, 0o700)
    people = tmp_path / "people.toml"
    PeopleFile(people).add("D-4", Role.DEALER, "482913")
    control, log = tmp_path / "control.sock", tmp_path / "run.log"
    # --web on port 0: the table picks a free port itself and logs it (web_listening); a port found
    # free beforehand could meanwhile be another process's on a loaded machine
    proc = subprocess.Popen(CLI + ["run", "--simulate", "--rounds", "100000", "--seed", "2", "--seats", "2",
                                   "--journal", str(tmp_path / "journal.sqlite3"), "--control-socket", str(control),
                                   "--web", "127.0.0.1:0", "--people-file", str(people),
                                   "--log-file", str(log), "--json"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base_url = wait_until(lambda: web_url_in_log(proc, log), 60, "the table's web front door")

        def first_round() -> bool:  # up once the first event is journaled
            assert proc.poll() is None, proc.stderr.read().decode()
            return "round_open" in log.read_text()

        wait_until(first_round, 60, "the table's first round")
        # the control socket opens before the web door
        assert control.exists()
        namespace = {"__name__": "console_doc", "CONTROL_SOCKET": control, "BASE_URL": base_url}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for block in blocks("python"):
                exec(compile(block, str(DOC), "exec"), namespace)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        proc.stderr.close()
    text = out.getvalue()
    assert "on the socket I am root as supervisor" in text
    assert "no session: (401" in text and "a dealer voids: 403" in text
    assert "websocket: {'id': 1, 'ok': True, 'person': 'D-4', 'role': 'dealer'" in text


def test_toml_examples_are_valid_config():
    base = ('[table]\nid = "pit2-tcp-07"\nseats = 3\n[devices.shuffler]\nurl = "/dev/a"\n'
            '[devices.shoe]\nurl = "/dev/b"\n')
    sections = blocks("toml")
    assert len(sections) >= 2
    cfg = parse_config(base + "\n".join(sections))
    assert cfg.roles.seats[2] == "threecard-seat3" and cfg.web.listen == "0.0.0.0:8443"
    assert cfg.auth.session_idle_s == 900 and cfg.console.socket_group == "threecard-console"


def test_the_terminal_keys_in_the_docs_are_the_ones_the_terminal_prints():
    """docs/console.md's "Terminal keys" block is the terminal's own help, line for line (a dealer
    reading the docs finds every key the terminal takes, the training `d` and the gaming day's lines too)."""
    from table.interfaces.terminal import KEYS_HELP

    section = DOC.read_text().split("## Terminal keys", 1)[1]
    documented = re.search(r"```\n(.*?)\n```", section, flags=re.S).group(1)
    assert documented.splitlines() == KEYS_HELP.splitlines()[1:]
