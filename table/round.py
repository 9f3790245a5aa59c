"""The round procedure machine (``transitions``, states and transitions as data).

Open for bets → bets closed → dealing → decisions → dealer reveal → settle →
collect → closed. The dealer's hand stays sealed until every seat has decided
(58 Pa. Code 816a.1: nobody sees an outcome before the wager it decides is
final). A supervisor may void a round, with a reason, any time before settle;
wagers are then returned. A fault holds the round for a supervisor.

:class:`HeldRound` is a round held for a supervisor as the table keeps it
(the procedure's shared state) and as a checkpoint journals it
(:meth:`HeldRound.to_dict`, :meth:`HeldRound.from_dict`; docs/journal.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

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
#: the round machine's transitions, as ``transitions`` reads them (trigger, source, dest)
ROUND_TRANSITIONS: list[dict[str, Any]] = [
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


#: the states a held round may resume into (before settlement, not held)
RESUMABLE = tuple(RoundState(s) for s in _BEFORE_SETTLE[:-1])


@dataclass(frozen=True)
class VoidRequest:
    """A first supervisor's void of a round whose decisions are final, waiting for a
    second supervisor to confirm it (the two-person rule; 58 Pa. Code 816a.1).

    ``supervisor``: who asked; ``reason``: what they wrote; ``by``: the person as
    journaled (``{"role", "id"}``), None when the command named nobody."""

    supervisor: str | None
    reason: str | None
    by: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The journaled form: ``{"supervisor", "reason", "by"}``."""
        return {"supervisor": self.supervisor, "reason": self.reason, "by": self.by}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "VoidRequest":
        """The journaled form back (:meth:`to_dict`); keys missing read as None."""
        by = d.get("by")
        return cls(d.get("supervisor"), d.get("reason"), by if isinstance(by, dict) else None)


@dataclass
class HeldRound:
    """A round held for a supervisor (a broken custody rule, a device fault, a restart,
    a void waiting for its second supervisor): what the table keeps of it until the
    supervisors resolve it (docs/decisions/0002-held-rounds-wait-for-a-supervisor.md).

    ``round_id``, ``deck_id``, ``number`` (as people count rounds; None when the
    journal did not say); ``reason`` (card faces masked); ``settled``: its results
    were recorded and stand (816a.1); ``placed``: cents each seat had placed, by
    seat number as text (what a void returns); ``cause``: ``custody``, ``device``,
    ``restart`` or ``void_request`` (a device or a restart may be released);
    ``decisions_final``: a void needs a second supervisor; ``open_seq``: the seq of
    its ``open`` entry (where a rebuild reads it from); ``hold_from``: the state it
    was held in (what a release resumes; not journaled, a rebuild finds it);
    ``void_request``: a first supervisor's void waiting for a second."""

    round_id: str
    deck_id: str | None
    reason: str
    number: int | None
    settled: bool
    placed: dict[str, int]
    cause: str
    decisions_final: bool
    open_seq: int | None = None
    hold_from: RoundState | None = None
    void_request: VoidRequest | None = None

    @property
    def said(self) -> str:
        """The round as people name it: ``round 12`` (its number), else its id."""
        return f"round {self.number}" if self.number is not None else f"round {self.round_id}"

    @property
    def releasable(self) -> bool:
        """Held by a device or a restart, not a broken rule: a supervisor may release it."""
        return self.cause in ("device", "restart")

    def to_dict(self) -> dict[str, Any]:
        """The form a checkpoint journals (``state.held``): every field but ``hold_from``;
        ``open_seq`` and ``void_request`` only when there is one."""
        d: dict[str, Any] = {"round_id": self.round_id, "deck_id": self.deck_id, "settled": self.settled,
                             "reason": self.reason, "number": self.number, "placed": dict(self.placed),
                             "cause": self.cause, "decisions_final": self.decisions_final}
        if self.open_seq is not None:
            d["open_seq"] = self.open_seq
        if self.void_request is not None:
            d["void_request"] = self.void_request.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HeldRound":
        """A checkpoint's ``state.held`` back (:meth:`to_dict`). Raises :class:`KeyError`
        when ``round_id`` is missing."""
        request = d.get("void_request")
        open_seq = d.get("open_seq")
        return cls(str(d["round_id"]), d.get("deck_id"), str(d.get("reason") or ""), d.get("number"),
                   bool(d.get("settled")), dict(d.get("placed") or {}), str(d.get("cause") or "restart"),
                   bool(d.get("decisions_final")), int(open_seq) if open_seq is not None else None,
                   void_request=VoidRequest.from_dict(request) if isinstance(request, dict) and request else None)


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

    def resume(self, state: RoundState | str) -> None:
        """Go back to ``state``, one of the states before settlement (:data:`RESUMABLE`),
        after a supervisor released the hold (the round goes on where it stood). Raises
        :class:`RoundProcedureError` for any other state."""
        value = state.value if isinstance(state, RoundState) else state
        if value not in _BEFORE_SETTLE[:-1]:
            raise RoundProcedureError(f"round {self.round_id}: cannot resume into {value}")
        self.hold_reason = None
        self._machine.set_state(value)

    def void_by_supervisor(self, reason: str) -> None:
        """Void the round before settle; the caller returns every wager."""
        if not reason.strip():
            raise RoundProcedureError("a void needs a reason")
        self.void_reason = reason
        self.step("void")
