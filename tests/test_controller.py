"""The controller on a simulated table: each dealer error and fault gets its remedy, and
the dealer's hand stays sealed on every public path until every seat has decided."""

from __future__ import annotations

import io
import json
import logging
import queue
import threading
import time
from contextlib import contextmanager

import pytest
import structlog

from devices import CardShoe, Shuffler
from protocols.cards import BackColour, Card
from simulators.devices import SimCard, new_deck
from simulators.table import SimulatedTable
from table.console import Command, Console
from table.errors import RoundHeld, Sealed, SupervisorRequired
from table.controller import TableController, TableTiming
from table.custody import DeckCustody, DeckPlace, Rule
from table.journal import Journal, verify
from table.keys import generate
from table.logs import configure_logging
from table.rules.settlement import Tables

RED, BLUE = BackColour.RED, BackColour.BLUE
KEY = generate()


@contextmanager
def table(tmp_path, *, seed=7, seats=2, attached=True, auto_dealer=True, dealer=None):
    with SimulatedTable((RED, BLUE), seed=seed) as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        console = Console()
        console.attached = attached
        ctl = TableController(shuffler, shoe, events, dealer(sim) if dealer else sim.dealer,
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=seats, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                              auto_dealer=auto_dealer, timing=TableTiming(event_timeout_s=3, settle_s=0.1))
        try:
            yield ctl, sim, console, journal
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


def void(console: Console, reason: str = "misdeal") -> None:
    console.submit(Command("void", {"reason": reason, "supervisor": "S-1"}))


def kinds(journal: Journal, kind: str) -> list[dict]:
    return [e.body for e in journal.entries(kind)]


class SlipDealer:
    """A dealer who makes one mistake at the Nth draw of the game."""

    def __init__(self, sim, at: int, mistake):
        self._sim, self._at, self._mistake, self.draws = sim, at, mistake, 0

    def __getattr__(self, name):
        return getattr(self._sim.dealer, name)

    def draw_card(self):
        self.draws += 1
        if self.draws == self._at:
            self._mistake(self._sim)
        self._sim.dealer.draw_card()


def test_regular_rounds_alternate_and_journal_every_step(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        ctl.prepare()
        colours = [ctl.play_round().deck_colour for _ in range(4)]
        assert colours == [RED, BLUE, RED, BLUE]
        steps = [b["step"] for b in kinds(journal, "round")]
        # "closed" records the close too (issue 18: one entry, as for a void)
        assert steps[:9] == ["open", "close_bets", "start_dealing", "dealing_done", "decisions_done",
                             "dealer_reveal", "settle", "collect", "closed"]
        assert len(kinds(journal, "card_read")) == 4 * 9
        # The settlement is recorded before it is posted (816a.1): "settle" precedes "collect".
        assert steps.index("settle") < steps.index("collect")


def test_foreign_card_holds_the_round_for_a_misdeal(tmp_path):
    slip = lambda sim: sim.shoe.cards.insert(0, SimCard(Card.parse("As"), BLUE))  # noqa: E731
    with table(tmp_path, dealer=lambda sim: SlipDealer(sim, 2, slip)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.FOREIGN_CARD
        assert ctl.held is not None
        void(console, "foreign card: misdeal")
        ctl.resolve_held()
        steps = [b["step"] for b in kinds(journal, "round")]
        assert steps[-3:] == ["held", "voided", "closed"]
        assert [b["rule"] for b in kinds(journal, "violation")] == ["foreign_card"]
        assert ctl.custody.decks[RED].place is DeckPlace.IN_DISCARD_RACK


def test_the_same_card_read_twice_holds_the_round(tmp_path):
    def twice(sim):
        sim.shoe.cards.insert(0, SimCard(sim.dealer.drawn[0].card, RED))
    with table(tmp_path, dealer=lambda sim: SlipDealer(sim, 4, twice)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.DUPLICATE_CARD


def test_a_deck_failing_verification_is_taken_out_until_a_supervisor_registers_a_replacement(tmp_path):
    with table(tmp_path, attached=False) as (ctl, sim, console, journal):
        sim.dealer.off_table[RED].pop()  # the red deck is a card short
        with pytest.raises(SupervisorRequired, match="replacement for deck A"):
            ctl.prepare()
        assert ctl.custody.decks[RED].place is DeckPlace.OUT_OF_SERVICE
        assert [b["rule"] for b in kinds(journal, "violation")] == ["deck_incomplete"]
        # The dealer was prompted to take the short deck out; the supervisor brings a new one
        # and registers it when the table asks for it (the console's expectation).
        assert not sim.shuffler.holds_cards()
        sim.dealer.off_table[RED] = new_deck(RED)
        console.attached = True
        console.on_expectation(lambda exp: exp is not None and exp.action == "register_deck" and console.submit(
            Command("register_deck", {"deck_id": "A2", "supervisor": "S-1"})))
        ctl.advance()
        assert ctl.custody.decks[RED].deck_id == "A2"
        assert ctl.play_round().deck_id == "A2"
        assert kinds(journal, "supervisor")[0]["replaces"] == "A"


def test_a_card_drawn_before_betting_closed_is_an_incident(tmp_path):
    with table(tmp_path, auto_dealer=False) as (ctl, sim, console, journal):
        ctl.prepare()

        def early_dealer():
            while not (ctl.status()["round"] or {}).get("state") == "open_for_bets":
                time.sleep(0.005)
            sim.dealer.draw_card()  # before the dealer closed bets
            while ctl.events.empty():
                time.sleep(0.005)
            console.submit(Command("close_bets"))

        t = threading.Thread(target=early_dealer)
        t.start()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        t.join()
        assert info.value.violation.rule is Rule.CARD_DRAWN_EARLY
        assert kinds(journal, "incident")[0]["what"] == "card drawn before betting closed"


def test_an_unreadable_card_is_entered_by_a_supervisor(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        ctl.prepare()
        sim.shoe.faults.unreadable_draws = 1
        actual = sim.shoe.cards[0].card
        # The supervisor reads the card off the layout when the table asks for it.
        console.on_expectation(lambda exp: exp is not None and exp.action == "confirm_card" and console.submit(
            Command("confirm_card", {"card": str(actual), "supervisor": "S-1"})))
        result = ctl.play_round()
        assert result.seats[0].cards[0] == actual
        first = next(journal.entries("card_read"))
        # The face is sealed in the journal until the reveal; the table key opens it.
        assert first.body["manual"] is True and "card" not in first.body
        assert journal.unseal(first)["card"] == str(actual)
        assert kinds(journal, "supervisor")[0]["action"] == "confirm_card"


def test_a_seat_given_a_wrong_number_of_cards_is_a_misdeal(tmp_path):
    extra = lambda sim: sim.dealer.draw_card()  # noqa: E731 - one draw too many
    with table(tmp_path, dealer=lambda sim: SlipDealer(sim, 5, extra)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.WRONG_CARD_COUNT


def test_the_shoe_loaded_with_the_deck_just_played_is_refused_and_the_decks_counted_again(tmp_path):
    """The dealer loads the deck just played (unshuffled, from the discard rack) instead of the
    verified one: the rule is broken and journaled, never dealt from; the table does not stop
    (it did: exit 3 with supervisors at hand) but sends every deck round the shuffler again,
    counted before it is dealt, and the next round is dealt from a verified deck."""
    class Reloader:
        def __init__(self, sim):
            self.sim = sim
            self.slipped = False

        def __getattr__(self, name):
            return getattr(self.sim.dealer, name)

        def load_shoe(self, colour):
            d = self.sim.dealer
            if d.discard_rack and not self.slipped:  # after round 1: reload the red cards from the rack, once
                self.slipped = True
                cards, d.discard_rack = d.discard_rack, []
                self.sim.shoe.load(cards)
            else:
                d.load_shoe(colour)

    with table(tmp_path, dealer=Reloader) as (ctl, sim, console, journal):
        ctl.prepare()
        first = ctl.play_round()
        second = ctl.play_round()
        assert [b["rule"] for b in kinds(journal, "violation")] == ["shoe_loaded_with_deck_just_played"]
        assert [b["op"] for b in kinds(journal, "custody") if b.get("op") == "recount"] == ["recount"]
        assert any("counted again in the shuffler" in b["what"] for b in kinds(journal, "incident"))
        assert second.number == first.number + 1 and not ctl.custody.violations[1:]


def test_a_void_needs_a_reason_and_returns_the_wagers(tmp_path):
    slip = lambda sim: sim.shoe.cards.insert(0, SimCard(Card.parse("2c"), BLUE))  # noqa: E731
    with table(tmp_path, dealer=lambda sim: SlipDealer(sim, 1, slip)) as (ctl, sim, console, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld):
            ctl.play_round()
        answers = []
        console.submit(Command("void", {"reason": " ", "supervisor": "S-1"}, answers.append))
        void(console, "foreign card")
        ctl.resolve_held()
        assert answers[0]["ok"] is False and "reason" in answers[0]["error"]
        voided = [b for b in kinds(journal, "round") if b["step"] == "voided"][0]
        assert voided["wagers"] == "returned" and voided["supervisor"] == "S-1"


def test_the_dealer_hand_is_sealed_on_every_public_path(tmp_path):
    stream = io.StringIO()
    configure_logging(stream=stream, fmt="json", level="debug")
    try:
        with table(tmp_path, seats=3) as (ctl, sim, console, journal):
            ctl.prepare()
            seen: list = []
            probes: list = []

            def on_event(ev):
                seen.append(ev)
                if ev.kind == "card_dealt":
                    try:
                        probes.append(("api", ctl.dealer_hand()))
                    except Sealed:
                        probes.append(("api", None))
                    view = ctl.seat_view(1)
                    probes.append(("view", view.dealer_hand, view.cards))

            ctl.subscribe(on_event)
            result = ctl.play_round()
    finally:
        logging.getLogger().handlers.clear()
        structlog.reset_defaults()
    dealer = {str(c) for c in result.dealer_hand}
    seat1 = [str(c) for c in result.seats[0].cards]
    # API: every probe during the deal was refused; seat 1's view held only seat 1's cards.
    assert [p for p in probes if p[0] == "api"] == [("api", None)] * 12
    for p in probes:
        if p[0] == "view":
            assert p[1] is None and all(str(c) in seat1 for c in p[2])
    # Events: before dealer_revealed no public event carries any card face, and a
    # seat's private events carry only that seat's cards.
    reveal = next(i for i, e in enumerate(seen) if e.kind == "dealer_revealed")
    faces = {str(Card.from_index(i)) for i in range(52)}
    for e in seen[:reveal]:
        text = json.dumps(e.data)
        if e.audience == "table":
            assert not any(f'"{f}"' in text for f in faces), e
        else:
            seat = int(e.audience.split(":")[1])
            assert e.data["card"] in [str(c) for c in result.seats[seat - 1].cards]
            assert not dealer & {e.data["card"]}
    assert seen[reveal].data["hands"]["1"] == seat1
    # Logs: no line before the reveal names a dealer card.
    lines = [json.loads(x) for x in stream.getvalue().splitlines() if x.startswith("{")]
    cut = next(i for i, x in enumerate(lines) if x.get("event") == "dealer_reveal")
    for x in lines[:cut]:
        if x.get("event") == "card_read" and x.get("to") == "dealer":
            assert "card" not in x
    assert all(x.get("to") != "dealer" or "card" not in x for x in lines[:cut])
    assert dealer  # the hand was dealt and revealed afterwards


def test_a_real_table_takes_the_dealers_confirmations_and_decisions_on_the_control_socket(tmp_path):
    """auto_dealer=False, as at a real table: bets closed, each seat's decision and the
    collect come in over the documented control socket (docs/console.md)."""
    from table.interfaces.control_socket import ControlSocket, send
    from table.console import console_decisions

    with table(tmp_path, auto_dealer=False, seats=2) as (ctl, sim, console, journal):
        ctl.decide = console_decisions(console)
        sock = ControlSocket(tmp_path / "ctl.sock", console)
        replies = []

        def dealer_at_the_console():
            def waiting_for():  # what the table waits for (the round's state comes a moment before it)
                st = send(sock.path, {"action": "status"})
                return (st.get("waiting_for") or {}).get("action")
            plan = [("close_bets", {"action": "close_bets"}),
                    ("decide", {"action": "decide", "seat": 2, "decision": "play"}),  # out of turn
                    ("decide", {"action": "decide", "seat": 1, "decision": "fold"}),
                    ("decide", {"action": "decide", "seat": 2, "decision": "play"}),
                    ("confirm_collect", {"action": "confirm_collect"})]
            for action, request in plan:
                while waiting_for() != action:
                    time.sleep(0.005)
                replies.append(send(sock.path, request))

        try:
            ctl.prepare()
            t = threading.Thread(target=dealer_at_the_console)
            t.start()
            result = ctl.play_round()
            t.join()
        finally:
            sock.close()
        assert [s.decision.value for s in result.seats] == ["fold", "play"]
        assert replies[1] == {"ok": False, "code": "not_expected", "error": "the table waits for seat 1's decision"}
        assert all(r["ok"] for i, r in enumerate(replies) if i != 1)


def test_bets_closed_the_moment_the_round_opens_are_taken_not_refused(tmp_path):
    """The round is open for bets (status and the round_opened event say so) a moment before
    the table waits for close_bets (it journals the open first): a dealer who closes bets in
    that moment is answered when the table waits for it, never "not expected now"."""
    from table.console import console_decisions

    with table(tmp_path, auto_dealer=False, seats=2) as (ctl, sim, console, journal):
        ctl.decide = console_decisions(console)
        replies: list[dict] = []
        plan = {"close_bets": None, "decide": None, "confirm_collect": None}

        def on_event(ev):
            if ev.kind == "round_opened":  # the controller's thread: it has not asked for close_bets yet
                assert console.expectation is None or console.expectation.action != "close_bets"
                console.submit(Command("close_bets", {}, replies.append))

        def dealer(exp):
            if exp is None or exp.action not in plan:
                return
            if exp.action == "close_bets" and not (replies and replies[0]["ok"] is False):
                return  # closed already at the open (refused: close them again, so the test ends and fails)
            args = {"seat": exp.seat, "decision": "play"} if exp.action == "decide" else {}
            console.submit(Command(exp.action, args, replies.append))

        ctl.subscribe(on_event)
        console.on_expectation(dealer)
        ctl.prepare()
        result = ctl.play_round()
        # the close is answered with the seats it deals (issue 23: only seats with a wager are dealt)
        assert replies[0] == {"ok": True, "round_id": result.round_id, "seats": [1, 2]}, replies
        assert all(r["ok"] for r in replies) and len(replies) == 4, replies


def test_a_collect_confirmed_the_instant_the_last_decision_is_in_is_refused_not_taken_before_the_payouts(tmp_path):
    """The collect is confirmed after the payouts are shown: one sent the instant the last
    seat's decision is answered (before the reveal and the settlement) is refused, not
    held through those steps and taken as the confirmation (found by an attacker)."""
    from table.console import console_decisions

    with table(tmp_path, auto_dealer=False, seats=2) as (ctl, sim, console, journal):
        ctl.decide = console_decisions(console)
        early: list[dict] = []
        replies: list[dict] = []
        settled: list[str] = []
        ctl.subscribe(lambda ev: ev.kind == "round_settled" and settled.append(ev.kind))

        def after_last_decision(reply):
            replies.append(reply)
            console.submit(Command("confirm_collect", {}, early.append))  # a double tap, at once

        def dealer(exp):
            if exp is None:
                return
            if exp.action == "close_bets":
                console.submit(Command("close_bets", {}, replies.append))
            elif exp.action == "decide":
                console.submit(Command("decide", {"seat": exp.seat, "decision": "play"},
                                       after_last_decision if exp.seat == 2 else replies.append))
            elif exp.action == "confirm_collect":
                assert settled, "the table asked for the collect before the payouts were published"
                console.submit(Command("confirm_collect", {}, replies.append))

        console.on_expectation(dealer)
        ctl.prepare()
        ctl.play_round()
        assert early and early[0]["ok"] is False and early[0]["code"] == "not_expected", early
        assert len(replies) == 4 and all(r["ok"] for r in replies), replies


@pytest.mark.parametrize("at_draw", [0, 4, 9])
def test_a_supervisor_voids_a_running_round_and_every_wager_is_returned(tmp_path, at_draw):
    """A void may come at any point before settle (issue 5): before the deal, mid-deal,
    after the decisions. The round closes voided with each seat's stake returned."""
    from table.errors import RoundVoided

    def void_now(sim):
        void(console_ref[0], "dealer exposed a card")

    console_ref = []
    dealer = (lambda sim: SlipDealer(sim, at_draw, void_now)) if at_draw else None
    with table(tmp_path, dealer=dealer) as (ctl, sim, console, journal):
        console_ref.append(console)
        ctl.prepare()
        if at_draw == 0:
            ctl.subscribe(lambda ev: ev.kind == "round_opened" and ev.data["number"] == 1
                          and void(console, "dealer exposed a card"))
        with pytest.raises(RoundVoided):
            ctl.play_round()
        voided = [b for b in kinds(journal, "round") if b["step"] == "voided"][-1]
        assert voided["returned_cents"] == {"1": 1000, "2": 1000}
        assert voided["supervisor"] == "S-1"
        assert [b["step"] for b in kinds(journal, "round")][-1] == "closed"
        result = ctl.play_round()  # the table goes on with the other deck
        assert result.deck_colour is BLUE and result.number == 2


def test_a_void_after_settle_is_refused_and_results_stand(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        ctl.prepare()
        answers = []
        ctl.subscribe(lambda ev: ev.kind == "round_settled" and console.submit(
            Command("void", {"reason": "too late", "supervisor": "S-1"}, answers.append)))
        ctl.play_round()
        assert answers and answers[0]["ok"] is False and "results stand" in answers[0]["error"]
        assert "voided" not in [b["step"] for b in kinds(journal, "round")]


def test_the_table_opens_only_once_the_first_deck_is_verified(tmp_path):
    with table(tmp_path) as (ctl, sim, console, journal):
        with pytest.raises(Exception) as info:
            ctl.custody.start_round()  # nothing verified yet: the table is closed
        assert info.value.rule is Rule.NO_DECK_IN_PLAY
        ctl.prepare()
        entries = list(journal.entries())
        opened = next(e.seq for e in entries if e.kind == "table_open")
        first_verified = next(e.seq for e in entries if e.kind == "device_event"
                              and e.body["message"]["message"] == "DeckVerified")
        assert first_verified < opened


class StubLeftDealer:
    """A dealer who leaves the shoe's stub in at the round's collect and clears it, into the
    discard rack, only when the table asks for the stub (its second prompt to collect, with
    no round's cards on the layout: the stub step, ``unload_shoe``)."""

    def __init__(self, sim):
        self._sim = sim
        self.prompted_loads = 0
        self.stub_prompts = 0

    def __getattr__(self, name):
        return getattr(self._sim.dealer, name)

    def collect(self):
        d = self._sim.dealer
        with d._lock:
            if d.on_layout:  # the round's cards; the stub stays in the shoe
                d.discard_rack += d.on_layout
                d.on_layout = []
                return
            self.stub_prompts += 1
            d.discard_rack += self._sim.shoe.unload()

    def load_shoe(self, colour):
        self.prompted_loads += 1
        self._sim.dealer.load_shoe(colour)


def test_a_stub_left_in_the_shoe_is_not_taken_for_the_next_deck_loaded(tmp_path):
    """The shoe still holding the red stub is not "the blue deck loaded": the dealer is
    asked to take the stub out, then prompted to load the blue deck (a fresh user saw no
    prompt and a timeout; then a load prompt the shoe refused while the stub was in it)."""
    holder = {}

    def make(sim):
        holder["d"] = StubLeftDealer(sim)
        return holder["d"]

    with table(tmp_path, dealer=make) as (ctl, sim, console, journal):
        ctl.prepare()
        loads_at_open = holder["d"].prompted_loads
        assert [ctl.play_round().deck_colour for _ in range(2)] == [RED, BLUE]
        assert holder["d"].prompted_loads == loads_at_open + 1
        assert holder["d"].stub_prompts == 1
        assert [p["colour"] for p in kinds(journal, "prompt") if p["action"] == "load_shoe"][-1] == "blue"


@pytest.mark.alone  # bounds wall time (the void within 0.5 s): run apart from the parallel run
def test_a_round_voided_while_the_shoe_is_away_is_carried_out_at_once_and_its_late_card_is_no_incident(tmp_path):
    """The shoe's cable is pulled mid-deal (and stays out): the round is held within the
    link's timeout; a void is carried out at once, without asking the shoe (a link that is
    down would make it wait its reconnect time); the next step says it waits for the shoe
    to be connected again; once it is back, the card drawn while it was away is journaled
    with the voided round, dealt to nobody, not as an incident (found by the people bench)."""
    from firmware_bridge.link import LinkConfig
    from table.errors import DeviceFault, RoundVoided

    fast = LinkConfig(heartbeat_interval_ms=100, heartbeat_timeout_ms=100, heartbeat_misses=2,
                      reconnect_initial_ms=20, reconnect_max_ms=100, reconnect_wait_s=1.5)
    # Stable names, as udev gives a real adapter: a pty made again on plug gets a new number
    # (and the old one may be another process's pty by then).
    with SimulatedTable((RED, BLUE), seed=7, link_dir=tmp_path / "dev") as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False, config=fast)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False, config=fast)
        console = Console()
        console.attached = True
        seen: list[str] = []
        console.on_expectation(lambda exp: exp is not None and seen.append(exp.action))
        dealer = SlipDealer(sim, 5, lambda s: s.shoe.unplug())
        ctl = TableController(shuffler, shoe, events, dealer, DeckCustody([("A", RED), ("B", BLUE)]), seats=2,
                              ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal, console=console,
                              timing=TableTiming(event_timeout_s=3))
        try:
            ctl.prepare()
            t0 = time.monotonic()
            with pytest.raises(DeviceFault, match="shoe link has been down"):
                ctl.play_round()
            assert time.monotonic() - t0 < 1.5 + 2.0 and ctl.held.cause == "device"
            rid = ctl.held.round_id
            void(console, "shoe unplugged")
            t0 = time.monotonic()
            with pytest.raises(RoundVoided):
                ctl.play_round()
            assert time.monotonic() - t0 < 0.5, "the void waited for the shoe"
            # The decks move until the shoe is needed; then the table waits for it, saying what to
            # do (a device fault people can fix is never an exit in service mode), and deals on.
            asked = threading.Event()
            console.on_expectation(lambda exp: exp is not None and exp.action == "fix_device" and asked.set())
            out: dict = {}
            th = threading.Thread(target=lambda: out.update(result=ctl.play_round()), daemon=True)
            th.start()
            assert asked.wait(30), seen
            assert "reconnect" in seen and "check its cable and power" in console.expectation.what
            sim.shoe.plug()
            th.join(60)
            assert out["result"].round_id != rid
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    with Journal(tmp_path / "journal.sqlite3") as j:
        late = [e.body for e in j.entries("card_read") if e.round_id == rid and e.body.get("late")]
        assert [(b["draw_index"], b["to"], b.get("voided")) for b in late] == [(4, None, True)]
        assert not [e for e in j.entries("incident") if "no round in progress" in e.body.get("what", "")]
    assert verify(tmp_path / "journal.sqlite3").ok


@pytest.mark.parametrize("steps, extra, cause, final", [
    (["close_bets", "start_dealing"], [], "restart", False),
    (["close_bets", "start_dealing", "dealing_done", "decisions_done"], [], "restart", True),
    (["close_bets", "start_dealing"], [("round", {"step": "held", "cause": "custody", "reason": "foreign card"})],
     "custody", False),
    (["close_bets", "start_dealing", "dealing_done", "decisions_done", "dealer_reveal"],
     [("supervisor", {"action": "void_requested", "supervisor": "S-1", "reason": "misdeal"}),
      ("round", {"step": "held", "cause": "void_request", "reason": "void requested by S-1"})],
     "void_request", True),
])
def test_a_round_found_after_a_restart_keeps_what_its_hold_allows(tmp_path, steps, extra, cause, final):
    """A restart mid-round holds it for a supervisor to release (cause "restart"); a round
    held before the restart stays held for what held it (a broken rule cannot be released by
    restarting); once the decisions were final, a void still needs a second supervisor, and a
    void asked before the restart still waits for its confirmation (found by the people bench)."""
    from table.recovery import restore

    with Journal(tmp_path / "j.sqlite3", key=KEY) as j:
        rid = "r00001-00000000"
        j.append("round", round_id=rid, deck_id="A", step="open", number=1, wagers={"1": {"ante": 1000}})
        for step in steps:
            j.append("round", round_id=rid, deck_id="A", step=step, number=1,
                     **({"decisions": {"1": "play"}} if step == "decisions_done" else {}))
        for kind, body in extra:
            j.append(kind, round_id=rid, deck_id="A", number=1, **body)
        held = restore(j, DeckCustody([("A", RED), ("B", BLUE)])).held
    assert held is not None
    assert held.round_id == rid and held.cause == cause and held.decisions_final is final
    if cause == "void_request":
        assert held.void_request is not None and held.void_request.supervisor == "S-1"
    if cause == "custody":
        assert held.reason == "foreign card"


def test_a_round_held_across_a_restart_and_released_is_played_by_play_round(tmp_path):
    """prepare() leaves the held round to play_round(), which has a supervisor release it
    and returns its result, as for any round (the terminal prints it, --rounds counts it)."""
    from table.recovery import device_cursor

    class Killed(BaseException):
        pass

    def kill(sim):
        raise Killed()  # the controller stops mid-deal, as under SIGKILL: nothing more is journaled

    with SimulatedTable((RED, BLUE), seed=7) as sim:
        path = tmp_path / "journal.sqlite3"
        for attempt in ("killed", "restarted"):
            events: queue.Queue = queue.Queue()
            journal = Journal(path, key=KEY)
            cursor = device_cursor(journal)
            shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False,
                                     resume=cursor.resume)
            shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False,
                                 resume=cursor.resume)
            console = Console()
            console.attached = True
            dealer = SlipDealer(sim, 4, kill) if attempt == "killed" else sim.dealer
            ctl = TableController(shuffler, shoe, events, dealer, DeckCustody([("A", RED), ("B", BLUE)]), seats=2,
                                  ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                                  console=console, timing=TableTiming(event_timeout_s=3), cursor=cursor)
            try:
                ctl.prepare()
                if attempt == "killed":
                    with pytest.raises(Killed):
                        ctl.play_round()
                    continue
                assert ctl.held is not None and ctl.held.cause == "restart"
                rid = ctl.held.round_id
                console.on_expectation(lambda exp: exp is not None and "release_hold" in exp.accepts and console.submit(
                    Command("release_hold", {"supervisor": "S-1"})))  # the supervisor, once the table asks
                result = ctl.play_round()
                assert result.round_id == rid and len(result.reads) == 9
            finally:
                shuffler.close()
                shoe.close()
                journal.close()
    assert verify(path).ok


def test_a_restart_without_the_journal_counts_the_shufflers_deck_again_and_empties_the_shoe(tmp_path):
    """No journal after a restart, the shuffler holding a verified deck and the shoe a loaded
    one: the table waits for the shuffler's own record (its resend window), takes its word
    (an incident), asks the dealer to empty the shoe into the discard rack (an incident: it
    has no record of that deck), and deals the shuffler's deck (found by the people bench)."""
    from firmware_bridge.link import LinkConfig

    quick = LinkConfig(retransmit_max_ms=200)
    with SimulatedTable((RED, BLUE), seed=7) as sim:
        seen: list = []
        for attempt in ("before", "after"):
            events: queue.Queue = queue.Queue()
            shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", config=quick)
            shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", config=quick)
            console = Console()
            console.attached = True
            console.on_expectation(lambda exp: exp is not None and seen.append((exp.action, exp.colour)))
            ctl = TableController(shuffler, shoe, events, sim.dealer, DeckCustody([("A", RED), ("B", BLUE)]),
                                  seats=2, ante_cents=1000, tables=Tables.load("pa-649a12b-1"), console=console,
                                  timing=TableTiming(event_timeout_s=3))
            try:
                ctl.prepare()
                if attempt == "before":
                    ctl.play_round()  # red dealt; blue verified in the shuffler
                    ctl.advance()     # blue into the shoe, red counted in the shuffler
                    assert ctl.custody.places() == {"A": "verified", "B": "in_shoe"}
                    seen.clear()
                    continue
                texts = [a["text"] for a in ctl.status()["alarms"] if a["kind"] == "incident"]
                assert any("the shuffler holds the red deck from before the restart" in t for t in texts), texts
                assert any("the shoe holds a blue deck the table has no record of" in t for t in texts), texts
                assert ("device_record", "red") in seen and ("collect", "blue") in seen
                assert ctl.play_round().deck_colour is RED
            finally:
                shuffler.close()
                shoe.close()
