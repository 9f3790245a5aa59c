"""The people bench with a shoe on another wire protocol: the example driver package's emulator
(examples/ascii-shoe, docs/drivers.md) in the shoe's place, the SPEC shuffler's beside it. The
table, the dealer, the supervisors and the hands are the bench's own (``bench.py``)."""

from __future__ import annotations

import pytest

from bench import Bench, waiting
from conftest import root_only

pytestmark = [root_only, pytest.mark.timeout(240)]


@pytest.fixture(params=["tcp", "pty"])
def ascii_bench(request):
    b = Bench(request.param, shoe_driver="ascii-shoe")
    try:
        yield b
    finally:
        b.close()


def test_people_play_rounds_with_the_ascii_shoe_and_enter_an_unreadable_card(ascii_bench):
    bench = ascii_bench
    crew, hands = bench.crew, bench.hands
    st = crew.play_rounds(2)
    assert st["links"]["shoe"]["serial"] == "ASH-SIM-0001" and st["links"]["shoe"]["up"]

    def before_draw(index: int) -> None:
        if index == 2:
            hands.shoe.do("unreadable 1")

    hands.on_draw = before_draw
    st = crew.run_until(lambda st: waiting(st, "confirm_card"), what="a supervisor asked to enter the card")
    hands.on_draw = None
    assert st["waiting_for"]["draw_index"] == 2
    face = hands.layout[2]
    reply = bench.supervisor("S-1").command("confirm_card", card=face)
    assert reply["ok"] is True and reply["card"] == face, reply
    played = st["rounds_played"]
    crew.run_until(lambda st: st["rounds_played"] > played, what="the round with the entered card finished")
    assert hands.collected[-1][2] == face
