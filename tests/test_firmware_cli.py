"""``tablectl firmware keygen | sign | inspect | update`` and the ``[firmware]`` config section."""

from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner

from protocols.firmware_image import HEADER_SIZE, FirmwareImage
from protocols.messages import DeviceKind
from simulators.devices import ShoeEmulator
from simulators.pty_port import PtyPort
from simulators.usb_backend import EmulatedUsbDevice, EmulatorUsbBackend
from table.cli import main
from table.config import ConfigError, parse_config
from table.journal import Journal
from table.keys import load_public_key


def tablectl(*args: str, **kw):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, **kw)


@pytest.fixture
def vendor(tmp_path):
    """A vendor key made by `tablectl firmware keygen`, and a body to sign."""
    key = tmp_path / "vendor.pem"
    r = tablectl("firmware", "keygen", str(key))
    assert r.exit_code == 0, r.output
    body = tmp_path / "shoe-1.1.0.bin"
    body.write_bytes(os.urandom(20_000))
    return key, body


def sign(vendor, out, *extra: str, version="1.1.0", sv="2", model="SIM-SHOE", kind="shoe"):
    key, body = vendor
    return tablectl("firmware", "sign", "--key", str(key), "--kind", kind, "--model", model, "--version", version,
                    "--security-version", sv, *extra, str(body), str(out))


def table_config(tmp_path, vendor_pub) -> str:
    cfg = tmp_path / "table.toml"
    cfg.write_text(f'[table]\nid = "t1"\nseats = 3\n[devices.shuffler]\nurl = "/dev/threecard/shuffler"\n'
                   f'[devices.shoe]\nurl = "/dev/threecard/shoe"\n[journal]\npath = "{tmp_path / "journal.sqlite3"}"\n'
                   f'[link]\nretransmit_initial_ms = 25\nretransmit_max_ms = 1000\nmax_attempts = 8\n'
                   f'reconnect_initial_ms = 20\nreconnect_max_ms = 200\n'
                   f'[firmware]\nvendor_keys = ["{vendor_pub}"]\nactivation_timeout_s = 20\n')
    Journal(tmp_path / "journal.sqlite3").close()  # the table's journal exists
    return str(cfg)


@pytest.fixture
def shoe(tmp_path, vendor):
    port = PtyPort(link=tmp_path / "shoe")
    emu = ShoeEmulator(port, vendor_keys=[load_public_key(str(vendor[0]) + ".pub")], security_version=1,
                       watchdog_ms=300).start()
    yield emu, str(tmp_path / "shoe")
    emu.stop()


# -- keygen, sign, inspect ------------------------------------------------------------------------


def test_keygen_writes_a_private_key_only_its_owner_reads_and_refuses_to_overwrite(tmp_path, vendor):
    key, _ = vendor
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_public_key(str(key) + ".pub")
    again = tablectl("firmware", "keygen", str(key))
    assert again.exit_code == 2 and "already exists" in again.output


def test_sign_then_inspect_with_the_vendor_key_accepts_the_image(tmp_path, vendor):
    out = tmp_path / "shoe.img"
    assert sign(vendor, out).exit_code == 0
    image = FirmwareImage.decode(out.read_bytes())
    assert (image.header.kind, image.header.model, image.header.version_text) == (DeviceKind.SHOE, "SIM-SHOE", "1.1.0")
    r = tablectl("firmware", "inspect", str(out), "--key", str(vendor[0]) + ".pub", "--json")
    assert r.exit_code == 0, r.output
    shown = json.loads(r.output)
    assert shown["verdict"] == "accepted" and shown["security_version"] == 2 and shown["body_matches"]


def test_inspect_without_a_key_shows_the_header_and_says_it_did_not_check(tmp_path, vendor):
    out = tmp_path / "shoe.img"
    sign(vendor, out)
    r = tablectl("firmware", "inspect", str(out))
    assert r.exit_code == 0 and "unchecked" in r.output and "SIM-SHOE" in r.output


@pytest.mark.parametrize("damage, verdict", [
    (lambda b: b[:HEADER_SIZE + 100] + bytes([b[HEADER_SIZE + 100] ^ 1]) + b[HEADER_SIZE + 101:], "bad_hash"),
    (lambda b: b[:-64], "unsigned"),
    (lambda b: b"not an image at all", "malformed"),
])
def test_inspect_flags_what_the_table_would_refuse(tmp_path, vendor, damage, verdict):
    out = tmp_path / "shoe.img"
    sign(vendor, out)
    out.write_bytes(damage(out.read_bytes()))
    r = tablectl("firmware", "inspect", str(out), "--key", str(vendor[0]) + ".pub", "--json")
    assert r.exit_code == 3 and json.loads(r.output)["verdict"] == verdict


def test_sign_refuses_a_bad_version_and_a_key_others_can_read(tmp_path, vendor):
    r = sign(vendor, tmp_path / "x.img", version="1.1")
    assert r.exit_code == 2 and "MAJOR.MINOR.PATCH" in r.output
    os.chmod(vendor[0], 0o644)
    r = sign(vendor, tmp_path / "x.img")
    assert r.exit_code == 2 and "may be read by others" in r.output


def test_inspect_of_a_missing_file_is_a_usage_error(tmp_path):
    r = tablectl("firmware", "inspect", str(tmp_path / "none.img"))
    assert r.exit_code == 2 and "no image file" in r.output


# -- update ----------------------------------------------------------------------------------------


def test_update_over_a_pty_shows_its_progress_and_journals_the_update(tmp_path, vendor, shoe):
    emu, url = shoe
    img = tmp_path / "shoe.img"
    sign(vendor, img)
    cfg = table_config(tmp_path, str(vendor[0]) + ".pub")
    r = tablectl("firmware", "update", url, str(img), "--supervisor", "S-17", "--config", cfg, "--json")
    assert r.exit_code == 0, r.stderr
    # not a terminal here: a line every 10 % instead of the bar
    lines = [ln for ln in r.stderr.splitlines() if "% (" in ln]
    assert lines[0].startswith("tablectl firmware: sent 0% (73 of ") and lines[-1].startswith(
        "tablectl firmware: sent 100% (")
    assert len(lines) == 11
    out = json.loads(r.stdout)
    assert (out["outcome"], out["firmware_after"], out["slot"]) == ("updated", "1.1.0", "B")
    with Journal(tmp_path / "journal.sqlite3", read_only=True) as j:
        last = j.last("firmware")
    assert last.body["step"] == "finished" and last.body["supervisor"] == "S-17"
    assert emu.firmware == (1, 1, 0)


def test_update_of_an_unsigned_image_exits_3_and_is_journaled(tmp_path, vendor, shoe):
    _, url = shoe
    img = tmp_path / "shoe.img"
    sign(vendor, img)
    img.write_bytes(img.read_bytes()[:-64])
    cfg = table_config(tmp_path, str(vendor[0]) + ".pub")
    r = tablectl("firmware", "update", url, str(img), "--supervisor", "S-17", "--config", cfg)
    assert r.exit_code == 3 and "unsigned" in r.stderr and "Traceback" not in r.output
    with Journal(tmp_path / "journal.sqlite3", read_only=True) as j:
        assert j.last("firmware").body["reason"] == "unsigned"


def test_update_that_fails_to_boot_exits_5_and_says_which_image_runs(tmp_path, vendor, shoe):
    emu, url = shoe
    emu.bootloader.faults.fail_boot = True
    img = tmp_path / "shoe.img"
    sign(vendor, img)
    cfg = table_config(tmp_path, str(vendor[0]) + ".pub")
    r = tablectl("firmware", "update", url, str(img), "--supervisor", "S-17", "--config", cfg)
    assert r.exit_code == 5 and "rolled back" in r.stderr and "1.0.0 from slot A" in r.stderr


def test_update_over_emulated_usb(tmp_path, vendor):
    dev = EmulatedUsbDevice(DeviceKind.SHOE, serial_number="SHOE-SIM-0001")
    backend = EmulatorUsbBackend([dev])
    emu = ShoeEmulator(dev.port, vendor_keys=[load_public_key(str(vendor[0]) + ".pub")]).start()
    try:
        img = tmp_path / "shoe.img"
        sign(vendor, img)
        cfg = table_config(tmp_path, str(vendor[0]) + ".pub")
        r = CliRunner().invoke(main, ["firmware", "update", "usb://1209:0002/SHOE-SIM-0001", str(img),
                                      "--supervisor", "S-17", "--config", cfg], obj={"usb_backend": backend})
        assert r.exit_code == 0, r.output
        assert "updated 1.0.0 -> 1.1.0" in r.stdout
    finally:
        emu.stop()
        backend.close()


@pytest.mark.parametrize("args, needle", [
    (["--supervisor", " "], "supervisor must not be blank"),
    (["--supervisor", "S-1", "--journal", "/nonexistent/journal.sqlite3"], "no journal at"),
])
def test_update_usage_errors_exit_2_and_journal_nothing(tmp_path, vendor, shoe, args, needle):
    _, url = shoe
    img = tmp_path / "shoe.img"
    sign(vendor, img)
    cfg = table_config(tmp_path, str(vendor[0]) + ".pub")
    r = tablectl("firmware", "update", url, str(img), "--config", cfg, *args)
    assert r.exit_code == 2 and needle in r.output
    with Journal(tmp_path / "journal.sqlite3", read_only=True) as j:
        assert j.last("firmware") is None


def test_update_with_an_unreachable_device_exits_4(tmp_path, vendor):
    img = tmp_path / "shoe.img"
    sign(vendor, img)
    cfg = table_config(tmp_path, str(vendor[0]) + ".pub")
    r = tablectl("firmware", "update", str(tmp_path / "no-such-port"), str(img), "--supervisor", "S-1",
                 "--config", cfg)
    assert r.exit_code == 4 and "nothing was sent" in r.stderr


# -- [firmware] in the table config ---------------------------------------------------------------------


MINIMAL = '[table]\nid = "t1"\nseats = 3\n[devices.shuffler]\nurl = "/dev/a"\n[devices.shoe]\nurl = "/dev/b"\n'


def test_vendor_keys_are_loaded_by_key_id_and_relative_paths_follow_the_config_file(tmp_path, vendor):
    cfg = parse_config(MINIMAL + '[firmware]\nvendor_keys = ["vendor.pem.pub"]\n', tmp_path / "table.toml")
    pub = load_public_key(str(vendor[0]) + ".pub")
    from table.keys import key_id

    assert list(cfg.vendor_keys()) == [key_id(pub)]


def test_a_missing_or_non_key_vendor_key_file_is_a_config_problem(tmp_path):
    (tmp_path / "junk.pub").write_text("not a key")
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL + '[firmware]\nvendor_keys = ["missing.pub", "junk.pub"]\n', tmp_path / "table.toml")
    text = str(info.value)
    assert "vendor key 1" in text and "vendor key 2" in text and "firmware.vendor_keys" in text


def test_a_vendor_key_file_others_may_replace_is_refused(tmp_path, vendor):
    """The attack: anyone on the PC swaps the table's trusted vendor key for their own and
    signs firmware with it. A world-writable key file (or folder) is refused at load."""
    pub = tmp_path / "vendor.pem.pub"
    os.chmod(pub, 0o666)
    with pytest.raises(ConfigError, match="writable by every user"):
        parse_config(MINIMAL + f'[firmware]\nvendor_keys = ["{pub}"]\n', tmp_path / "table.toml")


def test_no_firmware_section_accepts_no_vendor_key():
    cfg = parse_config(MINIMAL)
    assert cfg.vendor_keys() == {} and cfg.firmware.activation_timeout_s == 60.0


# -- a lab's dry run: `tablectl emulate` as its own process ------------------------------------------


def test_a_standalone_emulator_takes_a_signed_update_and_rolls_back_one_that_fails_to_boot(tmp_path, vendor):
    from hil_helpers import EmulatorProcess

    pub = str(vendor[0]) + ".pub"
    cfg = table_config(tmp_path, pub)
    img = tmp_path / "shoe.img"
    sign(vendor, img)
    with EmulatorProcess("shoe", "--pty", str(tmp_path / "shoe"), "--vendor-key", pub, "--security-version", "1",
                         log_path=tmp_path / "emu.log") as emu:
        r = tablectl("firmware", "update", emu.url, str(img), "--supervisor", "S-17", "--config", cfg)
        assert r.exit_code == 0, r.stderr
        status = emu.control("status")
        assert "firmware=1.1.0" in status and "slot=B" in status and "security_version=2" in status
        assert emu.control("fail-boot on") == "ok fail-boot on"
        nxt = tmp_path / "next.img"
        sign(vendor, nxt, version="1.2.0")
        r = tablectl("firmware", "update", emu.url, str(nxt), "--supervisor", "S-17", "--config", cfg)
        assert r.exit_code == 5, r.stderr
        assert "firmware=1.1.0" in emu.control("status")
