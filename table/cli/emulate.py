"""``tablectl emulate shuffler|shoe``: one device emulator as its own process, for a bench.

The emulator itself is :mod:`simulators.standalone`; this module only parses
the command line and sets up logging (stderr: stdout carries the address and
the control replies). Documented in ``docs/emulators.md``.
"""

from __future__ import annotations

import sys

import click

from protocols.messages import PROTOCOL_MAJOR
from simulators.devices import SHUFFLE_MODES
from simulators.pty_port import PtyLinkError, check_link_path
from simulators.standalone import EmulatorOptions, serve

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from table.keys import KeyFileError, load_public_key
from table.logs import FORMATS, configure_logging

from .exits import exit_codes
from .options import address_option



@exit_codes({
    0: "stopped by SIGTERM, SIGINT (Ctrl-C) or the quit command",
    1: "cannot listen: the TCP port is taken, or the pty cannot be made",
    2: "bad usage, including a --pty PATH that is refused (see --pty)",
})
@click.command("emulate")
@click.argument("kind", type=click.Choice(["shuffler", "shoe"]))
@click.option("--pty", "pty_path", metavar="PATH",
              help="Listen on a new pty; PATH becomes a symlink to it. PATH's folder must exist; "
                   "PATH must not exist, or be a symlink to a pty (a previous run's).")
@click.option("--tcp", metavar="HOST:PORT", callback=address_option,
              help="Listen on TCP (port 0: any free port); the host opens socket://HOST:PORT.")
@click.option("--seed", type=int, default=None, help="Reproducible shuffles (default: secrets.SystemRandom).")
@click.option("--serial", "serial_number", metavar="SN", default=None,
              help="Serial number in IdentifyReply (default SHF-SIM-0001 / SHOE-SIM-0001).")
@click.option("--log-frames", is_flag=True, help="Log every frame (direction, hex, decoded message) on stderr.")
@click.option("--log-format", type=click.Choice(FORMATS), default="auto", show_default=True,
              help="Logs on stderr: json (one object a line), console (for people), "
                   "or auto (console on a terminal, else json).")
@click.option("--weak-shuffle", is_flag=True,
              help="Shuffler: one riffle per shuffle instead of a uniform permutation (to test the randomness check).")
@click.option("--shuffle-mode", type=click.Choice(SHUFFLE_MODES), default=None, hidden=True)
@click.option("--protocol-major", type=click.IntRange(0, 255), default=PROTOCOL_MAJOR, show_default=True,
              help="Protocol major version to claim; another than the host's makes a non-conforming device.")
@click.option("--vendor-key", "vendor_keys", multiple=True, type=click.Path(dir_okay=False), metavar="PUB",
              help="A vendor public key the bootloader accepts signed firmware from (repeatable; "
                   "`tablectl firmware keygen` writes one). None: every update is refused.")
@click.option("--security-version", type=click.IntRange(0, 0xFFFFFFFF), default=0, show_default=True,
              help="The bootloader's anti-rollback counter: images below it are refused.")
@click.option("--model", default=None, help="The device model images must name (default SIM-SHUFFLER / SIM-SHOE).")
@click.option("--fail-boot", is_flag=True, help="Every new image activated hangs at boot and is rolled back.")
@click.option("--control", metavar="HOST:PORT", callback=address_option,
              help="Also accept control commands on this TCP address (one per line, like stdin).")
@click.option("--no-stdin", is_flag=True, help="Do not read control commands from stdin.")
def emulate_command(kind: str, pty_path: str | None, tcp: tuple[str, int] | None, seed: int | None,
                    serial_number: str | None, log_frames: bool, log_format: str, weak_shuffle: bool,
                    shuffle_mode: str | None, protocol_major: int, control: tuple[str, int] | None,
                    no_stdin: bool, vendor_keys: tuple[str, ...] = (), security_version: int = 0,
                    model: str | None = None, fail_boot: bool = False) -> None:
    """Run a shuffler or shoe emulator until SIGTERM or SIGINT (exit 0).

    Prints where it listens as the first line on stdout (the pty symlink PATH,
    or socket://HOST:PORT), then reads control commands on stdin, one per line
    ('help' lists them; docs/emulators.md), answering 'ok ...' or 'error ...'.
    """
    if (pty_path is None) == (tcp is None):
        raise click.UsageError("give exactly one of --pty PATH or --tcp HOST:PORT")
    if weak_shuffle and kind != "shuffler":
        raise click.UsageError("--weak-shuffle is for the shuffler")
    if pty_path is not None:
        _check_pty_path(pty_path)
    configure_logging(stream=sys.stderr, fmt=log_format)
    keys = []
    for path in vendor_keys:
        try:
            keys.append(load_public_key(path).public_bytes(Encoding.Raw, PublicFormat.Raw))
        except KeyFileError as exc:
            raise click.BadParameter(str(exc), param_hint="'--vendor-key'") from None
    try:
        options = EmulatorOptions(kind, pty=pty_path, tcp=tcp, seed=seed, serial_number=serial_number,
                                  shuffle=shuffle_mode or ("riffle1" if weak_shuffle else "random"),
                                  protocol_major=protocol_major, control=control, log_frames=log_frames,
                                  vendor_keys=tuple(keys), security_version=security_version, model=model,
                                  fail_boot=fail_boot)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    stdin_fd = None if no_stdin else _stdin_fd()
    try:
        code = serve(options, stdout=sys.stdout, stdin_fd=stdin_fd)
    except PtyLinkError as exc:  # PATH taken between the check above and the pty's making
        raise click.BadParameter(str(exc), param_hint="'--pty'") from None
    except OSError as exc:
        raise click.ClickException(f"cannot listen: {exc}") from None
    sys.exit(code)


def _check_pty_path(path: str) -> None:
    """A usage error (exit 2) rather than destroying what is at PATH (a file, a device
    node: ``--pty /dev/ttyUSB0`` as root) or leaving new folders behind."""
    try:
        check_link_path(path)
    except PtyLinkError as exc:
        raise click.BadParameter(str(exc), param_hint="'--pty'") from None


def _stdin_fd() -> int | None:
    try:
        return sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):
        return None
