"""``tablectl run`` as a person and a supervisor meet it (issue 19): readable rounds on a
terminal with only warnings logged, money labelled, voided rounds said, refusals that
name the option, a service stop that is not an error, and the frame trace."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import stat
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from protocols.cards import BackColour
from table.cli import main
from table.cli.run_output import WIDTH, money, round_lines, summary_lines, voided_line
from table.controller import RoundResult, SeatResult
from table.rules.settlement import Decision, Tables, Wagers, settle_seat

from frame_helpers import recover_card

CLI = [sys.executable, "-c", "from table.cli import main; main()"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

CONFIG = """\
[table]
id = "bench-19"
seats = 3

[devices.shuffler]
url = "/dev/threecard/shuffler"

[devices.shoe]
url = "/dev/threecard/shoe"

[log]
format = "json"
level = "info"
"""


def on_a_terminal(args: list[str], timeout_s: float = 180, stdout_file: Path | None = None,
                  stdin_tty: bool = False) -> tuple[int, str]:
    """Run tablectl with stderr (and stdout, unless ``stdout_file``) on a pty, as a person
    at a terminal would; stdin is not a terminal (no console) unless ``stdin_tty``.
    Returns (exit status, text)."""
    master, slave = pty.openpty()
    out = open(stdout_file, "w") if stdout_file else slave
    proc = subprocess.Popen([*CLI, *args], stdin=slave if stdin_tty else subprocess.DEVNULL, stdout=out,
                            stderr=slave, close_fds=True)
    os.close(slave)
    if stdout_file:
        out.close()
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout_s)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        rc = proc.wait(timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return rc, ANSI.sub("", b"".join(chunks).decode(errors="replace")).replace("\r", "")


def test_on_a_terminal_rounds_are_readable_and_logs_are_not_json(tmp_path):
    """The README's first command on a terminal, and the same with a config whose [log]
    asks for JSON at info (meant for the service): round lines, no JSON log lines."""
    cfg = tmp_path / "table.toml"
    cfg.write_text(CONFIG)
    for extra in ([], ["--config", str(cfg)]):
        rc, text = on_a_terminal(["run", "--simulate", "--rounds", "2", "--seats", "7", "--seed", "7",
                                  "--ante-cents", "1000", *extra])  # the fixed bet: every seat in play
        assert rc == 0, text
        lines = text.splitlines()
        assert not [line for line in lines if line.lstrip().startswith("{")], text
        assert not [line for line in lines if "[info" in line], text  # warnings only
        assert sum(line.startswith("round ") for line in lines) == 2
        seats = [line for line in lines if re.match(r"  s\d ", line)]
        assert len(seats) >= 2 * 7 and all(" net " in line and "$" in line for line in seats), text
        assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)


def test_with_the_terminal_console_a_simulated_round_is_said_once(tmp_path):
    """The key console's payout lines are for a dealer who pays by hand: on a simulated
    table the round lines say the same, so each round is printed once (a new user saw
    every round twice)."""
    rc, text = on_a_terminal(["run", "--simulate", "--rounds", "2", "--seats", "3", "--seed", "7"], stdin_tty=True)
    assert rc == 0, text
    assert "close bets" in text  # the console's keys: it was there
    assert sum(line.startswith("round ") for line in text.splitlines()) == 2, text


def test_json_logs_on_a_terminal_only_when_asked():
    rc, text = on_a_terminal(["run", "--simulate", "--rounds", "1", "--seats", "1", "--seed", "7",
                              "--log-format", "json", "--log-level", "info"])
    assert rc == 0 and any(line.startswith("{") and '"event"' in line for line in text.splitlines())


def test_json_runs_draw_a_progress_bar_on_a_terminal_and_record_the_profile(tmp_path):
    out = tmp_path / "out.json"
    rc, err = on_a_terminal(["run", "--simulate", "--rounds", "3", "--seats", "2", "--seed", "5", "--json",
                             "--profile", "california"], stdout_file=out)
    assert rc == 0, err
    assert "rounds" in err and "100%" in err
    data = json.loads(out.read_text())
    assert data["profile"] == "california" and len(data["rounds"]) == 3 and data["voided"] == []


def _seat(seat, cards, dealer, wagers=None, decision="play", tables=None):
    tables = tables or Tables.load("pa-649a12b-1", pair_plus="example-pp-649a12d",
                                   six_card_bonus="example-6cb-649a12f-e", progressive="example-prog-649a12e",
                                   progressive_meter_cents=10_000_000)
    st = settle_seat(wagers or Wagers(ante=1000), decision, cards.split(), dealer.split(), tables)
    from protocols.cards import Card

    return SeatResult(seat, [Card.parse(c) for c in cards.split()], Decision(decision), st)


def _round(seats, dealer="Kc 7d 2h", qualifies=True):
    from protocols.cards import Card

    return RoundResult(12, "r00012-abcd", "B", BackColour.BLUE, [Card.parse(c) for c in dealer.split()], qualifies,
                       seats)


def test_the_round_line_names_each_hand_and_each_wagers_outcome_in_dollars():
    dealer = "Kc 7d 2h"
    r = _round([_seat(2, "9h Th Jc", dealer), _seat(3, "4s 8d 2c", dealer, decision="fold"),
                _seat(5, "Kd 7s 2c", dealer, Wagers(ante=250))])
    lines = round_lines(r)
    assert lines[0] == "round   12  deck B (blue)  dealer Kc 7d 2h  high card, qualifies"
    s2 = next(line for line in lines if line.startswith("  s2 "))
    assert re.search(r"s2 9h Th Jc\s+straight:\s+ante \+\$10, play \+\$10, bonus \+\$10\s+net \+\$30$", s2), s2
    s3 = next(line for line in lines if line.startswith("  s3 "))
    assert re.search(r"high card:\s+fold, ante -\$10\s+net -\$10$", s3), s3
    s5 = next(line for line in lines if line.startswith("  s5 "))
    assert "ante push, play push" in s5 and s5.endswith("net $0")
    assert money(-250) == "-$2.50" and money(125_000) == "+$1,250" and money(0) == "$0"


def test_seven_seats_with_every_wager_fit_on_one_screen():
    dealer = "2c 3d 9h"  # does not qualify
    hands = ["Ah Kh Qh", "As Ad Ac", "Ts Js Qs", "4c 5d 6h", "8d 8s Kc", "7c 9c Jc", "2s 5h 9d"]
    seats = [_seat(i + 1, h, dealer, Wagers(ante=100_000, pair_plus=50_000, six_card=50_000, progressive=100_00))
             for i, h in enumerate(hands)]
    lines = round_lines(_round(seats, dealer, qualifies=False))
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    assert len(lines) <= 1 + 2 * 7 < 24  # a header and at most two lines a seat: one 80x24 screen
    for i, h in enumerate(hands, start=1):
        assert any(line.startswith(f"  s{i} {h}  ") for line in lines)
    assert "pair plus" in "\n".join(lines) and "six card" in "\n".join(lines) and "progressive" in "\n".join(lines)


def test_a_voided_round_is_said_with_its_reason():
    text = voided_line("r00003-1a2b3c4d", "misdeal: dealer exposed Qs")
    assert " ".join(text.split()) == ("round r00003-1a2b3c4d VOIDED by a supervisor: misdeal: dealer exposed ??; "
                                      "every wager returned")
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert summary_lines(3, 36, 0, {"1": -1000}, voided=1)[0].endswith("voided 1")


def test_simulate_refuses_a_real_tables_devices_and_dealer(tmp_path):
    for opt, value in (("--shuffler-url", "/dev/ttyUSB0"), ("--shoe-url", "socket://127.0.0.1:9"),
                       ("--dealer-socket", str(tmp_path / "d.sock"))):
        r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", opt, value])
        assert r.exit_code == 2 and opt in r.stderr and "--simulate" in r.stderr, r.output


def test_a_journal_in_a_missing_folder_is_refused_and_no_folder_is_made(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "j.sqlite3"
    r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", "--journal", str(path)])
    assert r.exit_code == 2 and "--journal" in r.stderr and "does not exist" in r.stderr
    assert not (tmp_path / "no").exists()


def test_a_side_paytable_of_the_wrong_kind_names_its_own_option():
    r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", "--pair-plus", "pa-649a12b-1"])
    assert r.exit_code == 2 and "--pair-plus" in r.stderr and "--ante-bonus" not in r.stderr
    assert "an ante bonus paytable, not a Pair Plus one" in r.stderr
    r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", "--six-card", "example-pp-649a12d"])
    assert r.exit_code == 2 and "--six-card" in r.stderr
    r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", "--ante-bonus", "example-pp-649a12d"])
    assert r.exit_code == 2 and "--ante-bonus" in r.stderr


def test_a_routine_stop_of_the_service_is_not_an_error(tmp_path):
    """systemctl stop sends SIGTERM: exit 130 (documented, SuccessExitStatus=130), the run
    summary at info with what stopped it, and nothing but JSON log lines on stdout."""
    cfg = tmp_path / "table.toml"
    # the service's control socket in the test's own folder (/run/threecard is systemd's RuntimeDirectory)
    cfg.write_text(CONFIG + '\n[console]\ncontrol_socket = "%s"\n' % (tmp_path / "control.sock"))
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    proc = subprocess.Popen([*CLI, "run", "--simulate", "--service", "--seed", "9", "--config", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    try:
        for line in proc.stdout:  # blocks until the service logs; no sleeping
            lines.append(line)
            if '"round_result"' in line:
                break
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    records = [json.loads(x) for x in (lines + rest.splitlines(keepends=True)) if x.strip()]
    summary = records[-1]
    assert summary["event"] == "run_summary" and summary["level"] == "info"
    assert summary["stopped"] == "interrupted by SIGTERM" and summary["error"] is None
    assert "tablectl run:" not in err and "tablectl run:" not in rest
    assert "130" in " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
def test_run_trace_frames_masks_cards_and_unmasking_is_for_simulation_only(tmp_path):
    trace = tmp_path / "trace.jsonl"
    proc = subprocess.run([*CLI, "run", "--simulate", "--rounds", "1", "--seats", "2", "--seed", "4", "--json",
                           "--trace-frames", str(trace), "--log-file", str(tmp_path / "run.log")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    dealt = {c for s in json.loads(proc.stdout)["rounds"][0]["seats"] for c in s["cards"]}
    dealt |= set(json.loads(proc.stdout)["rounds"][0]["dealer_hand"])
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    drawn = [x for x in lines if x["message"].get("message") == "CardDrawn"]
    # nine cards drawn, each its own event (its SEQ); an event whose ACK came late under load
    # is sent again under the same SEQ (SPEC §6.3) and traced again: masked as well
    assert len({x["seq"] for x in drawn}) == 9 and all(x["message"]["card"] == "??" for x in drawn)
    assert all(len(recover_card(x["hex"])) == 52 for x in drawn)
    assert {x["device"] for x in lines} == {"shuffler", "shoe"}
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    # No card in any decoded field (hex bytes such as "5d" are bytes, not cards: checked above).
    decoded = json.dumps([{k: v for k, v in x.items() if k != "hex"} for x in lines])
    assert not any(re.search(rf"\b{c}\b", decoded) for c in dealt)

    refused = subprocess.run([*CLI, "run", "--shuffler-url", "/dev/null", "--shoe-url", "/dev/null",
                              "--trace-frames", str(tmp_path / "real.jsonl"), "--trace-card-faces"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--simulate only" in refused.stderr
    assert not (tmp_path / "real.jsonl").exists()

    again = subprocess.run([*CLI, "run", "--simulate", "--rounds", "1", "--trace-frames", str(trace)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "already exists" in again.stderr

    faces = tmp_path / "faces.jsonl"
    proc = subprocess.run([*CLI, "run", "--simulate", "--rounds", "1", "--seats", "2", "--seed", "4", "--json",
                           "--trace-frames", str(faces), "--trace-card-faces", "--log-file", str(tmp_path / "r2.log")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    shown = [json.loads(x)["message"]["card"] for x in faces.read_text().splitlines()
             if json.loads(x)["message"].get("message") == "CardDrawn"]
    assert set(shown) == dealt




def test_amounts_beyond_the_rules_limits_are_usage_errors_not_crashes():
    """An ante above the settlement's limit used to end the first round in an internal
    error; a meter that would pay a meter line less than its wager too."""
    r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", "--ante-cents", "1000000000"])
    assert r.exit_code == 2 and "--ante-cents" in r.stderr
    r = CliRunner().invoke(main, ["run", "--simulate", "--rounds", "1", "--progressive", "example-prog-649a12e",
                                  "--meter-cents", "50"])
    assert r.exit_code == 2 and "--meter-cents" in r.stderr and "less than the 100-cent progressive wager" in r.stderr


def test_a_real_table_started_by_hand_with_its_config_keeps_the_configs_journal(tmp_path):
    """`tablectl run --config table.toml` without --service at a real table journals where the
    config says and opens its control socket, as the service would: a person who starts a
    table by hand with its config gets its record. --no-journal deals without one and says
    which config keys it leaves unused; it cannot be mixed with --journal or --service. A
    config that names no journal is refused without --journal or --no-journal."""
    from console_helpers import tablectl
    from table.journal import Journal
    from tables import table_toml

    dev, dealer = tmp_path / "dev", tmp_path / "dealer.sock"
    journal, control = tmp_path / "table.sqlite3", tmp_path / "control.sock"
    cfg = tmp_path / "table.toml"
    cfg.write_text(table_toml("bench-by-hand", 2, dev / "shuffler", dev / "shoe",
                              f'[journal]\npath = "{journal}"\n[console]\ncontrol_socket = "{control}"\n'))
    sim = subprocess.Popen(tablectl() + ["simulate-table", "--link-dir", str(dev), "--dealer-socket", str(dealer),
                                         "--seed", "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert sim.stdout.readline().startswith("ready")
        run = tablectl() + ["run", "--config", str(cfg), "--dealer-socket", str(dealer), "--rounds", "1",
                            "--log-file", str(tmp_path / "log")]
        done = subprocess.run(run, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "warning" not in done.stderr, done.stderr  # nothing of the config left unused
        with Journal(journal, read_only=True) as j:
            assert sum(e.body.get("step") == "closed" for e in j.entries("round")) == 1  # on the config's record
        for extra in (["--journal", str(tmp_path / "other.sqlite3")], ["--service"]):
            refused = subprocess.run(run + ["--no-journal", *extra], capture_output=True, text=True, timeout=120)
            assert refused.returncode == 2 and "--no-journal" in refused.stderr, refused.stderr[-2000:]
        journal.rename(tmp_path / "kept.sqlite3")
        bare = subprocess.run(run + ["--no-journal"], capture_output=True, text=True, timeout=120)
        assert bare.returncode == 0, bare.stderr[-2000:]
        assert not journal.exists()
        warned = [line for line in bare.stderr.splitlines() if line.startswith("tablectl run: warning:")]
        assert len(warned) == 1 and "[journal] path is not used: --no-journal" in warned[0], bare.stderr
        # A config that names no journal is refused, not dealt without a record (nor into the
        # service's default journal) unless --no-journal says so.
        cfg.write_text(table_toml("bench-by-hand", 2, dev / "shuffler", dev / "shoe"))
        refused = subprocess.run(run, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and f"{cfg} sets no [journal] path" in refused.stderr, refused.stderr
        assert "--no-journal" in refused.stderr
    finally:
        sim.terminate()
        sim.wait(10)
        sim.stdout.close()


def test_a_simulated_run_on_a_pipe_logs_warnings_only_unless_asked(tmp_path):
    """--simulate's stderr, not a terminal: its output is the round lines; info records come
    only when --log-level asks for them."""
    args = [*CLI, "run", "--simulate", "--rounds", "1", "--seats", "2", "--seed", "7"]
    quiet = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-2000:]
    asked = subprocess.run(args + ["--log-level", "info"], capture_output=True, text=True, timeout=120)
    assert asked.returncode == 0
    levels = {json.loads(line)["level"] for line in asked.stderr.splitlines() if line.startswith("{")}
    assert "info" in levels, asked.stderr[-2000:]
