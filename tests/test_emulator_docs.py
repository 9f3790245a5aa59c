"""docs/emulators.md's seeded example shows what the emulator prints (issue 19: it showed
cards the emulator does not produce). The example block is run and compared line by line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hil_helpers import CLI

DOC = Path(__file__).resolve().parents[1] / "docs" / "emulators.md"


def _example() -> tuple[list[str], list[str], list[str]]:
    """(command-line arguments, stdin lines, expected stdout lines) of the first $ tablectl emulate block."""
    text = DOC.read_text()
    block = re.search(r"```\n\$ tablectl (emulate [^\n]*)\n(.*?)```", text, re.S)
    assert block, "no example block in docs/emulators.md"
    args = block.group(1).split()
    lines = block.group(2).strip().splitlines()
    inputs = [line for line in lines[1:] if not line.startswith(("ok ", "error "))]
    outputs = [lines[0]] + [line for line in lines[1:] if line.startswith(("ok ", "error "))]
    return args, inputs, outputs


def test_the_seeded_example_prints_what_the_doc_says():
    args, inputs, expected = _example()
    proc = subprocess.run([*CLI, *args], input="\n".join(inputs + ["quit"]) + "\n", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = proc.stdout.splitlines()
    assert re.fullmatch(r"socket://127\.0\.0\.1:\d+", got[0]) and expected[0].startswith("socket://127.0.0.1:")
    assert got[1:len(expected)] == expected[1:]
