"""The journal as one segment a gaming day (issue 27, points 5 and 6): three simulated days
on a clock the test sets, each closed with a signed checkpoint, archived (xz) and chained
to the next; `tablectl audit verify --archive` checks them as one chain and names a day
missing or swapped; reports over the archive equal reports over the same rounds live;
retention keeps what the floor has not anchored; SIGKILL inside the day's close loses
nothing and the restart finishes it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from table.day import segments
from table.keys import load_private_key
from table.procedure.table_day import TableClosed
from tests.journal_rows import bodies_as_text, reader
from tests.day_helpers import PAYTABLES, START, WallClock, day_start, day_table
from tests.test_e2e_run import tablectl

DAYS = ("2026-12-01", "2026-12-02", "2026-12-03")
ROUNDS = 3


def _backup(src: Path, dst: Path) -> None:
    """A consistent copy of a live journal (SQLite's backup API, as docs/journal.md says)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


@pytest.fixture(scope="module")
def three_days(tmp_path_factory):
    """Three gaming days of ROUNDS rounds and the first round of a fourth; a copy of each
    day's live journal just before its close."""
    folder = tmp_path_factory.mktemp("days")
    clock = WallClock()
    copies = {}
    with day_table(folder, clock) as ctl:
        for n, day in enumerate(DAYS):
            clock.set(day_start(n) if n else START)
            for _ in range(ROUNDS):
                ctl.play_round()
            copies[day] = folder / f"live-{day}.sqlite3"
            _backup(folder / "journal.sqlite3", copies[day])
        clock.set(day_start(3))
        ctl.play_round()
    assert segments.compressed(300)  # each day's xz is written off the round's path
    return folder, copies


def audit(*args):
    return subprocess.run(tablectl() + ["audit", "verify", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def report(*args):
    r = subprocess.run(tablectl() + ["report", *map(str, args), "--json", *PAYTABLES], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_each_day_is_archived_and_the_days_verify_as_one_chain(three_days):
    folder, _ = three_days
    archive, pub = folder / "archive", folder / "table.key.pub"
    assert sorted(p.name for p in archive.iterdir()) == [f"{d}.journal.xz" for d in DAYS]
    r = audit(folder / "journal.sqlite3", "--archive", archive, "--public-key", pub, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert [d["gaming_day"] for d in got["days"]] == [*DAYS, None]
    # the seqs go on across days without a gap
    for a, b in zip(got["days"], got["days"][1:]):
        assert b["first_seq"] == a["first_seq"] + a["entries"]
    # the live segment alone verifies as today (its head file anchors it), naming the day before
    r = audit(folder / "journal.sqlite3", "--public-key", pub)
    assert r.returncode == 0 and "2026-12-03" in r.stderr, r.stderr
    # the archives alone: the last day's end is vouched for by nothing given
    r = audit("--archive", archive, "--public-key", pub)
    assert r.returncode == 3 and "2026-12-03.journal.xz" in r.stderr, r.stderr
    # each day's segment ends with its close and a signed checkpoint (an auditor's own look)
    with segments.opened(archive / "2026-12-02.journal.xz") as db:
        con = reader(db)
        last = con.execute("SELECT kind, body FROM entries ORDER BY seq DESC LIMIT 2").fetchall()
        first = con.execute("SELECT kind, body FROM entries ORDER BY seq LIMIT 1").fetchone()
        con.close()
    assert [k for k, _ in last] == ["checkpoint", "segment"]
    assert json.loads(last[1][1])["close"] == "2026-12-02"
    assert first[0] == "segment" and json.loads(first[1])["previous"]["gaming_day"] == "2026-12-01"


def test_a_missing_or_swapped_day_is_named_with_its_own_exit_code(three_days, tmp_path):
    folder, _ = three_days
    pub = folder / "table.key.pub"
    missing = tmp_path / "missing"
    shutil.copytree(folder / "archive", missing)
    (missing / "2026-12-02.journal.xz").unlink()
    r = audit(folder / "journal.sqlite3", "--archive", missing, "--public-key", pub)
    assert r.returncode == 5, r.stderr
    assert "GAP" in r.stderr and "gaming day 2026-12-02" in r.stderr and "missing" in r.stderr

    swapped = tmp_path / "swapped"
    shutil.copytree(folder / "archive", swapped)
    a, b = swapped / "2026-12-02.journal.xz", swapped / "2026-12-03.journal.xz"
    a.rename(tmp_path / "x")
    b.rename(a)
    (tmp_path / "x").rename(b)
    r = audit(folder / "journal.sqlite3", "--archive", swapped, "--public-key", pub)
    assert r.returncode == 6, r.stderr
    assert "2026-12-02.journal.xz holds gaming day 2026-12-03" in r.stderr

    # an archive replaced by another day's copy under its name: the chain does not link
    twice = tmp_path / "twice"
    shutil.copytree(folder / "archive", twice)
    shutil.copy(twice / "2026-12-01.journal.xz", twice / "2026-12-02.journal.xz")
    r = audit(folder / "journal.sqlite3", "--archive", twice, "--public-key", pub)
    assert r.returncode in (5, 6), r.stderr
    assert "2026-12-02" in r.stderr


def test_a_report_over_the_archive_equals_the_report_over_the_same_rounds_live(three_days):
    folder, copies = three_days
    for day in DAYS:
        live = report("day", "--journal", copies[day], "--date", day)
        archived = report("day", "--archive", folder / "archive", "--date", day)
        # the figures are the same; the record each was checked as is its own (a journal, a folder)
        assert archived.pop("record")["problems"] == live.pop("record")["problems"] == []
        assert archived == live and archived["rounds"] == ROUNDS
    year = report("year", "--archive", folder / "archive", "--journal", folder / "journal.sqlite3")
    assert year["rounds"] == 3 * ROUNDS + 1
    assert year["settled_win"] == sum(report("day", "--archive", folder / "archive", "--journal",
                                             folder / "journal.sqlite3", "--date", d)["settled_win"]
                                      for d in (*DAYS, "2026-12-04"))


def _seq_end(archive: Path) -> int:
    with segments.opened(archive) as db:
        con = sqlite3.connect(db)
        (end,) = con.execute("SELECT MAX(seq) FROM entries").fetchone()
        con.close()
    return end


def test_retention_removes_only_old_archives_the_floor_has_anchored(three_days, tmp_path):
    folder, _ = three_days
    kept = tmp_path / "archive"
    shutil.copytree(folder / "archive", kept)
    names = lambda: sorted(p.name for p in kept.iterdir())  # noqa: E731
    everything = names()
    past = date(2026, 12, 3)  # 01 and 02 are past a retention that keeps from the 3rd
    # no floor: nothing is ever removed, however old
    assert segments.prune(kept, oldest_kept=past, anchored_seq=None) == [] and names() == everything
    # the floor holds a checkpoint inside day 2 only: day 1 goes, day 2 waits for its anchor
    end1, end2 = _seq_end(kept / "2026-12-01.journal.xz"), _seq_end(kept / "2026-12-02.journal.xz")
    removed = segments.prune(kept, oldest_kept=past, anchored_seq=end2 - 5)
    assert [p.name for p in removed] == ["2026-12-01.journal.xz"] and end1 < end2 - 5
    # once anchored past its end it goes too; the day inside the retention stays whatever the anchor
    segments.prune(kept, oldest_kept=past, anchored_seq=10 ** 9)
    assert names() == ["2026-12-03.journal.xz"]
    # Removed by hand, not by the table (no retention entry journaled): the days before the chain's
    # start are missing, exit 5 (before, a note; deleting the oldest days passed unseen).
    r = audit(folder / "journal.sqlite3", "--archive", kept, "--public-key", folder / "table.key.pub")
    assert r.returncode == 5 and "gaming day 2026-12-02" in r.stderr and "no retention entry" in r.stderr, r.stderr
    # seven years by default (K.A.R. 112-108-51); 29 February falls back to the 28th
    assert segments.cutoff(date(2026, 12, 4), years=7) == date(2019, 12, 4)
    assert segments.cutoff(date(2028, 2, 29), years=7) == date(2021, 2, 28)
    assert segments.cutoff(date(2026, 12, 4), years=7, keep_days=30) == date(2026, 11, 4)


def test_the_table_rolls_over_with_retention_and_an_open_table_stays_open(tmp_path):
    """With procedures required: opened on day 1, the table is still open after the
    rollover and after a restart on the new segment; the day-1 archive is removed by
    the rollover past retention only with a floor anchor."""
    from protocols.cards import BackColour
    from simulators.table import SimulatedTable

    clock = WallClock()
    inv = {"inventory": {"2500": 40}}
    anchored = {"seq": None}
    with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=4) as sim:
        _roll_with_retention(tmp_path, clock, inv, anchored, sim)


def _roll_with_retention(tmp_path, clock, inv, anchored, sim):
    with day_table(tmp_path, clock, day_required=True, keep_days=1, anchored=lambda: anchored["seq"],
                   sim=sim) as ctl:
        with pytest.raises(TableClosed):
            ctl.play_round()
        ctl.table_procedure("open", inv, dealer="dana", supervisor="sam")
        ctl.play_round()
        clock.set(day_start(1))
        ctl.play_round()  # the rollover, then a round: the table is still open
        assert segments.compressed(120)
        assert sorted(p.name for p in (tmp_path / "archive").iterdir()) == ["2026-12-01.journal.xz"]
        clock.set(day_start(3))
        ctl.play_round()  # day 2 archived; day 1 is past keep_days but nothing anchors it: kept
        assert segments.compressed(120)
        assert len(list((tmp_path / "archive").iterdir())) == 2
    with day_table(tmp_path, clock, day_required=True, keep_days=1, anchored=lambda: anchored["seq"],
                   sim=sim) as ctl:
        ctl.play_round()  # a restart on the new segment: still open
        anchored["seq"] = ctl.journal.last_seq
        clock.set(day_start(5))
        ctl.play_round()
    assert segments.compressed(120)
    left = sorted(p.name for p in (tmp_path / "archive").iterdir())
    assert left == ["2026-12-04.journal.xz"], left  # 01 and 02 (older than a day, anchored) removed
    # The table journaled the removal, signed: the chain that is left verifies, saying so.
    r = audit(tmp_path / "journal.sqlite3", "--archive", tmp_path / "archive", "--public-key",
              tmp_path / "table.key.pub")
    assert r.returncode == 0 and "removed by the table's retention" in r.stderr, r.stderr


KILL_POINTS = ["closed", "archived", "verified", "segment_written", "head_moved", "renamed"]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_inside_the_days_close_loses_nothing_and_the_restart_finishes_it(tmp_path, point):
    env = {**os.environ, segments.KILL_ENV: point}
    r = subprocess.run([sys.executable, "-m", "tests.day_helpers", str(tmp_path), "1", "2"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    key = load_private_key(tmp_path / "table.key")
    # the start of a table with [journal] archive: finish what the kill cut short
    done = segments.finish(tmp_path / "journal.sqlite3", tmp_path / "archive", key=key, table_id="t1")
    # killed before the new segment took the journal's place: the rollover is done again
    assert done == (None if point == "renamed" else tmp_path / "archive" / "2026-12-01.journal.xz")
    # and the day is compressed off the start's path; nothing a cut rollover wrote is left
    assert segments.compressed(120)
    assert not [p for p in (tmp_path / "archive").iterdir() if p.name.startswith(".")]
    assert [p.name for p in (tmp_path / "archive").iterdir()] == ["2026-12-01.journal.xz"]
    assert not (tmp_path / "journal.sqlite3.next").exists()
    r = audit(tmp_path / "journal.sqlite3", "--archive", tmp_path / "archive", "--public-key",
              tmp_path / "table.key.pub")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = report("day", "--archive", tmp_path / "archive", "--date", "2026-12-01")
    assert rep["rounds"] == 2  # both rounds of the day closed are in its archive
    # the live journal is the next day's segment, resuming from the state the day closed with
    con = reader(tmp_path / "journal.sqlite3")
    rows = con.execute("SELECT kind, body FROM entries ORDER BY seq").fetchall()
    con.close()
    assert [k for k, _ in rows] == ["segment", "checkpoint"]
    assert json.loads(rows[0][1])["open"] == "2026-12-02"
    with segments.opened(tmp_path / "archive" / "2026-12-01.journal.xz") as db:
        con = reader(db)
        (closed,) = con.execute("SELECT body FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        con.close()
    assert json.loads(rows[1][1])["state"] == json.loads(closed)["state"]


def test_a_days_archive_is_small(three_days):
    folder, copies = three_days
    size = (folder / "archive" / "2026-12-02.journal.xz").stat().st_size
    live = copies["2026-12-02"].stat().st_size
    assert size < live / 2, (size, live)


def test_tablectl_run_takes_the_archive_folder_from_the_config_and_refuses_one_missing(tmp_path):
    from tests.test_run_cli import CONFIG

    folder = tmp_path / "archive"
    cfg = tmp_path / "table.toml"
    cfg.write_text(CONFIG.replace("[log]", f'[journal]\npath = "{tmp_path / "j.sqlite3"}"\narchive = "{folder}"\n\n'
                                           "[gaming_day]\nretention_years = 7\n\n[log]"))
    run = tablectl() + ["run", "--simulate", "--rounds", "1", "--seed", "2", "--config", str(cfg), "--json",
                        "--journal", str(tmp_path / "j.sqlite3")]
    r = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "journal.archive" in r.stderr and str(folder) in r.stderr, r.stderr
    assert not (tmp_path / "j.sqlite3").exists()  # refused before the journal was opened
    folder.mkdir()
    r = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert audit(tmp_path / "j.sqlite3", "--public-key", tmp_path / "j.sqlite3.key.pub").returncode == 0


def test_the_event_stream_numbers_on_across_the_days_close_and_a_restart(tmp_path):
    """The live stream (fed from memory) goes on across the rollover without a gap and
    hears the new segment's checkpoint; read again from the new segment's file (a
    restart, `tablectl events tail`), its events carry the same numbers."""
    from table.events import EventLog

    clock = WallClock()
    got = []
    with day_table(tmp_path, clock) as ctl:
        log = EventLog(tmp_path / "journal.sqlite3", "t1", journal=ctl.journal).start()
        log.add_listener(lambda d: got.append((d.seq, d.event["type"])))
        try:
            ctl.play_round()
            clock.set(day_start(1))
            ctl.play_round()
            log.poll()
        finally:
            log.close()
    seqs = [s for s, _ in got]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # no gap, no repeat
    con = reader(tmp_path / "journal.sqlite3")
    (first,) = con.execute("SELECT body FROM entries ORDER BY seq LIMIT 1").fetchone()
    con.close()
    before = json.loads(first)["previous"]["events"]
    assert ("checkpoint" in [k for s, k in got if s == before + 1]), got  # the new segment's own checkpoint
    r = subprocess.run(tablectl() + ["events", "tail", "--journal", str(tmp_path / "journal.sqlite3"), "--since",
                                     "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["seq"] for e in events] == [s for s, _ in got if s > before]
    check = subprocess.run(tablectl() + ["audit", "check-stream"], input=r.stdout, capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_an_archived_day_put_back_as_the_live_journal_is_an_incident(three_days, tmp_path):
    """Anchors older than the live segment are taken as the archive's (matched); an older
    day's segment put in the live one's place is still behind the head file's checkpoint."""
    from table.errors import SupervisorRequired

    folder, _ = three_days
    for name in ("table.key", "table.key.pub", "journal.sqlite3.head"):
        shutil.copy(folder / name, tmp_path / name)
    with segments.opened(folder / "archive" / "2026-12-02.journal.xz") as db:
        shutil.copy(db, tmp_path / "journal.sqlite3")
    (tmp_path / "archive").mkdir()
    with pytest.raises(SupervisorRequired, match="behind checkpoint"):
        with day_table(tmp_path, WallClock(day_start(3))):
            pass
    # and audit verify says the same of it
    r = audit(tmp_path / "journal.sqlite3", "--public-key", tmp_path / "table.key.pub")
    assert r.returncode == 1 and "truncated or rolled back" in r.stderr, r.stderr


def test_checkpoints_of_archived_days_are_not_taken_for_a_rollback(three_days, tmp_path):
    """A restart on the live segment sees the floor's checkpoints of earlier days (in the
    archive): they match, the table does not hold; a newer one it lacks still does."""
    from table.anchors import classify
    from table.journal import Journal

    folder, _ = three_days
    olds = []
    for day in DAYS:
        with segments.opened(folder / "archive" / f"{day}.journal.xz") as db:
            con = reader(db)
            olds += [json.loads(b)["checkpoint"] for (b,) in
                     con.execute("SELECT body FROM entries WHERE kind='checkpoint' ORDER BY seq")]
            con.close()
    shutil.copy(folder / "journal.sqlite3", tmp_path / "journal.sqlite3")
    key = load_private_key(folder / "table.key")
    with Journal(tmp_path / "journal.sqlite3", key=key, table_id="t1") as j:
        got = classify(olds, j, head=False)
        assert not got.incident and got.matched == len(olds)
        newer = {**olds[-1], "seq": j.last_seq + 5}
        assert classify([newer], j, head=False).incident  # forged (bad signature): refused, an incident


def test_the_report_from_the_config_reads_the_archive_and_the_live_segment(three_days, tmp_path):
    from tests.test_run_cli import CONFIG

    folder, _ = three_days
    cfg = tmp_path / "table.toml"
    cfg.write_text(CONFIG.replace("[log]", f'[journal]\npath = "{folder / "journal.sqlite3"}"\n'
                                           f'archive = "{folder / "archive"}"\n\n[log]'))
    assert report("year", "--config", cfg)["rounds"] == 3 * ROUNDS + 1


NEXT_DAY_STARTS = datetime(2026, 12, 2, 6, tzinfo=timezone.utc)  # gaming day 2026-12-02 (start hour 6, UTC)


def test_a_round_played_across_the_days_start_counts_in_the_day_whose_archive_holds_it(tmp_path):
    """The day's close waits for the round in play, so a round opened a few ms before the next
    gaming day's start and settled after it is in that day's archive. It counts there too:
    the day's report from the archive, from the live journal, and the next day's all agree
    (before, it was archived with one day and reported in the next: the live journal's
    next-day figure silently one round short)."""
    clock = WallClock()
    with day_table(tmp_path, clock) as ctl:
        clock.set(START)
        ctl.play_round()
        clock.set(NEXT_DAY_STARTS - timedelta(milliseconds=5))  # 05:59:59.995: the round ends past 06:00
        ctl.play_round()
        clock.set(day_start(1))
        ctl.play_round()  # closes 2026-12-01 first, then plays the next day's first round
    with segments.opened(tmp_path / "archive" / "2026-12-01.journal.xz") as db:
        con = reader(db)
        settled_at = [ts for (ts,) in con.execute("SELECT ts FROM entries WHERE kind = 'round' AND body LIKE "
                                                   "'%\"step\":\"settle\"%' ORDER BY seq")]
        con.close()
    assert len(settled_at) == 2 and settled_at[-1] >= int(NEXT_DAY_STARTS.timestamp() * 1_000_000)
    archived = report("day", "--archive", tmp_path / "archive", "--date", "2026-12-01")
    both = report("day", "--archive", tmp_path / "archive", "--journal", tmp_path / "journal.sqlite3",
                  "--date", "2026-12-01")
    assert archived["rounds"] == both["rounds"] == 2
    nxt = report("day", "--journal", tmp_path / "journal.sqlite3", "--date", "2026-12-02")
    assert nxt["rounds"] == 1


def test_the_day_report_query_reads_a_closed_day_from_its_archive(three_days):
    """The supervisor's shift page and the API's `day_report` for a gaming day already closed
    and archived: that day's figures, equal to `tablectl report day --archive`, not an empty
    day read from the live segment (found by a fresh review: rounds 0, settled win 0)."""
    from table.interfaces.day_view import DayReportQueries
    from table.rules.settlement import Tables

    folder, _ = three_days
    queries = DayReportQueries(folder / "journal.sqlite3", Tables.load("pa-649a12b-1"), archive=folder / "archive")
    for day in DAYS:
        got = queries.day_report({"period": "day", "gaming_day": day})
        cli = report("day", "--archive", folder / "archive", "--journal", folder / "journal.sqlite3", "--date", day)
        assert got["rounds"] == cli["rounds"] == ROUNDS and got["settled_win"] == cli["settled_win"]
        assert len(got["series"]) == ROUNDS
    today = queries.day_report({"period": "day", "gaming_day": "2026-12-04"})
    assert today["rounds"] == 1
    unarchived = DayReportQueries(folder / "journal.sqlite3", Tables.load("pa-649a12b-1"))
    assert unarchived.day_report({"period": "day", "gaming_day": DAYS[0]})["rounds"] == 0  # without the folder


def test_a_report_over_a_folder_missing_a_day_says_so_and_is_flagged(three_days, tmp_path):
    """A day deleted from the archive folder: the month's report names it and is flagged (exit
    1), not silently three rounds short; a day report of another day is not flagged for it."""
    folder, _ = three_days
    holed = tmp_path / "archive"
    shutil.copytree(folder / "archive", holed)
    (holed / "2026-12-02.journal.xz").unlink()
    r = subprocess.run(tablectl() + ["report", "month", "--archive", str(holed), "--journal",
                                     str(folder / "journal.sqlite3"), "--json", *PAYTABLES],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    month = json.loads(r.stdout)
    assert month["rounds"] == 2 * ROUNDS + 1 and month["missing_days"][0].startswith("2026-12-02")
    assert any("missing from the archive folder" in f for f in month["flags"])
    other = report("day", "--archive", holed, "--date", "2026-12-03")
    assert "missing_days" not in other


def test_a_day_not_compressed_yet_reads_as_its_archive_and_the_start_compresses_it(three_days, tmp_path):
    """The rollover leaves the closed day as ``DAY.journal.sqlite3`` and deals on; until
    its xz is written (off the round's path), every reader takes it as the archive: the
    chain's check, the reports; a start finds it and compresses it, checked."""
    import lzma

    folder, _ = three_days
    staged = tmp_path / "archive"
    shutil.copytree(folder / "archive", staged)
    xz = staged / "2026-12-02.journal.xz"
    with lzma.open(xz) as inp:
        (staged / "2026-12-02.journal.sqlite3").write_bytes(inp.read())
    xz.unlink()
    r = audit(folder / "journal.sqlite3", "--archive", staged, "--public-key", folder / "table.key.pub")
    assert r.returncode == 0, r.stdout + r.stderr
    assert report("day", "--archive", staged, "--date", "2026-12-02")["rounds"] == ROUNDS
    segments.compress_pending(staged, public_keys=[load_private_key(folder / "table.key").public])
    assert segments.compressed(120)
    assert sorted(p.name for p in staged.iterdir()) == [f"{d}.journal.xz" for d in DAYS]
    r = audit(folder / "journal.sqlite3", "--archive", staged, "--public-key", folder / "table.key.pub")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_day_not_compressed_yet_that_does_not_verify_is_not_compressed_nor_removed(three_days, tmp_path):
    import lzma

    folder, _ = three_days
    staged = tmp_path / "archive"
    staged.mkdir()
    with lzma.open(folder / "archive" / "2026-12-02.journal.xz") as inp:
        (staged / "2026-12-02.journal.sqlite3").write_bytes(inp.read())
    bodies_as_text(staged / "2026-12-02.journal.sqlite3")
    con = sqlite3.connect(staged / "2026-12-02.journal.sqlite3")
    con.execute("UPDATE entries SET body = body || ' ' WHERE seq = (SELECT MIN(seq) + 3 FROM entries)")
    con.commit()
    con.close()
    with pytest.raises(segments.ArchiveError, match="does not verify"):
        segments.compress_one(staged / "2026-12-02.journal.sqlite3",
                              public_keys=[load_private_key(folder / "table.key").public])
    assert [p.name for p in staged.iterdir()] == ["2026-12-02.journal.sqlite3"]


@pytest.mark.parametrize("point", ["compressed", "xz_checked"])
def test_sigkill_inside_a_days_compression_loses_nothing_and_the_start_finishes_it(three_days, tmp_path, point):
    """The xz is written off the round's path; a SIGKILL while it is written (its
    temporary file fsynced, not renamed) or after its rename (the day in both forms)
    leaves the day readable, and the next start compresses it, checked."""
    import lzma

    folder, _ = three_days
    staged = tmp_path / "archive"
    shutil.copytree(folder / "archive", staged)
    with lzma.open(staged / "2026-12-02.journal.xz") as inp:
        (staged / "2026-12-02.journal.sqlite3").write_bytes(inp.read())
    (staged / "2026-12-02.journal.xz").unlink()
    code = ("import sys; from pathlib import Path; from table.day import segments; from table.keys import load_private_key;"
            "segments.compress_one(Path(sys.argv[1]), public_keys=[load_private_key(Path(sys.argv[2])).public])")
    r = subprocess.run([sys.executable, "-c", code, str(staged / "2026-12-02.journal.sqlite3"),
                        str(folder / "table.key")], env={**os.environ, segments.KILL_ENV: point},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert (staged / "2026-12-02.journal.sqlite3").exists()
    r = audit(folder / "journal.sqlite3", "--archive", staged, "--public-key", folder / "table.key.pub")
    assert r.returncode == 0, r.stdout + r.stderr  # readable meanwhile, in whichever form
    live = tmp_path / "journal.sqlite3"
    _backup(folder / "journal.sqlite3", live)
    assert segments.finish(live, staged, key=load_private_key(folder / "table.key"), table_id="t1") is None
    assert segments.compressed(120)
    assert sorted(p.name for p in staged.iterdir()) == [f"{d}.journal.xz" for d in DAYS]
    r = audit(folder / "journal.sqlite3", "--archive", staged, "--public-key", folder / "table.key.pub")
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_archive_folder_on_another_file_system_gets_a_copy_checked_against_the_segment(three_days, tmp_path,
                                                                                        mocker):
    """The closed segment takes its archived day's name by a hard link (no byte copied on the
    round's path); where the folder is on another file system (no link), it is copied,
    fsynced, and checked to hold the same entries to the same last MAC."""
    import lzma

    folder, _ = three_days
    src = tmp_path / "closed.sqlite3"
    with lzma.open(folder / "archive" / "2026-12-02.journal.xz") as inp:
        src.write_bytes(inp.read())
    mocker.patch("table.day.segments.os.link", side_effect=OSError(18, "Invalid cross-device link"))
    staged = segments.write_staged(src, tmp_path / "2026-12-02.journal.sqlite3")
    assert staged.read_bytes() == src.read_bytes() and not os.path.samefile(src, staged)
    segments._check_copy(src, staged)
    with open(staged, "r+b") as f:  # a copy cut short is not taken for the day
        f.truncate(staged.stat().st_size - 4096)
    with pytest.raises(segments.ArchiveError):
        segments._check_copy(src, staged)


def _edit_archive(folder: Path, day: str, sql: str) -> None:
    """An attacker's edit of an archived day: decompressed, one SQL statement, recompressed."""
    import lzma

    path = folder / f"{day}.journal.xz"
    db = folder / "edit.sqlite3"
    db.write_bytes(lzma.decompress(path.read_bytes()))
    bodies_as_text(db)
    con = sqlite3.connect(db)
    try:
        con.execute(sql)
        con.commit()
    finally:
        con.close()
    path.write_bytes(lzma.compress(db.read_bytes(), format=lzma.FORMAT_XZ))
    db.unlink()


def _report_raw(*args):
    return subprocess.run(tablectl() + ["report", *map(str, args), "--json", *PAYTABLES], capture_output=True,
                          text=True, timeout=300)


def test_a_report_over_a_folder_missing_its_oldest_days_names_them_and_is_flagged(three_days, tmp_path):
    """The oldest archived day deleted (no retention entry of the table removed it): the year's
    report names the day the oldest one left chains to and is flagged (exit 1), not 3 rounds
    short with exit 0 (found by an attacker: 13 rounds of 16, no day named)."""
    folder, _ = three_days
    holed = tmp_path / "archive"
    shutil.copytree(folder / "archive", holed)
    (holed / f"{DAYS[0]}.journal.xz").unlink()
    for kind in ("year", "month"):
        r = _report_raw(kind, "--archive", holed, "--journal", folder / "journal.sqlite3")
        assert r.returncode == 1, r.stderr
        rep = json.loads(r.stdout)
        assert rep["rounds"] == 2 * ROUNDS + 1
        assert rep["missing_days"][0].startswith(DAYS[0]) and "days before it" in rep["missing_days"][0]
        assert any(DAYS[0] in f for f in rep["flags"])


@pytest.mark.parametrize("sql, says", [
    # a settled amount changed: the entry still reads, the chain does not hold
    ("UPDATE entries SET body=replace(body, '\"amount\":-1000', '\"amount\":-100') "
     "WHERE seq=(SELECT min(seq) FROM entries WHERE kind='round' AND body LIKE '%\"results\"%')", "tampered"),
    # an entry edited into something that is not JSON (was exit 70, an internal error)
    ("UPDATE entries SET body='{' WHERE seq=(SELECT min(seq) FROM entries WHERE kind='round')", "does not read"),
    # an entry that reads but is no settled round (was exit 2 naming no day)
    ("UPDATE entries SET body=replace(body, '\"results\"', '\"resultz\"') "
     "WHERE seq=(SELECT min(seq) FROM entries WHERE kind='round' AND body LIKE '%\"results\"%')", "not counted"),
])
def test_an_edited_archived_day_is_named_by_the_report_never_an_internal_error(three_days, tmp_path, sql, says):
    """An archived day edited: every report over the folder names the day and is flagged
    (exit 1), with or without the public key, never exit 70 and never silently."""
    folder, _ = three_days
    edited = tmp_path / "archive"
    shutil.copytree(folder / "archive", edited)
    _edit_archive(edited, DAYS[1], sql)
    for extra in ((), ("--public-key", folder / "table.key.pub")):
        for kind in ("year", "month", "day"):
            r = _report_raw(kind, "--archive", edited, "--journal", folder / "journal.sqlite3",
                            "--date", DAYS[1] if kind == "day" else DAYS[2], *extra)
            assert r.returncode == 1, (kind, r.returncode, r.stderr)
            rep = json.loads(r.stdout)
            text = " ".join(rep["flags"])
            assert f"{DAYS[1]}.journal.xz" in text and says in text, text
    r = subprocess.run(tablectl() + ["report", "year", "--archive", str(edited), "--journal",
                                     str(folder / "journal.sqlite3"), *PAYTABLES], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and r.stdout.startswith("record: DOES NOT VERIFY"), r.stdout[:300]


def test_the_day_report_query_names_an_opened_day_whose_archive_is_missing(tmp_path):
    """The shift page and the API's `day_report` for a gaming day the table was opened on whose
    archive was deleted from the folder: the day is named in `missing_days` and flagged, not
    shown as an empty day (0 rounds, nothing said)."""
    from table.interfaces.day_view import DayReportQueries
    from table.rules.settlement import Tables

    clock = WallClock()
    inventory = {"inventory": {"2500": 40}}
    with day_table(tmp_path, clock) as ctl:
        for n in range(3):
            clock.set(day_start(n) if n else START)
            ctl.table_procedure("open", inventory, dealer="D-4", supervisor="S-17")
            ctl.play_round()
            ctl.table_procedure("close", inventory, dealer="D-4", supervisor="S-17")
        clock.set(day_start(3))
        ctl.play_round()
    assert segments.compressed(timeout_s=120), "the closed days are compressed off the round's path"
    (tmp_path / "archive" / f"{DAYS[1]}.journal.xz").unlink()
    queries = DayReportQueries(tmp_path / "journal.sqlite3", Tables.load("pa-649a12b-1"), archive=tmp_path / "archive")
    for period in ("day", "shift"):
        got = queries.day_report({"period": period, "gaming_day": DAYS[1]})
        assert got["missing_days"][0].startswith(DAYS[1]) and any(DAYS[1] in f for f in got["flags"]), got["flags"]
    kept = queries.day_report({"period": "day", "gaming_day": DAYS[2]})
    assert "missing_days" not in kept and kept["rounds"] == 1


def test_a_swapped_day_not_compressed_yet_never_replaces_the_days_archive(three_days, tmp_path):
    """A fresh attacker's swap: another genuine, signed day put in as a day's
    ``.journal.sqlite3`` beside that day's xz. The compression refuses it (its close entry
    names another day) and the xz there is kept; a day's own copy beside a different xz
    is not compressed over it either."""
    import lzma

    folder, _ = three_days
    staged = tmp_path / "archive"
    shutil.copytree(folder / "archive", staged)
    before = (staged / "2026-12-01.journal.xz").read_bytes()
    with lzma.open(staged / "2026-12-02.journal.xz") as inp:
        (staged / "2026-12-01.journal.sqlite3").write_bytes(inp.read())  # day 2's segment named as day 1
    key = load_private_key(folder / "table.key").public
    with pytest.raises(segments.ArchiveError, match="holds gaming day 2026-12-02, not 2026-12-01"):
        segments.compress_one(staged / "2026-12-01.journal.sqlite3", public_keys=[key])
    assert (staged / "2026-12-01.journal.xz").read_bytes() == before
    assert (staged / "2026-12-01.journal.sqlite3").exists()
    # day 1's own copy, beside an xz that is another day's: neither replaced nor removed
    (staged / "2026-12-01.journal.sqlite3").unlink()
    with lzma.open(staged / "2026-12-01.journal.xz") as inp:
        (staged / "2026-12-01.journal.sqlite3").write_bytes(inp.read())
    shutil.copy(staged / "2026-12-02.journal.xz", staged / "2026-12-01.journal.xz")
    swapped = (staged / "2026-12-01.journal.xz").read_bytes()
    with pytest.raises(segments.ArchiveError, match="neither is replaced nor removed"):
        segments.compress_one(staged / "2026-12-01.journal.sqlite3", public_keys=[key])
    assert (staged / "2026-12-01.journal.xz").read_bytes() == swapped
    assert (staged / "2026-12-01.journal.sqlite3").exists()


def test_a_day_that_could_not_be_compressed_is_an_incident_on_the_table(three_days, tmp_path):
    """A fresh attacker's finding: a not-yet-compressed day that does not verify stayed as it
    was with only a log line. The table says it: an incident journaled, an alarm."""
    import lzma

    folder, _ = three_days
    clock = WallClock()
    with day_table(tmp_path, clock) as ctl:
        ctl.play_round()
        with lzma.open(folder / "archive" / "2026-12-02.journal.xz") as inp:  # another table's day
            (tmp_path / "archive" / "2026-11-30.journal.sqlite3").write_bytes(inp.read())
        segments.compress_pending(tmp_path / "archive", public_keys=[load_private_key(tmp_path / "table.key").public])
        assert segments.compressed(120)
        ctl.play_round()
        said = [e.body["what"] for e in ctl.journal.entries("incident")]
    assert [w for w in said if "2026-11-30.journal.sqlite3 was not compressed" in w], said
    assert (tmp_path / "archive" / "2026-11-30.journal.sqlite3").exists()


def test_an_archived_day_edited_with_its_checkpoints_unmade_is_flagged_on_the_shift_page(three_days, tmp_path):
    """An attacker's edit of an archived day that leaves no checkpoint to disagree: a settled
    amount changed and every checkpoint entry's kind changed, so the day's own check finds no
    signed head to compare (``unanchored``, nothing vouching for a byte of it). The shift
    page's and the API's ``day_report`` of that day flags it as not holding, never shows
    the forged figures as if they held (found by a fresh review: no flag)."""
    import lzma

    from table.interfaces.day_view import DayReportQueries
    from table.rules.settlement import Tables

    folder, _ = three_days
    edited = tmp_path / "archive"
    shutil.copytree(folder / "archive", edited)
    path = edited / f"{DAYS[1]}.journal.xz"
    db = tmp_path / "edit.sqlite3"
    db.write_bytes(lzma.decompress(path.read_bytes()))
    bodies_as_text(db)
    con = sqlite3.connect(db)
    try:
        con.executescript(
            "UPDATE entries SET body=replace(body, '\"amount\":-1000', '\"amount\":-100') "
            "WHERE seq=(SELECT min(seq) FROM entries WHERE kind='round' AND body LIKE '%\"results\"%');"
            "UPDATE entries SET kind='note' WHERE kind='checkpoint';")
    finally:
        con.close()
    path.write_bytes(lzma.compress(db.read_bytes(), format=lzma.FORMAT_XZ))
    key = load_private_key(folder / "table.key").public
    queries = DayReportQueries(folder / "journal.sqlite3", Tables.load("pa-649a12b-1"), archive=edited,
                               public_keys=[key])
    for period in ("day", "shift"):
        got = queries.day_report({"period": period, "gaming_day": DAYS[1]})
        assert any(DAYS[1] in f and "does not verify" in f for f in got["flags"]), got["flags"]
    genuine = DayReportQueries(folder / "journal.sqlite3", Tables.load("pa-649a12b-1"), archive=folder / "archive",
                               public_keys=[key])
    assert not any("does not verify" in f for f in genuine.day_report({"period": "day", "gaming_day": DAYS[1]})["flags"])
