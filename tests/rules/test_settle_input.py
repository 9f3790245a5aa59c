"""``tablectl settle`` on hostile or mistaken input: a settlement or one line and exit 1
(issue 19), never a traceback; and the output says what each seat did."""

from __future__ import annotations

import json
import string

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from table.cli import main
from table.rules.bank import settle_bank
from table.rules.settlement import Round, SettlementError, Tables, Wagers, settle_round, settle_seat

SEAT = {"seat": 1, "cards": ["Kc", "Kd", "3h"], "decision": "play", "wagers": {"ante": 500}}
PA = {
    "profile": "pennsylvania",
    "paytables": {"ante_bonus": "pa-649a12b-1", "pair_plus": "example-pp-649a12d",
                  "six_card_bonus": "example-6cb-649a12f-e", "progressive": "example-prog-649a12e"},
    "progressive_meter_cents": 2_000_000,
    "dealer": ["Qs", "7d", "2h"],
    "seats": [SEAT],
}
CA = {
    "profile": "california",
    "player_dealer_seat": 8,
    "bank_cents": 5_000,
    "paytables": {"ante_bonus": "pa-649a12b-1"},
    "dealer": ["Qs", "7d", "2h"],
    "seats": [SEAT],
}


def settle_text(tmp_path, text: str):
    """Run ``tablectl settle`` on ``text``; returns (exit code, stdout, stderr)."""
    f = tmp_path / "round.json"
    f.write_text(text)
    r = CliRunner().invoke(main, ["settle", str(f)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r.exit_code, r.stdout, r.stderr


def refused(tmp_path, doc, match: str) -> str:
    code, out, err = settle_text(tmp_path, doc if isinstance(doc, str) else json.dumps(doc))
    assert code == 1, (out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    message = lines[0].replace(str(tmp_path), "DIR")  # the test's own name is in the path
    assert match.lower() in message.lower(), lines[0]
    return lines[0]


def with_seat(base, **seat):
    return {**base, "seats": [{**SEAT, **seat}]}


@pytest.mark.parametrize("value", ["8", [8], {"seat": 8}, 1.5, 8.0, True, 0, 9, -1])
def test_player_dealer_seat_must_be_a_seat_number(tmp_path, value):
    refused(tmp_path, {**CA, "player_dealer_seat": value}, "player_dealer_seat")


def test_an_integer_of_thousands_of_digits(tmp_path):
    line = refused(tmp_path, json.dumps(CA).replace('"bank_cents": 5000', '"bank_cents": ' + "9" * 5000), "digits")
    assert len(line) < 200


def test_deeply_nested_json(tmp_path):
    refused(tmp_path, '{"comment": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested")
    refused(tmp_path, "[" * 100_000, "nested")


@pytest.mark.parametrize("seat", [0, -3, 9, 1.0, "1", True])
def test_seat_numbers_are_1_to_8(tmp_path, seat):
    refused(tmp_path, with_seat(PA, seat=seat), "seat")


def test_an_ante_of_ten_to_the_thirty_cents(tmp_path):
    refused(tmp_path, with_seat(PA, wagers={"ante": 10 ** 30}), "limit")
    refused(tmp_path, {**PA, "progressive_meter_cents": 10 ** 30}, "limit")
    refused(tmp_path, {**CA, "bank_cents": 10 ** 30}, "limit")


@pytest.mark.parametrize("wager", ["six_card", "progressive"])
def test_six_card_bonus_or_progressive_without_an_ante(tmp_path, wager):
    doc = with_seat(PA, wagers={"ante": 0, wager: 500})
    del doc["seats"][0]["decision"]
    refused(tmp_path, doc, "needs an ante")
    with pytest.raises(SettlementError, match="needs an ante"):
        Wagers(ante=0, **{wager: 500})


def test_bank_keys_under_the_pennsylvania_profile(tmp_path):
    refused(tmp_path, {**PA, "player_dealer_seat": 8}, "house")
    refused(tmp_path, {**PA, "bank_cents": 1000}, "house")
    # --profile pennsylvania over a California file: refused the same way
    f = tmp_path / "ca.json"
    f.write_text(json.dumps(CA))
    r = CliRunner().invoke(main, ["settle", str(f), "--profile", "pennsylvania"])
    assert r.exit_code == 1 and "banked by the house" in r.stderr


@pytest.mark.parametrize("decision", ["fold", "play"])
def test_a_decision_with_no_ante_is_refused_not_ignored(tmp_path, decision):
    # Before: "fold" was ignored and the Pair Plus paid.
    refused(tmp_path, with_seat(PA, decision=decision, wagers={"ante": 0, "pair_plus": 500}), "no ante")


def test_duplicated_keys_are_refused(tmp_path):
    text = json.dumps(PA).replace('"dealer":', '"dealer": ["As", "Ad", "Ah"], "dealer":')
    refused(tmp_path, text, "twice")
    text = json.dumps(PA).replace('"ante": 500', '"ante": 500, "ante": 100000')
    refused(tmp_path, text, "twice")


def test_no_wager_at_all_is_refused(tmp_path):
    refused(tmp_path, with_seat(PA, wagers={}), "no wager")


@pytest.mark.parametrize("text", ["NaN", '{"bank_cents": Infinity}', "\ufeff{}", "", "\x00"])
def test_other_bad_json(tmp_path, text):
    refused(tmp_path, text, "round.json")


def test_a_fifo_is_refused_without_hanging(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo.json")
    r = CliRunner().invoke(main, ["settle", str(tmp_path / "fifo.json")])
    assert r.exit_code == 1 and "not a regular file" in r.stderr


def test_a_paytable_that_is_a_device_is_refused(tmp_path):
    # by its name (a paytable file's name ends in .toml), before anything is read
    refused(tmp_path, {**PA, "paytables": {**PA["paytables"], "ante_bonus": "/dev/zero"}}, "ends in .toml")
    # and, named as one, as what it is: a device or a FIFO would hang a reader
    import os

    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.toml")
    for name in ("zero.toml", "fifo.toml"):
        refused(tmp_path, {**PA, "paytables": {**PA["paytables"], "ante_bonus": name}}, "not a regular file")


# ---- output


def settled(tmp_path, doc) -> dict:
    code, out, err = settle_text(tmp_path, json.dumps(doc))
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("wagers", [{"ante": 0, "pair_plus": 500}])
def test_a_pair_plus_only_seat_has_no_decision(tmp_path, wagers):
    doc = with_seat(PA, wagers=wagers)
    del doc["seats"][0]["decision"]
    seat = settled(tmp_path, doc)["seats"][0]
    assert seat["decision"] is None  # not "fold": it folded nothing
    assert [w["wager"] for w in seat["wagers"]] == ["pair_plus"]
    assert seat["wagers"][0]["outcome"] == "win"  # a pair of kings


def test_a_progressive_meter_below_the_wager_is_not_a_win_that_loses(tmp_path):
    doc = with_seat(PA, cards=["As", "Ks", "Qs"], wagers={"ante": 500, "progressive": 100})
    doc["dealer"] = ["Jd", "8c", "2h"]
    doc["progressive_meter_cents"] = 50  # 100% of a 50-cent meter for a 100-cent wager
    refused(tmp_path, doc, "meter")
    doc["progressive_meter_cents"] = 100_000
    prog = [w for w in settled(tmp_path, doc)["seats"][0]["wagers"] if w["wager"] == "progressive"][0]
    assert (prog["outcome"], prog["amount"]) == ("win", 100_000 - 100)


def test_every_outcome_agrees_with_its_amount(tmp_path):
    out = settled(tmp_path, {**PA, "dealer": ["Jd", "8c", "2h"], "seats": [
        {**SEAT, "seat": 1, "cards": ["As", "Ks", "Qs"], "wagers": {"ante": 500, "pair_plus": 5, "progressive": 100,
                                                                     "six_card": 100}},
        {"seat": 2, "cards": ["9h", "9c", "4d"], "wagers": {"pair_plus": 500}},
    ]})
    for seat in out["seats"]:
        for w in seat["wagers"]:
            sign = (w["amount"] > 0) - (w["amount"] < 0)
            assert {"win": 1, "lose": -1, "push": 0, "returned": 0}[w["outcome"]] == sign, w


# ---- the California bank: covered by the hand as wagered, before any decision


def _bank_for(decision: str, bank: int):
    tables = Tables.load("pa-649a12b-1")
    # 7-5-3 loses to the dealer's qualifying Q-7-2 when played.
    st = settle_seat(Wagers(ante=500), decision, "7c 5d 3h".split(), "Qs 7d 2h".split(), tables)
    return settle_bank(8, bank, [(1, st)]).seat(1)


def test_california_bank_coverage_does_not_depend_on_the_decision():
    # Issue 19: with 500 in the bank, the same losing hand cost 500 folded (covered)
    # and nothing played (not covered). The hand puts ante + play (1000) at risk
    # whatever the seat then decides: 500 covers neither.
    fold, play = _bank_for("fold", 500), _bank_for("play", 500)
    assert (fold.covered, fold.net) == (False, 0)
    assert (play.covered, play.net) == (False, 0)
    # A bank of 1000 covers the hand either way: the fold loses the ante, the play both.
    fold, play = _bank_for("fold", 1000), _bank_for("play", 1000)
    assert (fold.covered, fold.net) == (True, -500)
    assert (play.covered, play.net) == (True, -1000)


def test_california_bank_counts_the_bonus_bets():
    tables = Tables.load("pa-649a12b-1", pair_plus="example-pp-649a12d")
    st = settle_seat(Wagers(ante=500, pair_plus=200), "fold", "7c 5d 3h".split(), "Qs 7d 2h".split(), tables)
    assert not settle_bank(8, 1_100, [(1, st)]).seat(1).covered
    assert settle_bank(8, 1_200, [(1, st)]).seat(1).net == -700


def test_california_round_file_both_decisions(tmp_path):
    for decision, net in (("fold", -500), ("play", -1000)):
        doc = {**CA, "bank_cents": 1000, "seats": [{**SEAT, "cards": ["7c", "5d", "3h"], "decision": decision}]}
        seat = settled(tmp_path, doc)["seats"][0]
        assert seat["net_after_bank"] == net
        doc["bank_cents"] = 999
        assert settled(tmp_path, doc)["seats"][0]["net_after_bank"] == 0


# ---- the property: any JSON document


json_scalars = st.none() | st.booleans() | st.integers(-10 ** 40, 10 ** 40) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(string.printable, max_size=12)
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=4) |
                           st.dictionaries(st.text(string.ascii_lowercase + "_", max_size=10), kids, max_size=4),
                           max_leaves=20)
CARDS = [r + s for r in "23456789TJQKA" for s in "cdhs"]


def _near_valid():
    """Round documents close to valid, each key replaced or removed at random."""
    seat = st.fixed_dictionaries({
        "seat": st.integers(-1, 10) | json_values,
        "cards": st.lists(st.sampled_from(CARDS), min_size=0, max_size=4) | json_values,
        "wagers": st.fixed_dictionaries({}, optional={
            k: st.integers(-5, 10 ** 9) | json_values for k in ("ante", "pair_plus", "six_card", "progressive")}),
    }, optional={"decision": st.sampled_from(["play", "fold", "PLAY", None]) | json_values})
    return st.fixed_dictionaries({
        "paytables": st.fixed_dictionaries({"ante_bonus": st.sampled_from(["pa-649a12b-1", "nope"])}, optional={
            "pair_plus": st.just("example-pp-649a12d"), "six_card_bonus": st.just("example-6cb-649a12f-e"),
            "progressive": st.just("example-prog-649a12e")}) | json_values,
        "dealer": st.lists(st.sampled_from(CARDS), min_size=3, max_size=3) | json_values,
        "seats": st.lists(seat, min_size=0, max_size=9) | json_values,
    }, optional={
        "profile": st.sampled_from(["pennsylvania", "california", "california-literal", "x"]) | json_values,
        "player_dealer_seat": st.integers(-1, 10) | json_values,
        "bank_cents": st.integers(-1, 10 ** 6) | json_values,
        "progressive_meter_cents": st.integers(-1, 10 ** 8) | json_values,
        "round_id": json_values,
    })


def _paths(doc, prefix=()):
    """Every key path of a document: ("seats", 0, "wagers", "ante"), ..."""
    out = [prefix] if prefix else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out += _paths(v, prefix + (k,))
    return out


def _replaced(doc, path, value, delete):
    doc = json.loads(json.dumps(doc))
    holder = doc
    for k in path[:-1]:
        holder = holder[k]
    if delete and isinstance(holder, dict):
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return doc


PA_SEATS = {**PA, "dealer": ["Jd", "8c", "2h"], "seats": [
    {**SEAT, "seat": 1, "wagers": {"ante": 500, "pair_plus": 100, "six_card": 100, "progressive": 100}},
    {"seat": 2, "cards": ["9h", "9c", "4d"], "wagers": {"pair_plus": 500}},
    {"seat": 4, "cards": ["As", "Ks", "Qs"], "decision": "fold", "wagers": {"ante": 100, "progressive": 100}},
]}
CA_SEATS = {**CA, "seats": PA_SEATS["seats"][:2], "dealer": PA_SEATS["dealer"]}
BASES = [PA, PA_SEATS, CA, CA_SEATS, CA, CA_SEATS]  # the bank keys exist only in the California ones


@st.composite
def near_valid(draw):
    """A valid round with one value replaced by any JSON value, or one key removed."""
    base = draw(st.sampled_from(BASES))
    path = draw(st.sampled_from(_paths(base)))
    return _replaced(base, path, draw(json_values), draw(st.booleans()))


def settlement_or_one_line(tmp_path, doc):
    code, out, err = settle_text(tmp_path, json.dumps(doc))
    assert "Traceback" not in out + err
    if code == 0:
        result = json.loads(out)
        assert isinstance(result["seats"], list) and isinstance(result["total_net"], int)
    else:
        assert code == 1, (code, err)  # documented in `tablectl settle --help`
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), err


PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@PROPERTY
@given(doc=json_values | _near_valid())
def test_any_json_document_gives_a_settlement_or_one_line(tmp_path, doc):
    settlement_or_one_line(tmp_path, doc)


@PROPERTY
@given(doc=near_valid())
def test_any_one_value_of_a_valid_round_replaced(tmp_path, doc):
    # Where tracebacks hid: one key of an otherwise good round given another type.
    settlement_or_one_line(tmp_path, doc)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_any_text_gives_one_line(tmp_path, text):
    code, out, err = settle_text(tmp_path, text)
    assert code in (0, 1) and len(err.strip().splitlines()) <= 1 and "Traceback" not in err


def test_from_dict_raises_only_settlement_errors():
    # the library entry point keeps the same contract as the command
    for bad in ([], {"paytables": []}, {**PA, "seats": [{"seat": 1}]}):
        with pytest.raises(SettlementError):
            Round.from_dict(bad)
    assert settle_round(Round.from_dict(PA))["seats"][0]["decision"] == "play"


@pytest.mark.parametrize("seat", ["8", [8], 1.5, True, 0])
def test_settle_bank_refuses_what_is_not_a_seat(seat):
    from table.rules.bank import BankError

    with pytest.raises(BankError):
        settle_bank(seat, 1000, [(1, 500)])
    with pytest.raises(BankError):
        settle_bank(8, 1000, [(seat, 500)])


def test_wagers_from_code_with_a_huge_integer():
    with pytest.raises(SettlementError, match="digits"):
        Wagers(ante=10 ** 5000)
