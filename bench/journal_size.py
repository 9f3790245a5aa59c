"""Bytes the live journal costs a round on disk, at a full table with a fixed bet.

    python bench/journal_size.py [--json] [--rounds N] [--seats 7] [--baseline REV] [--forms]

Runs ``tablectl run --simulate --seats 7 --ante-cents 1000 --seed 3 --rounds N
--journal J`` as its own process (every seat bets the same ante: equal tables
in both trees), folds the WAL into the database (``wal_checkpoint(TRUNCATE)``,
as the table's clean close does) and prints

| figure | what |
| --- | --- |
| bytes_per_round | the journal's files (database, WAL, head file) ÷ rounds; limit 8 KB at 7 seats |
| by_kind | each entry kind's stored bytes a round (its row's columns: body, MAC, the 8-byte time, kind, round and deck), and the rest (SQLite's page slack, record headers, schema) |
| ratio_to_baseline | bytes_per_round ÷ the baseline tree's, from this one run |

``--baseline REV``: the same run with the tree of git revision REV (default
``HEAD~1``; ``none`` to skip), extracted with ``git archive`` to a temporary
folder and imported ahead of the installed package.
``--forms``: also re-stores this run's entries in the layouts the compact
journal can choose from (page sizes, binary fields, kind and round numbers,
checkpoints without digests, deflate with a preset dictionary cut from the run's
own first rounds) and prints each one's bytes a round: what each way is worth,
measured on the same entries. Format 4 is the last of them with the fixed
dictionary of ``table/journal_dictionary.py``.
"""

from __future__ import annotations

import argparse
import base64
import json
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import zlib
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _tablectl import ROOT, tablectl  # noqa: E402

from table.journal import decode_body  # noqa: E402

LIMIT = 8 * 1024


def _command(tree: Path | None) -> list[str]:
    if tree is None:
        return tablectl()
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); "
                                  "from table.cli import main; main()"]


def _files(j: Path) -> int:
    return sum(p.stat().st_size for p in j.parent.glob(j.name + "*") if not p.name.endswith((".key", ".key.pub")))


def one(rounds: int, seats: int, work: Path, tree: Path | None = None) -> dict:
    """Run the table, fold the WAL, measure (module docstring)."""
    j = work / "journal.sqlite3"
    proc = subprocess.run(_command(tree) + ["run", "--simulate", "--ante-cents", "1000", "--rounds", str(rounds),
                                            "--seats", str(seats), "--seed", "3", "--json", "--journal", str(j),
                                            "--log-file", str(work / "run.log")],
                          capture_output=True, text=True, timeout=3600, cwd=str(tree or ROOT))
    if proc.returncode != 0:
        raise SystemExit(f"tablectl run ({tree or 'this tree'}) exited {proc.returncode}: {proc.stderr[-800:]}")
    dealt = len(json.loads(proc.stdout)["rounds"])
    db = sqlite3.connect(str(j))
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        table = "entries"
        by_kind = {}
        for kind, n in db.execute(
                f"SELECT kind, SUM(8 + LENGTH(kind) + COALESCE(LENGTH(round_id), 0) "
                f"+ COALESCE(LENGTH(deck_id), 0) + LENGTH(CAST(body AS BLOB)) + LENGTH(mac)) FROM {table} "
                "GROUP BY kind ORDER BY 2 DESC"):
            by_kind[kind] = round(n / dealt)
        page = db.execute("PRAGMA page_size").fetchone()[0]
        fmt = dict(db.execute("SELECT key, value FROM meta")).get("format")
    finally:
        db.close()
    total = _files(j) / dealt
    by_kind["(pages, headers, schema, head file)"] = round(total - sum(by_kind.values()))
    return {"tree": str(tree) if tree else "this", "format": fmt, "seats": seats, "rounds": dealt, "page_size": page,
            "bytes_per_round": round(total), "limit": LIMIT, "by_kind": by_kind, "journal": j}


def _extract(rev: str, dest: Path) -> Path:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


# -- the layouts the compact journal can choose from (--forms) -------------------------------


def _store(path: Path, schema: str, insert: str, rows: list[tuple], page: int) -> int:
    db = sqlite3.connect(str(path))
    db.execute(f"PRAGMA page_size={page}")
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(schema)
    for r in rows:  # one commit an entry, as the table writes a card read
        db.execute(insert, r)
        db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path.stat().st_size


def forms(journal: Path, rounds: int, work: Path) -> dict[str, int]:
    """Each candidate layout's bytes a round, storing the same entries (module docstring)."""
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    rows = [(*r[:5], decode_body(r[5]), r[6]) for r in  # the entries' JSON, however this run stored it
            db.execute("SELECT seq, ts, kind, round_id, deck_id, body, mac FROM entries ORDER BY seq")]
    db.close()
    out: dict[str, int] = {}
    f3 = ("CREATE TABLE entries(seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL, kind TEXT NOT NULL, round_id TEXT, "
          "deck_id TEXT, body TEXT NOT NULL, mac BLOB NOT NULL);")
    for page in (4096, 8192, 16384):
        out[f"format 3's layout, {page // 1024} KB pages"] = _store(work / f"p{page}.db", f3,
                                                           "INSERT INTO entries VALUES (?,?,?,?,?,?,?)", rows, page)
    kinds: dict[str, int] = {}
    rids: dict[str, int] = {}

    def unb(t: str) -> bytes:
        return base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))

    def split(kind: str, body: str, digests: bool = True) -> tuple[str, bytes | None]:
        b = json.loads(body)
        binary = None
        if kind == "card_read" and "sealed" in b and "commit" in b:
            binary = unb(b.pop("commit")) + unb(b.pop("sealed"))
        if kind == "checkpoint" and not digests:
            b["checkpoint"].pop("digests", None)
        return json.dumps(b, sort_keys=True, separators=(",", ":")), binary

    f4 = ("CREATE TABLE e(seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL, k INTEGER NOT NULL, r INTEGER, d TEXT, "
          "body NOT NULL, bin BLOB, mac BLOB NOT NULL);")
    ins = "INSERT INTO e VALUES (?,?,?,?,?,?,?,?)"

    def coded(digests: bool) -> list[tuple]:
        return [(seq, ts, kinds.setdefault(kind, len(kinds)), None if rid is None else rids.setdefault(rid, len(rids)),
                 did, *split(kind, body, digests), mac) for seq, ts, kind, rid, did, body, mac in rows]

    out["binary commitment and seal, kind and round as numbers"] = _store(work / "b.db", f4, ins, coded(True), 8192)
    slim = coded(False)
    out["... and checkpoints without digests"] = _store(work / "c.db", f4, ins, slim, 8192)
    out["... and bodies deflated (no dictionary)"] = _store(
        work / "z.db", f4, ins, [(*r[:5], zlib.compress(r[5].encode(), 9), *r[6:]) for r in slim], 8192)
    # A preset dictionary: the first rounds' bodies (a fixed one would ship with the format).
    zdict = "".join(r[5] for r in slim[:len(slim) // 4]).encode()[-32768:]

    def deflate(text: str) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict)
        return c.compress(text.encode()) + c.flush()

    out["... and bodies deflated with a preset dictionary"] = _store(
        work / "d.db", f4, ins, [(*r[:5], deflate(r[5]), *r[6:]) for r in slim], 8192)
    return {k: round(v / rounds) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--rounds", type=int, default=100, help="rounds (default 100)")
    ap.add_argument("--seats", type=int, default=7, help="seats, each betting a 10.00 ante (default 7)")
    ap.add_argument("--baseline", default="HEAD~1", metavar="REV", help="git revision to compare with (none: skip)")
    ap.add_argument("--forms", action="store_true", help="also measure the candidate layouts")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-journal-size-") as tmp:
        work = Path(tmp)
        (work / "this").mkdir()
        this = one(args.rounds, args.seats, work / "this")
        base = None
        if args.baseline != "none":
            (work / "base").mkdir()
            tree = _extract(args.baseline, work / "tree")
            base = one(args.rounds, args.seats, work / "base", tree)
            base["tree"] = args.baseline
            this["baseline_bytes_per_round"] = base["bytes_per_round"]
            this["ratio_to_baseline"] = round(this["bytes_per_round"] / base["bytes_per_round"], 3)
        if args.forms:
            (work / "forms").mkdir()
            this["forms"] = forms(this["journal"], this["rounds"], work / "forms")
        for r in (this, base):
            if r is not None:
                r.pop("journal")
        if args.json:
            print(json.dumps({"this": this, "baseline": base}, indent=2))
            return
        print(f"{this['seats']} seats, {this['rounds']} rounds, format {this['format']}, {this['page_size']} B pages")
        line = f"bytes a round: {this['bytes_per_round']:,} (limit {LIMIT:,}: {this['bytes_per_round'] / LIMIT:.2f}x)"
        if base is not None:
            line += (f"; {args.baseline} (format {base['format']}): {base['bytes_per_round']:,}, "
                     f"ratio {this['ratio_to_baseline']}")
        print(line)
        for kind, n in this["by_kind"].items():
            was = base["by_kind"].get(kind) if base else None
            print(f"  {kind:40} {n:7,}" + (f"   {args.baseline}: {was:7,}" if was is not None else ""))
        for name, n in this.get("forms", {}).items():
            print(f"  form: {name:60} {n:7,} ({n / LIMIT:.2f}x the limit)")


if __name__ == "__main__":
    main()
