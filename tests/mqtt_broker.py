"""A real mosquitto broker for tests: its own process, a free 127.0.0.1 port, a temp config."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path


def mosquitto_path() -> str | None:
    return shutil.which("mosquitto") or next((p for p in ("/usr/sbin/mosquitto",) if os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: where :func:`broker_port` picks: below Linux's ephemeral range (32768-60999), so no client
#: connection's own port takes a stopped broker's port before its restart on it (beside another
#: suite, a restart found "Address already in use")
BROKER_PORTS = range(20000, 32768)


def broker_port() -> int:
    """A port for a broker that may stop and start again on it: free now, and outside the
    range the kernel hands out to outgoing connections (:data:`BROKER_PORTS`)."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.choice(BROKER_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {BROKER_PORTS.start}-{BROKER_PORTS.stop - 1} after 200 tries")


class Broker:
    """mosquitto on 127.0.0.1:``port`` with persistence in ``folder`` (so a persistent
    subscriber's session and queued messages survive :meth:`stop` + :meth:`start`)."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        exe = mosquitto_path()
        if exe is None:
            raise RuntimeError("mosquitto is not installed (scripts/test-deps installs it)")
        self.exe = exe
        self.folder = folder
        self.port = port or broker_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.conf = folder / "mosquitto.conf"
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous true", "persistence true",
                 f"persistence_location {folder}/", "autosave_interval 1", "max_queued_messages 0",
                 "log_dest stderr", "log_type error", "log_type warning"]
        if os.geteuid() == 0:
            lines.append("user root")  # else mosquitto drops to user 'mosquitto', who cannot write the folder
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None
        self.log = folder / "mosquitto.log"

    def start(self, timeout_s: float = 10.0) -> "Broker":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.exe, "-c", str(self.conf)], stdout=log, stderr=log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        """SIGTERM (mosquitto saves its persistence file), then wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


DOC = Path(__file__).resolve().parent.parent / "docs" / "integration.md"


def documented_bridge(central_port: int, prefix: str = "site-a/") -> str:
    """The two-broker bridge config of docs/integration.md ("A two-broker bridge"), as the pit's
    broker runs it, pointed at a central broker on 127.0.0.1:``central_port`` (anonymous here:
    the account lines dropped) with topic prefix ``prefix``."""
    import re

    (block,) = re.findall(r"^```\n(# bridge:.*?)^```", DOC.read_text(), flags=re.S | re.M)
    lines = []
    for line in block.splitlines():
        if line.startswith(("remote_username", "remote_password", "#")):
            continue
        if line.startswith("address "):
            line = f"address 127.0.0.1:{central_port}"
        lines.append(line.replace("site-a/", prefix))
    return "\n".join(lines) + "\n"


def start_bridged(folder: Path, prefix: str = "site-a/", timeout_s: float = 20.0) -> tuple[Broker, Broker]:
    """Two real mosquitto brokers, ``(edge, central)``: the edge (where tables publish) bridges
    ``threecard/#`` out to the central one under ``prefix``, with the documented config.
    Returns once a message published on the edge has reached the central broker."""
    import paho.mqtt.client as mqtt

    central = Broker(folder / "central").start()
    edge = Broker(folder / "edge")
    edge.conf.write_text(edge.conf.read_text() + documented_bridge(central.port, prefix))
    try:
        edge.start()
        got = []
        sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bridge-probe-{os.getpid()}-{time.monotonic_ns()}")
        sub.on_connect = lambda c, u, f, rc, p=None: c.subscribe(f"{prefix}threecard/probe/#", 1)
        sub.on_message = lambda c, u, m: got.append(m.topic)
        sub.connect("127.0.0.1", central.port, 5)
        sub.loop_start()
        pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"bridge-probe-pub-{os.getpid()}")
        pub.connect("127.0.0.1", edge.port, 5)
        pub.loop_start()
        try:
            deadline = time.monotonic() + timeout_s
            while not got:  # the bridge connects on its own time: probe until a message crosses it
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the bridge did not carry a message within {timeout_s} s: "
                                       f"{edge.log.read_text()[-2000:]}")
                pub.publish("threecard/probe/probe/events", b"probe", qos=1)
                time.sleep(0.2)
        finally:
            for c in (sub, pub):
                c.disconnect()
                c.loop_stop()
                getattr(c, "_reset_sockets", lambda: None)()
    except BaseException:
        edge.stop()
        central.stop()
        raise
    return edge, central
