"""Fault injection on a simulated table, scripted scenarios and the chaos soak.

A :class:`ChaosTable` is a simulated table (emulators on ptys, the virtual
dealer) with the controller on top, a journal, and an automatic supervisor
that answers what a person would (void a held round, bring and register a
replacement deck, read an unreadable card off the layout). A
:class:`FaultInjector` makes every class of fault happen at a chosen round
(scenarios can also name the step of the round, see :data:`STEPS`): dealer
errors, device faults and link faults. The soak and the scenarios
compare what the controller recorded with the emulators' ground truth.
"""

from __future__ import annotations

import collections
import contextlib
import fnmatch
import os
import queue
import random
import select
import tempfile
import threading
import tomllib
import tty
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import structlog

from devices import CardShoe, Shuffler
from devices.contract import DriverKind
from firmware_bridge.faults import FaultPlan, FaultyTransport
from firmware_bridge.errors import LinkError
from firmware_bridge.link import Link, LinkConfig
from firmware_bridge.transport import SerialTransport
from protocols.cards import BackColour, Card
from protocols.clock import REAL_CLOCK, VirtualClock
import simulators
from simulators.devices import SimCard, new_deck
from simulators.table import SimulatedTable

from table.assembly import DeviceSpec, People, TableSpec, build_controller, open_driver
from table.bets import DEFAULT_LIMITS, wager_ledger
from table.players import SimulatedPlayers
from table.console import Command, Console
from table.roles import Actor, Role
from table.errors import DeviceFault, DeviceTimeout, RoundHeld
from table.controller import TableTiming
from table.journal import Journal
from table.keys import table_key_for
from table.rules.settlement import Tables

log = structlog.get_logger("table.chaos")

RED, BLUE = BackColour.RED, BackColour.BLUE

#: Every fault class the soak draws from. Table faults are dealer errors or device
#: faults; link faults act on the bytes or the cable.
FAULT_KINDS = (
    "foreign_card", "duplicate_read", "missing_card", "unreadable_card", "jam", "early_card", "extra_card",
    "corrupt_bytes", "unplug_shoe", "reboot_shoe", "unplug_shuffler", "reboot_shuffler",
)
#: The faults of the bench's hands and of power and lines the emulators make besides
#: (docs/emulators.md, "Faults"): the shuffler's door opened at a shuffle, its power cut
#: mid-shuffle or as the dealer takes the deck out (``DeckDelivered`` lost), its line
#: noisy; a card event lost inside the shoe; and the deck carried from the shuffler to the
#: shoe tampered with on the way: six cards of a third deck of the same back on top, a card
#: taken out, a card doubled, or another deck of that colour in an order the dealer chose
#: loaded instead (a cold deck).
HANDS_FAULT_KINDS = (
    "door_open", "reboot_mid_shuffle", "reboot_mid_delivery", "garble_shuffler", "lost_card_event",
    "shoe_extra_cards", "short_deck_in_shoe", "doubled_card_in_shoe", "substituted_deck",
)
#: Every class the soak draws from (:func:`run_soak`).
SOAK_KINDS = FAULT_KINDS + HANDS_FAULT_KINDS
#: Classes after which the round must not settle: the cards dealt are not the verified
#: deck's, or not all of them were read (58 Pa. Code 649a.3; docs/deck-custody.md). A round
#: of one of these that settles is counted ``wrongly_settled`` (it must be 0).
MUST_HOLD = ("foreign_card", "duplicate_read", "early_card", "extra_card", "card_unreported", "lost_card_event",
             "shoe_extra_cards", "short_deck_in_shoe", "doubled_card_in_shoe", "substituted_deck")
#: Classes that change the deck on its way from the shuffler to the shoe: judged by whether a
#: card of the changed deck was dealt in a round that settled (:meth:`_SoakTally._outcome`).
TAMPER_KINDS = ("shoe_extra_cards", "short_deck_in_shoe", "doubled_card_in_shoe", "substituted_deck")
#: Classes that leave a deck wrong on purpose: its next count in the shuffler fails, as expected.
WRONG_DECK_KINDS = ("foreign_card", "duplicate_read", "shoe_extra_cards", "short_deck_in_shoe",
                    "doubled_card_in_shoe")
#: How many times faster than real time a soak's clock runs by default (ChaosTable).
#: The fault waits it compresses are a person's or a device's (0.3 s unplugs, resend
#: back-offs up to 2 s, a 5 s event timeout); at 10 the shortest device wait, the
#: first event resend (50 ms), still takes 5 ms: longer than the host takes to
#: journal and ACK an event on a loaded machine, so the ARQ is not flooded.
SOAK_SPEED = 10.0
#: Procedure slips that are not faults to alarm on: the controller waits them out.
SLIP_KINDS = ("late_insert",)

#: Where in a scenario's round a fault strikes (``step`` in a ``[[fault]]``), in the
#: order of round N's procedure. Round N's deck movements come first: from round 2
#: on the dealer takes the deck verified for round N out of the shuffler and loads
#: the shoe, then puts the deck played in round N-1 in the shuffler and it is
#: shuffled. Round 1 has none: it is dealt from the deck loaded at the opening
#: (round 0: deck A shuffled and loaded, then deck B shuffled). Then the deal (one
#: card to each seat, seat 1 first, then the dealer; three times) and the collect.
#:
#: - ``before_round`` (default): armed before round N's deck movements (round 0:
#:   before the table opens), as in the soak: ``foreign_card``, ``duplicate_read``
#:   and ``extra_card`` strike at a draw the seeded random generator picks (1..6
#:   draws on), the others at the next card, shuffle, shoe load or insert, or at once.
#: - ``shuffle``: as the dealer puts a deck in the shuffler, just before it is
#:   shuffled (the round's first such deck; at round 0 deck A).
#: - ``load_shoe``: just before the dealer loads the round's deck into the shoe
#:   (at round 0 deck A).
#: - ``draw``: the dealer's ``draw``-th draw of the round (1-based; with 3 seats
#:   draw 4 is the dealer's first card), just before the card comes out of the shoe.
#: - ``collect``: just after the round's cards (a voided round's too) and the shoe's
#:   stub go to the discard rack.
STEPS = ("before_round", "shuffle", "load_shoe", "draw", "collect")
#: The fault kinds each step can carry; ``before_round`` takes every kind.
STEP_KINDS: dict[str, tuple[str, ...]] = {
    "before_round": FAULT_KINDS + SLIP_KINDS,
    # the shuffle jams; a card is dropped on the way into the shuffler; the dealer is slow to put the deck in
    "shuffle": ("jam", "missing_card", "late_insert"),
    # the shoe's cable pulled, or the shoe power-cycled, just before the deck goes in; or the
    # shoe's line noisy (with ``seconds``: every frame from the shoe corrupted that long)
    "load_shoe": ("unplug_shoe", "reboot_shoe", "corrupt_bytes"),
    # the card drawn is of the other deck, a repeat of the round's first card, unreadable, or two
    # cards come out at once; the shoe's cable pulled just before the card is drawn
    "draw": ("foreign_card", "duplicate_read", "unreadable_card", "extra_card", "unplug_shoe"),
    # a card falls off the table as the cards go to the discard rack
    "collect": ("missing_card",),
}


class ScenarioError(ValueError):
    """A scenario file that cannot be run: names the file, the key and what is allowed."""


class AutoSupervisor(Console):
    """The simulated table's console, with a supervisor who answers what the table asks,
    at once, as a person at the table would, through the same API every front door
    uses (:meth:`Console.submit`, as a supervisor: role checks, validation, the
    two-person rule); it never touches the devices' state.

    When the table waits for a supervisor: ``void`` a held round ("misdeal";
    after the decisions a second supervisor, ``AUTO-2``, confirms);
    ``register_deck``: brings a new deck of that colour to the table (the
    failed one, taken out of the shuffler by the dealer when the table asked,
    leaves it) and registers it; ``confirm_card``: reads the unreadable card off
    the layout (the virtual dealer's last drawn card); ``acknowledge_incident``.
    Dealer confirmations are never asked on a simulated table. ``actions``
    counts what it did.
    """

    PERSON = Actor("AUTO", Role.SUPERVISOR, source="api")
    SECOND = Actor("AUTO-2", Role.SUPERVISOR, source="api")

    def __init__(self, sim: SimulatedTable) -> None:
        super().__init__()
        self.sim = sim
        self.attached = True
        self.actions: dict[str, int] = {}
        self._replacements = 0
        self.on_expectation(self._answer)

    def _do(self, action: str, args: dict[str, Any], actor: Actor | None = None) -> None:
        self.actions[action] = self.actions.get(action, 0) + 1
        self.submit(Command(action, args, actor=actor or self.PERSON))

    def _answer(self, exp: Any) -> None:
        if exp is None or exp.role != "supervisor":
            return
        if exp.action == "void":
            self._do("void", {"reason": f"misdeal ({exp.what})"})
        elif exp.action == "confirm_void":
            self._do("confirm_void", {}, self.SECOND)
        elif exp.action == "register_deck":
            dealer = self.sim.dealer
            colour = next(c for c in (RED, BLUE) if f"({c})" in exp.what)
            with dealer._lock:  # the failed deck leaves the table; a new one comes in its place
                dealer.in_hand = []
                dealer.off_table[colour] = new_deck(colour)
            self._replacements += 1
            self._do("register_deck", {"deck_id": f"R{self._replacements}"})
        elif exp.action == "confirm_card":
            card = self.sim.dealer.drawn[-1].card
            self._do("confirm_card", {"card": str(card)})
        elif exp.action == "acknowledge_incident":
            self._do("acknowledge_incident", {})


class FaultInjector:
    """Makes one fault of each class happen on a :class:`ChaosTable`'s simulation."""

    def __init__(self, table: "ChaosTable", rng: random.Random) -> None:
        self.t = table
        self.rng = rng
        self.injected: dict[str, int] = {}
        self._seconds: float | None = None
        #: (back colour, card) of each card a ``missing_card`` took away, in order.
        self.missing: list[tuple[BackColour, Card]] = []
        self._flips = 0
        self._door_seen = 0

    def _count(self, kind: str) -> None:
        self.injected[kind] = self.injected.get(kind, 0) + 1

    def inject(self, kind: str, seconds: float | None = None, *, step: str = "before_round",
               draw: int | None = None) -> StepHook | None:
        """Arm or make fault ``kind`` (one of :data:`FAULT_KINDS`, :data:`SLIP_KINDS`)
        for the next round; ``seconds``: how long an unplug or a slow dealer lasts.

        ``step`` (one of :data:`STEPS`, the kinds each allows in :data:`STEP_KINDS`)
        and ``draw`` (with ``step="draw"``: the round's draw, 1-based) schedule it
        at that point of the next round; the returned hook tells whether it struck.
        ``before_round`` is the soak's timing (a random draw where one is needed)."""
        if kind not in SOAK_KINDS + SLIP_KINDS:
            raise ScenarioError(f"unknown fault {kind!r}; allowed: {', '.join(SOAK_KINDS + SLIP_KINDS)}")
        if kind in HANDS_FAULT_KINDS and step != "before_round":
            raise ScenarioError(f"{kind} strikes only at step before_round (at the next shuffle, take, load or "
                                "draw)")
        if step not in STEPS:
            raise ScenarioError(f"unknown step {step!r}; allowed: {', '.join(STEPS)}")
        if kind not in STEP_KINDS[step] and kind not in HANDS_FAULT_KINDS:
            raise ScenarioError(f"{kind} cannot strike at step {step}; allowed there: {', '.join(STEP_KINDS[step])}")
        if (step == "draw") != (draw is not None):
            raise ScenarioError("draw: required with step draw, and only there")
        self._count(kind)
        if step == "before_round":
            self._seconds = seconds
            getattr(self, f"_{kind}")()
            return None
        act = self._strike(kind, step)

        def strike() -> None:
            self._seconds = seconds
            act()
        return self.t.dealer.at_step(step, strike, draw)

    def _strike(self, kind: str, step: str) -> Callable[[], None]:
        """What fault ``kind`` does at the moment it strikes at ``step`` (the kinds the
        soak arms at a random draw act at once here; the others already act on the
        very next draw, shuffle, load or insert)."""
        if kind == "missing_card":
            return self._drop_going_in if step == "shuffle" else self._drop_collected
        now = {"foreign_card": self._slip_foreign, "duplicate_read": self._read_twice,
               "extra_card": self.t.sim.dealer.draw_card}
        return now.get(kind) or getattr(self, f"_{kind}")

    # Each arms the fault so it strikes during the next round or the deck movements before it.
    def _at_draw(self, n: int, act: Callable[[], None]) -> None:
        self.t.dealer.arm(n, act)

    def _slip_foreign(self) -> None:  # a card with the other deck's back slips into the shoe
        sim = self.t.sim
        colour = BLUE if sim.shoe.colour == RED else RED
        sim.shoe.cards.insert(0, SimCard(Card.from_index(self.rng.randrange(52)), colour))

    def _read_twice(self) -> None:  # the shoe reads the round's first card again
        sim = self.t.sim
        sim.shoe.cards.insert(0, SimCard(sim.dealer.on_layout[0].card, sim.shoe.colour))

    def _foreign_card(self) -> None:
        self._at_draw(self.rng.randint(1, 6), self._slip_foreign)

    def _duplicate_read(self) -> None:
        self._at_draw(self.rng.randint(2, 6), self._read_twice)

    def _missing_card(self) -> None:
        sim = self.t.sim
        rack = sim.dealer.discard_rack  # the deck going to the shuffler next loses a card
        cards = rack if rack else next(iter(sim.dealer.off_table.values()), None)
        if not cards:
            return
        # One of the deck's own cards: not a foreign card or a clone another fault
        # slipped in (taking one of those away would leave no card of the deck missing).
        colour = collections.Counter(c.back_colour for c in cards).most_common(1)[0][0]
        copies = collections.Counter((c.card, c.back_colour) for c in cards)
        own = [i for i, c in enumerate(cards) if c.back_colour == colour and copies[(c.card, colour)] == 1]
        if own:
            gone = cards.pop(own[self.rng.randrange(len(own))])
            self.missing.append((gone.back_colour, gone.card))

    def _drop_going_in(self) -> None:
        """The dealer drops a card of the deck going into the shuffler (taken as the
        virtual dealer takes it: off the table the first time, else the discard rack)."""
        dealer = self.t.sim.dealer
        colour = self.t.dealer.inserting
        cards = dealer.off_table.get(colour, dealer.discard_rack)
        if cards:
            cards.pop(self.rng.randrange(len(cards)))

    def _drop_collected(self) -> None:
        """A card falls off the table as the dealer collects: the rack is a card short."""
        rack = self.t.sim.dealer.discard_rack
        if rack:
            rack.pop(self.rng.randrange(len(rack)))

    def _unreadable_card(self) -> None:
        self.t.sim.shoe.faults.unreadable_draws += 1

    def _jam(self) -> None:
        self.t.sim.shuffler.faults.jam_next_shuffle = True

    def _early_card(self) -> None:
        self.t.dealer.early = True

    def _extra_card(self) -> None:
        dealer = self.t.sim.dealer
        self._at_draw(self.rng.randint(1, 6), dealer.draw_card)

    def _late_insert(self) -> None:
        self.t.dealer.late_insert_s = self._seconds or 0.3

    def _corrupt_bytes(self) -> None:
        self._flips = self.t.shoe_faults.injected["bit_flip"]
        if self._seconds:  # a scenario's noisy patch: every read corrupted for that long
            self.t.shoe_faults.noisy_for(self._seconds)
        else:  # the soak's burst: half of the next 20 reads
            self.t.shoe_faults.burst(20)

    # the hands', the power's and the lines' faults (HANDS_FAULT_KINDS)
    def _door_open(self) -> None:  # the door opens as the dealer puts the next deck in; closed again later
        self._door_seen = self.t.sim.shuffler.faults.door_seen
        self.t.dealer.door_open_s = self._seconds or 0.5

    def _reboot_mid_shuffle(self) -> None:
        self.t.sim.shuffler.faults.power_cut_mid_shuffle = True

    def _reboot_mid_delivery(self) -> None:
        self.t.dealer.power_cut_at_take = True

    def _garble_shuffler(self) -> None:
        self.t.sim.shuffler.garble_frames = 3

    def _lost_card_event(self) -> None:
        t = self.t

        def lose_next() -> None:  # the card drawn next is read, its event lost inside the shoe
            t.sim.shoe.lose_events = 1
            t.unreported.add(len(t.sim.dealer.drawn))
        self._at_draw(self.rng.randint(1, 6), lose_next)

    def _tamper(self, change: Callable[[list[SimCard]], list[SimCard]]) -> None:
        self.t.dealer.tamper = change

    def _shoe_extra_cards(self) -> None:
        def six_on_top(cards: list[SimCard]) -> list[SimCard]:
            colour = cards[0].back_colour
            return [SimCard(Card.from_index(self.rng.randrange(52)), colour) for _ in range(6)] + cards
        self._tamper(six_on_top)

    def _short_deck_in_shoe(self) -> None:
        def one_out(cards: list[SimCard]) -> list[SimCard]:
            i = self.rng.randrange(len(cards))
            return cards[:i] + cards[i + 1:]
        self._tamper(one_out)

    def _doubled_card_in_shoe(self) -> None:
        def one_twice(cards: list[SimCard]) -> list[SimCard]:
            i = self.rng.randrange(len(cards))
            return cards[:i] + [cards[self.rng.randrange(len(cards))]] + cards[i:]
        self._tamper(one_twice)

    def _substituted_deck(self) -> None:
        def cold_deck(cards: list[SimCard]) -> list[SimCard]:
            colour = cards[0].back_colour
            deck = new_deck(colour)  # another deck of the same back, in the dealer's order
            random.Random(self.rng.random()).shuffle(deck)
            return deck
        self._tamper(cold_deck)

    def withdraw_unstruck(self, kind: str) -> bool:
        """End of the round fault ``kind`` was armed for: True if it struck. A fault
        that did not (its round ended before the draw it waited for, no shuffle or
        no shoe load came) is disarmed, so it cannot strike in a later round and be
        taken for that round's fault or a false alarm; the noise burst ends too."""
        t, dealer = self.t, self.t.dealer
        struck = True
        if kind in ("foreign_card", "duplicate_read", "extra_card", "lost_card_event"):
            struck = not dealer._armed
        elif kind == "unreadable_card":
            with t.sim.shoe.lock:
                struck = t.sim.shoe.faults.unreadable_draws == 0
                t.sim.shoe.faults.unreadable_draws = 0
        elif kind == "jam":
            with t.sim.shuffler.lock:
                struck = not t.sim.shuffler.faults.jam_next_shuffle
                t.sim.shuffler.faults.jam_next_shuffle = False
        elif kind == "early_card":
            struck = not dealer.early
        elif kind == "corrupt_bytes":
            struck = t.shoe_faults.injected["bit_flip"] > self._flips
        elif kind == "door_open":  # struck: the door opened, and the shuffler answered the host while open
            struck = not dealer.door_open_s and t.sim.shuffler.faults.door_seen > self._door_seen
        elif kind == "reboot_mid_shuffle":
            with t.sim.shuffler.lock:
                struck = not t.sim.shuffler.faults.power_cut_mid_shuffle
                t.sim.shuffler.faults.power_cut_mid_shuffle = False
        elif kind == "reboot_mid_delivery":
            struck = not dealer.power_cut_at_take
        elif kind == "garble_shuffler":
            with t.sim.shuffler.lock:
                struck = t.sim.shuffler.garble_frames < 3
                t.sim.shuffler.garble_frames = 0
        elif kind in ("shoe_extra_cards", "short_deck_in_shoe", "doubled_card_in_shoe", "substituted_deck"):
            struck = dealer.tamper is None
        dealer._armed.clear()
        dealer.early = False
        dealer.door_open_s, dealer.power_cut_at_take, dealer.tamper = 0.0, False, None
        with t.sim.shoe.lock:
            t.sim.shoe.lose_events = 0
        t.shoe_faults.burst(0)
        return struck

    def _unplug_shoe(self) -> None:
        self.t.sim.shoe.disconnect(down_s=self._seconds or 0.3)

    def _reboot_shoe(self) -> None:
        self.t.sim.shoe.reboot()

    def _unplug_shuffler(self) -> None:
        self.t.sim.shuffler.disconnect(down_s=self._seconds or 0.3)

    def _reboot_shuffler(self) -> None:
        self.t.sim.shuffler.reboot()


class StepHook:
    """A fault armed at a step of the next round; ``fired`` once it struck."""

    def __init__(self, step: str, act: Callable[[], None], draw: int | None) -> None:
        self.step, self.act, self.draw = step, act, draw
        self.fired = False


class FaultyDealer:
    """The virtual dealer, with mistakes armed by the :class:`FaultInjector`.

    Two ways to arm: :meth:`arm` (the soak's: the nth draw from now, however many
    rounds that takes) and :meth:`at_step` (a scenario's: a step of the current
    round, see :data:`STEPS`; :meth:`new_round` starts counting the round's draws,
    :meth:`disarm` drops what did not strike)."""

    def __init__(self, sim: SimulatedTable) -> None:
        self.sim = sim
        self.clock = sim.clock  # a slow dealer takes time on the table's clock
        self._armed: dict[int, Callable[[], None]] = {}
        self._draws = 0
        self._round_draws = 0
        self._hooks: list[StepHook] = []
        self.early = False
        self.late_insert_s = 0.0
        self.inserting: BackColour | None = None  # the deck going into the shuffler
        self.door_open_s = 0.0  # the door opens as the next deck goes in, closed this long after
        self.power_cut_at_take = False  # the shuffler's power goes as the dealer takes the deck out
        #: the deck in hand changed on its way from the shuffler to the shoe, at the next load
        self.tamper: Callable[[list[SimCard]], list[SimCard]] | None = None
        #: ground truth of the shoe's loads: how many so far, which of them were tampered with,
        #: and the loads this round's cards were drawn from (a round that settles with a card of
        #: a tampered load is wrongly settled, whatever fault its round was given)
        self.loads = 0
        self.tampered_loads: set[int] = set()
        self.round_loads: set[int] = set()

    def arm(self, nth_draw: int, act: Callable[[], None]) -> None:
        self._armed[self._draws + nth_draw] = act

    def at_step(self, step: str, act: Callable[[], None], draw: int | None = None) -> StepHook:
        hook = StepHook(step, act, draw)
        self._hooks.append(hook)
        return hook

    def new_round(self) -> None:
        self._round_draws = 0

    def disarm(self) -> list[StepHook]:
        """Drop the hooks that did not strike; return them."""
        missed = [h for h in self._hooks if not h.fired]
        self._hooks = []
        return missed

    def _fire(self, step: str, draw: int | None = None) -> None:
        for hook in self._hooks:
            if not hook.fired and hook.step == step and hook.draw == draw:
                hook.fired = True
                hook.act()

    def insert_deck(self, colour: BackColour) -> None:
        self.inserting = colour
        self._fire("shuffle")
        if self.door_open_s:  # the door opens as the deck goes in; the dealer closes it a moment later
            shuffler, down = self.sim.shuffler, self.door_open_s
            self.door_open_s = 0.0
            shuffler.faults.door_open = True
            self.clock.timer(down, setattr, shuffler.faults, "door_open", False)
        if self.late_insert_s:  # the dealer is slow to put the previous deck in the shuffler
            delay, self.late_insert_s = self.late_insert_s, 0.0
            self.clock.timer(delay, self.sim.dealer.insert_deck, colour)
            return
        self.sim.dealer.insert_deck(colour)

    def take_from_shuffler(self) -> None:
        self.sim.dealer.take_from_shuffler()
        if self.power_cut_at_take:  # DeckDelivered is lost with the power, unless already acknowledged
            self.power_cut_at_take = False
            self.sim.shuffler.reboot()

    def load_shoe(self, colour: BackColour) -> None:
        self._fire("load_shoe")
        self.loads += 1
        if self.tamper is not None and self.sim.dealer.in_hand:
            change, self.tamper = self.tamper, None
            self.sim.dealer.change_deck_in_hand(change)
            self.tampered_loads.add(self.loads)
        if self.early:  # the dealer draws a card before betting has closed: as soon as the deck is in
            self.early = False
            self.sim.dealer.load_shoe(colour)
            self.sim.dealer.draw_card()
            return
        self.sim.dealer.load_shoe(colour)

    def draw_card(self) -> None:
        self._draws += 1
        self._round_draws += 1
        self.round_loads.add(self.loads)
        act = self._armed.pop(self._draws, None)
        if act is not None:
            act()
        self._fire("draw", self._round_draws)
        self.sim.dealer.draw_card()

    def collect(self) -> None:
        self.sim.dealer.collect()
        self._fire("collect")


class BurstTransport(FaultyTransport):
    """A transport that flips one bit in half of its next ``n`` reads (a noisy patch
    on the line, :meth:`burst`), or in every read for a while (:meth:`noisy_for`);
    the CRC catches each, the ARQ recovers. ``clock``: the table's clock, which
    :meth:`noisy_for`'s seconds run on."""

    def __init__(self, inner, seed: int, clock=REAL_CLOCK) -> None:
        super().__init__(inner, FaultPlan(seed=seed))
        self._burst = 0
        self._clock = clock
        self._noisy_until = 0.0

    def burst(self, reads: int) -> None:
        """Half of the next ``reads`` reads are corrupted (0: the burst ends, and so
        does a :meth:`noisy_for` patch)."""
        self._burst = reads
        if reads == 0:
            self._noisy_until = 0.0

    def noisy_for(self, seconds: float) -> None:
        """Every read for the next ``seconds`` (table clock) is corrupted: nothing the
        device sends gets through meanwhile, however often it resends."""
        self._noisy_until = self._clock.monotonic() + seconds

    def read(self, max_bytes: int = 512, timeout_s: float | None = None) -> bytes:
        data = super().read(max_bytes, timeout_s)
        noisy = data and self._clock.monotonic() < self._noisy_until
        if data and (self._burst > 0 or noisy):
            self._burst = max(0, self._burst - 1)
            if not noisy and self._rng.random() < 0.5:
                return data
            i = self._rng.randrange(len(data))
            data = data[:i] + bytes((data[i] ^ 0x10,)) + data[i + 1:]
            self.injected["bit_flip"] += 1
        return data


class NoisyCable:
    """The shoe's cable with the soak's line noise in it, for a driver in a process of its
    own (docs/drivers.md, "A driver's process"): a pty pair of its own at ``path``, the
    driver's side, relayed to the emulator's pty through ``noise`` (a
    :class:`BurstTransport` on it) by a thread in this process. When the emulator's pty goes
    (a cable pulled), the relay's pty goes too and ``path`` with it, and both come back
    once the emulator's does: the driver sees what it would on a real cable."""

    def __init__(self, noise: BurstTransport, path: Path) -> None:
        self.noise = noise
        self.path = path
        self._closed = threading.Event()
        #: set while the relay's pty is at ``path``
        self.up = threading.Event()
        self._thread = threading.Thread(target=self._run, name="noisy-cable", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = 0.01
        while not self._closed.is_set():
            try:
                self.noise.open()
            except LinkError:  # the emulator's adapter is out: look again, backing off
                self._closed.wait(wait)
                wait = min(wait * 2, 0.2)
                continue
            wait = 0.01
            master, slave = os.openpty()
            tty.setraw(slave)
            tmp = self.path.with_suffix(".new")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(os.ttyname(slave))
            tmp.replace(self.path)
            self.up.set()
            try:
                self._relay(master)
            finally:
                self.up.clear()
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                for fd in (master, slave):
                    os.close(fd)
                self.noise.close()

    def _relay(self, master: int) -> None:
        """Bytes both ways until either side goes (or :meth:`close`)."""
        stop = threading.Event()

        def down() -> None:  # what the driver writes, to the emulator
            while not stop.is_set() and not self._closed.is_set():
                if not select.select([master], [], [], 0.05)[0]:
                    continue
                try:
                    data = os.read(master, 4096)
                    self.noise.write(data)
                except (OSError, LinkError):
                    stop.set()
                    return

        writer = threading.Thread(target=down, name="noisy-cable-down", daemon=True)
        writer.start()
        try:
            while not stop.is_set() and not self._closed.is_set():
                try:
                    data = self.noise.read(4096, 0.05)
                except LinkError:
                    return
                if data:
                    os.write(master, data)
        except OSError:
            return
        finally:
            stop.set()
            writer.join()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)


class ChaosTable:
    """A simulated table with the controller, a journal and the automatic supervisor.

    ``speed``: how many times faster than real time the table's clock runs
    (:class:`protocols.clock.VirtualClock`): what a person or a device takes
    time for (an unplug's duration, a slow dealer, the devices' resend
    back-off) and the controller's event timeout all run on it, so a soak
    compresses them alike; the host's link timers stay on real time, as they
    guard a real transport. 1 (the default) is real time. ``players``: seeded players
    who sit down, leave and vary their bets (:class:`table.players.SimulatedPlayers`)
    instead of the fixed bet on every seat (scenarios keep the fixed bet: their
    faults are placed by draw). ``apart``: the SPEC drivers run as a table runs them, each in a
    process of its own (docs/drivers.md, "A driver's process"), the shoe's line noise made
    on its cable (:class:`NoisyCable`); else in this process, its transport wrapped.
    """

    def __init__(self, *, seed: int, seats: int = 3, journal_path: str | Path | None = None,
                 speed: float = 1.0, players: bool = False, apart: bool = False) -> None:
        self._stack = ExitStack()
        tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
        journal_path = journal_path or tmp / "journal.sqlite3"
        self.link_dir = tmp
        self.clock = REAL_CLOCK if speed == 1 else VirtualClock(speed)
        self.sim = self._stack.enter_context(SimulatedTable((RED, BLUE), seed=seed, link_dir=self.link_dir,
                                                            clock=self.clock, history=None))  # every read: the truth
        self.journal = Journal(journal_path, key=table_key_for(journal_path)[0])
        self._stack.callback(self.journal.close)
        self.events: queue.Queue = queue.Queue(maxsize=1024)
        cfg = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=200, max_attempts=12, reconnect_initial_ms=20,
                         reconnect_max_ms=200, heartbeat_interval_ms=500, read_timeout_ms=50)
        self.shoe_faults = BurstTransport(SerialTransport(str(self.link_dir / "shoe"), read_timeout_s=0.05), seed,
                                          self.clock)
        if apart:
            cable = NoisyCable(self.shoe_faults, self.link_dir / "shoe-cable")
            self._stack.callback(cable.close)
            if not cable.up.wait(10):
                raise DeviceFault("the shoe's cable relay did not come up within 10 s")
            self.shuffler = self._open_apart(DriverKind.SHUFFLER, str(self.link_dir / "shuffler"), cfg)
            self.shoe = self._open_apart(DriverKind.SHOE, str(cable.path), cfg)
        else:
            self.shuffler = self._open(Shuffler, SerialTransport(str(self.link_dir / "shuffler"),
                                                                 read_timeout_s=0.05), cfg)
            self.shoe = self._open(CardShoe, self.shoe_faults, cfg)
        self.dealer = FaultyDealer(self.sim)
        self.console = AutoSupervisor(self.sim)
        self._detections: dict[str, int] = {}
        #: Indices in the dealer's ground truth of cards whose event the shoe lost on purpose.
        self.unreported: set[int] = set()
        #: The detail of each deck_incomplete violation, in journal order.
        self.incomplete_details: list[str] = []
        #: The back colour of each deck the shuffler counted (DeckVerified), in order.
        self.counts: list[str] = []
        self._scanned = 0
        # The drivers are opened by hand above (the shoe's transport wrapped in the soak's line
        # noise); the table on them is assembled as every table is (table.assembly).
        spec = TableSpec(
            shuffler=DeviceSpec(DriverKind.SHUFFLER, str(self.link_dir / "shuffler"), link_config=cfg),
            shoe=DeviceSpec(DriverKind.SHOE, str(self.link_dir / "shoe"), link_config=cfg),
            decks=(("A", RED), ("B", BLUE)), tables=Tables.load("pa-649a12b-1"), seats=seats, ante_cents=1000,
            timing=TableTiming(event_timeout_s=5, clock=self.clock))
        # players who sit down, leave and vary their bets: the ledger counts them
        people = People(self.dealer, console=self.console,
                        players=SimulatedPlayers(seed, DEFAULT_LIMITS, seats, ()) if players else None)
        self.controller = build_controller(spec, people, self.shuffler, self.shoe, self.events, journal=self.journal)
        self._stack.callback(self.controller.close)  # first out: sign the journal's tail

    def _open_apart(self, kind: DriverKind, url: str, cfg: LinkConfig) -> Any:
        """The SPEC driver for ``kind`` in a process of its own (the one seam, table.assembly)."""
        driver = open_driver(DeviceSpec(kind, url, link_config=cfg), self.events)
        self._stack.callback(driver.close)
        return driver

    def _open(self, cls, transport, cfg):
        link = Link(transport, name=str(cls.KIND), config=cfg, events=self.events, ack_on_delivery=False)
        link.open()
        driver = cls(link)
        self._stack.callback(driver.close)
        driver.connect()
        return driver

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "ChaosTable":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def play(self) -> str:
        """One round, resolving holds as the supervisor would: ``"played"``,
        ``"held"`` (voided), ``"fault"`` (a device fault or timeout stopped it: ``tablectl
        run`` with a front door waits and tries again) or ``"exit"`` (a link error escaped the
        round: ``tablectl run`` exits 4 on it; the next round goes on, as after a restart)."""
        self.dealer.new_round()
        try:
            self.controller.play_round()
            return "played"
        except RoundHeld:
            self.controller.resolve_held()
            return "held"
        except (DeviceFault, DeviceTimeout) as exc:
            # ``tablectl run`` with a front door waits and tries the step again (table/cli/run.py)
            log.warning("round_fault", error=str(exc))
            if self.controller.held is not None:
                self.controller.resolve_held()
            return "fault"
        except LinkError as exc:
            # An exit: ``tablectl run`` exits 4 on it, front door or not (a refused Shuffle, a
            # link that stays down); the soak counts it (``exits``) and plays on, as a restart would.
            log.warning("round_exit", error=str(exc))
            if self.controller.held is not None:
                self.controller.resolve_held()
            return "exit"

    def truth_reads(self) -> list[tuple[str, str]]:
        """Every card the shoe read, in order, less those whose event the shoe lost on purpose
        (``lost_card_event``: the host cannot journal what never left the device; that fault's
        row of the soak's table says what became of its round)."""
        return [(str(c.card), str(c.back_colour)) for i, c in enumerate(self.sim.dealer.drawn)
                if i not in self.unreported]

    def device_reads(self) -> list[tuple[str, str]]:
        """Every card event the shoe delivered, as journaled (an unreadable card as ``"??"``)."""
        out = []
        for e in self.journal.entries():
            if e.kind == "card_read" and not e.body.get("manual"):  # a card the shoe read (its face sealed)
                out.append((self.journal.unseal(e)["card"], e.body["back_colour"]))
            elif e.kind == "device_event" and e.body["message"]["message"] == "CardUnreadable":
                out.append(("??", e.body["message"]["back_colour"]))
        return out

    def detections(self) -> dict[str, int]:
        """What the controller noticed so far: violations and incidents by kind, link
        notices, supervisor actions, and CRC errors the parsers caught (cumulative;
        the journal is read incrementally)."""
        out = self._detections
        for e in self.journal.entries(since=self._scanned):
            self._scanned = e.seq
            if e.kind == "violation":
                key = f"violation:{e.body['rule']}"
                if e.body["rule"] == "deck_incomplete":  # the detail names the missing card: sealed
                    self.incomplete_details.append(self.journal.unseal(e).get("detail", e.body["detail"]))
            elif e.kind == "incident":
                key = f"incident:{e.body['what']}"
            elif e.kind == "link":
                key = f"link:{e.body['source']}:{e.body['notice']}"
            elif e.kind == "supervisor":
                key = f"supervisor:{e.body['action']}"
            elif e.kind == "device_fault" and e.body.get("step") == "held":
                key = f"device_fault:{e.body['source']}"
            else:
                if e.kind == "device_event" and e.body["message"]["message"] == "DeckVerified":
                    self.counts.append(e.body["message"]["back_colour"])
                continue
            out[key] = out.get(key, 0) + 1
        out.update(self.link_errors())
        return dict(out)

    def link_errors(self) -> dict[str, int]:
        """Frames the links' parsers dropped for a bad CRC, by device (cumulative)."""
        return {f"link:{name}:crc_error": driver.link.frame_errors
                for name, driver in (("shoe", self.shoe), ("shuffler", self.shuffler))
                if driver.link.frame_errors}


#: What counts as detecting each fault class (any of the keys, after injection).
DETECTED_BY = {
    "foreign_card": ("violation:foreign_card",),
    "duplicate_read": ("violation:duplicate_card",),
    "missing_card": ("violation:deck_incomplete",),
    "unreadable_card": ("incident:card unreadable", "supervisor:confirm_card"),
    "jam": ("incident:shuffler fault: jam",),
    "early_card": ("incident:card drawn before betting closed", "violation:card_drawn_before_bets_closed",
                   "incident:card drawn with no round in progress",
                   # bets close at once on a simulated table: the early card shows as one too many
                   "incident:card drawn beyond the deal", "violation:wrong_card_count"),
    "extra_card": ("violation:wrong_card_count", "incident:card drawn beyond the deal",
                   "incident:card drawn before betting closed"),
    "corrupt_bytes": ("link:shoe:crc_error",),
    "unplug_shoe": ("link:shoe:link_down",),
    "reboot_shoe": ("link:shoe:device_rebooted",),
    "unplug_shuffler": ("link:shuffler:link_down",),
    "reboot_shuffler": ("link:shuffler:device_rebooted",),
    # a driver plugin's shoe (table.hil.driver_soak): a card out past the reader, no event at all
    "card_unreported": ("violation:card_unaccounted",),
    # HANDS_FAULT_KINDS: the alarm the host gives, or the round held ("round:held", the soak's own
    # mark: a hold the supervisor voided) where the table's words for it are still being settled
    "door_open": ("device_fault:shuffler", "incident:shuffler fault: door open", "round:held"),
    "reboot_mid_shuffle": ("link:shuffler:device_rebooted",),
    "reboot_mid_delivery": ("link:shuffler:device_rebooted",
                            *(f"incident:no record of the {c} deck out of the shuffler: the {c} deck is already "
                              f"out of the shuffler" for c in (RED, BLUE))),
    "garble_shuffler": ("link:shuffler:crc_error",),
    "lost_card_event": ("violation:card_unaccounted", "round:held", "incident:card event lost*"),
    "shoe_extra_cards": ("violation:duplicate_card", "violation:foreign_card", "violation:wrong_card_count",
                         "incident:card drawn beyond the deal", "round:held",
                         "incident:the shoe holds more cards than it should*"),
    "short_deck_in_shoe": ("violation:wrong_card_count", "incident:card drawn beyond the deal",
                           "violation:card_unaccounted", "round:held"),
    "doubled_card_in_shoe": ("violation:duplicate_card", "violation:foreign_card", "round:held",
                             "incident:the shoe holds more cards than it should*"),
    "substituted_deck": ("violation:deal_not_the_shuffle", "round:held"),
    # a driver plugin's shuffler (table.hil.driver_soak): an event lost inside the shuffler
    "lost_shuffler_event": ("round:held",),
}


#: Alarms a fault may leave for the round after it, as its consequence, not a false
#: alarm: a shoe that rebooted or lost its cable mid-deal holds the reads it made
#: until the host identifies it again; they arrive after the round was voided, as
#: cards drawn with no round in progress (recorded, none lost).
#: Likewise a noise burst: a card event whose every resend within the controller's
#: event timeout was corrupted (the device backs off to 2 s between resends) holds
#: the round as a timeout; the read gets through after the void.
AFTERMATH = {
    "reboot_shoe": ("incident:card drawn with no round in progress",),
    "unplug_shoe": ("incident:card drawn with no round in progress",),
    "corrupt_bytes": ("incident:card drawn with no round in progress",
                      # a burst long enough that a card's every resend in the wait was garbled: the
                      # shoe's count shows the card out, the round is held as a card unaccounted
                      "incident:card event lost*", "violation:card_unaccounted"),
    # the delivery lost with the power: the next round finds the deck out of the shuffler
    # (after a restart), or the table takes it from the shuffler's status
    "reboot_mid_delivery": (*DETECTED_BY["reboot_mid_delivery"][1:], "incident:the shuffler's event for *"),
    # a shuffle lost with the power is asked again, said as an incident
    "reboot_mid_shuffle": ("incident:the shuffle of the * deck was lost*",),
    # a deck held at the load for cards that are not the shuffler's: the custody violation's own
    # words, the deck in the shoe sent round the shuffler again, and its count there failing
    "shoe_extra_cards": ("incident:custody violation: the shoe holds more cards than*",
                         "incident:the shoe holds a * deck the table has no record of loading*",
                         "violation:deck_incomplete"),
    "doubled_card_in_shoe": ("incident:custody violation: the shoe holds more cards than*",
                             "incident:the shoe holds a * deck the table has no record of loading*",
                             "violation:deck_incomplete"),
}


def _matching(keys: "set[str] | dict[str, int]", patterns: tuple[str, ...]) -> set[str]:
    """The keys of ``keys`` that ``patterns`` name: equal, or matching a pattern with ``*``
    (:func:`fnmatch.fnmatchcase`: an alarm whose words carry the round's own figures, as a
    count's, or a deck's colour)."""
    exact = {p for p in patterns if "*" not in p}
    wild = [p for p in patterns if "*" in p]
    return {k for k in keys if k in exact or any(fnmatch.fnmatchcase(k, p) for p in wild)}


def _compare_reads(truth: list[tuple[str, str]], recorded: list[tuple[str, str]],
                   window: int = 32) -> tuple[int, int, int]:
    """``(lost, duplicated, misread)``: the shoe's ground truth against the journaled
    card events, aligned read by read (an unreadable card, ``"??"``, matches a
    card of its back colour). A read missing from the journal is lost, one
    journaled twice is duplicated, one journaled as another card is misread;
    they do not cancel out."""
    def same(a: tuple[str, str], b: tuple[str, str]) -> bool:
        return a == b or (b[0] == "??" and a[1] == b[1])

    i = j = lost = dup = misread = 0
    while i < len(truth) and j < len(recorded):
        if same(truth[i], recorded[j]):
            i, j = i + 1, j + 1
            continue
        ahead_rec = next((k for k in range(1, window) if j + k < len(recorded) and same(truth[i], recorded[j + k])), None)
        ahead_truth = next((k for k in range(1, window) if i + k < len(truth) and same(truth[i + k], recorded[j])), None)
        if ahead_rec is not None and (ahead_truth is None or ahead_rec <= ahead_truth):
            dup, j = dup + ahead_rec, j + ahead_rec
        elif ahead_truth is not None:
            lost, i = lost + ahead_truth, i + ahead_truth
        else:
            misread, i, j = misread + 1, i + 1, j + 1
    return lost + len(truth) - i, dup + len(recorded) - j, misread


def _matches_missing(detail: str, colour: BackColour, card: Card) -> bool:
    """Whether a deck_incomplete detail (see ``DeckCustody.on_deck_verified``) is the
    count of the ``colour`` deck, reporting ``card`` missing."""
    missing = detail.rpartition("missing ")[2]
    return f"({colour})" in detail and f"'{card}'" in missing


def run_soak(rounds: int, seed: int, *, seats: int = 3, fault_rate: float = 0.3,
             progress: Callable[[int], None] | None = None, speed: float = SOAK_SPEED,
             kinds: tuple[str, ...] | None = None, apart: bool = True) -> dict[str, Any]:
    """Play ``rounds`` rounds with random faults from every class (``fault_rate``
    of the rounds get one; ``kinds``: the classes, :data:`SOAK_KINDS` by default);
    return the summary the issue asks for. ``apart``: the SPEC drivers each in a process
    of their own, as a table runs them (:class:`ChaosTable`).

    Per class (``by_kind``): injected, detected (its alarm, this round or the next),
    ``ridden_through`` (the round held or settled with no exit), ``wrongly_settled``
    (a round of a :data:`MUST_HOLD` class that settled: must be 0) and ``exits`` (a
    link error escaped the round, which ``tablectl run`` exits 4 on: must be 0). A class the host does not yet hold or ride through shows
    there, never hidden.

    ``speed``: the table's clock runs this many times faster than real time
    (see :class:`ChaosTable`): the same faults, in the same order, with the
    same counting; 1 is real time.

    A fault counts as detected when the journal shows its alarm (see
    :data:`DETECTED_BY`) in the round it was injected or the next (a card event
    that straggles past the deal, a reboot noticed at the shoe's next
    request). A missing card counts as detected when its deck's next count
    reports that very card missing. Some faults leave a deck wrong on purpose
    (a foreign or cloned card): the deck's next count then fails, which is
    expected, not a false alarm; so are the alarms :data:`AFTERMATH` lists in
    the round after their fault. Any other violation or incident in a round
    without an injected fault is a false alarm.

    A fault that never struck in its round (the round ended before the draw
    it waited for, or before a shuffle or shoe load) is withdrawn and counted
    in ``faults_withdrawn``, not as injected. Missing cards whose deck had not
    been counted again when the soak ended are in ``faults_pending_at_end``.
    Every undetected fault and false alarm is listed in ``anomalies`` with
    its round. Card events are compared with the shoe's ground truth: every
    card it read must reach the journal once, in order.
    """
    rng = random.Random(seed)
    kinds = SOAK_KINDS if kinds is None else kinds
    tally = _SoakTally()
    with ChaosTable(seed=seed, seats=seats, speed=speed, players=True, apart=apart) as t:
        t.controller.prepare()
        inj = FaultInjector(t, rng)
        for n in range(1, rounds + 1):
            kind = rng.choice(kinds) if rng.random() < fault_rate else None
            tally.round(n, kind, t, inj)
            if progress:
                progress(n)
        tally.end()
        truth, recorded = t.truth_reads(), t.device_reads()
        ledger = wager_ledger(t.journal.entries())  # every wager placed is settled or returned
    return {**tally.summary(rounds, seed, speed, truth, recorded, kinds=kinds), "wagers": ledger.to_dict()}


class _SoakTally:
    """The soak's counting (:func:`run_soak`): each round's fault, what the journal showed
    for it, and every anomaly, by round."""

    def __init__(self, detected_by: dict[str, tuple[str, ...]] | None = None) -> None:
        #: what counts as detecting each fault class (:data:`DETECTED_BY`, or a soak's own)
        self.detected_by = detected_by or DETECTED_BY
        self.injected: collections.Counter[str] = collections.Counter()
        self.detected: collections.Counter[str] = collections.Counter()
        self.withdrawn: collections.Counter[str] = collections.Counter()
        self.late_by_kind: collections.Counter[str] = collections.Counter()
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.false_alarms = 0
        self.expected_incomplete = 0
        #: (round, colour, card, counts then): a card taken out, not found missing yet
        self.short_decks: list[tuple[int, BackColour, Card, int]] = []
        self.late: str | None = None
        self.late_round = 0
        self.previous: str | None = None
        self.anomalies: list[dict[str, Any]] = []
        self.extra_alarm_rounds = 0
        self.excused = 0
        self.stray_notices = 0
        #: by class: rounds that ended without an exit (held or settled), settled although the
        #: class forbids it (:data:`MUST_HOLD`), and exits (a device error escaped the round)
        self.ridden: collections.Counter[str] = collections.Counter()
        self.wrongly_settled: collections.Counter[str] = collections.Counter()
        self.exits: collections.Counter[str] = collections.Counter()

    def credit(self, kind: str, late: bool = False) -> None:
        self.detected[kind] += 1
        self.late_by_kind[kind] += late

    def round(self, n: int, kind: str | None, t: "ChaosTable", inj: "FaultInjector") -> None:
        """Play round ``n`` with fault ``kind`` (None: none) and count what it showed."""
        before = t.detections()
        n_incomplete, n_missing, n_counts = len(t.incomplete_details), len(inj.missing), len(t.counts)
        if kind:
            inj.inject(kind)
        t.dealer.round_loads.clear()
        outcome = t.play()
        self.outcomes[outcome] += 1
        dealt_tampered = bool(t.dealer.round_loads & t.dealer.tampered_loads)
        struck = inj.withdraw_unstruck(kind or "")
        if kind == "missing_card":
            struck = len(inj.missing) > n_missing  # else there was no card to take
        if kind and not struck:
            self.withdrawn[kind] += 1
            kind = None
        if kind:
            self.injected[kind] += 1
        self._outcome(kind, outcome, dealt_tampered)
        if kind == "missing_card":
            self.short_decks.append((n, *inj.missing[-1], n_counts))
        after = t.detections()
        new = {k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)}
        if outcome == "held":
            new["round:held"] = 1
        self._counts(t, n_incomplete, new)
        if kind in WRONG_DECK_KINDS:
            self.expected_incomplete += 1
        self._alarms(n, kind, new, outcome)
        self.previous = kind

    def _outcome(self, kind: str | None, outcome: str, dealt_tampered: bool = False) -> None:
        """How the round of fault ``kind`` ended: an exit (``"exit"``: a link error escaped the
        round, which ``tablectl run`` exits 4 on), settled although ``kind`` forbids it, or
        ridden through (held, settled, or stopped by a device fault the table waits out and
        tries again: no exit). A round with no fault that exits counts under ``"(none)"``.

        A deck tampered with on its way to the shoe (:data:`TAMPER_KINDS`) is judged by the
        ground truth (``dealt_tampered``: a card of this round came from a tampered load): held
        at the load by the shoe's count and counted again, the round is dealt from a verified
        deck and settles rightly; any round that settles with a tampered load's card, whatever
        its own fault, is wrongly settled (counted under ``"(tampered deck)"`` when not its own)."""
        key = kind or "(none)"
        if outcome == "played" and dealt_tampered and kind not in TAMPER_KINDS:
            self.wrongly_settled["(tampered deck)"] += 1
        if outcome == "exit":
            self.exits[key] += 1
        elif outcome == "played" and kind in MUST_HOLD and (kind not in TAMPER_KINDS or dealt_tampered):
            self.wrongly_settled[key] += 1
        elif kind:
            self.ridden[key] += 1

    def _counts(self, t: "ChaosTable", n_incomplete: int, new: dict[str, int]) -> None:
        """Each failed count: the short decks it reports, else a foreign or cloned card going
        back with its deck (expected), else an alarm (left in ``new``)."""
        unexplained = 0
        for detail in t.incomplete_details[n_incomplete:]:
            found = [d for d in self.short_decks if _matches_missing(detail, d[1], d[2])]
            for d in found:
                self.short_decks.remove(d)
                self.credit("missing_card")
            if not found:
                if self.expected_incomplete:
                    self.expected_incomplete -= 1
                else:
                    unexplained += 1
        for d in [d for d in self.short_decks if str(d[1]) in t.counts[d[3]:]]:
            # Its deck was counted and the controller did not report the card missing.
            self.short_decks.remove(d)
            self.anomalies.append({"round": d[0], "what": "undetected", "fault": "missing_card",
                                   "card": f"{d[2]} ({d[1]})"})
        new.pop("violation:deck_incomplete", None)
        if unexplained:
            new["violation:deck_incomplete"] = unexplained

    def _alarms(self, n: int, kind: str | None, new: dict[str, int], outcome: str) -> None:
        """The round's alarms and link notices: each explained by its fault (this round's, or
        last round's showing late), excused as a fault's aftermath, or an anomaly."""
        previous = self.previous
        alarms = {k for k in new if k.startswith(("violation:", "incident:"))}
        aftermath = _matching(alarms, AFTERMATH.get(previous or "", ()))
        if kind:  # what a fault detected and held leaves in its own round (a recount, its count)
            aftermath |= _matching(alarms, AFTERMATH.get(kind, ()))
        self.excused += sum(new[k] for k in aftermath)
        alarms -= aftermath
        notices = {k for k in new if k.startswith("link:") and not k.endswith(":link_up")}
        if self.late is not None:
            # Last round's fault may show in this round (a straggling card event, a reboot
            # noticed at the next request): detection one round late, counted apart.
            if _matching(new, self.detected_by[self.late]):
                self.credit(self.late, late=True)
                alarms -= _matching(alarms, self.detected_by[self.late])
                notices -= _matching(notices, self.detected_by[self.late])
            else:
                self.anomalies.append({"round": self.late_round, "what": "undetected", "fault": self.late,
                                       "next_round_saw": dict(new)})
            self.late = None
        if kind and kind != "missing_card":
            if _matching(new, self.detected_by[kind]):
                self.credit(kind)
            else:
                self.late, self.late_round = kind, n
            alarms -= _matching(alarms, self.detected_by[kind])
            notices -= _matching(notices, self.detected_by[kind])
        if kind and alarms:
            # A faulted round with an alarm its fault does not explain: listed, not counted
            # as a false alarm (the fault may have caused it), for review.
            self.extra_alarm_rounds += 1
            self.anomalies.append({"round": n, "what": "extra_alarm", "fault": kind, "alarms": sorted(alarms),
                                   "outcome": outcome})
        if kind is None and previous is None and self.late is None and notices - {"link:shoe:crc_error"}:
            self.stray_notices += 1  # a link notice with no link fault behind it
            self.anomalies.append({"round": n, "what": "link_notice_without_fault", "notices": sorted(notices)})
        if kind is None and alarms:
            self.false_alarms += 1
            self.anomalies.append({"round": n, "what": "false_alarm", "alarms": sorted(alarms),
                                   "saw": dict(new), "outcome": outcome, "previous_fault": previous})

    def end(self) -> None:
        """The last round's fault never showed."""
        if self.late is not None:
            self.anomalies.append({"round": self.late_round, "what": "undetected", "fault": self.late,
                                   "next_round_saw": {}})

    def summary(self, rounds: int, seed: int, speed: float, truth: Any, recorded: Any,
                kinds: tuple[str, ...] = FAULT_KINDS) -> dict[str, Any]:
        """The soak's summary (docs/emulators.md): counts, by kind (``kinds``: the classes
        the soak draws from), and the anomalies."""
        pending = len(self.short_decks)  # decks not counted again before the end: neither detected nor missed
        if pending:
            self.injected["missing_card"] -= pending
        lost, duplicated, misread = _compare_reads(truth, recorded)
        return {
            "rounds": rounds,
            "faults_injected": self.injected.total(),
            "faults_detected": self.detected.total(),
            "lost_events": lost,
            "duplicated_events": duplicated,
            "false_alarms": self.false_alarms,
            "misread_events": misread,
            "faults_detected_late": self.late_by_kind.total(),
            "faults_withdrawn": self.withdrawn.total(),
            "faults_pending_at_end": pending,
            "extra_alarm_rounds": self.extra_alarm_rounds,
            "alarms_excused_as_aftermath": self.excused,
            "link_notices_without_fault": self.stray_notices,
            "wrongly_settled": self.wrongly_settled.total(),
            "exits": self.exits.total(),
            "exits_without_fault": self.exits["(none)"],
            "wrongly_settled_from_a_tampered_deck_of_another_round": self.wrongly_settled["(tampered deck)"],
            "by_kind": {k: {"injected": self.injected[k], "detected": self.detected[k],
                            "detected_late": self.late_by_kind[k], "withdrawn": self.withdrawn[k],
                            "ridden_through": self.ridden[k], "wrongly_settled": self.wrongly_settled[k],
                            "exits": self.exits[k]}
                        for k in kinds},
            "outcomes": dict(self.outcomes),
            "card_events": len(recorded),
            "seed": seed,
            "clock_speed": speed,
            "anomalies": self.anomalies,
        }


# --- scenarios -----------------------------------------------------------------------

SCENARIO_DIR = Path(simulators.__file__).resolve().parent / "scenarios"
_EXPECT_KEYS = {"rounds_played": int, "held_rounds": int, "voided_rounds": int,
                "incidents": list, "violations": list, "supervisor": list, "link": list}


def shipped_scenarios() -> list[Path]:
    """The scenario files in ``simulators/scenarios/``."""
    return sorted(SCENARIO_DIR.glob("*.toml"))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_scenario(path: str | Path) -> dict[str, Any]:
    """Read and check a scenario file (TOML). Raises :class:`ScenarioError` naming the
    file and the key (a fault's as ``fault[i].key``) and what is allowed.

    Keys: ``name``, ``description``, ``rounds``, ``seed``, ``seats`` (3), ``speed`` (1:
    how many times faster than real time the table's clock runs, as the soak's
    ``--speed``: device back-offs and the event timeout shrink, the host's link timers
    do not),
    ``[expect]`` (see :data:`_EXPECT_KEYS`), and one ``[[fault]]`` table per fault
    or slip of the virtual dealer:

    - ``kind``: one of :data:`FAULT_KINDS` or :data:`SLIP_KINDS`;
    - ``round``: 0..rounds, where 0 is the table's opening (before round 1);
    - ``step`` (default ``"before_round"``): where in that round it strikes, one of
      :data:`STEPS`; each step allows the kinds in :data:`STEP_KINDS`. ``shuffle``
      and ``load_shoe`` need round 0 or >= 2 (round 1 has no deck movements);
      ``draw`` and ``collect`` need round >= 1;
    - ``draw``: with ``step = "draw"`` only, and required there: the round's draw
      it strikes at, 1..3 * (seats + 1) (seat 1 first, the dealer last, three times);
      ``duplicate_read`` needs draw >= 2 (it repeats the round's first card);
    - ``seconds``: how long an ``unplug_shoe`` or a ``late_insert`` lasts (0.3); with
      ``corrupt_bytes``, how long every frame from the shoe is corrupted (without it:
      the soak's burst, half of the shoe's next 20 reads).
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{p}: {exc}") from exc
    for key, kind in (("name", str), ("rounds", int), ("seed", int)):
        if not isinstance(data.get(key), kind):
            raise ScenarioError(f"{p}: {key}: required, a {kind.__name__}")
    if data["rounds"] < 1:
        raise ScenarioError(f"{p}: rounds: must be >= 1")
    allowed_top = {"name", "description", "rounds", "seed", "seats", "speed", "fault", "expect"}
    for key in data:
        if key not in allowed_top:
            raise ScenarioError(f"{p}: {key}: unknown key; allowed: {', '.join(sorted(allowed_top))}")
    seats = data.get("seats", 3)
    if not _is_int(seats) or seats < 1:
        raise ScenarioError(f"{p}: seats: must be an integer >= 1")
    speed = data.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 1 <= speed <= 1000:
        raise ScenarioError(f"{p}: speed: a number 1..1000 (the table's clock against real time, as the soak's "
                            f"--speed), got {speed!r}")
    if not data.get("expect"):
        raise ScenarioError(f"{p}: expect: required: the controller's documented response to check")
    _check_faults(p, data, seats)
    expect = data.get("expect", {})
    for key, value in expect.items():
        if key not in _EXPECT_KEYS or not isinstance(value, _EXPECT_KEYS[key]):
            raise ScenarioError(f"{p}: expect.{key}: unknown or wrong type; allowed: "
                                + ", ".join(f"{k} ({t.__name__})" for k, t in _EXPECT_KEYS.items()))
    return data


def _check_faults(p: Path, data: dict[str, Any], seats: int) -> None:
    """:func:`load_scenario`'s checks of each ``[[fault]]``; raises :class:`ScenarioError`."""
    deal = 3 * (seats + 1)
    fault_keys = ("round", "step", "draw", "kind", "seconds")
    for i, f in enumerate(data.get("fault", [])):
        where = f"{p}: fault[{i}]"
        for key in f:
            if key not in fault_keys:
                raise ScenarioError(f"{where}.{key}: unknown key; allowed: {', '.join(fault_keys)}")
        kind = f.get("kind")
        if kind not in FAULT_KINDS + SLIP_KINDS:
            raise ScenarioError(f"{where}.kind: {kind!r}; allowed: " + ", ".join(FAULT_KINDS + SLIP_KINDS))
        if not _is_int(f.get("round")) or not 0 <= f["round"] <= data["rounds"]:
            raise ScenarioError(f"{where}.round: must be 0..{data['rounds']}")
        step = f.get("step", "before_round")
        if step not in STEPS:
            raise ScenarioError(f"{where}.step: {step!r}; allowed: {', '.join(STEPS)}")
        if kind not in STEP_KINDS[step]:
            can = [s for s in STEPS if kind in STEP_KINDS[s]]
            raise ScenarioError(f"{where}.step: {kind} cannot strike at step {step!r}; {kind} can strike at: "
                                f"{', '.join(can)} (step {step!r} takes: {', '.join(STEP_KINDS[step])})")
        if step in ("shuffle", "load_shoe") and f["round"] == 1:
            raise ScenarioError(f"{where}.round: step {step!r} needs round 0 or 2..{data['rounds']}: round 1 is "
                                "dealt from the deck loaded at the opening, with no deck movements before it")
        if step in ("draw", "collect") and f["round"] == 0:
            raise ScenarioError(f"{where}.round: step {step!r} needs round 1..{data['rounds']}: "
                                "round 0 (the opening) deals no cards")
        if step != "draw":
            if "draw" in f:
                raise ScenarioError(f"{where}.draw: only with step = \"draw\" (this fault's step is {step!r})")
        else:
            low = 2 if kind == "duplicate_read" else 1
            if not _is_int(f.get("draw")) or not low <= f["draw"] <= deal:
                why = " (duplicate_read repeats the round's first card)" if low == 2 else ""
                raise ScenarioError(f"{where}.draw: required with step = \"draw\": an integer {low}..{deal}, "
                                    f"the round's draw ({seats} seats and the dealer, 3 cards each){why}")


def run_scenario(path: str | Path, journal_path: str | Path | None = None) -> dict[str, Any]:
    """Run a scenario on a simulated table; return what was expected, what was
    observed, and ``passed``. Observed kinds are the distinct violation rules,
    incident kinds, supervisor actions and link notices the journal holds. A
    fault scheduled at a step (not ``before_round``) that never struck, e.g. at
    a draw its round did not reach, is a difference (``fault[i]``): it is
    dropped at the end of its round, never carried into the next."""
    sc = load_scenario(path)
    faults = sc.get("fault", [])
    missed: dict[str, Any] = {}
    with ChaosTable(seed=sc["seed"], seats=sc.get("seats", 3), journal_path=journal_path,
                    speed=float(sc.get("speed", 1.0))) as t:
        inj = FaultInjector(t, random.Random(sc["seed"]))

        def arm(n: int) -> list[tuple[int, StepHook]]:
            hooks = []
            for i, f in enumerate(faults):
                if f["round"] == n:
                    hook = inj.inject(f["kind"], f.get("seconds"), step=f.get("step", "before_round"),
                                      draw=f.get("draw"))
                    if hook is not None:
                        hooks.append((i, hook))
            return hooks

        def check(n: int, hooks: list[tuple[int, StepHook]]) -> None:
            t.dealer.disarm()
            for i, h in hooks:
                if not h.fired:  # e.g. the round was held before that draw
                    at = f"round {n}, step {h.step}" + (f", draw {h.draw}" if h.draw is not None else "")
                    missed[f"fault[{i}]"] = {"expected": f"{faults[i]['kind']} strikes at {at}",
                                             "observed": "never struck: the round did not reach that step"}

        hooks = arm(0)
        t.controller.prepare()
        check(0, hooks)
        for n in range(1, sc["rounds"] + 1):
            hooks = arm(n)
            t.play()
            check(n, hooks)
        observed: dict[str, Any] = {"violations": set(), "incidents": set(), "supervisor": set(), "link": set()}
        steps: dict[str, set] = {}
        for e in t.journal.entries():
            if e.kind == "violation":
                observed["violations"].add(e.body["rule"])
            elif e.kind == "incident":
                observed["incidents"].add(e.body["what"])
            elif e.kind == "supervisor":
                observed["supervisor"].add(e.body["action"])
            elif e.kind == "link":
                observed["link"].add(e.body["notice"])
            elif e.kind == "round":
                steps.setdefault(e.round_id, set()).add(e.body.get("step"))
        observed = {k: sorted(v) for k, v in observed.items()}
        observed["held_rounds"] = sum(1 for st in steps.values() if "held" in st)
        observed["voided_rounds"] = sum(1 for st in steps.values() if "voided" in st)
        observed["rounds_played"] = t.controller.rounds_played
        lost = len(t.truth_reads()) - len(t.device_reads())
    expect = sc.get("expect", {})
    diffs = {}
    for key, want in expect.items():
        got = observed[key]
        if (sorted(want) if isinstance(want, list) else want) != got:
            diffs[key] = {"expected": want, "observed": got}
    if lost:
        diffs["card_events"] = {"expected": "none lost", "observed": f"{lost} lost"}
    diffs.update(missed)
    return {"name": sc["name"], "file": str(path), "passed": not diffs, "expected": expect,
            "observed": observed, "differences": diffs}
