"""The README's stream check as a person types it (issue 25): `tablectl events tail --journal J
--since 0 | tablectl audit check-stream` on a table with its own id passes as written, and a
check that checked nothing (an empty stream, as a failed `events tail` before the pipe gives)
is not OK."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner

from console_helpers import tablectl
from table.cli import main
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
