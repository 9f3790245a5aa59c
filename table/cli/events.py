"""``tablectl events tail``: print a table's public event stream, one JSON object per line."""

from __future__ import annotations

import json
import sys

import click

from table.interfaces.event_socket import read_events
from table.events import EventLog, EventStreamError, journal_table_id

from .exits import exit_codes


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("events")
def events_group() -> None:
    """The table's public event stream (docs/integration.md)."""


@exit_codes({
    0: "the events asked for were printed",
    1: "the socket or the journal cannot be read (missing, refused, not a journal)",
})
@events_group.command("tail")
@click.option("--since", type=click.IntRange(0), default=None,
              help="Print events with seq > SINCE (0: from the first); default: from now on (socket) or all (journal).")
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False), default=None,
              help="The controller's event socket (tablectl run --event-socket).")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False), default=None,
              help="Read the events from a journal file instead (read-only).")
@click.option("--table-id", default=None,
              help="With --journal: the table id to put in events (default: the one the journal names, to which "
                   "its commitments are bound; another is refused).")
@click.option("--archive", "archive", type=click.Path(file_okay=False, exists=True), default=None,
              help="With --journal: the folder of archived gaming days ([journal] archive): --since before the "
                   "live segment reads on from the days before it.")
@click.option("--seat", type=click.IntRange(1, 7), default=None,
              help="That seat's channel: its own cards as dealt (58 Pa. Code 816a.1).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events (reconnecting and resuming after a drop).")
@click.option("--count", type=click.IntRange(1), default=None,
              help="Stop after this many events. On a socket without --since: wait for the next COUNT events.")
def tail_command(since, socket_path, journal_path, archive, table_id, seat, follow, count) -> None:
    """Print events as JSON lines on stdout.

    Without --follow, stops at the last event that exists when it starts. With
    --journal --follow it goes on across the gaming day's close: the next day's
    segment taking the journal's place is followed from its first event.
    """
    if bool(socket_path) == bool(journal_path):
        raise click.UsageError("give one of --socket PATH or --journal PATH")
    if archive and not journal_path:
        raise click.UsageError("--archive goes with --journal")
    if socket_path and since is None and count is not None:
        follow = True  # "from now on" has nothing yet: wait for the next COUNT events
    printed = 0
    try:
        if socket_path:
            source = read_events(socket_path, since=since, seat=seat, follow=follow)
        else:
            source = _from_journal(journal_path, table_id, since or 0, seat, follow, archive)
        for ev in source:
            sys.stdout.write(json.dumps(ev, separators=(",", ":")) + "\n")
            sys.stdout.flush()
            printed += 1
            if count is not None and printed >= count:
                break
    except (ConnectionError, EventStreamError) as exc:
        click.echo(f"tablectl events tail: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        pass


def _from_journal(path: str, table_id: str | None, since: int, seat: int | None, follow: bool,
                  archive: str | None = None):
    own = journal_table_id(path)
    if table_id is not None and own is not None and table_id != own:
        raise EventStreamError(f"{path} is the journal of table {own!r}: its commitments are bound to that id, so "
                               f"events with --table-id {table_id!r} would not check; leave --table-id out")
    # The log follows the file (polling), as the controller writes it, and the next gaming
    # day's segment when the day's close renames it in.
    with EventLog(path, table_id or own or "table", archive=archive) as log:
        if not follow:
            yield from log.replay(since, seat=seat)
            return
        last = since
        while True:  # a subscription: the replay up to the head, then each event as the log reads it
            sub = log.subscribe(last, seat=seat)
            try:
                while True:
                    ev = sub.get(1.0)
                    if ev is not None:
                        last = ev["seq"]
                        yield ev
            except EOFError:  # fell behind (a slow reader): subscribe again from the last one printed
                continue
            finally:
                sub.close()
