"""The gaming day's procedures through the table's front doors (issue 27, point 1): open, shift
change, fill, credit, close and drop over the control socket and the Python API, each signed
by a dealer and a supervisor of the people file, both proven; one person signing twice, a
dealer alone, a wrong PIN refused, nothing journaled then, no PIN ever journaled; a closed
table deals no round and says it waits to be opened; a restart finds the table as people left
it; the day_report query with its series."""

from __future__ import annotations

import os
import queue
import threading
from contextlib import contextmanager

import pytest

from console_helpers import CHEAP, wait_until
from tests.day_helpers import gaming_day_of
from devices import CardShoe, Shuffler
from protocols.cards import BackColour
from simulators.table import SimulatedTable
from table.console import Console
from table.controller import TableController, TableTiming
from table.custody import DeckCustody
from table.day.gaming_day import ENTRY_KIND
from table.interfaces.auth import Authenticator, PeopleFile
from table.interfaces.control_socket import ControlSocket, send
from table.interfaces.day_view import DayReportQueries
from table.interfaces.terminal import pin_checker
from table.journal import Journal, verify
from table.keys import generate
from table.roles import Role
from table.rules.settlement import Tables

KEY = generate()
PINS = {"D-4": "482913", "D-5": "318406", "S-17": "739201", "S-18": "615048",
        # the count room's people (people of the people file with a role: counted_by, verified_by)
        "C-1": "204816", "C-2": "930517", "C-3": "771204"}
OPEN = {"inventory": {"2500": 40, "500": 100, "100": 200}}  # $1,000 + $500 + $200 = $1,700
CLOSE = {"inventory": {"2500": 42, "500": 96, "100": 200}}  # $1,050 + $480 + $200 = $1,730


def people(tmp_path):
    os.chmod(tmp_path, 0o700)
    p = PeopleFile(tmp_path / "people.toml")
    for person, pin in PINS.items():
        role = {"D": Role.DEALER, "C": Role.AUDITOR}.get(person[0], Role.SUPERVISOR)
        p.add(person, role, pin, hasher=CHEAP)
    return Authenticator(tmp_path / "people.toml", hasher=CHEAP)


def signed(procedure, slip=None, *, dealer="D-4", supervisor="S-17", **over):
    req = {"action": "table_procedure", "procedure": procedure, "slip": slip or {}, "dealer": dealer,
           "dealer_pin": PINS.get(dealer, "000000"), "supervisor": supervisor, "pin": PINS.get(supervisor, "000000")}
    req.update(over)
    return req


class Running:
    """A table (simulated devices) whose procedures are required, its rounds dealt in a
    thread until :meth:`stop`, with a control socket proving people by the people file."""

    def __init__(self, tmp_path, auth, *, auto_dealer=True, seed=7, sim=None, rounds=None):
        self.rounds = rounds  # None: until stop()
        self.tmp = tmp_path
        self.own_sim = sim is None
        self.sim = sim or SimulatedTable((BackColour.RED, BackColour.BLUE), seed=seed).__enter__()
        self.events: queue.Queue = queue.Queue()
        self.journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        self.links = [Shuffler.open(self.sim.shuffler_url, events=self.events, name="shuffler", ack_on_delivery=False),
                      CardShoe.open(self.sim.shoe_url, events=self.events, name="shoe", ack_on_delivery=False)]
        self.console = Console()
        self.ctl = TableController(*self.links, self.events, self.sim.dealer,
                                   DeckCustody([("A", BackColour.RED), ("B", BackColour.BLUE)]), seats=2,
                                   ante_cents=1000, tables=Tables.load("pa-649a12b-1"), journal=self.journal,
                                   console=self.console, auto_dealer=auto_dealer, day_required=True,
                                   timing=TableTiming(event_timeout_s=5, settle_s=0.1))
        self.sock = ControlSocket(tmp_path / "ctl.sock", self.console,
                                  prove=pin_checker(auth, source="control-socket", origin="other"))
        self.sock.dispatcher.queries.update(DayReportQueries(self.journal.path, self.ctl.tables).handlers())
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(60)

    def _run(self):
        try:
            self.ctl.prepare()
            self.ready.set()
            n = 0
            while not self.stopping.is_set() and (self.rounds is None or n < self.rounds):
                self.ctl.play_round()
                n += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            self.ready.set()

    def send(self, req, timeout_s=60):
        return send(self.sock.path, req, timeout_s)

    def status(self):
        return self.send({"action": "status"})

    def slips(self):
        return [e.body for e in self.journal.entries(ENTRY_KIND)]

    def stop(self):
        """Stop after the round in play (open the table first if it waits to be opened)."""
        self.stopping.set()
        if self.thread.is_alive() and not self.status()["table_day"]["open"]:
            # a closed table waits to be opened: open it to stop, once it asks again (a
            # refused procedure is answered before the table's next wait is posted)
            wait_until(lambda: not self.thread.is_alive()
                       or (self.status().get("waiting_for") or {}).get("action") == "table_procedure",
                       60, "the closed table to wait for its opening")
            if self.thread.is_alive():
                assert self.send(signed("open", OPEN))["ok"]
        self.thread.join(60)
        assert not self.thread.is_alive() and not self.errors, self.errors
        self.ctl.close()
        self.sock.close()
        for link in self.links:
            link.close()
        self.journal.close()
        if self.own_sim:
            self.sim.__exit__(None, None, None)


@contextmanager
def running(tmp_path, auth, **kw):
    t = Running(tmp_path, auth, **kw)
    try:
        yield t
    finally:
        t.stop()
    assert verify(tmp_path / "journal.sqlite3").ok


def played(t, n):
    return wait_until(lambda: t.status()["rounds_played"] >= n, 60, f"{n} rounds played")


def test_every_procedure_over_the_control_socket_signed_by_two_people_proven(tmp_path):
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        st = t.status()
        # Closed: no round is dealt, and the table says what it waits for (not an error loop).
        assert {k: v for k, v in st["table_day"].items() if k != "gaming_day"} == {"open": False, "shift": 0, "last_slip": 0, "required": True}
        assert st["waiting_for"]["action"] == "table_procedure" and "open the table" in st["waiting_for"]["what"]
        assert st["round"] is None and not list(t.journal.entries("round"))
        opened = t.send(signed("open", OPEN))
        assert opened["ok"], opened
        # the opening names the gaming day it opened (a drop is taken only for such a day)
        assert opened["slip"].pop("gaming_day") == gaming_day_of(t.journal.last(ENTRY_KIND).ts)
        assert opened["slip"] == {"procedure": "open", "slip": 1, "dealer": "D-4", "supervisor": "S-17",
                                  "inventory": {"2500": 40, "500": 100, "100": 200}, "total": 170_000}
        played(t, 1)
        # While rounds are dealt, a procedure waits for the round's end and is answered then.
        assert t.send(signed("fill", {"amount": 50_000}))["slip"]["amount"] == 50_000
        assert t.send(signed("credit", {"amount": 20_000}, supervisor="S-18"))["slip"]["supervisor"] == "S-18"
        # The incoming dealer signs too: with no PIN, a wrong one, as a supervisor, or as the outgoing
        # dealer it is refused (before, any id was taken, a supervisor or nobody: a fresh review's find).
        shift_slip = {"inventory": OPEN["inventory"], "opener": "D-5"}
        wrong = "the incoming dealer (slip.opener, opener_pin): unknown person or wrong PIN"
        for opener, pin, why in (("D-5", None, wrong), ("D-5", "999999", wrong),
                                 ("S-18", PINS["S-18"], "is supervisor"), ("D-4", PINS["D-4"], "outgoing dealer"),
                                 ("NOBODY", "1234", "unknown person")):
            ask = signed("shift_change", {**shift_slip, "opener": opener})
            if pin is not None:
                ask["opener_pin"] = pin
            refused = t.send(ask)
            assert not refused["ok"] and why in refused["error"], (opener, refused)
        shift = t.send(signed("shift_change", shift_slip, opener_pin=PINS["D-5"]))
        assert shift["ok"] and shift["slip"]["shift"] == 2 and shift["slip"]["opener"] == "D-5"
        assert all("opener_pin" not in str(b) and PINS["D-5"] not in str(b) for b in t.slips())  # never journaled
        played(t, t.status()["rounds_played"] + 1)
        closed = t.send(signed("close", CLOSE, dealer="D-5"))
        assert closed["ok"] and closed["slip"]["total"] == 173_000
        st = wait_until(lambda: (s := t.status())["waiting_for"] and s, 30, "the table to say what it waits for")
        assert {k: v for k, v in st["table_day"].items() if k != "gaming_day"} == {"open": False, "shift": 2, "last_slip": 5, "required": True}
        assert st["waiting_for"]["action"] == "table_procedure" and st["round"] is None
        close_seq = t.journal.last(ENTRY_KIND).seq
        day = gaming_day_of(t.journal.last(ENTRY_KIND).ts)
        report = t.send({"action": "day_report", "period": "day", "gaming_day": day})
        drop = t.send(signed("drop", {"amount": 90_000, "gaming_day": day}))
        assert drop["ok"] and drop["slip"]["gaming_day"] == day
        # No round was opened on the closed table.
        assert not [e for e in t.journal.entries("round") if e.seq > close_seq]
        # The statistical win once the drop is in: closing 1,730 - opening 1,700 + credits 200 - fills 500 + drop 900.
        after = t.send({"action": "day_report", "period": "day", "gaming_day": day})
        assert report["ok"] and report["statistical"]["known"] is False
        assert after["statistical"]["known"] is True and after["statistical"]["win"] == 63_000
        assert len(after["series"]) == after["rounds"] == t.status()["rounds_played"]
        last = after["series"][-1]
        assert last["settled_cum_cents"] == after["settled_win"]
        assert last["band_lo_cents"] <= last["expected_cum_cents"] <= last["band_hi_cents"]
        assert last["expected_cum_cents"] == after["expected_win"]["cents"]
        shift_rep = t.send({"action": "day_report", "period": "shift", "gaming_day": day, "shift": 1})
        assert shift_rep["shift"] == 1 and len(shift_rep["series"]) == shift_rep["rounds"]
    raw = (tmp_path / "journal.sqlite3").read_bytes()
    for pin in PINS.values():
        assert pin.encode() not in raw  # PINs are never journaled


@pytest.mark.parametrize("request_, code, why", [
    (signed("open", OPEN, dealer="S-17"), "refused", "two people"),            # one person signing twice
    (signed("open", OPEN, supervisor="D-4", dealer="D-5"), "forbidden", "for supervisor"),  # dealers alone
    (signed("open", OPEN, dealer="S-18"), "forbidden", "countersigned by a dealer"),  # two supervisors
    (signed("open", OPEN, dealer_pin="999999"), "forbidden", "wrong PIN"),
    (signed("open", OPEN, pin="999999"), "forbidden", "wrong PIN"),
    ({k: v for k, v in signed("open", OPEN).items() if k != "dealer_pin"}, "bad_request", "dealer_pin is required"),
    ({k: v for k, v in signed("open", OPEN).items() if k != "pin"}, "forbidden", "give their PIN"),
    (signed("open", {"inventory": {"25.00": 4}}), "bad_request", "slip.inventory"),
    (signed("open", {"inventory": {"2500": -1}}), "bad_request", "slip.inventory.2500"),
    (signed("open", {"amount": 5}), "bad_request", "unknown key 'amount'"),
    (signed("open", {}), "bad_request", "inventory must be"),
    (signed("fill", {"amount": 5}), "refused", "closed"),
    (signed("drop", {"amount": 5}), "bad_request", "gaming_day"),
    (signed("count", OPEN), "bad_request", "procedure: must be one of"),
])
def test_a_procedure_not_signed_by_a_dealer_and_a_supervisor_proven_is_refused(tmp_path, request_, code, why):
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        r = t.send(request_)
        assert r["ok"] is False and r["code"] == code and why in r["error"], r
        assert t.slips() == [] and t.status()["table_day"]["open"] is False


def test_a_real_table_takes_procedures_before_the_first_bet_and_waits_when_closed(tmp_path):
    """A real table opens each round for bets as the last one ends: a fill then is carried
    out (no bet placed yet), refused once a bet is placed; closed, the round open for bets
    takes no bet until the table is opened again."""
    auth = people(tmp_path)
    with running(tmp_path, auth, auto_dealer=False) as t:
        assert t.send(signed("open", OPEN))["ok"]
        wait_until(lambda: (t.status()["waiting_for"] or {}).get("action") == "close_bets", 30, "bets open")
        assert "table_procedure" in t.status()["waiting_for"]["accepts"]
        fill = t.send(signed("fill", {"amount": 10_000}))
        assert fill["ok"], fill
        (entry,) = [e for e in t.journal.entries(ENTRY_KIND) if e.body["procedure"] == "fill"]
        assert entry.round_id is None  # journaled outside the round open for bets
        assert t.send({"action": "place_bets", "seat": 1, "ante": 1000})["ok"]
        late = t.send(signed("fill", {"amount": 10_000}))
        assert late["ok"] is False and "bets are placed" in late["error"]
        assert t.send({"action": "close_bets"})["ok"]
        wait_until(lambda: (t.status()["waiting_for"] or {}).get("action") == "confirm_collect", 30, "the collect")
        assert t.send({"action": "confirm_collect"})["ok"]
        wait_until(lambda: (t.status()["waiting_for"] or {}).get("action") == "close_bets", 30, "the next round")
        assert t.send(signed("close", CLOSE))["ok"]
        st = wait_until(lambda: (s := t.status())["waiting_for"] and s, 30, "the table to say what it waits for")
        assert st["table_day"]["open"] is False and st["waiting_for"]["action"] == "table_procedure"
        assert "open the table" in st["waiting_for"]["what"]
        refused = t.send({"action": "place_bets", "seat": 1, "ante": 1000})
        assert refused["ok"] is False and refused["code"] == "not_expected" and "open the table" in refused["error"]
        assert t.send(signed("open", OPEN))["ok"]
        wait_until(lambda: (t.status()["waiting_for"] or {}).get("action") == "close_bets", 30, "bets again")
        t.stopping.set()
        assert t.send({"action": "place_bets", "seat": 1, "ante": 1000})["ok"]
        assert t.send({"action": "close_bets"})["ok"]
        wait_until(lambda: (t.status()["waiting_for"] or {}).get("action") == "confirm_collect", 30, "the collect")
        assert t.send({"action": "confirm_collect"})["ok"]


def test_a_restarted_table_stays_open_and_deals_without_a_new_slip(tmp_path):
    auth = people(tmp_path)
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=5) as sim:  # the same devices, restarted controller
        t = Running(tmp_path, auth, sim=sim)
        try:
            assert t.send(signed("open", OPEN))["ok"]
            played(t, 1)
        finally:
            t.stop()
        with running(tmp_path, auth, sim=sim) as again:
            st = again.status()
            assert {k: v for k, v in st["table_day"].items() if k != "gaming_day"} == {"open": True, "shift": 1, "last_slip": 1, "required": True}
            played(again, st["rounds_played"] + 1)
            assert len(again.slips()) == 1


def test_the_python_api_opens_fills_closes_and_enters_the_drop_with_the_config_requiring_it(tmp_path):
    """table.api.Table from a config whose [gaming_day] requires the procedures: closed at
    start (waiting, no round), opened by two people, a fill and a credit while rounds are
    dealt, closed (waiting again), the drop entered; one person signing twice refused."""
    from table.api import CommandRefused, Table
    from table.config import parse_config
    from tables import table_toml

    cfg_path = tmp_path / "table.toml"
    cfg_path.write_text(table_toml("t-day", 2, "/dev/threecard/shuffler", "/dev/threecard/shoe",
                                   f'[journal]\npath = "{tmp_path / "journal.sqlite3"}"\n'
                                   "[gaming_day]\nprocedures_required = true\n"))
    assert parse_config(cfg_path.read_text(), cfg_path).gaming_day.procedures_required is True
    with Table(cfg_path, simulate=True, seed=4, rounds=None) as t:
        st = t.status()
        assert st["table_day"]["open"] is False and st["waiting_for"]["action"] == "table_procedure"
        assert st["rounds_played"] == 0
        with pytest.raises(CommandRefused, match="two people"):
            t.table_procedure("open", OPEN, dealer="S-17", supervisor="S-17")
        assert t.table_procedure("open", OPEN, dealer="D-4", supervisor="S-17")["slip"]["total"] == 170_000
        wait_until(lambda: t.status()["rounds_played"] >= 1, 60, "a round")
        assert t.table_procedure("fill", {"amount": 50_000}, dealer="D-4", supervisor="S-17")["slip"]["slip"] == 2
        assert t.table_procedure("credit", {"amount": 20_000}, dealer="D-4", supervisor="S-18")["ok"]
        assert t.table_procedure("close", CLOSE, dealer="D-4", supervisor="S-17")["ok"]
        st = wait_until(lambda: (s := t.status())["waiting_for"] and s, 30, "the table to say what it waits for")
        assert {k: v for k, v in st["table_day"].items() if k != "gaming_day"} == {"open": False, "shift": 1, "last_slip": 4, "required": True}
        played = st["rounds_played"]
        day = gaming_day_of(t.controller.journal.last(ENTRY_KIND).ts)
        assert t.table_procedure("drop", {"amount": 90_000, "gaming_day": day}, dealer="D-4",
                                 supervisor="S-17")["slip"]["gaming_day"] == day
        assert t.status()["rounds_played"] == played  # a closed table deals no round
        assert t.table_procedure("open", OPEN, dealer="D-4", supervisor="S-17")["ok"]  # opened again after the count


def test_guessing_a_dealer_pin_on_the_web_is_locked_out_like_a_sign_in(tmp_path):
    """The attack: a supervisor signed in on the web (or anyone holding a supervisor's
    session) tries dealer PINs through table_procedure's countersignature, which the
    sign-in's lock-out would otherwise stop. The countersignature's check is the sign-in's,
    with the same counts: after max_failures wrong PINs the dealer is locked out there, and
    at the sign-in too."""
    import json
    import urllib.error
    import urllib.request

    from table.interfaces.dispatch import Dispatcher
    from table.interfaces.serving import FrontDoorLoop
    from table.interfaces.web import WebFrontDoor

    os.chmod(tmp_path, 0o700)
    p = PeopleFile(tmp_path / "people.toml")
    p.add("D-4", Role.DEALER, PINS["D-4"], hasher=CHEAP)
    p.add("S-17", Role.SUPERVISOR, PINS["S-17"], hasher=CHEAP)
    auth = Authenticator(tmp_path / "people.toml", hasher=CHEAP, max_failures=3, lockout_s=600)
    front = FrontDoorLoop("test-day-web")
    door = WebFrontDoor("127.0.0.1", 0, Dispatcher(Console(), front, reply_timeout_s=2), auth, front)

    def call(path, body, token=None):
        h = {"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})}
        req = urllib.request.Request(door.url + path, method="POST", data=json.dumps(body).encode(), headers=h)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    try:
        status, body = call("/api/v1/session", {"person": "S-17", "pin": PINS["S-17"]})
        token = body["token"]
        guess = {"procedure": "open", "slip": OPEN, "dealer": "D-4"}
        for wrong in ("111111", "222222", "333333"):
            status, body = call("/api/v1/commands/table_procedure", {**guess, "dealer_pin": wrong}, token)
            assert status == 403 and "wrong PIN" in body["error"], body
        status, body = call("/api/v1/commands/table_procedure", {**guess, "dealer_pin": PINS["D-4"]}, token)
        assert status == 429 and body["code"] == "locked", body
        status, body = call("/api/v1/session", {"person": "D-4", "pin": PINS["D-4"]})
        assert status == 429, body
    finally:
        door.close()
        front.close()


def test_the_terminal_opens_fills_closes_and_enters_the_drop_asking_both_pins(tmp_path):
    """The terminal's gaming-day lines: the dealer named and the terminal's supervisor each
    give their PIN (read as a PIN is, never echoed back by the terminal's answers); a wrong
    dealer PIN or a supervisor named as the dealer is refused and nothing journaled."""
    import io

    from table.interfaces.terminal import KeyConsole

    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        read_fd, write_fd = os.pipe()
        out = io.StringIO()
        with os.fdopen(read_fd, "r") as keys_in, os.fdopen(write_fd, "w") as keys:
            KeyConsole(t.console, "S-17", keys_in, out, pin_check=pin_checker(auth))

            def typed(text, expect):
                keys.write(text)
                keys.flush()
                wait_until(lambda: expect in out.getvalue(), 30, f"the terminal to say {expect!r}")

            wait_until(lambda: "open DEALER" in out.getvalue(), 10, "the prompt to open the table")
            typed(f"open D-4 25:40 5:100 1:200\n999999\n", "open refused: the dealer: unknown person or wrong PIN")
            typed(f"open S-18 25:40\n{PINS['S-18']}\n", "S-18 is not a dealer")
            assert t.slips() == []
            typed(f"open D-4 25:40 5:100 1:200\n{PINS['D-4']}\n{PINS['S-17']}\n",
                  "open: slip 1 signed by D-4 and S-17 (total $1,700)")
            played(t, 1)
            typed(f"fill D-4 500\n{PINS['D-4']}\n{PINS['S-17']}\n", "fill: slip 2 signed by D-4 and S-17 ($500)")
            typed(f"credit D-4 12.50\n{PINS['D-4']}\n{PINS['S-17']}\n", "credit: slip 3")
            typed(f"shift D-4 D-5 25:40 5:100 1:200\n{PINS['D-4']}\n{PINS['D-5']}\n{PINS['S-17']}\n",
                  "shift change: slip 4")
            typed(f"close D-5 25:42 5:96 1:200\n{PINS['D-5']}\n{PINS['S-17']}\n", "close: slip 5")
            day = gaming_day_of(t.journal.last(ENTRY_KIND).ts)
            typed(f"drop D-4 {day} 900\n{PINS['D-4']}\n{PINS['S-17']}\n", f"drop: slip 6 signed by D-4 and S-17 "
                                                                       f"($900 for {day})")
            typed("fill D-4 lots\n", "table procedure: the fill: 'lots' is not an amount")
            assert [b["procedure"] for b in t.slips()] == ["open", "fill", "credit", "shift_change", "close", "drop"]
            assert t.slips()[2]["amount"] == 1250
            for pin in PINS.values():
                assert pin not in out.getvalue().replace("999999", "")  # nothing typed is echoed back


def _import(t, tmp_path, text, name="count.csv", pins=None):
    from click.testing import CliRunner

    from table.cli import main

    path = tmp_path / name
    path.write_text(text)
    pins = pins or (PINS["S-17"], PINS["D-4"])
    return CliRunner().invoke(main, ["day", "drop-import", "--control-socket", str(t.sock.path), "--supervisor",
                                     "S-17", "--dealer", "D-4", "--pins-from-stdin", str(path)],
                              input="\n".join(pins) + "\n")


HEADER = "gaming_day,table_id,amount_cents,counted_by,verified_by\n"


def test_the_count_rooms_csv_is_imported_as_drops_signed_by_two_people(tmp_path):
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        table_id = t.ctl.table_id
        assert t.send(signed("open", OPEN))["ok"]
        played(t, 1)
        assert t.send(signed("close", CLOSE))["ok"]
        day = gaming_day_of(t.journal.last(ENTRY_KIND).ts)
        # (a row for a day the table never opened is refused: test_a_drop_is_taken_only_for_a_day_opened...)
        good = f"{HEADER}{day},{table_id},90000,C-1,C-3\n"
        r = _import(t, tmp_path, good)
        assert r.exit_code == 0, r.output
        assert f"{day}: drop $900.00 journaled" in r.output
        drops = [b for b in t.slips() if b["procedure"] == "drop"]
        assert [(b["gaming_day"], b["amount"], b["counted_by"], b["verified_by"], b["dealer"], b["supervisor"])
                for b in drops] == [(day, 90000, "C-1", "C-3", "D-4", "S-17")]
        rep = t.send({"action": "day_report", "period": "day", "gaming_day": day})
        assert rep["statistical"]["known"] is True and rep["statistical"]["drop"] == 90000


def test_a_bad_count_file_imports_nothing_and_names_file_line_and_column(tmp_path):
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        tid = t.ctl.table_id
        ok = f"2026-11-29,{tid},1000,C-1,C-2\n"
        for text, where in [
            (f"{HEADER}{ok}2026-11-30,pit9-tcp-02,1000,C-1,C-2\n", "bad.csv:3: column table_id"),
            (f"{HEADER}{ok}2026-02-30,{tid},1000,C-1,C-2\n", "bad.csv:3: column gaming_day"),
            (f"{HEADER}{ok}2026-11-30,{tid},12.50,C-1,C-2\n", "bad.csv:3: column amount_cents"),
            (f"{HEADER}{ok}2026-11-30,{tid},1000,C-1,C-1\n", "bad.csv:3: column verified_by: C-1 cannot both"),
            (f"{HEADER}{ok}2026-11-30,{tid},1000,C 1,C-2\n", "bad.csv:3: column counted_by"),
            (f"{HEADER}{ok}{ok}", "bad.csv:3: column gaming_day: 2026-11-29 is also on line 2"),
            (f"{HEADER}{ok}2026-11-30,{tid},1000,C-1\n", "bad.csv:3: 4 cells"),
            (f"day,table,amount\n{ok}", "bad.csv:1: the header must be"),
            (HEADER, "bad.csv:2: no row"),
            # digits of other scripts, and a line break inside a quoted cell (a fresh review's finds:
            # '²' crashed the import, '٥٠٠' was journaled as $5.00, a quoted date's newline was stripped)
            (f"{HEADER}{ok}2026-11-30,{tid},²,C-1,C-2\n", "bad.csv:3: column amount_cents"),
            (f"{HEADER}{ok}2026-11-30,{tid},٥٠٠,C-1,C-2\n", "bad.csv:3: column amount_cents"),
            (f"{HEADER}{ok}٢026-11-30,{tid},500,C-1,C-2\n", "bad.csv:3: column gaming_day"),
            (f'{HEADER}{ok}"2026-11-30\n",{tid},500,C-1,C-2\n', "bad.csv:3: column gaming_day: "),
        ]:
            r = _import(t, tmp_path, text, "bad.csv")
            assert r.exit_code == 2 and where in r.output, (where, r.output)
        # a table still open takes no drop; a wrong PIN imports nothing
        assert t.send(signed("open", OPEN))["ok"]
        r = _import(t, tmp_path, f"{HEADER}{ok}")
        assert r.exit_code == 2 and "the table is open" in r.output
        played(t, 1)
        assert t.send(signed("close", CLOSE))["ok"]
        r = _import(t, tmp_path, f"{HEADER}{ok}", pins=(PINS["S-17"], "999999"))
        assert r.exit_code == 2 and "nothing imported" in r.output and "wrong PIN" in r.output
        assert not [b for b in t.slips() if b["procedure"] == "drop"]


def test_tablectl_run_with_procedures_required_and_nobody_to_open_the_table_stops_saying_so(tmp_path):
    """No front door to open a closed table: the run ends at once (exit 3) saying why, never
    a spin or an unexpected error."""
    import subprocess

    from console_helpers import tablectl
    from tables import table_toml

    cfg = tmp_path / "table.toml"
    cfg.write_text(table_toml("t1", 2, "/dev/threecard/shuffler", "/dev/threecard/shoe",
                              "[gaming_day]\nprocedures_required = true\n"))
    run = subprocess.run(tablectl() + ["run", "--simulate", "--config", str(cfg), "--journal",
                                       str(tmp_path / "j.sqlite3"), "--rounds", "1", "--log-format", "json"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr[-2000:]
    assert "the table is closed: open it first" in run.stderr


def test_a_stopped_tables_journal_takes_the_count_rooms_drops_all_or_none(tmp_path):
    """--journal: the table stopped after its close; a bad row imports nothing, a wrong PIN
    nothing; a good file journals every row, and the restarted table verifies and reports it."""
    from click.testing import CliRunner

    from table.cli import main

    auth = people(tmp_path)
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=6) as sim:
        t = Running(tmp_path, auth, sim=sim, rounds=1)
        try:
            assert t.send(signed("open", OPEN))["ok"]
            t.thread.join(60)  # its one round dealt: the controller is between rounds, idle
            t.ctl.table_procedure("close", CLOSE, dealer="D-4", supervisor="S-17")
            table_id, day = t.ctl.table_id, gaming_day_of(t.journal.last(ENTRY_KIND).ts)
        finally:
            t.stop()
        key = tmp_path / "table.key"
        from table.keys import save

        save(KEY, key)
        path = tmp_path / "count.csv"

        def run(text, pins=(PINS["S-17"], PINS["D-4"])):
            path.write_text(text)
            return CliRunner().invoke(main, ["day", "drop-import", "--journal", str(tmp_path / "journal.sqlite3"),
                                             "--table-key", str(key), "--people-file", str(tmp_path / "people.toml"),
                                             "--supervisor", "S-17", "--dealer", "D-4", "--pins-from-stdin",
                                             str(path)], input="\n".join(pins) + "\n")

        good = f"{HEADER}{day},{table_id},90000,C-1,C-2\n"
        r = run(good + f"2026-11-30,other-table,1,C-1,C-2\n")
        assert r.exit_code == 2 and "count.csv:3: column table_id" in r.output, r.output
        r = run(good, pins=("999999", PINS["D-4"]))
        assert r.exit_code == 2 and "nothing imported" in r.output, r.output
        r = run(good)
        assert r.exit_code == 0 and f"{day}: drop $900.00 journaled" in r.output, r.output
        with Journal(tmp_path / "journal.sqlite3", read_only=True) as j:
            drops = [e.body for e in j.entries(ENTRY_KIND) if e.body["procedure"] == "drop"]
        assert [(b["gaming_day"], b["amount"], b["counted_by"]) for b in drops] == [(day, 90000, "C-1")]
        with running(tmp_path, auth, sim=sim) as again:  # the next start signs the entries
            rep = again.send({"action": "day_report", "period": "day", "gaming_day": day})
            assert rep["statistical"]["known"] is True and rep["statistical"]["drop"] == 90000
            assert again.status()["table_day"]["open"] is False
            assert again.send(signed("open", OPEN))["ok"]


def test_a_fill_retried_after_its_answer_was_lost_makes_no_second_slip_also_after_a_restart(tmp_path):
    """A front door that lost the answer (a dropped connection, a timeout) sends the same ask
    again with the same request_id: the table answers with the first slip, journals no second
    fill (two fills on the record for one fill of chips would move the statistical win by the
    fill, COMAR 36.05.03.10), refuses that id for a different ask, and still knows it after
    a restart."""
    auth = people(tmp_path)
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=5) as sim:
        t = Running(tmp_path, auth, sim=sim)
        try:
            assert t.send(signed("open", OPEN, request_id="web-open-1"))["ok"]
            first = t.send(signed("fill", {"amount": 50_000}, request_id="web-fill-1"))
            assert first["ok"] and "repeated" not in first, first
            again = t.send(signed("fill", {"amount": 50_000}, request_id="web-fill-1"))
            assert again["ok"] and again["repeated"] is True and again["slip"] == first["slip"], again
            other = t.send(signed("fill", {"amount": 70_000}, request_id="web-fill-1"))
            assert other["ok"] is False and other["code"] == "refused" and "already used for slip 2" in other["error"]
            assert t.send(signed("fill", {"amount": 50_000}, request_id="web-fill-2"))["slip"]["slip"] == 3  # new ask
            bad = t.send(signed("fill", {"amount": 50_000}, request_id="no spaces"))
            assert bad["ok"] is False and bad["code"] == "bad_request" and "request_id" in bad["error"]
        finally:
            t.stop()
        with running(tmp_path, auth, sim=sim) as t2:
            late = t2.send(signed("fill", {"amount": 50_000}, request_id="web-fill-1"))
            assert late["ok"] and late["repeated"] is True and late["slip"]["slip"] == 2, late
            assert t2.status()["table_day"]["last_slip"] == 3
            day = gaming_day_of(t2.journal.last(ENTRY_KIND).ts)
            report = t2.send({"action": "day_report", "period": "day", "gaming_day": day})
            assert report["ok"] and report["statistical"]["fills"] == 100_000, report["statistical"]


def test_a_drop_is_taken_only_for_a_day_opened_and_one_entered_again_is_a_flagged_correction(tmp_path):
    """Drops for 2099-12-31 (not begun), 1970-01-01 and the day before (never opened) are
    refused by the screen's API (table_procedure) and by `day drop-import`, nothing journaled;
    the day opened takes its drop; the same day's drop entered again is journaled as a
    correction of the earlier slip (`corrects`) and the day report flags it (an attacker's
    finds: all were taken, and the second drop silently replaced the first)."""
    from datetime import date, timedelta

    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        opened = t.send(signed("open", OPEN))
        assert opened["ok"]
        played(t, 1)
        assert t.send(signed("close", CLOSE))["ok"]
        day = opened["slip"]["gaming_day"]
        assert day == gaming_day_of(t.journal.last(ENTRY_KIND).ts)
        before = (date.fromisoformat(day) - timedelta(days=1)).isoformat()
        for bad, why in (("2099-12-31", "has not begun"), ("1970-01-01", "not opened on gaming day 1970-01-01"),
                         (before, f"not opened on gaming day {before}")):
            refused = t.send(signed("drop", {"amount": 90_000, "gaming_day": bad}))
            assert not refused["ok"] and why in refused["error"], refused
            r = _import(t, tmp_path, f"{HEADER}{bad},{t.ctl.table_id},90000,C-1,C-2\n")
            assert r.exit_code == 2 and why in r.output and "nothing imported" in r.output, r.output
        assert not [b for b in t.slips() if b["procedure"] == "drop"]
        first = t.send(signed("drop", {"amount": 90_000, "gaming_day": day}))
        assert first["ok"] and "corrects" not in first["slip"]
        again = t.send(signed("drop", {"amount": 95_000, "gaming_day": day}))
        assert again["ok"] and again["slip"]["corrects"] == first["slip"]["slip"]
        rep = t.send({"action": "day_report", "period": "day", "gaming_day": day})
        assert any("entered again" in f and f"corrects slip {first['slip']['slip']}" in f for f in rep["flags"])
        assert rep["statistical"]["drop"] == 95_000


def test_a_count_file_past_the_limit_is_refused_whole_naming_the_limit(tmp_path):
    """`day drop-import` read the first 1 MiB of a file and imported it, the rest silently left
    out (exit 0): a file past the limit is refused, nothing imported, the limit named; the
    table is never asked (no socket: the file is checked first)."""
    from click.testing import CliRunner

    from table.cli import main
    from table.day.gaming_day import MAX_DROP_FILE_BYTES

    row = "2026-12-01,t1,90000,C-1,C-2\n"
    path = tmp_path / "count.csv"
    # a good first row, then bytes past the limit: read in part, the first row alone was imported
    path.write_text(HEADER + row + "x" * MAX_DROP_FILE_BYTES)
    r = CliRunner().invoke(main, ["day", "drop-import", "--control-socket", str(tmp_path / "none.sock"),
                                  "--supervisor", "S-17", "--dealer", "D-4", "--pins-from-stdin", str(path)],
                           input="1\n2\n")
    assert r.exit_code == 2, r.output
    assert "nothing imported" in r.output and str(MAX_DROP_FILE_BYTES) in r.output, r.output


def test_the_count_rooms_ids_are_people_of_the_people_file_compared_case_folded(tmp_path):
    """`C-1` and `c-1` passed as two people counting and verifying one drop, and ids nobody
    holds were journaled: the count room's ids must be people of the people file with a role,
    compared case-folded, at the screen's API and in `day drop-import` (online and offline)."""
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        opened = t.send(signed("open", OPEN))
        played(t, 1)
        assert t.send(signed("close", CLOSE))["ok"]
        day, tid = opened["slip"]["gaming_day"], t.ctl.table_id
        for counted, verified, why in (("C-1", "c-1", "cannot both count and verify"),
                                       ("C-1", "C-9", "C-9' is no person of the people file"),
                                       ("nobody", "C-2", "nobody' is no person of the people file")):
            slip = {"amount": 90_000, "gaming_day": day, "counted_by": counted, "verified_by": verified}
            refused = t.send(signed("drop", slip))
            assert not refused["ok"] and why in refused["error"], refused
            r = _import(t, tmp_path, f"{HEADER}{day},{tid},90000,{counted},{verified}\n")
            assert r.exit_code == 2 and why in r.output, r.output
        assert not [b for b in t.slips() if b["procedure"] == "drop"]
        r = _import(t, tmp_path, f"{HEADER}{day},{tid},90000,c-1,C-2\n")
        assert r.exit_code == 0, r.output


def test_a_table_closed_and_opened_again_in_a_day_starts_its_next_shift_on_every_screen_and_report(tmp_path):
    """After a close and a re-open in one gaming day the banner said "shift 1" while the
    report's "this shift" was shift 2 and mixed both sessions' rounds: the re-opening starts
    the day's next shift, the same number in the status (the screens' banner) and the
    day_report query, and that shift holds only the second session's rounds."""
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        assert t.send(signed("open", OPEN))["ok"]
        played(t, 1)
        assert t.send(signed("close", CLOSE))["ok"]
        wait_until(lambda: (t.status().get("waiting_for") or {}).get("action") == "table_procedure", 30,
                   "the closed table to wait for its opening")
        first = t.status()["rounds_played"]
        assert t.send(signed("open", OPEN))["ok"]
        assert t.status()["table_day"]["shift"] == 2
        played(t, first + 1)
        assert t.send(signed("close", CLOSE))["ok"]
        day = gaming_day_of(t.journal.last(ENTRY_KIND).ts)
        rep = t.send({"action": "day_report", "period": "day", "gaming_day": day})
        shifts = {s["shift"]: s["rounds"] for s in rep["shifts"]}
        assert shifts == {1: first, 2: rep["rounds"] - first}, shifts
        this = t.send({"action": "day_report", "period": "shift", "gaming_day": day, "shift": 2})
        assert this["rounds"] == rep["rounds"] - first
        assert t.status()["table_day"]["shift"] == 2


def test_a_shift_change_ends_the_outgoing_dealers_sessions(tmp_path):
    """After a shift change the outgoing dealer was still signed in at the screens and placed a
    bet: the shift handed over (journaled) ends every session of the outgoing dealer; the
    incoming dealer's and the supervisor's stay."""
    auth = people(tmp_path)
    with running(tmp_path, auth) as t:
        assert t.send(signed("open", OPEN))["ok"]
        outgoing, _ = auth.sign_in("D-4", PINS["D-4"], source="http", origin="table")
        incoming, _ = auth.sign_in("D-5", PINS["D-5"], source="http", origin="table")
        boss, _ = auth.sign_in("S-17", PINS["S-17"], source="http", origin="table")
        played(t, 1)
        assert auth.session(outgoing) is not None
        shift = t.send(signed("shift_change", {**OPEN, "opener": "D-5"}, opener_pin=PINS["D-5"]))
        assert shift["ok"], shift
        assert auth.session(outgoing) is None
        assert auth.session(incoming) is not None and auth.session(boss) is not None
        assert t.send(signed("close", CLOSE, dealer="D-5"))["ok"]
