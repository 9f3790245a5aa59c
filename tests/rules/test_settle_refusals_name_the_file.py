"""Every refusal of `tablectl settle` names the round file, then the key, then the rule
(docs/settlement.md), also for the paytable problems found while settling (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from table.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "round-california.json"


def _round(tmp_path: Path, change) -> Path:
    data = json.loads(EXAMPLE.read_text())
    change(data)
    path = tmp_path / "round.json"
    path.write_text(json.dumps(data))
    return path


def _seat1(key, cents=100):
    return lambda d: d["seats"][0]["wagers"].__setitem__(key, cents)


def _no_bank(d):
    d.pop("bank_cents")
    d.pop("player_dealer_seat")


CASES = {
    "unknown paytable name": (lambda d: d["paytables"].__setitem__("ante_bonus", "no-such-table"),
                              "paytables.ante_bonus: unknown paytable 'no-such-table'"),
    "pair plus paytable missing": (lambda d: d["paytables"].pop("pair_plus"),
                                   "seat 2: wagers.pair_plus: a pair_plus wager was placed but the round names no "
                                   "paytables.pair_plus"),
    "six card paytable missing": (_seat1("six_card"), "seat 1: wagers.six_card: "),
    "progressive paytable missing": (_seat1("progressive"), "seat 1: wagers.progressive: "),
    "california without a bank": (_no_bank, "profile california: a player-dealer banks the game (California "
                                            "standards of play"),
    "absolute paytable path": (lambda d: d["paytables"].__setitem__("pair_plus", "/nonexistent/pp.toml"),
                               "paytables.pair_plus: '/nonexistent/pp.toml': cannot read"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refusal_names_the_round_file_the_key_and_the_rule(tmp_path, case):
    change, words = CASES[case]
    path = _round(tmp_path, change)
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 1
    line = r.output.strip().splitlines()[-1]
    assert line.startswith(f"Error: {path}: ") and words in line, line
    if "649a.12" in line or "seat" in words:
        assert "649a.12" in line


def test_a_bad_paytable_file_names_the_round_file_and_the_paytable_file(tmp_path):
    bad = tmp_path / "pp.toml"
    bad.write_text("this is = = not toml\n")
    path = _round(tmp_path, lambda d: d["paytables"].__setitem__("pair_plus", str(bad)))
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 1 and f"Error: {path}: paytables.pair_plus: " in r.output and str(bad) in r.output
