"""A simulated table: two decks, the discard rack, and a virtual dealer.

The shuffler and shoe emulators share this table, so cards move physically
between them: the dealer inserts a deck in the shuffler, takes the shuffled
deck out, loads it in the shoe, draws cards onto the layout and collects them
into the discard rack. The host sees none of this directly, only the device
events the emulators send over their serial ports (ptys) or, with
``transport="usb"``, over emulated USB devices behind a pure-Python pyusb
backend (:mod:`simulators.usb_backend`).
"""

from __future__ import annotations

import collections
import random
import secrets
import threading
from pathlib import Path

from protocols.cards import BackColour
from protocols.clock import REAL_CLOCK, Clock

from protocols.messages import DeviceKind

from .devices import DeviceRefused, ShoeEmulator, ShufflerEmulator, SimCard, deck_colour, new_deck
from .pty_port import PtyPort
from .usb_backend import EMULATOR_PRODUCT_IDS, EMULATOR_VENDOR_ID, EmulatedUsbDevice, EmulatorUsbBackend, UsbDevicePort

TRANSPORTS = ("serial", "usb")
SHUFFLER_SERIAL = "SHF-SIM-0001"
SHOE_SERIAL = "SHOE-SIM-0001"
#: Cards drawn the virtual dealer remembers by default (its ground truth), so a
#: long simulated run stays flat in memory; a bench that checks every read
#: (the soak, ``tablectl simulate-table``) keeps them all (``history=None``).
DRAWN_KEPT = 1024


class VirtualDealer:
    """Moves cards between the decks' places as a dealer obeying the controller's prompts.

    Each method is one physical action; the devices report what their sensors
    see. Raises :class:`DeviceRefused` for an action the table cannot allow
    physically (e.g. taking a deck from an empty shuffler). ``drawn`` is the
    ground truth, every card drawn in draw order: the last ``history`` of
    them (None: all).
    """

    def __init__(self, shuffler: ShufflerEmulator, shoe: ShoeEmulator, colours: tuple[BackColour, BackColour],
                 history: int | None = DRAWN_KEPT) -> None:
        self.shuffler = shuffler
        self.shoe = shoe
        self.off_table: dict[BackColour, list[SimCard]] = {c: new_deck(c) for c in colours}
        self.in_hand: list[SimCard] = []
        self.on_layout: list[SimCard] = []
        self.discard_rack: list[SimCard] = []
        self.drawn: collections.deque[SimCard] = collections.deque(maxlen=history)  # ground truth, in draw order
        self._lock = threading.Lock()

    def insert_deck(self, colour: BackColour) -> None:
        """Put the ``colour`` deck in the shuffler: from off the table the first time,
        later from the discard rack (with the shoe's stub if it is still there), or the
        deck in the dealer's hand when it is that one (taken out of the shuffler and not
        loaded: the table has it counted again)."""
        with self._lock:
            if colour in self.off_table:
                cards = self.off_table.pop(colour)
            elif self.in_hand and deck_colour(self.in_hand) == colour:
                cards, self.in_hand = self.in_hand, []
            else:
                cards = [c for c in self.discard_rack]
                self.discard_rack.clear()
                if self.shoe.cards and deck_colour(self.shoe.cards) == colour:
                    cards += self.shoe.unload()
            if not cards:
                raise DeviceRefused(f"no cards of the {colour} deck to insert")
            self.shuffler.insert(cards)

    def take_from_shuffler(self) -> None:
        """Take the verified deck out of the shuffler into the dealer's hand (a deck already
        in hand, not loaded, is put down off the table first)."""
        with self._lock:
            if self.in_hand:
                self.off_table[deck_colour(self.in_hand)] = self.in_hand
            self.in_hand = self.shuffler.take()

    def load_shoe(self, colour: BackColour) -> None:
        """Load the deck in hand into the shoe (the prompt names the colour expected)."""
        with self._lock:
            if not self.in_hand:
                raise DeviceRefused("the dealer holds no deck to load")
            cards, self.in_hand = self.in_hand, []
            self.shoe.load(cards)

    def change_deck_in_hand(self, change) -> None:
        """The dealer's hands change the deck in hand on its way to the shoe (a fault a bench
        makes: cards added, taken out, or another deck put in its place): ``change`` takes
        the cards (top first) and returns the cards the dealer now holds. Raises
        :class:`DeviceRefused` when no deck is in hand."""
        with self._lock:
            if not self.in_hand:
                raise DeviceRefused("the dealer holds no deck")
            self.in_hand = list(change(list(self.in_hand)))

    def draw_card(self) -> None:
        """Draw the next card from the shoe onto the layout."""
        with self._lock:
            sim = self.shoe.draw()
            if sim is not None:
                self.on_layout.append(sim)
                self.drawn.append(sim)

    def collect(self) -> None:
        """Collect the round's cards and the shoe's stub into the discard rack."""
        with self._lock:
            self.discard_rack += self.on_layout
            self.on_layout = []
            self.discard_rack += self.shoe.unload()


class SimulatedTable:
    """Both emulators on ptys (or emulated USB devices) plus the virtual dealer; a context manager.

    ``seed``: None shuffles with ``secrets.SystemRandom`` (as a real table);
    an int gives a reproducible run. ``link_dir``: optional folder for the
    symlinks ``shuffler`` and ``shoe`` to the pty slaves (serial only).
    ``transport``: ``"serial"`` (ptys) or ``"usb"`` (emulated USB devices,
    VID 0x1209, PIDs from :data:`~simulators.usb_backend.EMULATOR_PRODUCT_IDS`).
    Attributes ``shuffler_url`` and ``shoe_url`` are what a host opens: pty
    paths, or USB selectors ``usb://1209:0001/SHF-SIM-0001`` to be opened with
    ``usb_backend`` (None for serial). Raises ``ValueError`` for an unknown
    transport, ``OSError`` if a pty or socket cannot be made. ``clock``: what
    the emulators' own waits and an unplug's duration run on
    (:class:`protocols.clock.VirtualClock` to compress them; real time by default).
    ``history``: how many drawn cards the dealer's ground truth keeps (None: all).
    ``commitment``: the shuffler commits to its shuffles (SPEC §4.2.1); False is a
    protocol 1.0 shuffler without the capability.
    """

    def __init__(
        self,
        colours: tuple[BackColour, BackColour] = (BackColour.RED, BackColour.BLUE),
        *,
        seed: int | None = None,
        link_dir: str | Path | None = None,
        transport: str = "serial",
        shuffle: str = "random",
        clock: Clock = REAL_CLOCK,
        history: int | None = DRAWN_KEPT,
        commitment: bool = True,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"transport {transport!r}: choose one of {', '.join(TRANSPORTS)}")
        if transport == "usb" and link_dir:
            raise ValueError("link_dir makes symlinks to ptys; it has no meaning with transport='usb'")
        rng: random.Random = secrets.SystemRandom() if seed is None else random.Random(seed)
        self.transport = transport
        self.usb_backend: EmulatorUsbBackend | None = None
        self.shuffler_usb: EmulatedUsbDevice | None = None  # the USB side of each device (usb only),
        self.shoe_usb: EmulatedUsbDevice | None = None  # for faults: unplug(), faults.busy_on_claim...
        shuffler_port: UsbDevicePort | PtyPort
        shoe_port: UsbDevicePort | PtyPort
        if transport == "usb":
            devices = (EmulatedUsbDevice(DeviceKind.SHUFFLER, serial_number=SHUFFLER_SERIAL),
                       EmulatedUsbDevice(DeviceKind.SHOE, serial_number=SHOE_SERIAL))
            self.usb_backend = EmulatorUsbBackend(devices)
            self.shuffler_usb, self.shoe_usb = devices
            shuffler_port, shoe_port = devices[0].port, devices[1].port
            self.shuffler_url = _selector(DeviceKind.SHUFFLER, SHUFFLER_SERIAL)
            self.shoe_url = _selector(DeviceKind.SHOE, SHOE_SERIAL)
        else:
            link_dir = Path(link_dir) if link_dir else None
            shuffler_port = PtyPort(link_dir / "shuffler" if link_dir else None, clock=clock)
            try:
                shoe_port = PtyPort(link_dir / "shoe" if link_dir else None, clock=clock)
            except OSError:
                shuffler_port.close()
                raise
            self.shuffler_url = shuffler_port.name
            self.shoe_url = shoe_port.name
        self.clock = clock
        self.shuffler = ShufflerEmulator(shuffler_port, rng=rng, serial_number=SHUFFLER_SERIAL, shuffle=shuffle,
                                         clock=clock, commitment=commitment)
        self.shoe = ShoeEmulator(shoe_port, serial_number=SHOE_SERIAL, clock=clock)
        self.dealer = VirtualDealer(self.shuffler, self.shoe, colours, history)

    def start(self) -> "SimulatedTable":
        self.shuffler.start()
        self.shoe.start()
        return self

    def stop(self) -> None:
        """Stop both emulators, then close the emulated USB bus (if any); safe to call twice."""
        self.shuffler.stop()
        self.shoe.stop()
        if self.usb_backend is not None:
            self.usb_backend.close()

    def __enter__(self) -> "SimulatedTable":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _selector(kind: DeviceKind, serial_number: str) -> str:
    """The ``usb://VID:PID/SERIAL`` selector of an emulated device (the host's syntax)."""
    return f"usb://{EMULATOR_VENDOR_ID:04x}:{EMULATOR_PRODUCT_IDS[kind]:04x}/{serial_number}"
