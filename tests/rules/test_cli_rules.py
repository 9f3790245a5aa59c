"""tablectl hand / settle / paytable, including the documented example rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from table.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_hand_prints_category_and_key():
    r = run("hand", "Ah", "2c", "3d")
    assert r.exit_code == 0
    assert "straight" in r.output and "(3, 3, 0, 0)" in r.output


def test_hand_vs():
    r = run("hand", "Qc", "6d", "4h", "--vs", "Qh", "6s", "3c")
    assert r.exit_code == 0 and "result: first hand wins" in r.output
    r = run("hand", "Qc", "6d", "4h", "--vs", "Qh", "6s", "4c", "--json")
    assert json.loads(r.output)["result"] == "tie"
    r = run("hand", "2c", "3d", "5h", "--vs", "Jh", "Ts", "8c", "--json")
    out = json.loads(r.output)
    assert out["result"] == "second hand wins" and out["vs"]["qualifies_as_dealer"] is False


def test_hand_profile():
    r = run("hand", "Ah", "2h", "3h", "--profile", "california-literal", "--json")
    assert json.loads(r.output)["hand"]["category"] == "flush"
    r = run("hand", "As", "Ks", "Qs", "--profile", "california", "--json")
    assert json.loads(r.output)["hand"]["category"] == "mini royal"


@pytest.mark.parametrize("args", [("As", "Kd", "Zz"), ("As", "As", "Kd"), ("As", "Kd")])
def test_hand_errors(args):
    r = CliRunner().invoke(main, ["hand", *args])
    assert r.exit_code in (1, 2) and "Error" in r.output


def settle(name, *extra):
    r = run("settle", str(EXAMPLES / name), *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_settle_pennsylvania_example():
    out = settle("round-pennsylvania.json")
    nets = {s["seat"]: s["net"] for s in out["seats"]}
    assert nets == {1: 1500, 2: 26_400, 4: -1600, 5: 0, 6: 1000}
    assert out["total_net"] == sum(nets.values())
    seat4 = {w["wager"]: w for w in out["seats"][2]["wagers"]}
    assert seat4["pair_plus"]["rule"].startswith("649a.11(b)(1)")  # forfeited by the fold
    assert seat4["six_card"]["rule"].startswith("649a.12(f)")  # settled on its hand, not forfeited


def test_settle_dealer_not_qualifying_example():
    out = settle("round-dealer-not-qualifying.json")
    assert out["dealer"]["qualifies"] is False
    s1, s3, s7 = out["seats"]
    bonus = [w for w in s1["wagers"] if w["wager"] == "ante_bonus"][0]
    assert (bonus["line"], bonus["amount"]) == ("mini_royal_spades", 25_000)
    assert [w["outcome"] for w in s3["wagers"]] == ["win", "push"]
    assert s7["decision"] == "fold" and s7["net"] == -500 + 2000


def test_settle_california_example():
    out = settle("round-california.json")
    after = {s["seat"]: s["net_after_bank"] for s in out["seats"]}
    # A bank of 3000 covers seat 1 (1000 at risk) and seat 2 (1500); seats 3 and 5 no
    # longer fit: their wagers are returned, win or lose (CA standards of play).
    assert after == {1: 1000, 2: 1000, 3: 0, 5: 0}
    assert out["bank"]["player_dealer_net"] == -2000


def test_settle_profile_override_needs_bank():
    r = CliRunner().invoke(main, ["settle", str(EXAMPLES / "round-pennsylvania.json"), "--profile", "california"])
    assert r.exit_code == 1 and "player-dealer" in r.output


def test_settle_bad_file(tmp_path):
    f = tmp_path / "r.json"
    f.write_text('{"paytables": {"ante_bonus": "bad.toml"}, "dealer": ["As","Kd","Qh"], "seats": []}')
    (tmp_path / "bad.toml").write_text('name = "x"\nkind = "ante_bonus"\ncitation = "c"\n[pays]\nstraight = "one"\n')
    r = CliRunner().invoke(main, ["settle", str(f)])
    assert r.exit_code == 1 and "bad.toml:5:" in r.output


def test_paytable_list():
    r = run("paytable", "list")
    assert r.exit_code == 0 and "pa-649a12b-1" in r.output and "expires 2028-08-23" in r.output
    names = [p["name"] for p in json.loads(run("paytable", "list", "--json").output)]
    assert "pa-649b4b-1" in names and "example-pp-649a12d" in names


def test_paytable_report_json():
    r = run("paytable", "report", "pa-649a12b-1", "example-prog-649a12e", "--json")
    out = json.loads(r.output)
    a, p = out["paytables"]
    assert a["house_edge_per_ante"] == {"fraction": "686689/20358520", "percent": "3.3730%"}
    assert a["strategy"]["play_weakest"].startswith("Q-6-4")
    assert p["break_even_meter_wagers"] == "20600"


def test_paytable_report_text_and_unknown():
    r = run("paytable", "report", "example-pp-649a12d")
    assert "house edge: 2.3167%  (128/5525)" in r.output
    r = CliRunner().invoke(main, ["paytable", "report", "nope"])
    assert r.exit_code == 1 and "unknown paytable" in r.output
