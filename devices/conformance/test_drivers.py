"""The drivers' suite under pytest (devices/conformance/drivers.py, fixtures of the ``threecard``
plugin): a device driven by a driver plugin, on a bench or behind a driver package's emulator::

    pytest --pyargs devices.conformance.test_drivers --shoe-driver ascii-shoe \\
        --shoe-url socket://127.0.0.1:7001 --shoe-control 127.0.0.1:7002

Without a device named every check is skipped (nothing under test: a skip is not a pass);
the project's own run checks the drivers in tests/test_driver_plugins.py and the example
package's tests.
"""

from __future__ import annotations

from typing import Callable

import pytest

from devices.conformance.drivers import DRIVER_CHECKS, DriverCheck, DriverTarget, run_driver_check
from devices.conformance.suite import SKIP, PASS


@pytest.mark.parametrize("check", DRIVER_CHECKS, ids=lambda c: c.id)
def test_driver_conforms(check: DriverCheck, threecard_driver_target: Callable[[str], DriverTarget | None]) -> None:
    target = threecard_driver_target(check.kind)
    if target is None:
        pytest.skip(f"no {check.kind} under test (give --{check.kind}-url and --{check.kind}-driver)")
    result = run_driver_check(check, target)
    if result.outcome == SKIP:
        pytest.skip(result.detail)
    assert result.outcome == PASS, result.detail
