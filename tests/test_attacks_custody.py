"""The hold on the physical cards, tried as a dishonest dealer would.

The shoe's count is a custody fact (58 Pa. Code 649a.3: one 52-card deck in play;
COMAR 36.05.03.27 C: a deck is dealt only as the shuffler counted it): at the load a
deck of 52, no more; before the first card and at the deal's end exactly 52 less the
cards read. A shoe holding more holds the round as foreign cards; a count no shoe can
give is never computed with. A deck reaches the shoe only from the shuffler's verified
delivery while the process runs: a deck counted in the shuffler while the shoe holds
cards of its colour is a second deck of one colour, and the table waits for a
supervisor. A held round never settles.

The dealer's hands act on the emulated devices as on the standalone emulators' control
lines (``slip CARD COLOUR``, ``load COLOUR``, ``insert COLOUR``): cards added on top of
the shoe, a card put back, a third deck put in the shuffler, the deck just played put
back in the shoe. See docs/deck-custody.md, "The shoe's count".
"""

from __future__ import annotations

import dataclasses
import queue
from contextlib import contextmanager

import pytest

from devices import CardShoe, Shuffler
from protocols.cards import Card
from protocols.messages import DeckInserted
from simulators.devices import SimCard, new_deck
from simulators.table import SimulatedTable
from table.console import Command, Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.journal import Journal, verify
from table.rules.settlement import Tables
from table.custody import DeckPlace, Rule
from table.errors import DeviceFault, RoundHeld, SupervisorRequired

from test_controller import BLUE, KEY, RED, kinds, table
from test_integrity import AtDraw

#: the dealer's chosen cards, of the back colour in play: seat 1 gets a straight flush
STACKED = ["Ah", "2c", "3d", "Kh", "4c", "5d"]


def _steps(journal) -> list[str]:
    return [b["step"] for b in kinds(journal, "round")]


def _rules(journal) -> list[str]:
    return [b["rule"] for b in kinds(journal, "violation")]


def test_six_cards_of_the_colour_in_play_put_on_top_of_the_shoe_hold_the_round_before_the_first_card(tmp_path):
    """The issue's attack: six cards of the deck in play's colour (from a third deck) on top
    of the shoe before the deal (``slip CARD red`` six times): the shoe holds 58. The round
    settled (seat flush +$10) with no hold; now it is held as foreign cards before any card
    is dealt, and never settles."""
    with table(tmp_path) as (ctl, sim, console, journal):
        ctl.prepare()
        assert ctl.custody.decks[RED].place is DeckPlace.IN_SHOE
        for face in reversed(STACKED):  # the first draw reads STACKED[0]
            sim.shoe.slip(SimCard(Card.parse(face), RED))
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.FOREIGN_CARD
        assert "58" in info.value.violation.detail
        assert ctl.held is not None
        assert kinds(journal, "card_read") == []  # not one card was dealt
        assert any("more cards than it should before the first card" in b["what"] for b in kinds(journal, "incident"))
        assert "settle" not in _steps(journal)
        # The hold is a broken rule: a supervisor may void it, never release it to settle.
        console.on_expectation(lambda exp: exp is not None and "void" in exp.accepts and console.submit(
            Command("void", {"reason": "cards added to the shoe", "supervisor": "S-1"})))
        assert ctl.resolve_held() is None
        assert "settle" not in _steps(journal) and _steps(journal)[-2:] == ["voided", "closed"]


def test_cards_put_on_top_of_the_shoe_mid_deal_hold_the_round_at_the_deals_end(tmp_path):
    """Six cards of the colour in play slipped on top after the first card is out: every card
    read is of the deck's colour and none comes twice, so only the count finds them: at the
    deal's end the shoe holds six more than 52 less the reads. Held before the decisions."""
    def stack(sim):
        for face in reversed(STACKED):
            sim.shoe.slip(SimCard(Card.parse(face), RED))
    with table(tmp_path, dealer=lambda s: AtDraw(s, 2, stack)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.FOREIGN_CARD
        assert any("more cards than it should at the end of the deal" in b["what"]
                   for b in kinds(journal, "incident"))
        assert "dealing_done" not in _steps(journal) and "settle" not in _steps(journal)


class PutBack:
    """The virtual dealer, who puts the last card of the deal back on top of the shoe (the
    ``slip`` control line with the card's own colour) once it is drawn."""

    def __init__(self, sim, after: int):
        self.sim, self.after, self.draws = sim, after, 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def draw_card(self):
        self.sim.dealer.draw_card()
        self.draws += 1
        if self.draws == self.after:
            card = self.sim.dealer.on_layout.pop()  # off the layout, back into the shoe
            self.sim.shoe.slip(card)


def test_a_card_slipped_back_into_the_shoe_after_the_last_card_holds_the_round(tmp_path):
    """The last card of the deal (the dealer's third) is read, then put back into the shoe:
    no card is read twice in the round, so only the shoe's count shows it (one more than 52
    less the reads). The deal's end used to ask only whether fewer were left."""
    with table(tmp_path, dealer=lambda s: PutBack(s, 9)) as (ctl, sim, console, journal):  # 2 seats: 9 cards
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.FOREIGN_CARD
        assert "44 cards where it should hold 43" in info.value.violation.detail
        assert "settle" not in _steps(journal) and "dealer_reveal" not in _steps(journal)


class LyingShoe:
    """A shoe driver (a vendor's, or a faulty one) whose status says ``cards`` once told to:
    every other call is the real driver's."""

    def __init__(self, shoe):
        self._shoe = shoe
        self.cards: int | None = None

    def __getattr__(self, name):
        return getattr(self._shoe, name)

    def status(self):
        reply = self._shoe.status()
        return reply if self.cards is None else dataclasses.replace(reply, cards=self.cards)



@contextmanager
def lying_table(tmp_path, *, attached=True):
    """The simulated table of ``test_controller.table`` with the shoe's driver wrapped in
    :class:`LyingShoe`."""
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        real = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        shoe = LyingShoe(real)
        console = Console()
        console.attached = attached
        ctl = TableController(shuffler, shoe, events, sim.dealer, DeckCustody([("A", RED), ("B", BLUE)]), seats=2,
                              ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                              console=console, timing=TableTiming(event_timeout_s=3, settle_s=0.1))
        try:
            yield ctl, shoe, console, journal
        finally:
            shuffler.close()
            real.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


def test_a_status_saying_60_cards_held_is_never_dealt_on(tmp_path):
    """A shoe whose status says it holds 60 cards: more than a deck, a count no one deck
    gives. It used to be a number (52 - 60 = -8 cards out, "fewer than the reads", so
    nothing was questioned and the round settled); now the round is held before the first
    card as foreign cards, a hold a supervisor can void but never release."""
    with lying_table(tmp_path) as (ctl, shoe, console, journal):
        ctl.prepare()
        shoe.cards = 60
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.FOREIGN_CARD
        assert "60 cards, more than one deck of 52" in info.value.violation.detail
        assert kinds(journal, "card_read") == [] and "settle" not in _steps(journal)
        assert ctl.held.cause == "custody"


def test_a_negative_count_from_a_drivers_status_is_a_device_fault_and_the_round_never_settles(tmp_path):
    """A driver's status saying -3 cards held (a fake driver: the SPEC's one byte cannot say
    it): a device fault, not a number. The round is held; a supervisor who releases it while
    the count stays impossible gets the round held again, never settled; once the shoe's
    count is whole again the round is dealt and settles."""
    with lying_table(tmp_path) as (ctl, shoe, console, journal):
        ctl.prepare()
        shoe.cards = -3
        with pytest.raises(DeviceFault, match="impossible count"):
            ctl.play_round()
        assert ctl.held is not None and ctl.held.cause == "device"
        released = []

        def release(exp):
            if exp is not None and "release_hold" in exp.accepts and not released:
                released.append(exp)
                console.submit(Command("release_hold", {"supervisor": "S-1"}))
        console.on_expectation(release)
        with pytest.raises(DeviceFault, match="impossible count"):
            ctl.play_round()  # released: the count is asked again before the first card
        assert released and ctl.held is not None
        assert kinds(journal, "card_read") == [] and "settle" not in _steps(journal)
        assert sum("impossible count" in b["what"] for b in kinds(journal, "incident")) == 2
        # The shoe is fixed: released again, the round is dealt and settled on a count that holds.
        shoe.cards = None
        released.clear()
        result = ctl.play_round()
        assert result.number == 1 and "settle" in _steps(journal)


class ThirdDeckDealer:
    """The issue's second attack on the virtual dealer. After round 1 the dealer loads the
    deck just played (red, from the discard rack) into the shoe instead of the verified
    blue: a rule broken, the decks counted again. Then, asked for a deck in the shuffler, he
    puts in a third red deck (``insert red``) and leaves the played red deck in the shoe,
    to be taken for the red deck at "load the red deck"."""

    def __init__(self, sim):
        self.sim = sim
        self.stage = 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def load_shoe(self, colour):
        d = self.sim.dealer
        if d.discard_rack and self.stage == 0:
            self.stage = 1
            cards, d.discard_rack = d.discard_rack, []
            self.sim.shoe.load(cards)
        else:
            d.load_shoe(colour)

    def insert_deck(self, colour):
        if self.stage == 1:
            self.stage = 2
            self.sim.shuffler.insert(new_deck(RED))  # a third red deck
        else:
            self.sim.dealer.insert_deck(colour)


def test_a_third_deck_of_one_colour_after_a_recount_holds_the_table_for_a_supervisor(tmp_path):
    """After a recount, a third red deck is counted in the shuffler while the red deck just
    played stays in the shoe. It used to be counted, delivered, and at "load the red deck"
    the shoe's word adopted (an incident, no hold): the deck just played was dealt again.
    Now the second red deck is a custody violation that holds the table for a supervisor;
    the shoe's word is not adopted, no round is dealt until the supervisor acknowledges,
    and then the decks are counted again and play goes on from a verified deck."""
    acted = []

    def supervisor(exp):
        if exp is not None and "acknowledge_incident" in exp.accepts and not acted:
            acted.append(exp.what)
            # The supervisor takes the deck that is not the table's off it (the played red deck
            # in the shoe), then acknowledges.
            sim_ref[0].shoe.unload()
            console_ref[0].submit(Command("acknowledge_incident", {"supervisor": "S-1"}))
    sim_ref, console_ref = [], []
    with table(tmp_path, dealer=ThirdDeckDealer) as (ctl, sim, console, journal):
        sim_ref.append(sim)
        console_ref.append(console)
        console.on_expectation(supervisor)
        ctl.prepare()
        first = ctl.play_round()
        assert first.deck_colour is RED
        second = ctl.play_round()
        assert acted and "custody violation" in acted[0]
        rules = _rules(journal)
        assert rules[:2] == ["shoe_loaded_with_deck_just_played", "second_deck_of_one_colour"], rules
        adopted = [b for b in kinds(journal, "device_event") if b.get("source") == "adopted"]
        assert not [b for b in adopted if b["message"]["message"] == "ShoeLoaded"], adopted
        acks = [b for b in kinds(journal, "supervisor") if b.get("action") == "acknowledge_incident"]
        assert acks and acks[0]["rule"] == "second_deck_of_one_colour"
        # No round was opened while the table was held: round 2 opened after the acknowledgement.
        entries = list(journal.entries())
        ack_seq = next(e.seq for e in entries if e.kind == "supervisor" and e.body.get("rule") == "second_deck_of_one_colour")
        opens = [e.seq for e in entries if e.kind == "round" and e.body.get("step") == "open"]
        assert len(opens) == 2 and opens[1] > ack_seq
        # ...and dealt from a deck the shuffler counted after the hold.
        verified = [e.seq for e in entries if e.kind == "device_event"
                    and e.body["message"]["message"] == "DeckVerified"
                    and e.body["message"]["back_colour"] == str(second.deck_colour)]
        assert any(ack_seq < v < opens[1] for v in verified)
        assert second.number == 2


def test_a_second_deck_with_nobody_to_ask_stops_short_of_dealing(tmp_path):
    """The same attack with no supervisor at hand: the table does not deal, it says whom it
    needs (a run without a console exits on it; a service waits)."""
    with table(tmp_path, dealer=ThirdDeckDealer, attached=False) as (ctl, sim, console, journal):
        ctl.prepare()
        ctl.play_round()
        with pytest.raises(SupervisorRequired, match="custody violation"):
            ctl.play_round()
        assert _rules(journal)[-1] == "second_deck_of_one_colour"
        assert [b["step"] for b in kinds(journal, "round")].count("open") == 1


class OverfullLoad:
    """The dealer loads the verified deck with one more card of its colour under it (a card
    of a third deck): the shoe holds 53 at the load."""

    def __init__(self, sim):
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def load_shoe(self, colour):
        d = self.sim.dealer
        cards, d.in_hand = d.in_hand, []
        self.sim.shoe.load(cards + [SimCard(Card.parse("As"), colour)])


def test_a_shoe_holding_more_than_a_deck_at_the_load_holds_the_table(tmp_path):
    """At the load the shoe holds a deck of 52, no more: 53 is a card that did not come
    from the shuffler's count. The table is held for a supervisor before any round."""
    with table(tmp_path, dealer=OverfullLoad, attached=False) as (ctl, sim, console, journal):
        with pytest.raises(SupervisorRequired, match="custody violation"):
            ctl.prepare()
        assert _rules(journal) == ["foreign_card"]
        assert any("more cards than it should at the load" in b["what"] for b in kinds(journal, "incident"))
        assert not [b for b in kinds(journal, "round")]


class WalkAway(Exception):
    """The controller stops at the prompt to load the shoe (killed before the dealer loads)."""


class StopAtLoad:
    def __init__(self, sim):
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def load_shoe(self, colour):
        raise WalkAway(colour)


def _controller(sim, journal, dealer, *, attached, events: queue.Queue | None = None):
    events = queue.Queue() if events is None else events
    shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
    shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
    console = Console()
    console.attached = attached
    ctl = TableController(shuffler, shoe, events, dealer, DeckCustody([("A", RED), ("B", BLUE)]), seats=2,
                          ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                          timing=TableTiming(event_timeout_s=3, settle_s=0.1))
    return ctl, (shuffler, shoe)


def test_a_shoe_showing_the_colour_with_no_load_seen_is_not_adopted_at_a_restart_with_the_journal(tmp_path):
    """The journal says the red deck left the shuffler verified; while the table was down the
    shoe was loaded with red and power-cycled, so its ``ShoeLoaded`` is gone. The shoe's
    word was adopted (an incident) and its deck dealt; with the journal kept it is not: a
    red deck the table did not see loaded, beside the red deck the shuffler delivered, is a
    second deck of one colour and holds the table for a supervisor."""
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        ctl, links = _controller(sim, journal, StopAtLoad(sim), attached=False)
        with pytest.raises(WalkAway):
            ctl.prepare()
        for link in links:
            link.close()
        assert ctl.custody.decks[RED].place is DeckPlace.DELIVERED
        sim.dealer.load_shoe(RED)  # no host to hear it
        sim.shoe.reboot()          # and its event is lost
        ctl, links = _controller(sim, journal, sim.dealer, attached=False)
        try:
            with pytest.raises(SupervisorRequired, match="custody violation"):
                ctl.prepare()
            assert _rules(journal)[-1] == "second_deck_of_one_colour"
            adopted = [b for b in kinds(journal, "device_event") if b.get("source") == "adopted"]
            assert not [b for b in adopted if b["message"]["message"] == "ShoeLoaded"], adopted
            assert not [b for b in kinds(journal, "round")]
        finally:
            for link in links:
                link.close()
            journal.close()


class EarlyThirdDeck:
    """A fresh attacker's timing: at the round's collect the dealer leaves the red stub in the
    shoe, takes the verified blue deck out before he is asked and puts a third red deck into
    the shuffler; asked for the stub, he takes it out. The third red deck's ``DeckInserted``
    waits in the queue until the table asks for a red deck, when the shoe shows blue."""

    def __init__(self, sim):
        self.sim, self.collects = sim, 0

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def collect(self):
        self.collects += 1
        d = self.sim.dealer
        if self.collects == 1:
            d.discard_rack += d.on_layout  # the round's cards to the rack; the stub stays in the shoe
            d.on_layout = []
            d.take_from_shuffler()  # the blue deck out before it is asked for
            self.sim.shuffler.insert(new_deck(RED))  # a third red deck in, the red stub still in the shoe
            return
        d.collect()


def test_a_third_deck_put_in_the_shuffler_while_the_stub_of_its_colour_is_in_the_shoe_holds_the_table(tmp_path):
    with table(tmp_path, dealer=EarlyThirdDeck, attached=False) as (ctl, sim, console, journal):
        ctl.prepare()
        assert ctl.play_round().deck_colour is RED
        with pytest.raises(SupervisorRequired, match="custody violation"):
            ctl.prepare()
            ctl.play_round()
        assert "second_deck_of_one_colour" in _rules(journal)
        assert [b["step"] for b in kinds(journal, "round")].count("open") == 1


class DeliveredQueue(queue.Queue):
    """The table's one event queue (the controller's ``events`` argument), which the test
    can wait on: until an event the links delivered is in it, not yet taken in."""

    def wait_for(self, matches, timeout_s: float) -> bool:
        with self.not_empty:  # notified at every put
            return self.not_empty.wait_for(lambda: any(matches(ev) for ev in self.queue), timeout_s)


class StubStays:
    """At the round's collect the dealer puts the round's cards in the rack and leaves the
    stub of the deck in play (red) in the shoe."""

    def __init__(self, sim):
        self.sim = sim

    def __getattr__(self, name):
        return getattr(self.sim.dealer, name)

    def collect(self):
        d = self.sim.dealer
        d.discard_rack += d.on_layout
        d.on_layout = []


def test_a_third_deck_inserted_while_the_table_is_down_holds_it_at_its_start(tmp_path):
    """The restart version of the third red deck, made certain to be among the events the
    devices delivered before the table opens. After round 1 (red dealt, blue verified in the
    shuffler) the table goes down with the red stub left in the shoe; the dealer takes the
    blue deck out, power-cycles the shuffler (its ``DeckDelivered`` is lost) and puts a third
    red deck in. At the start its ``DeckInserted`` is already delivered: it is a second red
    deck beside the stub in the shoe, and the table is held for a supervisor. It used to
    raise a bare ``CustodyViolation`` out of the start, with no hold on the table."""
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        ctl, links = _controller(sim, journal, StubStays(sim), attached=False)
        try:
            ctl.prepare()
            assert ctl.play_round().deck_colour is RED
            assert ctl.custody.decks[BLUE].place is DeckPlace.VERIFIED
        finally:
            for link in links:
                link.close()
        sim.dealer.take_from_shuffler()          # the blue deck out, no host to hear it
        sim.shuffler.reboot()                    # and its DeckDelivered is lost
        sim.shuffler.insert(new_deck(RED))       # a third red deck; the red stub is in the shoe
        events = DeliveredQueue()
        ctl, links = _controller(sim, journal, sim.dealer, attached=False, events=events)
        try:
            assert events.wait_for(lambda ev: isinstance(ev.message, DeckInserted), 10.0)
            with pytest.raises(SupervisorRequired, match="custody violation"):
                ctl.prepare()
            assert _rules(journal)[-1] == "second_deck_of_one_colour"
            held = [b for b in kinds(journal, "incident") if b.get("held")]
            assert held and held[-1]["rule"] == "second_deck_of_one_colour"
            assert [b["step"] for b in kinds(journal, "round")].count("open") == 1
        finally:
            for link in links:
                link.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok
