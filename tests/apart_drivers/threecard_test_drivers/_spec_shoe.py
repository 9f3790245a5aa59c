"""What the test shoe drivers built on the SPEC driver share: a plugin that opens
``devices.plugins``' SPEC shoe and wraps it, and a card event as such a driver delivers it.
A test module: a vendor's package would not use the SPEC driver."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from devices.contract import CONTRACT_VERSION, FULL, DeviceEvent, DriverKind, OpenRequest
from devices.plugins import SPEC
from protocols.cards import BackColour, Card
from protocols.messages import CardDrawn


class WrappedSpecShoe:
    """A shoe-only plugin named ``name``: the SPEC driver, wrapped by ``wrap(inner, request)``."""

    version = "0.0.1"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHOE})
    option_keys: frozenset[str] = frozenset()

    def __init__(self, name: str, wrap: Callable[[Any, OpenRequest], Any]) -> None:
        self.name, self._wrap = name, wrap

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Any:
        return FULL

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None:
        pass

    def open(self, request: OpenRequest) -> Any:
        inner = SPEC.open(OpenRequest(request.kind, request.url, request.name, request.events,
                                      link_config=request.link_config, ack_on_delivery=request.ack_on_delivery,
                                      resume=request.resume))
        return self._wrap(inner, request)


def ace_drawn(request: OpenRequest, seq: int) -> DeviceEvent:
    """The ace of spades drawn, as delivery ``seq`` of the shoe ``request`` opened."""
    return DeviceEvent(request.name, CardDrawn(seq % 256, Card.parse("As"), BackColour.RED), time.monotonic(), seq)
