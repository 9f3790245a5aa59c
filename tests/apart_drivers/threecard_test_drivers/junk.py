"""The SPEC shoe driver that delivers something that is no device event (a string) on its
event queue as its count is asked, then answers the count (``tests/test_drivers_apart_faults.py``).
A test plugin: it may use ``devices.plugins``' SPEC driver, which a vendor's package would not."""

from __future__ import annotations

from typing import Any, Mapping

from devices.contract import CONTRACT_VERSION, FULL, DriverKind, OpenRequest
from devices.plugins import SPEC


class JunkAtCount:
    def __init__(self, inner: Any, request: OpenRequest) -> None:
        self.inner, self.request = inner, request

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def status(self) -> Any:
        reply = self.inner.status()
        self.request.events.put("a card, honestly")
        return reply


class JunkPlugin:
    name = "junk-spec"
    version = "0.0.1"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHOE})
    option_keys: frozenset[str] = frozenset()

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Any:
        return FULL

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None:
        pass

    def open(self, request: OpenRequest) -> Any:
        inner = SPEC.open(OpenRequest(request.kind, request.url, request.name, request.events,
                                      link_config=request.link_config, ack_on_delivery=request.ack_on_delivery,
                                      resume=request.resume))
        return JunkAtCount(inner, request)


PLUGIN = JunkPlugin()
