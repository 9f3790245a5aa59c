"""The SPEC shoe driver that delivers something that is no device event (a string) on its
event queue as its count is asked, then answers the count (``tests/test_drivers_apart_faults.py``).
A test plugin: it may use ``devices.plugins``' SPEC driver, which a vendor's package would not."""

from __future__ import annotations

from typing import Any

from devices.contract import OpenRequest

from ._spec_shoe import WrappedSpecShoe


class JunkAtCount:
    def __init__(self, inner: Any, request: OpenRequest) -> None:
        self.inner, self.request = inner, request

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def status(self) -> Any:
        reply = self.inner.status()
        self.request.events.put("a card, honestly")
        return reply


PLUGIN = WrappedSpecShoe("junk-spec", JunkAtCount)
