"""The device drivers against both emulators, over each transport.

The ``table`` fixture runs every test twice: over serial ptys (pyserial) and
over the emulated USB devices (pyusb with the pure-Python backend). The
driver code is the same; only the address differs.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass

import pytest

from devices import CardShoe, Shuffler
from firmware_bridge.errors import LinkLost, RequestRefused, TransportError, WrongDevice
from firmware_bridge.link import LinkConfig, LinkNotice
from protocols.cards import BackColour
from protocols.messages import (
    CardDrawn,
    DeckDelivered,
    DeckInserted,
    DeckVerified,
    DeviceKind,
    DeviceState,
    NakCode,
    ShoeLoaded,
)
from simulators.table import SimulatedTable

FAST = LinkConfig(retransmit_initial_ms=25, retransmit_max_ms=200, max_attempts=12, heartbeat_interval_ms=60_000,
                  reconnect_initial_ms=20, reconnect_max_ms=200, reconnect_wait_s=10, read_timeout_ms=50)


@dataclass
class Table:
    """A simulated table and how to open its devices over the transport under test."""

    transport: str
    sim: SimulatedTable

    def shuffler(self, **kw) -> Shuffler:
        kw.setdefault("config", FAST)
        return Shuffler.open(self.sim.shuffler_url, usb_backend=self.sim.usb_backend, **kw)

    def shoe(self, url: str | None = None, **kw) -> CardShoe:
        kw.setdefault("config", FAST)
        return CardShoe.open(url or self.sim.shoe_url, usb_backend=self.sim.usb_backend, **kw)

    def remove_shoe(self) -> None:
        """Take the shoe away for good: unplug it (USB) or power it off (serial)."""
        if self.transport == "usb":
            self.sim.shoe_usb.unplug()
        else:
            self.sim.shoe.stop()


@pytest.fixture(params=["serial", "usb"])
def table(request, tmp_path):
    """Both emulators over a pty (with symlinks, so a re-plugged pty is found again) or over USB."""
    kw = {"link_dir": tmp_path} if request.param == "serial" else {}
    with SimulatedTable(seed=1234, transport=request.param, **kw) as sim:
        yield Table(request.param, sim)


def next_message(events: queue.Queue, timeout_s: float = 5.0):
    """The next device message, skipping link notices."""
    while True:
        msg = events.get(timeout=timeout_s).message
        if not isinstance(msg, LinkNotice):
            return msg


def next_notice(events: queue.Queue, timeout_s: float = 10.0) -> str:
    while True:
        msg = events.get(timeout=timeout_s).message
        if isinstance(msg, LinkNotice):
            return msg.kind


def test_handshake_reads_both_identities(table):
    with table.shuffler() as shuffler, table.shoe() as shoe:
        assert shuffler.identity.kind is DeviceKind.SHUFFLER
        assert shuffler.identity.serial_number == "SHF-SIM-0001"
        assert shuffler.identity.firmware_version == "1.0.0"
        assert shoe.identity.kind is DeviceKind.SHOE
        assert shoe.identity.serial_number == "SHOE-SIM-0001"
        assert shoe.identity.protocol_major == 1


def test_status_reports_the_deck_inside(table):
    with table.shuffler() as shuffler:
        st = shuffler.status()
        assert (st.state, st.back_colour, st.cards) == (DeviceState.IDLE, BackColour.NONE, 0)
        table.sim.dealer.insert_deck(BackColour.BLUE)
        st = shuffler.status()
        assert (st.state, st.back_colour, st.cards) == (DeviceState.HAS_DECK, BackColour.BLUE, 52)


def test_an_open_door_shows_in_status_and_refuses_a_shuffle(table):
    """SPEC §4.1 and §5: the status carries the active fault code; Shuffle is NAKed."""
    from firmware_bridge.errors import RequestRefused
    from protocols.messages import NakCode, ShufflerFaultCode

    with table.shuffler() as shuffler:
        table.sim.dealer.insert_deck(BackColour.RED)
        table.sim.shuffler.faults.door_open = True
        st = shuffler.status()
        assert (st.state, st.fault) == (DeviceState.FAULT, ShufflerFaultCode.DOOR_OPEN)
        with pytest.raises(RequestRefused) as info:
            shuffler.shuffle()
        assert info.value.code is NakCode.DOOR_OPEN
        table.sim.shuffler.faults.door_open = False
        st = shuffler.status()
        assert (st.state, st.fault) == (DeviceState.HAS_DECK, 0)


def test_shuffle_sends_inserted_then_verified_once_each(table):
    events: queue.Queue = queue.Queue()
    with table.shuffler(events=events) as shuffler:
        table.sim.dealer.insert_deck(BackColour.RED)
        shuffler.shuffle()
        inserted, verified = next_message(events), next_message(events)
        assert isinstance(inserted, DeckInserted) and inserted.back_colour is BackColour.RED
        assert isinstance(verified, DeckVerified) and verified.complete
        assert events.empty()
        assert shuffler.link.stats.duplicate_events == 0
        assert shuffler.status().state is DeviceState.READY
    assert table.sim.shuffler.shuffles == 1


def test_the_shoe_reports_each_card_as_it_is_drawn(table):
    events: queue.Queue = queue.Queue()
    dealer = table.sim.dealer
    with table.shuffler(events=events) as shuffler, table.shoe(events=events) as shoe:
        dealer.insert_deck(BackColour.RED)
        shuffler.shuffle()
        assert isinstance(next_message(events), DeckInserted)
        assert isinstance(next_message(events), DeckVerified)
        dealer.take_from_shuffler()
        assert isinstance(next_message(events), DeckDelivered)
        dealer.load_shoe(BackColour.RED)
        loaded = next_message(events)
        assert isinstance(loaded, ShoeLoaded) and loaded.back_colour is BackColour.RED
        for _ in range(6):
            dealer.draw_card()
        draws = [next_message(events) for _ in range(6)]
        assert all(isinstance(d, CardDrawn) for d in draws)
        assert [d.draw_index for d in draws] == list(range(6))
        assert [d.card for d in draws] == [c.card for c in dealer.drawn]
        assert {d.back_colour for d in draws} == {BackColour.RED}
        assert shoe.status().cards == 46


def test_a_nak_becomes_request_refused(table):
    with table.shuffler() as shuffler:
        with pytest.raises(RequestRefused) as info:
            shuffler.shuffle()  # no deck inside
        assert info.value.code is NakCode.NO_DECK


def test_the_wrong_kind_of_device_is_refused(table):
    with pytest.raises(WrongDevice, match="expected a shoe .* is a shuffler"):
        table.shoe(table.sim.shuffler_url)


def test_a_device_is_opened_by_one_host_at_a_time(table):
    with table.shoe():
        with pytest.raises(TransportError) as info:
            table.shoe()
        assert "another process" in info.value.hint
    with table.shoe() as again:  # free once the first host closed it
        assert again.identity.kind is DeviceKind.SHOE


def test_a_lost_reply_is_retransmitted_and_acted_on_once(table):
    shuf = table.sim.shuffler
    real_send = shuf._send
    dropped = []

    def lossy_send(wire: bytes) -> None:
        if not dropped and wire[3] == 0x80:  # the first Ack reply
            dropped.append(wire)
            return
        real_send(wire)

    events: queue.Queue = queue.Queue()
    with table.shuffler(events=events) as shuffler:
        table.sim.dealer.insert_deck(BackColour.RED)
        next_message(events)
        shuf._send = lossy_send
        shuffler.shuffle()
        assert dropped and shuffler.link.stats.retransmits >= 1
        assert shuf.shuffles == 1
        assert isinstance(next_message(events), DeckVerified)


def test_a_cable_pull_reconnects_and_handshakes_again(table):
    events: queue.Queue = queue.Queue()
    with table.shoe(events=events) as shoe:
        table.sim.shoe.disconnect()  # pulled and plugged back in
        assert next_notice(events) == "link_down"
        assert next_notice(events) == "link_up"
        assert shoe.status().state is DeviceState.IDLE
        assert shoe.link.stats.reconnects == 1
        assert shoe.identity.serial_number == "SHOE-SIM-0001"


def test_a_device_that_is_gone_for_good_is_link_lost(table):
    config = LinkConfig(retransmit_initial_ms=25, heartbeat_interval_ms=60_000, reconnect_initial_ms=20,
                        reconnect_max_ms=50, reconnect_wait_s=0.3, read_timeout_ms=50)
    events: queue.Queue = queue.Queue()
    with table.shoe(events=events, config=config) as shoe:
        table.remove_shoe()
        assert next_notice(events) == "link_down"
        with pytest.raises(LinkLost):
            shoe.status()
