"""What docs/settlement.md says of each wager's `outcome` and `amount` holds (issue 25): a
`win` pays a positive amount, a `lose` a negative one, a `push` or `returned` 0, with one
exception the docs name: a progressive line paying a share of the meter in place of the
wager is a `win` of 0 when the share equals the wager (the line hit and the meter is paid
out: a hit the progressive's accounting must see, not a tie), and a share below the wager
is refused as a meter reading that cannot be right."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from protocols.cards import Card
from table.cli import main
from table.rules.settlement import Outcome, SettlementError, Tables, Wagers, settle_seat

ROUND = {
    "profile": "pennsylvania",
    "paytables": {"ante_bonus": "pa-649a12b-1", "progressive": "example-prog-649a12e"},
    "dealer": ["Qd", "7d", "2h"],
    "seats": [{"seat": 1, "cards": ["As", "Ks", "Qs"], "decision": "play",
               "wagers": {"ante": 500, "progressive": 500}}],
}


def _settle(tmp_path: Path, meter: int):
    path = tmp_path / "round.json"
    path.write_text(json.dumps({**ROUND, "progressive_meter_cents": meter}))
    return path, CliRunner().invoke(main, ["settle", str(path)])


def test_a_meter_equal_to_the_wager_is_a_win_of_0_naming_its_line(tmp_path):
    _, r = _settle(tmp_path, 500)  # 100 % of a 500-cent meter, paid in place of a 500-cent wager
    assert r.exit_code == 0, r.output
    progressive = next(w for w in json.loads(r.stdout)["seats"][0]["wagers"] if w["wager"] == "progressive")
    assert progressive["outcome"] == "win" and progressive["amount"] == 0
    assert progressive["line"] == "mini_royal_spades" and progressive["payout"] == "100% of meter"
    _, r = _settle(tmp_path, 501)
    progressive = next(w for w in json.loads(r.stdout)["seats"][0]["wagers"] if w["wager"] == "progressive")
    assert (progressive["outcome"], progressive["amount"]) == ("win", 1)


def test_a_meter_below_the_wager_is_refused_naming_the_file_the_key_and_the_rule(tmp_path):
    path, r = _settle(tmp_path, 499)
    assert r.exit_code == 1 and r.stdout == ""
    line = r.output.strip().splitlines()[-1]
    assert line.startswith(f"Error: {path}: seat 1: progressive_meter_cents: ")
    assert "less than the 500-cent wager it is paid in place of" in line and "cannot be right" in line


TABLES = ("pa-649a12b-1", "example-pp-649a12d", "example-6cb-649a12f-e", "example-prog-649a12e")


@settings(max_examples=400, deadline=None)
@given(cards=st.permutations(range(52)), ante=st.sampled_from([0, 100, 500]),
       sides=st.tuples(*[st.sampled_from([0, 100, 500])] * 3), play=st.booleans(), over=st.integers(0, 2),
       royal=st.booleans())
def test_every_outcome_has_the_sign_the_docs_give_it(cards, ante, sides, play, over, royal):
    pair_plus, six_card, progressive = sides
    if not ante:
        six_card = progressive = 0  # they need an ante (649a.7)
        if not pair_plus:
            pair_plus = 100
    deck = [Card.from_index(i) for i in cards]
    if royal:  # the meter line's hand, half the time: A-K-Q of spades
        seat = [Card.parse(c) for c in ("As", "Ks", "Qs")]
        deck = [c for c in deck if c not in seat]
    else:
        seat, deck = deck[:3], deck[3:]
    dealer = deck[:3]
    meter = progressive + over  # a meter at, or just above, the wager: the edge the docs name
    tables = Tables.load(*TABLES, progressive_meter_cents=meter)
    try:
        s = settle_seat(Wagers(ante=ante, pair_plus=pair_plus, six_card=six_card, progressive=progressive),
                        ("play" if play else "fold") if ante else None, seat, dealer, tables)
    except SettlementError as e:  # only a meter share below its wager is refused
        assert "progressive_meter_cents" in str(e) and "cannot be right" in str(e)
        return
    for r in s.results:
        if r.outcome is Outcome.WIN:
            assert r.amount > 0 or (r.amount == 0 and r.wager == "progressive" and "meter" in (r.payout or "")
                                    and meter == r.stake), r
        elif r.outcome is Outcome.LOSE:
            assert r.amount < 0, r
        else:
            assert r.amount == 0, r
    assert s.net == sum(r.amount for r in s.results)
