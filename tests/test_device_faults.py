"""Device faults a person can fix are ridden through (table/procedure/device_faults.py): the
table holds, journals each step, says on the status every screen reads what to do, and goes
on when the device is back; never an exit. Faults are made with the emulators' own controls."""

from __future__ import annotations

import queue
import threading
from contextlib import contextmanager

import pytest

from devices import CardShoe, Shuffler
from protocols.cards import BackColour
from simulators.table import SimulatedTable
from table.console import Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.errors import DeviceFault
from table.journal import Journal, verify
from table.keys import generate
from table.rules.settlement import Tables

RED, BLUE = BackColour.RED, BackColour.BLUE
KEY = generate()


@contextmanager
def table(tmp_path, *, attached=True, dealer=None, shuffler_wrap=None, shoe_wrap=None, **timing):
    # stable names, as udev gives a real adapter: a pty made again after a pulled cable gets a new number
    with SimulatedTable((RED, BLUE), seed=11, link_dir=tmp_path / "dev") as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        console = Console()
        console.attached = attached
        ctl = TableController(shuffler_wrap(shuffler) if shuffler_wrap else shuffler,
                              shoe_wrap(shoe) if shoe_wrap else shoe, events,
                              dealer(sim) if dealer else sim.dealer,
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=2, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                              timing=TableTiming(**{"event_timeout_s": 6, **timing}))
        try:
            yield ctl, sim, console, journal
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


class Waits:
    """What the table waits for, as the console says it (every screen reads it from the status)."""

    def __init__(self, console: Console) -> None:
        self.seen: list = []
        self.cv = threading.Condition()
        console.on_expectation(self._on)

    def _on(self, exp) -> None:
        with self.cv:
            self.seen.append(exp)
            self.cv.notify_all()

    def for_action(self, action: str, timeout: float = 20):
        with self.cv:
            assert self.cv.wait_for(lambda: any(e is not None and e.action == action for e in self.seen), timeout), \
                [e and e.action for e in self.seen]
            return next(e for e in self.seen if e is not None and e.action == action)


def in_thread(fn):
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, out


def faults(journal) -> list[dict]:
    return [e.body for e in journal.entries("device_fault")]


def test_an_open_shuffler_door_at_the_shuffle_holds_says_what_to_do_and_goes_on_once_closed(tmp_path):
    import io

    from table.interfaces.terminal import KeyConsole

    with table(tmp_path) as (ctl, sim, console, journal):
        waits = Waits(console)
        terminal = io.StringIO()
        KeyConsole(console, "S-1", io.StringIO(""), terminal).follow(ctl, payouts=False)
        sim.shuffler.faults.door_open = True
        th, out = in_thread(ctl.prepare)
        exp = waits.for_action("fix_device")
        assert "close the shuffler's door" in exp.what
        status = ctl.status()
        assert status["waiting_for"]["action"] == "fix_device"
        assert any(a["kind"] == "device_fault" and "door" in a["text"] for a in status["alarms"])
        assert "the table waits for the dealer to close the shuffler's door" in terminal.getvalue()
        sim.shuffler.faults.door_open = False  # the dealer closes it
        th.join(30)
        assert "the shuffler answers again: the table goes on" in terminal.getvalue()
        assert not th.is_alive() and "error" not in out, out
        steps = [(b["step"], b["source"]) for b in faults(journal)]
        assert steps[:2] == [("held", "shuffler"), ("back", "shuffler")]
        assert not any(a["kind"] == "device_fault" for a in ctl.status()["alarms"])
        assert ctl.play_round().deck_colour in (RED, BLUE)  # and it deals on


def test_a_jam_at_the_shuffle_is_cleared_and_the_shuffle_asked_again(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        sim.shuffler.faults.jam_next_shuffle = True
        ctl.prepare()
        incidents = [b["what"] for b in (e.body for e in journal.entries("incident"))]
        assert "shuffler fault: jam" in incidents
        shuffles = [b for b in (e.body for e in journal.entries("command")) if b.get("command") == "shuffle"]
        assert len(shuffles) >= 3  # both decks, and the jammed one again
        ctl.play_round()


class FlakyStatus:
    """A driver whose status() fails ``times`` times with ``exc`` (a garbled reply, a plugin's bug)."""

    def __init__(self, driver, exc: Exception, times: int, arm: threading.Event) -> None:
        self.inner, self.exc, self.times, self.arm = driver, exc, times, arm

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def status(self):
        if self.arm.is_set() and self.times > 0:
            self.times -= 1
            raise self.exc
        return self.inner.status()


@pytest.mark.parametrize("exc", [ValueError("bad register 0x17"), __import__("firmware_bridge.errors").errors.LinkError(
    "shuffler: undecodable reply to GetStatus: bad length")], ids=["driver_raises", "garbled_reply"])
def test_a_status_that_fails_is_a_fault_waited_out_not_an_exit(tmp_path, exc):
    arm = threading.Event()
    with table(tmp_path, shuffler_wrap=lambda d: FlakyStatus(d, exc, 2, arm)) as (ctl, sim, console, journal):
        ctl.prepare()
        ctl.play_round()
        arm.set()  # the next status read between rounds fails twice
        for _ in range(2):
            ctl.play_round()
        held = [b for b in faults(journal) if b["step"] == "held"]
        assert held and held[0]["source"] == "shuffler"
        assert type(exc).__name__ in held[0]["reason"] or "undecodable" in held[0]["reason"]
        assert [b["step"] for b in faults(journal)][-1] == "back"


def test_a_driver_raising_mid_round_holds_the_round_for_a_supervisor_never_exit_70(tmp_path):
    arm = threading.Event()
    with table(tmp_path, attached=False, shoe_wrap=lambda d: FlakyStatus(d, ValueError("boom"), 99, arm)) \
            as (ctl, sim, console, journal):
        ctl.prepare()
        arm.set()
        with pytest.raises(DeviceFault):  # a device fault (a held round), not a ValueError
            ctl.play_round()
        held = [e.body for e in journal.entries("round") if e.body.get("step") == "held"]
        assert held and held[0]["cause"] == "device"


def test_on_a_bench_nobody_can_fix_it_and_the_run_ends_past_the_documented_deadline(tmp_path):
    with table(tmp_path, attached=False, fault_deadline_s=1.5) as (ctl, sim, console, journal):
        sim.shuffler.faults.door_open = True
        with pytest.raises(DeviceFault, match=r"not back within 1.5 s .*--rounds.*deadline"):
            ctl.prepare()
        assert [b["step"] for b in faults(journal)] == ["held", "gave_up"]


class PowerCut:
    """A dealer whose shuffler loses power right after the deck is taken out, before the
    table answers its DeckDelivered (the event is lost, SPEC §6.5)."""

    def __init__(self, sim) -> None:
        self.sim, self.cut = sim, 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def take_from_shuffler(self):
        if self.cut == 0:
            self.cut = 1
            self.sim.shuffler.disconnect(down_s=0.3)  # the event cannot reach the host ...
            self.sim.dealer.take_from_shuffler()
            self.sim.shuffler.reboot()  # ... and is lost in the power cycle
            return
        self.sim.dealer.take_from_shuffler()


def test_a_delivery_lost_in_a_power_cycle_is_taken_from_the_shufflers_status(tmp_path):
    with table(tmp_path, dealer=PowerCut) as (ctl, sim, console, journal):
        ctl.prepare()
        ctl.play_round()
        from_status = [e.body for e in journal.entries("device_event") if e.body.get("source") == "status"]
        assert [b["message"]["message"] for b in from_status] == ["DeckDelivered"]
        assert any("lost" in e.body["what"] for e in journal.entries("incident"))
        links = [e.body["notice"] for e in journal.entries("link") if e.body["source"] == "shuffler"]
        assert "device_rebooted" in links


def test_a_shuffle_lost_in_a_power_cycle_is_asked_again(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        sim.shuffler.faults.power_cut_mid_shuffle = True  # the first shuffle is acknowledged, then the power goes
        ctl.prepare()
        shuffles = [b for b in (e.body for e in journal.entries("command")) if b.get("command") == "shuffle"]
        assert any(b.get("lost") for b in shuffles), shuffles
        assert any("was lost" in e.body["what"] for e in journal.entries("incident"))
        assert ctl.play_round().deck_colour in (RED, BLUE)


class ShoeCut:
    """A dealer at whose ``at``-th draw the shoe power-cycles: ``lose`` the card's event
    (the cable out, the card drawn, the power cut: SPEC §6.5), or between two draws."""

    def __init__(self, sim, at: int, lose: bool) -> None:
        self.sim, self.at, self.lose, self.draws = sim, at, lose, 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def draw_card(self):
        self.draws += 1
        if self.draws != self.at:
            return self.sim.dealer.draw_card()
        if self.lose:
            self.sim.shoe.disconnect(down_s=0.3)
            self.sim.dealer.draw_card()
            self.sim.shoe.reboot()
        else:
            self.sim.shoe.reboot()
            self.sim.dealer.draw_card()


def test_a_shoe_power_cycled_between_draws_is_reconciled_by_its_count_and_the_round_goes_on(tmp_path):
    with table(tmp_path, dealer=lambda sim: ShoeCut(sim, 4, lose=False)) as (ctl, sim, console, journal):
        ctl.prepare()
        result = ctl.play_round()
        assert len(result.reads) == 9 and ctl.held is None
        assert [b["step"] for b in faults(journal)] in (["reconciled"], ["counting"])  # its event on the way, or in


def test_a_card_event_lost_in_a_shoe_power_cycle_holds_the_round_for_a_void_and_the_table_goes_on(tmp_path):
    from table.errors import RoundHeld, RoundVoided
    from table.console import Command
    from table.custody import Rule
    with table(tmp_path, dealer=lambda sim: ShoeCut(sim, 4, lose=True)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.CARD_UNACCOUNTED
        assert any(a["kind"] == "held" for a in ctl.status()["alarms"])
        assert ctl.status()["held"]["cause"] == "custody"
        console.submit(Command("void", {"reason": "card read lost in a shoe power cycle", "supervisor": "S-1"}))
        with pytest.raises(RoundVoided):
            ctl.play_round()
        assert ctl.play_round().round_id  # and it deals on
        assert any("card event lost: the shoe rebooted" in e.body["what"] for e in journal.entries("incident"))


class LoseAtLoad:
    """A dealer whose shoe loses its ``ShoeLoaded`` event inside the device at the ``at``-th
    load (SPEC §6.5: an event not yet acknowledged is lost with a power cut)."""

    def __init__(self, sim, at: int) -> None:
        self.sim, self.at, self.loads = sim, at, 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def load_shoe(self, colour):
        self.loads += 1
        if self.loads == self.at:
            self.sim.shoe.lose_events = 1
        self.sim.dealer.load_shoe(colour)


def test_a_load_event_lost_after_a_deal_is_taken_from_the_shoes_count_not_a_foreign_card(tmp_path):
    # The second load comes after a round's reads: taken from the status, the draws count from
    # the new deck (before, the count was held against the last deck's reads: "52 where it
    # should hold 46", a false foreign card that held the table).
    with table(tmp_path, dealer=lambda sim: LoseAtLoad(sim, 2)) as (ctl, sim, console, journal):
        ctl.prepare()
        ctl.play_round()
        ctl.prepare()
        ctl.play_round()
        from_status = [e.body["message"]["message"] for e in journal.entries("device_event")
                       if e.body.get("source") == "status"]
        assert from_status == ["ShoeLoaded"]
        assert [e.body for e in journal.entries("violation")] == []
        assert ctl.held is None


class LoseCard:
    """A dealer whose shoe loses the event of its ``at``-th card inside the device."""

    def __init__(self, sim, at: int) -> None:
        self.sim, self.at, self.draws = sim, at, 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def draw_card(self):
        self.draws += 1
        if self.draws == self.at:
            self.sim.shoe.lose_events = 1
        self.sim.dealer.draw_card()


def test_a_card_event_lost_in_a_shoe_that_resends_holds_the_round_within_its_resend_windows(tmp_path):
    # With people at the table the dealer's wait is a day long: the shoe's count, asked after
    # each quiet resend window, finds the card out and holds the round (before, the table went
    # on asking for the same card, no alarm).
    from table.custody import Rule
    from table.errors import RoundHeld
    with table(tmp_path, dealer=lambda sim: LoseCard(sim, 2), event_timeout_s=3600) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.CARD_UNACCOUNTED
        assert any("card event lost" in e.body["what"] for e in journal.entries("incident"))
