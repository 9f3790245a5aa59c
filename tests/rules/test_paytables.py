"""Paytable data files, the loader, its typed errors and line resolution."""

from __future__ import annotations

import pytest

from protocols.cards import parse_cards
from table.rules.hands import evaluate, six_card_hand
from table.rules.paytables import (
    KINDS,
    PaytableError,
    Payout,
    list_paytables,
    load_paytable,
    parse_paytable,
)
from table.rules.profiles import CALIFORNIA

ANTE_BONUS = {
    # name: (mini royal spades, mini royal other, straight flush, three of a kind, straight)
    "pa-649a12b-1": (None, None, 5, 4, 1),
    "pa-649a12b-2": (None, None, 5, 3, 1),
    "pa-649a12b-3": (None, None, 4, 3, 1),
    "pa-649a12c-1": (50, 5, 4, 3, 1),
    "pa-649a12c-2": (50, 50, 8, 6, 1),
    "pa-649a12c-3": (50, 10, 6, 3, 1),
    "pa-649b4b-1": (None, None, 6, 5, 1),
}


@pytest.mark.parametrize("name, odds", sorted(ANTE_BONUS.items()))
def test_shipped_ante_bonus_tables(name, odds):
    pt = load_paytable(name)
    assert pt.kind == "ante_bonus"
    assert "649" in pt.citation and pt.section
    got = tuple(pt.odds(k) for k in ("mini_royal_spades", "mini_royal", "straight_flush", "three_of_a_kind", "straight"))
    assert got == odds
    assert set(pt.lines) <= {"mini_royal_spades", "mini_royal", "straight_flush", "three_of_a_kind", "straight"}


def test_every_shipped_table_has_citation_and_kind():
    tables = list_paytables()
    assert {p.kind for p in tables} == set(KINDS)
    assert len({p.name for p in tables}) == len(tables)
    for p in tables:
        assert p.citation.strip()
        assert p.name.startswith(("pa-", "example-"))
        if p.name.startswith("example-"):
            assert "EXAMPLE" in p.title
    assert [p.name for p in list_paytables("ante_bonus")] == sorted(ANTE_BONUS)


def test_649b_tables_carry_expiry():
    assert load_paytable("pa-649b4b-1").expires == "2028-08-23"
    assert load_paytable("pa-649b4b-1").label == "D"
    assert load_paytable("pa-649a12c-2").label == "B"


def test_unknown_name_lists_shipped():
    with pytest.raises(PaytableError, match="pa-649a12b-1"):
        load_paytable("no-such-table")


GOOD = """\
name = "op-pp"
kind = "pair_plus"
citation = "operator filing 2026-01"

[pays]
straight_flush = 40
pair = 1
"""


def test_operator_file_by_path(tmp_path):
    f = tmp_path / "op.toml"
    f.write_text(GOOD)
    pt = load_paytable(str(f))
    assert pt.name == "op-pp" and pt.odds("straight_flush") == 40
    assert load_paytable("op.toml", base_dir=tmp_path).name == "op-pp"


def _err(tmp_path, text):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(PaytableError) as e:
        load_paytable(f)
    assert isinstance(e.value, ValueError)
    assert e.value.path == str(f)
    assert str(f) in str(e.value)
    return e.value


def test_syntax_error_names_file_and_line(tmp_path):
    e = _err(tmp_path, GOOD.replace("pair = 1", "pair = = 1"))
    assert e.line == 7 and "bad.toml:7:" in str(e)


def test_unknown_line_names_its_line(tmp_path):
    e = _err(tmp_path, GOOD.replace("pair = 1", "pair = 1\nfive_aces = 9"))
    assert e.line == 8 and "five_aces" in str(e)


def test_bad_odds_named(tmp_path):
    assert _err(tmp_path, GOOD.replace("pair = 1", "pair = 0")).line == 7
    assert _err(tmp_path, GOOD.replace("pair = 1", "pair = 1.5")).line == 7
    assert _err(tmp_path, GOOD.replace("pair = 1", "pair = true")).line == 7
    assert _err(tmp_path, GOOD.replace("pair = 1", "pair = { meter_percent = 100 }")).line == 7


def test_unknown_kind_and_missing_citation(tmp_path):
    assert _err(tmp_path, GOOD.replace('"pair_plus"', '"bingo"')).line == 2
    e = _err(tmp_path, GOOD.replace('citation = "operator filing 2026-01"\n', ""))
    assert "citation" in str(e)
    assert _err(tmp_path, GOOD.replace('citation = "operator filing 2026-01"', 'citation = " "')).line == 3


@pytest.mark.parametrize(
    "kind, line, odds, ok",
    [
        ("pair_plus", "mini_royal", 39, False),
        ("pair_plus", "mini_royal", 40, True),
        ("pair_plus", "mini_royal_spades", 25, False),
        ("ante_bonus", "mini_royal", 4, False),
        ("ante_bonus", "mini_royal", 5, True),
    ],
)
def test_mini_royal_floors_649a12g(tmp_path, kind, line, odds, ok):
    text = f'name = "x"\nkind = "{kind}"\ncitation = "c"\n\n[pays]\nstraight_flush = 5\n{line} = {odds}\n'
    if ok:
        assert parse_paytable(text).odds(line) == odds
    else:
        e = _err(tmp_path, text)
        assert e.line == 7 and "649a.12(g)" in str(e)


def test_section_figures_checked(tmp_path):
    text = GOOD.replace('[pays]', 'section = "649a.12(d)"\n\n[pays]').replace("straight_flush = 40", "straight_flush = 45")
    e = _err(tmp_path, text)
    assert "649a.12(d)" in str(e) and "35 to 1 or 40 to 1" in str(e) and e.line == 8


def test_payout_arithmetic_in_cents():
    assert Payout("to", 5).net_cents(500) == 2500
    assert Payout("for", 500).net_cents(100) == 49_900
    assert Payout("flat", 100_000_000).net_cents(500) == 100_000_000
    assert Payout("meter", 100).net_cents(100, meter_cents=1_234_567) == 1_234_467
    with pytest.raises(PaytableError):
        Payout("meter", 100).net_cents(100)


def test_line_for_three_card_hands():
    b1, c2 = load_paytable("pa-649a12b-1"), load_paytable("pa-649a12c-2")
    akq_s = evaluate(parse_cards("As Ks Qs"))
    akq_h = evaluate(parse_cards("Ah Kh Qh"))
    assert b1.line_for(akq_s) == "straight_flush"  # no mini royal line listed
    assert c2.line_for(akq_s) == "mini_royal_spades"
    assert c2.line_for(akq_h) == "mini_royal"
    assert c2.line_for(evaluate(parse_cards("As Ks Qs"), CALIFORNIA)) == "mini_royal_spades"
    assert b1.line_for(evaluate(parse_cards("As Ks Qs"), CALIFORNIA)) == "straight_flush"
    assert b1.line_for(evaluate(parse_cards("9c 9d 9h"))) == "three_of_a_kind"
    assert b1.line_for(evaluate(parse_cards("9c Td Jh"))) == "straight"
    assert b1.line_for(evaluate(parse_cards("9c Tc 2c"))) is None
    pp = load_paytable("example-pp-649a12d")
    assert pp.line_for(evaluate(parse_cards("9c 9d 2c"))) == "pair"
    assert pp.line_for(evaluate(parse_cards("Ac 9d 2c"))) is None


def test_line_for_six_card_hands():
    e = load_paytable("example-6cb-649a12f-e")
    f = load_paytable("example-6cb-649b5b-f")
    diamonds = six_card_hand(parse_cards("9d Td Jd Qd Kd Ad"))
    hearts = six_card_hand(parse_cards("9h Th Jh Qh Kh Ah"))
    assert e.line_for(diamonds) == "six_card_royal_diamonds"
    assert e.line_for(hearts) == "six_card_royal"
    assert f.line_for(diamonds) == "six_card_royal"
    assert e.line_for(six_card_hand(parse_cards("Th Jh Qh Kh Ah 2c"))) == "royal_flush"
    assert e.line_for(six_card_hand(parse_cards("7c 7d 7h 2s 9c Kd"))) == "three_of_a_kind"
    assert e.line_for(six_card_hand(parse_cards("7c 7d 2h 2s 9c Kd"))) is None
    with pytest.raises(PaytableError):
        e.line_for(evaluate(parse_cards("As Ks Qs")))
