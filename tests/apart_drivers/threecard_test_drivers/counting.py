"""The SPEC shoe driver whose ``status()`` delivers a card's event just before it answers (a
shoe that reads a card as its count is asked): the driver's event is on its queue before
the call returns, so the table must have it before the count (``tests/test_intake_late_event.py``).
A test plugin: it may use ``devices.plugins``' SPEC driver, which a vendor's package would not."""

from __future__ import annotations

import itertools
import time
from typing import Any, Mapping

from devices.contract import CONTRACT_VERSION, FULL, DeviceEvent, DriverKind, OpenRequest
from protocols.cards import BackColour, Card
from protocols.messages import CardDrawn
from devices.plugins import SPEC


class CountsAfterACard:
    def __init__(self, inner: Any, request: OpenRequest) -> None:
        self.inner, self.request = inner, request
        self.seqs = itertools.count(1000)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def status(self) -> Any:
        reply = self.inner.status()
        seq = next(self.seqs)
        self.request.events.put(DeviceEvent(self.request.name, CardDrawn(seq % 256, Card.parse("As"), BackColour.RED),
                                            time.monotonic(), seq))
        return reply


class CountingPlugin:
    name = "counting-spec"
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
        return CountsAfterACard(inner, request)


PLUGIN = CountingPlugin()
