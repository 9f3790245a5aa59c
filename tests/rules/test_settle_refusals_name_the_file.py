"""Every refusal of `tablectl settle` names the round file, then the key, then the rule
(docs/settlement.md), also for the paytable problems found while settling (issue 25); and
the forms a round file may take that the docs promise, accepted, while a paytable named by a
path that is no .toml file is refused before anything is read."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from table.cli import main
from table.rules.paytables import PaytableError
from table.rules.settlement import Round, SettlementError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "round-california.json"
SHIPPED_PP = ROOT / "table" / "rules" / "paytables" / "example-pp-649a12d.toml"


def _round(tmp_path: Path, change, example: Path = EXAMPLE) -> Path:
    data = json.loads(example.read_text())
    change(data)
    path = tmp_path / "round.json"
    path.write_text(json.dumps(data))
    return path


def _seat1(key, cents=100):
    return lambda d: d["seats"][0]["wagers"].__setitem__(key, cents)


def _no_bank(d):
    d.pop("bank_cents")
    d.pop("player_dealer_seat")


def _pair_plus(value):
    return lambda d: d["paytables"].__setitem__("pair_plus", value)


SIDE_RULE = "a side wager is paid only from its filed paytable, 58 Pa. Code 649a.12"
#: case: (change to the example round, key named, rule named, the error type settle's code raises)
CASES = {
    "unknown paytable name": (lambda d: d["paytables"].__setitem__("ante_bonus", "no-such-table"),
                              "paytables.ante_bonus: unknown paytable 'no-such-table'",
                              "a paytable is a shipped name or a .toml file", PaytableError),
    "pair plus paytable missing": (lambda d: d["paytables"].pop("pair_plus"),
                                   "seat 2: wagers.pair_plus: a pair_plus wager was placed but the round names no "
                                   "paytables.pair_plus", SIDE_RULE, SettlementError),
    "six card paytable missing": (_seat1("six_card"), "seat 1: wagers.six_card: ", SIDE_RULE, SettlementError),
    "progressive paytable missing": (_seat1("progressive"), "seat 1: wagers.progressive: ", SIDE_RULE,
                                     SettlementError),
    "california without a bank": (_no_bank, "player_dealer_seat and bank_cents: missing",
                                  "a player-dealer banks the game (California standards of play", SettlementError),
    "california without its bank_cents": (lambda d: d.pop("bank_cents"), "bank_cents: missing",
                                          "a player-dealer banks the game (California standards of play",
                                          SettlementError),
    "absolute paytable path": (_pair_plus("/nonexistent/pp.toml"),
                               "paytables.pair_plus: '/nonexistent/pp.toml': cannot read",
                               "a paytable file is a readable regular file", SettlementError),
    "absolute path to no .toml": (_pair_plus("/etc/passwd"), "paytables.pair_plus: '/etc/passwd'",
                                  "a paytable file's name ends in .toml", SettlementError),
    "relative path to no .toml": (_pair_plus("tables/pp.txt"), "paytables.pair_plus: 'tables/pp.txt'",
                                  "a paytable file's name ends in .toml", SettlementError),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refusal_names_the_round_file_the_key_and_the_rule(tmp_path, case):
    change, key, rule, error = CASES[case]
    path = _round(tmp_path, change)
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 1 and r.stdout == ""
    line = r.output.strip().splitlines()[-1]
    assert line.startswith(f"Error: {path}: ") and key in line and rule in line, line
    # The same refusal from code, typed (both are ValueErrors), naming the key and the rule.
    with pytest.raises(error) as e:
        from table.rules.settlement import settle_round

        settle_round(Round.from_file(path))
    assert isinstance(e.value, ValueError) and key in str(e.value) and rule in str(e.value)


def test_a_bad_paytable_file_names_the_round_file_and_the_paytable_file(tmp_path):
    bad = tmp_path / "pp.toml"
    bad.write_text("this is = = not toml\n")
    path = _round(tmp_path, _pair_plus(str(bad)))
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 1 and f"Error: {path}: paytables.pair_plus: " in r.output and str(bad) in r.output


def test_a_path_that_is_no_toml_file_is_never_read(tmp_path):
    """A FIFO named as a paytable would hang a reader; one without .toml is refused by name."""
    fifo = tmp_path / "pp"
    os.mkfifo(fifo)
    path = _round(tmp_path, _pair_plus(str(fifo)))
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 1 and "a paytable file's name ends in .toml" in r.output


def _settled(tmp_path: Path, change, name: str) -> dict:
    folder = tmp_path / name
    folder.mkdir()
    path = _round(folder, change)
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_what_the_docs_accept_settles_as_its_plain_form(tmp_path):
    """docs/settlement.md's Input table: a paytable file by absolute path (read as given) or
    relative to the round file; a decision in any case with spaces around it; card letters
    in any case. Each settles exactly as the plain form does."""
    plain = _settled(tmp_path, lambda d: None, "plain")
    (tmp_path / "tables").mkdir()
    shutil.copy(SHIPPED_PP, tmp_path / "tables" / "pp.toml")
    absolute = _settled(tmp_path, _pair_plus(str(tmp_path / "tables" / "pp.toml")), "absolute")
    relative = _settled(tmp_path, _pair_plus("../tables/pp.toml"), "relative")
    for other in (absolute, relative):
        assert other["seats"] == plain["seats"] and other["total_net"] == plain["total_net"]

    def shouted(d):
        d["seats"][0]["decision"], d["seats"][3]["decision"] = "PLAY", " Fold\t"
        d["dealer"] = ["jC", "8D", "3h"]
        d["seats"][1]["cards"] = ["kc", "KD", "5H"]

    loud = _settled(tmp_path, shouted, "loud")
    assert loud["seats"] == plain["seats"] and loud["dealer"] == plain["dealer"]
    assert [s["decision"] for s in loud["seats"]] == ["play", "play", "play", "fold"]


@pytest.mark.parametrize("decision", ["pla y", "plays", "yes", "PLAY!", "\u0440lay"])  # the last: a Cyrillic "р"
def test_a_decision_that_is_not_play_or_fold_is_refused(tmp_path, decision):
    path = _round(tmp_path, lambda d: d["seats"][0].__setitem__("decision", decision))
    r = CliRunner().invoke(main, ["settle", str(path)])
    assert r.exit_code == 1 and f"Error: {path}: " in r.output and "decision must be 'play' or 'fold'" in r.output
