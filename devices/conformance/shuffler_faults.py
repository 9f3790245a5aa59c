"""The shufflers' fault checks (docs/conformance.md, "The checks"): a short deck, a doubled
card, a foreign card, a jam, the door, line noise, a power cycle mid-shuffle and mid-delivery.

Written once and run by both suites: the drivers' suite (``drivers.py``, any driver plugin,
through its ``DriverContext``) and the SPEC suite (``suite.py``, a SPEC device through the
built-in driver). A check takes a context with ``open()`` (a connected driver and its event
queue, acknowledging only when told), ``expect_event(drv, events, kind, ack=, timeout_s=,
across_reconnect=)``, ``next(events, timeout_s, notices=)``, ``operator`` (the hands, a
``suite.Operator``) and ``target`` (``event_timeout_s``, ``shuffle_timeout_s``), and
returns what it saw or raises :class:`~devices.conformance.outcomes.CheckFailed` /
``NeedsOperator``. The deck checks name the cards: a driver that counts right but names
each card as another card fails them.

Imports the driver contract, ``protocols`` and ``outcomes`` only.
"""

from __future__ import annotations

import queue
from typing import Any, Callable, Iterable

from protocols.cards import DECK_SIZE, BackColour, Card

from ..contract import (
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceEvent,
    DeviceState,
    LinkNotice,
    NakCode,
    RequestRefused,
    ShufflerFault,
    ShufflerFaultCode,
    StatusReply,
)
from .outcomes import CheckFailed, expect

def status_ok(st: Any, what: str) -> StatusReply:
    expect(isinstance(st, StatusReply), f"{what}: status() returned {type(st).__name__}, not StatusReply")
    expect(isinstance(st.state, DeviceState) and isinstance(st.back_colour, BackColour),
           f"{what}: status fields are not DeviceState/BackColour")
    expect(0 <= st.cards <= DECK_SIZE, f"{what}: status says {st.cards} cards")
    reply: StatusReply = st  # a StatusReply (checked above)
    return reply



def empty_shuffler(ctx: Any, drv: Any, events: "queue.Queue[DeviceEvent]") -> None:
    st = drv.status()
    if st.state is DeviceState.IDLE:
        return
    if st.state is DeviceState.HAS_DECK:
        drv.shuffle()
        ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s)
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)


def _fresh_deck_in(ctx: Any, drv: Any, events: "queue.Queue[DeviceEvent]", insert: Callable[[], None]) -> None:
    """Empty the shuffler, then ``insert`` a deck; its ``DeckInserted`` is taken."""
    empty_shuffler(ctx, drv, events)
    insert()
    ctx.expect_event(drv, events, DeckInserted)


def _deck_content(ctx: Any, *, missing: tuple[Card, ...] = (), doubled: tuple[Card, ...] = (),
                  foreign: int = 0) -> DeckVerified:
    """Insert a deck with the faults named, shuffle it, check that ``DeckVerified`` names
    exactly those faults (the cards by name: a driver that misnames cards fails), take it out."""
    drv, events = ctx.open()
    colour = BackColour.RED
    _fresh_deck_in(ctx, drv, events, lambda: ctx.operator.insert_faulty_deck(
        colour, missing=missing, doubled=doubled, foreign=foreign))
    drv.shuffle()
    ver: DeckVerified = ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s).message
    count = DECK_SIZE - len(missing) + len(doubled) + foreign

    def named(idx: Iterable[int]) -> str:
        return " ".join(sorted(str(Card.from_index(i)) for i in idx)) or "none"

    expect(ver.back_colour == colour, f"DeckVerified says {ver.back_colour}, the deck is {colour}")
    expect(ver.card_count == count, f"card count {ver.card_count}, the deck holds {count}")
    expect(set(ver.missing) == {c.index for c in missing},
           f"missing cards named {named(ver.missing)}; the deck lacks {named(c.index for c in missing)}")
    expect(set(ver.duplicates) == {c.index for c in doubled},
           f"doubled cards named {named(ver.duplicates)}; the deck doubles {named(c.index for c in doubled)}")
    expect(ver.foreign_count == foreign, f"foreign count {ver.foreign_count}, the deck holds {foreign}")
    expect(not ver.complete, "an incomplete deck verified complete")
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)
    return ver


def check_short_deck(ctx: Any) -> str:
    _deck_content(ctx, missing=(Card.parse("As"), Card.parse("7d")))
    return "a deck without As and 7d: count 50, missing As 7d by name, not complete"


def check_doubled_card(ctx: Any) -> str:
    _deck_content(ctx, doubled=(Card.parse("Kd"),))
    return "a deck with a second Kd: count 53, Kd doubled by name, not complete"


def check_foreign_card(ctx: Any) -> str:
    _deck_content(ctx, foreign=2)
    return "a deck with 2 cards of another back colour: count 54, foreign 2, not complete"


def check_jam(ctx: Any) -> str:
    drv, events = ctx.open()
    _fresh_deck_in(ctx, drv, events, lambda: ctx.operator.insert_deck(BackColour.RED))
    ctx.operator.jam()
    drv.shuffle()
    fault = ctx.expect_event(drv, events, ShufflerFault, timeout_s=ctx.target.shuffle_timeout_s).message
    expect(fault.code == ShufflerFaultCode.JAM, f"ShufflerFault code {fault.code}, expected JAM")
    st = status_ok(drv.status(), "status after the jam")
    expect(st.cards == DECK_SIZE and st.state is not DeviceState.READY,
           f"after the jam status says {st.state.name} with {st.cards} cards: the deck is inside, unverified")
    drv.shuffle()  # cleared: the host asks again
    ver = ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s).message
    expect(ver.complete, "the deck shuffled after the jam does not verify complete")
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)
    return "ShufflerFault JAM, the deck still inside unverified; shuffled again: DeckVerified complete"


def check_door(ctx: Any) -> str:
    drv, events = ctx.open()
    _fresh_deck_in(ctx, drv, events, lambda: ctx.operator.insert_deck(BackColour.RED))
    ctx.operator.door(True)
    try:
        st = status_ok(drv.status(), "status with the door open")
        expect(st.state is DeviceState.FAULT and st.fault == ShufflerFaultCode.DOOR_OPEN,
               f"with the door open status says {st.state.name} fault {st.fault}, expected FAULT DOOR_OPEN")
        try:
            drv.shuffle()
        except RequestRefused as exc:
            expect(exc.code is NakCode.DOOR_OPEN, f"shuffle() with the door open refused {exc.code}, "
                                                  "expected DOOR_OPEN")
        else:
            raise CheckFailed("shuffle() with the door open was accepted")
    finally:
        ctx.operator.door(False)
    drv.shuffle()
    ver = ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s).message
    expect(ver.complete, "the deck shuffled once the door closed does not verify complete")
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)
    return "door open: status FAULT DOOR_OPEN, shuffle() refused DOOR_OPEN; door closed: DeckVerified complete"


def check_shuffler_line_noise(ctx: Any) -> str:
    drv, events = ctx.open()
    _fresh_deck_in(ctx, drv, events, lambda: ctx.operator.insert_deck(BackColour.RED))
    ctx.operator.garble("shuffler", 2)
    drv.shuffle()
    ver = ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s).message
    expect(ver.complete, "DeckVerified through line noise is not complete")
    ctx.operator.take_deck()
    nxt = ctx.expect_event(drv, events, DeckDelivered)  # not a second DeckVerified
    return f"2 garbled frames: DeckVerified once, then DeckDelivered (seq {nxt.seq})"


def _rebooted(ctx: Any, drv: Any, events: "queue.Queue[DeviceEvent]", boot: int) -> StatusReply:
    """The status after a power cycle, then ``device_rebooted`` (link notices only: an event
    here was lost or doubled). The status request is how a host without a heartbeat learns of
    the reboot (``NAK NOT_IDENTIFIED``, SPEC 6.5); a heartbeat may have told it already."""
    st = status_ok(drv.status(), "status after the power cycle")
    while True:
        ev = ctx.next(events, notices=True)
        expect(isinstance(ev.message, LinkNotice), f"{ev.message} during a power cycle")
        if ev.message.kind == "device_rebooted":
            break
        expect(ev.message.kind in ("link_down", "link_up"), f"notice {ev.message.kind} during a power cycle")
    expect(drv.link.identity.boot_id != boot, "device_rebooted but the boot id did not change")
    return st


def check_reboot_mid_shuffle(ctx: Any) -> str:
    drv, events = ctx.open()
    _fresh_deck_in(ctx, drv, events, lambda: ctx.operator.insert_deck(BackColour.RED))
    ctx.operator.hold_shuffle()
    drv.shuffle()
    boot = drv.link.identity.boot_id
    ctx.operator.reboot("shuffler")
    st = _rebooted(ctx, drv, events, boot)
    expect(st.cards == DECK_SIZE and st.state is DeviceState.HAS_DECK,
           f"after a power cycle mid-shuffle status says {st.state.name} with {st.cards} cards, expected "
           "HAS_DECK with 52 (the shuffle lost, the deck inside; SPEC 6.5)")
    drv.shuffle()
    ver = ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s).message
    expect(ver.complete, "the shuffle asked again does not verify complete")
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)
    return "power cycle mid-shuffle: device_rebooted, status HAS_DECK 52; shuffled again: DeckVerified complete"


def check_reboot_mid_delivery(ctx: Any) -> str:
    drv, events = ctx.open()
    _fresh_deck_in(ctx, drv, events, lambda: ctx.operator.insert_deck(BackColour.RED))
    drv.shuffle()
    ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s)
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered, ack=False)  # not journaled yet...
    boot = drv.link.identity.boot_id
    ctx.operator.reboot("shuffler")  # ...when the power goes: the event is lost
    st = _rebooted(ctx, drv, events, boot)
    expect(st.state is DeviceState.IDLE and st.cards == 0,
           f"after a power cycle mid-delivery status says {st.state.name} with {st.cards} cards, expected IDLE "
           "with 0: the status is how the host learns the deck left (SPEC 6.5)")
    return "power cycle mid-delivery: device_rebooted, status IDLE 0 (the delivery told by the status)"




#: (name, the check) of each fault check, in running order.
CHECKS = (
    ("short-deck", check_short_deck),
    ("doubled-card", check_doubled_card),
    ("foreign-card", check_foreign_card),
    ("jam", check_jam),
    ("door", check_door),
    ("line-noise", check_shuffler_line_noise),
    ("reboot-mid-shuffle", check_reboot_mid_shuffle),
    ("reboot-mid-delivery", check_reboot_mid_delivery),
)
