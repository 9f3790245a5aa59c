"""``tablectl firmware keygen | sign | inspect | update``: signed firmware images (docs/firmware.md).

``keygen`` and ``sign`` belong to the device vendor (the signing key never
goes near a table); ``inspect`` to anyone; ``update`` to the table's
supervisor, with the controller stopped (it holds the journal and the ports).

Exit status of ``update``: 0 the new image runs and is confirmed; 2 bad
usage (options, config, key files, the image or journal unreadable); 3
refused, by the host before sending or by the device (nothing changed); 4
the device could not be reached or the update was interrupted (the device
runs its previous image; the same command resumes); 5 the new image did
not reach a handshake and the device rolled back to the previous one.
``inspect`` exits 0 for a well-formed image (with ``--key``/``--config``: one
whose signature verifies), 3 for one the table would refuse, 2 when
unreadable.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from protocols.firmware_image import MAX_IMAGE_SIZE, FirmwareImage, ImageError, build_header, parse_version
from protocols.messages import DeviceKind

from table.config import DEFAULT_PATH, ConfigError, load_config
from table.files import UnsafeFile, read_regular, write_atomic
from table.firmware import FirmwareRefused, FirmwareUpdateFailed, update_firmware, verify_image
from table.journal import Journal, JournalError
from table.keys import KeyFileError, generate, key_id, load_private_key, load_public_key, save
from table.logs import configure_logging
from table.roles import InvalidArgument, person_name

from .exits import exit_codes

EXIT_REFUSED = 3
EXIT_FAILED = 4
EXIT_ROLLED_BACK = 5

_KINDS = {"shuffler": DeviceKind.SHUFFLER, "shoe": DeviceKind.SHOE}


def _read_image(path: str) -> bytes:
    try:
        return read_regular(path, max_bytes=MAX_IMAGE_SIZE)
    except FileNotFoundError:
        raise click.BadParameter(f"no image file at {path}", param_hint="IMAGE") from None
    except (UnsafeFile, OSError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint="IMAGE") from None


@exit_codes({0: "with --help: this help (each command lists its own exit codes)"})
@click.group("firmware")
def firmware_group() -> None:
    """Signed firmware images: make a vendor key, sign, inspect, update a device."""


@exit_codes({0: "the key was made", 2: "bad usage, including a PATH that exists (without --force) or cannot be written"})
@firmware_group.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace an existing key at PATH (a key rotation).")
def keygen_command(path: str, force: bool) -> None:
    """Make a vendor signing key: PATH (private, mode 0600) and PATH.pub (public).

    The private key signs firmware images and stays with the vendor (offline, or
    in an HSM); tables get only PATH.pub, listed in [firmware] vendor_keys.
    """
    key = generate()
    try:
        priv, pub = save(key, path, overwrite=force)
    except FileExistsError as exc:
        raise click.BadParameter(f"{exc}; give --force to replace it", param_hint="PATH") from None
    except OSError as exc:
        raise click.BadParameter(f"cannot write {path}: {exc}", param_hint="PATH") from None
    click.echo(f"vendor signing key {key.key_id}: {priv} (keep it off the tables), public half {pub}")


@exit_codes({0: "the image was written", 2: "bad usage, including an unreadable key or BODY, or an OUTPUT that cannot be written"})
@firmware_group.command("sign")
@click.option("--key", "key_path", required=True, type=click.Path(dir_okay=False),
              help="The vendor's signing key (PEM, mode 0600; `tablectl firmware keygen`).")
@click.option("--kind", type=click.Choice(sorted(_KINDS)), required=True, help="The device kind the image is for.")
@click.option("--model", required=True, help="The device model the image is for (1-16 printable ASCII characters).")
@click.option("--version", "version", required=True, help="The firmware version, MAJOR.MINOR.PATCH (each 0-255).")
@click.option("--security-version", type=click.IntRange(0, 0xFFFFFFFF), required=True,
              help="Monotonic anti-rollback counter: raise it when the release fixes a security flaw; "
                   "devices then refuse every image below it.")
@click.argument("body", type=click.Path(dir_okay=False, exists=True))
@click.argument("output", type=click.Path(dir_okay=False))
def sign_command(key_path: str, kind: str, model: str, version: str, security_version: int, body: str,
                 output: str) -> None:
    """Sign the firmware BODY into the image OUTPUT (SPEC §9.1)."""
    try:
        key = load_private_key(key_path)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--key") from None
    try:
        data = read_regular(body, max_bytes=MAX_IMAGE_SIZE)
    except (UnsafeFile, OSError) as exc:
        raise click.BadParameter(f"cannot read {body}: {exc}", param_hint="BODY") from None
    try:
        header = build_header(_KINDS[kind], model, parse_version(version), security_version, data,
                              bytes.fromhex(key.key_id))
    except ImageError as exc:
        raise click.UsageError(str(exc)) from None
    signed = header.encode() + data
    image = signed + key.sign(signed)
    try:
        write_atomic(output, image, mode=0o644)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {output}: {exc}", param_hint="OUTPUT") from None
    click.echo(f"{output}: {kind} {model} {version} security version {security_version}, {len(data)} body bytes, "
               f"key {key.key_id}, sha256 {hashlib.sha256(image).hexdigest()}")


def _config_keys(config_path: str | None, key_paths: tuple[str, ...]) -> dict[str, Any] | None:
    """Accepted keys from --config and --key (None: neither given)."""
    if not config_path and not key_paths:
        return None
    keys: dict[str, Any] = {}
    if config_path:
        try:
            keys.update(load_config(config_path).vendor_keys())
        except (ConfigError, KeyFileError) as exc:
            raise click.UsageError(f"invalid config:\n{exc}") from None
    for p in key_paths:
        try:
            pub = load_public_key(p)
        except KeyFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--key") from None
        keys[key_id(pub)] = pub
    return keys


@exit_codes({
    0: "a well-formed image (with --key/--config: one whose signature verifies)",
    2: "the image, a key or the config cannot be read, or bad usage",
    EXIT_REFUSED: "an image the table would refuse (malformed, unsigned, altered, an unknown key...)",
})
@firmware_group.command("inspect")
@click.argument("image_path", metavar="IMAGE", type=click.Path(dir_okay=False))
@click.option("--key", "key_paths", multiple=True, type=click.Path(dir_okay=False),
              help="A vendor public key to check the signature with (repeatable).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Check against the vendor keys of this table config ([firmware] vendor_keys).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def inspect_command(image_path: str, key_paths: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """Show what IMAGE is for and whether its signature verifies."""
    data = _read_image(image_path)
    keys = _config_keys(config_path, key_paths)
    out: dict[str, Any] = {"image": image_path, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    try:
        image = FirmwareImage.decode(data)
    except ImageError as exc:
        image = None
        out.update(verdict="malformed", detail=str(exc))
    if image is not None:
        h = image.header
        out.update(kind=str(h.kind), model=h.model, version=h.version_text, security_version=h.security_version,
                   body_size=h.body_size, body_sha256=h.body_sha256.hex(), body_matches=image.body_matches,
                   key_id=h.key_id.hex(), signed=image.signature is not None)
        if keys is None:
            out.update(verdict="unchecked" if image.signature is not None else "unsigned",
                       detail="give --key or --config to check the signature")
        else:
            try:
                verify_image(data, keys)
                out.update(verdict="accepted", detail=f"the signature verifies with key {h.key_id.hex()}")
            except FirmwareRefused as exc:
                out.update(verdict=exc.reason.value, detail=exc.detail)
    if as_json:
        click.echo(json.dumps(out))
    else:
        for k, v in out.items():
            click.echo(f"{k:17} {v}")
    refused = out["verdict"] not in ("accepted", "unchecked")
    sys.exit(EXIT_REFUSED if refused else 0)


@exit_codes({
    0: "updated: the new image runs and is confirmed",
    2: "bad usage (options, config, key files, the image or journal unreadable)",
    EXIT_REFUSED: "refused, by the host before sending or by the device (nothing changed)",
    EXIT_FAILED: "the device could not be reached or the update was interrupted (it runs its previous image; "
                 "the same command resumes)",
    EXIT_ROLLED_BACK: "the new image did not reach a handshake and the device rolled back to the previous one",
})
@firmware_group.command("update")
@click.argument("url")
@click.argument("image_path", metavar="IMAGE", type=click.Path(dir_okay=False))
@click.option("--supervisor", required=True, help="Who runs the update (recorded in the journal).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help=f"Table config with the accepted vendor keys ([firmware] vendor_keys). Default: {DEFAULT_PATH}.")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False), default=None,
              help="The table's journal (default: the config's journal.path). It must exist: a round in progress "
                   "is read from it, and the attempt is recorded in it.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object on stdout.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning",
              show_default=True, help="Logs go to stderr (JSON lines unless on a terminal).")
@click.pass_context
def update_command(ctx: click.Context, url: str, image_path: str, supervisor: str, config_path: str | None,
                   journal_path: str | None, as_json: bool, log_level: str = "warning") -> None:
    """Update the device at URL (a serial port, socket://, or usb://VID:PID/SERIAL) with IMAGE.

    Run it with the controller stopped. The image is refused before anything is
    sent if it is unsigned, altered, signed by a key the config does not list,
    for another device kind or model, or a downgrade; or if a round is in
    progress or a deck is in the device. The device checks everything again.
    """
    configure_logging(stream=sys.stderr, fmt="auto", level=log_level)
    try:
        supervisor = person_name(supervisor, "supervisor")
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc), param_hint="--supervisor") from None
    try:
        config = load_config(config_path or DEFAULT_PATH)
        keys = config.vendor_keys()
    except (ConfigError, KeyFileError) as exc:
        raise click.UsageError(f"invalid config:\n{exc}") from None
    data = _read_image(image_path)
    jpath = Path(journal_path) if journal_path else config.journal.path
    if not jpath.is_file():
        raise click.BadParameter(f"no journal at {jpath}: give the table's journal (the controller's --journal, "
                                 "or [journal] path)", param_hint="--journal")
    try:
        journal = Journal(jpath)
    except JournalError as exc:
        raise click.BadParameter(str(exc), param_hint="--journal") from None
    shown = _Progress()
    code = 0
    backend = (ctx.obj or {}).get("usb_backend") if isinstance(ctx.obj, dict) else None  # tests: emulated USB
    try:
        outcome = update_firmware(url, data, accepted_keys=keys, journal=journal, supervisor=supervisor,
                                  usb_backend=backend,
                                  link_config=config.link.link_config(), progress=shown.progress, on_phase=shown.phase,
                                  activation_timeout_s=config.firmware.activation_timeout_s)
    except FirmwareRefused as exc:
        result: dict[str, Any] = {"outcome": "refused", "by": exc.by, "reason": exc.reason.value, "detail": exc.detail}
        message, code = str(exc), EXIT_REFUSED
    except FirmwareUpdateFailed as exc:
        result = {"outcome": exc.outcome, "detail": str(exc)}
        message, code = str(exc), EXIT_FAILED
    except JournalError as exc:
        result = {"outcome": "not_journaled", "detail": str(exc)}
        message, code = f"{exc}; nothing was sent", EXIT_FAILED
    else:
        result = {"outcome": outcome.outcome, "serial": outcome.serial, "kind": outcome.kind,
                  "firmware_before": outcome.firmware_before, "firmware_after": outcome.firmware_after,
                  "slot": outcome.slot, "image_sha256": outcome.image_sha256, "resumed_from": outcome.resumed_from,
                  "journal_seq": outcome.journal_seq}
        message = outcome.summary()
        code = 0 if outcome.updated else EXIT_ROLLED_BACK
    finally:
        shown.close()
        journal.close()
    if as_json:
        click.echo(json.dumps(result))
    if code:
        click.echo(f"tablectl firmware: {message}", err=True)
    elif not as_json:
        click.echo(message)
    sys.exit(code)


class _Progress:
    """How an update's progress is shown: a bar on a terminal; elsewhere (a log, a pipe)
    a line every 10 %; a line for each phase."""

    PHASES = {"checks": "checking the image and the device", "commit": "the device verifies the whole image",
              "activate": "activating: the device restarts into the new image",
              "verify": "waiting for the device to come back"}

    def __init__(self) -> None:
        self.bar: Any = None
        self.shown = 0
        self.tenths = -1

    def progress(self, held: int, total: int) -> None:
        """``held`` of ``total`` bytes are on the device."""
        if not sys.stderr.isatty():
            step = held * 10 // total
            if step > self.tenths:
                self.tenths = step
                click.echo(f"tablectl firmware: sent {held * 100 // total}% ({held} of {total} bytes)", err=True)
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, label="sending", file=sys.stderr, show_percent=True,
                                         show_pos=True)
            self.bar.__enter__()
        if (held - self.shown) * 200 >= total or held == total:  # redraw at each half percent, not every chunk
            self.bar.update(held - self.shown)
            self.shown = held

    def phase(self, name: str) -> None:
        """The update enters phase ``name`` (``update_firmware``'s ``on_phase``)."""
        if name != "transfer":
            self.close()
        text = self.PHASES.get(name)
        if text:
            click.echo(f"tablectl firmware: {text}", err=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
