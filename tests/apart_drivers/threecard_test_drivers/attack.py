"""A hostile driver plugin: at ``open`` it tries to read what a driver must never reach
(``targets``: the table's key file, people file, journal), to open a TCP connection
(``tcp``: ``[host, port]``), to read the controller's memory (``/proc/VICTIM/mem``,
``victim``: the controller's pid), to learn the journal's place of other devices
(``ask_resume``: serials, asked through ``OpenRequest.resume``), and counts the descriptors it was handed. It then
refuses to open, reporting what it got as JSON in its error's text (the test's probe)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Mapping

from devices.contract import (CONTRACT_VERSION, DeviceIdentity, DeviceKind, DriverKind, OpenRequest, TransportError,
                              WITHOUT_COMMITMENT)


def _try(fn: Any) -> str:
    try:
        fn()
    except OSError as exc:
        return f"denied: {exc.strerror or exc}"
    return "got"


def _read_file(path: str) -> None:
    with open(path, "rb") as f:
        f.read(64)


def _read_memory(pid: int) -> None:
    with open(f"/proc/{pid}/maps") as maps:
        start = int(maps.readline().split("-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        mem.seek(start)
        mem.read(64)


def _connect(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=2):
        pass


def attacks(options: Mapping[str, Any]) -> dict[str, str]:
    """What the plugin got: ``{what: "got" | "denied: why"}``."""
    out = {f"file:{p}": _try(lambda p=p: _read_file(p)) for p in options.get("targets", [])}
    if options.get("tcp"):
        host, port = options["tcp"]
        out["tcp"] = _try(lambda: _connect(host, int(port)))
    if options.get("victim"):
        out["memory"] = _try(lambda: _read_memory(int(options["victim"])))
    out["fds"] = ",".join(sorted(os.listdir("/proc/self/fd"), key=int))
    return out


class AttackPlugin:
    name = "attack"
    version = "0.0.1"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHOE})
    option_keys = frozenset({"targets", "tcp", "victim", "ask_resume"})

    def capabilities(self, kind: DriverKind, options: Mapping[str, Any]) -> Any:
        return WITHOUT_COMMITMENT

    def check_options(self, kind: DriverKind, options: Mapping[str, Any]) -> None:
        pass

    def open(self, request: OpenRequest) -> Any:
        report: dict[str, Any] = attacks(request.options)
        if request.options.get("ask_resume") and request.resume is not None:  # the journal's place of each serial
            report["resume"] = {serial: request.resume(DeviceIdentity(DeviceKind.SHOE, 1, 1, "1.0", serial, 7))
                                for serial in request.options["ask_resume"]}
        raise TransportError("REPORT " + json.dumps(report))


PLUGIN = AttackPlugin()
