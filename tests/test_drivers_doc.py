"""docs/drivers.md stays true to the contract (issue 29, point 3): its reference block is the
one ``devices.reference`` generates from the code, every capability, notice and check the code
has is on the page, and the contract's kinds stay additive (point 5: a later kind, a
betting-spot sensor, fits without changing the shuffler's or the shoe's contract)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from devices import contract
from devices.conformance.drivers import DRIVER_CHECKS
from devices.reference import BEGIN, END, render

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "drivers.md"


def test_the_reference_block_is_generated_from_the_contract():
    text = DOC.read_text()
    block = text[text.index(BEGIN): text.index(END) + len(END)] + "\n"
    assert block == render(), "docs/drivers.md is stale: run `python -m devices.reference --write docs/drivers.md`"


def test_the_reference_names_every_field_of_every_event_and_link_config():
    block = render()
    for kind, messages in contract.EVENTS_BY_ROLE.items():
        for m in messages:
            line = next(x for x in block.splitlines() if x.startswith(f"- {kind}: `{m.__name__}("))
            assert all(f"{f.name}: " in line for f in fields(m)), line
    for f in fields(contract.LinkConfig):
        assert f"- `{f.name}: " in block, f.name
    for colour in contract.BackColour:
        assert f"`{colour.name}` ({colour.value})" in block


def test_the_page_names_every_capability_notice_and_check():
    text = DOC.read_text()
    table = text[text.index("## Capabilities"): text.index("## A new kind of device")]
    for cap in (f.name for f in fields(contract.Capabilities)):
        assert re.search(rf"^\| `{cap}`", table, re.M), cap
    for notice in contract.NOTICE_KINDS:
        assert f"| `{notice}` |" in text, notice
    for check in DRIVER_CHECKS:
        assert f"`{check.name}`" in text, check.id


def test_the_written_block_is_what_the_writer_writes(tmp_path):
    copy = tmp_path / "drivers.md"
    copy.write_text(DOC.read_text().replace("`DECK_SIZE` = 52", "`DECK_SIZE` = 51"))
    subprocess.run([sys.executable, "-m", "devices.reference", "--write", str(copy)], check=True, cwd=ROOT)
    assert copy.read_text() == DOC.read_text()


def test_device_kinds_are_additive():
    """Each kind has events of its own and none is another's: a later kind's events (a bet
    sensor's) cannot be taken for a card, and the existing kinds' contracts need not change."""
    assert set(contract.EVENTS_BY_ROLE) == set(contract.DriverKind)
    seen: dict[int, contract.DriverKind] = {}
    for kind, messages in contract.EVENTS_BY_ROLE.items():
        assert messages, kind
        for m in messages:
            assert m.TYPE not in seen, f"{m.__name__} is an event of both {seen[m.TYPE]} and {kind}"
            seen[m.TYPE] = kind
    for kind in contract.DriverKind:
        assert kind.device_kind.name == kind.name  # the identity a device of the kind reports
