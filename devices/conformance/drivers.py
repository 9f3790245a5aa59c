"""The host side of the conformance suite, taking a driver rather than a SPEC device.

``devices/conformance/suite.py`` checks a device's bytes against
protocols/SPEC.md. A driver plugin (docs/drivers.md) talks another protocol,
so what is checked here is what the controller relies on, through the driver
contract (``devices/contract.py``) only: the events and their fields, their
order, custody on faults (an unreadable card keeps its draw number, line noise
loses and doubles nothing, an event not acknowledged comes back after the host
dies), and reconnect (notices, identity, numbering going on). The same checks
run against the built-in ``spec`` driver (a self-test of the suite) and any
installed plugin (``tablectl conformance --driver NAME``).

Physical steps and faults go through an :class:`~devices.conformance.suite.Operator`;
a step nobody can do skips the check, and a skip is never a pass. A check of a
capability the driver declares it lacks (docs/drivers.md, "Capabilities") is
skipped with that reason too.

Imports ``devices`` (the contract, the plugin loader) and ``protocols`` only.
"""

from __future__ import annotations

import contextlib
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar, cast

from protocols.cards import DECK_SIZE, BackColour
from protocols.errors import MessageError
from protocols.messages import Message

from ..contract import (
    EVENTS_BY_ROLE,
    Capabilities,
    CardDrawn,
    CardUnreadable,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceEvent,
    DeviceIdentity,
    DeviceState,
    DriverError,
    DriverKind,
    LinkConfig,
    LinkError,
    LinkNotice,
    NakCode,
    OpenRequest,
    RequestRefused,
    ShoeLoaded,
    ShuffleOpening,
)
from ..plugins import prepare
from .outcomes import FAIL, PASS, SKIP, CheckFailed, NeedsOperator, OperatorError, expect
from .shuffler_faults import (check_door, check_doubled_card, check_foreign_card, check_jam,
                              check_reboot_mid_delivery, check_reboot_mid_shuffle, check_short_deck,
                              check_shuffler_line_noise, empty_shuffler, status_ok)
from .suite import Operator

#: Link settings for a driver under test: patient, with a quick heartbeat so a pulled cable is seen.
DRIVER_LINK = LinkConfig(retransmit_initial_ms=100, retransmit_max_ms=1000, max_attempts=6,
                         heartbeat_interval_ms=300, heartbeat_misses=3, reconnect_initial_ms=50,
                         reconnect_max_ms=1000, reconnect_wait_s=10, read_timeout_ms=100)

#: A device message of one kind (what :func:`message_of` returns).
M = TypeVar("M", bound=Message)


@dataclass
class DriverTarget:
    """A driver under test: ``driver`` (its name), ``kind`` (``"shuffler"``, ``"shoe"``),
    ``url`` and ``options`` as in ``[devices.KIND]``, ``operator`` (who does physical
    steps and faults), ``extras`` (the SPEC driver's ``usb_backend``), timeouts (s),
    ``apart``: where the driver runs (:func:`devices.apart.choose.open_device`: ``"all"``,
    the default, in a process of its own as a table runs it; ``"none"`` in this one)."""

    driver: str
    kind: str
    url: str
    options: Mapping[str, Any] = field(default_factory=dict)
    operator: Operator = field(default_factory=Operator)
    config: LinkConfig = DRIVER_LINK
    extras: Mapping[str, Any] = field(default_factory=dict)
    event_timeout_s: float = 10.0
    shuffle_timeout_s: float = 180.0
    label: str = "driver"
    apart: str = "all"


class DriverContext:
    """What a check gets: opens the driver (each session its own queue, closed when the
    check ends), waits for events in order, and the operator."""

    def __init__(self, target: DriverTarget, stack: contextlib.ExitStack) -> None:
        self.target = target
        self.kind = DriverKind(target.kind)
        self.operator = target.operator
        self._stack = stack
        self.capabilities: Capabilities = prepare(target.driver, self.kind, target.options)[1]
        self.name = f"{self.kind}-under-test"

    def open(self, *, resume: Callable[[DeviceIdentity], int | None] | None = None) -> tuple[Any, "queue.Queue[DeviceEvent]"]:
        """A connected driver that acknowledges only when told (as a table with a journal)."""
        events: queue.Queue[DeviceEvent] = queue.Queue(256)
        from ..apart.choose import open_device  # as a table opens it: apart unless told otherwise

        drv = open_device(self.target.driver, OpenRequest(
            self.kind, self.target.url, self.name, events, options=dict(self.target.options),
            link_config=self.target.config, ack_on_delivery=False, resume=resume, extras=self.target.extras),
            apart=self.target.apart)
        self._stack.callback(drv.close)
        return drv, events

    def next(self, events: "queue.Queue[DeviceEvent]", timeout_s: float | None = None, *,
             notices: bool = False) -> DeviceEvent:
        """The next event (link notices too when ``notices``; else a ``link_up`` is passed
        over and any other notice fails the check). Raises :class:`CheckFailed` on time-out."""
        timeout = timeout_s or self.target.event_timeout_s
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                ev = events.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(ev.message, LinkNotice) and not notices:
                if ev.message.kind == "link_up":
                    continue
                raise CheckFailed(f"link trouble: {ev.message.kind} {ev.message.detail}")
            return ev
        raise CheckFailed(f"no event within {timeout:g} s")

    def expect_event(self, drv: Any, events: "queue.Queue[DeviceEvent]", kind: type[Message], *, ack: bool = True,
                     timeout_s: float | None = None, across_reconnect: bool = False) -> DeviceEvent:
        """The next event must be a ``kind`` from this driver's link, from the events its
        kind delivers; acknowledged (after it was "journaled") unless ``ack`` is False.
        ``across_reconnect``: ``link_down`` and ``link_up`` notices before it are passed over.
        Its message, typed as ``kind``: :func:`message_of`."""
        while True:
            ev = self.next(events, timeout_s, notices=across_reconnect)
            if not (isinstance(ev.message, LinkNotice) and ev.message.kind in ("link_down", "link_up")):
                break
        got = type(ev.message).__name__
        expect(isinstance(ev.message, kind), f"expected {kind.__name__}, got {got} (events out of order?)")
        expect(ev.source == drv.link.name, f"event source {ev.source!r}, the link is {drv.link.name!r}")
        expect(type(ev.message) in EVENTS_BY_ROLE[self.kind], f"{got} is not an event a {self.kind} delivers")
        if ack:
            drv.link.acknowledge(ev)
        return ev


def message_of(ev: DeviceEvent, kind: type[M]) -> M:
    """``ev.message`` as the ``kind`` it is: ``ev`` came from :meth:`DriverContext.expect_event`
    for that ``kind``, which raised :class:`CheckFailed` unless ``isinstance(ev.message, kind)``.
    A type, not a check: nothing is checked again here."""
    # A cast: expect_event's isinstance check is inside expect(), where the checker cannot follow it.
    return cast(M, ev.message)


# -- the checks (both kinds) -------------------------------------------------------------------------


def check_identity(ctx: DriverContext) -> str:
    drv, _ = ctx.open()
    ident = drv.link.identity
    expect(isinstance(ident, DeviceIdentity), f"link.identity is {ident!r} after open")
    expect(ident.kind == ctx.kind.device_kind, f"identity kind {ident.kind}, expected {ctx.kind}")
    expect(bool(ident.serial_number) and ident.serial_number.isprintable(), "no printable serial number")
    expect(isinstance(ident.boot_id, int), "boot_id is not an int")
    expect(drv.link.alive and drv.link.state.value == "up", f"link not up after open ({drv.link.state})")
    expect(drv.link.name == ctx.name, f"link.name {drv.link.name!r}, the table named it {ctx.name!r}")
    expect(isinstance(drv.capabilities, Capabilities), "driver.capabilities is not a Capabilities")
    _declaration_holds(ctx, drv)
    cfg = drv.link.config
    expect(cfg.reconnect_wait_s >= 0 and cfg.retransmit_max_ms > 0, "link.config lacks the timings")
    st = status_ok(drv.status(), "status")
    missing = ", ".join(drv.capabilities.missing(ctx.kind)) or "none"
    return (f"{ident.kind} {ident.serial_number} firmware {ident.firmware_version} boot {ident.boot_id:08x}; "
            f"status {st.state.name} {st.cards} cards; capabilities missing: {missing}")


def _declaration_holds(ctx: DriverContext, drv: Any) -> None:
    """The plugin's declaration (``capabilities(kind, options)``, what the table goes by)
    against what the driver does: a driver object that says of itself it has a
    capability its entry point does not declare, or a shuffler declaring the shuffle
    commitment with no ``open_shuffle``, fails (docs/drivers.md, "Capabilities"). The
    checks of each declared capability (``resend``, ``commitment``) run below; only an
    undeclared one is skipped."""
    declared = ctx.capabilities
    own = getattr(getattr(drv, "inner", drv), "capabilities", None)
    if isinstance(own, Capabilities):
        relevant = Capabilities(False, False, False, False).missing(ctx.kind)  # a shoe has no commitment
        more = [n for n in relevant if getattr(own, n) and not getattr(declared, n)]
        expect(not more, f"the driver says its device has {', '.join(more)}, which its plugin does not declare "
                         f"(capabilities(kind, options) lacks {', '.join(more)}): the table goes by the "
                         "declaration; make them agree")
    if ctx.kind is DriverKind.SHUFFLER and declared.commitment:
        expect(callable(getattr(drv, "open_shuffle", None)),
               "the plugin declares the shuffle commitment, but the driver has no open_shuffle()")


def _unacked_comes_back(ctx: DriverContext, cause: Callable[[], None], kind: type,
                        then: Callable[[], None], then_kind: type) -> str:
    if not ctx.capabilities.resend:
        raise NeedsOperator("the driver declares resend=false: an event not acknowledged is not resent "
                            "(docs/drivers.md, 'Capabilities')")
    drv, events = ctx.open()
    cause()
    first = ctx.expect_event(drv, events, kind, ack=False)
    boot = drv.link.identity.boot_id
    drv.close()  # the host dies before the event is journaled
    drv2, events2 = ctx.open()
    again = ctx.expect_event(drv2, events2, kind, ack=False)
    expect(again.message == first.message and again.seq == first.seq,
           f"after the host's restart the device sent {again.message} SEQ {again.seq}, not the unanswered "
           f"{first.message} SEQ {first.seq}")
    drv2.link.acknowledge(again)
    drv2.close()
    # Journaled now: a third host, told so by resume, must not take it again.
    drv3, events3 = ctx.open(resume=lambda ident: again.seq if ident.boot_id == boot else None)
    then()
    nxt = ctx.expect_event(drv3, events3, then_kind)
    return (f"unacknowledged {kind.__name__} SEQ {first.seq} delivered again to a restarted host; once "
            f"acknowledged and resumed past, the next event is {type(nxt.message).__name__} SEQ {nxt.seq}")


def check_reconnect(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    ident = drv.link.identity
    ctx.operator.disconnect(str(ctx.kind))
    down = ctx.next(events, notices=True)
    expect(isinstance(down.message, LinkNotice) and down.message.kind == "link_down",
           f"after the cable was pulled: {down.message}, expected a link_down notice")
    up = ctx.next(events, notices=True)
    expect(isinstance(up.message, LinkNotice) and up.message.kind == "link_up",
           f"after the cable came back: {up.message}, expected a link_up notice")
    expect(drv.link.alive, "link_up delivered but link.alive is False")
    expect(drv.link.identity.serial_number == ident.serial_number, "another serial after the reconnect")
    status_ok(drv.status(), "status after the reconnect")
    return f"link_down then link_up; {ident.serial_number} answers status again"


def check_reboot(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    boot = drv.link.identity.boot_id
    ctx.operator.reboot(str(ctx.kind))
    while True:
        notice = ctx.next(events, notices=True).message
        if not isinstance(notice, LinkNotice):
            raise CheckFailed(f"{notice} during a reboot")
        if notice.kind == "device_rebooted":
            break
        expect(notice.kind in ("link_down", "link_up"), f"notice {notice.kind} during a reboot")
    expect(drv.link.identity.boot_id != boot, "device_rebooted but the identity's boot_id did not change")
    return f"device_rebooted: boot {boot:08x} -> {drv.link.identity.boot_id:08x}"


# -- the shoe --------------------------------------------------------------------------------------


def check_card_events(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    colour = BackColour.RED
    ctx.operator.load_shoe(colour)
    loaded = ctx.expect_event(drv, events, ShoeLoaded)
    loaded_back = message_of(loaded, ShoeLoaded).back_colour
    expect(loaded_back == colour, f"ShoeLoaded says {loaded_back}, the deck is {colour}")
    n = 6
    ctx.operator.draw(n)
    draws = [ctx.expect_event(drv, events, CardDrawn) for _ in range(n)]
    cards = [message_of(d, CardDrawn) for d in draws]
    indices = [c.draw_index for c in cards]
    expect(indices == list(range(n)), f"draw indices {indices}, expected 0..{n - 1} since loading")
    seqs = [loaded.seq] + [d.seq for d in draws]
    expect(len(set(seqs)) == len(seqs), f"two events share a seq: {seqs}")
    expect(len({c.card for c in cards}) == n, "the same card read twice")
    expect({c.back_colour for c in cards} == {colour}, "a card of another back colour")
    st = status_ok(drv.status(), "status")
    expect(st.state is DeviceState.HAS_DECK and st.cards == DECK_SIZE - n and st.back_colour == colour,
           f"status {st.state.name} {st.back_colour} {st.cards}, expected HAS_DECK {colour} {DECK_SIZE - n}")
    ctx.operator.unload_shoe()
    after = status_ok(drv.status(), "status after unloading")
    expect(after.state is DeviceState.IDLE and after.cards == 0, f"emptied shoe says {after.state.name} "
                                                                 f"{after.cards}")
    return f"ShoeLoaded {colour}, {n} CardDrawn with draw indices 0..{n - 1}, status {DECK_SIZE - n} left, then IDLE"


def check_shoe_resend(ctx: DriverContext) -> str:
    def cause() -> None:
        ctx.operator.load_shoe(BackColour.BLUE)

    return _unacked_comes_back(ctx, cause, ShoeLoaded, lambda: ctx.operator.draw(1), CardDrawn)


def check_unreadable(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    ctx.operator.load_shoe(BackColour.RED)
    ctx.expect_event(drv, events, ShoeLoaded)
    ctx.operator.unreadable(1)
    ctx.operator.draw(2)
    bad = message_of(ctx.expect_event(drv, events, CardUnreadable), CardUnreadable)
    good = message_of(ctx.expect_event(drv, events, CardDrawn), CardDrawn)
    expect((bad.draw_index, good.draw_index) == (0, 1),
           f"unreadable card numbered {bad.draw_index}, the next {good.draw_index}: "
           "an unreadable card keeps its place (0, then 1)")
    ctx.operator.unload_shoe()
    return "CardUnreadable draw 0, then CardDrawn draw 1: the unread card is accounted for"


def check_line_noise(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    ctx.operator.load_shoe(BackColour.RED)
    ctx.expect_event(drv, events, ShoeLoaded)
    ctx.operator.garble(str(ctx.kind), 2)
    ctx.operator.draw(3)
    draws = [message_of(ctx.expect_event(drv, events, CardDrawn), CardDrawn) for _ in range(3)]
    expect([d.draw_index for d in draws] == [0, 1, 2], "draws lost or doubled by line noise")
    ctx.operator.unload_shoe()
    return "2 garbled lines: the 3 cards still arrive once each, in order"


def check_reconnect_numbering(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    ctx.operator.load_shoe(BackColour.RED)
    ctx.expect_event(drv, events, ShoeLoaded)
    ctx.operator.draw(1)
    ctx.expect_event(drv, events, CardDrawn)
    ctx.operator.disconnect("shoe")
    ctx.operator.draw(1)  # drawn while the cable is out, or just after: it must still arrive, numbered 1
    nxt = message_of(ctx.expect_event(drv, events, CardDrawn, timeout_s=ctx.target.event_timeout_s * 2,
                                      across_reconnect=True), CardDrawn)
    expect(nxt.draw_index == 1, f"the card after the reconnect is numbered {nxt.draw_index}, expected 1")
    ctx.operator.unload_shoe()
    return "a card drawn across a reconnect arrives once, numbered on from before"


# -- the shuffler ----------------------------------------------------------------------------------


def check_shuffle_verifies(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    empty_shuffler(ctx, drv, events)
    colour = BackColour.RED
    ctx.operator.insert_deck(colour)
    ins = message_of(ctx.expect_event(drv, events, DeckInserted), DeckInserted)
    expect(ins.back_colour == colour, f"DeckInserted says {ins.back_colour}")
    drv.shuffle()
    ver = message_of(ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s),
                     DeckVerified)
    expect(ver.card_count == DECK_SIZE and len(ver.present) == DECK_SIZE and not ver.duplicates
           and ver.foreign_count == 0, f"DeckVerified count {ver.card_count}, present {len(ver.present)}")
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)
    return "DeckInserted, DeckVerified (52 present, none doubled or foreign), DeckDelivered, in order"


def check_commitment(ctx: DriverContext) -> str:
    """SPEC §4.2.1 through the driver: ``DeckVerified.commitment`` (32 bytes) for a complete
    deck, and ``open_shuffle`` of it once delivered returns an opening that hashes to it.
    A driver that does not declare the capability is skipped, naming the residual risk."""
    if not ctx.capabilities.commitment:
        raise NeedsOperator("the driver does not declare the shuffle commitment: the table runs without the "
                            "check of the deal against the shuffle (docs/drivers.md, 'Capabilities')")
    drv, events = ctx.open()
    expect(callable(getattr(drv, "open_shuffle", None)), "the driver declares commitment but has no open_shuffle")
    empty_shuffler(ctx, drv, events)
    ctx.operator.insert_deck(BackColour.RED)
    ctx.expect_event(drv, events, DeckInserted)
    drv.shuffle()
    ver = message_of(ctx.expect_event(drv, events, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s),
                     DeckVerified)
    expect(len(ver.commitment) == 32, f"DeckVerified of a complete deck carries {len(ver.commitment)} bytes of "
                                      "commitment, expected 32")
    ctx.operator.take_deck()
    ctx.expect_event(drv, events, DeckDelivered)
    opening = drv.open_shuffle(ver.commitment)
    expect(isinstance(opening, ShuffleOpening), f"open_shuffle gave {type(opening).__name__}")
    expect(opening.commitment() == ver.commitment, "the opening's SHA-256(salt || order) is not the commitment")
    return f"commitment {ver.commitment.hex()[:16]}... opened after the delivery, hashing to it"


def check_shuffle_refused(ctx: DriverContext) -> str:
    drv, events = ctx.open()
    empty_shuffler(ctx, drv, events)
    try:
        drv.shuffle()
    except RequestRefused as exc:
        expect(exc.code is NakCode.NO_DECK, f"refused {exc.code}, expected NO_DECK")
        return "shuffle() with no deck raises RequestRefused NO_DECK"
    raise CheckFailed("shuffle() with no deck was accepted")


def _shuffler_resend(ctx: DriverContext) -> str:
    if not ctx.capabilities.resend:
        raise NeedsOperator("the driver declares resend=false (docs/drivers.md, 'Capabilities')")
    drv, events = ctx.open()
    empty_shuffler(ctx, drv, events)
    ctx.operator.insert_deck(BackColour.RED)
    first = ctx.expect_event(drv, events, DeckInserted, ack=False)
    drv.close()
    drv2, events2 = ctx.open()
    again = ctx.expect_event(drv2, events2, DeckInserted)
    expect(again.seq == first.seq and again.message == first.message, "the unanswered DeckInserted did not "
                                                                      "come back to a restarted host")
    drv2.shuffle()
    ctx.expect_event(drv2, events2, DeckVerified, timeout_s=ctx.target.shuffle_timeout_s)
    ctx.operator.take_deck()
    ctx.expect_event(drv2, events2, DeckDelivered)
    return f"unacknowledged DeckInserted SEQ {first.seq} delivered again to a restarted host, then the shuffle"


@dataclass(frozen=True)
class DriverCheck:
    """One check of a driver: ``kind``, ``name``, ``title``, ``run(ctx) -> detail``."""

    kind: str
    name: str
    title: str
    run: Callable[[DriverContext], str]

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def device(self) -> str:
        """The kind, under the name the SPEC suite's reports use."""
        return self.kind


DRIVER_CHECKS: tuple[DriverCheck, ...] = (
    DriverCheck("shoe", "identity", "identity, link surface, status, capabilities", check_identity),
    DriverCheck("shoe", "card-events", "ShoeLoaded then CardDrawn 0.. in order, one seq each; status", check_card_events),
    DriverCheck("shoe", "resend", "an event not acknowledged comes back to a restarted host; resume skips it",
                check_shoe_resend),
    DriverCheck("shoe", "unreadable", "an unreadable card keeps its draw number", check_unreadable),
    DriverCheck("shoe", "line-noise", "garbled lines lose and double no card", check_line_noise),
    DriverCheck("shoe", "reconnect", "cable pulled: link_down, link_up, same device", check_reconnect),
    DriverCheck("shoe", "reconnect-numbering", "a card across a reconnect arrives once, numbered on",
                check_reconnect_numbering),
    DriverCheck("shoe", "reboot", "power-cycle: device_rebooted, a new boot id", check_reboot),
    DriverCheck("shuffler", "identity", "identity, link surface, status, capabilities", check_identity),
    DriverCheck("shuffler", "shuffle-verifies", "DeckInserted, DeckVerified 52, DeckDelivered in order",
                check_shuffle_verifies),
    DriverCheck("shuffler", "commitment", "DeckVerified's commitment opened by open_shuffle after the delivery "
                "(SPEC 4.2.1)", check_commitment),
    DriverCheck("shuffler", "shuffle-refused", "shuffle() with no deck: RequestRefused NO_DECK", check_shuffle_refused),
    DriverCheck("shuffler", "resend", "an event not acknowledged comes back to a restarted host", _shuffler_resend),
    DriverCheck("shuffler", "reconnect", "cable pulled: link_down, link_up, same device", check_reconnect),
    DriverCheck("shuffler", "reboot", "power-cycle: device_rebooted, a new boot id", check_reboot),
    DriverCheck("shuffler", "short-deck", "a short deck: count and the missing cards by name", check_short_deck),
    DriverCheck("shuffler", "doubled-card", "a doubled card: count and the card by name", check_doubled_card),
    DriverCheck("shuffler", "foreign-card", "cards of another back colour: the foreign count", check_foreign_card),
    DriverCheck("shuffler", "jam", "a jam: ShufflerFault JAM, the deck inside; shuffled again", check_jam),
    DriverCheck("shuffler", "door", "the door open: status FAULT, shuffle refused DOOR_OPEN; closed: shuffles",
                check_door),
    DriverCheck("shuffler", "line-noise", "garbled frames lose and double no event", check_shuffler_line_noise),
    DriverCheck("shuffler", "reboot-mid-shuffle", "power cycle mid-shuffle: the shuffle lost, the deck inside",
                check_reboot_mid_shuffle),
    DriverCheck("shuffler", "reboot-mid-delivery", "power cycle mid-delivery: the status says the deck left",
                check_reboot_mid_delivery),
)


@dataclass(frozen=True)
class DriverResult:
    """``outcome`` ``"pass"``/``"fail"``/``"skip"`` (never a pass), ``detail``, ``seconds``."""

    check: DriverCheck
    outcome: str
    detail: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"device": self.check.kind, "check": self.check.name, "title": self.check.title,
                "outcome": self.outcome, "detail": self.detail, "seconds": round(self.seconds, 3)}


def run_driver_check(check: DriverCheck, target: DriverTarget) -> DriverResult:
    """Run one check; a driver that cannot be loaded fails it (the message names the
    package), a step nobody can do (or a capability the driver lacks) skips it."""
    start = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            detail = check.run(DriverContext(target, stack))
        outcome = PASS
    except NeedsOperator as exc:
        outcome, detail = SKIP, f"needs: {exc}"
    except (CheckFailed, OperatorError) as exc:
        outcome, detail = FAIL, str(exc)
    except DriverError as exc:
        outcome, detail = FAIL, str(exc)
    except (LinkError, MessageError, OSError) as exc:
        outcome, detail = FAIL, f"{type(exc).__name__}: {exc}"
    return DriverResult(check, outcome, detail, time.monotonic() - start)


def run_driver_suite(target: DriverTarget, on_result: Callable[[DriverResult], None] | None = None
                     ) -> list[DriverResult]:
    """Every check of ``target.kind`` in order (``on_result`` after each)."""
    results = []
    for check in DRIVER_CHECKS:
        if check.kind == target.kind:
            r = run_driver_check(check, target)
            results.append(r)
            if on_result is not None:
                on_result(r)
    return results
