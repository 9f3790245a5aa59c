"""The device conformance suite: in-process (pytest plugin default), against standalone
emulator processes (``tablectl conformance``, the plugin's HIL options), and against
deliberately broken devices, which it must fail."""

from __future__ import annotations

import json
import subprocess

import pytest

from devices.conformance.suite import CHECKS, FAIL, PASS, SKIP, Target, checks_for, run_check, run_suite
# The suite's own pytest module, collected here too: by default it runs on in-process emulators.
from devices.conformance.test_conformance import (test_device_conforms, test_shoe_fixture_is_connected,  # noqa: F401
                                                  test_shuffler_fixture_is_connected)
from table.hil.conformance import InProcessBench

from hil_helpers import CLI, EmulatorProcess

pytest_plugins = ["pytester"]


def by_id(results):
    return {r.check.id: r for r in results}


def test_the_whole_suite_passes_on_emulated_usb_devices():
    with InProcessBench(transport="usb", seed=3) as bench:
        results = run_suite(bench.target)
    assert [r.check.id for r in results] == [c.id for c in CHECKS]
    assert {r.outcome for r in results} == {PASS}, [r.to_json() for r in results if r.outcome != PASS]


def test_a_device_speaking_another_major_version_fails():
    with InProcessBench(protocol_major=2) as bench:
        results = by_id(run_suite(bench.target))
    for device in ("shuffler", "shoe"):
        assert results[f"{device}/protocol-version"].outcome == FAIL
        assert "protocol 2." in results[f"{device}/protocol-version"].detail
        assert results[f"{device}/status"].outcome == FAIL  # the host refuses to talk to it at all


def test_a_device_without_a_reply_cache_fails_the_cache_check(monkeypatch):
    with InProcessBench() as bench:
        emu = bench.shoe
        real = emu._on_frame

        def forgetful(frame):
            emu._reply_cache = None  # acts on every repeated SEQ again
            real(frame)

        monkeypatch.setattr(emu, "_on_frame", forgetful)
        result = run_check(next(c for c in checks_for("shoe") if c.name == "reply-cache"), bench.target)
    assert result.outcome == FAIL and "acted on again" in result.detail


def test_a_device_that_never_resends_an_event_fails_the_arq_check():
    with InProcessBench() as bench:
        bench.shuffler.retransmit_initial_ms = bench.shuffler.retransmit_max_ms = 600_000
        bench.target.event_timeout_s = 0.5
        result = run_check(next(c for c in checks_for("shuffler") if c.name == "event-arq"), bench.target)
    assert result.outcome == FAIL and "was not resent" in result.detail


def test_a_device_not_under_test_is_skipped_not_passed():
    result = run_check(CHECKS[0], Target(shuffler_url=None, shoe_url="/dev/null"))
    assert result.outcome == SKIP


def _bench(tmp_path, transport: str):
    """Both devices as standalone emulator processes (on TCP, or on ptys with symlinks), with
    control sockets."""
    def where(kind: str) -> list[str]:
        return ["--tcp", "127.0.0.1:0"] if transport == "tcp" else ["--pty", str(tmp_path / kind)]

    with EmulatorProcess("shuffler", *where("shuffler"), "--control", "127.0.0.1:0", "--no-stdin", "--seed", "1",
                         log_path=tmp_path / "shuffler.log") as shuffler, \
            EmulatorProcess("shoe", *where("shoe"), "--control", "127.0.0.1:0", "--no-stdin", "--seed", "2",
                            log_path=tmp_path / "shoe.log") as shoe:
        yield {"shuffler": shuffler.url, "shoe": shoe.url,
               "shuffler_control": shuffler.extra[0].split()[1], "shoe_control": shoe.extra[0].split()[1]}


@pytest.fixture
def bench(tmp_path):
    """Standalone emulators over TCP (what a remote bench uses)."""
    yield from _bench(tmp_path, "tcp")


@pytest.fixture
def pty_bench(tmp_path):
    """Standalone emulators on ptys: like serial devices (the host closes a socket:// port without
    pyserial's 0.3 s pause, firmware_bridge/transport.py, so TCP is as quick)."""
    yield from _bench(tmp_path, "pty")


def tablectl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def rows(report: str) -> dict[str, str]:
    """``device/check`` -> RESULT from the plain-text table."""
    out = {}
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("shuffler", "shoe") and parts[2] in ("PASS", "FAIL", "SKIP"):
            out[f"{parts[0]}/{parts[1]}"] = parts[2]
    return out


def test_tablectl_conformance_passes_standalone_emulators(bench):
    r = tablectl("conformance", "--shuffler", bench["shuffler"], "--shoe", bench["shoe"],
                 "--shuffler-control", bench["shuffler_control"], "--shoe-control", bench["shoe_control"])
    assert r.returncode == 0, r.stdout + r.stderr
    table = rows(r.stdout)
    assert set(table) == {c.id for c in CHECKS} and set(table.values()) == {"PASS"}
    n = len(CHECKS)
    assert f"{n} checks: {n} passed, 0 failed, 0 skipped" in r.stdout and "RESULT: PASS" in r.stdout
    assert bench["shuffler"] in r.stdout


def test_without_hands_physical_checks_are_skipped_and_the_run_is_incomplete(pty_bench):
    bench = pty_bench
    r = tablectl("conformance", "--shuffler", bench["shuffler"], "--shoe", bench["shoe"], "--json")
    assert r.returncode == 3, r.stdout + r.stderr
    report = json.loads(r.stdout)
    outcomes = {f"{x['device']}/{x['check']}": x for x in report["results"]}
    # Physical checks skip only when they need hands: an empty shuffler refuses Shuffle without any.
    physical = {c.id for c in CHECKS if c.physical} - {"shuffler/shuffle-without-deck"}
    assert outcomes["shuffler/shuffle-without-deck"]["outcome"] == "pass"
    assert {k for k, x in outcomes.items() if x["outcome"] == "skip"} == physical
    assert all("needs a person" in outcomes[k]["detail"] for k in physical)
    assert report["summary"] == {"total": len(CHECKS), "passed": len(CHECKS) - len(physical), "failed": 0,
                                 "skipped": len(physical), "verdict": "incomplete"}


def test_tablectl_conformance_fails_a_broken_emulator(tmp_path):
    with EmulatorProcess("shoe", "--tcp", "127.0.0.1:0", "--protocol-major", "2", "--control", "127.0.0.1:0",
                         "--no-stdin", log_path=tmp_path / "shoe.log") as shoe:
        r = tablectl("conformance", "--shoe", shoe.url, "--shoe-control", shoe.extra[0].split()[1])
    assert r.returncode == 1, r.stdout + r.stderr
    table = rows(r.stdout)
    assert table["shoe/protocol-version"] == "FAIL"
    assert not any(k.startswith("shuffler/") for k in table)  # only the shoe was under test
    assert "RESULT: FAIL" in r.stdout and "protocol 2." in r.stdout


def test_tablectl_conformance_usage():
    from click.testing import CliRunner

    from table.cli import main

    r = CliRunner().invoke(main, ["conformance"])
    assert r.exit_code == 2 and "name a device" in r.output
    r = CliRunner().invoke(main, ["conformance", "--shoe", "usb://zz"])
    assert r.exit_code == 2 and "usb://" in r.output


def test_the_plugin_runs_the_same_tests_against_external_emulators_marked_hil(pty_bench, pytester):
    bench = pty_bench
    args = ["-p", "no:cacheprovider", "--pyargs", "devices.conformance.test_conformance",
            "--shuffler-url", bench["shuffler"], "--shoe-url", bench["shoe"],
            "--shuffler-control", bench["shuffler_control"], "--shoe-control", bench["shoe_control"]]
    result = pytester.runpytest_subprocess(*args, "-m", "hil")
    result.assert_outcomes(passed=len(CHECKS) + 2)
    result.stdout.fnmatch_lines([f"*threecard hil: shuffler {bench['shuffler']}*"])
    result = pytester.runpytest_subprocess(*args, "-m", "not hil")
    result.assert_outcomes(deselected=len(CHECKS) + 2)


def test_the_plugin_skips_a_device_not_named_and_refuses_bad_usb_selectors(pty_bench, pytester):
    bench = pty_bench
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--pyargs", "devices.conformance.test_conformance",
                                           "--shoe-url", bench["shoe"], "-rs")
    shoe_checks = len(checks_for("shoe"))
    physical_shoe = sum(c.physical for c in checks_for("shoe"))
    result.assert_outcomes(passed=shoe_checks - physical_shoe + 1,
                           skipped=len(checks_for("shuffler")) + 1 + physical_shoe)
    result.stdout.fnmatch_lines(["*no shuffler under test*", "*needs a person*"])
    bad = pytester.runpytest_subprocess("--shuffler-usb", "usb://nothex")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--shuffler-usb usb://nothex*"])


def test_a_person_following_the_prompts_completes_the_suite():
    """--operator-prompt: each instruction says enough (device, colour, count) to be carried out."""
    import re

    from devices.conformance.suite import PromptOperator
    from protocols.cards import BackColour, parse_cards

    asked: list[str] = []
    with InProcessBench(seed=4) as bench:
        hands = bench.target.operator

        def person(text: str) -> None:
            asked.append(text)
            colour = next((c for c in BackColour if c.name.lower() in text.split()), None)
            if text.startswith("Insert"):
                hands.insert_deck(colour)
            elif text.startswith("Take the deck"):
                hands.take_deck()
            elif text.startswith("Empty the shoe, load"):
                hands.load_shoe(colour)
            elif text.startswith("Draw"):
                hands.draw(int(re.search(r"Draw (\d+)", text).group(1)))
            elif text.startswith("Take the remaining"):
                hands.unload_shoe()
            elif text.startswith(("Open the shuffler's door", "Close the shuffler's door")):
                hands.door(text.startswith("Open"))
            elif text.startswith("Switch the shuffler off and on"):
                hands.reboot("shuffler")
            else:
                raise AssertionError(f"unclear instruction: {text}")

        def faulty(text: str) -> bool:  # "Insert a red deck without As 7d, with a second Kd, with 2 card(s) ..."
            m = re.match(r"Insert a (\w+) deck (.*) into the shuffler", text)
            if m is None or m.group(2) == "complete":
                return False
            words = m.group(2)
            missing = re.search(r"without ([\w ]+?)(,|$)", words)
            doubled = re.search(r"with a second ([\w ]+?)(,|$)", words)
            foreign = re.search(r"with (\d+) card\(s\) of another back colour", words)
            hands.insert_faulty_deck(BackColour.parse(m.group(1)),
                                     missing=tuple(parse_cards(missing.group(1))) if missing else (),
                                     doubled=tuple(parse_cards(doubled.group(1))) if doubled else (),
                                     foreign=int(foreign.group(1)) if foreign else 0)
            return True

        bench.target.operator = PromptOperator(lambda text: faulty(text) or person(text))
        results = run_suite(bench.target)
    not_passed = {r.check.id: r.outcome for r in results if r.outcome != PASS}
    # what a person cannot do on cue is skipped, said so, never passed: a jam, line noise, a shuffle held
    assert not_passed == {"shuffler/jam": "skip", "shuffler/line-noise": "skip",
                          "shuffler/reboot-mid-shuffle": "skip"}, [r.to_json() for r in results if r.outcome != PASS]
    assert any("red deck into the shuffler" in a for a in asked) and any(a.startswith("Draw 6") for a in asked)
