"""One identity check and one event ledger for every link kind (firmware_bridge/ledger.py):
the driver kit's EventLink and the SPEC Link decide alike."""

from __future__ import annotations

import queue

import pytest

from devices.contract import (
    DeviceIdentity,
    DriverKind,
    EventLink,
    FirmwareNotAllowed,
    LinkConfig,
    LinkState,
    TamperDetected,
)
from firmware_bridge.ledger import check_identity
from protocols.messages import CardDrawn, DeviceKind
from protocols.cards import BackColour, Card


class _Kit(EventLink):
    def __init__(self, config: LinkConfig, **kw) -> None:
        super().__init__("shoe", config, queue.Queue(8), expected=DriverKind.SHOE, **kw)
        self.answers: list[tuple[int, bool]] = []

    def send_answer(self, seq, ok, nak) -> None:
        self.answers.append((seq, ok))


def _ident(firmware: str = "1.4.0", serial: str = "SHOE-1", boot: int = 1,
           kind: DeviceKind = DeviceKind.SHOE) -> DeviceIdentity:
    return DeviceIdentity(kind, 1, 0, firmware, serial, boot)


def test_the_kit_accepts_a_firmware_the_journal_approved_after_a_signed_update():
    # docs/firmware.md: the update the table journaled approves the version it installed on that device
    cfg = LinkConfig(firmware_allowlist=("1.4.*",), firmware_approved=(("SHOE-1", "1.5.0"),))
    link = _Kit(cfg)
    link.identified(_ident("1.5.0"))
    assert link.alive
    other = _Kit(cfg)
    with pytest.raises(FirmwareNotAllowed):
        other.identified(_ident("1.5.0", serial="SHOE-2"))  # approved for SHOE-1 only
    assert other.state is LinkState.REFUSED


def test_a_pinned_serial_is_a_tamper_event_on_both_link_kinds():
    cfg = LinkConfig(pinned_serial="SHOE-1")
    with pytest.raises(TamperDetected):
        check_identity("shoe", _ident(serial="SHOE-9"), cfg, expected_kind=DeviceKind.SHOE, previous=None)
    link = _Kit(cfg)
    with pytest.raises(TamperDetected):
        link.identified(_ident(serial="SHOE-9"))
    notice = link.events.get_nowait().message
    assert notice.kind == "identity_changed"


def test_a_firmware_changed_across_a_reconnect_is_refused_by_the_kit():
    link = _Kit(LinkConfig())
    link.identified(_ident("1.4.0"))
    link.set_state(LinkState.DOWN, "cable")
    with pytest.raises(TamperDetected, match="identity changed across a reconnect"):
        link.identified(_ident("1.4.1"))


def test_the_kit_delivers_an_event_once_and_answers_its_resend_after_the_record():
    link = _Kit(LinkConfig())
    link.identified(_ident())
    msg = CardDrawn(0, Card.parse("AS"), BackColour.RED)
    link.deliver(msg, 7)
    link.deliver(msg, 7)  # the device's resend before the record: not delivered twice, not answered
    ev = link.events.get_nowait()
    assert link.events.empty() and link.answers == []
    link.acknowledge(ev)
    link.acknowledge(ev)  # idempotent
    assert link.answers == [(7, True)]
    link.deliver(msg, 7)  # a resend after the answer was lost: answered again
    assert link.answers == [(7, True), (7, True)] and link.events.empty()


def test_after_a_reboot_the_kit_takes_the_same_seq_as_a_new_event():
    link = _Kit(LinkConfig())
    link.identified(_ident(boot=1))
    msg = CardDrawn(0, Card.parse("AS"), BackColour.RED)
    link.deliver(msg, 1)
    link.acknowledge(link.events.get_nowait())
    link.set_state(LinkState.DOWN, "power")
    link.events.get_nowait()  # link_down
    link.identified(_ident(boot=2))
    assert link.events.get_nowait().message.kind == "device_rebooted"
    link.deliver(msg, 1)  # SEQs start afresh in a new boot (SPEC §6.5)
    assert link.events.get_nowait().seq == 1
