"""The ``tablectl`` group: every subcommand is reachable, and ``--help`` loads none of them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from table.cli import COMMANDS, main
from table.cli.options import PROFILE_NAMES
from table.rules.profiles import PROFILES


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_subcommand_loads_under_its_name_with_the_listed_help(name):
    spec, short = COMMANDS[name]
    module, attr = spec.split(":")
    cmd = getattr(importlib.import_module(module), attr)
    assert cmd.name == name
    assert cmd.get_short_help_str(200) == main.get_command(None, name).get_short_help_str(200)
    # the line `tablectl --help` shows without importing the command is the command's own
    import click
    assert click.Command(name, help=short).get_short_help_str(80) == cmd.get_short_help_str(80)


def test_profile_choices_are_the_rules_profiles():
    assert sorted(PROFILE_NAMES) == sorted(PROFILES)


def test_help_imports_no_subcommand_module():
    # table.cli.exits (the exit-code contract the group applies) is no subcommand.
    code = ("import sys; from table.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('table.cli.', 'devices', 'firmware_bridge', "
            "'simulators', 'table.controller')) and m != 'table.cli.exits'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", out
    assert "run " in out and "soak " in out  # the commands are still listed


@pytest.mark.parametrize("module", ["table.cli"])
def test_python_dash_m_runs_tablectl(module):
    out = subprocess.run([sys.executable, "-m", module, "hand", "As", "Kd", "Qh"], capture_output=True, text=True,
                         check=True).stdout
    assert "straight" in out.lower()
