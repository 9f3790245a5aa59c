"""The README's stream check as a person types it (issue 25): `tablectl events tail --journal J
--since 0 | tablectl audit check-stream` on a table with its own id passes as written, and a
check that checked nothing (an empty stream, as a failed `events tail` before the pipe gives)
is not OK."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from console_helpers import tablectl
from table.cli import main
from table.interfaces.serving import unix_listener
from test_integrity import table

README_LINE = "{tablectl} events tail --journal {journal} --since 0 | {tablectl} audit check-stream"


def dealt(tmp_path, rounds=2):
    with table(tmp_path, seats=2) as (ctl, sim, console, journal):  # its own table id: "t-int"
        ctl.prepare()
        for _ in range(rounds):
            ctl.play_round()
        ctl.close()
    return tmp_path / "journal.sqlite3"


def test_the_readme_stream_check_passes_as_written_on_a_table_with_its_own_id(tmp_path):
    journal = dealt(tmp_path)
    line = README_LINE.format(tablectl=" ".join(tablectl()), journal=journal)
    r = subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "OK: 2 rounds, 18 cards opened their commitments" in r.stdout
    tail = subprocess.run(tablectl() + ["events", "tail", "--journal", str(journal), "--since", "0"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert {json.loads(line)["table_id"] for line in tail.stdout.splitlines()} == {"t-int"}
    # Another id would bind the events to a table whose commitments they are not: refused, named.
    other = subprocess.run(tablectl() + ["events", "tail", "--journal", str(journal), "--since", "0",
                                         "--table-id", "table"], capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and "journal of table 't-int'" in other.stderr and other.stdout == ""


def test_an_empty_stream_is_not_ok(tmp_path):
    r = CliRunner().invoke(main, ["audit", "check-stream"], input="")
    assert r.exit_code == 3 and "NOTHING CHECKED: no events in the stream" in r.output and "OK" not in r.output
    r = CliRunner().invoke(main, ["audit", "check-stream", "--json"], input="")
    assert r.exit_code == 3 and json.loads(r.output)["ok"] is False
    # The README's pipe when the journal is missing: events tail fails, check-stream gets nothing.
    line = README_LINE.format(tablectl=" ".join(tablectl()), journal=tmp_path / "missing.sqlite3")
    piped = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60)
    assert piped.returncode == 3 and "no journal at" in piped.stderr and "NOTHING CHECKED" in piped.stderr


def test_a_stream_that_reveals_no_round_checks_nothing(tmp_path):
    stream = tmp_path / "s.jsonl"
    stream.write_text(json.dumps({"seq": 1, "type": "table_opened", "table_id": "t", "round_id": None,
                                  "data": {"places": {}}}) + "\n")
    r = CliRunner().invoke(main, ["audit", "check-stream", str(stream)])
    assert r.exit_code == 3 and "no round revealed or voided" in r.output


def test_the_control_and_event_sockets_follow_the_journals_rule_a_missing_folder_is_refused(tmp_path):
    for option in ("--control-socket", "--event-socket", "--journal"):
        missing = tmp_path / "no-such-folder" / "x"
        args = ["run", "--simulate", "--rounds", "1", option, str(missing)]
        if option == "--event-socket":
            args += ["--journal", str(tmp_path / "j.sqlite3")]
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and f"folder {missing.parent} does not exist" in r.output, (option, r.output)
        assert not missing.parent.exists()  # no folder made
    with pytest.raises(OSError, match="does not exist"):
        unix_listener(tmp_path / "gone" / "c.sock")
    assert not (tmp_path / "gone").exists()  # the listener of the control and event sockets makes none either


def test_the_configs_sockets_in_a_missing_folder_are_refused_naming_the_key_before_anything_is_made(tmp_path):
    """The service's control socket and the config's event socket follow the same rule as
    --journal, refused before the journal is created (nothing left behind) and named as the
    config's keys: a person reading the error knows which line of which file to fix. (The
    unit's /run/threecard is its RuntimeDirectory=, made by systemd before the run starts.)"""
    key = tmp_path / "table.key"
    subprocess.run(tablectl() + ["audit", "keygen", str(key)], capture_output=True, check=True, timeout=60)
    journal = tmp_path / "j.sqlite3"
    for section, service in (("control_socket", True), ("event_socket", False)):
        missing = tmp_path / "no-such-folder" / f"{section}.sock"
        config = tmp_path / "table.toml"
        config.write_text('[table]\nid = "bench-x"\nseats = 2\n[devices.shuffler]\nurl = "loop://"\n'
                          f'[devices.shoe]\nurl = "loop://"\n[journal]\npath = "{journal}"\n[console]\n'
                          f'{section} = "{missing}"\n')
        args = ["run", "--config", str(config), "--table-key", str(key)]
        args += ["--service"] if service else ["--simulate", "--rounds", "1", "--journal", str(journal)]
        r = subprocess.run(tablectl() + args, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (section, r.stderr[-2000:])
        assert f"[console] {section} of {config}: folder {missing.parent} does not exist" in r.stderr, r.stderr
        assert not missing.parent.exists() and not journal.exists(), section  # no folder, no journal made
    config.write_text(config.read_text().replace(str(journal), str(tmp_path / "no-such-folder" / "j.sqlite3")))
    r = subprocess.run(tablectl() + ["run", "--config", str(config), "--table-key", str(key), "--service"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and f"[journal] path of {config}: folder {tmp_path / 'no-such-folder'}" in r.stderr


def test_a_config_section_a_simulated_run_will_not_use_is_named_in_a_warning(tmp_path):
    from table.keys import generate, save

    save(generate(), tmp_path / "floor.key")
    config = tmp_path / "table.toml"
    config.write_text('[table]\nid = "bench-x"\nseats = 2\n[devices.shuffler]\nurl = "/dev/x"\n[devices.shoe]\n'
                      f'url = "/dev/y"\n[journal]\npath = "{tmp_path}/j.sqlite3"\n[console]\ncontrol_socket = '
                      f'"{tmp_path}/c.sock"\n[mqtt]\nhost = "127.0.0.1"\n[floor]\nurl = "http://127.0.0.1:9"\n'
                      f'public_key = "{tmp_path}/floor.key.pub"\n')
    r = subprocess.run(tablectl() + ["run", "--config", str(config), "--simulate", "--rounds", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    warned = [line for line in r.stderr.splitlines() if line.startswith("tablectl run: warning:")]
    assert len(warned) == 4, r.stderr[-2000:]
    assert "[journal] path is not used: --simulate is not the real table" in warned[0] and str(config) in warned[0]
    assert "[console] control_socket" in warned[1] and "[mqtt]" in warned[2] and "[floor] url" in warned[3]
    assert not (tmp_path / "j.sqlite3").exists() and not (tmp_path / "c.sock").exists()
    # Given what they would have given, nothing is left unused: no warning about the journal.
    r = subprocess.run(tablectl() + ["run", "--config", str(config), "--simulate", "--rounds", "1", "--journal",
                                     str(tmp_path / "mine.sqlite3")], capture_output=True, text=True, timeout=120)
    assert "[journal] path" not in r.stderr and "[mqtt]" not in r.stderr
