"""Holds and voids: a round stopped for a supervisor, and the two-person rule.

A round is held on a broken custody rule, a device fault, or a restart; it is
never resumed silently (docs/decisions/0002-held-rounds-wait-for-a-supervisor.md). Before settlement a supervisor voids it
(every wager returned, the cards collected) or, when the hold came from a
device or a restart and not from a broken rule, releases it: the round goes on
where it stood. Once every decision is final the outcome can be known, so a
void then needs a second supervisor to confirm it (the two-person rule; 58 Pa.
Code 816a.1: results recorded before they are posted stand). A round already
settled keeps its results; only its collect is finished.

Also here: a person's wait (a void accepted meanwhile is carried out at once),
and a supervisor's acknowledgement of the incident alarms.

May touch: the held round in :class:`~table.procedure.state.TableState`, the
console (waits, void policy), the journal, the dealer (to collect a void's
cards). Never deals or settles: a released round is handed back to the conductor,
which plays it on (:class:`~table.procedure.round_play.RoundPlay`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from protocols.cards import BackColour, Card

from .. import recovery
from ..console import Command, Console, Expectation, VoidPolicy
from ..custody import CustodyViolation, DeckPlace as P
from ..errors import RoundHeld, RoundVoided, TableError
from ..round import HeldRound, RoundMachine, RoundState, VoidRequest
from ..rules.settlement import Decision, Wagers
from ..sealing import CARD_FACE, mask_cards
from .intake import DeviceIntake
from .state import CardRead, RoundInPlay, TableDevices, TableState, by, wager_dict

log = structlog.get_logger("table")

#: the round machine's state each journaled step leaves a round in (a rebuild after a restart)
STATE_AFTER_STEP = {"open": RoundState.OPEN_FOR_BETS, "close_bets": RoundState.BETS_CLOSED,
                    "start_dealing": RoundState.DEALING, "dealing_done": RoundState.DECISIONS,
                    "decisions_done": RoundState.DEALER_REVEAL}


# -- what resolving a held round came to (:meth:`Holds.resolve`) ---------------------------


@dataclass(frozen=True)
class Released:
    """A supervisor released the held round: ``round`` goes on where it stood (the
    conductor plays it on)."""

    round: RoundInPlay


@dataclass(frozen=True)
class Voided:
    """The supervisors voided the held round ``round_id`` for ``reason`` (every wager
    returned, its cards collected): reported like a void during a round."""

    round_id: str
    reason: str


@dataclass(frozen=True)
class Collected:
    """The held round ``round_id`` was settled already: its results stand (816a.1), its
    collect is finished and it is closed. Nothing is left to play."""

    round_id: str


@dataclass(frozen=True)
class NothingHeld:
    """No round was held."""


#: what :meth:`Holds.resolve` returns
Resolution = Released | Voided | Collected | NothingHeld


def deal_order(r: RoundInPlay) -> list[int]:
    """The deal: one card to each seat in play in turn, then the dealer (0), three times."""
    return (list(r.wagers) + [0]) * 3


def placed(r: RoundInPlay) -> dict[str, int]:
    """Cents each seat placed in round ``r`` (ante, side wagers, and the play wager once
    decided): what a void returns. Kept with the round, so a void costs the same
    in round 10 as in round 100,000."""
    return recovery.placed(wager_dict(r.wagers), {str(s): d.value for s, d in r.decisions.items()})


class Holds:
    """Holds, releases and voids of rounds; the void policy the console answers by."""

    def __init__(self, state: TableState, devices: TableDevices, intake: DeviceIntake, console: Console) -> None:
        self.t = state
        self.d = devices
        self.intake = intake
        self.console = console

    # -- a person's wait ---------------------------------------------------------------------

    def wait_person(self, accepts: tuple[str, ...], what: str, **kw: Any) -> Command:
        """Wait for a person's command; a void accepted meanwhile is carried out at once
        (it raises :class:`RoundVoided`, or holds the round for a second supervisor)."""
        r = self.t.round
        while True:
            cmd = self.console.wait(accepts, what, round_id=r.round_id if r else None, **kw)
            if cmd.action != "void":
                return cmd
            if r is not None:
                self.carry_out_void(r, cmd)  # raises
            cmd.finish(ok=False, error="no round was in progress")

    # -- the void policy and voids during a round -------------------------------------------------

    def set_void_policy(self) -> None:
        """Tell the console what a void would do now (58 Pa. Code 816a.1; the two-person rule)."""
        r, held = self.t.round, self.t.held
        two = self.console.two_person_void
        if r is not None:
            state = r.machine.round_state
            if state in (RoundState.SETTLE, RoundState.COLLECT, RoundState.CLOSED):
                policy = VoidPolicy(r.round_id, f"round {r.number} is settled: its results stand "
                                                "(58 Pa. Code 816a.1)")
            elif state in (RoundState.VOIDED, RoundState.HELD):
                policy = VoidPolicy(r.round_id, f"round {r.number} is already {state.value}")
            else:
                policy = VoidPolicy(r.round_id, "", needs_second=two and state is RoundState.DEALER_REVEAL)
        elif held is not None:
            if held.settled:
                policy = VoidPolicy(held.round_id, f"held round {held.round_id} is settled: its results "
                                                   "stand (58 Pa. Code 816a.1)")
            else:
                request = held.void_request
                policy = VoidPolicy(held.round_id, "", needs_second=two and held.decisions_final,
                                    requested_by=request.supervisor if request is not None else None)
        else:
            policy = VoidPolicy(None, "no round is in progress")
        self.console.set_void_policy(policy)

    def check_void(self, r: RoundInPlay | None) -> None:
        """Honour a void accepted while the round runs (within one device step)."""
        if r is None:
            return
        cmd = self.console.take_void()
        if cmd is not None:
            self.carry_out_void(r, cmd)

    def carry_out_void(self, r: RoundInPlay, cmd: Command) -> None:
        """Void round ``r`` now: wagers returned, cards collected (before settlement only).
        After the decisions are final a second supervisor must confirm: the round is
        held for that (the two-person rule). Raises :class:`RoundVoided` or
        :class:`RoundHeld`."""
        t = self.t
        reason = cmd.args["reason"]
        # As promised when the void was accepted (the round may have moved on since):
        # accepted before the decisions were final, it is carried out at once.
        policy = cmd.void_policy if cmd.void_policy is not None else self.console.void_policy
        if policy.needs_second:
            why = (f"void requested by {cmd.person} after the decisions were final: a second supervisor must "
                   "confirm it")
            t.record("supervisor", action="void_requested", supervisor=cmd.person, reason=mask_cards(reason),
                     **by(cmd))
            self.hold(r, why, cause="void_request", void_request=VoidRequest(cmd.person, reason, by(cmd).get("by")))
            cmd.finish(ok=True, pending=True, round_id=r.round_id, what="held for a second supervisor to confirm")
            self.console.void_handed_on()  # a second supervisor's void or confirm_void is taken now
            raise RoundHeld(r.round_id, None, reason=why)
        t.record("round", step="voided", number=r.number, reason=mask_cards(reason), supervisor=cmd.person,
                 wagers="returned", returned_cents=placed(r),
                 seal_key=t.journal.seal_key(r.round_id).hex() if t.journal else None, **by(cmd))
        r.machine.void_by_supervisor(reason)
        self.set_void_policy()
        t.in_flight_round = r.round_id
        self.intake.cards_in_flight("voided")  # a card drawn as the void came is journaled, not left for later
        self.collect_void(r.round_id, r.deck.deck_id)
        with t.batch():
            r.machine.step("close")
            t.record("round", step="closed", number=r.number, voided=True)
            self.t.checkpoint()
        cmd.finish(ok=True, round_id=r.round_id, voided=True)
        t.publish("round_voided", reason=mask_cards(reason))
        raise RoundVoided(r.round_id, reason)

    # -- holding a round ----------------------------------------------------------------------

    def hold(self, r: RoundInPlay, reason: str, cause: str = "custody", *,
             void_request: VoidRequest | None = None) -> None:
        """Hold round ``r`` for a supervisor (``cause``: ``custody``, ``device``, ``restart``,
        ``void_request`` with the first supervisor's ``void_request``), journaled with
        whether its decisions were final."""
        t = self.t
        hold_from = r.machine.round_state
        if hold_from in (RoundState.CLOSED, RoundState.HELD, RoundState.VOIDED):
            return
        settled = hold_from in (RoundState.SETTLE, RoundState.COLLECT)
        # every seat with an ante has decided (a Pair Plus-only seat has none to make, 649a.7)
        deciding = sum(1 for w in r.wagers.values() if w.ante)
        final = hold_from is RoundState.DEALER_REVEAL or bool(r.decisions) and len(r.decisions) == deciding
        sealed = {"reason": reason} if t.journal is not None and CARD_FACE.search(reason) else None
        # decisions_final is journaled with the hold: a restart before the next checkpoint
        # keeps the two-person rule (the decisions may be in memory only, not yet journaled)
        t.record("round", step="held", reason=mask_cards(reason), number=r.number, settled=settled,
                 cause=cause, sealed=sealed, **({"decisions_final": True} if final else {}))
        r.machine.hold_for_supervisor(reason)
        t.held = HeldRound(r.round_id, r.deck.deck_id, mask_cards(reason), r.number, settled, placed(r), cause,
                           final, open_seq=r.open_seq, hold_from=hold_from, void_request=void_request)
        t.held_round = r
        t.alarms.sound("held", f"round {r.number} held: {mask_cards(reason)}", key="held")  # as people count rounds
        log.error("round_held", reason=mask_cards(reason), cause=cause)  # the journal has the faces, sealed
        t.publish("round_held", reason=mask_cards(reason))

    def _unhold(self) -> None:
        self.t.held = None
        self.t.held_round = None
        self.t.alarms.clear("held")
        self.set_void_policy()

    # -- resolving a held round ------------------------------------------------------------------

    def resolve(self) -> Resolution:
        """Resolve the held round, as the supervisors decide, and say what came of it.
        Before settlement: void it (misdeal: every wager returned, the cards collected;
        after the decisions a second supervisor confirms): :class:`Voided`; or, when the
        hold came from a device or a restart and not from a broken rule, release it:
        :class:`Released` with the round, for the conductor to play on. A round already
        settled keeps its results (recorded and posted, 816a.1): only its collect is
        finished, :class:`Collected`. :class:`NothingHeld` when no round is held."""
        held = self.t.held
        if held is None:
            return NothingHeld()
        rid = held.round_id
        self.set_void_policy()
        if held.settled:
            self._finish_settled(held)
            return Collected(rid)
        while True:
            request = held.void_request
            accepts = (("void",) + (("confirm_void",) if request else ())
                       + (("release_hold",) if held.releasable else ()))
            what = (f"a second supervisor to confirm the void of {held.said} ({request.supervisor} asked)"
                    if request else f"a supervisor to void held {held.said}"
                    + (" or release it" if held.releasable else ""))

            def check(cmd: Command, request: VoidRequest | None = request) -> dict[str, Any] | None:
                if request is not None and cmd.action == "confirm_void" and cmd.person == request.supervisor:
                    return {"code": "refused", "error": "a second supervisor must confirm the void, not the one "
                                                        "who asked it (two-person rule)"}
                return None

            cmd = self._wait_held(accepts, what, action="confirm_void" if request else "void", check=check)
            if cmd.action == "release_hold":
                return Released(self._release(cmd))
            if cmd.action == "void" and request is None and self.console.void_policy.needs_second:
                self._void_requested(held, cmd)
                continue
            if request is not None:  # the second supervisor: confirm_void, or a void of their own
                if cmd.person == request.supervisor:
                    answer = cmd.finish if cmd.action == "void" else cmd.answer
                    answer(ok=False, code="refused", error="a second supervisor must confirm the void, not the one "
                                                         "who asked it (two-person rule)")
                    self.console.void_handed_on()
                    continue
                reason, first, second = str(request.reason), request.supervisor, cmd.person
            else:
                reason, first, second = cmd.args["reason"], cmd.person, None
            self._void_held(held, reason, first, second, cmd)
            return Voided(rid, reason)

    def _finish_settled(self, held: HeldRound) -> None:
        """A held round already settled: the dealer confirms the collect, then it closes."""
        j = self.t.journal
        rid = held.round_id
        if not self.d.auto_dealer:
            cmd = self._wait_held(("confirm_collect", "release_hold"), f"the dealer to collect settled {held.said}")
            cmd.answer(ok=True, round_id=rid, collected=True)
        self.collect_void(rid, held.deck_id)
        with self.t.batch():
            if j is not None:
                j.append("round", round_id=rid, deck_id=held.deck_id, step="closed", number=held.number,
                         completed_after_restart=True)
            self._unhold()
            self.t.checkpoint()

    def _void_requested(self, held: HeldRound, cmd: Command) -> None:
        """The first supervisor's void of a held round whose decisions are final: kept for a second."""
        self.t.record("supervisor", action="void_requested", supervisor=cmd.person,
                      reason=mask_cards(cmd.args["reason"]), round_id=held.round_id, **by(cmd))
        held.void_request = VoidRequest(cmd.person, cmd.args["reason"], by(cmd).get("by"))
        cmd.finish(ok=True, pending=True, round_id=held.round_id, what="a second supervisor must confirm")
        self.set_void_policy()  # the one who asked is refused a void of their own now

    def _wait_held(self, accepts: tuple[str, ...], what: str, **kw: Any) -> Command:
        held = self.t.held
        return self.console.wait(accepts, what, role="supervisor" if "confirm_collect" not in accepts else "dealer",
                                 round_id=held.round_id if held is not None else None, **kw)

    def _void_held(self, held: HeldRound, reason: str, first: str | None, second: str | None,
                   cmd: Command) -> None:
        t = self.t
        j = t.journal
        rid = held.round_id
        extra: dict[str, Any] = {"second_supervisor": second} if second else {}
        t.in_flight_round = rid
        self.intake.cards_in_flight("voided")  # cards the shoe let out for this round: journaled before the collect
        if j is not None:
            j.append("round", round_id=rid, deck_id=held.deck_id, step="voided", reason=mask_cards(reason),
                     supervisor=first, wagers="returned", returned_cents=held.placed,
                     seal_key=j.seal_key(rid).hex(), **extra, **by(cmd))
        self.collect_void(rid, held.deck_id)
        with t.batch():
            if j is not None:
                j.append("round", round_id=rid, deck_id=held.deck_id, step="closed",
                         number=held.number, voided=True)
            self._unhold()
            self.t.checkpoint()
        if cmd.action == "void":
            cmd.finish(ok=True, round_id=rid, voided=True)
        else:
            cmd.answer(ok=True, round_id=rid, voided=True, supervisors=[first, second])
        t.publish("round_voided", round_id=rid, reason=mask_cards(reason))

    def _release(self, cmd: Command) -> RoundInPlay:
        """A supervisor releases a round held by a device fault or a restart: it goes on
        where it stood. Cards read while it was held are dealt where the deal order
        puts them (their draw index), recorded in the release entry."""
        t = self.t
        held = t.held
        assert held is not None
        r = t.held_round if t.held_round is not None else self._rebuild(held)
        r.machine.resume(held.hold_from or r.machine.round_state)
        assigned = self._deal_late_cards(r)
        t.record("round", step="released", round_id=r.round_id, number=r.number, supervisor=cmd.person,
                 assigned={str(k): v for k, v in assigned.items()}, **by(cmd))
        t.held = None
        t.held_round = None
        t.alarms.clear("held")
        cmd.answer(ok=True, round_id=r.round_id, released=True)
        return r

    def _rebuild(self, held: HeldRound) -> RoundInPlay:
        """The held round, rebuilt from its journal entries (after a restart)."""
        t = self.t
        j = t.journal
        if j is None:
            raise TableError("a round held across a restart can only be voided without a journal")
        rid = held.round_id
        open_seq = held.open_seq if held.open_seq is not None else 1
        entries = [e for e in j.entries(since=open_seq - 1) if e.round_id == rid]
        opened = next(e for e in entries if e.kind == "round" and e.body.get("step") == "open")
        closed = next((e for e in entries if e.kind == "round" and e.body.get("step") == "close_bets"
                       and isinstance(e.body.get("wagers"), dict)), None)
        # the bets as frozen at close_bets (816a.1); before then, those known at the open with
        # each place_bets journaled since
        record = dict(opened.body.get("wagers", {}))
        if closed is not None:
            record = closed.body["wagers"]
        else:
            for e in entries:
                if e.kind == "console" and e.body.get("action") == "place_bets":
                    record = recovery.bets_placed(record, e.body)
        wagers = {int(s): Wagers.from_record(w) for s, w in record.items()}
        deck = t.custody.in_play or t.deck_in(P.IN_PLAY, P.IN_SHOE)
        if deck is None:
            raise TableError(f"round {rid}: its deck is not in play; it can only be voided")
        r = RoundInPlay(opened.body["number"], rid, deck, RoundMachine(rid), wagers, hands={s: [] for s in wagers},
                        open_seq=opened.seq)
        state = RoundState.OPEN_FOR_BETS
        for e in entries:
            if e.kind == "round":
                state = STATE_AFTER_STEP.get(str(e.body.get("step")), state)
                if e.body.get("step") == "decisions_done":
                    r.decisions = {int(s): Decision.parse(d) for s, d in e.body.get("decisions", {}).items()}
            elif e.kind == "card_read" and e.body.get("to") is not None and not e.body.get("refused"):
                card = Card.parse(j.unseal(e)["card"])
                r.reads.append(CardRead(e.body["draw_index"], card, BackColour.parse(e.body["back_colour"]),
                                        bool(e.body.get("manual"))))
                (r.dealer if e.body["to"] == 0 else r.hands[e.body["to"]]).append(card)
        held.hold_from = state
        r.prompted = len(r.reads)
        return r

    def _deal_late_cards(self, r: RoundInPlay) -> dict[int, int]:
        """Cards the shoe read while the round was held (journaled as late, dealt to
        nobody) take their places in the deal, in draw order."""
        j = self.t.journal
        if j is None or r.machine.round_state is not RoundState.DEALING:
            return {}
        order = deal_order(r)
        assigned: dict[int, int] = {}
        late = [e for e in j.entries("card_read") if e.round_id == r.round_id and e.body.get("late")
                and not e.body.get("refused")]
        for e in sorted(late, key=lambda e: e.body["draw_index"]):
            pos = len(r.reads)
            if pos >= len(order) or e.body["draw_index"] != pos:
                break
            card = Card.parse(j.unseal(e)["card"])
            target = order[pos]
            r.reads.append(CardRead(pos, card, BackColour.parse(e.body["back_colour"]), False))
            (r.dealer if target == 0 else r.hands[target]).append(card)
            assigned[pos] = target
        r.prompted = max(r.prompted, len(r.reads))
        return assigned

    # -- the cards of a void -------------------------------------------------------------------------

    def collect_void(self, round_id: str, deck_id: str | None) -> None:
        """A void's cards (and the shoe's stub) go to the discard rack. The dealer is
        asked to collect even when custody already shows it done: a restart may have
        come between the record and the dealer's action, and an empty layout costs
        nothing to collect."""
        t = self.t
        c = t.custody
        if c.in_play is None:
            c.in_play = t.deck_in(P.IN_SHOE, P.IN_PLAY)
        if c.in_play is not None:
            try:
                c.collect()
            except CustodyViolation as v:
                t.violation(v)
                raise
            t.record("custody", op="collect", round_id=round_id, deck_id=deck_id)
        self.console.expect(Expectation("collect", "the dealer to collect the cards into the discard rack",
                                        "device", ()))
        self.d.dealer.collect()
        self.console.expect(None)

    # -- incidents ----------------------------------------------------------------------------------

    def hold_table(self, what: str, waiting: str, **fields: Any) -> None:
        """Hold the table between rounds for an incident a person must look into (the floor
        gone behind the table: :mod:`table.floor_anchor`): ``what`` journaled as an
        ``incident`` (with ``fields``) and alarmed on every screen, then the table waits
        for a supervisor's ``acknowledge_incident`` (``waiting`` says what they must do),
        journaled with their name; then it goes on. Never an exit in service mode; raises
        :class:`~table.errors.SupervisorRequired` with no front door to ask."""
        t = self.t
        t.record("incident", what=what, **fields)
        t.publish("incident", what=what)
        t.alarms.sound("incident", what, key="hold_table")
        cmd = self.console.wait(("acknowledge_incident",), waiting, role="supervisor", voids=False)
        t.record("supervisor", action="acknowledge_incident", supervisor=cmd.person, held_table=what[:200], **by(cmd))
        t.alarms.clear("hold_table")
        cmd.answer(ok=True, acknowledged=what[:200])

    def acknowledge(self, cmd: Command) -> None:
        """A supervisor acknowledges the table's incident alarms (any time; a journaled
        supervisor action): ``incident`` names one alarm by id, else all of them."""
        want = cmd.args.get("incident")
        ids = self.t.alarms.take_incidents(None if want is None else str(want))
        if not ids:
            cmd.answer(ok=False, code="refused", error="no incident alarm to acknowledge"
                       + (f" with id {want}" if want is not None else ""))
            return
        self.t.record("supervisor", action="acknowledge_incident", supervisor=cmd.person, incidents=ids, **by(cmd))
        cmd.answer(ok=True, acknowledged=ids)
