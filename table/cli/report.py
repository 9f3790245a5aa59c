"""``tablectl report shift|day|month|year``: the table's figures from its journal."""

from __future__ import annotations

import contextlib
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

import click

from table.rules import kinds

from .exits import exit_codes
from .options import profile_option


class BadInput(click.ClickException):
    """The journal, the config or the paytables cannot be reported on: exit 2."""

    exit_code = 2


def _what_if_paytables(f: Any) -> Any:
    """One what-if paytable option per side wager kind (table.rules.kinds): ``--pair-plus``,
    ``--six-card``, ``--progressive``, in the kinds' order."""
    for k in reversed(kinds.side_kinds()):
        f = click.option(k.paytable_option, k.key, default=None,
                         help=f"A what-if {k.label} paytable (an older journal: the one it was played with; "
                              "default the config's).")(f)
    return f


@exit_codes({
    0: "the report is printed and nothing in it is flagged",
    1: "the report is printed and flags a figure (outside its 95 % band, or a statistical win that differs "
       "from the settled win): investigate it (COMAR 36.05.03.25 B(2))",
    2: "the journal, the config or a paytable cannot be read, the paytables do not settle the journal's "
       "rounds as it recorded them, --signed with a what-if paytable, or bad usage",
})
@click.command("report")
@click.argument("kind", type=click.Choice(["shift", "day", "month", "year"]))
@click.option("--journal", "journal_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The journal (default: the config's [journal] path, with its [journal] archive when set).")
@click.option("--archive", "archive_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="A folder of archived gaming days (YYYY-MM-DD.journal.xz; [journal] archive): reported with "
                   "--journal, the live segment, when given.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Table config: its [paytables] and [gaming_day] (start hour, time zone, shift length).")
@click.option("--date", "on", default=None, metavar="YYYY-MM-DD",
              help="The gaming day reported (month and year: to date through it); default the last with a round.")
@click.option("--shift", "shift", type=click.IntRange(1, 24), default=None,
              help="With `shift`: which shift of the day (default the last).")
@click.option("--ante-bonus", default=None,
              help="A what-if ante bonus paytable (each round is priced at what the journal records in force); "
                   "for a journal older than that record, the paytable it was played with (default: the "
                   "config's, else pa-649a12b-1).")
@_what_if_paytables
@click.option("--meter-cents", type=click.IntRange(0), default=None,
              help="A what-if progressive meter (cents); an older journal: the meter it was played at.")
@profile_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--csv", "as_csv", is_flag=True, help="Print one CSV row a period (cents).")
@click.option("--signed", "signed_path", type=click.Path(dir_okay=False), default=None, metavar="OUT",
              help="Also write the report JSON signed by the table key to OUT (the copy a regulator files; "
                   "`tablectl audit report OUT --public-key KEY.pub` checks it; docs/reporting.md).")
@click.option("--public-key", "public_keys", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="The table's public key (KEY_FILE.pub; repeat for each key it has used): the record is "
                   "checked with it before it is counted (default: the config's [journal] key_file, else "
                   "JOURNAL.key or JOURNAL.key.pub beside the journal; without one, no signature is checked "
                   "and the report says so).")
@click.option("--table-key", "table_key", type=click.Path(dir_okay=False), default=None,
              help="With --signed: the table's private key (default: the config's [journal] key_file, the "
                   "systemd credential threecard-table-key, else JOURNAL.key beside the journal).")
def report_command(kind: str, journal_path: str | None, archive_dir: str | None, config_path: str | None, on: str | None, shift: int | None,
                   ante_bonus: str | None, meter_cents: int | None, profile_name: str | None, as_json: bool,
                   as_csv: bool, signed_path: str | None, public_keys: tuple[str, ...], table_key: str | None,
                   **side_paytables: str | None) -> None:
    """Rounds, hands, decisions, handle and house result by wager, voids, incidents,
    deck changes and device downtime for one shift, gaming day, month to date or
    year to date, from the journal; the settled win beside the expected win given
    the decisions and the theoretical win, with 95 % bands, and the statistical
    win once the inventories and the drop are entered (COMAR 36.05.03.25;
    K.A.R. 112-108-51). Each round is priced at the paytables, meter and profile the
    journal records in force for it (each period named); a paytable, meter or profile
    option makes the report a labelled what-if, which --signed refuses. A journal
    older than that record is priced at the options (or the config's [paytables]),
    and the report says so."""
    from table.config import ConfigError, load_config
    from table.day.day_report import Calendar, ReportError, read_days, read_journal, report, to_csv, to_text
    from table.journal import Journal, JournalError
    from table.rules.profiles import get_profile
    from table.rules.settlement import SettlementError

    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    if table_key and not signed_path:
        raise click.UsageError("--table-key signs a report: give --signed OUT too")
    cfg = None
    if config_path:
        try:
            cfg = load_config(config_path)
        except ConfigError as exc:
            raise BadInput(f"invalid config:\n{exc}") from None
    if journal_path is None and archive_dir is None:
        if cfg is None:
            raise click.UsageError("give --journal, or --config naming the table's [journal] path")
        journal_path = str(cfg.journal.path)
        if cfg.journal.archive is not None:  # one segment a gaming day: the archived days and today's
            archive_dir = str(cfg.journal.archive)
            if not Path(journal_path).exists():
                journal_path = None
    day = None
    if on is not None:
        try:
            day = date.fromisoformat(on)
        except ValueError:
            raise click.BadParameter(f"{on!r} is not a date YYYY-MM-DD", param_hint="--date") from None
    given = {"ante_bonus": ante_bonus, **{k.paytable_slot: side_paytables.get(k.key) for k in kinds.side_kinds()
                                          if k.paytable_slot}}
    tables, what_if = _paytables(cfg, given, meter_cents, profile_name)
    key_file = table_key or (cfg.journal.key_file if cfg else None)
    record = _check_record(journal_path, archive_dir, public_keys, key_file)  # the record first (docs/reporting.md)
    try:
        if archive_dir is not None:
            with Journal(journal_path, read_only=True) if journal_path else contextlib.nullcontext() as live:
                facts = read_days(archive_dir, live)
        else:
            with Journal(journal_path, read_only=True) as j:
                facts = read_journal(j)
        # options naming what was in force: a what-if over a journal that records it; the
        # paytables an older journal needs (not a what-if) when it does not
        recorded = any(r.in_force is not None for r in facts.rounds)
        rep = report(facts, kind, tables, get_profile(profile_name or "pennsylvania"), Calendar.of(cfg), day, shift,
                     what_if=what_if if recorded else None)
    except (JournalError, ReportError, SettlementError) as exc:
        raise BadInput(f"{exc}\n{record.sentence()}" if record.broken else str(exc)) from None
    _with_record(rep, record)
    if signed_path:
        _refuse_what_if(rep)
        key = _signing_key(journal_path, key_file)
        _check_before_signing(journal_path, archive_dir, key)
        _write_signed(rep, signed_path, key)
    if as_json:
        click.echo(json.dumps(rep))
    elif as_csv:
        click.echo(to_csv(rep), nl=False)
    else:
        click.echo(record.sentence())
        for line in to_text(rep):
            click.echo(line)
    flagged = rep["flags"] or any(r["flags"] for k in ("shifts", "days", "months") for r in rep.get(k, []))
    sys.exit(1 if flagged else 0)


def _with_record(rep: dict, record) -> None:
    """Put the record check (:class:`table.record_check.RecordCheck`) into ``rep``: its
    ``record`` field, and a flag first when the record does not hold."""
    rep["record"] = record.as_json()
    if record.never_signed:  # every figure below is as good as whoever could write the journal's folder
        rep["flags"] = ["the record was never signed (a format 1 history, migrated): its figures are vouched for "
                        "by no signature and no MAC", *rep["flags"]]
    if record.broken:
        rep["flags"] = [f"the record does not verify ({record.status}): " + "; ".join(record.problems[:5]),
                        *rep["flags"]]


def _check_record(journal_path: str | None, archive_dir: str | None, public_keys: tuple[str, ...],
                  key_file: str | None):
    """Check the record before it is counted (:func:`table.record_check.check_record`) with
    the keys at hand: ``public_keys``, else the private key ``key_file``, else
    ``JOURNAL.key`` or ``JOURNAL.key.pub`` beside the journal. Raises :class:`BadInput`
    for a key file that does not read."""
    from table.journal import JournalError
    from table.keys import KeyFileError, load_private_key, load_public_key
    from table.record_check import check_record

    pubs, key, unread = [], None, None
    try:
        pubs = [load_public_key(p) for p in public_keys]
    except KeyFileError as exc:
        raise BadInput(str(exc)) from None
    try:  # a key found, not given: one that does not read is said, never a stop
        if not pubs and key_file:
            key = load_private_key(key_file)
        elif not pubs and journal_path:
            beside = Path(journal_path).with_name(Path(journal_path).name + ".key")
            if beside.is_file():
                key = load_private_key(beside)
            elif beside.with_name(beside.name + ".pub").is_file():
                pubs = [load_public_key(beside.with_name(beside.name + ".pub"))]
    except (KeyFileError, OSError) as exc:
        unread = f"the table key found does not read ({exc}): give --public-key"
    try:
        record = check_record(journal_path, archive_dir, public_keys=pubs, key=key)
    except JournalError as exc:
        raise BadInput(str(exc)) from None
    if unread:
        record.notes.insert(0, unread)
    return record


def _paytables(cfg, given: dict[str, str | None], meter_cents: int | None, profile_name: str | None):
    """``(tables, what_if)``: the paytables a journal older than its record of what was in
    force is priced at (the options over the config's ``[paytables]``, else pa-649a12b-1),
    and the what-if the options make of a journal that records it (slot -> paytable,
    ``progressive_meter_cents``, ``profile``; docs/reporting.md). Raises :class:`BadInput`."""
    from table.rules.paytables import PaytableError
    from table.rules.profiles import get_profile
    from table.rules.settlement import SettlementError, Tables

    p = cfg.paytables.slots() if cfg else {}
    chosen = {slot: v or p.get(slot) for slot, v in given.items()}
    chosen["ante_bonus"] = chosen["ante_bonus"] or "pa-649a12b-1"
    try:
        tables = Tables.load(**chosen, progressive_meter_cents=meter_cents,
                             base_dir=cfg.base_dir if cfg else None)
    except (PaytableError, SettlementError, OSError) as exc:
        raise BadInput(str(exc)) from None
    what_if: dict = {slot: tables.slot(slot) for slot, v in given.items() if v}
    if meter_cents is not None:
        what_if["progressive_meter_cents"] = meter_cents
    if profile_name:
        what_if["profile"] = get_profile(profile_name)
    return tables, what_if


def _refuse_what_if(rep: dict) -> None:
    """A what-if is not the table's figures: never signed (docs/reporting.md). Raises
    :class:`BadInput` naming the options that made it one."""
    what_if = rep.get("pricing", {}).get("what_if")
    if not what_if:
        return
    flags = {"ante_bonus": "--ante-bonus", **{k.paytable_slot: k.paytable_option for k in kinds.side_kinds()},
             "progressive_meter_cents": "--meter-cents", "profile": "--profile"}
    raise BadInput("not signed: " + ", ".join(f"{flags[k]} {v}" for k, v in what_if.items())
                   + " make the report a what-if, priced at other than what the journal records in force; "
                   "a signed report is the table's own figures: drop those options to sign it")


def _signing_key(journal_path: str | None, key_file: str | None):
    """The table key a report is signed with: ``key_file``, else the systemd credential,
    else ``JOURNAL.key`` beside the journal; never a new one (a report signed by a key
    nobody knows proves nothing). Raises :class:`BadInput`."""
    from table.keys import KeyFileError, load_private_key, load_table_key

    try:
        if key_file:
            return load_private_key(key_file)
        try:
            return load_table_key(None)
        except KeyFileError:
            beside = Path(journal_path).with_name(Path(journal_path).name + ".key") if journal_path else None
            if beside is None or not beside.exists():
                raise KeyFileError("no table key to sign with: give --table-key (no credential "
                                   f"threecard-table-key, no {beside or 'JOURNAL.key: no --journal'})") from None
            return load_private_key(beside)
    except KeyFileError as exc:
        raise BadInput(str(exc)) from None


def _check_before_signing(journal_path: str | None, archive_dir: str | None, key) -> None:
    """Refuse to sign figures the record cannot back: the journal (and the archived days
    with it) must verify with ``key`` (every entry's MAC, every signature, the chain and
    its head; ``table.journal.verify``, ``table.day.segments.verify_chain``) before the table
    signs a report made from them, or the signature would vouch for an edited journal.
    Raises :class:`BadInput` naming what failed."""
    from table.journal import JournalError, verify
    from table.day.segments import verify_chain

    try:
        if archive_dir is not None:
            r = verify_chain(archive_dir, live=journal_path, key=key)
            what = f"the archived days in {archive_dir}" + (f" and the journal {journal_path}" if journal_path else "")
        else:
            r = verify(journal_path, key=key)
            what = f"the journal {journal_path}"
    except JournalError as exc:
        raise BadInput(f"not signed: {exc}") from None
    if r.status != "ok":
        where = f" (first bad entry {r.first_bad})" if getattr(r, "first_bad", None) else ""
        reason = r.reason or ("nothing outside the journal vouches for its end (no signed head file beside it): "
                              "a truncated copy could not be told" if r.status == "unanchored" else "")
        hint = (" Give the live journal with --journal too." if r.status == "unanchored" and not journal_path
                else f" Is {key.key_id} the key this table wrote it with? Another key's MACs fail from entry 1."
                if r.status == "tampered" and (getattr(r, "first_bad", None) == 1
                                               or "entry 1 was altered" in (r.reason or "")) else "")
        raise BadInput(f"not signed: {what} do not verify: {r.status}{where}: {reason}; a signed report "
                       f"must come from a record that does (tablectl audit verify says more).{hint}")


def _write_signed(rep: dict, out: str, key) -> None:
    """Write ``rep`` signed by the table ``key`` to ``out`` (mode 0644: a report is for
    filing), naming the table the report names (its journal's or archives').
    Raises :class:`BadInput`."""
    from table.files import UnsafeFile, write_atomic
    from table.day.signed_report import SignedReportError, sign_report

    try:
        write_atomic(out, sign_report(rep, key, str(rep["table_id"])), mode=0o644)
    except (SignedReportError, UnsafeFile, OSError) as exc:
        raise BadInput(f"cannot write the signed report {out}: {exc}") from None
