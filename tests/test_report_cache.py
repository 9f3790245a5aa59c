"""The ``day_report`` query read once (table/day/report_cache.py): what is kept answers as a fresh reading would.

After every commit, across the gaming day's rollover and after an archived day is
replaced, the kept answer equals the answer of a query that reads everything
afresh; the live segment is read from its first entry once a segment, not once an
ask; an archive replaced is read again (by its digest) and, edited, flagged.
"""

from __future__ import annotations

import lzma
import os
import random
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from protocols.cards import Card
from table.day import segments
from table.day.day_report import FactsReader, read_journal
from table.interfaces.day_view import DayReportQueries
from table.journal import Journal
from table.keys import load_private_key
from table.rules.settlement import Tables, settle_seat
from table.rules.strategy import plays_q64
from table.rules.wagers import Decision, Wagers
from tests.day_helpers import START, WallClock, day_start, day_table

DAYS = ("2026-12-01", "2026-12-02", "2026-12-03")
TABLES = Tables.load("pa-649a12b-1")


def _now(clock: WallClock):
    return lambda: datetime.fromtimestamp(clock() / 1_000_000, timezone.utc)


def _append_round(j: Journal, n: int, rng: random.Random, seats: int = 3) -> None:
    """One round as a simulated table journals it (open, decisions, reveal, settle), or a
    round voided after it opened, or one held for a device."""
    deck = [Card.from_index(i) for i in range(52)]
    rid = f"r{n:04d}"
    cards = rng.sample(deck, 3 * seats + 3)
    hands = {s: cards[3 * (s - 1):3 * s] for s in range(1, seats + 1)}
    dealer = cards[-3:]
    w = Wagers(1000) if rng.random() < 0.5 else Wagers(500)
    dec = {s: Decision.PLAY if plays_q64(h) else Decision.FOLD for s, h in hands.items()}
    with j.batch():
        j.append("round", round_id=rid, step="open", number=n,
                 wagers={str(s): w.to_record() for s in hands})
        fate = rng.random()
        if fate < 0.1:
            j.append("round", round_id=rid, step="voided", number=n)
            return
        if fate < 0.2:
            j.append("round", round_id=rid, step="held", number=n, cause="device")
    with j.batch():  # the rest of the round commits on its own: an ask can fall between
        j.append("round", round_id=rid, step="decisions_done", number=n,
                 decisions={str(s): d.value for s, d in dec.items()},
                 hands={str(s): [str(c) for c in h] for s, h in hands.items()})
        j.append("round", round_id=rid, step="dealer_reveal", number=n, dealer_hand=[str(c) for c in dealer])
        j.append("round", round_id=rid, step="settle", number=n,
                 results={str(s): settle_seat(w, dec[s], h, dealer, TABLES).to_record() for s, h in hands.items()})


def test_the_reading_kept_equals_a_fresh_reading_after_every_commit(tmp_path):
    """A reader fed only what each commit added holds the facts a whole reading of the
    journal gives, after each of many commits of rounds, voids, holds, incidents and a
    device's link down and up."""
    rng = random.Random(7)
    clock = WallClock()
    path = tmp_path / "journal.sqlite3"
    with Journal(path, table_id="t1", clock=clock) as j:
        reader = FactsReader("t1", None)
        for n in range(1, 80):
            _append_round(j, n, rng)
            if rng.random() < 0.15:
                j.append("incident", what="a card fell")
            if rng.random() < 0.15:
                j.append("link", source="shoe", notice=rng.choice(["link_down", "link_up"]))
            if rng.random() < 0.1:
                j.append("supervisor", action="register_deck", deck="A")
            with Journal(path, read_only=True) as ro:
                reader.read(ro)
                kept = reader.facts()
                whole = read_journal(ro)
            assert kept == whole, f"after round {n}"
        assert len(kept.rounds) > 50 and kept.voids and kept.incidents and kept.downtime


def test_the_query_kept_answers_as_a_fresh_one_after_each_round_and_across_the_rollover(tmp_path):
    """The shift page's query kept for the table's whole run answers, after each round and
    across two gaming days' rollovers, what a query reading everything afresh answers;
    it read the live segment from its first entry once a segment (not once an ask), and
    each archived day once."""
    clock = WallClock()
    now = _now(clock)
    folder = tmp_path
    kept = DayReportQueries(folder / "journal.sqlite3", TABLES, archive=folder / "archive", clock=now)
    asks = 0
    with day_table(folder, clock) as ctl:
        for n, day in enumerate(DAYS):
            clock.set(day_start(n) if n else START)
            for _ in range(4):
                ctl.play_round()
                asked = [{"period": "day"}, {"period": "shift"}]
                if n:
                    assert segments.compressed(timeout_s=120)
                    asked.append({"period": "day", "gaming_day": DAYS[n - 1]})
                for args in asked:
                    fresh = DayReportQueries(folder / "journal.sqlite3", TABLES, archive=folder / "archive",
                                             clock=now)
                    got, want = kept.day_report(args), fresh.day_report(args)
                    assert got == want, (day, args)
                    assert got["rounds"] >= 1
                    asks += 1
    assert asks >= 20
    assert kept.live.full_reads == len(DAYS)  # once a segment
    assert kept.archived.reads == len(DAYS) - 1  # each closed day once


def _rewrite_xz(xz: Path, edit) -> None:
    """Decompress the archived day ``xz``, change it with ``edit(sqlite3 connection)`` and
    write it back into the same file (same inode), its modification time put back."""
    st = xz.stat()
    db = xz.with_suffix(".tmp.sqlite3")
    db.write_bytes(lzma.decompress(xz.read_bytes()))
    con = sqlite3.connect(db)
    edit(con)
    con.commit()
    con.close()
    with open(xz, "r+b") as f:
        f.write(lzma.compress(db.read_bytes()))
        f.truncate()
    os.utime(xz, ns=(st.st_atime_ns, st.st_mtime_ns))
    db.unlink()


def test_an_archived_day_replaced_is_read_again_and_an_edited_one_flagged(tmp_path):
    """An archived day's settlement edited in its xz (written in place, its time put back):
    the kept query reads the day again (its digest changed), answers as a fresh query,
    and flags the day as a record that does not verify; the genuine day is not flagged."""
    clock = WallClock()
    now = _now(clock)
    with day_table(tmp_path, clock) as ctl:
        for n in range(2):
            clock.set(day_start(n) if n else START)
            for _ in range(3):
                ctl.play_round()
    assert segments.compressed(timeout_s=120)
    pub = [load_private_key(tmp_path / "table.key").public]  # the table's public key, as tablectl run gives it
    kept = DayReportQueries(tmp_path / "journal.sqlite3", TABLES, archive=tmp_path / "archive", clock=now,
                            public_keys=pub)
    args = {"period": "day", "gaming_day": DAYS[0]}
    before = kept.day_report(args)
    assert not any("does not verify" in f for f in before["flags"]), before["flags"]
    assert kept.day_report(args) == before and kept.archived.reads == 1  # asked again: not read again

    def pay_more(con: sqlite3.Connection) -> None:
        seq, body = con.execute("SELECT seq, body FROM entries WHERE kind='round' AND body LIKE '%\"settle\"%' "
                                "ORDER BY seq LIMIT 1").fetchone()
        body = body.replace('"amount":', '"amount":1', 1)
        con.execute("UPDATE entries SET body=? WHERE seq=?", (body, seq))

    xz = tmp_path / "archive" / f"{DAYS[0]}.journal.xz"
    _rewrite_xz(xz, pay_more)
    after = kept.day_report(args)
    fresh = DayReportQueries(tmp_path / "journal.sqlite3", TABLES, archive=tmp_path / "archive", clock=now,
                             public_keys=pub).day_report(args)
    assert kept.archived.reads == 2
    assert after == fresh
    assert after["settled_win"] != before["settled_win"]
    assert any(f"{DAYS[0]} does not verify (tampered)" in f for f in after["flags"]), after["flags"]


def test_a_signed_live_entry_edited_before_the_shift_page_reads_is_flagged(tmp_path):
    """A fresh attacker (root on the table PC, the table stopped) changes a settled round of
    the live segment, covered by a signed checkpoint, into wins, re-encoding its body: the
    table's start checks only the entries after the last checkpoint, and the shift page
    read the edited round as it is (settled win -3,000 shown as -6,000, no flag) while
    ``audit verify`` says tampered. The page's first reading of the segment checks it."""
    import json

    from table.journal import decode_body, encode_body, verify
    from table.keys import generate

    key = generate()
    path = tmp_path / "journal.sqlite3"
    rng = random.Random(3)
    with Journal(path, key=key, table_id="t1", clock=WallClock()) as j:
        for n in range(1, 6):
            _append_round(j, n, rng)
            j.checkpoint()

    def ask():
        return DayReportQueries(path, TABLES, public_keys=[key.public]).day_report(
            {"period": "day", "gaming_day": START.date().isoformat()})

    assert not ask()["flags"]
    db = sqlite3.connect(path)
    try:
        seq, body = next((s, b) for s, b in db.execute("SELECT seq, body FROM entries WHERE kind = 'round'")
                         if '"results"' in decode_body(b))
        entry = json.loads(decode_body(body))
        for result in entry["results"].values():
            for w in result["wagers"]:
                w["amount"], w["outcome"] = abs(w["amount"]), "win"
            result["net"] = sum(w["amount"] for w in result["wagers"])
        db.execute("UPDATE entries SET body = ? WHERE seq = ?",
                   (encode_body(json.dumps(entry, sort_keys=True, separators=(",", ":"))), seq))
        db.commit()
    finally:
        db.close()
    assert verify(path, public_keys=[key.public]).status == "tampered"
    flags = ask()["flags"]
    assert any("live journal does not verify" in f and f"entry {seq}" in f for f in flags), flags
