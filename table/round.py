"""The round procedure machine (``transitions``, states and transitions as data).

Open for bets → bets closed → dealing → decisions → dealer reveal → settle →
collect → closed. The dealer's hand stays sealed until every seat has decided
(58 Pa. Code 816a.1: nobody sees an outcome before the wager it decides is
final). A supervisor may void a round, with a reason, any time before settle;
wagers are then returned. A fault holds the round for a supervisor.
"""

from __future__ import annotations

import enum

from transitions import Machine, MachineError


class RoundState(str, enum.Enum):
    """The round machine's states."""

    OPEN_FOR_BETS = "open_for_bets"
    BETS_CLOSED = "bets_closed"
    DEALING = "dealing"
    DECISIONS = "decisions"
    DEALER_REVEAL = "dealer_reveal"
    SETTLE = "settle"
    COLLECT = "collect"
    CLOSED = "closed"
    HELD = "held"
    VOIDED = "voided"


S = RoundState
_BEFORE_SETTLE = [S.OPEN_FOR_BETS.value, S.BETS_CLOSED.value, S.DEALING.value, S.DECISIONS.value,
                  S.DEALER_REVEAL.value, S.HELD.value]
ROUND_STATES = [s.value for s in RoundState]
ROUND_TRANSITIONS = [
    {"trigger": "close_bets", "source": S.OPEN_FOR_BETS.value, "dest": S.BETS_CLOSED.value},
    {"trigger": "start_dealing", "source": S.BETS_CLOSED.value, "dest": S.DEALING.value},
    {"trigger": "dealing_done", "source": S.DEALING.value, "dest": S.DECISIONS.value},
    {"trigger": "decisions_done", "source": S.DECISIONS.value, "dest": S.DEALER_REVEAL.value},
    {"trigger": "settle", "source": S.DEALER_REVEAL.value, "dest": S.SETTLE.value},
    {"trigger": "collect", "source": S.SETTLE.value, "dest": S.COLLECT.value},
    {"trigger": "close", "source": [S.COLLECT.value, S.VOIDED.value], "dest": S.CLOSED.value},
    {"trigger": "hold", "source": _BEFORE_SETTLE[:-1] + [S.SETTLE.value, S.COLLECT.value], "dest": S.HELD.value},
    {"trigger": "void", "source": _BEFORE_SETTLE, "dest": S.VOIDED.value},
]


class RoundProcedureError(Exception):
    """A round step was attempted out of order."""


class RoundMachine:
    """One round's procedure. ``state`` is a :class:`RoundState` value.

    Call the step methods (:meth:`step`) in order; an out-of-order step raises
    :class:`RoundProcedureError`. ``hold_reason`` / ``void_reason`` record why.
    """

    def __init__(self, round_id: str) -> None:
        self.round_id = round_id
        self.state = S.OPEN_FOR_BETS.value
        self.hold_reason: str | None = None
        self.void_reason: str | None = None
        self._machine = Machine(
            model=self,
            states=ROUND_STATES,
            transitions=ROUND_TRANSITIONS,
            initial=S.OPEN_FOR_BETS.value,
            auto_transitions=False,
            queued=True,
            name=round_id,
        )

    @property
    def round_state(self) -> RoundState:
        return RoundState(self.state)

    @property
    def dealer_hand_sealed(self) -> bool:
        """True until every seat has decided (816a.1)."""
        return self.round_state in (S.OPEN_FOR_BETS, S.BETS_CLOSED, S.DEALING, S.DECISIONS, S.HELD, S.VOIDED)

    def step(self, trigger: str) -> None:
        """Fire ``trigger``; raises :class:`RoundProcedureError` if not allowed now."""
        was = self.state
        try:
            getattr(self, trigger)()
        except (MachineError, AttributeError):
            raise RoundProcedureError(f"round {self.round_id}: cannot {trigger} while {was}") from None

    def hold_for_supervisor(self, reason: str) -> None:
        """Hold the round (a fault or a custody violation) until a supervisor acts."""
        self.hold_reason = reason
        self.step("hold")

    def resume(self, state: str) -> None:
        """Go back to ``state``, one of the states before settlement, after a supervisor
        released the hold (the round goes on where it stood). Raises
        :class:`RoundProcedureError` for any other state."""
        if state not in _BEFORE_SETTLE[:-1]:
            raise RoundProcedureError(f"round {self.round_id}: cannot resume into {state}")
        self.hold_reason = None
        self._machine.set_state(state)

    def void_by_supervisor(self, reason: str) -> None:
        """Void the round before settle; the caller returns every wager."""
        if not reason.strip():
            raise RoundProcedureError("a void needs a reason")
        self.void_reason = reason
        self.step("void")
