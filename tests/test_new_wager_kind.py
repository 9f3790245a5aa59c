"""The worked example of docs/architecture.md ("A new wager"): a side bet described once.

A made-up "Bonus" kind, with a small paytable of its own, is registered the way the real
kinds are (one :func:`table.rules.kinds.register` call, before anything reads the table)
in a fresh interpreter, and nothing else is edited: the limits, the bet book, the config's
``[limits.bonus]`` and ``[paytables] bonus`` with their validation, the API schema, the
``tablectl run`` and ``tablectl report`` options, the terminal's ``b`` command, the simulated
players, the event stream's wagers, the journal's form of a seat's wagers and the screens'
data all take it. Its settlement is not part of the example: that is the rule a real kind
adds in ``table/rules/settlement.py`` (docs/architecture.md counts the files).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from table.rules import kinds

BONUS_PAYTABLE = """\
name = "test-bonus"
kind = "bonus"
title = "A made-up Bonus paytable for the worked example"
citation = "none: a test's made-up wager"

[pays]
three_of_a_kind = 20
straight = 5
"""

SCRIPT = r'''
import json, sys
from table.rules import kinds
kinds.register(kinds.WagerKind(
    key="bonus", label="Bonus", spot="Bonus", short="Bon", prefix="bo", paytable_slot="bonus",
    needs_ante=True, route=False, default_limit=(100, 2500, 100), fixed_option="bonus-cents", fixed_default=200,
    describe="the Bonus in cents (needs an ante)", settled_by="(a real kind names its function)",
    rule="a test's made-up wager", example_dollars=2))

from click.testing import CliRunner
import jsonschema
from table.bets import DEFAULT_LIMITS, BetBook, BetRefused, Limit, TableLimits, offered_kinds
from table.config import ConfigError, parse_config
from table.console import _check_bet_args
from table.events import _every_wager
from table.interfaces import api_schema
from table.interfaces.terminal import KEYS_HELP, parse_bet_args
from table.players import SimulatedPlayers
from table.rules.settlement import Tables
from table.rules.wagers import SettlementError, Wagers
from table.cli import main

paytable = sys.argv[1]
out = {}
out["default_limit"] = DEFAULT_LIMITS.of("bonus").to_dict()
tables = Tables.load("pa-649a12b-1", bonus=paytable)
out["paytable"] = [tables.slot("bonus").name, tables.slot("bonus").kind, list(tables.slot("bonus").lines)]
out["offered"] = list(offered_kinds(tables))
out["offered_without"] = list(offered_kinds(Tables.load("pa-649a12b-1")))
book = BetBook(TableLimits(bonus=Limit(200, 1000, 100)), 3, offered=offered_kinds(tables))
w = book.place(1, ante=500, bonus=300)
out["placed"] = w.to_record()
out["journal_form"] = {str(s): x.to_record() for s, x in book.wagers.items()}
refusals = {}
for seat, amounts in ((2, {"bonus": 300}), (2, {"ante": 500, "bonus": 1100}), (2, {"ante": 500, "bonus": 150}),
                      (2, {"ante": 500, "bonus": 250})):
    try:
        book.place(seat, **amounts)
    except BetRefused as exc:
        refusals[json.dumps(amounts)] = [exc.code, exc.wager, exc.limit, str(exc)]
out["refusals"] = refusals
plain = BetBook(offered=offered_kinds(Tables.load("pa-649a12b-1")))
try:
    plain.place(1, ante=500, bonus=300)
except BetRefused as exc:
    out["not_offered"] = [exc.code, exc.wager, exc.rule]
try:
    Wagers(bonus=100)
except SettlementError as exc:
    out["wagers_need_ante"] = str(exc)
out["status_bets"] = book.to_dict()
out["apply"] = book.apply({"seat": 3, "ante": 500, "bonus": 200})
out["stream"] = _every_wager({"1": {"ante": 500}})

minimal = ('[table]\nid = "t1"\nseats = 3\n[devices.shuffler]\nurl = "/dev/threecard/shuffler"\n'
           '[devices.shoe]\nurl = "/dev/threecard/shoe"\n')
cfg = parse_config(minimal + f'[paytables]\nbonus = "{paytable}"\n[limits.bonus]\nminimum_cents = 300\n'
                   'maximum_cents = 600\n')
out["config_limit"] = cfg.limits.table_limits().of("bonus").to_dict()
out["config_tables"] = cfg.load_tables().slot("bonus").name
problems = {}
for bad in ('[limits.bonus]\nminimum_cents = 300\nmaximum_cents = 200\n', '[limits.bonus]\nminimum_cents = 300\n',
            '[paytables]\nbonus = "pa-649a12b-1"\n', '[limits.bonsu]\nminimum_cents = 300\nmaximum_cents = 600\n'):
    try:
        parse_config(minimal + bad)
    except ConfigError as exc:
        problems[bad] = [[p.key, p.line, p.message] for p in exc.problems]
out["config_problems"] = problems

place = next(a for a in api_schema.COMMANDS if a.name == "place_bets")
out["api_args"] = {k: v.get("description") for k, v in place.args.items() if k == "bonus"}
out["reply_wager_enum"] = api_schema.reply_schema()["properties"]["wager"]["enum"]
api = {}
for name, req in (("good", {"action": "place_bets", "seat": 1, "ante": 500, "bonus": 200}),
                  ("negative", {"action": "place_bets", "seat": 1, "bonus": -1}),
                  ("unknown", {"action": "place_bets", "seat": 1, "bonsu": 200})):
    try:
        jsonschema.validate(req, place.args_schema())
        api[name] = "valid"
    except jsonschema.ValidationError as exc:
        api[name] = exc.validator
out["api_requests"] = api
_check_bet_args({"seat": 1, "ante": 500, "bonus": 200})
try:
    _check_bet_args({"seat": 1, "bonus": -1})
except Exception as exc:
    out["bet_args_refused"] = str(exc)

out["terminal"] = parse_bet_args(["3", "a5", "bo2.50"])
out["help"] = [line for line in KEYS_HELP.splitlines() if line.strip().startswith("b SEAT a")]
run_help = CliRunner().invoke(main, ["run", "--help"], terminal_width=200).output
report_help = CliRunner().invoke(main, ["report", "--help"], terminal_width=200).output
out["run_options"] = [w for w in ("--bonus ", "--bonus-cents") if w in run_help]
out["report_options"] = [w for w in ("--bonus ",) if w in report_help]
players = SimulatedPlayers(7, seats=6, side_kinds=("bonus",))
out["players_bonus"] = any(w.amount("bonus") for _ in range(40) for w in players.next_round().values())
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def bonus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The worked example run once in a fresh interpreter: what each derived part made of the
    registered "Bonus" kind."""
    folder = tmp_path_factory.mktemp("bonus")
    paytable = folder / "test-bonus.toml"
    paytable.write_text(BONUS_PAYTABLE)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(paytable)], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_kinds_table_lists_the_kinds_of_649a_in_order() -> None:
    assert kinds.keys() == ("ante", "pair_plus", "six_card", "progressive")
    assert [k.paytable_slot for k in kinds.side_kinds()] == ["pair_plus", "six_card_bonus", "progressive"]
    assert [k.key for k in kinds.kinds() if k.needs_ante] == ["six_card", "progressive"]
    assert [k.key for k in kinds.kinds() if k.route] == ["ante", "pair_plus"]


def test_no_kind_joins_once_the_table_was_read() -> None:
    kinds.keys()
    late = kinds.WagerKind(key="late", label="late", spot="Late", short="L", prefix="lt", paytable_slot="late",
                           needs_ante=True, route=False, default_limit=(100, 100, 100), fixed_option="late-cents",
                           fixed_default=100, describe="", settled_by="", rule="")
    with pytest.raises(kinds.KindsError, match="after the kinds were read"):
        kinds.register(late)
    assert "late" not in kinds.keys()


@pytest.mark.parametrize("bad, why", [
    (dict(key="Bad Key"), "must be"), (dict(prefix="toolong"), "prefix"),
    (dict(default_limit=(150, 1000, 100)), "default_limit"), (dict(paytable_hand="four_card"), "paytable_hand"),
    (dict(key="play"), "may not be one of"), (dict(paytable_slot="ante_bonus"), "may not be one of"),
    (dict(key="same_as_last"), "may not be one of"),
])
def test_a_malformed_kind_is_refused_naming_the_field(bad: dict, why: str) -> None:
    fields = dict(key="bonus", label="Bonus", spot="Bonus", short="Bon", prefix="bo", paytable_slot="bonus",
                  needs_ante=True, route=False, default_limit=(100, 2500, 100), fixed_option="bonus-cents",
                  fixed_default=200, describe="", settled_by="", rule="")
    with pytest.raises(kinds.KindsError, match=why):
        kinds.WagerKind(**{**fields, **bad})


def test_limits_and_bet_book_take_the_new_kind(bonus: dict) -> None:
    assert bonus["default_limit"] == {"minimum_cents": 100, "maximum_cents": 2500, "chip_cents": 100}
    assert bonus["paytable"] == ["test-bonus", "bonus", ["three_of_a_kind", "straight"]]
    assert bonus["offered"] == ["ante", "bonus"] and bonus["offered_without"] == ["ante"]
    assert bonus["placed"] == {"ante": 500, "bonus": 300}
    assert bonus["journal_form"] == {"1": {"ante": 500, "bonus": 300}}
    refused = bonus["refusals"]
    assert refused['{"bonus": 300}'][:2] == ["needs_ante", "bonus"]
    assert "a Bonus wager needs an ante" in refused['{"bonus": 300}'][3]
    assert refused['{"ante": 500, "bonus": 1100}'][:3] == ["above_maximum", "bonus", 1000]
    assert refused['{"ante": 500, "bonus": 150}'][:3] == ["below_minimum", "bonus", 200]
    assert refused['{"ante": 500, "bonus": 250}'][:3] == ["not_chip_multiple", "bonus", 100]
    assert bonus["not_offered"] == ["not_offered", "bonus", "[paytables] bonus"]
    assert "needs an ante" in bonus["wagers_need_ante"]
    assert bonus["apply"] == {"ok": True, "seats": {"3": {"ante": 500, "pair_plus": 0, "six_card": 0,
                                                          "progressive": 0, "bonus": 200}}, "in_play": [1, 3]}


def test_config_sections_and_their_validation_take_the_new_kind(bonus: dict) -> None:
    assert bonus["config_limit"] == {"minimum_cents": 300, "maximum_cents": 600, "chip_cents": 100}
    assert bonus["config_tables"] == "test-bonus"
    problems = bonus["config_problems"]
    assert [p[0] for p in problems['[limits.bonus]\nminimum_cents = 300\nmaximum_cents = 200\n']] == \
        ["limits.bonus.maximum_cents"]
    assert [p[0] for p in problems['[limits.bonus]\nminimum_cents = 300\n']] == ["limits.bonus.maximum_cents"]
    wrong_kind = problems['[paytables]\nbonus = "pa-649a12b-1"\n']
    assert wrong_kind[0][0] == "paytables.bonus" and "is a ante_bonus paytable, not bonus" in wrong_kind[0][2]
    typo = problems['[limits.bonsu]\nminimum_cents = 300\nmaximum_cents = 600\n']
    assert typo[0][0] == "limits.bonsu" and "did you mean 'bonus'" in typo[0][2]


def test_the_front_doors_take_the_new_kind(bonus: dict) -> None:
    assert bonus["api_args"] == {"bonus": "the Bonus in cents (needs an ante)"}
    assert bonus["reply_wager_enum"] == ["ante", "pair_plus", "six_card", "progressive", "bonus"]
    assert bonus["api_requests"] == {"good": "valid", "negative": "minimum", "unknown": "additionalProperties"}
    assert bonus["bet_args_refused"] == "bonus must be a whole number of cents, 0 or more"
    assert bonus["terminal"] == {"seat": 3, "ante": 500, "bonus": 250}
    assert bonus["help"] == ["  b SEAT a25 pp10 6c5 pr1 bo2  seat SEAT's bets in dollars: ante, Pair Plus, "
                             "Six Card Bonus, progressive, Bonus (dealer)"]
    assert bonus["run_options"] == ["--bonus ", "--bonus-cents"]
    assert bonus["report_options"] == ["--bonus "]


def test_the_screens_and_the_stream_take_the_new_kind(bonus: dict) -> None:
    listed = bonus["status_bets"]["kinds"]
    assert [k["key"] for k in listed] == ["ante", "pair_plus", "six_card", "progressive", "bonus"]
    assert listed[-1] == {"key": "bonus", "label": "Bonus", "spot": "Bonus", "short": "Bon", "paytable_slot": "bonus",
                          "needs_ante": True, "route": False}
    assert bonus["status_bets"]["limits"]["bonus"] == {"minimum_cents": 200, "maximum_cents": 1000, "chip_cents": 100}
    assert bonus["stream"] == {"1": {"ante": 500, "pair_plus": 0, "six_card": 0, "progressive": 0, "bonus": 0}}
    assert bonus["players_bonus"] is True


def test_wagers_and_limits_made_from_the_table_keep_their_old_forms() -> None:
    import copy
    import pickle

    from table.bets import DEFAULT_LIMITS, Limit, TableLimits
    from table.rules.wagers import SettlementError, Wagers

    w = Wagers(2_500, 1_000, 0, 100)  # positional amounts follow the kinds' order
    assert (w.ante, w.pair_plus, w.six_card, w.progressive, w.total) == (2_500, 1_000, 0, 100, 3_600)
    assert w == Wagers(ante=2_500, pair_plus=1_000, progressive=100) and hash(w) == hash(Wagers(2_500, 1_000, 0, 100))
    assert w.to_record() == {"ante": 2_500, "pair_plus": 1_000, "progressive": 100}  # the journal's form
    assert w.amounts() == {"ante": 2_500, "pair_plus": 1_000, "six_card": 0, "progressive": 100}
    assert pickle.loads(pickle.dumps(w)) == w == copy.deepcopy(w)
    with pytest.raises(TypeError, match="unknown wager kind 'bonus'"):
        Wagers(500, bonus=100)
    with pytest.raises(SettlementError, match="a Six Card Bonus wager needs an ante"):
        Wagers(0, six_card=500)
    with pytest.raises(AttributeError):
        w.ante = 5  # type: ignore[misc]
    limits = TableLimits(ante=Limit(500, 50_000, 500))
    assert limits.ante == Limit(500, 50_000, 500) and limits.progressive == DEFAULT_LIMITS.progressive
    assert limits.to_dict()["progressive"] == {"minimum_cents": 100, "maximum_cents": 100, "chip_cents": 100}
    assert pickle.loads(pickle.dumps(limits)) == limits == copy.deepcopy(limits) != DEFAULT_LIMITS
    with pytest.raises(TypeError, match="unknown wager kind 'bonus'"):
        TableLimits(bonus=Limit(100, 100, 100))
