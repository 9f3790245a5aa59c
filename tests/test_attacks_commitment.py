"""The deal follows the shuffle (protocols/SPEC.md §4.2.1): attacks by the dealer's hands.

The shuffler commits to each verified deck's order; before settlement the table
has it opened and checks the cards read against it. A deck of the right back
colour in an order the dealer chose, cards of a third deck of that colour put on
top of the shoe, and a card slipped back under the next are all dealt without a
custody rule breaking on colour or count: each is found by the opening and
holds the round, never settled. Each attack test here fails without the check
(``ShuffleCommitment.check`` in ``RoundPlay.play``).
"""

from __future__ import annotations

import queue
from contextlib import contextmanager

import pytest

from devices import CardShoe, Shuffler
from protocols.cards import BackColour, Card
from protocols.messages import shuffle_commitment
from simulators.devices import SimCard, new_deck
from simulators.table import SimulatedTable
from table.controller import TableController, TableTiming
from table.custody import DeckCustody, Rule
from table.errors import RoundHeld
from table.journal import Journal, verify
from table.keys import generate
from table.rules.settlement import Tables

RED, BLUE = BackColour.RED, BackColour.BLUE
KEY = generate()


@contextmanager
def table(tmp_path, *, seats=2, dealer=None, commitment=True, seed=11):
    with SimulatedTable((RED, BLUE), seed=seed, commitment=commitment) as sim:
        events: queue.Queue = queue.Queue()
        journal = Journal(tmp_path / "journal.sqlite3", key=KEY)
        shuffler = Shuffler.open(sim.shuffler_url, events=events, name="shuffler", ack_on_delivery=False)
        shoe = CardShoe.open(sim.shoe_url, events=events, name="shoe", ack_on_delivery=False)
        ctl = TableController(shuffler, shoe, events, dealer(sim) if dealer else sim.dealer,
                              DeckCustody([("A", RED), ("B", BLUE)]), seats=seats, ante_cents=1000,
                              tables=Tables.load("pa-649a12b-1"), journal=journal,
                              timing=TableTiming(event_timeout_s=3, settle_s=0.1))
        try:
            yield ctl, sim, journal
        finally:
            shuffler.close()
            shoe.close()
            journal.close()
    assert verify(tmp_path / "journal.sqlite3").ok


def steps(journal: Journal) -> list[str]:
    return [e.body["step"] for e in journal.entries("round")]


def openings(journal: Journal) -> list[dict]:
    return [e.body for e in journal.entries("shuffle_opening")]


class Hands:
    """The dealer's hands: the simulated dealer, with one trick at the shoe (each a
    physical action the emulators offer: load a deck, slip a card on top, push the
    top card back)."""

    def __init__(self, sim, *, at_load=None, at_first_draw=None):
        self._sim, self._at_load, self._at_first_draw, self._drawn = sim, at_load, at_first_draw, 0

    def __getattr__(self, name):
        return getattr(self._sim.dealer, name)

    def load_shoe(self, colour):
        if self._at_load is not None:
            trick, self._at_load = self._at_load, None
            trick(self._sim, colour)
        else:
            self._sim.dealer.load_shoe(colour)

    def draw_card(self):
        if self._drawn == 0 and self._at_first_draw is not None:
            self._at_first_draw(self._sim)
        self._drawn += 1
        self._sim.dealer.draw_card()


def assert_held_never_settled(ctl, journal, info) -> None:
    assert ctl.held is not None
    assert "settle" not in steps(journal)
    assert steps(journal)[-1] == "held"
    assert not journal.entries("round") or all(e.body.get("step") != "settle" for e in journal.entries("round"))


def test_an_honest_table_opens_every_shuffle_and_it_matches_the_deal(tmp_path):
    """Each shuffle_opening is the commitment the count journaled (shuffle_commitment too)."""
    with table(tmp_path) as (ctl, sim, journal):
        ctl.prepare()
        for _ in range(3):
            ctl.play_round()
        opened = openings(journal)
        assert [o["matched"] for o in opened] == [True, True, True]
        assert [o["cards_checked"] for o in opened] == [9, 9, 9]
        verified = [e.body["message"]["commitment"] for e in journal.entries("device_event")
                    if e.body["message"]["message"] == "DeckVerified"]
        published = [e.body["commitment"] for e in journal.entries("shuffle_commitment")]
        assert published == verified
        for o in opened:
            assert o["commitment"] in verified  # the commitment journaled at the count is the one opened
            order = tuple(Card.parse(c).index for c in o["order"])
            assert shuffle_commitment(bytes.fromhex(o["salt"]), order).hex() == o["commitment"]
        assert steps(journal).count("settle") == 3


def test_a_cold_deck_of_the_right_colour_loaded_instead_of_the_verified_one_is_held_never_settled(tmp_path):
    def cold_deck(sim, colour):
        # the verified deck stays in the dealer's hand; a deck of the same back colour, in an
        # order the dealer chose, goes into the shoe
        sim.shoe.load(list(reversed(new_deck(colour))))
    with table(tmp_path, dealer=lambda sim: Hands(sim, at_load=cold_deck)) as (ctl, sim, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.DEAL_NOT_THE_SHUFFLE
        assert_held_never_settled(ctl, journal, info)
        assert [o["matched"] for o in openings(journal)] == [False]


def test_six_cards_of_a_third_deck_put_on_top_of_the_shoe_in_place_of_six_are_held_never_settled(tmp_path):
    # One seat: the six cards on top are the whole deal (a flush to the seat, a hand that does
    # not qualify to the dealer), all of the deck's back colour. Six cards of the verified deck
    # go out of it so the shoe still counts 52: the shoe's count cannot tell (six cards simply
    # added are held at the load by the count, tests/test_attacks_custody.py); the commitment does.
    on_top = [Card.parse(c) for c in ("2h", "3c", "5h", "4d", "9h", "7s")]  # deal order: seat, dealer, ...

    def stack(sim, colour):
        sim.dealer.change_deck_in_hand(lambda cards: [SimCard(c, colour) for c in on_top] + cards[6:])
        sim.dealer.load_shoe(colour)
    with table(tmp_path, seats=1, dealer=lambda sim: Hands(sim, at_load=stack)) as (ctl, sim, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.DEAL_NOT_THE_SHUFFLE
        assert_held_never_settled(ctl, journal, info)
        assert [d.card for d in sim.dealer.drawn][:6] == on_top  # the stacked cards were the ones dealt


def test_a_card_slipped_back_under_the_next_is_held_never_settled(tmp_path):
    with table(tmp_path, dealer=lambda sim: Hands(sim, at_first_draw=lambda s: s.shoe.slip_back(1))) as (
            ctl, sim, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld) as info:
            ctl.play_round()
        assert info.value.violation.rule is Rule.DEAL_NOT_THE_SHUFFLE
        assert_held_never_settled(ctl, journal, info)
        assert [o["matched"] for o in openings(journal)] == [False]


def test_a_shuffler_without_the_commitment_is_on_the_record_and_its_rounds_are_dealt_unchecked(tmp_path):
    with table(tmp_path, commitment=False) as (ctl, sim, journal):
        ctl.prepare()
        ctl.play_round()
        assert openings(journal) == []
        assert "settle" in steps(journal)
        shuffler = [e.body for e in journal.entries("device") if e.body.get("source") == "shuffler"]
        assert shuffler and shuffler[0].get("missing") == ["commitment"]


# -- what anyone can check from the public stream (tablectl audit check-stream) -------------------


def stream(tmp_path) -> list[dict]:
    from table.events import EventLog
    with EventLog(tmp_path / "journal.sqlite3", "table") as log:
        return list(log.replay(0))


def test_the_public_stream_shows_each_deal_followed_its_shuffle(tmp_path):
    from table.audit import check_stream
    with table(tmp_path) as (ctl, sim, journal):
        ctl.prepare()
        for _ in range(2):
            ctl.play_round()
    events = stream(tmp_path)
    result = check_stream(events)
    assert result.ok, result.problems
    assert result.shuffles == 2 and result.rounds == 2
    opened = [e for e in events if e["type"] == "shuffle_opened"]
    revealed = [e["seq"] for e in events if e["type"] == "dealer_revealed"]
    settled = [e["seq"] for e in events if e["type"] == "round_settled"]
    # published after the reveal (no card of the round is sealed any more, 816a.1), before the settlement
    assert all(r < o["seq"] < s for r, o, s in zip(revealed, opened, settled))


def test_a_stream_whose_settled_deal_did_not_follow_the_shuffle_fails_the_check(tmp_path):
    """An operator who settles a round anyway, or edits the opening, is found from the stream."""
    from table.audit import check_stream
    with table(tmp_path) as (ctl, sim, journal):
        ctl.prepare()
        ctl.play_round()
    events = stream(tmp_path)
    opened = next(e for e in events if e["type"] == "shuffle_opened")
    order = opened["data"]["order"]
    swapped = dict(opened, data={**opened["data"], "order": [order[1], order[0], *order[2:]]})
    problems = check_stream([swapped if e is opened else e for e in events]).problems
    assert any("do not hash to its commitment" in p for p in problems)
    # the opening left out, the round settled all the same
    problems = check_stream([e for e in events if e is not opened]).problems
    assert any("without the shuffle opened" in p for p in problems)


def test_a_held_cold_deck_round_is_in_the_stream_as_not_followed_and_never_settled(tmp_path):
    from table.audit import check_stream
    with table(tmp_path, dealer=lambda sim: Hands(sim, at_load=lambda s, c: s.shoe.load(new_deck(c)))) as (
            ctl, sim, journal):
        ctl.prepare()
        with pytest.raises(RoundHeld):
            ctl.play_round()
    events = stream(tmp_path)
    opened = [e["data"]["matched"] for e in events if e["type"] == "shuffle_opened"]
    assert opened == [False]
    assert "round_settled" not in [e["type"] for e in events]
    assert check_stream(events).ok  # the table said so and held the round: nothing to fault it for


# -- the conformance suite (devices/conformance/suite.py) ------------------------------------------


def _commitment_check(bench):
    from devices.conformance.suite import checks_for, run_check
    return run_check(next(c for c in checks_for("shuffler") if c.name == "shuffle-commitment"), bench.target)


def test_the_spec_shuffler_passes_the_commitment_check():
    from devices.conformance.suite import PASS
    from table.hil.conformance import InProcessBench
    with InProcessBench(seed=5) as bench:
        result = _commitment_check(bench)
    assert result.outcome == PASS, result.detail


def test_a_shuffler_whose_opening_is_not_its_commitment_fails_the_check(monkeypatch):
    from devices.conformance.suite import FAIL
    from protocols.messages import ShuffleOpening
    from table.hil.conformance import InProcessBench
    with InProcessBench(seed=5) as bench:
        honest = bench.shuffler._open

        def lying(commitment):
            real = honest(commitment)
            if not isinstance(real, ShuffleOpening):
                return real
            return ShuffleOpening(real.salt, (real.order[1], real.order[0], *real.order[2:]))  # a stacked top

        monkeypatch.setattr(bench.shuffler, "_open", lying)
        result = _commitment_check(bench)
    assert result.outcome == FAIL and "is not the commitment" in result.detail


def test_a_shuffler_that_opens_the_deck_inside_it_fails_the_check(monkeypatch):
    from devices.conformance.suite import FAIL
    from table.hil.conformance import InProcessBench
    with InProcessBench(seed=5) as bench:
        emu = bench.shuffler
        monkeypatch.setattr(emu, "_open", lambda commitment: emu._committed[1] if emu._committed else None)
        result = _commitment_check(bench)
    assert result.outcome == FAIL and "deck inside" in result.detail


def test_a_shuffler_without_the_commitment_fails_the_check_naming_the_residual_risk():
    from devices.conformance.suite import FAIL
    from table.hil.conformance import InProcessBench
    with InProcessBench(seed=5) as bench:
        bench.shuffler.commits, bench.shuffler.protocol = False, (1, 0)
        result = _commitment_check(bench)
    assert result.outcome == FAIL and "residual risk" in result.detail


# -- a shuffler without the capability is said so (docs/drivers.md, "Capabilities") -----------------


def test_residual_risk_is_named_for_a_shuffler_that_cannot_commit():
    from devices.contract import FULL, WITHOUT_COMMITMENT
    from table.procedure.commitment import RESIDUAL_RISK, residual_risk

    class Plain:  # a plugin shuffler claiming the capability without open_shuffle
        def shuffle(self):
            pass

    class Committing(Plain):
        def open_shuffle(self, commitment):
            raise NotImplementedError

    assert residual_risk(WITHOUT_COMMITMENT) == RESIDUAL_RISK
    assert residual_risk(FULL, Plain()) == RESIDUAL_RISK
    assert residual_risk(FULL, Committing()) is None and residual_risk(FULL) is None
    assert "cold deck" in RESIDUAL_RISK


def test_config_check_warns_of_a_shuffler_driver_without_the_commitment(tmp_path, monkeypatch):
    import textwrap

    from click.testing import CliRunner

    from table.cli import main
    from tests.tables import install_drivers, table_toml

    install_drivers(tmp_path, monkeypatch, "plain-shuffler", "1.0", {"plain_shuffler": textwrap.dedent('''
        from devices.contract import CONTRACT_VERSION, Capabilities, DriverKind

        class Plugin:
            name = "plain-shuffler"
            contract_version = CONTRACT_VERSION
            kinds = frozenset({DriverKind.SHUFFLER})
            option_keys = frozenset()
            def capabilities(self, kind, options):
                return Capabilities()  # counts, no commitment
            def check_options(self, kind, options):
                pass
            def open(self, request):
                raise NotImplementedError

        PLUGIN = Plugin()
    ''')}, {"plain-shuffler": "plain_shuffler:PLUGIN"})
    spec = tmp_path / "spec.toml"
    spec.write_text(table_toml("T-1", 2, "/dev/threecard/shuffler", "/dev/threecard/shoe"))
    plain = tmp_path / "plain.toml"
    plain.write_text(table_toml("T-1", 2, "/dev/threecard/shuffler", "/dev/threecard/shoe",
                                shuffler='driver = "plain-shuffler"'))
    r = CliRunner().invoke(main, ["config", "check", str(plain)])
    assert r.exit_code == 0, r.output
    assert "plain-shuffler" in r.output and "does not commit to its shuffles" in r.output
    r = CliRunner().invoke(main, ["config", "check", str(spec)])
    assert r.exit_code == 0 and "commit" not in r.output
