"""tablectl report on the journal of a real (simulated) run: every figure equals a
re-count of the journal's own entries made here with sqlite3 and json alone; the
expected win is the sum of the rounds' exact expectations; the statistical win
appears once people's slips and the drop are in the journal (issue 27)."""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import pytest

from protocols.cards import Card
from table.day.gaming_day import ENTRY_KIND, TableDay
from table.journal import Journal
from table.keys import load_private_key
from table.rules.expectation import round_expectation
from table.rules.settlement import SeatRound, Tables
from table.rules.wagers import Decision, Wagers
from tests.journal_rows import bodies_as_text, reader
from tests.test_e2e_run import tablectl

PAYTABLES = ["--ante-bonus", "pa-649a12c-1", "--pair-plus", "example-pp-649a12d", "--six-card",
             "example-6cb-649a12f-e"]


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "journal.sqlite3"
    subprocess.run(tablectl() + ["run", "--simulate", "--rounds", "30", "--seats", "7", "--seed", "5", "--journal",
                                 str(path), "--json", *PAYTABLES], check=True, capture_output=True, timeout=600)
    return path


def rows(path, kind):
    db = reader(path)
    try:
        return [(rid, json.loads(body)) for rid, body in
                db.execute("SELECT round_id, body FROM entries WHERE kind = ? ORDER BY seq", (kind,))]
    finally:
        db.close()


def report(path, kind="day", *extra):
    r = subprocess.run(tablectl() + ["report", kind, "--journal", str(path), "--json", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout), r.returncode


@pytest.fixture(scope="module")
def _the_day_report(journal):
    return report(journal)


@pytest.fixture
def day_report(_the_day_report):
    """``report day --json`` over the module's journal and its exit code: run once for the
    tests that read it (the journal does not change), each test given a copy of its own."""
    rep, code = _the_day_report
    return copy.deepcopy(rep), code


def test_the_day_report_equals_the_sums_over_the_journals_settle_entries(journal, day_report):
    rep, code = day_report
    settles = [b for _, b in rows(journal, "round") if b["step"] == "settle"]
    assert len(settles) == 30 == rep["rounds"]
    handle, result, nets = {}, {}, 0
    for b in settles:
        for seat in b["results"].values():
            nets += seat["net"]
            for w in seat["wagers"]:
                if w["wager"] != "ante_bonus":
                    handle[w["wager"]] = handle.get(w["wager"], 0) + w["stake"]
                result[w["wager"]] = result.get(w["wager"], 0) - w["amount"]
    assert rep["settled_win"] == -nets == sum(rep["house_result"].values())
    assert {k: v for k, v in rep["handle"].items() if v} == handle
    assert {k: v for k, v in rep["house_result"].items() if k in result} == result
    assert handle["pair_plus"] and handle["six_card"] and handle["play"]  # the side wagers were dealt and counted
    decided = [d for _, b in rows(journal, "round") if b["step"] == "decisions_done" for d in b["decisions"].values()]
    seated = sum(len(b["wagers"]) for _, b in rows(journal, "round") if b["step"] == "open")
    assert rep["hands"] == seated >= len(decided) > 0
    assert rep["decisions"] == {"play": decided.count("play"), "fold": decided.count("fold")}
    # the shifts add up to the day
    assert sum(s["rounds"] for s in rep["shifts"]) == 30
    assert sum(s["settled_win"] for s in rep["shifts"]) == rep["settled_win"]
    assert rep["statistical"]["known"] is False and "no opening" in rep["statistical"]["why"]
    assert code == (1 if rep["flags"] else 0)


def test_the_expected_win_is_the_sum_of_each_rounds_exact_expectation(journal, day_report):
    rep, _ = day_report
    tables = Tables.load("pa-649a12c-1", "example-pp-649a12d", "example-6cb-649a12f-e")
    steps = {}
    for rid, b in rows(journal, "round"):
        steps.setdefault(rid, {})[b["step"]] = b
    mean, var = Fraction(0), Fraction(0)
    for r in steps.values():
        hands, decisions = r["decisions_done"]["hands"], r["decisions_done"]["decisions"]
        seats = [SeatRound(int(s), Wagers(**{"ante": 0, **w}), Decision(decisions[s]) if w.get("ante") else None,
                           tuple(Card.parse(c) for c in hands[s])) for s, w in r["open"]["wagers"].items()]
        e = round_expectation(seats, tables)
        mean, var = mean + e.mean, var + e.variance
    assert rep["expected_win"]["fraction"] == f"{mean.numerator}/{mean.denominator}"
    assert rep["expected_win"]["sd"] == round(float(var) ** 0.5, 2)
    low, high = rep["expected_win"]["band_95"]
    assert low == pytest.approx(float(mean) - 1.96 * float(var) ** 0.5, abs=0.01)
    assert rep["expected_win"]["outside"] == (not low <= rep["settled_win"] <= high)


def test_csv_and_text_carry_the_same_figures(journal, day_report):
    r = subprocess.run(tablectl() + ["report", "day", "--journal", str(journal), "--csv"],
                       capture_output=True, text=True, timeout=300)
    lines = r.stdout.splitlines()
    header = lines[0].split(",")
    day = dict(zip(header, lines[-1].split(",")))
    rep, _ = day_report
    assert int(day["settled_win"]) == rep["settled_win"] and int(day["rounds"]) == 30
    assert float(day["expected_win"]) == rep["expected_win"]["cents"]
    t = subprocess.run(tablectl() + ["report", "day", "--journal", str(journal)],
                       capture_output=True, text=True, timeout=300)
    assert "statistical win  not known" in t.stdout and f"30 rounds, {rep['hands']} hands" in t.stdout


def test_month_and_year_to_date_hold_the_day(journal, day_report):
    day, _ = day_report
    for kind in ("month", "year"):
        rep, _ = report(journal, kind)
        assert rep["settled_win"] == day["settled_win"] and rep["rounds"] == 30
        assert rep["expected_win"]["fraction"] == day["expected_win"]["fraction"]


def test_paytables_other_than_the_tables_are_a_labelled_what_if(journal, day_report, tmp_path):
    """A Pair Plus table paying a pair 2 to 1, not the 1 to 1 the rounds were settled at: the
    journal records what was in force, so the option prices a what-if, labelled, and the
    journal's settlement stands; with no option the report is the record's (the refusal of
    other paytables for a journal older than that record: tests/test_in_force.py)."""
    other = tmp_path / "pp-other.toml"
    text = (Path(__file__).resolve().parent.parent / "table/rules/paytables/example-pp-649a12d.toml").read_text()
    other.write_text(text.replace('name = "example-pp-649a12d"', 'name = "pp-other"').replace("pair = 1", "pair = 2")
                     .replace('section = "649a.12(d)"\n', ""))
    own, _ = day_report
    r = subprocess.run(tablectl() + ["report", "day", "--journal", str(journal), "--json", "--pair-plus", str(other)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    what_if = json.loads(r.stdout)
    assert what_if["pricing"]["what_if"] == {"pair_plus": "pp-other"}
    assert what_if["settled_win"] == own["settled_win"]
    assert what_if["expected_win"]["by_wager"]["pair_plus"] < own["expected_win"]["by_wager"]["pair_plus"]
    r = subprocess.run(tablectl() + ["report", "day", "--journal", str(journal), "--json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["expected_win"] == own["expected_win"]


def test_the_statistical_win_once_slips_and_the_drop_are_journaled(journal, tmp_path):
    """People's slips appended to a copy of the journal: opening $10,000, a $2,000 fill,
    a $500 credit, closing $9,000, drop $4,000: win = 9000 - 10000 + 500 - 2000 + 4000 = $1,500."""
    copy = tmp_path / "journal.sqlite3"
    src = sqlite3.connect(str(journal))
    dst = sqlite3.connect(str(copy))
    src.backup(dst)
    src.close()
    dst.close()
    key = load_private_key(str(journal) + ".key", check_mode=False)
    day = TableDay()
    now = datetime.now(timezone.utc)
    start = (now.hour + 12) % 24  # the gaming day runs from 12 hours ago: the rounds and the slips are in it
    cfg = tmp_path / "table.toml"
    cfg.write_text(f'[table]\nid = "t"\nseats = 7\n[devices.shuffler]\nurl = "loop://"\n[devices.shoe]\n'
                   f'url = "loop://"\n[gaming_day]\nstart_hour = {start}\n')
    with Journal(copy, key=key) as j:
        for proc, args in (("open", {"inventory": {"100000": 10}}), ("fill", {"amount": 200000}),
                           ("credit", {"amount": 50000}), ("close", {"inventory": {"100000": 9}})):
            body = day.prepare(proc, args, dealer="dana", supervisor="sam")
            j.append(ENTRY_KIND, **body)
            day.apply(body)
        rep0, _ = report(copy, "day", "--config", str(cfg))
        gday = rep0["gaming_day"]
        assert rep0["statistical"]["known"] is False  # no drop yet
        body = day.prepare("drop", {"amount": 400000, "gaming_day": gday}, dealer="cory", supervisor="sam")
        j.append(ENTRY_KIND, **body)
    rep, code = report(copy, "day", "--config", str(cfg))
    st = rep["statistical"]
    assert st == {"known": True, "opening": 1_000_000, "closing": 900_000, "fills": 200_000, "credits": 50_000,
                  "drop": 400_000, "win": 150_000, "win_to_drop": 0.375,
                  "difference_from_settled": 150_000 - rep["settled_win"]}
    if st["win"] != rep["settled_win"]:
        assert code == 1 and any("differs from the settled win" in f for f in rep["flags"])
    # the slips set the shifts: one opening, no shift change, so every round is in shift 1
    assert [s["shift"] for s in rep["shifts"]] in ([1], [0, 1]) or rep["shifts"]


def test_a_shifts_voids_incidents_and_downtime_are_its_own_hours_even_with_no_round():
    """A shift with no settled round counted every void, incident and minute of downtime of the
    journal (its bounds were its rounds'); now the shift's own hours, from the opening and the
    shift changes people journaled (a fresh review: voids 1, downtime 31 s in a shift that had
    none)."""
    from datetime import datetime, timedelta, timezone

    from table.day.day_report import Calendar, JournalFacts, live_report
    from table.rules.settlement import Tables

    t0 = datetime(2026, 12, 3, 10, 0, tzinfo=timezone.utc)  # gaming day 2026-12-03 (06:00 UTC start)
    facts = JournalFacts("t1")
    facts.voids = [t0]  # a round voided while the table was closed, before the opening
    facts.downtime = [("shoe", t0, t0 + timedelta(seconds=31))]
    facts.procedures = [(t0 + timedelta(minutes=5), {"procedure": "open", "total": 1000}, None),
                        (t0 + timedelta(minutes=10), {"procedure": "shift_change", "total": 1000}, None)]
    facts.incidents = [t0 + timedelta(minutes=20)]  # in shift 2
    facts.last_at = t0 + timedelta(minutes=30)
    tables, cal = Tables.load("pa-649a12b-1"), Calendar()
    now = t0 + timedelta(minutes=30)
    two = live_report(facts, "shift", tables, calendar=cal, on=t0.date(), shift=2, now=now)
    assert (two["rounds"], two["voids"], two["incidents"], two["device_downtime_s"]) == (0, 0, 1, 0)
    one = live_report(facts, "shift", tables, calendar=cal, on=t0.date(), shift=1, now=now)
    assert (one["voids"], one["incidents"], one["device_downtime_s"]) == (1, 0, 31.0)


def test_a_round_held_for_a_device_and_a_broken_rule_are_incidents_of_the_day(tmp_path):
    """The day's incidents counted only `incident` entries: a round held for the shoe, or a
    custody rule broken, were in no count (a fresh review: incidents 0 on a day with a hold)."""
    from table.day.day_report import read_journal
    from table.journal import Journal
    from table.keys import generate

    with Journal(tmp_path / "j.sqlite3", key=generate(), table_id="t1") as j:
        j.append("round", round_id="r1", step="open", number=1, wagers={})
        j.append("round", round_id="r1", step="held", reason="shoe link down", cause="device")
        j.append("violation", rule="foreign_card", detail="a card of another deck", citation="649a.3(b)")
        j.append("round", round_id="r1", step="held", reason="foreign card", cause="custody")  # its violation counts
        assert len(read_journal(j).incidents) == 2


def _copy_with_slips(journal, folder, *, sign: bool):
    """A copy of the journal with an opening, a $2,000 fill and a closing appended (signed by a
    checkpoint when ``sign``), and the table key beside it (JOURNAL.key) when ``sign``."""
    import shutil

    copy = folder / "journal.sqlite3"
    src, dst = sqlite3.connect(str(journal)), sqlite3.connect(str(copy))
    src.backup(dst)
    src.close()
    dst.close()
    key = load_private_key(str(journal) + ".key", check_mode=False)
    day = TableDay()
    with Journal(copy, key=key) as j:
        for proc, args in (("open", {"inventory": {"100000": 10}}), ("fill", {"amount": 200000}),
                           ("close", {"inventory": {"100000": 9}})):
            body = day.prepare(proc, args, dealer="dana", supervisor="sam")
            j.append(ENTRY_KIND, **body)
            day.apply(body)
        if sign:
            j.checkpoint()
    if sign:
        shutil.copy(str(journal) + ".key", str(copy) + ".key")
    return copy


def _forge_fill(copy):
    bodies_as_text(copy)
    db = sqlite3.connect(str(copy))
    db.execute("UPDATE entries SET body=replace(body, '200000', '20000') WHERE kind=? AND body LIKE '%\"fill\"%'",
               (ENTRY_KIND,))
    db.commit()
    db.close()


def test_an_unsigned_report_checks_the_record_first_and_names_an_edited_fill(journal, tmp_path):
    """`report day` (not --signed) on a journal whose fill was edited printed the forged fill
    without a word: every report checks the record first; an edited entry flags the report
    (exit 1) naming it; the first line says what was checked."""
    copy = _copy_with_slips(journal, tmp_path, sign=True)
    rep, code = report(copy)
    assert code in (0, 1) and rep["record"]["status"] == "ok" and rep["record"]["signatures_checked"]
    _forge_fill(copy)
    rep, code = report(copy)
    assert code == 1 and rep["record"]["status"] == "tampered"
    assert "the record does not verify (tampered)" in rep["flags"][0] and "entry" in rep["flags"][0]
    text = subprocess.run(tablectl() + ["report", "day", "--journal", str(copy), *PAYTABLES], capture_output=True,
                          text=True, timeout=300)
    assert text.returncode == 1 and text.stdout.startswith("record: DOES NOT VERIFY (tampered)"), text.stdout[:300]


def test_a_report_says_plainly_what_it_could_not_check(journal, tmp_path):
    """No key at hand and the slips after the last signed checkpoint: the report says that no
    signature was checked and which entries nothing covers (not flagged: nothing was found
    wrong, and nothing could be)."""
    copy = _copy_with_slips(journal, tmp_path, sign=False)
    _forge_fill(copy)
    rep, code = report(copy)
    rec = rep["record"]
    assert rec["status"] in ("unanchored", "unsigned") and not rec["signatures_checked"] and code == 0
    assert "no public key given" in " ".join(rec["notes"])
    text = subprocess.run(tablectl() + ["report", "day", "--journal", str(copy), *PAYTABLES], capture_output=True,
                          text=True, timeout=300)
    first = text.stdout.splitlines()[0]
    assert first.startswith("record: ") and "not fully checked" in first and "no public key" in first
