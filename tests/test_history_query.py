"""The history query (issue 25): the last rounds with results and the incidents with who
handled them, newest first, a page at a time, from the journal read-only; nothing of a
round before its reveal, and never a card."""

from __future__ import annotations

from table.interfaces.api_schema import ACTIONS
from table.interfaces.history import history
from table.roles import Role
from test_integrity import table


def test_three_rounds_in_pages_of_two_newest_first_with_the_settled_results(tmp_path):
    with table(tmp_path, seats=2) as (ctl, sim, console, journal):
        ctl.prepare()
        results = [ctl.play_round() for _ in range(3)]
        ctl.close()
    path = tmp_path / "journal.sqlite3"
    first = history(path, limit=2)["history"]
    assert [r["number"] for r in first["rounds"]] == [3, 2]
    assert all(r["outcome"] == "settled" for r in first["rounds"])
    for r, result in zip(first["rounds"], [results[2], results[1]]):
        assert r["net_cents"] == {str(st.seat): st.net_cents for st in result.seats}
        assert r["house_cents"] == -sum(st.net_cents for st in result.seats)
    assert first["next_before"] is not None
    second = history(path, before=first["next_before"], limit=2)["history"]
    assert [r["number"] for r in second["rounds"]] == [1] and second["next_before"] is None
    text = repr(first) + repr(second)
    for result in results:  # no card of any round is in the history (only results)
        for card in [*result.dealer_hand, *(c for st in result.seats for c in st.cards)]:
            assert f"'{card}'" not in text


def test_the_history_is_for_the_floor_not_for_a_seat_terminal():
    assert Role.SEAT not in ACTIONS["history"].roles
    assert {Role.DEALER, Role.SUPERVISOR, Role.AUDITOR, Role.PIT} <= ACTIONS["history"].roles


def test_just_after_the_days_close_the_history_still_lists_yesterdays_last_rounds(tmp_path):
    """The journal is one segment a gaming day: after the rollover the live segment holds
    one round, and the history (the panel's query, as the front doors answer it) reads on
    into the archived day before it, newest first, paging across the two."""
    from table.interfaces.audit_view import AuditQueries
    from tests.day_helpers import START, WallClock, day_start, day_table

    clock = WallClock(START)
    with day_table(tmp_path, clock) as ctl:
        yesterday = [ctl.play_round() for _ in range(2)]
        clock.set(day_start(1))
        today = ctl.play_round()  # the day closes (archived) before this round opens
    from table.day import segments

    assert segments.compressed(120)  # the xz is written off the round's path
    assert [p.name for p in (tmp_path / "archive").iterdir()] == ["2026-12-01.journal.xz"]
    path, archive = tmp_path / "journal.sqlite3", tmp_path / "archive"
    query = AuditQueries(path, archive=archive).handlers()["history"]
    page = query({"limit": 5})["history"]
    assert [r["number"] for r in page["rounds"]] == [3, 2, 1]
    for r, result in zip(page["rounds"], [today, *reversed(yesterday)]):
        assert r["outcome"] == "settled" and r["net_cents"] == {str(st.seat): st.net_cents for st in result.seats}
    assert page["next_before"] is None  # the first day's start: nothing older
    # a page at a time: the second page is yesterday's, read from its archive
    one = query({"limit": 1})["history"]
    assert [r["number"] for r in one["rounds"]] == [3] and one["next_before"] is not None
    two = query({"limit": 1, "before": one["next_before"]})["history"]
    assert [r["number"] for r in two["rounds"]] == [2]
    three = query({"limit": 5, "before": two["next_before"]})["history"]
    assert [r["number"] for r in three["rounds"]] == [1] and three["next_before"] is None
    # without the archive folder the live segment is all there is
    assert [r["number"] for r in history(path, limit=3)["history"]["rounds"]] == [3]


def test_a_round_that_took_bets_shows_the_seats_and_wagers_as_placed(tmp_path):
    """A table that takes bets opens its round with none and journals the wagers at close_bets:
    the history shows those seats and wagers, not "0 seats" (a fresh review's find)."""
    from table.journal import Journal
    from table.keys import generate

    path = tmp_path / "journal.sqlite3"
    with Journal(path, key=generate(), table_id="t1") as j:
        j.append("round", round_id="r00001-x", step="open", number=1, wagers={})
        j.append("round", round_id="r00001-x", step="close_bets",
                 wagers={"1": {"ante": 1000}, "3": {"ante": 500, "pair_plus": 500}})
    (r,) = history(path)["history"]["rounds"]
    assert r["seats"] == [1, 3] and r["outcome"] == "in_progress"
    assert r["wagers_cents"]["3"] == 1000 and r["wagers_cents"]["1"] == 1000


def test_a_round_still_taking_bets_says_so_instead_of_no_seats(tmp_path):
    """While bets are open the round's seats are the bets placed so far (the bet spots show
    them): the history says the bets are open, not "0 seats" beside bet spots full of bets."""
    from table.journal import Journal
    from table.keys import generate

    path = tmp_path / "journal.sqlite3"
    with Journal(path, key=generate(), table_id="t1") as j:
        j.append("round", round_id="r00001-x", step="open", number=1, wagers={})
    (r,) = history(path)["history"]["rounds"]
    assert r["bets_open"] is True and r["outcome"] == "in_progress"


def test_a_round_whose_bets_closed_is_no_longer_taking_bets(tmp_path):
    from table.journal import Journal
    from table.keys import generate

    path = tmp_path / "journal.sqlite3"
    with Journal(path, key=generate(), table_id="t1") as j:
        j.append("round", round_id="r00001-x", step="open", number=1, wagers={})
        j.append("round", round_id="r00001-x", step="close_bets", wagers={"1": {"ante": 1000}})
        j.append("round", round_id="r00002-y", step="open", number=2, wagers={"2": {"ante": 500}})  # an older table
    rounds = {r["number"]: r for r in history(path)["history"]["rounds"]}
    assert rounds[1]["bets_open"] is False and rounds[2]["bets_open"] is False


def test_a_round_settled_just_before_a_crash_shows_its_results_not_held_for_good(tmp_path):
    """SIGKILL right after a round's settle entry: the restart holds the round until its chips
    are collected (table/procedure/startup.py journals `held` with `settled: true`, then
    holds.py `closed` with `completed_after_restart`). The History panel showed it "HELD" with
    no results on every screen for good, while the day report counted its money: it shows
    the round settled with its results, the hold noted."""
    from table.journal import Journal

    from test_integrity import KEY

    with table(tmp_path, seats=2) as (ctl, sim, console, journal):
        ctl.prepare()
        result = ctl.play_round()
        ctl.close()
    path = tmp_path / "journal.sqlite3"
    last = history(path, limit=1)["history"]["rounds"][0]
    with Journal(path, key=KEY, table_id="t-int") as j:  # the restart's entries, as the product writes them
        j.append("round", round_id=last["round_id"], deck_id=None, step="held", reason="restart", settled=True,
                 number=last["number"])
        j.append("round", round_id=last["round_id"], deck_id=None, step="closed", number=last["number"],
                 completed_after_restart=True)
    for page in (history(path, limit=1)["history"]["rounds"][0],):
        assert page["outcome"] == "settled", page
        assert page["net_cents"] == {str(st.seat): st.net_cents for st in result.seats}
        assert page["holds"] and page["holds"][0]["reason"] == "restart"
    # held and not yet collected: already settled, its results shown
    with Journal(path, key=KEY, table_id="t-int") as j:
        j.append("round", round_id=last["round_id"], deck_id=None, step="held", reason="restart", settled=True,
                 number=last["number"])
    now = history(path, limit=1)["history"]["rounds"][0]
    assert now["outcome"] == "settled" and now["net_cents"] is not None
