"""What was in force is in the record, and every report reads it (docs/journal.md, "What
was in force"; docs/reporting.md): a simulated table offering Pair Plus, Six Card and a
progressive, its paytables and meter changed mid-day by a named supervisor, reported
with no paytable option gives the table's own settlement and each period under its own
paytables; an option makes a labelled what-if that --signed refuses; a journal older
than the record reads as before with the options it needs, and says so."""

from __future__ import annotations

import copy
import json
import queue
import sqlite3
import subprocess
from datetime import date
from fractions import Fraction
from pathlib import Path

import pytest

from devices import CardShoe, Shuffler
from protocols.cards import BackColour, Card
from simulators.table import SimulatedTable
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.in_force import ENTRY_KIND, METER_KIND
from table.interfaces.day_view import DayReportQueries
from table.journal import Journal, connect, decode_body
from table.procedure.in_force import InForceChangeRefused
from table.rules.expectation import round_expectation
from table.rules.settlement import SeatRound, Tables
from table.rules.wagers import Decision, Wagers
from tests.day_helpers import START, WallClock, table_key
from tests.test_e2e_run import tablectl

FIRST = ("pa-649a12c-1", "example-pp-649a12d", "example-6cb-649a12f-e", "example-prog-649a12e")
SECOND = ("pa-649a12c-2", "example-pp-649a12d", "example-6cb-649b5b-f", "example-prog-649a12e")
METERS = (10_000_000, 12_345_600)
ROUNDS = 6
SUPERVISOR = {"role": "supervisor", "id": "S-7"}


def _backup(src, dst) -> None:
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    """ROUNDS rounds at FIRST, a change to SECOND and a new meter by a supervisor, ROUNDS
    more: the journal, the table's own results, a copy of the journal before the change."""
    folder = tmp_path_factory.mktemp("in_force")
    key = table_key(folder)
    clock = WallClock(START)
    results = []
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=11) as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(folder / "journal.sqlite3", key=key, table_id="t1", clock=clock)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        ctl = TableController(shuffler, shoe, events, sim.dealer,
                              DeckCustody([("A", BackColour.RED), ("B", BackColour.BLUE)]), seats=5,
                              ante_cents=1000, tables=Tables.load(*FIRST, METERS[0]), journal=journal,
                              side_wagers={"pair_plus": 500, "six_card": 500, "progressive": 100},
                              timing=TableTiming(event_timeout_s=5, settle_s=0.1),
                              in_force={"gaming_day": {"start_hour": 6, "timezone": "UTC", "shift_hours": 8},
                                        "floor": None, "drivers": {"shuffler": "spec", "shoe": "spec"}})
        try:
            ctl.prepare()
            results += [ctl.play_round() for _ in range(ROUNDS)]
            _backup(folder / "journal.sqlite3", folder / "before-change.sqlite3")
            with pytest.raises(InForceChangeRefused):  # a change names its person
                ctl.change_in_force(by={}, tables=Tables.load(*SECOND, METERS[0]))
            ctl.change_in_force(by=SUPERVISOR, tables=Tables.load(*SECOND, METERS[0]))
            ctl.set_progressive_meter(METERS[1], by=SUPERVISOR)
            results += [ctl.play_round() for _ in range(ROUNDS)]
            ctl.close()
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    return folder, results


def report(path, *args, check=True):
    r = subprocess.run(tablectl() + ["report", *map(str, args), "--journal", str(path), "--json"],
                       capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode in (0, 1), r.stderr
        return json.loads(r.stdout)
    return r


@pytest.fixture(scope="module")
def _the_day_report(day):
    return report(day[0] / "journal.sqlite3", "day")


@pytest.fixture
def own_report(_the_day_report):
    """``report day --json`` over the day's journal with no option: run once for the tests
    that read it (the journal does not change), each test given a copy of its own."""
    return copy.deepcopy(_the_day_report)


def entries(path, *kinds):
    db = connect(path)
    try:
        return [(seq, kind, json.loads(body)) for seq, kind, body in db.execute(
            "SELECT seq, kind, body FROM entries WHERE kind IN ({}) ORDER BY seq".format(",".join("?" * len(kinds))),
            kinds)]
    finally:
        db.close()


def expected(path, upto_change: bool = False) -> Fraction:
    """The exact expected win given the decisions, each round at the paytables and meter
    the test put in force when it was dealt (FIRST then SECOND), from the journal's rounds."""
    steps: dict[str, dict] = {}
    for _, _, b in entries(path, "round"):
        steps.setdefault(b["number"], {})[b["step"]] = b
    total = Fraction(0)
    for number, r in steps.items():
        first = number <= ROUNDS
        tables = Tables.load(*(FIRST if first else SECOND), METERS[0] if first else METERS[1])
        hands, decisions = r["decisions_done"]["hands"], r["decisions_done"]["decisions"]
        seats = [SeatRound(int(s), Wagers(**{"ante": 0, **w}), Decision(decisions[s]) if w.get("ante") else None,
                           tuple(Card.parse(c) for c in hands[s])) for s, w in r["open"]["wagers"].items()]
        total += round_expectation(seats, tables).mean
    return total


def test_the_journal_names_what_was_in_force_and_who_changed_it(day):
    folder, _ = day
    got = entries(folder / "journal.sqlite3", ENTRY_KIND, METER_KIND)
    start, change, meter = got
    assert start[2]["changed"] == "start" and "by" not in start[2]
    assert {k: v["name"] for k, v in start[2]["paytables"].items()} == dict(
        zip(("ante_bonus", "pair_plus", "six_card_bonus", "progressive"), FIRST))
    pp = start[2]["paytables"]["pair_plus"]
    assert "58 Pa. Code 649a.12(d)" in pp["citation"] and pp["digest"].startswith("sha256:")
    assert start[2]["progressive_meter_cents"] == METERS[0] and start[2]["seats"] == 5
    assert start[2]["gaming_day"]["start_hour"] == 6 and start[2]["software"]["version"]
    assert set(start[2]["devices"]) == {"shuffler", "shoe"} and start[2]["profile"] == "pennsylvania"
    assert change[2]["changed"] == "change" and change[2]["by"] == SUPERVISOR
    assert change[2]["paytables"]["ante_bonus"]["name"] == SECOND[0]
    assert meter[1] == METER_KIND and meter[2]["progressive_meter_cents"] == METERS[1] and meter[2]["by"] == SUPERVISOR
    settles = [b for _, _, b in entries(folder / "journal.sqlite3", "round") if b["step"] == "settle"]
    assert [b["progressive_meter_cents"] for b in settles] == [METERS[0]] * ROUNDS + [METERS[1]] * ROUNDS


def test_the_day_report_with_no_option_equals_the_tables_own_settlement_in_two_named_periods(day, own_report):
    folder, results = day
    rep = own_report
    assert rep["rounds"] == 2 * ROUNDS and rep["pricing"] == {"source": "journal"}
    assert rep["settled_win"] == -sum(s.net_cents for r in results for s in r.seats)
    by_wager: dict[str, int] = {}
    stakes: dict[str, int] = {}
    for r in results:
        for s in r.seats:
            for w in s.settlement.results:
                by_wager[w.wager] = by_wager.get(w.wager, 0) - w.amount
                if w.wager != "ante_bonus":
                    stakes[w.wager] = stakes.get(w.wager, 0) + w.stake
    assert {k: v for k, v in rep["house_result"].items() if k in by_wager} == by_wager
    assert {k: v for k, v in rep["handle"].items() if v} == stakes
    assert stakes["pair_plus"] and stakes["six_card"] and stakes["progressive"]
    mean = expected(folder / "journal.sqlite3")
    assert rep["expected_win"]["fraction"] == f"{mean.numerator}/{mean.denominator}"
    periods = rep["in_force"]
    assert [p["paytables"]["ante_bonus"] for p in periods] == [FIRST[0], SECOND[0]]
    assert [p["paytables"]["six_card_bonus"] for p in periods] == [FIRST[2], SECOND[2]]
    assert [(p["first_round"], p["last_round"]) for p in periods] == [(1, ROUNDS), (ROUNDS + 1, 2 * ROUNDS)]
    assert [p["progressive_meter_cents"] for p in periods] == [[METERS[0]], [METERS[1]]]
    # month and year to date, and the shift, read the same record
    for kind in ("month", "year"):
        assert report(folder / "journal.sqlite3", kind)["expected_win"]["fraction"] == rep["expected_win"]["fraction"]
    text = subprocess.run(tablectl() + ["report", "day", "--journal", str(folder / "journal.sqlite3")],
                          capture_output=True, text=True, timeout=300).stdout
    assert f"in force: rounds 1-{ROUNDS}" in text and SECOND[0] in text and "WHAT-IF" not in text


def test_the_api_day_report_reads_the_record_not_the_tables_it_is_given(day, own_report):
    folder, _ = day
    cli = own_report
    api = DayReportQueries(folder / "journal.sqlite3", Tables.load("pa-649a12b-3")).day_report(
        {"period": "day", "gaming_day": cli["gaming_day"]})
    for k in ("settled_win", "expected_win", "theoretical_win", "in_force", "paytables", "pricing"):
        assert api[k] == cli[k], k
    assert len(api["series"]) == 2 * ROUNDS


def test_a_paytable_option_is_a_labelled_what_if_and_signed_is_refused(day, own_report, tmp_path):
    folder, _ = day
    journal = folder / "journal.sqlite3"
    own = own_report
    what_if = report(journal, "day", "--ante-bonus", "pa-649a12b-1")
    assert what_if["pricing"]["what_if"] == {"ante_bonus": "pa-649a12b-1"}
    assert what_if["settled_win"] == own["settled_win"]  # the journal's settlement stands
    assert what_if["theoretical_win"] != own["theoretical_win"]
    assert {p["paytables"]["ante_bonus"] for p in what_if["in_force"]} == {"pa-649a12b-1"}
    out = tmp_path / "signed.json"
    for option in (["--ante-bonus", "pa-649a12b-1"], ["--meter-cents", "5000000"], ["--profile", "pennsylvania"]):
        r = report(journal, "day", "--signed", out, "--table-key", folder / "table.key", *option, check=False)
        assert r.returncode == 2 and "what-if" in r.stderr and option[0] in r.stderr, r.stderr
        assert not out.exists()
    r = report(journal, "day", "--signed", out, "--table-key", folder / "table.key", check=False)
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(out.read_text())["report"]["settled_win"] == own["settled_win"]


def test_an_edited_paytable_in_the_record_is_named(day, tmp_path):
    """A pair paid 2 to 1 written into the journaled Pair Plus lines: its digest no longer matches."""
    folder, _ = day
    copy = tmp_path / "edited.sqlite3"
    _backup(folder / "journal.sqlite3", copy)
    db = sqlite3.connect(copy)
    seq, body = db.execute("SELECT seq, body FROM entries WHERE kind = 'in_force' ORDER BY seq LIMIT 1").fetchone()
    b = json.loads(decode_body(body))
    b["paytables"]["pair_plus"]["lines"]["pair"] = ["to", 2]
    db.execute("UPDATE entries SET body = ? WHERE seq = ?", (json.dumps(b), seq))
    db.commit()
    db.close()
    r = report(copy, "day", check=False)
    assert r.returncode == 2 and f"in_force entry {seq}" in r.stderr and "digest" in r.stderr, r.stderr


def test_a_journal_older_than_the_record_reports_with_its_options_and_says_so(day, tmp_path):
    folder, _ = day
    before = folder / "before-change.sqlite3"
    own = report(before, "day")
    old = tmp_path / "old.sqlite3"
    _backup(before, old)
    db = sqlite3.connect(old)
    db.execute("DELETE FROM entries WHERE kind IN ('in_force', 'progressive_meter')")
    db.commit()
    db.close()
    r = report(old, "day", check=False)
    assert r.returncode == 2 and "older than its in_force record" in r.stderr and "--pair-plus" in r.stderr, r.stderr
    rep = report(old, "day", "--ante-bonus", FIRST[0], "--pair-plus", FIRST[1], "--six-card", FIRST[2],
                 "--progressive", FIRST[3], "--meter-cents", METERS[0])
    assert rep["pricing"]["source"] == "options" and "older than the in_force record" in rep["pricing"]["older_format"]
    assert "what_if" not in rep["pricing"]
    for k in ("settled_win", "expected_win", "theoretical_win", "handle"):
        assert rep[k] == own[k], k
    # a Pair Plus table paying a pair 2 to 1 does not settle the older journal's rounds: refused, as before
    other = tmp_path / "pp-other.toml"
    text = (Path(__file__).resolve().parent.parent / "table/rules/paytables/example-pp-649a12d.toml").read_text()
    other.write_text(text.replace('name = "example-pp-649a12d"', 'name = "pp-other"').replace("pair = 1", "pair = 2")
                     .replace('section = "649a.12(d)"\n', ""))
    r = report(old, "day", "--ante-bonus", FIRST[0], "--pair-plus", other, "--six-card", FIRST[2],
               "--progressive", FIRST[3], "--meter-cents", METERS[0], check=False)
    assert r.returncode == 2 and "settle it at" in r.stderr and "pp-other" in r.stderr, r.stderr
    text = subprocess.run(tablectl() + ["report", "day", "--journal", str(old), "--ante-bonus", FIRST[0],
                                        "--pair-plus", FIRST[1], "--six-card", FIRST[2], "--progressive", FIRST[3],
                                        "--meter-cents", str(METERS[0])], capture_output=True, text=True,
                          timeout=300).stdout
    assert "OLDER JOURNAL" in text
    assert date.fromisoformat(rep["gaming_day"]) == date(2026, 12, 1)


def test_each_gaming_days_segment_names_what_is_in_force_and_reports_alone(tmp_path):
    """The day's close opens a new segment: its first round is priced from its own
    in_force entry, with no option (the day before is in the archive)."""
    from table.day.segments import archives, opened
    from tests.day_helpers import day_start, day_table

    clock = WallClock(START)
    with day_table(tmp_path, clock) as ctl:
        ctl.play_round()
        clock.set(day_start(1))
        ctl.play_round()
    (name, path), = archives(tmp_path / "archive")
    with opened(path) as db, Journal(db, read_only=True) as j:
        assert [e.body["changed"] for e in j.entries(ENTRY_KIND)] == ["start"]
    live = tmp_path / "journal.sqlite3"
    assert [b["changed"] for _, _, b in entries(live, ENTRY_KIND)] == ["segment"]
    rep = report(live, "day")
    assert rep["rounds"] == 1 and rep["pricing"] == {"source": "journal"} and rep["gaming_day"] == "2026-12-02"
    assert rep["in_force"][0]["paytables"] == {"ante_bonus": "pa-649a12b-1"}


def test_a_restart_that_changes_nothing_journals_nothing_and_one_that_does_journals_it(tmp_path):
    from table.keys import generate
    from table.procedure.in_force import InForceRecord
    from table.procedure.state import TableState
    from table.recovery import DeviceCursor
    from table.rules.profiles import PENNSYLVANIA

    journal = Journal(tmp_path / "j.sqlite3", key=generate(), table_id="t1")
    state = TableState(DeckCustody([("A", BackColour.RED), ("B", BackColour.BLUE)]), journal, seats=3,
                       cursor=DeviceCursor())
    now = {"tables": Tables.load("pa-649a12b-1"), "profile": PENNSYLVANIA}

    def start() -> InForceRecord:
        rec = InForceRecord(state, current=lambda: (now["tables"], now["profile"]), apply=lambda t, p: None,
                            limits=None)
        rec.at_start()
        return rec

    start()
    start()  # the same again: nothing new
    assert len(list(journal.entries(ENTRY_KIND))) == 1
    now["tables"] = Tables.load("pa-649a12b-2")
    rec = start()  # restarted with another paytable: journaled at start
    got = [e.body for e in journal.entries(ENTRY_KIND)]
    assert [b["changed"] for b in got] == ["start", "start"]
    assert got[1]["paytables"]["ante_bonus"]["name"] == "pa-649a12b-2"
    with pytest.raises(InForceChangeRefused, match="no progressive"):
        rec.set_meter(5_000_000, by=SUPERVISOR)
    journal.close()
