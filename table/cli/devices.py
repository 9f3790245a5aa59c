"""``tablectl devices``: what a technician needs to know before naming a device.

Lists the serial ports pyserial sees (``serial.tools.list_ports``) and the USB
devices whose vendor/product IDs are the shuffler's or the shoe's
(:data:`firmware_bridge.usb.DEFAULT_USB_IDS`, plus any ``--usb-id``), each with
its serial number, the address to give ``tablectl run`` or the config
(``/dev/...`` or ``usb://VID:PID/SERIAL``), and the udev symlinks in
``/dev/threecard`` that point at it.

No libusb on the machine is a state, not a crash: the USB part says so, with
how to install it, and the command exits 0. Exit 1 only when the USB bus
cannot be read for another reason (the message says which).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
from serial.tools import list_ports
from usb.util import dispose_resources

from firmware_bridge.errors import TransportError
from firmware_bridge.usb import DEFAULT_USB_IDS, HINT_NO_BACKEND, UsbSelector, find_usb_devices, read_serial_number

from .exits import exit_codes

DEFAULT_UDEV_DIR = "/dev/threecard"


def udev_symlinks(udev_dir: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Map each device node that a symlink in ``udev_dir`` resolves to -> the symlink paths (sorted).

    A missing folder gives ``{}`` (no rules installed, or no device plugged in).
    """
    links: dict[str, list[str]] = {}
    folder = Path(udev_dir)
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return links
    for entry in entries:
        if entry.is_symlink():
            links.setdefault(os.path.realpath(entry), []).append(str(entry))
    return links


def usb_node(bus: int | None, address: int | None) -> str | None:
    """The usbfs node of a device (what udev's USB symlinks point at), e.g. /dev/bus/usb/001/005."""
    if bus is None or address is None:
        return None
    return f"/dev/bus/usb/{bus:03d}/{address:03d}"


def _role(ids: dict[str, tuple[int, int]], vid: int | None, pid: int | None) -> str | None:
    names = [name for name, (v, p) in ids.items() if (v, p) == (vid, pid)]
    return "/".join(names) or None


def serial_ports(ids: dict[str, tuple[int, int]], links: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Every serial port pyserial lists: device path, description, USB IDs and serial
    number when it is a USB adapter, its role if the IDs are configured, and symlinks."""
    out = []
    for port in sorted(list_ports.comports(), key=lambda p: p.device):
        out.append({
            "device": port.device,
            "description": port.description if port.description != "n/a" else None,
            "vid": port.vid,
            "pid": port.pid,
            "serial_number": port.serial_number,
            "role": _role(ids, port.vid, port.pid),
            "symlinks": links.get(os.path.realpath(port.device), []),
        })
    return out


def usb_devices(ids: dict[str, tuple[int, int]], links: dict[str, list[str]], backend: Any = None) -> list[dict[str, Any]]:
    """The USB devices with a configured VID:PID, in bus order. Raises ``TransportError``
    (hint :data:`~firmware_bridge.usb.HINT_NO_BACKEND` when libusb is missing)."""
    out = []
    for vid, pid in dict.fromkeys(ids.values()):
        for dev in find_usb_devices(vid, pid, backend=backend):
            serial = read_serial_number(dev)
            try:
                product = dev.product
            except Exception:  # reading strings needs permission to open the device
                product = None
            node = usb_node(dev.bus, dev.address)
            dispose_resources(dev)  # reading the strings opened it
            out.append({
                "role": _role(ids, vid, pid),
                "selector": str(UsbSelector(vid, pid, serial)),
                "vid": vid,
                "pid": pid,
                "serial_number": serial,
                "product": product,
                "bus": dev.bus,
                "address": dev.address,
                "node": node,
                "symlinks": links.get(node, []) if node else [],
            })
    return out


def _parse_usb_id(ctx, param, values: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    ids = dict(DEFAULT_USB_IDS)
    for value in values:
        name, _, id_text = value.rpartition("=")
        try:
            sel = UsbSelector.parse(id_text if id_text.lower().startswith("usb://") else f"usb://{id_text}")
        except ValueError:
            raise click.BadParameter(f"{value!r}: expected [NAME=]VID:PID in hex, e.g. shoe=1209:0002") from None
        ids[name or f"{sel.vendor_id:04x}:{sel.product_id:04x}"] = (sel.vendor_id, sel.product_id)
    return ids


@exit_codes({
    0: "listed (also when libusb is missing: the USB part says so)",
    1: "the USB bus cannot be read for another reason (the message says which)",
})
@click.command("devices")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--usb-id", "usb_ids", multiple=True, callback=_parse_usb_id, metavar="[NAME=]VID:PID",
              help="Also list USB devices with these IDs (hex); repeatable. "
                   "Default: the shuffler's and the shoe's configured IDs.")
@click.option("--udev-dir", default=DEFAULT_UDEV_DIR, show_default=True, type=click.Path(file_okay=False),
              help="Where the project's udev rules make their symlinks.")
@click.pass_context
def devices_command(ctx: click.Context, as_json: bool, usb_ids: dict[str, tuple[int, int]], udev_dir: str) -> None:
    """List serial ports and the table's USB devices, with serial numbers and udev symlinks."""
    backend = (ctx.obj or {}).get("usb_backend") if isinstance(ctx.obj, dict) else None
    links = udev_symlinks(udev_dir)
    ports = serial_ports(usb_ids, links)
    usb_state: dict[str, Any] = {"available": True, "error": None, "hint": None, "devices": []}
    code = 0
    try:
        usb_state["devices"] = usb_devices(usb_ids, links, backend)
    except TransportError as exc:
        usb_state.update(available=False, error=str(exc).split(" (hint:")[0], hint=exc.hint)
        if exc.hint != HINT_NO_BACKEND:
            code = 1
    ids_text = ", ".join(f"{name} {v:04x}:{p:04x}" for name, (v, p) in usb_ids.items())

    if as_json:
        click.echo(json.dumps({
            "serial_ports": ports,
            "usb": {**usb_state, "ids": {name: f"{v:04x}:{p:04x}" for name, (v, p) in usb_ids.items()}},
            "udev_dir": udev_dir,
        }))
    else:
        click.echo("Serial ports:")
        for p in ports:
            extra = [f"{p['vid']:04x}:{p['pid']:04x}" if p["vid"] is not None else None,
                     f"serial {p['serial_number']}" if p["serial_number"] else None,
                     p["description"], f"({p['role']})" if p["role"] else None]
            click.echo((f"  {p['device']}  " + "  ".join(x for x in extra if x)).rstrip() + _links(p["symlinks"]))
        if not ports:
            click.echo("  none")
        click.echo(f"USB devices ({ids_text}):")
        if not usb_state["available"]:
            if usb_state["hint"] == HINT_NO_BACKEND:
                click.echo("  libusb is not installed, so USB devices cannot be listed.")
                click.echo("  Install it with `apt install libusb-1.0-0`, or `pip install 'threecard-table[usb]'`.")
            else:
                click.echo(f"  cannot list USB devices: {usb_state['error']}")
                if usb_state["hint"]:
                    click.echo(f"  hint: {usb_state['hint']}")
        else:
            for d in usb_state["devices"]:
                serial = d["serial_number"] or "(serial unreadable: install the udev rules)"
                click.echo(f"  {d['selector']}  {d['role']}  serial {serial}  bus {d['bus']:03d} address {d['address']:03d}"
                           + (f"  {d['product']}" if d["product"] else "") + _links(d["symlinks"]))
            if not usb_state["devices"]:
                click.echo("  none")
    ctx.exit(code)


def _links(symlinks: list[str]) -> str:
    return ("  <- " + ", ".join(symlinks)) if symlinks else ""
