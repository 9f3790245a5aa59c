"""``tablectl probe URL [STEP...]``: talk to one device by hand and see the bytes.

The exchange is :class:`firmware_bridge.probe.Probe` (no handshake of its own,
no retransmit, events shown but never acknowledged, the port opened
exclusively); each frame is described by :func:`table.frame_trace.describe_frame`,
so a CardDrawn's card is masked here as in a trace (58 Pa. Code 816a.1), with no
way to unmask it: a probe may meet a real shoe and a real deck.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Callable

import click

from firmware_bridge.errors import LinkLost, TransportError
from firmware_bridge.probe import Exchange, Probe
from protocols.messages import Echo, GetStatus, Nak

from table.frame_trace import describe_frame, summary_text

from .exits import exit_codes

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 4

STEPS_HELP = """\
identify     Identify (SEQ 0, a new host session): kind, serial, firmware, protocol
status       GetStatus: state, the deck's back colour, cards held, fault
echo [TEXT]  Echo TEXT (at most 64 bytes; hex:00ff for raw bytes), sent back
help         this list
quit         end (so does the end of input)"""


class StepError(ValueError):
    """A step that is not one of :data:`STEPS_HELP`'s, or a malformed argument."""


def parse_step(line: str):
    """``"status"`` -> ``("status", GetStatus())``; ``"echo hi"`` -> ``("echo", Echo(b"hi"))``;
    ``"help"``/``"quit"`` -> ``(word, None)``. Raises :class:`StepError`."""
    words = line.strip().split(None, 1)
    if not words:
        raise StepError("empty step")
    verb, rest = words[0].lower(), (words[1] if len(words) > 1 else "")
    if verb in ("help", "quit", "exit", "?"):
        return ("help" if verb in ("help", "?") else "quit"), None
    if verb == "identify" and not rest:
        return "identify", None
    if verb == "status" and not rest:
        return "status", GetStatus()
    if verb == "echo":
        if rest.lower().startswith("hex:"):
            try:
                data = bytes.fromhex(rest[4:])
            except ValueError:
                raise StepError(f"echo {rest!r}: hex: needs pairs of hex digits") from None
        else:
            data = rest.encode()
        if len(data) > 64:
            raise StepError(f"echo carries at most 64 bytes, got {len(data)}")
        return "echo", Echo(data)
    raise StepError(f"unknown step {line.strip()[:40]!r}; steps: identify, status, echo [TEXT], help, quit")


def _show(ex: Exchange, label: str, as_json: bool, echo: Callable[[str], None]) -> None:
    sent = describe_frame(ex.sent)
    if as_json:
        echo(json.dumps({"step": label, "direction": "tx", **sent}))
    else:
        echo(f"> {summary_text(sent['message'])}  (seq {ex.seq})")
        echo(f"  tx {sent['hex']}")
    for raw, kind in ex.others:
        d = describe_frame(raw)
        note = "not acknowledged: left for the controller" if kind == "event" else kind
        if as_json:
            echo(json.dumps({"step": label, "direction": "rx", "note": note, **d}))
        else:
            echo(f"< {kind} {summary_text(d['message'])}  (seq {d.get('seq')}; {note})")
            echo(f"  rx {d['hex']}")
    if ex.reply is None:
        if as_json:
            echo(json.dumps({"step": label, "direction": "rx", "error": f"no reply in {ex.elapsed_s:.2f} s"}))
        else:
            echo(f"! no reply with seq {ex.seq} in {ex.elapsed_s:.2f} s")
        return
    d = describe_frame(ex.reply)
    if as_json:
        echo(json.dumps({"step": label, "direction": "rx", "ms": round(ex.elapsed_s * 1000, 1), **d}))
    else:
        echo(f"< {summary_text(d['message'])}  (seq {ex.seq}, {ex.elapsed_s * 1000:.1f} ms)")
        echo(f"  rx {d['hex']}")


def _outcome(ex: Exchange, step: str) -> int | None:
    """None when the step went as a conforming device would answer it, else the exit code."""
    if ex.reply is None:
        return EXIT_UNREACHABLE
    msg = ex.reply_message
    if msg is None or isinstance(msg, Nak):
        return EXIT_REFUSED
    if step == "echo" and getattr(msg, "data", None) != ex_echo_data(ex):
        return EXIT_REFUSED
    return None


def ex_echo_data(ex: Exchange) -> bytes:
    """The bytes an Echo request carried (its payload)."""
    return ex.sent[4:-2]


@exit_codes({
    0: "every step was answered as the protocol says (an Echo with the same bytes)",
    EXIT_REFUSED: "a step was refused (NAK) or answered with something that does not decode or match",
    EXIT_UNREACHABLE: "the port cannot be opened (missing, busy: another process holds it) or a step got "
                      "no reply within --timeout",
})
@click.command("probe")
@click.argument("url")
@click.argument("steps", nargs=-1)
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.01, 60), default=1.0, show_default=True,
              metavar="S", help="Seconds to wait for each reply.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a frame instead of text.")
def probe_command(url: str, steps: tuple[str, ...], timeout_s: float, as_json: bool) -> None:
    """Identify, status and echo against one device by hand, printing each reply and its hex.

    URL is a port as `tablectl run` takes it (/dev/..., socket://HOST:PORT,
    usb://VID:PID[/SERIAL]). STEPS run in order (quote a step with a space:
    'echo hello'); without STEPS they are read one a line from stdin, with a
    prompt on a terminal, and input that ends with no step at all runs
    identify, status and 'echo probe'. The port is opened exclusively: a port the
    controller holds is refused, not shared. Device events that arrive are
    shown but not acknowledged, so they still reach the controller; a
    CardDrawn's card is always masked (??).

    \b
    Steps:
    """
    try:
        parsed = [parse_step(s) for s in steps]
    except StepError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        probe = Probe(url, reply_timeout_s=timeout_s)
        probe.open()
    except TransportError as exc:
        click.echo(f"tablectl probe: {exc}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    code = 0
    interactive = not steps and sys.stdin.isatty()
    try:
        source = iter(parsed) if steps else _stdin_steps(interactive)
        for step, msg in source:
            if step == "help":
                click.echo(STEPS_HELP)
                continue
            if step == "quit":
                break
            ex = probe.identify() if step == "identify" else probe.request(msg)
            _show(ex, step, as_json, click.echo)
            bad = _outcome(ex, step)
            if bad is not None:
                code = max(code, bad)
    except LinkLost as exc:
        click.echo(f"tablectl probe: {exc}", err=True)
        code = EXIT_UNREACHABLE
    finally:
        probe.close()
    sys.exit(code)


#: What ``tablectl probe URL`` does when no step is given at all (none on the command
#: line, none on stdin): the quick check of a device.
DEFAULT_STEPS = ("identify", "status", "echo probe")


def _stdin_steps(interactive: bool):
    """Steps read from stdin; a bad line is reported and skipped (not fatal) on a terminal.
    Input that ends before any step (not a terminal) runs :data:`DEFAULT_STEPS`."""
    given = False
    while True:
        if interactive:
            click.echo("probe> ", nl=False, err=True)
        line = sys.stdin.readline()
        if not line:
            if not given and not interactive:
                yield from (parse_step(step) for step in DEFAULT_STEPS)
            return
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        given = True
        try:
            yield parse_step(line)
        except StepError as exc:
            if not interactive:
                raise click.UsageError(str(exc)) from None
            click.echo(f"error: {exc}", err=True)


probe_command.help = inspect.cleandoc(probe_command.help or "") + "\n" + "\n".join(
    "  " + line for line in STEPS_HELP.splitlines())
