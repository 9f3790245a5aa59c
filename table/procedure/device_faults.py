"""Device faults a person can fix, ridden through: never an exit while someone can fix them.

A jam, an open door, a garbled or lost reply, a pulled cable, a power cycle, a
driver that raises: the table holds what is in play, says on every screen and
the terminal what to do (an alarm and what it waits for), journals each step
(``device_fault`` entries: ``held``, then ``back`` with the device's status),
waits for the device to answer again (its link re-identifies it, SPEC §6.1,
§6.6), reads its status, and the caller reconciles and goes on. In service mode
(a console attached: people can act) the table waits as long as it takes; on a
bench with ``--rounds`` and nobody to ask it waits up to
:attr:`~table.procedure.state.TableTiming.fault_deadline_s` and then raises
:class:`~table.errors.DeviceFault` saying so (docs/device-faults.md).

Two small objects:

* :class:`GuardedDriver`: a driver as the table calls it. A driver plugin is
  outside input: whatever it raises outside the contract's error tree (a
  ``ValueError`` from ``status()``), or a reply that is not a
  :class:`~protocols.messages.StatusReply`, becomes :class:`DriverFailed`, a
  :class:`~firmware_bridge.errors.LinkError`, so it is one more device fault
  and never a crash mid-round (docs/drivers.md, "The contract").
* :class:`RideThrough`: the wait itself (:meth:`RideThrough.call` a device
  request until it is answered; :meth:`RideThrough.until_clear` a fault the
  device reports in its status).

May touch: the journal (``device_fault`` entries), the alarms, the console's
expectation, the devices' status. Never custody or a round's cards: the parts
that call it reconcile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

import structlog

from devices.apart.wire import DriverProcessFailed, DriverRaised
from devices.contract import Capabilities, LinkError, RequestRefused
from protocols.messages import DeviceState, NakCode, ShufflerFaultCode, StatusReply

from ..console import Expectation
from ..errors import DeviceFault, DeviceTimeout, TableError
from ..sealing import mask_cards

if TYPE_CHECKING:
    from ..console import Console

log = structlog.get_logger("table")

T = TypeVar("T")


class DriverFailed(LinkError):
    """A driver raised outside the contract's error tree (``LinkError``), or answered
    with something that is not the contract's reply: a device fault like any other."""


class GuardedDriver:
    """``driver`` as the table calls it: :meth:`status` and :meth:`shuffle` raise only
    :class:`LinkError` (a driver's own exception becomes :class:`DriverFailed`, naming
    the driver and the exception's type; its text may name a card, so it is masked).
    Everything else (``link``, ``capabilities``, ``driver_name``, ``close``) is the
    driver's own. ``inner``: the driver itself."""

    def __init__(self, driver: Any, kind: str) -> None:
        self.inner = driver
        self.kind = kind

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _failed(self, call: str, exc: BaseException) -> DriverFailed:
        name = getattr(self.inner, "driver_name", "spec")
        return DriverFailed(f"the {self.kind}'s driver {name!r} failed in {call}(): {type(exc).__name__}: "
                            f"{mask_cards(str(exc))[:200]}")

    def status(self) -> StatusReply:
        """The device's status (:class:`StatusReply`). Raises :class:`LinkError`."""
        try:
            reply = self.inner.status()
        except LinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin is outside input: any failure is a device fault
            raise self._failed("status", exc) from exc
        if not isinstance(reply, StatusReply):
            raise DriverFailed(f"the {self.kind}'s driver answered status() with a {type(reply).__name__}, "
                               "not a StatusReply")
        return reply

    def shuffle(self) -> None:
        """Start a shuffle. Raises :class:`LinkError` (:class:`RequestRefused` with the NAK code)."""
        try:
            self.inner.shuffle()
        except LinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - as status()
            raise self._failed("shuffle", exc) from exc

    @property
    def capabilities(self) -> Capabilities:
        """What the driver declared (docs/drivers.md, "Capabilities"), checked by :func:`guarded`."""
        caps: Capabilities = self.inner.capabilities
        return caps


def guarded(driver: Any, kind: str) -> Any:
    """``driver`` wrapped once in a :class:`GuardedDriver`. Raises :class:`TableError` for
    a driver that declares no :class:`~devices.contract.Capabilities`: the table never
    assumes what a device provides (a driver opened by ``devices.plugins.open_driver``
    carries its plugin's declaration; docs/drivers.md, "Capabilities")."""
    if isinstance(driver, GuardedDriver):
        return driver
    caps = getattr(driver, "capabilities", None)
    if not isinstance(caps, Capabilities):
        name = getattr(driver, "driver_name", type(driver).__name__)
        raise TableError(f"the {kind}'s driver {name!r} declares no capabilities (a {type(caps).__name__}): "
                         "the table does not guess what a device provides (docs/drivers.md, 'Capabilities')")
    return GuardedDriver(driver, kind)


def what_to_do(which: str, exc: BaseException | None, status: StatusReply | None = None) -> str:
    """What people must do about a device fault, in the words the screens show after
    "The table waits for ...". ``exc``: what the request raised; ``status``: the
    device's own status when it reports a fault (SPEC §4.1: the active fault code)."""
    code = getattr(exc, "code", None)
    fault = status.fault if status is not None and status.state is DeviceState.FAULT else None
    if code == NakCode.DOOR_OPEN or fault == ShufflerFaultCode.DOOR_OPEN:
        return f"the dealer to close the {which}'s door (the table goes on by itself once it is closed)"
    if code == NakCode.JAMMED or fault == ShufflerFaultCode.JAM:
        return (f"the dealer to clear the jam in the {which} and close its door (the table goes on by itself "
                "once it is clear)")
    if fault is not None:
        return f"the dealer to clear the {which}'s fault (code {fault}) (the table goes on by itself once it is clear)"
    if code == NakCode.BUSY:
        return f"the {which} to finish what it is doing"
    if isinstance(exc, (DriverFailed, DriverRaised, DriverProcessFailed)):  # a driver apart too (docs/drivers.md)
        return (f"the {which} to answer again (its driver failed): check the {which}, switch it off and on; "
                "call a technician if it stays")
    return (f"the {which} to answer again (its link is down or its replies are garbled): check its cable and "
            "power; the table goes on by itself once it answers")


class RideThrough:
    """Waits out device faults people can fix (module docstring). ``state`` (a
    ``TableState``), ``devices`` (``TableDevices``), ``intake`` (``DeviceIntake``),
    ``console``: the table's parts (events taken meanwhile go through the
    intake, so link notices are journaled and a device's re-identification recorded)."""

    #: how often a device that does not say when it is fixed (a door closed, a jam
    #: cleared: no event for either, SPEC §4.2) is asked its status again (s, table clock)
    RECHECK_S = 1.0

    def __init__(self, state: Any, devices: Any, intake: Any, console: "Console") -> None:
        # (the parts are duck-typed here: state.py wraps its drivers with this module)
        self.t = state
        self.d = devices
        self.intake = intake
        self.console = console

    @property
    def deadline_s(self) -> float | None:
        """How long a fault is waited out: None (for ever) when people can act (a console
        attached: service mode), else the bench's documented deadline."""
        return None if self.console.attached else self.d.timing.fault_deadline_s

    def driver(self, which: str) -> Any:
        return self.d.shuffler if which == "shuffler" else self.d.shoe

    # -- the two waits -------------------------------------------------------------------------

    def call(self, which: str, fn: Callable[[], T], what: str) -> T:
        """``fn()`` (a request to the ``which`` device for ``what``), asked again after each
        fault is cleared, until it is answered. A refusal the device cannot clear by a
        person's hand (``NO_DECK``, an unknown request) is raised as it was."""
        while True:
            try:
                return fn()
            except RequestRefused as exc:
                if exc.code not in (NakCode.DOOR_OPEN, NakCode.JAMMED, NakCode.BUSY):
                    raise
                self.wait_out(which, exc, what)
            except LinkError as exc:
                self.wait_out(which, exc, what)

    def until_clear(self, which: str, why: str, what: str) -> StatusReply:
        """The device reported a fault (``why``: a jam event): wait until its status shows
        it clear (SPEC §4.1), saying what to do meanwhile. Returns the status then."""
        status: StatusReply = self.call(which, lambda: self.driver(which).status(), what)
        if status.state is not DeviceState.FAULT:
            return status
        return self.wait_out(which, None, what, why=why, status=status)

    def wait_out(self, which: str, exc: BaseException | None, what: str, *, why: str = "",
                 status: StatusReply | None = None) -> StatusReply:
        """Hold for a fault of ``which`` (``exc``: what a request raised; ``status``: the
        fault it reports): journal it, raise the alarm, say what to do; then wait, taking
        the devices' events, until the device answers its status with no fault; journal
        that and clear the alarm. Returns the status read. Raises :class:`DeviceFault`
        past :attr:`deadline_s` (a bench only)."""
        reason = mask_cards(why or (str(exc) if exc is not None else f"the {which} reports a fault"))
        todo = what_to_do(which, exc, status)
        key = f"fault:{which}"
        self.t.record("device_fault", step="held", source=which, reason=reason, waiting_for=todo, during=what,
                      round_id=self.t.round.round_id if self.t.round else None)
        log.warning("device_fault_held", source=which, reason=reason, during=what)
        self.t.alarms.sound("device_fault", f"the {which}: {reason}; the table waits for {todo}", key=key)
        self.t.publish("device_fault", source=which, reason=reason, waiting_for=todo)
        r = self.t.round
        before = self.console.expectation
        self.console.expect(Expectation("fix_device", todo, "dealer", (), round_id=r.round_id if r else None))
        clock = self.d.timing.clock
        limit = self.deadline_s
        ends = None if limit is None else clock.monotonic() + limit
        try:
            while True:
                self._pause()
                now: StatusReply | None = None
                if self.driver(which).link.alive:  # a link down is not asked (its request would wait for it)
                    try:
                        now = self.driver(which).status()
                    except LinkError as again:
                        exc = again
                if now is not None and now.state is not DeviceState.FAULT:
                    break
                if now is not None:
                    new = what_to_do(which, None, now)
                    if new != todo:  # the fault changed (the door closed on a jam): say the new one
                        todo = new
                        self.console.expect(Expectation("fix_device", todo, "dealer", (),
                                                        round_id=r.round_id if r else None))
                if ends is not None and clock.monotonic() >= ends:
                    self.t.record("device_fault", step="gave_up", source=which, after_s=limit)
                    raise DeviceFault(f"the {which} was not back within {limit:g} s ({reason}): a bench run with "
                                      "--rounds and nobody to ask gives up past this deadline (docs/device-faults.md); "
                                      "in service mode the table waits for people to fix it")
        finally:
            if self.console.expectation is not None and self.console.expectation.action == "fix_device":
                self.console.expect(before if before is not None and before.action != "reconnect" else None)
        self.t.record("device_fault", step="back", source=which, state=now.state.name.lower(), cards=now.cards,
                      back_colour=str(now.back_colour))
        log.info("device_fault_back", source=which)
        self.t.alarms.clear(key)
        self.t.publish("device_back", source=which)
        return now

    def _pause(self) -> None:
        """Wait :attr:`RECHECK_S` on the devices' event queue (never a blind sleep): link
        notices are journaled as they come (a reconnect, a reboot). A device event that
        comes meanwhile is applied to custody as any step would (the intake)."""
        try:
            self.intake.expect(_Never, self.RECHECK_S, "a device fault to be cleared")
        except (DeviceTimeout, DeviceFault):
            return


class _Never:
    """No event is of this type: :meth:`RideThrough._pause` only takes events in."""
