"""The exit codes of ``tablectl``: a contract each command declares, shows and keeps.

Every command carries its exit codes as data (:func:`exit_codes`): the
decorator stores them on the command (``cmd.exit_codes``), appends an "Exit
status" section to its ``--help``, and ``docs/cli.md`` is generated from the
same data (:mod:`table.cli.reference`), so the help, the document and the code
cannot drift apart without a test noticing (``tests/test_cli_exit_codes.py``).

The codes every command shares (:data:`COMMON`) are added to each one:

* 2: bad usage (click's ``UsageError``/``BadParameter``: an unknown option, a
  missing or malformed argument);
* 70: internal error: a bug, reported in one line without a traceback
  (``TABLECTL_DEBUG=1`` shows it); ``EX_SOFTWARE`` of sysexits(3);
* 130: interrupted (Ctrl-C, SIGTERM where the command treats it so, or a
  prompt closed), 128 + SIGINT as a shell reports it;
* 141: stdout was closed before the output was written (``tablectl ... | head``),
  128 + SIGPIPE.

:func:`run_guarded` is what the ``tablectl`` group runs each command under,
turning those situations into their codes.
"""

from __future__ import annotations

import os
import select
import sys
import textwrap
from typing import Callable, Mapping, TypeVar

import click

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141

#: Codes every command can return, with their meaning.
COMMON: dict[int, str] = {
    EXIT_USAGE: "bad usage: an unknown option, a missing or malformed argument (the message says which)",
    EXIT_INTERNAL: "internal error: a bug, reported in one line (TABLECTL_DEBUG=1 shows the traceback)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, or a prompt closed)",
    EXIT_PIPE: "stdout was closed before the output was written (e.g. piped into head)",
}

C = TypeVar("C", bound=click.Command)


def exit_codes(codes: Mapping[int, str], *, common: bool = True) -> Callable[[C], C]:
    """Declare a command's exit codes: ``{code: meaning}`` (meanings are one sentence,
    no final period). The :data:`COMMON` codes are added unless the command gives its
    own meaning for one (or ``common`` is False). Sets ``cmd.exit_codes`` (sorted)
    and appends the "Exit status" section to the command's help (its epilog).
    Raises ``ValueError`` for a code outside 0..255."""

    def decorate(cmd: C) -> C:
        merged = dict(COMMON) if common else {}
        merged.update(codes)
        bad = [c for c in merged if not 0 <= c <= 255]
        if bad:
            raise ValueError(f"exit codes must be 0..255, got {bad}")
        cmd.exit_codes = dict(sorted(merged.items()))  # type: ignore[attr-defined]
        cmd.epilog = exit_status_text(cmd.exit_codes)  # type: ignore[attr-defined]
        return cmd

    return decorate


def exit_status_text(codes: Mapping[int, str], width: int = 78) -> str:
    """The "Exit status" section of a ``--help``: one code a line, meanings wrapped
    under themselves (a ``\\b`` block, so click does not rewrap it)."""
    lines = ["\b", "Exit status:"]
    for code, meaning in codes.items():
        head = f"  {code:<4}"
        wrapped = textwrap.wrap(meaning, width - len(head) - 2) or [""]
        lines.append(head + wrapped[0])
        lines += [" " * len(head) + w for w in wrapped[1:]]
    return "\n".join(lines)


def codes_of(cmd: click.Command) -> dict[int, str]:
    """The exit codes ``cmd`` declared ({} when it declared none)."""
    return dict(getattr(cmd, "exit_codes", {}))


def run_guarded(invoke: Callable[[], object], ctx: click.Context) -> object:
    """Run ``invoke()`` (the group's dispatch to a command) and map what a command
    does not handle itself to the :data:`COMMON` codes: ``KeyboardInterrupt`` and
    click's ``Abort`` -> 130, stdout closed -> 141, any other exception -> 70 with a
    one-line message on stderr (the traceback only with ``TABLECTL_DEBUG=1``).
    Click's own exceptions and ``SystemExit`` pass through unchanged."""
    try:
        return invoke()
    except (click.exceptions.ClickException, click.exceptions.Exit, SystemExit):
        raise
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo(f"\n{_name(ctx)}: interrupted", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        if _stdout_closed():
            raise click.exceptions.Exit(EXIT_PIPE) from None
        _internal(ctx)
    except Exception:  # noqa: BLE001 - the last line of defence: one line, no traceback
        _internal(ctx)
    return None  # pragma: no cover - _internal always raises


def _name(ctx: click.Context) -> str:
    sub = ctx.invoked_subcommand
    return f"{ctx.command_path} {sub}" if sub else ctx.command_path


def _stdout_closed() -> bool:
    """True when stdout is a pipe or socket whose reader has gone (poll says POLLERR or
    POLLHUP); then stdout is pointed at /dev/null so Python's exit flush stays quiet."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        broken = any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False
    if broken:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
        finally:
            os.close(devnull)
    return broken


def _internal(ctx: click.Context) -> None:
    exc = sys.exc_info()[1]
    if os.environ.get("TABLECTL_DEBUG"):
        raise  # noqa: PLE0704 - re-raise the exception being handled, with its traceback
    from table.sealing import mask_cards  # an unexpected error may quote a round's sealed cards

    text = mask_cards(" ".join(str(exc).split())[:300]) if exc is not None else ""
    click.echo(f"{_name(ctx)}: internal error: {type(exc).__name__}{': ' + text if text else ''} "
               "(a bug: please report it with the command line; TABLECTL_DEBUG=1 shows the traceback)", err=True)
    raise click.exceptions.Exit(EXIT_INTERNAL) from None
