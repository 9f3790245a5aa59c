"""A card's event delivered while the shoe's count is asked is taken in, not declared lost.

While a card is awaited from a shoe that resends, each quiet resend window asks the shoe's
count; ahead of the reads twice running, the card's event is declared lost
(``card_unaccounted``) and the round held (``DeviceIntake.lost_card_check``). The event's
way from the device to the table's queue runs on real time (a loaded host, a driver in a
process of its own): it can be delivered while the confirming count is asked. Such an event
is taken in before any loss is declared; a card whose event truly never comes still holds
the round.

The late delivery is made at the published contract's boundary: the table's one event
queue (the controller's ``events``, which the links deliver into) keeps one card's event
back, and a shoe driver wrapper delivers it as the shoe's count is asked the second time.
"""

from __future__ import annotations

import queue
from contextlib import contextmanager

import pytest

from devices import CardShoe, Shuffler
from devices.contract import DeviceEvent, LinkNotice
from protocols.clock import VirtualClock
from protocols.messages import CardDrawn
from simulators.table import SimulatedTable
from table.console import Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody, Rule
from table.errors import RoundHeld
from table.journal import Journal, verify
from table.rules.settlement import Tables

from test_controller import BLUE, KEY, RED, kinds
from test_device_faults import LoseCard

#: the table's clock runs this much faster than real time: a quiet resend window (4 s on the
#: table's clock) is 0.5 s of real time; nothing here depends on how long real time takes
SPEED = 8


class LateQueue(queue.Queue):
    """The table's event queue, in which the shoe's event of draw ``index`` is kept back (on
    its way: in a driver process, a relay, a busy host) until :meth:`deliver_late`."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index
        self.kept: list[DeviceEvent] = []
        self.late: list[DeviceEvent] = []  # what deliver_late put in

    def put(self, item, block=True, timeout=None):
        msg = item.message
        if not self.late and not self.kept and isinstance(msg, CardDrawn) and msg.draw_index == self.index:
            self.kept.append(item)  # delivered, as far as the link knows
            return
        super().put(item, block, timeout)

    def put_nowait(self, item):
        self.put(item, block=False)

    def deliver_late(self, extra: DeviceEvent | None = None) -> None:
        for ev in self.kept + ([extra] if extra is not None else []):
            self.late.append(ev)
            super().put(ev)
        self.kept.clear()


class CountAsked:
    """The shoe's driver, unchanged, except that the second time its count is asked while
    ``waiting(reply)`` says a card's event is awaited, ``deliver`` is called before the
    count is returned (an event arrives while the count's reply is on its way)."""

    def __init__(self, shoe, waiting, deliver) -> None:
        self._shoe, self._waiting, self._deliver = shoe, waiting, deliver
        self.asked_while_waiting = 0

    def __getattr__(self, name):
        return getattr(self._shoe, name)

    def status(self):
        reply = self._shoe.status()
        if self.asked_while_waiting < 2 and self._waiting(reply):
            self.asked_while_waiting += 1
            if self.asked_while_waiting == 2:
                self._deliver()
        return reply


@contextmanager
def late_table(tmp_path, events: LateQueue, waiting, deliver, *, dealer=None):
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        wrapped = CountAsked(shoe, waiting, lambda: deliver(events))
        ctl = TableController(shuffler, wrapped, events, dealer(sim) if dealer else sim.dealer,
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=2, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal, console=Console(),
                              timing=TableTiming(event_timeout_s=3600, clock=VirtualClock(SPEED)))
        try:
            yield ctl, wrapped, journal
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


def test_a_card_event_delivered_as_the_count_is_asked_again_is_taken_in_not_declared_lost(tmp_path):
    """The fifth card's event is kept back through two quiet resend windows and delivered
    as the shoe's count is asked the second time (the count is ahead of the reads both
    times). It used to be declared lost (``card_unaccounted``, the round held) with the
    event on the table's queue; now it is taken in and the round settles, every card read."""
    events = LateQueue(index=4)
    kept = lambda reply: bool(events.kept)  # noqa: E731
    with late_table(tmp_path, events, kept, LateQueue.deliver_late) as (ctl, shoe, journal):
        ctl.prepare()
        result = ctl.play_round()
        assert shoe.asked_while_waiting == 2 and events.late  # the event came late, at the second count
        assert result.number == 1 and ctl.held is None
        assert kinds(journal, "violation") == []
        assert not [b for b in kinds(journal, "incident") if "card event lost" in b["what"]]
        assert [b["draw_index"] for b in kinds(journal, "card_read")] == list(range(9))  # 2 seats + dealer
        assert "settle" in [b["step"] for b in kinds(journal, "round")]


def test_a_card_event_truly_lost_holds_the_round_though_another_event_comes_at_the_count(tmp_path):
    """The real check stands: the third card's event is lost inside the shoe, and as the
    count is asked the second time another event is delivered (a link notice). That event
    is taken in first; the count stays ahead of the reads, and the round is held
    (``card_unaccounted``), never settled."""
    events = LateQueue(index=-1)  # keeps nothing back

    def notice(q: LateQueue) -> None:
        q.deliver_late(DeviceEvent("shoe", LinkNotice("link_up", "the line is back"), 0.0))

    def lost_card_out(reply) -> bool:  # the third card has left the shoe: 49 held
        return reply.cards == 52 - 3

    lose_third = lambda sim: LoseCard(sim, 3)  # noqa: E731
    with late_table(tmp_path, events, lost_card_out, notice, dealer=lose_third) as (ctl, shoe, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.CARD_UNACCOUNTED
        assert shoe.asked_while_waiting == 2 and events.late  # the notice came at the second count
        assert any("card event lost" in b["what"] for b in kinds(journal, "incident"))
        assert "settle" not in [b["step"] for b in kinds(journal, "round")]


def test_a_driver_process_sends_a_count_after_the_events_delivered_before_it():
    """A driver in a process of its own: a call's reply and the driver's events crossed on
    two threads, so a shoe's count could reach the table ahead of a card event the driver
    had delivered before it answered, and the table declare that card lost with its event
    on the way. Each count now comes after them: here the driver delivers a card event just
    before every count it returns, and the event is on the table's queue when the count is."""
    from pathlib import Path

    from devices.apart import open_apart
    from devices.contract import DriverKind, OpenRequest

    events: queue.Queue = queue.Queue()
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        shoe = open_apart("threecard_test_drivers.counting:PLUGIN",
                          OpenRequest(DriverKind.SHOE, sim.shoe_url, "shoe", events),
                          paths=(str(Path(__file__).parent / "apart_drivers"),))
        try:
            for n in range(20):
                shoe.status()
                got = []
                while not events.empty():
                    got.append(events.get_nowait().message)
                assert [m for m in got if isinstance(m, CardDrawn)], f"count {n} came before its card event"
        finally:
            shoe.close()


class NoticeAtEveryCount:
    """The shoe's driver, unchanged, except that while ``out(reply)`` says the lost card has
    left the shoe, every count it returns comes with an unrelated event delivered just before
    it (a hostile device's notice), up to ``cap`` counts (the test's own bound: without one,
    a table that defers at every count would ask for ever)."""

    def __init__(self, shoe, out, deliver, cap: int) -> None:
        self._shoe, self._out, self._deliver, self.cap = shoe, out, deliver, cap
        self.asked_while_out = 0

    def __getattr__(self, name):
        return getattr(self._shoe, name)

    def status(self):
        reply = self._shoe.status()
        if self._out(reply) and self.asked_while_out < self.cap:
            self.asked_while_out += 1
            self._deliver()
        return reply


def test_an_event_at_every_count_does_not_keep_a_lost_card_from_holding_the_round(tmp_path):
    """The deferral is bounded by the wait's deadline: the third card's event is lost inside
    the shoe, and a notice is delivered as every count is asked. Before the deadline each
    confirming count is deferred (an event is on the queue); once the deadline has passed
    the events delivered are taken in once and the next count is final: the round is held
    (``card_unaccounted``) after a few counts. Without the bound the table went on deferring
    past its deadline, asking the count with no wait between, as long as the device sent an
    event with each (here up to the test's cap of 200 counts)."""
    events = LateQueue(index=-1)  # keeps nothing back
    cap = 200

    def notice() -> None:
        events.deliver_late(DeviceEvent("shoe", LinkNotice("link_up", "the line is back"), 0.0))

    with SimulatedTable((RED, BLUE), seed=7) as sim:
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        wrapped = NoticeAtEveryCount(shoe, lambda reply: reply.cards == 52 - 3, notice, cap)
        # the deal's wait: 40 s on the table's clock (10 quiet resend windows of 4 s), 5 s of real time
        ctl = TableController(shuffler, wrapped, events, LoseCard(sim, 3),
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=2, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal, console=Console(),
                              timing=TableTiming(event_timeout_s=40, clock=VirtualClock(SPEED)))
        try:
            ctl.prepare()
            with pytest.raises(RoundHeld) as info:
                ctl.play_round()
            assert info.value.violation.rule is Rule.CARD_UNACCOUNTED
            assert 2 <= wrapped.asked_while_out < 40, f"the count was asked {wrapped.asked_while_out} times"
            assert any("card event lost" in b["what"] for b in kinds(journal, "incident"))
            assert "settle" not in [b["step"] for b in kinds(journal, "round")]
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


@pytest.mark.alone  # a real pty reopened within the table's 8x clock: beside a loaded suite the shoe's
# link was still down when the deal's compressed wait ended (a link fault, not the hold it checks)
def test_an_event_at_every_count_after_a_shoe_reboot_is_counted_again_after_a_quiet_slice(tmp_path):
    """A shoe power-cycled as the fourth card is drawn, that card's event lost (SPEC §6.5),
    and a notice delivered as every count is asked: the reboot's count is deferred to the
    delivered events, and asked again only after a quiet slice (``LOST_EVENT_CHECK_S``) once
    they are in, not at once: the device's events never make the table ask its count with
    no wait between (it asked some hundreds of times in the deal's wait, up to the test's
    cap). The deadline still ends in the hold (``card_unaccounted``)."""
    from test_device_faults import ShoeCut
    from table.procedure.intake import DeviceIntake

    events = LateQueue(index=-1)  # keeps nothing back
    cap = 1000

    def notice() -> None:
        events.deliver_late(DeviceEvent("shoe", LinkNotice("link_up", "the line is back"), 0.0))

    # stable names, as udev gives: the shoe's pty made again after its pulled cable is found again
    with SimulatedTable((RED, BLUE), seed=7, link_dir=tmp_path / "dev") as sim:
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        wrapped = NoticeAtEveryCount(shoe, lambda reply: reply.cards == 52 - 4, notice, cap)
        # the deal's wait: 40 s on the table's clock, 5 s of real time; a slice is 0.5 s of it
        ctl = TableController(shuffler, wrapped, events, ShoeCut(sim, 4, lose=True),
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=2, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal, console=Console(),
                              timing=TableTiming(event_timeout_s=40, clock=VirtualClock(SPEED)))
        try:
            ctl.prepare()
            with pytest.raises(RoundHeld) as info:
                ctl.play_round()
            assert info.value.violation.rule is Rule.CARD_UNACCOUNTED
            # one count a slice, and the wait's own at each quiet resend window: well under two a slice
            assert 1 <= wrapped.asked_while_out <= 2 * 40 / DeviceIntake.LOST_EVENT_CHECK_S, \
                f"the count was asked {wrapped.asked_while_out} times"
            assert "settle" not in [b["step"] for b in kinds(journal, "round")]
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok
