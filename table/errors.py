"""The table controller's errors. Each message says what the operator must do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sealing import mask_cards

if TYPE_CHECKING:
    from .custody import CustodyViolation


class TableError(Exception):
    """Base of the controller's errors; the message says what the operator must do."""


class DeviceTimeout(TableError, TimeoutError):
    """A device did not report what the procedure expected in time."""


class DeviceFault(TableError):
    """A device reported a fault (jam, door open, shoe empty) or its link failed."""


class ShufflerStopped(DeviceFault):
    """The shuffler reported a fault (jam, door open) during a shuffle; the deck stays
    in it unverified and the shuffle is repeated once the shuffler is clear."""


class Sealed(TableError):
    """What was asked is sealed until the wagers it decides are final (58 Pa. Code 816a.1)."""


class SupervisorRequired(TableError):
    """The table waits for a supervisor, and no console is attached to ask one."""


class RoundHeld(TableError):
    """The round is held for a supervisor; ``violation`` is the custody rule broken.
    The message masks card faces (the round's hands are still sealed); the
    journal keeps the full detail."""

    def __init__(self, round_id: str, violation: "CustodyViolation | None", reason: str = "") -> None:
        super().__init__(f"round {round_id} held for a supervisor: {mask_cards(str(violation or reason))}")
        self.round_id = round_id
        self.violation = violation
        self.reason = reason or str(violation)


class RoundVoided(TableError):
    """A supervisor voided the round before settlement; every wager was returned."""

    def __init__(self, round_id: str, reason: str) -> None:
        super().__init__(f"round {round_id} voided by a supervisor: {reason}; wagers returned")
        self.round_id = round_id
        self.reason = reason
