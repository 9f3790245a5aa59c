"""Signed firmware updates end to end, over a pty and over emulated USB (issue 17, SPEC §9).

Each attack is shown twice: the host refuses it before sending
(``table.firmware.update_firmware``), and, with the host's checks bypassed
(the protocol messages sent directly with ``firmware_bridge.update.FirmwareTransfer``,
which applies no policy), the device refuses it on its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pytest

from devices import CardShoe
from firmware_bridge.errors import LinkTimeout, RequestRefused
from firmware_bridge.factory import transport_for
from firmware_bridge.link import FirmwareNotAllowed, Link, LinkConfig
from firmware_bridge.update import FirmwareTransfer, await_device
from protocols.cards import BackColour
from protocols.firmware_image import HEADER_SIZE, build_header
from protocols.messages import DeviceKind, NakCode, UpdateResult, UpdateState
from simulators.devices import ShoeEmulator, new_deck
from simulators.pty_port import PtyPort
from simulators.usb_backend import EmulatedUsbDevice, EmulatorUsbBackend
from table.config import parse_config
from table.firmware import (
    FirmwareRefused,
    FirmwareUpdateFailed,
    Refusal,
    approved_firmware,
    link_config_for,
    update_firmware,
)
from table.journal import Journal
from table.keys import generate, save

VENDOR = generate()
FOREIGN = generate()
KEYS = {VENDOR.key_id: VENDOR.public}
SERIAL = "SHOE-SIM-0001"
#: quick first retransmits and reconnects, so a restarting or hung device is found again
#: within a fraction of a second; still 3.5 s of retransmits before a request fails, so a
#: loaded machine's slow reply is not taken for a dead device
FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=1000, max_attempts=8, reconnect_initial_ms=20,
                  reconnect_max_ms=200, reconnect_wait_s=10)


def image(*, kind=DeviceKind.SHOE, model="SIM-SHOE", version=(1, 1, 0), sv=2, body: bytes | None = None,
          key=VENDOR, claimed_key=None) -> bytes:
    """A signed image; ``claimed_key``: the key whose id the header names (default ``key``)."""
    body = bytes(range(256)) * 40 if body is None else body
    header = build_header(kind, model, version, sv, body, bytes.fromhex((claimed_key or key).key_id))
    data = header.encode() + body
    return data + key.sign(data)


def flipped(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x01
    return bytes(out)


GOOD = image()
#: (name, image, the host's refusal, the device's NAK)
ATTACKS = [
    ("unsigned", GOOD[:-64], Refusal.UNSIGNED, NakCode.UNSIGNED),
    ("flipped byte in the body", flipped(GOOD, HEADER_SIZE + 500), Refusal.BAD_HASH, NakCode.BAD_HASH),
    ("flipped byte in the header (the version)", flipped(GOOD, 24), Refusal.BAD_SIGNATURE, NakCode.BAD_SIGNATURE),
    ("flipped byte in the header (the security version)", flipped(GOOD, 28), Refusal.BAD_SIGNATURE,
     NakCode.BAD_SIGNATURE),
    ("a foreign key", image(key=FOREIGN), Refusal.FOREIGN_KEY, NakCode.UNKNOWN_KEY),
    ("a foreign key claiming the vendor's key id", image(key=FOREIGN, claimed_key=VENDOR), Refusal.BAD_SIGNATURE,
     NakCode.BAD_SIGNATURE),
    ("the wrong kind", image(kind=DeviceKind.SHUFFLER, model="SIM-SHUFFLER"), Refusal.WRONG_KIND,
     NakCode.WRONG_KIND),
    ("the wrong model", image(model="OTHER-SHOE"), Refusal.WRONG_MODEL, NakCode.WRONG_MODEL),
    ("a downgrade", image(sv=0), Refusal.DOWNGRADE, NakCode.DOWNGRADE),
]


@dataclass
class Rig:
    """One emulated shoe (security version 1, firmware 1.0.0) reachable at ``url``."""

    transport: str
    emu: ShoeEmulator
    url: str
    usb_backend: Any
    journal: Journal

    def link(self) -> Link:
        link = Link(transport_for(self.url, usb_backend=self.usb_backend), name="test", config=FAST)
        link.open()
        link.handshake(DeviceKind.SHOE)
        return link

    def info(self):
        with self.link() as link:
            return FirmwareTransfer(link).info()

    def update(self, data: bytes, **kw):
        kw.setdefault("link_config", FAST)
        kw.setdefault("activation_timeout_s", 20)
        return update_firmware(self.url, data, accepted_keys=kw.pop("accepted_keys", KEYS), journal=self.journal,
                               supervisor=kw.pop("supervisor", "S-17 Jane"), usb_backend=self.usb_backend, **kw)


def make_rig(transport: str, tmp_path, **emu_kw) -> tuple[Rig, Any]:
    emu_kw = {"vendor_keys": [VENDOR.public], "security_version": 1, "watchdog_ms": 300, **emu_kw}
    journal = Journal(tmp_path / "journal.sqlite3")
    if transport == "pty":
        port = PtyPort(link=tmp_path / "shoe")
        emu = ShoeEmulator(port, **emu_kw).start()
        return Rig(transport, emu, str(tmp_path / "shoe"), None, journal), None
    dev = EmulatedUsbDevice(DeviceKind.SHOE, serial_number=emu_kw.get("serial_number", SERIAL))
    backend = EmulatorUsbBackend([dev])
    emu = ShoeEmulator(dev.port, **emu_kw).start()
    return Rig(transport, emu, f"usb://1209:0002/{dev.serial_number}", backend, journal), backend


@pytest.fixture(params=["pty", "usb"])
def rig(request, tmp_path):
    r, backend = make_rig(request.param, tmp_path)
    yield r
    r.emu.stop()
    r.journal.close()
    if backend is not None:
        backend.close()


def entries(rig: Rig, step: str | None = None) -> list:
    return [e for e in rig.journal.entries("firmware") if step is None or e.body["step"] == step]


# -- a good update ------------------------------------------------------------------------------


def test_a_good_update_goes_through_and_is_journaled_with_its_hash_and_supervisor(rig):
    seen: list[tuple[int, int]] = []
    out = rig.update(GOOD, progress=lambda held, total: seen.append((held, total)))
    assert (out.outcome, out.firmware_before, out.firmware_after, out.slot) == ("updated", "1.0.0", "1.1.0", "B")
    assert seen[0] == (HEADER_SIZE, len(GOOD)) and seen[-1] == (len(GOOD), len(GOOD))
    assert [h for h, _ in seen] == sorted(h for h, _ in seen)
    info = rig.info()  # asked over the protocol: the device confirmed the image and raised its counter
    assert (info.running_version, info.slot_name, info.security_version, info.last_result) == (
        "1.1.0", "B", 2, UpdateResult.UPDATED)
    steps = [e.body["step"] for e in entries(rig)]
    assert steps == ["started", "finished"]
    for e in entries(rig):
        assert e.body["image_sha256"] == hashlib.sha256(GOOD).hexdigest()
        assert e.body["supervisor"] == "S-17 Jane"
    assert entries(rig, "finished")[0].body["outcome"] == "updated"


def test_a_second_update_uses_the_other_slot_and_keeps_the_previous_image(rig):
    rig.update(GOOD)
    out = rig.update(image(version=(1, 2, 0), sv=2, body=b"second release" * 100))
    assert (out.firmware_before, out.firmware_after, out.slot) == ("1.1.0", "1.2.0", "A")
    info = rig.info()
    assert (info.running, info.other) == ((1, 2, 0), (1, 1, 0))


# -- refused by the host, and by the device on its own ----------------------------------------------


@pytest.mark.parametrize("name, data, refusal, nak", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_the_host_refuses_before_sending(rig, name, data, refusal, nak):
    with pytest.raises(FirmwareRefused) as info:
        rig.update(data)
    assert info.value.by == "host" and info.value.reason is refusal
    device = rig.info()
    assert (device.update_state, device.received, device.running_version) == (UpdateState.IDLE, 0, "1.0.0")
    [entry] = entries(rig)
    assert entry.body["step"] == "refused" and entry.body["reason"] == refusal.value
    assert entry.body["image_sha256"] == hashlib.sha256(data).hexdigest() and entry.body["supervisor"] == "S-17 Jane"


@pytest.mark.parametrize("name, data, refusal, nak", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_the_device_refuses_on_its_own_when_the_host_check_is_bypassed(rig, name, data, refusal, nak):
    with rig.link() as link:
        t = FirmwareTransfer(link)
        with pytest.raises(RequestRefused) as info:
            t.send(data)
            t.commit()
            t.activate()
        assert info.value.code is nak
        assert t.info().update_state is not UpdateState.COMMITTED
    assert rig.info().running_version == "1.0.0"
    with rig.link() as link:  # nothing refused can be activated afterwards either
        with pytest.raises(RequestRefused) as again:
            FirmwareTransfer(link).activate()
        assert again.value.code is NakCode.NOT_COMMITTED


def test_the_device_refuses_an_image_it_took_before_once_its_security_version_rose(rig):
    rig.update(image(version=(1, 1, 0), sv=3))
    with rig.link() as link:
        with pytest.raises(RequestRefused) as info:
            FirmwareTransfer(link).send(image(version=(1, 5, 0), sv=2))
    assert info.value.code is NakCode.DOWNGRADE


def test_a_table_with_no_vendor_keys_refuses_every_image(rig):
    with pytest.raises(FirmwareRefused) as info:
        rig.update(GOOD, accepted_keys={})
    assert info.value.reason is Refusal.FOREIGN_KEY and "vendor_keys is empty" in info.value.detail


def test_a_device_without_vendor_keys_refuses_even_a_vendor_signed_image(tmp_path):
    rig, backend = make_rig("pty", tmp_path, vendor_keys=[])
    try:
        with pytest.raises(FirmwareRefused) as info:
            rig.update(GOOD)
        assert info.value.by == "device" and info.value.code is NakCode.UNKNOWN_KEY
        assert entries(rig)[-1].body["nak"] == "unknown_key"
    finally:
        rig.emu.stop()
        rig.journal.close()


# -- the table's state ----------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["open", "bets_closed", "held", "settled"])
def test_an_update_mid_round_is_refused_and_nothing_is_sent(rig, step):
    rig.journal.append("round", round_id="r-0007", deck_id="A", step="open", number=7)
    if step != "open":
        rig.journal.append("round", round_id="r-0007", deck_id="A", step=step, number=7)
    with pytest.raises(FirmwareRefused) as info:
        rig.update(GOOD)
    assert info.value.reason is Refusal.ROUND_IN_PROGRESS and "r-0007" in info.value.detail
    assert rig.info().received == 0
    assert entries(rig)[-1].body["reason"] == "round_in_progress"


def test_an_update_between_rounds_goes_through(rig):
    rig.journal.append("round", round_id="r-0007", deck_id="A", step="open", number=7)
    rig.journal.append("round", round_id="r-0007", deck_id="A", step="closed", number=7)
    assert rig.update(GOOD).updated


def test_an_update_with_a_deck_in_the_shoe_is_refused_by_the_host_and_by_the_device(rig):
    rig.emu.load(new_deck(BackColour.RED))  # the dealer loads a deck
    with pytest.raises(FirmwareRefused) as info:
        rig.update(GOOD)
    assert info.value.by == "host" and info.value.reason is Refusal.DECK_PRESENT
    with rig.link() as link:
        with pytest.raises(RequestRefused) as nak:
            FirmwareTransfer(link).send(GOOD)
    assert nak.value.code is NakCode.DECK_PRESENT


def test_a_bad_supervisor_name_is_refused_before_anything_is_journaled(rig):
    with pytest.raises(ValueError, match="supervisor"):
        rig.update(GOOD, supervisor="  ")
    assert entries(rig) == []


# -- interruptions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.10, 0.50, 1.00])
def test_a_cable_pull_during_the_transfer_resumes_without_sending_twice(rig, fraction):
    done: list[bool] = []

    def pull(held: int, total: int) -> None:
        if not done and held >= fraction * total:
            done.append(True)
            rig.emu.disconnect()  # pty: a new pty behind the symlink; USB: unplugged and plugged back

    out = rig.update(GOOD, progress=pull)
    assert done and out.updated and out.firmware_after == "1.1.0"
    # each image byte was written to the device's flash once: the transfer resumed, it did not restart
    assert rig.emu.bootloader.bytes_written == len(GOOD) - HEADER_SIZE


@pytest.mark.parametrize("fraction", [0.10, 0.50, 1.00])
def test_a_power_cut_during_the_transfer_resumes_from_what_the_flash_kept(rig, fraction):
    done: list[bool] = []

    def cut(held: int, total: int) -> None:
        if not done and held >= fraction * total:
            done.append(True)
            rig.emu.reboot()

    out = rig.update(GOOD, progress=cut)
    assert done and out.updated and rig.emu.boots >= 3  # the cut, then the activation
    assert rig.emu.bootloader.bytes_written == len(GOOD) - HEADER_SIZE


def test_a_power_cut_after_the_commit_still_activates_the_verified_image(rig):
    def cut(phase: str) -> None:
        if phase == "activate":
            rig.emu.reboot()

    out = rig.update(GOOD, on_phase=cut)
    assert out.updated and out.firmware_after == "1.1.0"


def test_a_power_cut_before_the_new_image_reaches_a_handshake_rolls_back_and_the_host_says_so(rig):
    def cut(phase: str) -> None:
        if phase == "verify":
            rig.emu.reboot()  # the trial boot is lost: the device boots the confirmed slot

    out = rig.update(GOOD, on_phase=cut)
    assert (out.outcome, out.firmware_after, out.slot) == ("rolled_back", "1.0.0", "A")
    assert "rolled back" in out.summary() and "1.0.0 from slot A" in out.summary()
    info = rig.info()
    assert (info.last_result, info.security_version) == (UpdateResult.ROLLED_BACK, 1)
    assert entries(rig, "finished")[0].body["outcome"] == "rolled_back"


def test_a_link_down_for_longer_than_the_host_waits_is_reported_and_the_next_run_resumes(tmp_path):
    rig, _ = make_rig("pty", tmp_path)
    try:
        done: list[bool] = []

        def pull(held: int, total: int) -> None:
            if not done and held >= total // 2:
                done.append(True)
                rig.emu.disconnect(down_s=1.5)  # unplugged for longer than the link waits

        short = LinkConfig(retransmit_initial_ms=25, max_attempts=3, reconnect_initial_ms=20, reconnect_max_ms=100,
                           reconnect_wait_s=0.3)
        with pytest.raises(FirmwareUpdateFailed) as info:
            rig.update(GOOD, progress=pull, link_config=short)
        assert info.value.outcome == "interrupted"
        assert "still runs 1.0.0 from slot A" in str(info.value)
        assert entries(rig)[-1].body["outcome"] == "interrupted"
        link, _ = await_device(rig.url, deadline_s=10, config=FAST)
        with link:
            held = FirmwareTransfer(link).info()
        assert (held.running_version, held.update_state) == ("1.0.0", UpdateState.RECEIVING)
        assert held.received >= len(GOOD) // 2
        out = rig.update(GOOD)
        assert out.updated and out.resumed_from == held.received
        assert rig.emu.bootloader.bytes_written == len(GOOD) - HEADER_SIZE
    finally:
        rig.emu.stop()
        rig.journal.close()


def test_an_image_that_fails_to_boot_is_rolled_back(rig):
    rig.emu.bootloader.faults.fail_boot = True  # the emulator option: the next new image hangs at boot
    out = rig.update(GOOD)
    assert (out.outcome, out.firmware_after, out.slot) == ("rolled_back", "1.0.0", "A")
    assert rig.emu.bootloader.rollbacks == 1
    info = rig.info()
    assert (info.running_version, info.last_result, info.security_version, info.other) == (
        "1.0.0", UpdateResult.ROLLED_BACK, 1, (1, 1, 0))


def test_a_device_that_never_comes_back_is_reported_and_journaled(tmp_path):
    rig, _ = make_rig("pty", tmp_path, fail_boot=True, watchdog_ms=60_000)  # hangs longer than the host waits
    try:
        with pytest.raises(FirmwareUpdateFailed) as info:
            rig.update(GOOD, activation_timeout_s=1.0)
        assert info.value.outcome == "no_answer" and "boots 1.0.0 again" in str(info.value)
        assert entries(rig)[-1].body["outcome"] == "no_answer"
        rig.emu.reboot()  # a person power-cycles it: the trial is over, the old image runs
        assert rig.info().running_version == "1.0.0"
    finally:
        rig.emu.stop()
        rig.journal.close()


# -- approval at the controller's next handshake --------------------------------------------------------


def _config(tmp_path, *, allowlist=("1.0.*",), keys=(VENDOR,)) -> Any:
    paths = []
    for i, k in enumerate(keys):
        _, pub = save(k, tmp_path / f"vendor{i}.pem", overwrite=True)
        paths.append(str(pub))
    text = (f'[table]\nid = "t1"\nseats = 3\n[devices.shuffler]\nurl = "/dev/threecard/shuffler"\n'
            f'[devices.shoe]\nurl = "/dev/threecard/shoe"\nfirmware_allowlist = {list(allowlist)!r}\n'
            f'[firmware]\nvendor_keys = {paths!r}\n').replace("'", '"')
    return parse_config(text, tmp_path / "table.toml")


def _open_shoe(rig: Rig, config: Any) -> CardShoe:
    """What ``tablectl run`` does: the shoe's link config from the config and the journal."""
    cfg = link_config_for(config, "shoe", rig.journal)
    return CardShoe.open(rig.url, config=cfg, usb_backend=rig.usb_backend)


def test_the_journaled_update_approves_the_new_version_for_that_serial_at_the_next_handshake(rig, tmp_path):
    config = _config(tmp_path)
    rig.update(GOOD)
    assert approved_firmware(rig.journal, "shoe", set(KEYS)) == ((SERIAL, "1.1.0"),)
    with _open_shoe(rig, config) as shoe:
        assert shoe.identity.firmware_version == "1.1.0"
    without = config.link.link_config(config.devices.shoe)  # the allowlist alone refuses it
    with pytest.raises(FirmwareNotAllowed):
        CardShoe.open(rig.url, config=without, usb_backend=rig.usb_backend).close()


def test_a_rolled_back_update_approves_nothing(rig, tmp_path):
    rig.emu.bootloader.faults.fail_boot = True
    assert rig.update(GOOD).outcome == "rolled_back"
    assert approved_firmware(rig.journal, "shoe", set(KEYS)) == ()
    with _open_shoe(rig, _config(tmp_path)) as shoe:  # 1.0.0 is allowed by the config itself
        assert shoe.identity.firmware_version == "1.0.0"


def test_an_approval_is_for_the_serial_updated_not_for_another_device_running_that_version(tmp_path):
    journal = Journal(tmp_path / "table.sqlite3")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ours, _ = make_rig("pty", tmp_path / "a")
    other, _ = make_rig("pty", tmp_path / "b", serial_number="SHOE-SIM-0002")
    try:
        ours.journal.close()
        ours.journal, other_journal = journal, other.journal
        ours.update(GOOD)
        other.update(GOOD)  # updated elsewhere: journaled in another table's journal
        other.journal = journal
        with pytest.raises(FirmwareNotAllowed):
            _open_shoe(other, _config(tmp_path)).close()
        with _open_shoe(ours, _config(tmp_path)):
            pass
    finally:
        for r in (ours, other):
            r.emu.stop()
        other_journal.close()
        journal.close()


def test_removing_a_vendor_key_from_the_config_withdraws_the_approvals_of_what_it_signed(rig, tmp_path):
    rig.update(GOOD)
    with pytest.raises(FirmwareNotAllowed):
        _open_shoe(rig, _config(tmp_path, keys=(FOREIGN,))).close()


def test_a_config_without_an_allowlist_needs_no_approval(rig, tmp_path):
    rig.update(GOOD)
    assert link_config_for(_config(tmp_path, allowlist=()), "shoe", rig.journal).firmware_approved == ()


def test_await_device_gives_up_at_its_deadline(tmp_path):
    with pytest.raises(LinkTimeout):
        await_device(str(tmp_path / "nothing-here"), deadline_s=0.3, config=FAST)


def test_tablectl_run_opens_its_devices_with_the_journals_approvals(rig, tmp_path):
    """The hook in `tablectl run`: RunSettings.link_config(device, journal)."""
    from table.cli.settings import RunSettings

    rig.update(GOOD)
    settings = RunSettings(_config(tmp_path))
    assert settings.link_config("shoe", rig.journal).firmware_approved == ((SERIAL, "1.1.0"),)
    assert settings.link_config("shuffler", rig.journal).firmware_approved == ()  # allowlist unset there
    assert settings.link_config("shoe").firmware_approved == ()  # no journal, no approval
