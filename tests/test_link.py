"""Host link and handshake against the firmware emulators over real ptys (SPEC §6)."""

from __future__ import annotations

import queue
import time

import pytest

from devices import CardShoe, Shuffler
from firmware_bridge.errors import ProtocolVersionMismatch, RequestRefused, TransportError, WrongDevice
from protocols.cards import BackColour
from protocols.messages import DeckInserted, DeckVerified, DeviceKind, NakCode
from simulators.devices import ShoeEmulator
from simulators.pty_port import PtyPort


@pytest.fixture
def emulator(request):
    """A lone shoe emulator on a pty with the protocol version given by the test's param."""
    emu = ShoeEmulator(PtyPort(), protocol=request.param).start()
    yield emu
    emu.stop()


def test_handshake_reads_identity(sim):
    with Shuffler.open(sim.shuffler_url) as shuffler, CardShoe.open(sim.shoe_url) as shoe:
        assert shuffler.identity.kind is DeviceKind.SHUFFLER
        assert shuffler.identity.serial_number == "SHF-SIM-0001"
        assert shuffler.identity.firmware_version == "1.0.0"
        assert (shoe.identity.protocol_major, shoe.identity.protocol_minor) == (1, 1)


@pytest.mark.parametrize("emulator", [(2, 0), (0, 9)], indirect=True)
def test_handshake_refuses_major_version_mismatch(emulator):
    with pytest.raises(ProtocolVersionMismatch, match=r"speaks protocol \d\.\d; this host speaks 1\.x"):
        CardShoe.open(emulator.port.path)


@pytest.mark.parametrize("emulator", [(1, 7)], indirect=True)
def test_handshake_accepts_a_newer_minor_version(emulator):
    with CardShoe.open(emulator.port.path) as shoe:
        assert shoe.identity.protocol_minor == 7


def test_handshake_refuses_the_wrong_kind_of_device(sim):
    with pytest.raises(WrongDevice, match="expected a shoe .* is a shuffler"):
        CardShoe.open(sim.shuffler_url)


def test_missing_port_is_a_typed_error_with_a_hint(tmp_path):
    with pytest.raises(TransportError, match="hint: no such device"):
        Shuffler.open(str(tmp_path / "nothing-here"))


def test_port_is_opened_exclusively(sim):
    with Shuffler.open(sim.shuffler_url):
        with pytest.raises(TransportError, match="another process holds the port"):
            Shuffler.open(sim.shuffler_url)


def test_nak_becomes_request_refused(sim):
    with Shuffler.open(sim.shuffler_url) as shuffler:
        with pytest.raises(RequestRefused) as info:
            shuffler.shuffle()  # no deck inside
        assert info.value.code is NakCode.NO_DECK


def test_events_arrive_once_in_order_and_are_acked(sim):
    events: queue.Queue = queue.Queue()
    with Shuffler.open(sim.shuffler_url, events=events) as shuffler:
        sim.dealer.insert_deck(BackColour.RED)
        shuffler.shuffle()
        got = [events.get(timeout=2).message for _ in range(2)]
        assert isinstance(got[0], DeckInserted) and got[0].back_colour is BackColour.RED
        assert isinstance(got[1], DeckVerified) and got[1].complete
        deadline = time.monotonic() + 5
        while not sim.shuffler.idle and time.monotonic() < deadline:
            time.sleep(0.01)  # the ACKs are on their way to the device
        assert sim.shuffler.idle and sim.shuffler.events_acked == 2
        assert events.empty()  # a resend under load is re-ACKed, never delivered twice


def test_a_request_whose_reply_is_lost_is_retransmitted_and_acted_on_once(sim):
    """Drop the shuffler's first reply to Shuffle: the host resends the same SEQ, the
    device answers from its reply cache and does not shuffle twice."""
    shuf = sim.shuffler
    real_send = shuf._send
    dropped = []

    def lossy_send(wire: bytes) -> None:
        if not dropped and wire[3] == 0x80:  # first Ack reply
            dropped.append(wire)
            return
        real_send(wire)

    events: queue.Queue = queue.Queue()
    with Shuffler.open(sim.shuffler_url, events=events) as shuffler:
        sim.dealer.insert_deck(BackColour.RED)
        events.get(timeout=2)
        shuf._send = lossy_send
        shuffler.shuffle()
        assert dropped, "the reply was not dropped"
        assert shuffler.link.stats.retransmits >= 1
        assert shuf.shuffles == 1
        assert isinstance(events.get(timeout=2).message, DeckVerified)
