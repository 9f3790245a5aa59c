"""The bench's hands carry the physical deck between emulators, and the emulators make the faults
a soak and the conformance suite draw from (docs/emulators.md, "Carrying the deck", "Faults")."""

from __future__ import annotations

import queue

import pytest

from devices import CardShoe, Shuffler
from firmware_bridge.errors import RequestRefused
from protocols.cards import BackColour, Card
from protocols.deck_text import deck_from_text, deck_to_text
from protocols.errors import CardError
from protocols.messages import (CardDrawn, DeckDelivered, DeckInserted, DeckVerified, DeviceState, NakCode,
                                ShoeLoaded)
from simulators.standalone import ControlError, EmulatorOptions, StandaloneEmulator

from hil_helpers import EmulatorProcess
from test_emulate import FAST, next_message


def _deck_word(reply: str) -> str:
    return next(w for w in reply.split() if w.startswith("deck="))


# -- the text a deck is carried as ----------------------------------------------------------------


def test_deck_text_round_trips_order_and_foreign_backs():
    cards = [(Card.parse("As"), BackColour.RED), (Card.parse("Kd"), BackColour.RED),
             (Card.parse("2c"), BackColour.BLUE), (Card.parse("Th"), BackColour.RED)]
    text = deck_to_text(cards)
    assert text == "red:As,Kd,2c/blue,Th"
    assert deck_from_text(text) == cards


@pytest.mark.parametrize("text, match", [
    ("As,Kd", "COLOUR:CARD"), ("red:", "no card"), ("none:As", "none"), ("red:As,Zz", "not a card"),
    ("red:As/none", "none"), ("mauve:As", "unknown back colour"), ("red:" + ",".join(["As"] * 121), "at most"),
])
def test_deck_text_refuses_what_is_not_a_deck(text, match):
    with pytest.raises(CardError, match=match):
        deck_from_text(text)


# -- across processes: the deck taken from the shuffler is the deck the shoe deals ------------------


@pytest.mark.parametrize("transport", ["tcp", "pty"])
def test_the_deck_taken_from_the_shuffler_is_dealt_by_the_shoe_in_its_order(tmp_path, transport):
    where = ["--tcp", "127.0.0.1:0"] if transport == "tcp" else ["--pty", str(tmp_path / "shoe")]
    with EmulatorProcess("shuffler", "--tcp", "127.0.0.1:0", "--seed", "3", log_path=tmp_path / "shf.log") as shf, \
            EmulatorProcess("shoe", *where, "--seed", "99", log_path=tmp_path / "shoe.log") as shoe_emu:
        shf_events: queue.Queue = queue.Queue()
        shoe_events: queue.Queue = queue.Queue()
        with Shuffler.open(shf.url, config=FAST, events=shf_events) as shuffler, \
                CardShoe.open(shoe_emu.url, config=FAST, events=shoe_events):
            assert shf.control("insert red").startswith("ok inserted red")
            assert isinstance(next_message(shf_events), DeckInserted)
            shuffler.shuffle()
            assert next_message(shf_events).complete
            taken = shf.control("take")
            assert taken.startswith("ok taken cards=52 deck=red:")
            assert isinstance(next_message(shf_events), DeckDelivered)
            order = [c for c, _ in deck_from_text(_deck_word(taken)[5:])]
            assert sorted(c.index for c in order) == list(range(52))  # the whole deck, shuffled
            assert shoe_emu.control(f"load {_deck_word(taken)}") == "ok loaded red cards=52"
            assert next_message(shoe_events) == ShoeLoaded(BackColour.RED)
            assert shoe_emu.control("draw 5") == "ok drew " + " ".join(str(c) for c in order[:5])
            read = [next_message(shoe_events) for _ in range(5)]
            assert [m.card for m in read] == order[:5]  # the host reads the shuffler's order
            unloaded = shoe_emu.control("unload")
            assert unloaded.startswith("ok unloaded cards=47 ")
            assert [c for c, _ in deck_from_text(_deck_word(unloaded)[5:])] == order[5:]
            # and back into the shuffler, edited by the hands: a card slipped out
            rest = deck_from_text(_deck_word(unloaded)[5:])[1:]
            assert shf.control(f"insert deck={deck_to_text(rest)}") == "ok inserted red cards=46"


def test_load_colour_is_a_fresh_deck_not_the_shuffler_s(tmp_path):
    shoe = StandaloneEmulator(EmulatorOptions("shoe", tcp=("127.0.0.1", 0), seed=1))
    try:
        assert shoe.command("load red ordered") == "loaded red cards=52"
        assert shoe.command("draw 2") == "drew 2c 2d"
        assert shoe.command("unload").startswith("unloaded cards=50 deck=red:2h,2s,3c")
        assert shoe.command("unload") == "unloaded cards=0"
        with pytest.raises(ControlError, match="not a card"):
            shoe.command("load deck=red:As,Xx")
        with pytest.raises(ControlError, match="load COLOUR"):
            shoe.command("load red blue")
    finally:
        shoe.stop()


def test_the_hands_load_a_short_doubled_or_substituted_deck_and_the_shoe_deals_it(tmp_path):
    """The hands may carry another deck than the shuffler's: what they load is what is dealt."""
    shoe = StandaloneEmulator(EmulatorOptions("shoe", tcp=("127.0.0.1", 0), seed=1))
    try:
        assert shoe.command("load deck=red:As,As,Kd/blue,2c") == "loaded red cards=4"
        assert shoe.command("draw 4") == "drew As As Kd 2c"
        assert shoe.command("draw") == "drew empty"
    finally:
        shoe.stop()


# -- faults ------------------------------------------------------------------------------------------


def test_garble_makes_line_noise_the_link_rides_through(tmp_path):
    with EmulatorProcess("shoe", "--tcp", "127.0.0.1:0", "--seed", "4", log_path=tmp_path / "shoe.log") as emu:
        events: queue.Queue = queue.Queue()
        with CardShoe.open(emu.url, config=FAST, events=events) as shoe:
            assert emu.control("load red ordered").startswith("ok")
            assert next_message(events) == ShoeLoaded(BackColour.RED)
            assert emu.control("garble 3") == "ok the next 3 frames sent are garbled"
            assert emu.control("draw 2") == "ok drew 2c 2d"
            got = [next_message(events) for _ in range(2)]
            assert [(m.draw_index, str(m.card)) for m in got] == [(0, "2c"), (1, "2d")]  # none lost, none doubled
            assert shoe.status().cards == 50  # a garbled reply is asked again
            assert "garble_next=0" in emu.control("status")


def test_lose_drops_the_next_event_and_only_the_status_tells(tmp_path):
    with EmulatorProcess("shoe", "--tcp", "127.0.0.1:0", "--seed", "4", log_path=tmp_path / "shoe.log") as emu:
        events: queue.Queue = queue.Queue()
        with CardShoe.open(emu.url, config=FAST, events=events) as shoe:
            assert emu.control("load red ordered").startswith("ok")
            assert next_message(events) == ShoeLoaded(BackColour.RED)
            assert emu.control("lose 1") == "ok the next 1 events are lost"
            assert emu.control("draw 2") == "ok drew 2c 2d"
            nxt = next_message(events)
            assert isinstance(nxt, CardDrawn) and (nxt.draw_index, str(nxt.card)) == (1, "2d")  # draw 0 lost
            assert shoe.status().cards == 50  # two cards out, one reported


def test_a_power_cycle_mid_shuffle_loses_the_shuffle_and_the_deck_stays_unverified(tmp_path):
    with EmulatorProcess("shuffler", "--tcp", "127.0.0.1:0", "--seed", "4", log_path=tmp_path / "s.log") as emu:
        events: queue.Queue = queue.Queue()
        with Shuffler.open(emu.url, config=FAST, events=events) as shuffler:
            assert emu.control("insert red").startswith("ok")
            assert isinstance(next_message(events), DeckInserted)
            assert emu.control("hold-shuffle").startswith("ok")
            shuffler.shuffle()
            st = shuffler.status()
            assert (st.state, st.cards) == (DeviceState.SHUFFLING, 52)
            with pytest.raises(RequestRefused) as info:
                shuffler.shuffle()
            assert info.value.code is NakCode.BUSY
            assert emu.control("reboot").startswith("ok rebooted")
            assert shuffler.status().state is DeviceState.HAS_DECK  # the shuffle was lost; the deck is in
            assert emu.control("finish") == "error no shuffle in progress"
            assert emu.control("take") == "error no verified deck to deliver"
            shuffler.shuffle()  # the host asks again
            verified = next_message(events)
            assert isinstance(verified, DeckVerified) and verified.complete


def test_shuffle_faults_are_shuffler_commands_and_link_faults_both_kinds():
    shoe = StandaloneEmulator(EmulatorOptions("shoe", tcp=("127.0.0.1", 0), seed=1))
    try:
        for line in ("hold-shuffle", "finish"):
            with pytest.raises(ControlError, match="is a shuffler command"):
                shoe.command(line)
        assert shoe.command("lose 2") == "the next 2 events are lost"
        with pytest.raises(ControlError, match="not a count"):
            shoe.command("garble many")
        assert "lose_next=2" in shoe.command("status")
    finally:
        shoe.stop()


def test_the_bench_dealer_carries_the_deck_from_the_shuffler_to_the_shoe_and_back(tmp_path):
    """``tablectl run --shuffler-control --shoe-control``'s dealer (ControlDealer): the deck it
    loads is the deck the shuffler handed over, the cards it draws are that deck's first, and the
    round's cards with the stub go back into the shuffler as the whole deck."""
    from table.hil.control_dealer import ControlDealer

    def address(emu: EmulatorProcess) -> tuple[str, int]:
        host, port = emu.extra[0].split()[1].rsplit(":", 1)
        return host, int(port)

    with EmulatorProcess("shuffler", "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0", "--seed", "8",
                         log_path=tmp_path / "shf.log") as shf, \
            EmulatorProcess("shoe", "--tcp", "127.0.0.1:0", "--control", "127.0.0.1:0", "--seed", "9",
                            log_path=tmp_path / "shoe.log") as shoe_emu:
        events: queue.Queue = queue.Queue()
        dealer = ControlDealer(address(shf), address(shoe_emu))
        with Shuffler.open(shf.url, config=FAST, events=events) as shuffler:
            dealer.insert_deck(BackColour.RED)
            assert isinstance(next_message(events), DeckInserted)
            shuffler.shuffle()
            assert next_message(events).complete
            dealer.take_from_shuffler()
            assert next_message(events) == DeckDelivered(BackColour.RED)
            taken = list(dealer.in_hand)
            assert len(taken) == 52 and {b for _, b in taken} == {BackColour.RED}
            dealer.load_shoe(BackColour.RED)
            for _ in range(6):
                dealer.draw_card()
            assert dealer.on_layout == taken[:6]  # the shoe dealt the shuffler's deck, in its order
            dealer.collect()
            assert sorted(c.index for c, _ in dealer.racked[BackColour.RED]) == list(range(52))
            dealer.insert_deck(BackColour.RED)  # the same 52 cards go back in
            assert next_message(events) == DeckInserted(BackColour.RED)
            assert "cards=52" in shf.control("status") and not dealer.racked
