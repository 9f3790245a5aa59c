"""The gaming day's procedures by people (issue 27, point 1): inventory slips, two
signers, a closed table deals no round, the statistical win, and the procedures
journaled, signed and replayed after a restart; the [gaming_day] config section."""

from __future__ import annotations

import pytest

from table.config import ConfigError, parse_config
from table.custody import DeckCustody
from table.day.gaming_day import ENTRY_KIND, DayFigures, Inventory, ProcedureError, TableClosed, TableDay, statistical_win
from table.journal import Journal, verify
from table.keys import generate
from table.procedure.state import TableState
from table.procedure.table_day import TableDayProcedure
from table.recovery import DeviceCursor

OPEN = {"inventory": {"2500": 40, "500": 100, "100": 200}}  # $1,000 + $500 + $200


def test_an_inventory_slip_is_chips_by_denomination_and_its_total():
    inv = Inventory.parse(OPEN["inventory"])
    assert inv.total == 170_000 and list(inv.chips) == [2500, 500, 100]
    for bad, why in (({"25.5": 3}, "not a denomination"), ({"500": -1}, "chip count"), ({"500": True}, "chip count"),
                     ({"0": 3}, "not a denomination"), ([("500", 1)], "an object"), ({"500": 10 ** 6}, "chip count")):
        with pytest.raises(ProcedureError, match=why):
            Inventory.parse(bad)


def test_the_statistical_win_is_closing_less_opening_plus_credits_less_fills_plus_drop():
    """COMAR 36.05.03.25: win = closing - opening + credits - fills + drop."""
    assert statistical_win(opening=100_000, closing=90_000, fills=20_000, credits=5_000, drop=40_000) == 15_000
    f = DayFigures()
    for body in ({"procedure": "open", "total": 100_000}, {"procedure": "fill", "amount": 20_000},
                 {"procedure": "credit", "amount": 5_000}, {"procedure": "close", "total": 90_000}):
        f.add(body)
    assert f.statistical_win is None  # the drop is not counted yet: not known, never zero
    f.add({"procedure": "drop", "amount": 40_000})
    assert f.statistical_win == 15_000


def test_a_table_closed_and_opened_again_in_one_day_counts_every_session():
    """Closed at noon, opened again at six: each session's own change counts (before, the
    second opening and closing replaced the first, and the first session's chips vanished)."""
    f = DayFigures()
    for body in ({"procedure": "open", "total": 333 * 4}, {"procedure": "fill", "amount": 1_000},
                 {"procedure": "credit", "amount": 20_000}, {"procedure": "close", "total": 98_500},
                 {"procedure": "open", "total": 100_000}, {"procedure": "fill", "amount": 500},
                 {"procedure": "close", "total": 100_000}, {"procedure": "drop", "amount": 777}):
        f.add(body)
    assert f.statistical_win == (98_500 - 1_332) + (100_000 - 100_000) + 20_000 - 1_500 + 777
    still_open = DayFigures()
    for body in ({"procedure": "open", "total": 1_000}, {"procedure": "close", "total": 2_000},
                 {"procedure": "open", "total": 2_000}, {"procedure": "drop", "amount": 5}):
        still_open.add(body)
    assert still_open.statistical_win is None and "not closed" in still_open.unknown_why
    began_open = DayFigures()  # opened the day before: this day has no opening of its own
    for body in ({"procedure": "close", "total": 2_000}, {"procedure": "open", "total": 2_000},
                 {"procedure": "close", "total": 2_500}, {"procedure": "drop", "amount": 5}):
        began_open.add(body)
    assert began_open.statistical_win is None and "open when the gaming day began" in began_open.unknown_why


def test_each_slip_needs_two_people_and_a_table_in_the_right_state():
    day = TableDay("t1")
    with pytest.raises(TableClosed):
        day.check_may_deal()
    with pytest.raises(ProcedureError, match="closed"):
        day.prepare("fill", {"amount": 100}, dealer="dana", supervisor="sam")
    with pytest.raises(ProcedureError, match="two people") as e:
        day.prepare("open", OPEN, dealer="sam", supervisor="sam")
    assert e.value.code == "refused"
    with pytest.raises(ProcedureError, match="person"):
        day.prepare("open", OPEN, dealer="dana; rm -rf", supervisor="sam")
    with pytest.raises(ProcedureError, match="unknown key"):
        day.prepare("open", {**OPEN, "amount": 5}, dealer="dana", supervisor="sam")
    body = day.prepare("open", OPEN, dealer="dana", supervisor="sam")
    assert body == {"procedure": "open", "slip": 1, "dealer": "dana", "supervisor": "sam",
                    "inventory": {"2500": 40, "500": 100, "100": 200}, "total": 170_000}
    day.apply(body)
    day.check_may_deal()
    with pytest.raises(ProcedureError, match="already open"):
        day.prepare("open", OPEN, dealer="dana", supervisor="sam")
    with pytest.raises(ProcedureError, match="after the table closes"):
        day.prepare("drop", {"amount": 1, "gaming_day": "2026-12-01"}, dealer="cory", supervisor="sam")
    # The outgoing dealer is the one who holds the shift (dana opened it): another dealer cannot
    # hand it over, and no one hands it to themself (a fresh review's finds).
    with pytest.raises(ProcedureError, match="dana holds this shift"):
        day.prepare("shift_change", {**OPEN, "opener": "olga"}, dealer="cory", supervisor="sam")
    with pytest.raises(ProcedureError, match="themself"):
        day.prepare("shift_change", {**OPEN, "opener": "dana"}, dealer="dana", supervisor="sam")
    # A person's id with a trailing line break is not that person ('$' matched before it).
    for who in ("sam\n", "dana\n"):
        with pytest.raises(ProcedureError, match="person"):
            day.prepare("fill", {"amount": 1}, dealer="dana", supervisor=who) if who == "sam\n" else \
                day.prepare("fill", {"amount": 1}, dealer=who, supervisor="sam")
    shift = day.prepare("shift_change", {**OPEN, "opener": "olga"}, dealer="dana", supervisor="sam")
    assert shift["shift"] == 2 and shift["opener"] == "olga"
    day.apply(shift)
    day.apply(day.prepare("close", OPEN, dealer="olga", supervisor="sam"))
    with pytest.raises(TableClosed):
        day.check_may_deal()
    with pytest.raises(ProcedureError, match="gaming_day"):
        day.prepare("drop", {"amount": 1}, dealer="cory", supervisor="sam")
    # A date that is none (it was journaled, then skipped by every report), or in other digits.
    for bad in ("2026-13-45", "2026-02-30", "٢٠٢٦-12-01"):
        with pytest.raises(ProcedureError, match="a date YYYY-MM-DD"):
            day.prepare("drop", {"amount": 1, "gaming_day": bad}, dealer="cory", supervisor="sam")


def test_a_fill_or_credit_for_no_chips_and_a_denomination_in_other_digits_are_refused():
    day = TableDay("t1")
    day.apply(day.prepare("open", OPEN, dealer="dana", supervisor="sam"))
    for p in ("fill", "credit"):
        with pytest.raises(ProcedureError, match="more than 0 cents"):
            day.prepare(p, {"amount": 0}, dealer="dana", supervisor="sam")
    for d in ("²", "٥٠٠"):  # '²' crashed the slip with a ValueError; '٥٠٠' was $5.00
        with pytest.raises(ProcedureError, match="not a denomination"):
            Inventory.parse({d: 3})


def state(tmp_path, key):
    j = Journal(tmp_path / "journal.sqlite3", key=key, table_id="t1")
    return TableState(DeckCustody([("A", "red"), ("B", "blue")]), j, seats=3, cursor=DeviceCursor())


def test_procedures_are_journaled_signed_and_replayed_after_a_restart(tmp_path):
    key = generate()
    t = state(tmp_path, key)
    part = TableDayProcedure(t, required=True)
    with pytest.raises(TableClosed):
        part.check_may_deal()
    part.carry_out("open", OPEN, dealer="dana", supervisor="sam")
    part.carry_out("fill", {"amount": 50_000}, dealer="dana", supervisor="sam")
    with pytest.raises(ProcedureError):
        part.carry_out("credit", {"amount": "lots"}, dealer="dana", supervisor="sam")
    part.check_may_deal()
    bodies = [e.body for e in t.journal.entries(ENTRY_KIND)]
    assert [b["procedure"] for b in bodies] == ["open", "fill"]  # the refused credit left nothing
    assert t.journal.last("checkpoint").seq == t.journal.last_seq  # each slip is signed by a checkpoint
    t.journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok
    t2 = state(tmp_path, key)
    again = TableDayProcedure(t2, required=True)
    again.recover()
    assert again.is_open and again.day.slip_no == 2
    again.check_may_deal()
    again.carry_out("close", OPEN, dealer="dana", supervisor="sam")
    with pytest.raises(TableClosed):
        again.check_may_deal()
    t2.journal.close()


def test_a_simulated_table_need_not_open():
    part = TableDayProcedure(TableState(DeckCustody([("A", "red"), ("B", "blue")]), None, seats=1,
                                        cursor=DeviceCursor()))
    part.check_may_deal()  # not required: nothing raised


BASE = '[table]\nid = "t"\nseats = 7\n[devices.shuffler]\nurl = "loop://"\n[devices.shoe]\nurl = "loop://"\n'


def test_the_gaming_day_section_is_checked_with_file_and_line():
    cfg = parse_config(BASE + '[gaming_day]\nstart_hour = 4\ntimezone = "America/Chicago"\nshift_hours = 6\n',
                       "table.toml")
    assert (cfg.gaming_day.start_hour, cfg.gaming_day.timezone, cfg.gaming_day.shift_hours) == (4, "America/Chicago", 6)
    assert parse_config(BASE).gaming_day.start_hour == 6
    for text, line, what in (("start_hour = 24\n", 9, "gaming_day.start_hour: 24 is out of range"),
                             ('timezone = "Mars/Olympus"\n', 9, "is not a time zone"),
                             ('timezone = "../../etc/passwd"\n', 9, "is not a time zone"),
                             ("shift_hours = 7\n", 9, "does not divide the day")):
        with pytest.raises(ConfigError) as e:
            parse_config(BASE + "[gaming_day]\n" + text, "table.toml")
        assert f"table.toml:{line}:" in str(e.value) and what in str(e.value), str(e.value)


def test_the_conductor_deals_no_round_on_a_closed_table_and_resumes_it_open_after_a_restart(tmp_path):
    """A simulated table with procedures required: closed, no round; opened by two people,
    rounds are dealt; a restarted controller finds it open; closed, no round again."""
    import queue

    from devices import CardShoe, Shuffler
    from protocols.cards import BackColour
    from simulators.table import SimulatedTable
    from table.controller import TableController, TableTiming
    from table.rules.settlement import Tables

    key = generate()

    def controller(sim, events, journal):
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        ctl = TableController(shuffler, shoe, events, sim.dealer,
                              DeckCustody([("A", BackColour.RED), ("B", BackColour.BLUE)]), seats=2,
                              ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=journal,
                              timing=TableTiming(event_timeout_s=3, settle_s=0.1), day_required=True)
        return ctl, (shuffler, shoe)

    path = tmp_path / "journal.sqlite3"
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=3) as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(path, key=key)
        ctl, links = controller(sim, events, journal)
        try:
            ctl.prepare()
            with pytest.raises(TableClosed):
                ctl.play_round()
            assert not [e for e in journal.entries("round")]  # nothing opened
            ctl.table_procedure("open", OPEN, dealer="dana", supervisor="sam")
            assert ctl.play_round().number == 1
            ctl.close()
        finally:
            for link in links:
                link.close()
            journal.close()
        journal = Journal(path, key=key)
        ctl, links = controller(sim, events, journal)
        try:
            ctl.prepare()
            assert ctl.day.is_open
            assert ctl.play_round().number == 2
            ctl.table_procedure("close", OPEN, dealer="dana", supervisor="sam")
            with pytest.raises(TableClosed):
                ctl.play_round()
            ctl.close()
        finally:
            for link in links:
                link.close()
            journal.close()
    assert verify(path).ok


def test_one_person_cannot_count_and_verify_a_drop_behind_a_trailing_line_break():
    """'C-1' and 'C-1\\n' were two people to the check ('$' matches before a final line break),
    so one person counted and verified a drop; a request id likewise took a line break."""
    day = TableDay("t1")
    drop = {"amount": 90_000, "gaming_day": "2026-12-01", "counted_by": "C-1", "verified_by": "C-1\n"}
    with pytest.raises(ProcedureError, match="verified_by"):
        day.prepare("drop", drop, dealer="dana", supervisor="sam")
    with pytest.raises(ProcedureError, match="request_id"):
        day.repeated("x\n", "drop", {**drop, "verified_by": "C-2"}, dealer="dana", supervisor="sam")


def test_an_empty_opening_or_closing_inventory_needs_the_supervisors_confirmation():
    """An opening inventory of $0 opened the table (a slip typed without its chips: the day's
    statistical win then counts every chip on the table as won): an empty opening or closing
    is refused unless the supervisor confirms the table truly holds no chips, and the
    confirmation is on the journaled slip."""
    day = TableDay("t1")
    for empty in ({}, {"2500": 0}):
        with pytest.raises(ProcedureError, match=r"empty \(\$0\).*empty_confirmed") as exc:
            day.prepare("open", {"inventory": empty}, dealer="dana", supervisor="sam")
        assert exc.value.code == "refused"
    with pytest.raises(ProcedureError, match="true or false"):
        day.prepare("open", {"inventory": {}, "empty_confirmed": "yes"}, dealer="dana", supervisor="sam")
    body = day.prepare("open", {"inventory": {}, "empty_confirmed": True}, dealer="dana", supervisor="sam")
    assert body["total"] == 0 and body["empty_confirmed"] is True
    day.apply(body)
    with pytest.raises(ProcedureError, match=r"empty \(\$0\)"):
        day.prepare("close", {"inventory": {}}, dealer="dana", supervisor="sam")
    body = day.prepare("close", {"inventory": {}, "empty_confirmed": True}, dealer="dana", supervisor="sam")
    assert body["empty_confirmed"] is True
    # a slip with chips needs no confirmation, and says none
    day2 = TableDay("t2")
    assert "empty_confirmed" not in day2.prepare("open", {"inventory": {"500": 1}}, dealer="dana", supervisor="sam")


def test_fills_and_credits_are_countersigned_by_the_dealer_who_holds_the_shift():
    """A fill countersigned by a dealer not on shift, or never at this table, was taken: a fill
    or credit is countersigned by the dealer who opened the shift or took it over."""
    day = TableDay("t1")
    day.apply(day.prepare("open", {"inventory": {"500": 10}}, dealer="dana", supervisor="sam"))
    for procedure in ("fill", "credit"):
        for other in ("olga", "never-here"):
            with pytest.raises(ProcedureError, match="dana, not " + other) as exc:
                day.prepare(procedure, {"amount": 500}, dealer=other, supervisor="sam")
            assert exc.value.code == "refused"
        day.apply(day.prepare(procedure, {"amount": 500}, dealer="dana", supervisor="sam"))
    day.apply(day.prepare("shift_change", {"inventory": {"500": 10}, "opener": "olga"}, dealer="dana",
                          supervisor="sam"))
    with pytest.raises(ProcedureError, match="olga, not dana"):  # dana's shift is over
        day.prepare("fill", {"amount": 500}, dealer="dana", supervisor="sam")
    assert day.prepare("fill", {"amount": 500}, dealer="olga", supervisor="sam")["dealer"] == "olga"
