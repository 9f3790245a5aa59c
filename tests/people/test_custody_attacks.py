"""The hold on the physical cards, tried by the dealer's hands on the standalone emulators'
control lines, as the attack on a real table was (docs/deck-custody.md, "The shoe's count
is a custody fact"): cards of the colour in play put on top of the shoe before the deal
(``slip CARD red``), and a card of the deal put back into the shoe. Each holds the round
as foreign cards; a supervisor can only void it, and nothing is settled.
The same attacks on the in-process table, with the fix reverted, are in
``tests/test_attacks_custody.py``."""

from __future__ import annotations

import pytest

from bench import waiting
from conftest import root_only

pytestmark = [root_only, pytest.mark.timeout(240)]


def void_it(bench, st: dict, reason: str) -> None:
    """A supervisor voids the held round (a broken rule: no release); play goes on."""
    rid = st["held"]["round_id"]
    assert not waiting(st, "release_hold")
    reply = bench.supervisor("S-1").command("void", reason=reason)
    assert reply["ok"] is True and reply["round_id"] == rid, reply
    if st["void_needs_second_supervisor"]:  # the decisions were final: a second supervisor confirms
        bench.crew.run_until(lambda st: waiting(st, "confirm_void"), what="a second supervisor asked", act=False)
        second = bench.supervisor("S-2").command("confirm_void")
        assert second["ok"] is True, second
    bench.crew.run_until(lambda st: st["held"] is None, what="the void carried out")
    bench.dealer.wait_event(lambda e: e["type"] == "round_voided" and e["round_id"] == rid, "round_voided")


def test_six_cards_put_on_top_of_the_shoe_before_the_deal_hold_the_round(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    st = crew.run_until(lambda st: waiting(st, "close_bets"), what="round 2 open for bets")
    colour = hands.at("shoe").colour
    for face in ("5d", "4c", "Kh", "3d", "2c", "Ah"):  # the first draw reads Ah
        hands.shoe.do(f"slip {face} {colour}")
    assert "cards=58" in hands.shoe.do("status")
    drawn = hands.drawn
    st = crew.run_until(lambda st: st["held"] is not None and waiting(st, "void"),
                        what="the round held before the first card")
    assert hands.drawn == drawn  # not one card asked for
    held = st["held"]
    assert held["cause"] == "custody" and "foreign_card" in held["reason"] and "58 cards" in held["reason"]
    assert held["settled"] is False and st["rounds_played"] == 1
    void_it(bench, st, "cards added on top of the shoe")
    assert bench.crew.last["rounds_played"] == 1  # the held round was never settled


def test_a_card_of_the_deal_put_back_into_the_shoe_holds_the_round_before_the_reveal(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    # The deal is complete and the seats are deciding: the dealer puts the last card read back.
    st = crew.run_until(lambda st: waiting(st, "decide"), what="the seats deciding in round 2")
    colour = hands.at("shoe").colour
    hands.shoe.do(f"slip {hands.layout[-1]} {colour}")
    st = crew.run_until(lambda st: st["held"] is not None and waiting(st, "void"),
                        what="the round held before the reveal")
    held = st["held"]
    assert held["cause"] == "custody" and "foreign_card" in held["reason"] and "at the end of the deal" in held["reason"]
    assert held["settled"] is False and st["rounds_played"] == 1
    void_it(bench, st, "a card put back into the shoe")
