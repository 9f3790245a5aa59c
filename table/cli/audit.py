"""``tablectl audit``: the table key, and the checks an auditor runs on a journal or a stream.

Exit codes of ``audit verify`` (docs/journal.md): 0 the journal holds and is
anchored; 1 it was tampered with (the first bad entry, or the checkpoint or
anchor it disagrees with, is named); 2 it cannot be read (missing, not a
journal, corrupt) or bad usage; 3 it holds but nothing outside it vouches for
its end ("unanchored"); 4 unsigned tail; with ``--archive`` (a folder of archived
gaming days checked as one chain, ``table/day/segments.py``) also 5 a day missing and
6 an archive that is not the day its name says.
"""

from __future__ import annotations

import json
import sys

import click

from table.audit import check_stream, read_stream
from table.journal import STATUSES, JournalError, export, load_anchors, migrate, verify
from table.keys import KeyFileError, generate, load_private_key, load_public_key, save

from .exits import exit_codes

EXIT_UNREADABLE = 2


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("audit")
def audit_group() -> None:
    """Audit the table's journal."""


@exit_codes({
    0: "the key was made",
    1: "KEY_FILE exists (without --force) or cannot be written",
})
@audit_group.command("keygen")
@click.argument("key_file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace an existing key (a key rotation: keep the old public key).")
def keygen_command(key_file: str, force: bool) -> None:
    """Make a table key: KEY_FILE (Ed25519, PEM, mode 0600) and KEY_FILE.pub.

    The private key signs the journal's checkpoints and seals card faces until the
    reveal; give it to the service as a systemd credential (docs/journal.md). The
    .pub file goes to auditors and the floor.
    """
    try:
        key = generate()
        path, pub = save(key, key_file, overwrite=force)
    except (FileExistsError, OSError) as exc:
        click.echo(f"tablectl audit keygen: {exc}", err=True)
        sys.exit(1)
    click.echo(f"key id {key.key_id}: private key {path} (0600), public key {pub}")


@exit_codes({
    0: "the journal holds and is anchored",
    1: "it was tampered with (the first bad entry, or the checkpoint or anchor it disagrees with, is named)",
    EXIT_UNREADABLE: "missing, unreadable or not a journal, or bad usage",
    3: "it holds, but no head file and no anchor vouch for its end, or no --public-key checked them (unanchored)",
    4: "it holds and is anchored up to its last signed checkpoint, but the entries after it (how many, of which "
       "kinds, is printed) are covered by no signature and no --key checked their MACs (unsigned)",
    5: "with --archive: a gaming day of the chain is missing (the day and its archive are named)",
    6: "with --archive: an archive is not the gaming day its name says (swapped or renamed), or a day is there "
       "twice (both are named)",
})
@audit_group.command("verify")
@click.argument("journal", type=click.Path(dir_okay=False), required=False)
@click.option("--archive", "archive_dir", type=click.Path(file_okay=False), default=None,
              help="A folder of archived gaming days (YYYY-MM-DD.journal.xz): checks them, and JOURNAL (the live "
                   "segment) when given, as one chain.")
@click.option("--public-key", "public_keys", multiple=True, type=click.Path(dir_okay=False),
              help="The table's public key (KEY_FILE.pub); repeat for every key the table has used. Checks the "
                   "signature of every checkpoint.")
@click.option("--anchors", "anchors_file", type=click.Path(dir_okay=False), default=None,
              help="Signed checkpoints saved off the table (JSON lines: checkpoint events from the stream or MQTT, "
                   "or head files): a journal that ends before one was truncated or rolled back.")
@click.option("--key", "key_file", type=click.Path(dir_okay=False), default=None,
              help="The table's private key: also checks the MAC of every entry, those after the last checkpoint "
                   "included.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def verify_command(journal: str | None, archive_dir: str | None, public_keys: tuple[str, ...],
                   anchors_file: str | None, key_file: str | None, as_json: bool) -> None:
    """Check that no entry of JOURNAL was edited, deleted, reordered, cut off or rolled back.

    Recomputes the hash chain, checks every signed checkpoint (with --public-key,
    its signature), the head file beside the journal, and the anchors. With
    --archive, every archived gaming day and JOURNAL are checked as one chain.
    """
    if journal is None and archive_dir is None:
        raise click.UsageError("give JOURNAL, --archive DIR, or both")
    try:
        keys = [load_public_key(p) for p in public_keys]
        anchors = load_anchors(anchors_file) if anchors_file else []
        key = load_private_key(key_file) if key_file else None
        if archive_dir is not None:
            _verify_chain(archive_dir, journal, keys, anchors, key, as_json)
        result = verify(journal, public_keys=keys, anchors=anchors, key=key)
    except (JournalError, KeyFileError) as exc:
        click.echo(f"tablectl audit verify: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)
    if as_json:
        click.echo(json.dumps({"status": result.status, "ok": result.ok, "entries": result.entries,
                               "first_bad": result.first_bad, "reason": result.reason,
                               "checkpoints": result.checkpoints, "unsigned_tail": result.unsigned_tail,
                               "tail_kinds": result.tail_kinds, "tail_checked": result.tail_checked,
                               "notes": list(result.notes)}))
    elif result.status == "ok":
        click.echo(f"OK: {result.entries} entries, hash chain intact, {result.checkpoints} signed checkpoints"
                   + ("" if public_keys or key_file else " (signatures not checked: give --public-key)"))
    elif result.status == "unsigned" and not result.checkpoints:  # a history migrated from format 1
        click.echo(f"UNSIGNED: {result.entries} entries, none ever signed (a history migrated from format 1)",
                   err=True)
    elif result.status == "unsigned":
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(result.tail_kinds.items()))
        click.echo(f"UNSIGNED: {result.entries} entries; the first {result.entries - result.unsigned_tail} hold and "
                   f"are signed, but nothing vouches for the last {result.unsigned_tail} ({kinds}): no signature "
                   "covers them and no --key checked their MACs", err=True)
    elif result.status == "unanchored":
        why = ("no --public-key was given, so the head file's signature could not be checked" if not public_keys
               and not key_file else "no signed head file or --anchors vouch for it")
        click.echo(f"UNANCHORED: {result.entries} entries, hash chain intact, but nothing outside the journal "
                   f"vouches for its end ({why}): a truncation or an older copy could not be seen", err=True)
    elif result.status == "unreadable":
        click.echo(f"UNREADABLE: {result.reason}", err=True)
    else:
        where = f"first bad entry {result.first_bad}: " if result.first_bad else ""
        click.echo(f"FAIL: {where}{result.reason} ({result.entries} entries read)", err=True)
    if not as_json:
        for note in result.notes:
            click.echo(f"  note: {note}", err=True)
    sys.exit(STATUSES[result.status])


def _verify_chain(archive_dir: str, journal: str | None, keys: list, anchors: list, key: object,
                  as_json: bool) -> None:
    """``audit verify --archive``: the archived days (and the live segment) as one chain; exits."""
    from table.day.segments import verify_chain

    chain = verify_chain(archive_dir, live=journal, public_keys=keys, anchors=anchors, key=key)
    if as_json:
        click.echo(json.dumps({"status": chain.status, "ok": chain.status == "ok", "entries": chain.entries,
                               "reason": chain.reason, "notes": chain.notes,
                               "days": [{"name": d.name, "gaming_day": d.day, "status": d.result.status,
                                         "first_seq": d.result.first_seq, "entries": d.result.entries}
                                        for d in chain.days]}))
    else:
        archived = sum(1 for d in chain.days if d.day is not None)
        if chain.status == "ok":
            click.echo(f"OK: {archived} archived gaming days" + (" and the live segment" if journal else "")
                       + f", {chain.entries} entries, one chain")
        else:
            click.echo(f"{chain.status.upper()}: {chain.reason}", err=True)
        for note in chain.notes:
            click.echo(f"  note: {note}", err=True)
    sys.exit(STATUSES[chain.status])


@exit_codes({
    0: "every entry was printed",
    EXIT_UNREADABLE: "JOURNAL is missing, not a journal, of a format this tablectl does not read, or an entry "
                     "does not read",
})
@audit_group.command("export")
@click.argument("journal", type=click.Path(dir_okay=False))
@click.option("--since", type=int, default=0, help="Only entries after this seq.")
@click.option("--kind", default=None, help="Only entries of this kind (card_read, round, checkpoint, ...).")
def export_command(journal: str, since: int, kind: str | None) -> None:
    """Print every entry of JOURNAL as one JSON object a line (seq, ts, kind, round_id,
    deck_id, body decoded, mac in hex, how the body is stored): the journal readable
    without this program's code beside it (docs/journal.md, "Reading it"). Checks nothing:
    `tablectl audit verify` does.
    """
    try:
        for entry in export(journal, since=since, kind=kind):
            click.echo(json.dumps(entry, sort_keys=True))
    except JournalError as exc:
        click.echo(f"tablectl audit export: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)


@exit_codes({
    0: "DEST was written: the same entries, hashes, MACs and signatures as SRC (a format 1 SRC: its unsigned "
       "hash chain), in this format",
    EXIT_UNREADABLE: "SRC is missing, not a journal, of a format migrate does not convert (this one included), "
                     "does not read, or does not hold by its own format's rules (edited); DEST exists; the copy's "
                     "chain is not SRC's",
})
@audit_group.command("migrate")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
def migrate_command(src: str, dest: str) -> None:
    """Convert the journal SRC of an earlier format (1, 2 or 3) into a new file DEST of this
    one (and its head file beside it). SRC is first checked against its own format's rules:
    an edited SRC is refused and nothing is written. Nothing is signed again: every entry
    keeps its hash, MAC and checkpoint signatures, so DEST verifies with the table's public
    key and the floor's anchors as SRC did; a format 1 SRC signed nothing, and `audit verify`
    calls its entries unsigned (format 1). SRC is left as it is: keep it archived
    (docs/journal.md, "Formats").
    """
    try:
        done = migrate(src, dest)
    except JournalError as exc:
        click.echo(f"tablectl audit migrate: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)
    click.echo(f"migrated {done.entries} entries of a format {done.source_format} journal to {dest}; its chain's "
               f"head {done.head[:16]}... is the source's" + ("; the head file was copied" if done.head_file else ""))


@exit_codes({
    0: "every commitment opens to its revealed card",
    1: "a card, an opening or a checkpoint does not match (each is named)",
    EXIT_UNREADABLE: "unreadable input, or bad usage",
    3: "nothing was checked: the stream is empty or reveals no round (a failed command before the pipe)",
})
@audit_group.command("check-stream")
@click.argument("stream", type=click.File("r"), default="-")
@click.option("--public-key", "public_keys", multiple=True, type=click.Path(dir_okay=False),
              help="The table's public key: also checks every checkpoint event's signature.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def check_stream_command(stream, public_keys: tuple[str, ...], as_json: bool) -> None:
    """Check from the public stream alone that every revealed card is the one committed to
    when it was dealt, and that each deal followed the shuffle committed to at the count
    (STREAM: JSON lines from `tablectl events tail`; default stdin).
    """
    try:
        keys = [load_public_key(p) for p in public_keys]
        events = read_stream(stream.read())
    except (KeyFileError, ValueError, OSError, UnicodeDecodeError) as exc:
        click.echo(f"tablectl audit check-stream: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)
    result = check_stream(events, keys)
    # A check that checked nothing is not OK: an empty stream is what a failed
    # `events tail` before the pipe gives ("no journal at ..."), and it must not pass.
    nothing = result.ok and result.rounds == 0
    if nothing:
        result.problems.append("no events in the stream: nothing was checked" if not events else
                               f"{len(events)} events but no round revealed or voided in them: no commitment "
                               "was checked")
    if as_json:
        click.echo(json.dumps({"ok": result.ok, "rounds": result.rounds, "cards": result.cards,
                               "checkpoints": result.checkpoints, "shuffles": result.shuffles,
                               "shuffles_counted_before_the_stream": result.shuffles_earlier,
                               "problems": result.problems}))
    elif result.ok:
        click.echo(f"OK: {result.rounds} round{'' if result.rounds == 1 else 's'}, {result.cards} "
                   f"card{'' if result.cards == 1 else 's'} opened their commitments"
                   + (f", {result.shuffles} shuffle{'' if result.shuffles == 1 else 's'} opened and followed by "
                      "the deal" if result.shuffles else "")
                   + (f" ({result.shuffles_earlier} of a deck counted before the stream began: checked against the "
                      "commitment its opening names)" if result.shuffles_earlier else "")
                   + (f", {result.checkpoints} checkpoints signed" if keys else ""))
    else:
        for p in result.problems:
            click.echo(f"{'NOTHING CHECKED' if nothing else 'FAIL'}: {p}", err=True)
    sys.exit(3 if nothing else 0 if result.ok else 1)


@exit_codes({
    0: "every byte of FILE is covered by a good signature of a key given",
    1: "it is not (what failed is named: not JSON, not canonical, another key, a signature that does not verify)",
    EXIT_UNREADABLE: "FILE or a key cannot be read, or bad usage",
})
@audit_group.command("report")
@click.argument("report_file", type=click.Path(dir_okay=False))
@click.option("--public-key", "public_keys", multiple=True, required=True, metavar="[TABLE_ID=]KEY.pub",
              help="A table's public key, TABLE_ID=KEY.pub naming the table it is (else the --table's); repeat "
                   "for every key the table has used, or for several tables' keys, each named: a report is "
                   "accepted only signed by a key of the table it names.")
@click.option("--table", "table_id", default=None,
              help="The table the keys given without TABLE_ID= are (needed when more than one is given).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def report_check_command(report_file: str, public_keys: tuple[str, ...], table_id: str | None,
                         as_json: bool) -> None:
    """Check a signed report (`tablectl audit report FILE --public-key KEY.pub`; the
    report of `tablectl report ... --signed FILE`, or the supervisor's download): the
    signature of a key of the table the report names covers every byte of FILE
    (docs/reporting.md)."""
    from pathlib import Path

    from table.files import UnsafeFile, read_regular
    from table.keys import key_id
    from table.day.signed_report import MAX_BYTES, check_signed_report

    unbound = [p for p in public_keys if "=" not in p or Path(p).is_file()]
    if len(unbound) > 1 and table_id is None:
        raise click.UsageError("more than one --public-key and none says which table it is: give --table TABLE_ID "
                               "(the keys of one table) or TABLE_ID=KEY.pub for each (a key signs only its table's "
                               "reports)")
    try:
        keys, tables = [], {}
        for given in public_keys:
            owner, path = (table_id, given) if given in unbound else given.split("=", 1)
            k = load_public_key(path)
            keys.append(k)
            if owner is not None:
                if tables.get(key_id(k), owner) != owner:
                    raise click.UsageError(f"key {key_id(k)} is given as table {tables[key_id(k)]!r}'s and "
                                           f"{owner!r}'s: a key is one table's")
                tables[key_id(k)] = owner
        data = read_regular(report_file, max_bytes=MAX_BYTES + 1)
    except KeyFileError as exc:
        click.echo(f"tablectl audit report: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)
    except (UnsafeFile, OSError) as exc:
        click.echo(f"tablectl audit report: cannot read {report_file}: {exc}", err=True)
        sys.exit(EXIT_UNREADABLE)
    result = check_signed_report(data, keys, tables)
    if as_json:
        click.echo(json.dumps({"ok": result.ok, "problem": result.problem, "key_id": result.key_id,
                               "table_id": result.table_id, "signed_at": result.signed_at}))
    elif result.ok:
        rep = result.report or {}
        click.echo(f"OK: {report_file}: the {rep.get('report', 'report')} report of table {result.table_id}, signed "
                   f"at {result.signed_at} by key {result.key_id}; every byte is covered by the signature")
    else:
        click.echo(f"FAIL: {report_file}: {result.problem}", err=True)
    sys.exit(0 if result.ok else 1)
