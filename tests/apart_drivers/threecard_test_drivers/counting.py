"""The SPEC shoe driver whose ``status()`` delivers a card's event just before it answers (a
shoe that reads a card as its count is asked): the driver's event is on its queue before
the call returns, so the table must have it before the count (``tests/test_intake_late_event.py``).
A test plugin: it may use ``devices.plugins``' SPEC driver, which a vendor's package would not."""

from __future__ import annotations

import itertools
from typing import Any

from devices.contract import OpenRequest

from ._spec_shoe import WrappedSpecShoe, ace_drawn


class CountsAfterACard:
    def __init__(self, inner: Any, request: OpenRequest) -> None:
        self.inner, self.request = inner, request
        self.seqs = itertools.count(1000)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def status(self) -> Any:
        reply = self.inner.status()
        seq = next(self.seqs)
        self.request.events.put(ace_drawn(self.request, seq))
        return reply


PLUGIN = WrappedSpecShoe("counting-spec", CountsAfterACard)
