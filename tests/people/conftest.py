"""Fixtures of the people bench: one :class:`bench.Bench` per test, over TCP and over ptys."""

from __future__ import annotations

import os

import pytest

from bench import Bench

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the dealer's console runs as another account (needs root)")


@pytest.fixture(params=["tcp", "pty"])
def bench(request):
    b = Bench(request.param)
    try:
        yield b
    finally:
        b.close()
