"""Conformance targets: in-process emulators, or devices named by URL (hardware in the loop).

Shared by the pytest plugin (:mod:`table.hil.pytest_plugin`) and ``tablectl
conformance``. This lives in ``table/`` because it joins both ends: the
device emulators (``simulators``, which must never import the host side)
and the host's drivers (``devices``, which must not depend on emulators).
"""

from __future__ import annotations

import random
import secrets
from contextlib import ExitStack

from devices.conformance.suite import (CONFORMANCE_LINK, ControlOperator, Operator, OperatorError, PromptOperator,
                                       Target)
from firmware_bridge.link import LinkConfig
from firmware_bridge.usb import UsbSelector
from protocols.cards import BackColour
from protocols.messages import PROTOCOL_MAJOR, PROTOCOL_MINOR, DeviceKind

#: Where in-process emulators run for the conformance suite.
EMULATOR_TRANSPORTS = ("pty", "usb")


class EmulatorOperator(Operator):
    """The in-process emulators' own hands: physical steps call the emulators
    directly. Raises :class:`OperatorError` when the emulator refuses a step."""

    name = "in-process emulators"

    def __init__(self, shuffler, shoe, rng: random.Random) -> None:
        self.shuffler, self.shoe, self.rng = shuffler, shoe, rng

    def _do(self, fn, *args):
        from simulators.devices import DeviceRefused

        try:
            return fn(*args)
        except DeviceRefused as exc:
            raise OperatorError(str(exc)) from None

    def insert_deck(self, colour: BackColour) -> None:
        from simulators.devices import new_deck

        self._do(self.shuffler.insert, new_deck(colour))

    def take_deck(self) -> None:
        self._do(self.shuffler.take)

    def load_shoe(self, colour: BackColour) -> None:
        from simulators.devices import new_deck

        self.shoe.unload()
        cards = new_deck(colour)
        self.rng.shuffle(cards)
        self._do(self.shoe.load, cards)

    def draw(self, n: int) -> None:
        for _ in range(n):
            self._do(self.shoe.draw)

    def unload_shoe(self) -> None:
        self.shoe.unload()

    def insert_faulty_deck(self, colour: BackColour, *, missing=(), doubled=(), foreign: int = 0) -> None:
        from simulators.devices import SimCard, new_deck

        other = BackColour.BLUE if colour is not BackColour.BLUE else BackColour.RED
        cards = [c for c in new_deck(colour) if c.card not in missing]
        cards += [SimCard(c, colour) for c in doubled] + [SimCard(c.card, other) for c in new_deck(other)[:foreign]]
        self._do(self.shuffler.insert, cards)

    def jam(self) -> None:
        self.shuffler.faults.jam_next_shuffle = True

    def door(self, open_: bool) -> None:
        self.shuffler.faults.door_open = open_

    def hold_shuffle(self) -> None:
        self.shuffler.faults.hold_shuffle = True

    def reboot(self, device: str) -> None:
        (self.shuffler if device == "shuffler" else self.shoe).reboot()

    def garble(self, device: str, n: int) -> None:
        (self.shuffler if device == "shuffler" else self.shoe).garble_frames = n

    def lose(self, device: str, n: int) -> None:
        (self.shuffler if device == "shuffler" else self.shoe).lose_events = n


class InProcessBench:
    """A shuffler and a shoe emulator in this process, on ptys or emulated USB; a
    context manager whose :attr:`target` the conformance suite runs against.

    ``protocol_major``: what the emulators claim (another than the host's makes
    a non-conforming pair, to see the suite fail). Raises ``ValueError`` for an
    unknown transport and ``OSError`` when a pty cannot be made.
    """

    def __init__(self, *, transport: str = "pty", seed: int | None = None,
                 protocol_major: int = PROTOCOL_MAJOR, config: LinkConfig = CONFORMANCE_LINK) -> None:
        if transport not in EMULATOR_TRANSPORTS:
            raise ValueError(f"transport {transport!r}: choose one of {', '.join(EMULATOR_TRANSPORTS)}")
        from simulators.devices import ShoeEmulator, ShufflerEmulator
        from simulators.pty_port import PtyPort
        from simulators.table import SHOE_SERIAL, SHUFFLER_SERIAL
        from simulators.usb_backend import (EMULATOR_PRODUCT_IDS, EMULATOR_VENDOR_ID, EmulatedUsbDevice,
                                            EmulatorUsbBackend, UsbDevicePort)

        def _selector(kind: DeviceKind, serial: str) -> str:
            return f"usb://{EMULATOR_VENDOR_ID:04x}:{EMULATOR_PRODUCT_IDS[kind]:04x}/{serial}"

        self.transport = transport
        rng: random.Random = secrets.SystemRandom() if seed is None else random.Random(seed)
        self._stack = ExitStack()
        usb_backend = None
        try:
            if transport == "usb":
                devs = (EmulatedUsbDevice(DeviceKind.SHUFFLER, serial_number=SHUFFLER_SERIAL),
                        EmulatedUsbDevice(DeviceKind.SHOE, serial_number=SHOE_SERIAL))
                usb_backend = EmulatorUsbBackend(devs)
                self._stack.callback(usb_backend.close)
                ports: tuple[UsbDevicePort | PtyPort, UsbDevicePort | PtyPort] = (devs[0].port, devs[1].port)
                urls = (_selector(DeviceKind.SHUFFLER, SHUFFLER_SERIAL), _selector(DeviceKind.SHOE, SHOE_SERIAL))
            else:
                shuffler_port = PtyPort()
                self._stack.callback(shuffler_port.close)
                shoe_port = PtyPort()
                self._stack.callback(shoe_port.close)
                ports = (shuffler_port, shoe_port)
                urls = (shuffler_port.name, shoe_port.name)
            protocol = (protocol_major, PROTOCOL_MINOR)
            self.shuffler = ShufflerEmulator(ports[0], rng=rng, serial_number=SHUFFLER_SERIAL, protocol=protocol)
            self.shoe = ShoeEmulator(ports[1], serial_number=SHOE_SERIAL, protocol=protocol)
        except BaseException:
            self._stack.close()
            raise
        self.target = Target(urls[0], urls[1], EmulatorOperator(self.shuffler, self.shoe, rng), config=config,
                             usb_backend=usb_backend, event_timeout_s=5.0, shuffle_timeout_s=5.0,
                             label=f"in-process emulators over {transport}")

    def start(self) -> "InProcessBench":
        """Start both emulators; returns self."""
        self.shuffler.start()
        self.shoe.start()
        return self

    def stop(self) -> None:
        """Stop both emulators and close their ports (and the USB bus); safe to call twice."""
        self.shuffler.stop()
        self.shoe.stop()
        self._stack.close()

    def __enter__(self) -> "InProcessBench":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def usb_url(selector: str) -> str:
    """Check a ``usb://VID:PID[/SERIAL]`` selector and return it. Raises ``ValueError``
    with the expected form."""
    UsbSelector.parse(selector)
    return selector


def hil_target(*, shuffler_url: str | None, shoe_url: str | None,
               shuffler_control: tuple[str, int] | None = None, shoe_control: tuple[str, int] | None = None,
               ask=None, event_timeout_s: float = 10.0, shuffle_timeout_s: float = 180.0,
               config: LinkConfig = CONFORMANCE_LINK) -> Target:
    """A target of devices named by URL (real devices or standalone emulators).

    Physical steps go to the emulators' control sockets when given, else to a
    person through ``ask(text)`` when given, else they are skipped.
    """
    operator: Operator
    if shuffler_control or shoe_control:
        operator = ControlOperator(shuffler_control, shoe_control)
    elif ask is not None:
        operator = PromptOperator(ask)
    else:
        operator = Operator()
    label = "real devices or external emulators"
    return Target(shuffler_url, shoe_url, operator, config=config, event_timeout_s=event_timeout_s,
                  shuffle_timeout_s=shuffle_timeout_s, label=label)


__all__ = ["EMULATOR_TRANSPORTS", "EmulatorOperator", "InProcessBench", "hil_target", "usb_url"]
