"""Conformance for shufflers as deep as for shoes (docs/conformance.md): a short deck, a doubled
card, a foreign card, a jam, the door, line noise, a power cycle mid-shuffle and mid-delivery.
The SPEC shuffler passes every check; a driver that names every card as another card (the
counts right, the names wrong) fails the checks that name cards, as it passed the old six."""

from __future__ import annotations

import pytest

from devices.conformance.drivers import DRIVER_CHECKS, DriverTarget, run_driver_suite
from devices.conformance.suite import CallOperator
from simulators.standalone import EmulatorOptions, StandaloneEmulator
from table.hil.conformance import InProcessBench
from devices.conformance.suite import run_suite

from tables import install_drivers

MISNAMING = '''
import dataclasses
import queue

from devices.contract import CONTRACT_VERSION, CardDrawn, DeckVerified, DriverKind
from devices.plugins import SPEC
from protocols.cards import Card


def _other(i):
    return (i + 1) % 52  # every card named as the next one: a bijection, the counts stay right


def _rename(ev):
    m = ev.message
    if isinstance(m, DeckVerified):
        m = dataclasses.replace(m, present=frozenset(map(_other, m.present)),
                                duplicates=frozenset(map(_other, m.duplicates)))
    elif isinstance(m, CardDrawn):
        m = dataclasses.replace(m, card=Card.from_index(_other(m.card.index)))
    return dataclasses.replace(ev, message=m)


class _Renaming(queue.Queue):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def put(self, ev, block=True, timeout=None):
        self.inner.put(_rename(ev), block, timeout)

    def put_nowait(self, ev):
        self.inner.put_nowait(_rename(ev))


class Misnaming:
    name = "misnaming"
    contract_version = CONTRACT_VERSION
    kinds = frozenset({DriverKind.SHUFFLER, DriverKind.SHOE})
    option_keys = frozenset()

    def capabilities(self, kind, options):
        return SPEC.capabilities(kind, options)

    def check_options(self, kind, options):
        pass

    def open(self, request):
        return SPEC.open(dataclasses.replace(request, events=_Renaming(request.events)))


PLUGIN = Misnaming()
'''


@pytest.fixture
def misnaming_driver(tmp_path, monkeypatch):
    """An installed package 'wrong-drivers 0.1' whose driver 'misnaming' is the SPEC driver
    naming every card as another card."""
    install_drivers(tmp_path, monkeypatch, "wrong-drivers", "0.1", {"wrong_drivers": MISNAMING},
                    {"misnaming": "wrong_drivers:PLUGIN"})
    return "misnaming"


NEW = {"short-deck", "doubled-card", "foreign-card", "jam", "door", "line-noise", "reboot-mid-shuffle",
       "reboot-mid-delivery"}


def _shuffler_suite(driver: str) -> dict[str, tuple[str, str]]:
    emu = StandaloneEmulator(EmulatorOptions("shuffler", tcp=("127.0.0.1", 0))).start()
    try:
        results = run_driver_suite(DriverTarget(driver, "shuffler", emu.url,
                                                operator=CallOperator({"shuffler": emu.command}),
                                                event_timeout_s=10, shuffle_timeout_s=30))
    finally:
        emu.stop()
    return {r.check.name: (r.outcome, r.detail) for r in results}


def test_the_shufflers_suite_has_the_fault_checks():
    names = {c.name for c in DRIVER_CHECKS if c.kind == "shuffler"}
    assert NEW <= names


def test_the_spec_shuffler_passes_every_new_check():
    outcomes = _shuffler_suite("spec")
    assert {n: o for n, (o, _) in outcomes.items() if n in NEW} == {n: "pass" for n in NEW}, outcomes
    assert "missing As 7d by name" in outcomes["short-deck"][1]


def test_a_driver_that_misnames_cards_fails(misnaming_driver):
    outcomes = _shuffler_suite(misnaming_driver)
    # the old checks cannot tell: a bijection keeps 52 present, none doubled
    assert {n: o for n, (o, _) in outcomes.items() if n not in NEW} == {n: "pass" for n in outcomes if n not in NEW}
    assert outcomes["short-deck"] == ("fail", "missing cards named 2c 7h; the deck lacks 7d As")
    assert outcomes["doubled-card"][0] == "fail" and "doubled cards named Kh" in outcomes["doubled-card"][1]


@pytest.mark.parametrize("transport", ["pty", "usb"])
def test_the_spec_suite_in_process_runs_the_fault_checks_and_passes(transport):
    with InProcessBench(transport=transport, seed=3) as bench:
        results = run_suite(bench.target, ("shuffler",))
    assert NEW <= {r.check.name for r in results}
    assert {r.check.name: r.detail for r in results if r.outcome != "pass"} == {}


def test_the_spec_suite_without_hands_skips_the_fault_checks_never_passes_them():
    from table.hil.conformance import hil_target

    with InProcessBench(transport="pty", seed=3) as bench:
        target = hil_target(shuffler_url=bench.target.shuffler_url, shoe_url=None)
        results = run_suite(target, ("shuffler",))
    assert {r.check.name: r.outcome for r in results if r.check.name in NEW} == {n: "skip" for n in NEW}
