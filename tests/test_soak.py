"""The chaos soak: every class of fault injected is detected, nothing lost, duplicated or falsely alarmed."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from table.hil.chaos import FAULT_KINDS, ChaosTable, FaultInjector, run_soak
from tests.test_e2e_run import tablectl


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_class_is_detected_without_losing_a_card(kind):
    with ChaosTable(seed=5) as t:
        t.controller.prepare()
        inj = FaultInjector(t, random.Random(1))
        t.play()
        before = t.detections()
        inj.inject(kind)
        t.play()
        t.play()  # consequences (a wrong deck found at its next count) and recovery
        after = t.detections()
        new = {k for k in after if after[k] > before.get(k, 0)}
        from table.hil.chaos import DETECTED_BY

        assert new & set(DETECTED_BY[kind]), (kind, new)
        assert t.truth_reads()[: len(t.device_reads())] == [
            r if r[0] != "??" else t.truth_reads()[i] for i, r in enumerate(t.device_reads())]
        assert len(t.truth_reads()) == len(t.device_reads())


#: the clock speed of the soaks here that count false alarms among other tests: the host's
#: lost-event check waits for a late card event twice its resend window on the table's clock
#: (4 s at speed 1), while the event's way from the shoe to the host runs on real time; at the
#: soak's default 10 that was 0.4 s of real time twice, which a 2-core machine at load ~25
#: overran (a late event taken for a lost one: card_unaccounted, a false alarm). At 3 it is
#: 1.3 s twice; ~35 % more wall time under load. The clock itself is tried at 1 and 20 below.
ROOMY_SPEED = 3


@pytest.mark.long
@pytest.mark.timeout(600)
def test_soak_cli_json_summary():
    proc = subprocess.run(tablectl() + ["soak", "--rounds", "120", "--seed", "7", "--fault-rate", "0.4", "--json",
                                        "--speed", str(ROOMY_SPEED)],
                          capture_output=True, text=True)  # the test's hang guard bounds it
    out = json.loads(proc.stdout)
    assert {"rounds", "faults_injected", "faults_detected", "lost_events", "duplicated_events",
            "false_alarms", "wrongly_settled", "exits"} <= set(out)
    assert out["rounds"] == 120 and out["faults_injected"] > 20
    from table.hil.chaos import FAULT_KINDS

    # the classes the host has detected since the soak began: every one, still
    assert all(out["by_kind"][k]["detected"] == out["by_kind"][k]["injected"] for k in FAULT_KINDS), out["by_kind"]
    assert (out["lost_events"], out["duplicated_events"], out["false_alarms"]) == (0, 0, 0)
    # every wager placed was settled or returned by a void: nothing lost or created (issue 23)
    assert out["wagers"]["ok"] and out["wagers"]["rounds"] >= out["outcomes"]["played"], out["wagers"]
    # every class is held or ridden through: nothing settled from cards that are not the verified
    # deck's, no exit, every fault detected, and the exit status says so
    assert out["wrongly_settled"] == 0 and out["exits"] == 0, out["by_kind"]
    assert out["faults_detected"] == out["faults_injected"], out["anomalies"]
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_no_faults_no_alarms():
    out = run_soak(30, 9, fault_rate=0.0)
    assert out["faults_injected"] == 0 and out["false_alarms"] == 0 and out["lost_events"] == 0
    assert out["outcomes"] == {"played": 30}


def test_an_undetected_fault_is_reported_with_its_round(monkeypatch):
    """The summary names the round of every fault that went undetected, so a rare miss
    in a long soak can be traced: here a jam whose alarm the soak is told not to
    recognise."""
    import table.hil.chaos as chaos

    monkeypatch.setitem(chaos.DETECTED_BY, "jam", ("incident:nothing of the sort",))
    out = run_soak(4, 3, fault_rate=1.0, kinds=("jam",))
    assert out["faults_injected"] >= 3 and out["faults_detected"] == 0
    assert out["faults_injected"] + out["faults_withdrawn"] == 4  # round 1 has no shuffle of its own
    undetected = [a for a in out["anomalies"] if a["what"] == "undetected"]
    assert len(undetected) == out["faults_injected"]
    assert [a["round"] for a in undetected] == sorted({a["round"] for a in undetected})
    assert all(a["fault"] == "jam" and 1 <= a["round"] <= 4 for a in undetected)
    assert not [a for a in out["anomalies"] if a["what"] == "false_alarm"]


def test_a_fault_that_never_strikes_is_withdrawn_not_left_for_a_later_round(monkeypatch):
    """An extra card armed for a draw its round never reaches must not strike in a later
    round (where it would be taken for that round's fault or a false alarm)."""
    import table.hil.chaos as chaos

    monkeypatch.setattr(chaos.FaultInjector, "_extra_card",
                        lambda self: self._at_draw(40, self.t.sim.dealer.draw_card))  # a round has 16 draws
    out = run_soak(3, 4, fault_rate=1.0, kinds=("extra_card",))
    assert out["faults_withdrawn"] == 3 and out["faults_injected"] == 0
    assert out["false_alarms"] == 0 and out["anomalies"] == []
    assert out["outcomes"] == {"played": 3}
    assert out["lost_events"] == out["duplicated_events"] == 0


def test_a_missing_card_is_detected_by_its_own_deck_count(monkeypatch):
    """Each missing card is credited only when its deck's count reports that card."""
    out = run_soak(6, 8, fault_rate=1.0, kinds=("missing_card",), speed=ROOMY_SPEED)
    k = out["by_kind"]["missing_card"]
    assert k["injected"] >= 4 and k["detected"] == k["injected"], out
    assert out["faults_injected"] + out["faults_pending_at_end"] + out["faults_withdrawn"] == 6
    assert out["false_alarms"] == 0 and out["anomalies"] == []


def _fake_summary(rounds, seed, *, seats=3, fault_rate=0.3, progress=None, speed=10.0, kinds=None):
    return {"rounds": rounds, "faults_injected": 1, "faults_detected": 1, "lost_events": 0, "duplicated_events": 0,
            "false_alarms": 0, "misread_events": 0, "faults_withdrawn": 0, "faults_pending_at_end": 0,
            "faults_detected_late": 0, "extra_alarm_rounds": 0, "alarms_excused_as_aftermath": 0,
            "link_notices_without_fault": 0, "wrongly_settled": 0, "exits": 0, "exits_without_fault": 0,
            "by_kind": {"jam": {"injected": 1, "detected": 1, "detected_late": 0, "withdrawn": 0,
                                "ridden_through": 1, "wrongly_settled": 0, "exits": 0}},
            "outcomes": {"played": rounds},
            "card_events": 12 * rounds, "seed": seed, "anomalies": [],
            "wagers": {"rounds": rounds, "placed_cents": 3000 * rounds, "settled_cents": 3000 * rounds,
                       "returned_cents": 0, "open_rounds": 0, "problems": [], "ok": True}}


def test_soak_text_summary_values_line_up(monkeypatch):
    """Every row of the text summary, the longest key too, has its value in the same column."""
    from click.testing import CliRunner

    import table.hil.chaos as chaos
    from table.cli import main

    monkeypatch.setattr(chaos, "run_soak", _fake_summary)
    r = CliRunner().invoke(main, ["soak", "--rounds", "2"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line and not line.startswith((" ", "outcomes:", "wagers:"))]
    assert rows[-1].startswith("link_notices_without_fault ") and any(x.startswith("alarms_excused_as_aftermath ")
                                                                     for x in rows)
    value_columns = {len(line.rstrip("0123456789")) for line in rows}  # where each (numeric) value starts
    assert len(value_columns) == 1, r.output


def test_soak_options_and_outcomes_are_documented():
    from click.testing import CliRunner

    from table.cli import main

    text = " ".join(CliRunner().invoke(main, ["soak", "--help"]).output.split())
    assert "--fault-rate FLOAT RANGE Share of the rounds" in text, text
    assert "--seats INTEGER RANGE Players at the table" in text, text
    for outcome in ("played", "held", "fault"):
        assert f"{outcome}:" in text, text


def test_lost_and_duplicated_reads_do_not_cancel_out():
    from table.hil.chaos import _compare_reads

    t = [(c, "red") for c in ("As", "Kd", "7c", "2h", "9s")]
    assert _compare_reads(t, list(t)) == (0, 0, 0)
    assert _compare_reads(t, [t[0], t[1], t[1], t[2], t[3], t[4]]) == (0, 1, 0)  # one journaled twice
    assert _compare_reads(t, [t[0], t[2], t[3], t[4]]) == (1, 0, 0)  # one never journaled
    # One lost and another duplicated: the totals match, the reads do not.
    assert _compare_reads(t, [t[0], t[0], t[1], t[3], t[4]]) == (1, 1, 0)
    assert _compare_reads(t, [t[0], ("??", "red"), t[2], t[3], t[4]]) == (0, 0, 0)  # unreadable, same back
    assert _compare_reads(t, [t[0], ("Qs", "red"), t[2], t[3], t[4]]) == (0, 0, 1)


@pytest.mark.long
def test_a_compressed_clock_injects_the_same_faults_with_the_same_counting():
    """The soak's clock only changes how long the waits take: the same seed injects
    the same faults of the same classes, and both runs count 0 lost, 0 duplicated,
    0 false alarms, every fault detected."""
    # the classes the host already detects: the point here is the clock (a class the host does not
    # yet ride through waits out the 180 s shuffle timeout, in real time at speed 1)
    real = run_soak(10, 11, fault_rate=1.0, speed=1, kinds=FAULT_KINDS)
    fast = run_soak(10, 11, fault_rate=1.0, speed=20, kinds=FAULT_KINDS)
    assert real["clock_speed"] == 1 and fast["clock_speed"] == 20
    for out in (real, fast):
        assert (out["lost_events"], out["duplicated_events"], out["false_alarms"], out["misread_events"]) == (0, 0, 0, 0)
        assert out["faults_detected"] == out["faults_injected"], out["anomalies"]
    assert ({k: v["injected"] + v["withdrawn"] for k, v in real["by_kind"].items()}
            == {k: v["injected"] + v["withdrawn"] for k, v in fast["by_kind"].items()})


def test_the_soak_prints_its_table_by_class_and_counts_what_the_host_does_not_hold(capsys):
    """A short soak of the hands' and power's faults: the table by class (injected, detected,
    ridden through, wrongly settled, exits), printed; a cold deck the table deals and settles
    shows as wrongly settled, never hidden (the exit status on it: the next test)."""
    from table.cli.soak import per_class_table

    out = run_soak(4, 2, fault_rate=1.0, kinds=("substituted_deck", "garble_shuffler"))
    table = per_class_table(out["by_kind"])
    print(table)
    head, *rows = table.splitlines()
    assert head.split()[:3] == ["class", "injected", "detected"] and "wrongly settled" in head and "exits" in head
    assert {r.split()[0] for r in rows} == {"substituted_deck", "garble_shuffler"}
    cold = out["by_kind"]["substituted_deck"]
    assert cold["injected"] >= 1
    # every struck class is counted once: ridden through, wrongly settled or an exit
    for k, n in out["by_kind"].items():
        assert n["ridden_through"] + n["wrongly_settled"] + n["exits"] == n["injected"], (k, n)
    assert out["wrongly_settled"] == sum(n["wrongly_settled"] for n in out["by_kind"].values())
    assert out["exits"] == sum(n["exits"] for n in out["by_kind"].values()) + out["exits_without_fault"]


def test_a_round_of_a_must_hold_class_that_settles_is_wrongly_settled_and_fails_the_soak(monkeypatch):
    from click.testing import CliRunner

    import table.hil.chaos as chaos
    from table.cli import main

    def settled(rounds, seed, **kw):
        out = _fake_summary(rounds, seed)
        out["by_kind"] = {"substituted_deck": {"injected": 1, "detected": 0, "detected_late": 0, "withdrawn": 0,
                                               "ridden_through": 0, "wrongly_settled": 1, "exits": 0}}
        out["faults_detected"], out["wrongly_settled"] = 1, 1
        return out

    monkeypatch.setattr(chaos, "run_soak", settled)
    r = CliRunner().invoke(main, ["soak", "--rounds", "2"])
    assert r.exit_code == 1, r.output
    row = next(line for line in r.output.splitlines() if line.strip().startswith("substituted_deck"))
    assert row.split()[1:] == ["1", "0", "0", "0", "0", "1", "0"]


def test_every_class_of_the_soak_says_what_detects_it_and_whether_it_must_hold():
    from table.hil.chaos import DETECTED_BY, HANDS_FAULT_KINDS, MUST_HOLD, SOAK_KINDS

    assert set(SOAK_KINDS) <= set(DETECTED_BY)
    assert {"shoe_extra_cards", "short_deck_in_shoe", "doubled_card_in_shoe", "substituted_deck",
            "lost_card_event"} <= set(MUST_HOLD)
    assert set(HANDS_FAULT_KINDS) >= {"door_open", "reboot_mid_shuffle", "reboot_mid_delivery", "garble_shuffler"}
