"""Nothing a long run keeps grows with the rounds (issue 18, "Flat memory"): the
run's results are streamed, the simulators' histories are bounded."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from protocols.cards import BackColour, Card
from protocols.messages import Echo
from simulators.devices import ShoeEmulator
from simulators.table import DRAWN_KEPT, SimulatedTable
from table.cli.run import RunResults, round_to_json


def fake_round(n: int, nets: tuple[int, ...]):
    seats = [SimpleNamespace(seat=i + 1, cards=[Card.from_index(i)], decision=SimpleNamespace(value="play"),
                             net_cents=net, settlement=SimpleNamespace(results=[])) for i, net in enumerate(nets)]
    return SimpleNamespace(number=n, round_id=f"r{n:05d}", deck_id="A", deck_colour=BackColour.RED,
                           dealer_hand=[Card.from_index(51)], dealer_qualifies=True, seats=seats,
                           reads=[SimpleNamespace(draw_index=0, card=Card.from_index(0), back_colour=BackColour.RED)])


def test_json_results_are_written_as_each_round_is_dealt_and_not_kept():
    out = io.StringIO()
    results = RunResults(2, True, out)
    r1, r2 = fake_round(1, (1000, -500)), fake_round(2, (-1000, 2000))
    results.add(r1)
    assert out.getvalue() == '{"rounds": [' + json.dumps(round_to_json(r1)), "round 1 is on stdout already"
    results.add(r2)
    assert not any(isinstance(v, SimpleNamespace) for v in vars(results).values()), "a round was kept"
    rest = {"cards_read": 2, "net_by_seat": results.net_by_seat}
    results.finish(rest)
    assert out.getvalue().endswith("}\n")
    doc = json.loads(out.getvalue())
    assert doc == {"rounds": [round_to_json(r1), round_to_json(r2)], **rest}
    # byte for byte what building the object whole gave
    assert out.getvalue() == json.dumps({"rounds": [round_to_json(r1), round_to_json(r2)], **rest}) + "\n"
    assert results.count == 2 and results.net_by_seat == {"1": 0, "2": 1500}


def test_json_output_with_no_round_is_still_one_object():
    out = io.StringIO()
    RunResults(1, True, out).finish({"cards_read": 0, "error": "no shoe"})
    assert json.loads(out.getvalue()) == {"rounds": [], "cards_read": 0, "error": "no shoe"}


def test_text_results_are_each_round_s_lines_as_it_is_dealt():
    from table.cli.run_output import round_lines

    out = io.StringIO()
    results = RunResults(1, False, out)
    rounds = [fake_round(n, (100,)) for n in range(1, 4)]
    for r in rounds:
        results.add(r)
        assert out.getvalue().splitlines()[-len(round_lines(r)):] == round_lines(r)
    assert out.getvalue().splitlines() == [line for r in rounds for line in round_lines(r)]
    assert results.count == 3 and results.net_by_seat == {"1": 300}


def test_the_virtual_dealer_s_ground_truth_and_the_emulator_s_request_log_are_bounded():
    with SimulatedTable() as sim:
        for i in range(DRAWN_KEPT + 10):
            sim.dealer.drawn.append(i)
        assert len(sim.dealer.drawn) == DRAWN_KEPT and sim.dealer.drawn[-1] == DRAWN_KEPT + 9
    with SimulatedTable(history=None) as sim:  # a bench checking every read keeps them all
        for i in range(DRAWN_KEPT + 10):
            sim.dealer.drawn.append(i)
        assert len(sim.dealer.drawn) == DRAWN_KEPT + 10


def test_the_emulator_remembers_only_its_last_requests():
    from firmware_bridge.link import Link
    from firmware_bridge.transport import SerialTransport
    from protocols.messages import DeviceKind, EchoReply
    from simulators.pty_port import PtyPort

    port = PtyPort()
    emu = ShoeEmulator(port, history=5).start()
    link = Link(SerialTransport(port.path), name="shoe")
    try:
        link.open()
        link.handshake(DeviceKind.SHOE)
        for i in range(8):
            assert link.request(Echo(bytes([i])), EchoReply) == EchoReply(bytes([i]))
    finally:
        link.close()
        emu.stop()
    echoes = [m.data for _, m in emu.executed if isinstance(m, Echo)]
    assert len(emu.executed) == 5 and echoes[-1] == bytes([7])
