"""What a conformance check can end in, shared by the SPEC suite (``suite.py``), the drivers'
suite (``drivers.py``) and the shufflers' fault checks both run (``shuffler_faults.py``).

Imports nothing of the project.
"""

from __future__ import annotations

PASS, FAIL, SKIP = "pass", "fail", "skip"


class CheckFailed(AssertionError):
    """The device did not do what the SPEC says; the message says what it did."""


class NeedsOperator(Exception):
    """A physical step needs a person (or an emulator's control) and none is available."""


class OperatorError(RuntimeError):
    """The operator could not carry out a physical step (an emulator's control refused it)."""


def expect(ok: bool, what: str) -> None:
    """Raise :class:`CheckFailed` with ``what`` unless ``ok``."""
    if not ok:
        raise CheckFailed(what)


__all__ = ["FAIL", "PASS", "SKIP", "CheckFailed", "NeedsOperator", "OperatorError", "expect"]
