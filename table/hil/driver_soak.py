"""The chaos soak on a driver plugin's shoe (docs/drivers.md, "Soak").

``tablectl soak --shoe-driver NAME`` plays the soak's rounds on a table whose
shoe is a driver plugin's emulator (its ``emulator_argv``, in a process of its
own) and whose shuffler is the SPEC shuffler's emulator (``tablectl emulate
shuffler``), both driven through their control sockets (docs/emulators.md) by
a bench dealer that also makes the faults. Only the fault classes a shoe on
any protocol can have are drawn (:data:`SHOE_FAULT_KINDS`); the shuffler's
(jam, a missing card in the count, its cable, its reboot) belong to the SPEC
soak. The counting, the ground truth comparison and the summary are the SPEC
soak's own (:class:`table.hil.chaos._SoakTally`), so the figures read the same.

Ground truth is what the dealer saw leave the shoe (the faces each ``draw``
control reply names), less the cards a fault let out past the reader.

``tablectl soak --shuffler-driver NAME`` is the same soak the other way round: the
shuffler is the plugin's emulator, the shoe the SPEC shoe's, and the classes drawn
are the shuffler's (:data:`SHUFFLER_FAULT_KINDS`). The bench dealer carries the deck
the shuffler hands over (``take``'s ``deck=TEXT``) into the shoe (``load deck=TEXT``,
docs/emulators.md "Carrying the deck"), so the cards dealt are the cards counted.
"""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Mapping

from devices.conformance.suite import ControlOperator
from devices.contract import DriverError, DriverKind, LinkConfig
from devices.plugins import load_plugin
from protocols.cards import BackColour, Card

from table.assembly import DeviceSpec, People, TableSpec, assemble
from table.bets import DEFAULT_LIMITS, wager_ledger
from table.controller import TableTiming
from table.errors import DeviceFault
from table.journal import Journal
from table.keys import table_key_for
from table.players import SimulatedPlayers
from table.rules.settlement import Tables

from .chaos import DETECTED_BY, AutoSupervisor, ChaosTable, _SoakTally

RED, BLUE = BackColour.RED, BackColour.BLUE

#: The fault classes of the shoe's own side, each made through its control socket:
#: a card of another deck or a repeat on top of the shoe (``put``), an unreadable
#: card, a card drawn before bets close or one too many (the dealer), noise as a
#: card is reported (``garble-card``), the cable pulled (``disconnect``), a power
#: cycle (``reboot``), and a card that leaves past the reader with no event at all
#: while the dealer draws on (``slip``).
SHOE_FAULT_KINDS = ("foreign_card", "duplicate_read", "unreadable_card", "early_card", "extra_card",
                    "corrupt_bytes", "unplug_shoe", "reboot_shoe", "card_unreported")


#: The fault classes of the shuffler's side, each made through its emulator's control socket
#: (docs/emulators.md): a jam (``jam``), the door opened as the deck goes in (``door``), a card
#: left out of the deck going in (``insert COLOUR -CARD``), line noise (``garble``), an event
#: lost inside the shuffler (``lose``), the cable pulled (``disconnect``), a power cycle
#: (``reboot``), the power cut mid-shuffle (``power-cut-shuffle``) and as the deck is taken
#: out (``take`` then ``reboot``). A line the plugin's emulator does not have withdraws the
#: fault (counted ``withdrawn``, never as detected).
SHUFFLER_FAULT_KINDS = ("jam", "door_open", "missing_card", "garble_shuffler", "lost_shuffler_event",
                        "unplug_shuffler", "reboot_shuffler", "reboot_mid_shuffle", "reboot_mid_delivery")


class EmulatorProcess:
    """An emulator in a process of its own: ``argv`` prints the address the host opens,
    then ``control HOST:PORT``, as its first two lines (docs/drivers.md, "Soak").
    Raises :class:`DeviceFault` when it does not start."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().strip()
        control = self.proc.stdout.readline().strip()
        host, _, port = control.rpartition(" ")[2].rpartition(":")
        if not self.url or not control.startswith("control ") or not port.isdigit():
            self.close()
            raise DeviceFault(f"the emulator {argv[0]} ... did not print its address and 'control HOST:PORT'")
        self.control = (host, int(port))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class SoakDealer:
    """The bench dealer (the controller's ``Dealer``) over the two control sockets, with
    the faults armed by :class:`ShoeFaultInjector` and the ground truth it saw."""

    def __init__(self, ops: ControlOperator, rng: random.Random) -> None:
        self.ops = ops
        self.rng = rng
        self.truth: list[tuple[str, str]] = []  # (face, back colour) of each card the shoe could read
        self.colour = BackColour.NONE
        self.round_first: str | None = None
        self._draws = 0
        self._armed: dict[int, Callable[[], None]] = {}
        self._put: collections.deque[tuple[str, BackColour]] = collections.deque()
        self.early = False
        self.next_draw: list[str] = []  # control lines sent just before the next draw
        self.slip_next = False
        self.in_hand: str | None = None  # the deck the shuffler handed over (deck=TEXT), until loaded
        self.insert_mods: list[str] = []  # e.g. "-As": the next deck goes in without the ace of spades
        self.door_at_insert_s = 0.0  # the door opens as the next deck goes in, closed this long after
        self.power_cut_at_take = False
        self.inserts = 0
        self.last_colour = BackColour.NONE
        #: ground truth of the shoe's loads (what the soak's tally reads, as of the chaos soak's
        #: dealer): how many so far, which were changed between the shuffler and the shoe (none:
        #: this bench's hands carry the deck=TEXT the shuffler handed over unchanged), and the
        #: loads this round's cards were drawn from
        self.loads = 0
        self.tampered_loads: set[int] = set()
        self.round_loads: set[int] = set()

    def _do(self, device: str, line: str) -> str:
        try:
            return self.ops.command(device, line)
        except Exception as exc:  # noqa: BLE001 - any failure of the bench's hands is a device fault
            raise DeviceFault(f"the bench dealer could not '{line}' at the {device}: {exc}") from exc

    def arm(self, nth_draw: int, act: Callable[[], None]) -> None:
        self._armed[self._draws + nth_draw] = act

    def new_round(self) -> None:
        """The soak's round begins (ChaosTable.play's hook)."""

    def insert_deck(self, colour: BackColour) -> None:
        if self.door_at_insert_s:
            down, self.door_at_insert_s = self.door_at_insert_s, 0.0
            self._do("shuffler", "door open")
            timer = threading.Timer(down, self._close_door)
            timer.daemon = True
            timer.start()
        mods, self.insert_mods = self.insert_mods, []
        self._do("shuffler", " ".join([f"insert {colour}", *mods]))
        self.inserts += 1
        self.last_colour = colour

    def _close_door(self) -> None:
        try:
            self._do("shuffler", "door closed")
        except DeviceFault:
            pass  # the emulator is gone (the soak ended)

    def take_from_shuffler(self) -> None:
        reply = self._do("shuffler", "take")
        self.in_hand = next((w[5:] for w in reply.split() if w.startswith("deck=")), None)
        if self.power_cut_at_take:  # the power goes as the deck comes out: DeckDelivered may be lost
            self.power_cut_at_take = False
            self._do("shuffler", "reboot")

    def load_shoe(self, colour: BackColour) -> None:
        carried, self.in_hand = self.in_hand, None
        self._do("shoe", f"load deck={carried}" if carried else f"load {colour}")
        self.loads += 1
        self.colour, self.round_first = colour, None
        self._put.clear()
        if self.early:  # the dealer draws before betting has closed: as soon as the deck is in
            self.early = False
            self._draw(1)

    def put(self, face: str, colour: BackColour) -> None:
        """A card slips into the shoe on top of its deck."""
        self._do("shoe", f"put {face} {colour}")
        self._put.append((face, colour))

    def draw_card(self) -> None:
        self._draws += 1
        act = self._armed.pop(self._draws, None)
        if act is not None:
            act()
        for line in self.next_draw:
            self._do("shoe", line)
        self.next_draw = []
        if self.slip_next:  # the card leaves past the reader; the dealer, who saw it, draws on
            self.slip_next = False
            self._do("shoe", "slip 1")
            self._draw(2, unseen=1)
            return
        self._draw(1)

    def _draw(self, n: int, unseen: int = 0) -> None:
        self.round_loads.add(self.loads)
        faces = self._do("shoe", f"draw {n}").split()[1:]  # "drew As Kd"
        for i, face in enumerate(faces):
            colour = self._put.popleft()[1] if self._put and self._put[0][0] == face else self.colour
            if i >= unseen and face != "empty":
                self.truth.append((face, str(colour)))
                self.round_first = self.round_first or face

    def collect(self) -> None:
        self._do("shoe", "unload")


class ShoeFaultInjector:
    """Arms one fault of :data:`SHOE_FAULT_KINDS` for the next round (the SPEC soak's
    :class:`~table.hil.chaos.FaultInjector` surface: ``inject``, ``withdraw_unstruck``,
    ``missing``)."""

    def __init__(self, dealer: SoakDealer, rng: random.Random) -> None:
        self.dealer = dealer
        self.rng = rng
        self.missing: list = []  # the shuffler's faults are not drawn: no card goes missing from a count

    def inject(self, kind: str) -> None:
        d, rng = self.dealer, self.rng
        if kind == "foreign_card":
            d.arm(rng.randint(1, 6), lambda: d.put(str(Card.from_index(rng.randrange(52))),
                                                   BLUE if d.colour == RED else RED))
        elif kind == "duplicate_read":
            d.arm(rng.randint(2, 6), lambda: d.put(d.round_first or d.truth[-1][0], d.colour))
        elif kind == "extra_card":
            d.arm(rng.randint(1, 6), lambda: d._draw(1))
        elif kind == "card_unreported":
            d.arm(rng.randint(1, 6), lambda: setattr(d, "slip_next", True))
        elif kind == "unreadable_card":
            d.next_draw.append("unreadable 1")
        elif kind == "corrupt_bytes":
            d.next_draw.append("garble-card 1")
        elif kind == "early_card":
            d.early = True
        elif kind == "unplug_shoe":
            d._do("shoe", "disconnect")
        elif kind == "reboot_shoe":
            d._do("shoe", "reboot")
        else:
            raise ValueError(f"{kind} is not a shoe fault; allowed: {', '.join(SHOE_FAULT_KINDS)}")

    def withdraw_unstruck(self, kind: str) -> bool:
        """End of the round ``kind`` was armed for: True if it struck; what did not is dropped."""
        d = self.dealer
        struck = not (d._armed or d.next_draw or d.early or d.slip_next)
        d._armed.clear()
        d.next_draw, d.early, d.slip_next = [], False, False
        return struck


class ShufflerFaultInjector:
    """Arms one fault of :data:`SHUFFLER_FAULT_KINDS` for the next round, through the
    shuffler's control socket (the surface of :class:`ShoeFaultInjector`)."""

    def __init__(self, dealer: SoakDealer, rng: random.Random) -> None:
        self.dealer = dealer
        self.rng = rng
        self.missing: list[tuple[BackColour, Card]] = []  # cards left out of a deck going in
        self._inserts = 0
        self._unsupported = False

    def _line(self, line: str) -> None:
        try:
            self.dealer._do("shuffler", line)
        except DeviceFault as exc:  # a line this emulator does not have: the fault is withdrawn
            if "has no" not in str(exc):
                raise
            self._unsupported = True

    def inject(self, kind: str) -> None:
        d = self.dealer
        self._inserts, self._unsupported = d.inserts, False
        if kind == "jam":
            self._line("jam")
        elif kind == "door_open":
            d.door_at_insert_s = 0.5
        elif kind == "missing_card":
            card = Card.from_index(self.rng.randrange(52))
            d.insert_mods = [f"-{card}"]
            self._gone = card
        elif kind == "garble_shuffler":
            self._line("garble 3")
        elif kind == "lost_shuffler_event":
            self._line("lose 1")
        elif kind == "unplug_shuffler":
            self._line("disconnect")
        elif kind == "reboot_shuffler":
            self._line("reboot")
        elif kind == "reboot_mid_shuffle":
            self._line("power-cut-shuffle")
        elif kind == "reboot_mid_delivery":
            d.power_cut_at_take = True
        else:
            raise ValueError(f"{kind} is not a shuffler fault; allowed: {', '.join(SHUFFLER_FAULT_KINDS)}")

    def withdraw_unstruck(self, kind: str) -> bool:
        """End of the round ``kind`` was armed for: True if it struck (a fault that waits for
        a deck going in struck if one went in); what did not is disarmed."""
        d = self.dealer
        inserted = d.inserts > self._inserts
        struck = not self._unsupported
        if kind in ("jam", "reboot_mid_shuffle", "door_open", "missing_card"):
            struck = struck and inserted
            if kind == "missing_card" and inserted:
                self.missing.append((d.last_colour, self._gone))
        elif kind == "reboot_mid_delivery":
            struck = not d.power_cut_at_take
        for line in ("jam off", "power-cut-shuffle off"):
            if kind in ("jam", "reboot_mid_shuffle") and not struck and not self._unsupported:
                try:
                    d._do("shuffler", line)
                except DeviceFault:
                    pass
        d.door_at_insert_s, d.power_cut_at_take, d.insert_mods = 0.0, False, []
        return struck


class DriverSupervisor(AutoSupervisor):
    """The soak's supervisor (:class:`~table.hil.chaos.AutoSupervisor`), reading an
    unreadable card off the layout from what the bench dealer saw."""

    def __init__(self, dealer: SoakDealer) -> None:
        self.dealer = dealer
        super().__init__(None)

    def _answer(self, exp: Any) -> None:
        if exp is not None and exp.role == "supervisor" and exp.action == "confirm_card":
            self._do("confirm_card", {"card": self.dealer.truth[-1][0]})
        elif exp is not None and exp.role == "supervisor" and exp.action == "register_deck":
            self._replacements += 1  # the shuffler's emulator makes a whole deck at each insert
            self._do("register_deck", {"deck_id": f"R{self._replacements}"})
        else:
            super()._answer(exp)


class DriverChaosTable(ChaosTable):
    """A :class:`~table.hil.chaos.ChaosTable` whose shoe is driver ``driver``'s emulator and
    whose shuffler is the SPEC shuffler's emulator, each a process of its own. Raises
    :class:`DriverError` when the driver cannot load or has no ``emulator_argv``."""

    def __init__(self, *, driver: str, options: Mapping[str, Any], seed: int, seats: int = 3,
                 kind: str = "shoe") -> None:
        # the SPEC table's fields, without its in-process simulation (ChaosTable.__init__ is not called)
        self._stack = ExitStack()
        under_test = DriverKind(kind)
        plugin = load_plugin(driver, under_test)
        argv_of = getattr(plugin, "emulator_argv", None)
        if argv_of is None:
            raise DriverError(f"driver {driver!r} names no emulator (emulator_argv, docs/drivers.md 'Soak'): "
                              "the soak cannot make its faults")
        tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="driver-soak-")))

        def spec_emulator(what: str) -> EmulatorProcess:
            return EmulatorProcess([sys.executable, "-m", "table.cli", "emulate", what, "--tcp", "127.0.0.1:0",
                                    "--control", "127.0.0.1:0", "--seed", str(seed), "--no-stdin"])

        if under_test is DriverKind.SHOE:
            shf = spec_emulator("shuffler")
            self._stack.callback(shf.close)
            shoe = EmulatorProcess(list(argv_of(DriverKind.SHOE, dict(options))))
        else:
            shf = EmulatorProcess(list(argv_of(DriverKind.SHUFFLER, dict(options))))
            self._stack.callback(shf.close)
            shoe = spec_emulator("shoe")
        self._stack.callback(shoe.close)
        self.journal = Journal(tmp / "journal.sqlite3", key=table_key_for(tmp / "journal.sqlite3")[0])
        self._stack.callback(self.journal.close)
        cfg = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=200, max_attempts=12, reconnect_initial_ms=20,
                         reconnect_max_ms=200, heartbeat_interval_ms=500, heartbeat_misses=2, read_timeout_ms=50,
                         reconnect_wait_s=5)
        shoe_driver, shuffler_driver = (driver, "spec") if under_test is DriverKind.SHOE else ("spec", driver)
        # Both drivers run as a table runs them, each in a process of its own (docs/drivers.md,
        # "A driver's process"): the soak judges the table a site runs
        spec = TableSpec(
            shuffler=DeviceSpec(DriverKind.SHUFFLER, shf.url, shuffler_driver,
                                dict(options) if shuffler_driver == driver else {}, cfg),
            shoe=DeviceSpec(DriverKind.SHOE, shoe.url, shoe_driver, dict(options) if shoe_driver == driver else {}, cfg),
            decks=(("A", RED), ("B", BLUE)), tables=Tables.load("pa-649a12b-1"), seats=seats, ante_cents=1000,
            # a bench emulator verifies a shuffle at once: 20 s, not a real machine's 180 (SPEC 7)
            timing=TableTiming(event_timeout_s=5, shuffle_timeout_s=20))
        self.dealer = SoakDealer(ControlOperator(shuffler=shf.control, shoe=shoe.control), random.Random(seed))
        self.console = DriverSupervisor(self.dealer)
        self._detections: dict[str, int] = {}
        self.incomplete_details: list[str] = []
        self.counts: list[str] = []
        self._scanned = 0
        table = self._stack.enter_context(assemble(spec, People(
            self.dealer, console=self.console, players=SimulatedPlayers(seed, DEFAULT_LIMITS, seats, ())),
            journal=self.journal))
        self.controller, self.shuffler, self.shoe, self.events = table.controller, table.shuffler, table.shoe, \
            table.events
        self.under_test = self.shoe if under_test is DriverKind.SHOE else self.shuffler

    def truth_reads(self) -> list[tuple[str, str]]:
        return list(self.dealer.truth)

    def link_errors(self) -> dict[str, int]:
        """Lines or frames each driver dropped for a bad checksum (the contract's optional
        ``link.frame_errors``, which a driver in its own process reports with each event)."""
        out = {}
        for name, drv in (("shoe", self.shoe), ("shuffler", self.shuffler)):
            dropped = getattr(drv.link, "frame_errors", 0)
            if dropped:
                out[f"link:{name}:crc_error"] = dropped
        return out


#: How the table sees a card too many, one drawn before bets closed, or one gone unread, from a
#: shoe that does not number its draws: only by its count at the end of the deal
#: (docs/drivers.md, "Capabilities").
COUNT_ONLY = ("incident:shoe count ahead of the reads", "violation:card_unaccounted")
#: How the table sees a card line lost to noise from a shoe that cannot resend: the event is
#: gone (the soak counts it lost), the shoe's count shows it and the round is held.
LOST_EVENT = ("incident:card event lost: the shoe cannot resend", "violation:card_unaccounted")


def detected_by(missing: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """What counts as detecting each fault class on a shoe lacking ``missing``: the SPEC soak's
    :data:`~table.hil.chaos.DETECTED_BY`; without a draw index also the count's alarm for a card
    too many, drawn early or gone unread (the table cannot tell them apart); without resend
    also the lost event's alarm for noise on a card line."""
    out = dict(DETECTED_BY)
    if "draw_index" in missing:
        out.update({k: out[k] + COUNT_ONLY for k in ("early_card", "extra_card", "card_unreported")})
    if "resend" in missing:
        out["corrupt_bytes"] = out["corrupt_bytes"] + LOST_EVENT
    return out


def run_driver_soak(rounds: int, seed: int, *, driver: str, options: Mapping[str, Any] | None = None,
                    seats: int = 3, fault_rate: float = 0.3, kind: str = "shoe",
                    progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Play ``rounds`` rounds on driver ``driver``'s emulator of ``kind`` (``"shoe"`` or
    ``"shuffler"``) with a fault of a random class of :data:`SHOE_FAULT_KINDS` (or
    :data:`SHUFFLER_FAULT_KINDS`) in ``fault_rate`` of them; the SPEC soak's summary
    (:func:`table.hil.chaos.run_soak`, with its table by class) plus ``driver``, ``kind``,
    ``options`` and ``missing`` (the capabilities the driver declares its device lacks).
    Real time: the emulators are processes of their own. Raises :class:`DriverError` (the
    driver, its emulator)."""
    rng = random.Random(seed)
    options = dict(options or {})
    kinds = SHOE_FAULT_KINDS if kind == "shoe" else SHUFFLER_FAULT_KINDS
    with DriverChaosTable(driver=driver, options=options, seed=seed, seats=seats, kind=kind) as t:
        lacks = t.under_test.capabilities.missing()
        tally = _SoakTally(detected_by(lacks) if kind == "shoe" else dict(DETECTED_BY))
        inj = ShoeFaultInjector(t.dealer, rng) if kind == "shoe" else ShufflerFaultInjector(t.dealer, rng)
        t.controller.prepare()
        for n in range(1, rounds + 1):
            fault = rng.choice(kinds) if rng.random() < fault_rate else None
            tally.round(n, fault, t, inj)
            if progress:
                progress(n)
        tally.end()
        truth, recorded = t.truth_reads(), t.device_reads()
        ledger = wager_ledger(t.journal.entries())
    summary = tally.summary(rounds, seed, 1.0, truth, recorded, kinds=kinds)
    return {**summary, "wagers": ledger.to_dict(), "driver": driver, "kind": kind, "options": options,
            "missing": list(lacks)}
