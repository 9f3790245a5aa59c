"""Deterministic kill points for the crash tests.

A crash test starts the real controller process with ``THREECARD_TEST_KILL_AT``
set to a point's name (``closed``, ``procedure_journaled``, ...) or to
``NAME:DETAIL`` (``procedure_journaled:fill``: only that procedure's); the
process SIGKILLs itself the first time it gets there, so the kill lands at an
exact step of a procedure instead of at a time a test guesses. Unset (every
production start), :func:`reached` only reads the environment.
"""

from __future__ import annotations

import os
import signal

__all__ = ["KILL_ENV", "reached"]

#: crash tests only: the point (``NAME`` or ``NAME:DETAIL``) at which the process SIGKILLs itself
KILL_ENV = "THREECARD_TEST_KILL_AT"


def reached(name: str, detail: str | None = None) -> None:
    """The process is at point ``name`` (``detail``: which procedure, say): SIGKILL it
    when :data:`KILL_ENV` names this point. Returns otherwise."""
    want = os.environ.get(KILL_ENV)
    if want and (want == name or (detail is not None and want == f"{name}:{detail}")):
        os.kill(os.getpid(), signal.SIGKILL)
