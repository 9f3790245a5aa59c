"""Issue 15 point 4: every human procedure, end to end, by people, over TCP and over ptys.

A real table (``tablectl run``, not ``--simulate``) against standalone emulator
processes; the dealer on the control socket (as the ``nobody`` account in the
dealer group), supervisors signed in over HTTP, the hands on the emulators'
control sockets. Nothing reaches into the controller or the emulators' state:
see ``bench.py``. Each procedure ends as ``docs/console.md`` ("Procedures") says.
"""

from __future__ import annotations

import time

import pytest

from bench import RECONNECT_WAIT_S, PhysicalDeck, waiting
from conftest import root_only

pytestmark = [root_only, pytest.mark.timeout(240)]


def words(text: str) -> str:
    """Text as one line of words (the terminal wraps long lines)."""
    return " ".join(text.split())


def deck_place(st: dict, deck_id: str) -> str | None:
    return next((d["place"] for d in st["decks"] if d["deck_id"] == deck_id), None)


def test_a_deck_missing_a_card_is_replaced_and_the_replacement_dealt(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    hands.deck("A").mods = ("-As",)  # the ace of spades of deck A went missing with the round's cards
    st = crew.run_until(lambda st: waiting(st, "register_deck"), what="a supervisor asked to register a replacement")
    # The short deck was counted, put out of service, and the dealer took it out when prompted.
    assert deck_place(st, "A") == "out_of_service"
    assert hands.deck("A").place == "removed"
    assert "take_from_shuffler red" in hands.done
    w = st["waiting_for"]
    assert w["role"] == "supervisor" and "replacement for deck A (red)" in w["what"]
    assert any(a["kind"] == "out_of_service" for a in st["alarms"])
    # The dealer may not register it (the front door refuses; the core would too).
    refused = bench.dealer.request("register_deck", deck_id="A2")
    assert refused["ok"] is False and refused["code"] == "forbidden"
    s1 = bench.supervisor("S-1")
    wrong = s1.command("register_deck", deck_id="A2", colour="blue")
    assert wrong["ok"] is False and "red backs" in wrong["error"]
    reply = s1.command("register_deck", deck_id="A2")
    assert reply["ok"] is True and reply["deck_id"] == "A2" and reply["replaces"] == "A", reply
    hands.bring(PhysicalDeck("A2", "red"))  # the replacement comes from the pit's stock
    st = crew.run_until(lambda st: (st["round"] or {}).get("deck_id") == "A2", what="a round dealt from deck A2")
    assert not any(a["kind"] == "out_of_service" for a in st["alarms"])
    played = st["rounds_played"]
    st = crew.run_until(lambda st: st["rounds_played"] > played, what="the A2 round finished")
    assert deck_place(st, "A") is None  # deck A is off the table's books: A2 replaced it
    bench.table.wait_output("deck A2 (red)")


def test_an_unreadable_card_is_entered_by_a_supervisor(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)

    def before_draw(index: int) -> None:
        if index == 3:  # seat 1's second card
            hands.shoe.do("unreadable 1")

    hands.on_draw = before_draw
    st = crew.run_until(lambda st: waiting(st, "confirm_card"), what="a supervisor asked to enter the card")
    hands.on_draw = None
    w = st["waiting_for"]
    assert w["role"] == "supervisor" and w["draw_index"] == 3 and "unreadable card 4" in w["what"]
    face = hands.layout[3]  # what the supervisor reads off the layout
    refused = bench.dealer.request("confirm_card", card=face)
    assert refused["ok"] is False and refused["code"] == "forbidden"
    s1 = bench.supervisor("S-1")
    bad = s1.command("confirm_card", card="Zz")
    assert bad["ok"] is False
    reply = s1.command("confirm_card", card=face)
    assert reply["ok"] is True and reply["card"] == face, reply
    played = st["rounds_played"]
    crew.run_until(lambda st: st["rounds_played"] > played, what="the round with the entered card finished")
    dealt = hands.collected[-1]
    assert dealt[3] == face
    bench.table.wait_output(f"s1 {dealt[0]} {face} {dealt[6]}")  # seat 1's hand, with the card as entered


def test_a_foreign_card_holds_the_round_and_a_supervisor_voids_it(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)

    def before_draw(index: int) -> None:
        if index == 4:
            hands.shoe.do("slip Kd")  # a card of the other back colour slipped in on top

    hands.on_draw = before_draw
    st = crew.run_until(lambda st: st["held"] is not None and waiting(st, "void"),
                        what="the round held for the foreign card, a supervisor asked to void it")
    hands.on_draw = None
    held = st["held"]
    assert "foreign" in held["reason"] and held["settled"] is False
    rid = held["round_id"]
    assert not waiting(st, "release_hold")  # a broken rule: void only
    s1 = bench.supervisor("S-1")
    release = s1.command("release_hold", reason="looks fine")
    assert release["ok"] is False and "not expected now" in release["error"]
    refused = bench.dealer.request("void", reason="foreign card")
    assert refused["ok"] is False and refused["code"] == "forbidden"
    reply = s1.command("void", reason="foreign card: misdeal")
    assert reply["ok"] is True and reply["round_id"] == rid and "voided now" in reply["what"], reply
    st = crew.run_until(lambda st: st["held"] is None, what="the void carried out")
    bench.dealer.wait_event(lambda e: e["type"] == "round_voided" and e["round_id"] == rid, "round_voided")
    played = st["rounds_played"]
    crew.run_until(lambda st: st["rounds_played"] > played, what="the next round dealt after the void")
    bench.table.wait_output(f"round {rid} VOIDED by a supervisor: foreign card: misdeal; every wager returned")


def test_the_shoe_unplugged_mid_deal_holds_the_round_which_is_voided_and_play_goes_on(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    pulled: list[float] = []

    def before_draw(index: int) -> None:
        if index == 4:
            hands.shoe.do("unplug")  # the shoe's cable is pulled; the dealer goes on drawing card 5
            pulled.append(time.monotonic())

    hands.on_draw = before_draw
    st = crew.run_until(lambda st: st["held"] is not None, what="the round held while the shoe is away")
    held_after = time.monotonic() - pulled[0]
    hands.on_draw = None
    assert held_after < RECONNECT_WAIT_S + 3.0, f"held {held_after:.1f} s after the shoe went away"
    assert st["links"]["shoe"]["up"] is False
    assert st["held"]["cause"] == "device" and "shoe" in st["held"]["reason"]
    st = crew.run_until(lambda st: waiting(st, "void"), what="a supervisor asked to void or release it")
    assert waiting(st, "release_hold")  # a device's hold may also be released, once it is back
    rid = st["held"]["round_id"]
    s1 = bench.supervisor("S-1")
    reply = s1.command("void", reason="shoe unplugged mid-deal")
    assert reply["ok"] is True and reply["round_id"] == rid, reply
    st = crew.run_until(lambda st: st["held"] is None, what="the void carried out with the shoe away")
    bench.table.wait_output(f"round {rid} VOIDED by a supervisor: shoe unplugged mid-deal")
    # The table moves the decks it can, then says it waits for the shoe, and deals nothing.
    st = crew.run_until(lambda st: waiting(st, "reconnect"), what="the table waiting for the shoe")
    w = st["waiting_for"]
    assert w["role"] == "device" and "the shoe to be connected again" in w["what"]
    assert any(a["kind"] == "device_down" for a in st["alarms"]) and st["round"] is None
    # the terminal says it too: the shoe's fault is waited out (docs/device-faults.md), never an exit
    bench.table.wait_output("the table waits for the shoe to answer again", err=True)
    played = st["rounds_played"]
    hands.shoe.do("plug")
    st = crew.run_until(lambda st: st["rounds_played"] > played, what="the next round dealt after the shoe is back")
    assert st["links"]["shoe"]["up"] is True
    assert not any(a["kind"] == "device_down" for a in st["alarms"])
    # The card drawn while the shoe was away reached the table once it was back: journaled
    # with the voided round, dealt to nobody, not an incident.
    late = bench.dealer.wait_event(lambda e: e["type"] == "card_dealt" and e["round_id"] == rid
                                   and e["data"]["draw_index"] == 4, "the late card's card_dealt")
    assert late["data"]["to"] is None, late
    assert not [e for e in bench.dealer.events if e["type"] == "incident"]


def test_a_restart_with_the_journal_mid_round_holds_it_until_a_supervisor_releases_it(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    st = crew.run_until(lambda st: waiting(st, "draw_card") and st["waiting_for"]["draw_index"] == 4,
                        what="the fifth card of round 2 prompted")
    rid = st["round"]["round_id"]
    bench.dealer.close()
    bench.table.kill()   # the table PC loses power mid-deal
    hands.draw()         # the dealer, who does not know, draws the fifth card
    bench.table.start()  # the same journal
    bench.dealer.connect()
    st = crew.run_until(lambda st: waiting(st, "release_hold"), what="the round held after the restart")
    assert st["held"]["round_id"] == rid and st["held"]["cause"] == "restart" and not st["held"]["settled"]
    assert waiting(st, "void") and st["waiting_for"]["role"] == "supervisor"
    refused = bench.dealer.request("release_hold")
    assert refused["ok"] is False and refused["code"] == "forbidden"
    s2 = bench.supervisor("S-2")
    reply = s2.command("release_hold", reason="power restored; the deal goes on")
    assert reply["ok"] is True and reply["round_id"] == rid and reply["released"] is True, reply
    st = crew.run_until(lambda st: st["rounds_played"] >= 2, what="the released round finished")
    assert st["held"] is None
    dealt = hands.collected[-1]
    seat1 = [dealt[0], dealt[3], dealt[6]]  # the fifth card (seat 2's second) was drawn while the table was down
    # the released round's result on the new run's terminal, a line at a time: its last seat's line, then all of it
    out = bench.table.wait_output(f"s2 {dealt[1]} {dealt[4]} {dealt[7]}")
    assert "round 2 " in " ".join(out.split()) and f"s1 {' '.join(seat1)}" in out


@pytest.mark.parametrize("rounds_before", [1, 2], ids=["red-in-shuffler", "blue-in-shuffler"])
def test_a_restart_without_the_journal_while_the_shuffler_holds_a_verified_deck(bench, rounds_before):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(rounds_before)
    st = crew.run_until(lambda st: waiting(st, "close_bets"), what="the next round open for bets")
    in_shuffler = next(d for d in st["decks"] if d["place"] == "verified")["back_colour"]
    in_shoe = next(d for d in st["decks"] if d["place"] == "in_shoe")["back_colour"]
    bench.restart(journal=False)  # the journal is lost with the table PC
    # The table first says whose word it waits for, then what it found, as incidents.
    st = crew.run_until(lambda st: waiting(st, "device_record"), what="the table waiting for the shuffler's record",
                        act=False)
    assert st["waiting_for"]["colour"] == in_shuffler and st["waiting_for"]["role"] == "device"
    st = crew.run_until(lambda st: waiting(st, "collect"), what="the dealer asked to empty the shoe")
    w = st["waiting_for"]
    assert w["colour"] == in_shoe and f"take the {in_shoe} deck out of the shoe" in w["what"]
    texts = [a["text"] for a in st["alarms"] if a["kind"] == "incident"]
    assert any(f"the shuffler holds the {in_shuffler} deck from before the restart: it is counted again" in t
               for t in texts), texts
    assert any(f"the shoe holds a {in_shoe} deck the table has no record of loading" in t for t in texts), texts
    bench.table.wait_output(f"incident: the shuffler holds the {in_shuffler} deck from before the restart", err=True)
    bench.table.wait_output(f"incident: the shoe holds a {in_shoe} deck", err=True)
    # The table goes on: the shuffler's deck is counted and dealt, the shoe's goes round again.
    st = crew.run_until(lambda st: st["round"] is not None, what="a round opened after the restart")
    assert st["round"]["back_colour"] == in_shuffler  # the deck counted again is the one dealt
    crew.run_until(lambda st: st["rounds_played"] >= 1, what="a round dealt after the restart")
    assert hands.at("shuffler").colour == in_shoe  # the shoe's deck went round: it is being counted
    s1 = bench.supervisor("S-1")
    refused = bench.dealer.request("acknowledge_incident")
    assert refused["ok"] is False and refused["code"] == "forbidden"
    ack = s1.command("acknowledge_incident", note="journal lost with the disk; decks checked")
    assert ack["ok"] is True and len(ack["acknowledged"]) == 2, ack
    st = crew.play_rounds(1)
    assert not [a for a in st["alarms"] if a["kind"] == "incident"]


def test_a_void_before_the_decisions_needs_one_supervisor(bench):
    crew = bench.crew
    crew.play_rounds(1)
    st = crew.run_until(lambda st: waiting(st, "draw_card") and st["waiting_for"]["draw_index"] == 5,
                        what="the sixth card of round 2 prompted")
    rid = st["round"]["round_id"]
    assert st["void_needs_second_supervisor"] is False
    reply = bench.supervisor("S-1").command("void", reason="dealer exposed a card")
    assert reply["ok"] is True and reply["round_id"] == rid and reply["what"] == "the round is voided now", reply
    # the crew draws no card from here (act=False): a table that waited for the sixth card before
    # carrying out the void would never get there, so the void is done without a card (no wall-time bound)
    st = crew.run_until(lambda st: st["round"] is None and st["held"] is None, what="the round voided", act=False)
    bench.table.wait_output(f"round {rid} VOIDED by a supervisor: dealer exposed a card; every wager returned")
    voided = bench.dealer.wait_event(lambda e: e["type"] == "round_voided" and e["round_id"] == rid,
                                     "round_voided")
    assert voided["data"]["supervisor"] == "S-1"
    assert voided["data"]["returned_cents"] == {"1": 1000, "2": 1000}
    crew.play_rounds(1)


def test_a_void_after_the_decisions_needs_a_second_supervisor(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    st = crew.run_until(lambda st: waiting(st, "decide") and st["waiting_for"]["seat"] == 2,
                        what="seat 2 to decide in round 2")
    hands.shoe.do("unplug")  # the shoe's cable comes out while the seats decide
    st = crew.run_until(lambda st: st["held"] is not None and waiting(st, "void"),
                        what="the round held after the decisions")
    rid = st["held"]["round_id"]
    assert st["void_needs_second_supervisor"] is True
    s1, s2 = bench.supervisor("S-1"), bench.supervisor("S-2")
    first = s1.command("void", reason="shoe failed after the decisions")
    assert first["ok"] is True and first["what"] == "a second supervisor must confirm the void (the decisions are final)"
    st = crew.run_until(lambda st: waiting(st, "confirm_void"), what="the table asking for a second supervisor",
                        act=False)
    assert st["held"]["void_requested_by"] == "S-1" and "a second supervisor" in st["waiting_for"]["what"]
    same = s1.command("confirm_void")
    assert same["ok"] is False and "not the one who asked it" in same["error"] and same["http"] == 409, same
    dealer = bench.dealer.request("confirm_void")
    assert dealer["ok"] is False and dealer["code"] == "forbidden"
    st = bench.dealer.status()
    assert st["held"] is not None and waiting(st, "confirm_void")  # still held: nothing voided yet
    second = s2.command("confirm_void")
    assert second["ok"] is True and second["voided"] is True and second["supervisors"] == ["S-1", "S-2"], second
    st = crew.run_until(lambda st: st["held"] is None, what="the void carried out", act=False)
    bench.table.wait_output(f"round {rid} VOIDED by a supervisor")
    hands.shoe.do("plug")
    played = st["rounds_played"]
    crew.run_until(lambda st: st["rounds_played"] > played, what="the next round dealt")


def test_a_void_after_settlement_is_refused_and_the_results_stand(bench):
    crew = bench.crew
    crew.play_rounds(1)
    st = crew.run_until(lambda st: waiting(st, "confirm_collect"), what="round 2 settled, waiting for the collect")
    number = st["round"]["number"]
    reply = bench.supervisor("S-1").command("void", reason="player complains")
    assert reply["ok"] is False and reply["http"] == 409, reply
    assert f"round {number} is settled: its results stand" in reply["error"]  # as people count rounds
    played = st["rounds_played"]
    st = crew.run_until(lambda st: st["rounds_played"] > played, what="the settled round collected")
    assert not [e for e in bench.dealer.events if e["type"] == "round_voided"]
    bench.table.wait_output("round 2 deck B (blue)")


def test_a_dealer_cannot_void_register_a_deck_or_enter_a_card_on_either_front_door(bench):
    crew = bench.crew
    st = crew.run_until(lambda st: waiting(st, "close_bets"), what="round 1 open for bets")
    web = bench.web_dealer()
    for action, args in [("void", {"reason": "misdeal"}), ("register_deck", {"deck_id": "A2"}),
                         ("confirm_card", {"card": "Qs"}), ("release_hold", {}), ("confirm_void", {})]:
        on_socket = bench.dealer.request(action, **args)
        assert on_socket["ok"] is False and on_socket["code"] == "forbidden", on_socket
        over_http = web.command(action, **args)
        assert over_http["ok"] is False and over_http["code"] == "forbidden" and over_http["http"] == 403
    # A dealer over HTTP deals as the socket's dealer does: the round goes on.
    closed = web.command("close_bets")
    assert closed["ok"] is True and closed["round_id"] == st["round"]["round_id"]
    crew.play_rounds(1)
    slowest = max(bench.dealer.replies.slowest_s, web.replies.slowest_s)
    assert slowest < 1.0, f"a reply took {slowest:.2f} s"
