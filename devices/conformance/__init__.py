"""Device conformance suite (protocols/SPEC.md) for real devices and emulators.

:mod:`devices.conformance.suite` holds the checks; ``tablectl conformance``
runs them outside pytest, and ``devices/conformance/test_conformance.py``
runs them under pytest with the ``threecard`` plugin (``table.hil.pytest_plugin``)::

    pytest --pyargs devices.conformance.test_conformance                      # in-process emulators
    pytest --pyargs devices.conformance.test_conformance --shoe-url /dev/ttyUSB0 --operator-prompt -s
"""

from .suite import (CHECKS, Check, CheckResult, ControlOperator, Operator, PromptOperator, Target, checks_for,
                    run_check, run_suite)

__all__ = ["CHECKS", "Check", "CheckResult", "ControlOperator", "Operator", "PromptOperator", "Target",
           "checks_for", "run_check", "run_suite"]
