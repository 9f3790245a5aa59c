"""The journal's rows for a test that reads or edits them with SQL, as an auditor (or an
attacker) with the ``sqlite3`` shell would (format 4 stores bodies deflated,
docs/journal.md, "Reading it")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from table.journal import decode_body, readable


def reader(path: str | Path) -> sqlite3.Connection:
    """A read-only connection where ``entries`` shows every body as its JSON text."""
    return readable(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def bodies_as_text(path: str | Path) -> None:
    """Store every body of the journal at ``path`` as its JSON text (a form format 4 reads
    and verifies: the chain hashes that text), so a test can edit it with SQL's string
    functions as an attacker would."""
    db = sqlite3.connect(str(path))
    try:
        db.create_function("journal_text", 1, decode_body)
        db.execute("UPDATE entries SET body = journal_text(body)")
        db.commit()
    finally:
        db.close()


#: journals written by the real older tablectls (tests/fixtures/journal_format{1,2,3}/)
FIXTURES = Path(__file__).parent / "fixtures"


def older_journal(tmp_path: Path, fmt: int) -> Path:
    """A copy, in ``tmp_path/format{fmt}/``, of the fixture folder of journal format ``fmt``
    (its journal, head file, keys and the old tablectl's own outputs); the journal's path."""
    import shutil

    folder = tmp_path / f"format{fmt}"
    folder.mkdir()
    for p in (FIXTURES / f"journal_format{fmt}").iterdir():
        shutil.copy(p, folder / p.name)
    return folder / "journal.sqlite3"
