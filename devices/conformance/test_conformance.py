"""The device conformance suite under pytest (fixtures from the ``threecard`` plugin, table/hil/pytest_plugin.py).

Against in-process emulators by default; against real devices or standalone
emulators with ``--shuffler-url``/``--shoe-url`` (or ``--shuffler-usb``/``--shoe-usb``),
when every test here is marked ``hil``::

    pytest --pyargs devices.conformance.test_conformance --shoe-url /dev/threecard/shoe --operator-prompt -s

A check whose physical step needs a person is skipped (with the step as the
reason) when nobody can do it: a skip is not a pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from devices.conformance.suite import CHECKS, PASS, SKIP, Check, Target, run_check
from protocols.messages import PROTOCOL_MAJOR, DeviceKind


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.id)
def test_device_conforms(check: Check, threecard_target: Target) -> None:
    result = run_check(check, threecard_target)
    if result.outcome == SKIP:
        pytest.skip(result.detail)
    assert result.outcome == PASS, result.detail


def test_shuffler_fixture_is_connected(threecard_shuffler: Any) -> None:  # whichever driver was named
    assert threecard_shuffler.identity.kind is DeviceKind.SHUFFLER
    assert threecard_shuffler.identity.protocol_major == PROTOCOL_MAJOR
    assert threecard_shuffler.status() is not None


def test_shoe_fixture_is_connected(threecard_shoe: Any) -> None:  # whichever driver was named
    assert threecard_shoe.identity.kind is DeviceKind.SHOE
    assert threecard_shoe.identity.protocol_major == PROTOCOL_MAJOR
    assert threecard_shoe.status() is not None
