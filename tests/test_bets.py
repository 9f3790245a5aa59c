"""The bet book: wagers as placed, within the table's limits (issue 23; 58 Pa. Code 649a.7, 816a.1)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from table.bets import (DEFAULT_LIMITS, REFUSAL_CODES, WAGER_KINDS, BetBook, BetRefused, Limit, LimitsError,
                        TableLimits, offered_kinds)
from table.rules.settlement import Tables, Wagers

LIMITS = TableLimits(ante=Limit(500, 50_000, 500), pair_plus=Limit(500, 10_000, 500),
                     six_card=Limit(500, 2_500, 500), progressive=Limit(100, 100, 100))


def book(**kw) -> BetBook:
    return BetBook(kw.pop("limits", LIMITS), kw.pop("seats", 7), **kw)


def refused(fn, *a, **kw) -> BetRefused:
    with pytest.raises(BetRefused) as info:
        fn(*a, **kw)
    assert info.value.code in REFUSAL_CODES
    return info.value


# -- the oracle the property tests compare with: the rules written out once more, plainly --

def first_broken(limits: TableLimits, seat: int, layout: range, amounts: dict[str, int]) -> str | None:
    if seat not in layout:
        return "no_such_seat"
    for kind in WAGER_KINDS:
        v = amounts[kind]
        if v == 0:
            continue
        lim = limits.of(kind)
        if v < lim.minimum_cents:
            return "below_minimum"
        if v > lim.maximum_cents:
            return "above_maximum"
        if v % lim.chip_cents:
            return "not_chip_multiple"
    if amounts["ante"] == 0 and (amounts["six_card"] or amounts["progressive"]):
        return "needs_ante"
    return None


amount = st.one_of(st.just(0), st.integers(0, 60_000), st.sampled_from([100, 500, 2_500, 10_000, 50_000]))


@settings(max_examples=400, deadline=None)
@given(seat=st.integers(-1, 9), ante=amount, pair_plus=amount, six_card=amount, progressive=amount)
def test_a_bet_is_taken_exactly_when_it_keeps_every_rule(seat, ante, pair_plus, six_card, progressive):
    b = book(seats=6)
    amounts = {"ante": ante, "pair_plus": pair_plus, "six_card": six_card, "progressive": progressive}
    want = first_broken(LIMITS, seat, range(1, 7), amounts)
    if want is None:
        w = b.place(seat, **amounts)
        if any(amounts.values()):
            assert w == Wagers(**amounts) and b.seats_in_play == (seat,)
        else:  # all zero: the seat is empty
            assert w is None and b.seats_in_play == ()
    else:
        exc = refused(b.place, seat, **amounts)
        assert exc.code == want
        assert b.seats_in_play == ()  # a refused bet places nothing


@settings(max_examples=200, deadline=None)
@given(first=st.fixed_dictionaries({k: st.integers(1, 10).map(lambda n: n * 500) for k in ("ante", "pair_plus")}),
       second=st.fixed_dictionaries({k: amount for k in WAGER_KINDS}))
def test_a_refused_change_leaves_the_seat_as_it_was(first, second):
    b = book()
    placed = b.place(3, **first)
    if first_broken(LIMITS, 3, range(1, 8), second) is not None:
        refused(b.place, 3, **second)
        assert b.wagers == {3: placed}


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(1, 200), span=st.integers(0, 200), chip=st.integers(1, 500))
def test_limits_are_refused_when_no_bet_could_keep_them(lo, span, chip):
    minimum, maximum = lo * 100, (lo + span) * 100
    ok = minimum >= chip and minimum % chip == 0 and maximum % chip == 0
    if ok:
        lim = Limit(minimum, maximum, chip)
        # the limits themselves are bets the table takes
        b = BetBook(TableLimits(ante=lim), 1)
        assert b.place(1, ante=minimum) == Wagers(minimum)
        assert b.place(1, ante=maximum) == Wagers(maximum)
    else:
        with pytest.raises(LimitsError) as info:
            Limit(minimum, maximum, chip)
        assert info.value.key in ("minimum_cents", "maximum_cents", "chip_cents")


@pytest.mark.parametrize("kw, code, wager, limit", [
    ({"ante": 400}, "below_minimum", "ante", 500),
    ({"ante": 50_500}, "above_maximum", "ante", 50_000),
    ({"ante": 2_600}, "not_chip_multiple", "ante", 500),
    ({"pair_plus": 10_500}, "above_maximum", "pair_plus", 10_000),
    ({"pair_plus": 500, "six_card": 500}, "needs_ante", "six_card", None),
    ({"pair_plus": 500, "progressive": 100}, "needs_ante", "progressive", None),
    ({"ante": 500, "progressive": 200}, "above_maximum", "progressive", 100),
    ({"ante": 500.0}, "not_an_amount", "ante", None),
    ({"ante": True}, "not_an_amount", "ante", None),
    ({"ante": -500}, "not_an_amount", "ante", None),
])
def test_each_refusal_names_the_seat_the_wager_and_the_limit(kw, code, wager, limit):
    exc = refused(book().place, 4, **kw)
    assert (exc.code, exc.seat, exc.wager, exc.limit) == (code, 4, wager, limit)
    text = str(exc)
    assert text.startswith("seat 4: ")
    label = {"ante": "ante", "pair_plus": "Pair Plus", "six_card": "Six Card", "progressive": "progressive"}[wager]
    assert label in text
    if limit is not None:
        assert f"${limit // 100}" in text  # the limit in money, e.g. "$500"
    if code == "needs_ante":
        assert "649a.7" in text and exc.rule == "58 Pa. Code 649a.7"
    answer = exc.to_answer()
    assert answer["ok"] is False and answer["code"] == code and answer["error"] == text and answer["seat"] == 4


def test_a_seat_outside_the_layout_is_refused():
    b = book(seats=5)
    for seat in (0, 6, 8, "3", None, True):
        exc = refused(b.place, seat, ante=500)
        assert exc.code == "no_such_seat"
        assert "1, 2, 3, 4, 5" in str(exc)


def test_pair_plus_alone_is_a_route_into_the_round():
    b = book()
    assert b.place(2, pair_plus=1_000) == Wagers(ante=0, pair_plus=1_000)
    assert b.seats_in_play == (2,)


def test_a_side_wager_without_its_paytable_is_not_offered():
    tables = Tables.load("pa-649a12b-1", pair_plus="example-pp-649a12d")
    offered = offered_kinds(tables)
    assert offered == ("ante", "pair_plus")
    b = book(offered=offered)
    exc = refused(b.place, 1, ante=500, six_card=500)
    assert exc.code == "not_offered" and exc.wager == "six_card"
    assert b.place(1, ante=500, pair_plus=500) == Wagers(500, 500)


def test_bets_close_then_no_wager_changes_and_the_next_round_can_repeat_them():
    b = book()
    with pytest.raises(BetRefused) as info:
        b.freeze()
    assert info.value.code == "no_seat_in_play"
    b.place(1, ante=2_500, pair_plus=1_000)
    b.place(5, pair_plus=500)
    b.place(6, ante=500)
    b.clear(6)
    frozen = b.freeze()
    assert frozen == {1: Wagers(2_500, 1_000), 5: Wagers(0, 500)}
    for fn, a, kw in ((b.place, (1,), {"ante": 5_000}), (b.clear, (1,), {}), (b.table_minimum, (2,), {}),
                      (b.same_as_last, (1,), {}), (b.freeze, (), {})):
        assert refused(fn, *a, **kw).code == "bets_closed"
    assert b.wagers == frozen  # unchanged
    assert b.apply({"seat": 1, "ante": 5_000})["code"] == "bets_closed"

    b.open_round()
    assert b.seats_in_play == () and b.is_open
    assert b.same_as_last(1) == Wagers(2_500, 1_000)
    assert b.same_as_last(2) is None  # empty last round: empty now
    assert b.table_minimum(3) == Wagers(500)
    assert b.freeze() == {1: Wagers(2_500, 1_000), 3: Wagers(500)}


def test_same_as_last_is_checked_against_todays_limits():
    b = BetBook(LIMITS, 7, last={1: Wagers(60_000)})
    exc = refused(b.same_as_last, 1)
    assert exc.code == "above_maximum"
    fresh = book()
    assert refused(fresh.same_as_last, 1).code == "no_last_round"


def test_the_place_bets_command():
    b = book(seats=3)
    assert b.apply({"seat": 2, "ante": 1_000, "pair_plus": 500}) == {
        "ok": True, "seats": {"2": {"ante": 1_000, "pair_plus": 500, "six_card": 0, "progressive": 0}},
        "in_play": [2]}
    assert b.apply({"seat": 2, "empty": True})["seats"] == {"2": None}
    assert b.apply({"seat": 2})["code"] == "no_wager"
    assert b.apply({"seat": 2, "empty": True, "ante": 500})["code"] == "no_wager"
    assert b.apply({"seat": 9, "ante": 500})["code"] == "no_such_seat"
    ans = b.apply({"all_seats": True, "table_minimum": True})
    assert ans["ok"] and ans["in_play"] == [1, 2, 3]
    # all or nothing: one seat's refusal places nothing
    b2 = BetBook(LIMITS, 3, last={1: Wagers(500), 2: Wagers(99_500)})
    ans = b2.apply({"all_seats": True, "same_as_last": True})
    assert ans["ok"] is False and ans["code"] == "above_maximum" and ans["seat"] == 2 and ans["limit_cents"] == 50_000
    assert b2.seats_in_play == ()
    assert book().apply({"all_seats": True, "same_as_last": True})["code"] == "no_last_round"
    assert b.apply({"seat": 1, "ante": 50})["error"] == "seat 1: ante $0.50 is below the table minimum of $5"


def test_the_defaults_take_what_the_fixed_bet_options_place():
    b = BetBook(DEFAULT_LIMITS, 7)
    for seat in range(1, 8):
        b.place(seat, ante=1_000, pair_plus=500, six_card=500, progressive=100)
    assert len(b.freeze()) == 7
    assert b.to_dict()["limits"]["progressive"] == {"minimum_cents": 100, "maximum_cents": 100, "chip_cents": 100}


def test_limits_from_a_config_table():
    lim = TableLimits.from_dict({"ante": {"minimum_cents": 1_000, "maximum_cents": 100_000},
                                 "progressive": {"minimum_cents": 100, "maximum_cents": 100, "chip_cents": 100}},
                                chip_cents=500)
    assert lim.ante == Limit(1_000, 100_000, 500)
    assert lim.progressive == Limit(100, 100, 100)
    assert lim.pair_plus == DEFAULT_LIMITS.pair_plus
    with pytest.raises(LimitsError) as info:
        TableLimits.from_dict({"ante": {"minimum_cents": 1_000, "maximum_cents": 500}})
    assert info.value.key == "ante.maximum_cents"


# -- the ledger: wagers placed against wagers settled (the soak's counting) -------------------


class E:
    def __init__(self, step, rid="r1", **body):
        self.kind, self.round_id, self.body = "round", rid, {"step": step, **body}


def settle(results):
    return E("settle", results={s: {"wagers": [{"wager": k, "stake": v, "outcome": "win", "amount": v}
                                               for k, v in w.items()]} for s, w in results.items()})


def test_the_ledger_balances_wagers_placed_against_settled_and_returned():
    from table.bets import wager_ledger

    journal = [E("open", number=1, wagers={}), E("close_bets", number=1, wagers={"1": {"ante": 500, "pair_plus": 500},
                                                                                 "3": {"pair_plus": 1000}}),
               settle({"1": {"ante": 500, "play": 500, "pair_plus": 500}, "3": {"pair_plus": 1000}}),
               E("open", "r2", wagers={}), E("close_bets", "r2", wagers={"2": {"ante": 1000}}),
               E("voided", "r2", returned_cents={"2": 2000}),  # the play wager was made before the void
               E("open", "r3", wagers={})]
    led = wager_ledger(journal)
    assert led.ok, led
    assert (led.rounds, led.placed_cents, led.settled_cents, led.returned_cents, led.open_rounds) == (2, 3000, 2000,
                                                                                                      1000, 1)
    # a wager settled that was never placed, or one placed and lost, is named
    bad = wager_ledger(journal[:2] + [settle({"1": {"ante": 500, "pair_plus": 500}, "3": {"pair_plus": 500}})])
    assert not bad.ok and bad.problems == ["round r1 seat 3: placed {'ante': 0, 'pair_plus': 1000, 'six_card': 0, "
                                           "'progressive': 0}, settled {'ante': 0, 'pair_plus': 500, 'six_card': 0, "
                                           "'progressive': 0}"]
    created = wager_ledger(journal[:2] + [settle({"1": {"ante": 500, "pair_plus": 500}, "3": {"pair_plus": 1000},
                                                  "4": {"ante": 500}})])
    assert not created.ok and "seat 4" in created.problems[0]
    short = wager_ledger(journal[3:5] + [E("voided", "r2", returned_cents={"2": 500})])
    assert not short.ok and "the void returned 500" in short.problems[0]
    assert not wager_ledger([]).ok  # an empty journal proves nothing


def test_the_ledger_balances_a_simulated_tables_journal(tmp_path):
    """On the journal a real run writes (whatever placed the bets): every wager settled."""
    from table.api import Table
    from table.bets import wager_ledger
    from table.config import DeviceConfig, DevicesConfig, JournalSection, TableConfig, TableSection
    from table.journal import Journal

    cfg = TableConfig(TableSection("pit1-tcp-01", 3),
                      DevicesConfig(DeviceConfig("/dev/threecard/shuffler"), DeviceConfig("/dev/threecard/shoe")),
                      journal=JournalSection(tmp_path / "journal.sqlite3"))
    with Table(cfg, simulate=True, seed=5, rounds=3) as t:
        t.wait(120)
    with Journal(tmp_path / "journal.sqlite3") as j:
        led = wager_ledger(j.entries())
    assert led.ok and led.rounds == 3 and led.placed_cents == led.settled_cents > 0, led
