"""Every scenario shipped in simulators/scenarios/ ends in the controller's documented response."""

from __future__ import annotations

import dataclasses

import datetime
import json
import random
import subprocess

import pytest

from table.hil.chaos import (
    STEP_KINDS,
    STEPS,
    ChaosTable,
    FaultInjector,
    ScenarioError,
    load_scenario,
    run_scenario,
    shipped_scenarios,
)
from table.journal import Journal
from table.keys import load_private_key
from tests.test_e2e_run import tablectl

SHIPPED = shipped_scenarios()


def test_the_issue_s_scenarios_are_shipped():
    names = {p.stem for p in SHIPPED}
    assert {"jam-third-shuffle", "foreign-card-round-5", "missing-card", "shoe-unplugged-2s",
            "unreadable-card", "previous-deck-left-in-rack"} <= names
    # issue 24, point 7: the seed-2 soak's extra alarm (a shoe's resend given too little time)
    assert "noise-eats-the-shoe-load" in names


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_scenario_ends_in_its_documented_response(path):
    sc = load_scenario(path)
    assert sc["expect"] and sc["description"].strip()
    result = run_scenario(path)
    assert result["passed"], result["differences"]


def test_tablectl_run_scenario(tmp_path):
    path = next(p for p in SHIPPED if p.stem == "unreadable-card")
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--scenario", str(path), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["passed"] is True
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(path.read_text().replace('supervisor = ["confirm_card"]', 'supervisor = []'))
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--scenario", str(wrong)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "FAIL" in proc.stdout


def test_a_malformed_scenario_names_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nrounds = 2\nseed = 1\n[[fault]]\nround = 1\nkind = "gremlins"\n'
                   '[expect]\nheld_rounds = 0\n')
    with pytest.raises(ScenarioError, match=r"bad.toml: fault\[0\].kind: 'gremlins'; allowed: foreign_card"):
        load_scenario(bad)
    bad.write_text('name = "x"\nrounds = 2\nseed = 1\n[[fault]]\nround = 1\nkind = "jam"\nwhen = "deal"\n'
                   '[expect]\nheld_rounds = 0\n')
    with pytest.raises(ScenarioError, match=r"fault\[0\].when: unknown key; allowed: round, step, draw, kind, seconds"):
        load_scenario(bad)
    bad.write_text('name = "x"\nrounds = 1\nseed = 1\n')
    with pytest.raises(ScenarioError, match="expect: required"):
        load_scenario(bad)


# --- faults scheduled by round and step ------------------------------------------------


def _scenario(tmp_path, fault: str, *, rounds: int = 3, seed: int = 2, extra: str = "") -> tuple:
    """A scenario file with one ``[[fault]]`` block (TOML lines); returns (path, journal path)."""
    path = tmp_path / "stepped.toml"
    path.write_text(f'name = "stepped"\nrounds = {rounds}\nseed = {seed}\n{extra}'
                    f'[[fault]]\n{fault}\n[expect]\nheld_rounds = 0\n')
    return path, tmp_path / "journal.sqlite3"


def _segments(journal_path) -> dict[tuple[str, int], list]:
    """The journal cut by round: ``("moves", n)`` the deck movements before round n opens
    (``("moves", 1)``: the opening, round 0), ``("round", n)`` round n's own entries."""
    out: dict[tuple[str, int], list] = {}
    last = 0
    key = load_private_key(str(journal_path) + ".key")  # the run's table key, made beside its journal
    with Journal(journal_path, key=key, read_only=True) as j:
        for e in j.entries():
            if e.kind == "card_read":  # the face is sealed in the journal: this test holds the key
                e = dataclasses.replace(e, body={**e.body, "card": j.unseal(e)["card"]})
            if e.round_id is None:
                key = ("moves", last + 1)
            else:  # round ids are "r<number:05d>-<random>"
                last = max(last, int(e.round_id[1:6]))
                key = ("round", int(e.round_id[1:6]))
            out.setdefault(key, []).append(e)
    return out


def _card_events(entries) -> list[dict]:
    """Every card event the shoe sent, in order, as the device's message (a card read is
    journaled as a card_read entry, an unreadable one as a device_event)."""
    out = []
    for e in entries:
        if e.kind == "card_read" and not e.body.get("manual"):
            out.append({"message": "CardDrawn", "draw_index": e.body["draw_index"], "card": e.body["card"],
                        "back_colour": e.body["back_colour"]})
        elif e.kind == "device_event" and e.body["message"]["message"] == "CardUnreadable":
            out.append(e.body["message"])
    return out


def _first(entries, pred) -> int:
    return next(i for i, e in enumerate(entries) if pred(e))


@pytest.mark.parametrize(("kind", "rnd", "draw"), [
    ("foreign_card", 2, 1), ("foreign_card", 3, 7), ("unreadable_card", 1, 12), ("unreadable_card", 2, 5),
    ("duplicate_read", 2, 2), ("duplicate_read", 3, 9), ("unplug_shoe", 2, 6),
])
def test_a_fault_at_draw_n_strikes_at_draw_n(tmp_path, kind, rnd, draw):
    path, journal = _scenario(tmp_path, f'round = {rnd}\nstep = "draw"\ndraw = {draw}\nkind = "{kind}"')
    result = run_scenario(path, journal)
    assert "card_events" not in result["differences"] and "fault[0]" not in result["differences"]
    seg = _segments(journal)
    for n in range(1, 4):  # the other rounds are dealt clean: 12 cards read, nothing else
        if n != rnd:
            assert len(_card_events(seg[("round", n)])) == 12
            assert not [e for e in seg[("round", n)] if e.kind in ("violation", "incident", "link")]
    entries = seg[("round", rnd)]
    cards = _card_events(entries)
    reads = [e.body for e in entries if e.kind == "card_read" and e.body.get("to") is not None]  # dealt
    [colour] = [e.body["message"]["back_colour"] for e in seg[("moves", rnd)]
                if e.kind == "device_event" and e.body["message"]["message"] == "ShoeLoaded"]
    if kind == "foreign_card":  # the Nth card out has the other deck's backs; held there
        assert [c["back_colour"] != colour for c in cards] == [False] * (draw - 1) + [True]
        assert len(reads) == draw - 1
        assert [e.body["rule"] for e in entries if e.kind == "violation"] == ["foreign_card"]
    elif kind == "unreadable_card":  # the Nth card is the unreadable one, entered by hand
        assert [c["message"] == "CardUnreadable" for c in cards] == [i == draw - 1 for i in range(12)]
        assert [r.get("manual", False) for r in reads] == [i == draw - 1 for i in range(12)]
        [incident] = [e.body for e in entries if e.kind == "incident"]
        assert incident == {"what": "card unreadable", "draw_index": cards[draw - 1]["draw_index"]}
    elif kind == "duplicate_read":  # the Nth card read repeats the round's first
        assert [c["card"] == cards[0]["card"] for c in cards] == [True] + [False] * (draw - 2) + [True]
        assert [e.body["rule"] for e in entries if e.kind == "violation"] == ["duplicate_card"]
    else:  # unplugged after card N-1 was read, before card N: its read comes after the reconnect
        down = _first(entries, lambda e: e.kind == "link" and e.body["notice"] == "link_down")
        up = _first(entries, lambda e: e.kind == "link" and e.body["notice"] == "link_up")
        read_at = [i for i, e in enumerate(entries) if e.kind == "card_read" and e.body.get("to") is not None]
        assert len(read_at) == 12 and read_at[draw - 2] < down < up < read_at[draw - 1]
        assert result["observed"]["held_rounds"] == 0


def test_an_extra_card_at_draw_n_comes_out_with_the_nth_prompt():
    """Ground truth from the shoe: two cards come out while the dealer is at prompt N."""
    with ChaosTable(seed=3) as t:
        t.controller.prepare()
        t.play()
        hook = FaultInjector(t, random.Random(3)).inject("extra_card", step="draw", draw=5)
        prompts = [0]  # the dealer's draw prompts this round
        prompts_at_draw: list[int] = []
        draw, prompt = t.sim.shoe.draw, t.dealer.draw_card

        def count_prompt():
            prompts[0] += 1
            return prompt()

        def spy():
            prompts_at_draw.append(prompts[0])
            return draw()
        t.sim.shoe.draw = spy
        t.dealer.draw_card = count_prompt
        assert t.play() == "held" and hook.fired
        assert prompts_at_draw == [1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 10, 11, 12]
        assert "incident:card drawn beyond the deal" in t.detections()


def _ts(e) -> datetime.datetime:
    return datetime.datetime.fromisoformat(e.ts)


@pytest.mark.parametrize(("fault", "moves"), [
    ('round = 0\nstep = "shuffle"\nkind = "jam"', 1),
    ('round = 2\nstep = "shuffle"\nkind = "jam"', 2),
    ('round = 0\nstep = "shuffle"\nkind = "missing_card"', 1),
    ('round = 3\nstep = "shuffle"\nkind = "missing_card"', 3),
    ('round = 2\nstep = "collect"\nkind = "missing_card"', 3),
    ('round = 0\nstep = "shuffle"\nkind = "late_insert"\nseconds = 0.6', 1),
    ('round = 3\nstep = "shuffle"\nkind = "late_insert"\nseconds = 0.6', 3),
    ('round = 0\nstep = "load_shoe"\nkind = "unplug_shoe"', 1),
    ('round = 2\nstep = "load_shoe"\nkind = "unplug_shoe"', 2),
    ('round = 0\nstep = "load_shoe"\nkind = "reboot_shoe"', 1),
    ('round = 3\nstep = "load_shoe"\nkind = "reboot_shoe"', 3),
], ids=lambda v: v.replace("\n", " ") if isinstance(v, str) else str(v))
def test_a_fault_at_a_deck_movement_strikes_there(tmp_path, fault, moves):
    """Shuffle, shoe load and collect faults strike in the deck movements they name
    (``moves``: those before round ``moves`` opens), at the first such step, and nowhere else."""
    path, journal = _scenario(tmp_path, fault, rounds=3)
    result = run_scenario(path, journal)
    assert "card_events" not in result["differences"] and "fault[0]" not in result["differences"]
    assert result["observed"]["held_rounds"] == 0 and result["observed"]["rounds_played"] == 3
    seg = _segments(journal)
    alarms = {k: [e for e in v if e.kind in ("violation", "incident", "link")] for k, v in seg.items()}
    assert not [e for k, v in alarms.items() if k != ("moves", moves) for e in v]
    entries = seg[("moves", moves)]
    kind = next(line.split('"')[1] for line in fault.splitlines() if line.startswith("kind"))
    first_insert = _first(entries, lambda e: e.kind == "prompt" and e.body["action"] == "insert_deck")
    first_shuffle = _first(entries, lambda e: e.kind == "command" and e.body["command"] == "shuffle")
    verified = [e for e in entries if e.kind == "device_event" and e.body["message"]["message"] == "DeckVerified"]
    if kind == "jam":
        jam = _first(entries, lambda e: e.kind == "incident")
        assert entries[jam].body["what"] == "shuffler fault: jam"
        assert first_shuffle < jam < _first(entries, lambda e: e in verified)
    elif kind == "missing_card":  # the first deck counted in these movements is a card short, and only it
        assert [e.body["message"]["card_count"] for e in verified] == [51] + [52] * (len(verified) - 1)
        assert [e.body["rule"] for e in alarms[("moves", moves)]] == ["deck_incomplete"]
    elif kind == "late_insert":  # the first insert only arrives after the delay; the others at once
        inserted = [i for i, e in enumerate(entries) if e.kind == "device_event"
                    and e.body["message"]["message"] == "DeckInserted"]
        prompts = [i for i, e in enumerate(entries) if e.kind == "prompt" and e.body["action"] == "insert_deck"]
        waits = [(_ts(entries[i]) - _ts(entries[p])).total_seconds() for p, i in zip(prompts, inserted)]
        assert prompts[0] == first_insert and waits[0] >= 0.6 and all(w < 0.6 for w in waits[1:])
    else:  # the shoe link drops (or the shoe reboots) between the load prompt and its ShoeLoaded
        load = _first(entries, lambda e: e.kind == "prompt" and e.body["action"] == "load_shoe")
        loaded = _first(entries, lambda e: e.kind == "device_event" and e.body["message"]["message"] == "ShoeLoaded")
        notices = [(i, e.body["notice"]) for i, e in enumerate(entries) if e.kind == "link"]
        want = ["link_down", "link_up"] if kind == "unplug_shoe" else ["device_rebooted"]
        assert [n for _, n in notices] == want and all(load < i < loaded for i, _ in notices)


def test_every_step_and_kind_it_allows_is_tested():
    """The steps offered are the ones the tests above exercise, kind by kind."""
    assert STEPS == ("before_round", "shuffle", "load_shoe", "draw", "collect")
    assert {s: set(k) for s, k in STEP_KINDS.items() if s != "before_round"} == {
        "shuffle": {"jam", "missing_card", "late_insert"},
        # corrupt_bytes at load_shoe: the shipped scenario noise-eats-the-shoe-load (issue 24)
        "load_shoe": {"unplug_shoe", "reboot_shoe", "corrupt_bytes"},
        "draw": {"foreign_card", "duplicate_read", "unreadable_card", "extra_card", "unplug_shoe"},
        "collect": {"missing_card"},
    }


@pytest.mark.parametrize(("fault", "message"), [
    ('round = 1\nstep = "deal"\nkind = "jam"',
     r"fault\[1\]\.step: 'deal'; allowed: before_round, shuffle, load_shoe, draw, collect"),
    ('round = 2\nstep = "shuffle"\nkind = "foreign_card"',
     (r"fault\[1\]\.step: foreign_card cannot strike at step 'shuffle'; foreign_card can strike at: "
      r"before_round, draw \(step 'shuffle' takes: jam, missing_card, late_insert\)")),
    ('round = 2\nstep = "draw"\nkind = "jam"\ndraw = 3', r"fault\[1\]\.step: jam cannot strike at step 'draw'"),
    ('round = 2\nstep = "draw"\nkind = "foreign_card"', (r'fault\[1\]\.draw: required with step = "draw": '
                                                         r"an integer 1\.\.12, the round's draw \(3 seats and "
                                                         r"the dealer, 3 cards each\)")),
    ('round = 2\nstep = "draw"\nkind = "foreign_card"\ndraw = 13', r"fault\[1\]\.draw: .*an integer 1\.\.12"),
    ('round = 2\nstep = "draw"\nkind = "foreign_card"\ndraw = 0', r"fault\[1\]\.draw: .*an integer 1\.\.12"),
    ('round = 2\nstep = "draw"\nkind = "foreign_card"\ndraw = true', r"fault\[1\]\.draw: .*an integer 1\.\.12"),
    ('round = 2\nstep = "draw"\nkind = "foreign_card"\ndraw = "4"', r"fault\[1\]\.draw: .*an integer 1\.\.12"),
    ('round = 2\nstep = "draw"\nkind = "duplicate_read"\ndraw = 1',
     r"fault\[1\]\.draw: .*an integer 2\.\.12.*duplicate_read repeats the round's first card"),
    ('round = 2\nstep = "collect"\nkind = "missing_card"\ndraw = 3',
     r'fault\[1\]\.draw: only with step = "draw" \(this fault\'s step is \'collect\'\)'),
    ('round = 2\nkind = "foreign_card"\ndraw = 3', r"fault\[1\]\.draw: only with step = \"draw\""),
    ('round = 1\nstep = "shuffle"\nkind = "jam"', r"fault\[1\]\.round: step 'shuffle' needs round 0 or 2\.\.3"),
    ('round = 1\nstep = "load_shoe"\nkind = "unplug_shoe"', r"fault\[1\]\.round: step 'load_shoe' needs round 0"),
    ('round = 0\nstep = "draw"\nkind = "unreadable_card"\ndraw = 2',
     r"fault\[1\]\.round: step 'draw' needs round 1\.\.3: round 0 \(the opening\) deals no cards"),
    ('round = 0\nstep = "collect"\nkind = "missing_card"', r"fault\[1\]\.round: step 'collect' needs round 1"),
])
def test_a_bad_step_or_draw_is_refused_with_file_fault_key_and_what_is_allowed(tmp_path, fault, message):
    path, _ = _scenario(tmp_path, 'round = 1\nkind = "jam"\n\n[[fault]]\n' + fault)
    with pytest.raises(ScenarioError, match=r"stepped\.toml: " + message):
        load_scenario(path)


def test_the_draw_range_follows_the_seats(tmp_path):
    path, _ = _scenario(tmp_path, 'round = 1\nstep = "draw"\nkind = "foreign_card"\ndraw = 10', extra="seats = 2\n")
    with pytest.raises(ScenarioError, match=r"fault\[0\]\.draw: .*an integer 1\.\.9, the round's draw \(2 seats"):
        load_scenario(path)
    path.write_text(path.read_text().replace("draw = 10", "draw = 9"))
    assert load_scenario(path)["fault"][0]["draw"] == 9


def test_tablectl_refuses_a_bad_step(tmp_path):
    path, _ = _scenario(tmp_path, 'round = 2\nstep = "shuffle"\nkind = "unreadable_card"')
    proc = subprocess.run(tablectl() + ["run", "--simulate", "--scenario", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "fault[0].step: unreadable_card cannot strike at step 'shuffle'" in proc.stderr


def test_a_stepped_fault_the_round_never_reaches_fails_the_scenario(tmp_path):
    """Round 2 is held at its 2nd card (foreign), so its 5th draw never comes: reported, not silently dropped."""
    path, journal = _scenario(tmp_path, 'round = 2\nstep = "draw"\ndraw = 2\nkind = "foreign_card"\n\n'
                                        '[[fault]]\nround = 2\nstep = "draw"\ndraw = 5\nkind = "unreadable_card"')
    result = run_scenario(path, journal)
    assert not result["passed"]
    assert result["differences"]["fault[1]"] == {
        "expected": "unreadable_card strikes at round 2, step draw, draw 5",
        "observed": "never struck: the round did not reach that step"}
    assert "fault[0]" not in result["differences"]
    assert "card unreadable" not in result["observed"]["incidents"]  # nor did it leak into round 3


@pytest.mark.parametrize(("stem", "rnd", "draw", "what"), [
    ("foreign-card-round-5", 5, 4, "foreign"), ("unreadable-card", 2, 2, "unreadable")])
def test_shipped_stepped_scenarios_strike_where_their_description_says(tmp_path, stem, rnd, draw, what):
    path = next(p for p in SHIPPED if p.stem == stem)
    f = load_scenario(path)["fault"][0]
    assert (f["round"], f["step"], f["draw"]) == (rnd, "draw", draw)
    result = run_scenario(path, tmp_path / "j.sqlite3")
    assert result["passed"], result["differences"]
    cards = _card_events(_segments(tmp_path / "j.sqlite3")[("round", rnd)])
    if what == "foreign":
        assert len(cards) == draw and cards[-1]["back_colour"] != cards[0]["back_colour"]
        assert len({c["back_colour"] for c in cards[:-1]}) == 1
    else:
        assert [c["message"] for c in cards].index("CardUnreadable") == draw - 1


def test_a_card_drawn_before_its_round_and_read_again_in_the_deal_is_a_duplicate(tmp_path):
    """Soak seed 1, round 463 (issue 18): the dealer drew a card as the shoe was loaded,
    with no round in progress (an incident, dealt to nobody); the next round, dealt
    from the same shoe load, read that card again (a clone) and dealt it to a seat,
    because the deck's record of cards read began again when the round started. A
    card of a shoe load is read once: the repeat is a duplicate in the round it
    comes, and is dealt to nobody."""
    path, journal = _scenario(tmp_path, 'round = 2\nkind = "early_card"\n'
                                        '[[fault]]\nround = 3\nstep = "draw"\ndraw = 3\nkind = "duplicate_read"',
                              rounds=4)
    result = run_scenario(path, journal)
    assert "card_events" not in result["differences"] and "fault[1]" not in result["differences"]
    read: set[str] = set()  # the cards read since the shoe was loaded
    stray = dealt_again = None
    rounds_with_duplicate = []
    for key, entries in sorted(_segments(journal).items(), key=lambda kv: (kv[0][1], kv[0][0] == "round")):
        for e in entries:
            if e.kind == "device_event" and e.body["message"]["message"] == "ShoeLoaded":
                read = set()
            elif e.kind == "card_read":
                card = e.body["card"]
                if e.body.get("stray"):
                    stray = card
                if card in read and e.body.get("to") is not None:
                    dealt_again = (key, card, e.body["to"])
                read.add(card)
            elif e.kind == "violation" and e.body["rule"] == "duplicate_card":
                rounds_with_duplicate.append(key)
    assert stray is not None, "the early card was not drawn with no round in progress"
    assert dealt_again is None, f"a card read twice from one shoe load was dealt: {dealt_again}"
    [where] = rounds_with_duplicate
    assert where[0] == "round"  # caught as it was read in the deal, not only at the deck's next count
