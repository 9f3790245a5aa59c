"""A dealer's slip at the devices between rounds (issue 25's review: the table stopped, exit 3,
with two supervisors signed in): a deck put back into the shuffler after it was taken out, or
the shoe unloaded and loaded again with the same deck (the shoe sends no event for an unload,
so the second load looks like a deck loaded twice). The custody rule broken is journaled and
stands as an incident; the table does not stop: every deck not in play goes round again
through the shuffler, counted before it is dealt, and play goes on, also after a restart."""

from __future__ import annotations

from test_procedures import waiting


def incidents(st: dict) -> list[str]:
    return [a["text"] for a in st["alarms"] if a["kind"] == "incident"]


def test_a_deck_taken_out_of_the_shuffler_and_put_back_is_counted_again(bench):
    crew, hands = bench.crew, bench.hands
    crew.run_until(lambda st: waiting(st, "load_shoe"), what="the first deck to load")
    d = hands.at("out")
    bench.shuffler.do(f"insert {d.colour}")  # back into the shuffler instead of into the shoe
    d.place = "shuffler"
    st = crew.run_until(lambda st: any("counted again in the shuffler" in t for t in incidents(st)),
                        what="the slip said as an incident", act=False)
    assert any("out of order" in t for t in incidents(st)), incidents(st)
    st = crew.run_until(lambda st: st["rounds_played"] >= 2, what="play going on after the slip", timeout_s=90)
    assert st["violations"] >= 1
    bench.restart()  # the recount is journaled: a restart resumes from it
    crew.play_rounds(1)


def test_the_shoe_loaded_again_with_its_deck_between_rounds_is_counted_again(bench):
    crew, hands = bench.crew, bench.hands
    crew.play_rounds(1)
    # Between rounds: the next deck is in the shoe, the table asks for the other in the shuffler.
    crew.run_until(lambda st: waiting(st, "insert_deck") and hands.at("shoe") is not None,
                   what="the shoe loaded and the other deck asked for")
    d = hands.at("shoe")
    bench.shoe.do("unload")
    bench.shoe.do(f"load {d.colour}")  # the same deck back in
    st = crew.run_until(lambda st: any("counted again in the shuffler" in t for t in incidents(st)),
                        what="the slip said as an incident")
    st = crew.run_until(lambda st: st["rounds_played"] >= 3, what="play going on after the slip", timeout_s=90)
    # A supervisor acknowledges the incident; the table has not stopped.
    ack = bench.supervisor("S-1").command("acknowledge_incident", note="dealer reloaded the shoe; decks recounted")
    assert ack["ok"], ack
