"""The SPEC driver, failing on purpose: ``mode`` ``raise`` (a ``ValueError``), ``hang`` (never
answers), ``exit`` (its process ends), ``forge`` (a line of its own on the table's
socket), ``card`` (a well-formed card drawn written there by a shuffler's driver) or
``deep`` (a line nested past the interpreter's depth) in ``status()``; ``die``: its process
ends a moment after each start, whatever the table asks (a crash loop); with ``arm_file`` once, when the
test has made that file (it is removed as the driver fails), without it in every call. A test plugin: it may use ``devices.plugins``' SPEC
driver, which a vendor's package would not."""

from __future__ import annotations

import os
import threading
from typing import Any, Mapping

from devices.contract import CONTRACT_VERSION, FULL, DriverKind, DriverOptionError, OpenRequest
from protocols.cards import BackColour, Card
from protocols.messages import CardDrawn
from devices.plugins import SPEC


class Flaky:
    def __init__(self, inner: Any, mode: str, arm_file: str) -> None:
        self.inner, self.mode, self.arm_file = inner, mode, arm_file

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _due(self) -> bool:
        if not self.arm_file:
            return True
        try:
            os.unlink(self.arm_file)
        except FileNotFoundError:
            return False
        return True

    def status(self) -> Any:
        if self._due():
            if self.mode == "raise":
                raise ValueError("register 0x17 reads Q♠")  # text a table must never show
            if self.mode == "hang":
                threading.Event().wait()
            if self.mode == "exit":
                os._exit(3)
            if self.mode in ("forge", "card", "deep"):  # writes to the table's socket itself, past its wire
                line = {"forge": b'{"t": "event", "ev": {"seq": 1}}\n',
                        # a well-formed card drawn, from a shuffler's driver (only a shoe reads cards)
                        "card": b'{"t": "event", "link": {"state": "up"}, "ev": {"seq": 1, "boot": 1, "at": 0.0, "msg": {"m": %d, "p": "%s"}}}\n'
                                % (CardDrawn.TYPE, CardDrawn(0, Card.parse("As"), BackColour.RED).encode().hex().encode()),
                        # nested past the interpreter's depth: json.loads raises RecursionError
                        "deep": b"[" * 40000 + b"\n"}[self.mode]
                for fd in os.listdir("/proc/self/fd"):
                    try:
                        if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                            os.write(int(fd), line)
                    except OSError:
                        pass
        return self.inner.status()


class FlakyPlugin:
    name = "flaky-spec"
    version = "0.0.1"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHUFFLER, DriverKind.SHOE})
    option_keys = frozenset({"mode", "arm_file"})

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Any:
        return FULL

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None:
        if options.get("mode", "raise") not in ("raise", "hang", "exit", "forge", "card", "deep", "die"):
            raise DriverOptionError(f"devices.{kind}.mode", "one of raise, hang, exit, forge, card, deep, die")

    def open(self, request: OpenRequest) -> Any:
        o = request.options
        inner = SPEC.open(OpenRequest(request.kind, request.url, request.name, request.events,
                                      link_config=request.link_config, ack_on_delivery=request.ack_on_delivery,
                                      resume=request.resume))
        if o.get("mode") == "die":  # a crash loop: gone a moment after its ready, at every start
            threading.Timer(0.05, os._exit, args=(3,)).start()
        return Flaky(inner, str(o.get("mode", "raise")), str(o.get("arm_file", "")))


PLUGIN = FlakyPlugin()
