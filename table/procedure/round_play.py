"""One round, from the bets to the collect, its steps in order in this file.

58 Pa. Code 649a.11, 649a.12; California TCP standards of play: bets close
before the first card; the deck in the shoe is dealt one card at a time to
each seat in play and then to the dealer, three times; each seat plays (a play
wager equal to its ante) or folds; the dealer's hand is revealed only after
every decision (816a.1); the round is settled and the result journaled before
it is posted (816a.1); then the cards are collected into the discard rack,
which may hold one deck's cards only (649a.3(b)).

:meth:`RoundPlay.play` is the main line; each step below it is one method in
the order a round takes them. A custody violation or a device fault holds the
round for a supervisor (:class:`~table.procedure.holds.Holds`); a void accepted
while a step runs is carried out between device events.

May touch: the round in play, custody (cards read, collect), the journal, the
console's expectation and the people's waits, the dealer (draw, collect), the
shoe's count. Never moves decks between rounds (:mod:`table.procedure.decks`).
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol, cast

import structlog

from firmware_bridge.errors import LinkError
from protocols.cards import Card
from protocols.messages import CardDrawn, CardUnreadable, DeckInserted

from ..bets import BetBook, BetRefused
from ..console import Command, Console, Expectation, VoidArrived, VoidPolicy
from ..custody import CustodyViolation, Rule
from ..errors import DeviceFault, DeviceTimeout, RoundHeld
from ..journal import JournalWriteError
from ..round import RoundMachine, RoundState
from ..rules.hands import dealer_qualifies, evaluate
from ..rules.profiles import RulesProfile
from ..rules.settlement import Tables, Wagers, settle_seat
from ..rules.strategy import Decide
from ..sealing import mask_cards
from .commitment import ShuffleCommitment
from .holds import Holds, deal_order
from .intake import DeviceIntake
from .table_day import OPEN_WHAT
from .state import CardRead, RoundInPlay, RoundResult, SeatResult, TableDevices, TableState, by, wager_dict

log = structlog.get_logger("table")


class Players(Protocol):
    """Who places the bets of a simulated table (:mod:`table.players`)."""

    def place(self, book: BetBook) -> dict[int, Wagers]:
        """Place this round's bets in ``book``; returns them by seat."""
        ...


class RoundPlay:
    """Deals, decides, reveals, settles and collects one round.

    ``tables``: the filed paytables; ``profile``: the rules profile ranking hands;
    ``decide``: each seat's play or fold (a person's entry, or a strategy);
    ``book``: the bets as placed (:class:`~table.bets.BetBook`); ``players``: who
    places them on a simulated table (``place(book)``: seeded players, or the fixed
    bet of ``--ante-cents``), and at a real table when nobody placed any and
    ``fixed_when_none`` (a table whose config sets no limits: old clients that only
    close bets keep the fixed bet)."""

    def __init__(self, state: TableState, devices: TableDevices, intake: DeviceIntake, holds: Holds,
                 console: Console, *, tables: Tables, profile: RulesProfile, decide: Decide, book: BetBook,
                 players: Players, fixed_when_none: bool, day: Any = None) -> None:
        self.t = state
        self.d = devices
        self.intake = intake
        self.holds = holds
        self.console = console
        self.tables = tables
        self.profile = profile
        self.decide = decide
        self.book = book
        self.players = players
        self.fixed_when_none = fixed_when_none
        #: the gaming day's procedures (:class:`~table.procedure.table_day.TableDayProcedure`):
        #: taken while bets are open and none is placed; None: not offered
        self.day = day

    # -- the round, start to end -------------------------------------------------------------

    def open(self) -> RoundInPlay:
        """Open the next round on the deck in the shoe, open for bets. On a simulated
        table its players place their bets now (journaled in the ``open`` entry); at a
        real table the dealer places them until bets close. The decks must be ready
        (custody's start_round)."""
        t = self.t
        self.book.open_round()
        wagers = self.players.place(self.book) if self.d.auto_dealer else {}
        number = t.rounds_opened + 1
        round_id = f"r{number:05d}-{uuid.uuid4().hex[:8]}"
        deck = t.custody.start_round()
        r = RoundInPlay(number, round_id, deck, RoundMachine(round_id), wagers, hands={s: [] for s in wagers})
        if not self.d.auto_dealer:
            # Status says "open for bets" from here; the dealer who closes bets at once is
            # answered when the table waits for it (after the open is journaled), not refused.
            self.console.between()
        t.enter(r)
        with t.batch():
            t.op("start_round")
            t.record("round", step="open", number=number, wagers=wager_dict(wagers))
        if t.journal is not None:
            r.open_seq = t.journal.last_seq
        t.rounds_opened = number
        return r

    def run(self, r: RoundInPlay, resumed: bool = False) -> RoundResult:
        """Play round ``r`` from where it stands; a fault holds it for a supervisor.
        Raises :class:`RoundHeld` (a broken rule), :class:`DeviceFault` /
        :class:`DeviceTimeout` (held too), :class:`~table.errors.RoundVoided`."""
        self.t.enter(r)
        try:
            return self.play(r, resumed)
        except CustodyViolation as v:
            self.holds.hold(r, str(v))
            raise RoundHeld(r.round_id, v) from v
        except (DeviceFault, DeviceTimeout) as exc:
            self.holds.hold(r, str(exc), cause="device")
            raise
        except LinkError as exc:
            self.holds.hold(r, str(exc), cause="device")
            raise DeviceFault(f"device link failed: {exc}") from exc
        except JournalWriteError:
            raise  # nothing more can be recorded: a restart finds the round open and holds it
        except BaseException as exc:
            # Stopped mid-round (Ctrl-C, SIGTERM, nobody to ask, a bug): the round is held, so
            # the checkpoint a clean stop signs says so and a restart resumes nothing silently.
            self.holds.hold(r, f"the round stopped: {mask_cards(str(exc)) or type(exc).__name__}", cause="restart")
            raise
        finally:
            self.t.enter(None)
            self.console.expect(None)
            self.holds.set_void_policy()

    def play(self, r: RoundInPlay, resumed: bool = False) -> RoundResult:
        """The round's steps in order; a resumed round (released after a hold) starts at
        the step it stood at."""
        self.holds.set_void_policy()
        if r.machine.round_state is RoundState.OPEN_FOR_BETS:
            if resumed:
                self.replay_bets(r)
            self._close_bets(r, announce=not resumed)
        if r.machine.round_state is RoundState.BETS_CLOSED:
            self._step(r, "start_dealing")
        if r.machine.round_state is RoundState.DEALING:
            self._deal(r, resumed)
        if r.machine.round_state is RoundState.DECISIONS:
            self._decisions(r)
        qualifies = self._reveal(r)
        ShuffleCommitment(self.t, self.d, self.intake).check(r)  # the deal followed the shuffle (SPEC §4.2.1)
        self._settle(r)
        self._confirm_collect(r)
        self._collect(r)
        self._close(r)
        seats = [SeatResult(s, r.hands[s], r.decisions.get(s), r.results[s]) for s in r.wagers]
        return RoundResult(r.number, r.round_id, r.deck.deck_id, r.deck.back_colour, list(r.dealer), qualifies,
                           seats, list(r.reads))

    # -- 1. bets close ----------------------------------------------------------------------------

    def _close_bets(self, r: RoundInPlay, announce: bool) -> None:
        """Bets close before the first card and are final from then (816a.1); a card drawn
        while they were open holds the round."""
        if announce:
            log.info("round_open", number=r.number, back_colour=str(r.deck.back_colour), seats=self.t.seats)
            self.t.publish("round_opened", number=r.number, seats=self.t.seats, back_colour=str(r.deck.back_colour))
        if self.d.auto_dealer:
            frozen = self.book.freeze()
        else:
            frozen = self._take_bets(r)
        self.intake.drain(early=True)  # a card drawn while bets are open is an incident that holds the round
        self.holds.check_void(r)
        with self.t.lock:
            r.wagers = frozen
            r.hands = {s: [] for s in frozen}
        # The bets as frozen are journaled and published before the first card (816a.1).
        with self.t.batch():
            self._step(r, "close_bets", wagers=wager_dict(frozen))
            self._step(r, "start_dealing")
        self.t.publish("bets_closed", number=r.number, seats=list(frozen), wagers=wager_dict(frozen))

    def _take_bets(self, r: RoundInPlay) -> dict[int, Wagers]:
        """At a real table: each ``place_bets`` is checked against the table's limits and
        answered (a refusal names the seat, the wager and the limit), journaled with
        who placed it, until the dealer closes bets; ``close_bets`` with no seat in play
        is refused and betting goes on. Returns the frozen bets."""
        day = self.day
        while True:
            if day is not None and day.waits_to_open:
                # Closed by people while this round was open for bets: it waits, unbet, for the
                # table to open again (no round is dealt on a closed table, COMAR 36.05.03.10).
                cmd = self.holds.wait_person(("table_procedure",), OPEN_WHAT, role="supervisor",
                                             action="table_procedure")
                day.take(cmd)
                continue
            # A table with limits asks for bets; one without (an old client that only closes
            # bets, the fixed bet on every seat) says it waits for close_bets, as it always did.
            accepts = ("place_bets", "close_bets") + (("table_procedure",) if day is not None else ())
            cmd = self.holds.wait_person(accepts, "the dealer to place bets, then close them",
                                         action="close_bets" if self.fixed_when_none else "place_bets",
                                         role="dealer")
            if cmd.action == "table_procedure":
                day.take(cmd, bets_placed=bool(self.book.seats_in_play))
                continue
            if cmd.action == "place_bets":
                answer = self.book.apply(cmd.args)
                if answer.get("ok"):
                    self.t.record("console", action="place_bets", seats=answer.get("seats", {}), **by(cmd))
                    with self.t.lock:
                        r.wagers = self.book.wagers
                cmd.answer(**answer)
                continue
            if not self.book.seats_in_play and self.fixed_when_none:
                self.players.place(self.book)  # an old client that only closes bets: the fixed bet, every seat
            try:
                frozen = self.book.freeze()
            except BetRefused as exc:
                cmd.answer(**exc.to_answer())
                continue
            self.t.record("console", action="close_bets", **by(cmd))
            cmd.answer(ok=True, round_id=r.round_id, seats=list(frozen))
            return frozen

    def replay_bets(self, r: RoundInPlay) -> None:
        """A round released while open for bets (after a restart): the bets placed before it
        (rebuilt from the journal: the open entry's, then each place_bets) are put back in
        the book as they were, nothing re-entered and nothing judged again."""
        self.book.open_round()
        self.book.restore(r.wagers)

    # -- 2. the deal --------------------------------------------------------------------------------

    def _deal(self, r: RoundInPlay, resumed: bool) -> None:
        """Three cards to each seat in play and the dealer, one at a time in turn; the
        count is checked (a misdeal holds the round)."""
        order = deal_order(r)
        if resumed and r.prompted > len(r.reads):
            r.prompted = self._drawn_since_load()  # the card prompted before the hold: drawn or not
        if not r.reads and r.prompted == 0:
            # Before the first card: the shoe holds the deck loaded, less the cards read since the
            # load, no more (cards put on top would be dealt as the deck's: 649a.3, 27 C).
            self.intake.check_not_more(self.intake.DECK_SIZE - self.t.next_draw, "before the first card")
        for pos in range(len(r.reads), len(order)):
            self.holds.check_void(r)
            target = order[pos]
            if r.prompted <= pos:
                who = "the dealer" if target == 0 else f"seat {target}"
                self.console.expect(Expectation("draw_card", f"the dealer to draw card {pos + 1} of "
                                                f"{len(order)} ({who})", "device", (), draw_index=pos,
                                                round_id=r.round_id, colour=str(r.deck.back_colour),
                                                deck_id=r.deck.deck_id))
                r.prompted = pos + 1
                self.d.dealer.draw_card()
            self._take_card(r, target)
        self.console.expect(None)
        self._deal_complete()
        counts = {s: len(h) for s, h in r.hands.items()}
        if any(n != 3 for n in counts.values()) or len(r.dealer) != 3:
            raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"cards per seat {counts}, dealer {len(r.dealer)}: "
                                   "misdeal")
        self._step(r, "dealing_done")
        self.holds.check_void(r)

    def _take_card(self, r: RoundInPlay, target: int) -> None:
        """The next card from the shoe, to ``target`` (0 the dealer): checked for its draw
        index and its deck, journaled sealed, and told to its seat alone (816a.1)."""
        ev = self.intake.expect_card(self.d.dealer_wait_s, "a card from the shoe")
        msg = ev.message
        gap = self.intake.check_draw(ev)
        if gap is not None:  # never a shifted deal: the card goes to nobody, the round is held
            if isinstance(msg, CardDrawn):
                self.intake.card_entry(ev, msg.card, None, gap=True)
            else:
                self.t.next_draw = msg.draw_index + 1
            self.t.violation(gap)
            raise gap
        if isinstance(msg, CardUnreadable):
            card, manual = self._manual_card(msg), True
            self.t.next_draw = msg.draw_index + 1
        else:
            card, manual = msg.card, False
        colour = msg.back_colour
        entered: dict[str, Any] = {"manual": True} if manual else {}
        try:
            self.t.custody.on_card_read(card, colour)
        except CustodyViolation as v:
            self.intake.card_entry(ev, card, None, refused=v.rule.value, **entered)
            self.t.violation(v)
            raise
        with self.t.lock:
            r.reads.append(CardRead(msg.draw_index, card, colour, manual))
            (r.dealer if target == 0 else r.hands[target]).append(card)
        self.t.cards_read += 1
        self.intake.card_entry(ev, card, target, **entered)
        # Sealed (816a.1): no card face in any log line or public event before the reveal.
        # Debug, not info: the journal is the record of each read (24 of a 7-seat
        # round's 29 info lines repeated it).
        if target == 0:
            log.debug("card_read", to="dealer", draw_index=msg.draw_index)
            self.t.publish("card_dealt", to="dealer", draw_index=msg.draw_index)
        else:
            log.debug("card_read", to=f"seat{target}", draw_index=msg.draw_index)
            self.t.publish("card_dealt", to=f"seat{target}", seat=target, draw_index=msg.draw_index)
            self.t.publish("seat_card", audience=f"seat:{target}", seat=target, draw_index=msg.draw_index,
                           card=str(card))

    def _manual_card(self, msg: CardUnreadable) -> Card:
        """The shoe could not read a card: a supervisor enters it."""
        self.t.record("incident", what="card unreadable", draw_index=msg.draw_index)
        log.warning("card_unreadable", draw_index=msg.draw_index)

        def check(cmd: Command) -> dict[str, Any] | None:
            try:
                Card.parse(str(cmd.args.get("card", "")))
            except ValueError as exc:
                return {"code": "bad_request", "error": str(exc)}
            return None

        cmd = self.holds.wait_person(("confirm_card",), f"a supervisor to enter unreadable card "
                                     f"{msg.draw_index + 1} (read it off the layout)", role="supervisor",
                                     draw_index=msg.draw_index, check=check)
        card = Card.parse(str(cmd.args.get("card", "")))
        # The card may be the dealer's: its face is sealed until the reveal (816a.1).
        self.t.record("supervisor", action="confirm_card", supervisor=cmd.person, draw_index=msg.draw_index,
                      sealed={"card": str(card)} if self.t.journal else None, **by(cmd))
        cmd.answer(ok=True, card=str(card))
        return card

    def _drawn_since_load(self) -> int:
        """How many cards have left the shoe since it was loaded (its own count)."""
        return self.intake.DECK_SIZE - self.intake.shoe_count()

    def _deal_complete(self) -> None:
        """The deal is complete when its cards are read and the shoe holds exactly 52 less
        the cards read since the load (SPEC §4.3). More is a card put back or added
        into the shoe: held as foreign cards (:meth:`DeviceIntake.check_not_more`;
        58 Pa. Code 649a.3, COMAR 36.05.03.27 C). Fewer is a card beyond the deal, a
        misdeal, found without waiting on a timer: by a card event already
        here, or by the shoe's own count, which says how many cards left it. The
        events of cards the shoe let out are then waited for (the shoe sends them)
        and journaled, so none is left to surface in a later round."""
        self.intake.drain()
        reads = self.t.next_draw
        # required: a shoe that does not answer raises DeviceFault, so the count is an int here
        held = cast(int, self.intake.check_not_more(self.intake.DECK_SIZE - reads, "at the end of the deal"))
        out = self.intake.DECK_SIZE - held
        if out == reads:
            return
        if not self.intake.capabilities(self.d.shoe_name).draw_index:
            # A shoe that does not number its draws (docs/drivers.md, "Capabilities"): the table
            # numbered them, so a card that left unread shifted the ones after it. Only this
            # count finds it; nothing is revealed or settled on the deal: held.
            self.t.record("incident", what="shoe count ahead of the reads", shoe_holds=held, reads=reads)
            self.intake.await_cards(out, extra=True)
            v = CustodyViolation(Rule.CARD_UNACCOUNTED, f"the shoe holds {held} cards: {out} left it but {reads} "
                                 "were read: a card left the shoe unread (this shoe does not number its draws, "
                                 "so the deal's cards may be shifted) or one beyond the deal")
            self.t.violation(v)
            raise v
        self.t.record("incident", what="card drawn beyond the deal", shoe_holds=held, reads=reads)
        self.intake.await_cards(out, extra=True)
        raise CustodyViolation(Rule.WRONG_CARD_COUNT, f"the shoe holds {held} cards: {out} left it but "
                               f"{reads} were read in the deal: a card beyond the deal, misdeal")

    # -- 3. decisions --------------------------------------------------------------------------------

    def _decisions(self, r: RoundInPlay) -> None:
        """Each seat in turn plays or folds (649a.11); then every seat's cards are
        published: no wager depends on them any more (816a.1)."""
        for s, w in r.wagers.items():
            if s in r.decisions or not w.ante:  # a Pair Plus-only seat has no decision to make (649a.7)
                continue
            try:
                r.decisions[s] = self.decide(s, list(r.hands[s]))
            except VoidArrived as arrived:
                self.holds.carry_out_void(r, arrived.command)
            cmd = getattr(self.decide, "last", None)
            if cmd is not None:  # a person entered it: journaled with who
                self.t.record("console", action="decide", seat=s, decision=r.decisions[s].value, **by(cmd))
        # The last decision is in: nothing a person sends now is for the steps to come
        # (the reveal, the settlement), so what was held since is answered, not taken
        # later as a collect confirmed before the payouts are shown.
        self.console.expect(None)
        self.holds.check_void(r)
        self._deal_complete()  # a card drawn while the seats decided is still one too many
        self._step(r, "decisions_done", decisions={str(s): d.value for s, d in r.decisions.items()},
                   hands={str(s): [str(c) for c in h] for s, h in r.hands.items()})
        self.holds.check_void(r)

    # -- 4. the reveal ------------------------------------------------------------------------------

    def _reveal(self, r: RoundInPlay) -> bool:
        """The dealer's hand (dealer_reveal: the outcome is known from here, so a void now
        needs a second supervisor). The reveal discloses the round's seal key: every
        card sealed in the journal, and the opening of every commitment published at
        deal time, can be checked by anyone now. Returns whether the dealer qualifies."""
        value = evaluate(r.dealer, self.profile)
        qualifies = dealer_qualifies(value)
        j = self.t.journal
        # The hand's name as people say it ("flush, king-jack-9"), from the rules that rank it: the
        # screens show it, and need no hand ranking of their own.
        self.t.record("round", step="dealer_reveal", number=r.number, dealer_hand=[str(c) for c in r.dealer],
                      dealer_qualifies=qualifies, dealer_hand_name=value.describe(),
                      seal_key=j.seal_key(r.round_id).hex() if j else None)
        log.info("dealer_reveal", dealer_hand=[str(c) for c in r.dealer], dealer_value=value.describe(),
                 dealer_qualifies=qualifies)
        self.t.publish("dealer_revealed", dealer_hand=[str(c) for c in r.dealer], dealer_qualifies=qualifies,
                       hands={str(s): [str(c) for c in h] for s, h in r.hands.items()},
                       decisions={str(s): d.value for s, d in r.decisions.items()})
        self.holds.check_void(r)
        return qualifies

    # -- 5. settlement ------------------------------------------------------------------------------

    def _settle(self, r: RoundInPlay) -> None:
        """Settle every seat against the filed paytables; results are recorded before they
        are posted (58 Pa. Code 816a.1), and a void is refused from then on: a void
        accepted up to this instant is carried out (held for a second supervisor),
        never dropped after its "accepted"."""
        for s, w in r.wagers.items():
            r.results[s] = settle_seat(w, r.decisions.get(s), r.hands[s], r.dealer, self.tables, self.profile)
        pending = self.console.close_voids(VoidPolicy(r.round_id, f"round {r.number} is settled: its results "
                                                                  "stand (58 Pa. Code 816a.1)"))
        if pending is not None:
            self.holds.carry_out_void(r, pending)
        # the meter reading the round was settled against, in its settlement (649a.12(e)); docs/journal.md
        meter = ({"progressive_meter_cents": self.tables.progressive_meter_cents}
                 if self.tables.progressive is not None else {})
        self._step(r, "settle", results={str(s): st.to_record() for s, st in r.results.items()}, **meter)
        log.info("settled", net_cents={f"seat{s}": st.net for s, st in r.results.items()})
        self.t.publish("round_settled", net_cents={str(s): st.net for s, st in r.results.items()},
                       results={str(s): st.to_dict() for s, st in r.results.items()},
                       dealer_hand=[str(c) for c in r.dealer], number=r.number)

    # -- 6. collect and close -----------------------------------------------------------------------

    def _confirm_collect(self, r: RoundInPlay) -> None:
        """At a real table the dealer pays the round, then confirms the collect."""
        if self.d.auto_dealer:
            return
        cmd = self.holds.wait_person(("confirm_collect",), "the dealer to confirm the collect (pay the round first)")
        self.t.record("console", action="confirm_collect", **by(cmd))
        cmd.answer(ok=True, round_id=r.round_id)

    def _collect(self, r: RoundInPlay) -> None:
        """Collect into the discard rack; refused while the other deck's cards are
        still there, until the shuffler reports that deck loaded (649a.3(b))."""
        while True:
            try:
                self.t.custody.collect()
                break
            except CustodyViolation as v:
                if v.rule is not Rule.TWO_DECKS_IN_DISCARD_RACK:
                    raise
                self.t.violation(v)
                log.warning("collect_refused", detail=mask_cards(v.detail))
                self.intake.expect(DeckInserted, self.d.timing.event_timeout_s, "the other deck loaded into the shuffler")
        with self.t.batch():
            self._step(r, "collect")
            self.t.op("collect")
        self.d.dealer.collect()
        log.info("collected", places=self.t.custody.places())

    def _close(self, r: RoundInPlay) -> None:
        """One entry for the close: "closed" is journaled, then the step made,
        as a void's close already was; a checkpoint signs the round."""
        with self.t.batch():
            self.t.record("round", step="closed", number=r.number)
            r.machine.step("close")
            self.holds.set_void_policy()
            self.t.rounds_played += 1
            self.t.checkpoint()

    # -- a step of the round machine ------------------------------------------------------------------

    def _step(self, r: RoundInPlay, trigger: str, **body: Any) -> None:
        """Journal a round transition, then make it (journal before act)."""
        self.t.record("round", step=trigger, number=r.number, **body)
        if not self.d.auto_dealer and trigger == "settle":
            # "settle" shows before the table asks the dealer to confirm the collect: a
            # confirmation sent on seeing it is held for that wait, not refused for the gap.
            self.console.between()
        r.machine.step(trigger)
        self.holds.set_void_policy()
