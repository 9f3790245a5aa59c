"""Test driver plugins: one that fails on purpose (:mod:`.flaky`), one that attacks the table (:mod:`.attack`)."""

__version__ = "0.0.1"
