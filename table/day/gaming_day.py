"""The table's gaming day by people: opening, shift change, fills, credits, closing, the drop.

What the rules ask (cited by section; texts in the project's reference folder):

* A table inventory slip, the chips on the table by denomination, at the
  opening, at each shift change and at the closing, signed by the dealer and a
  supervisor; fills (chips brought to the table) and credits (chips taken from
  it) signed by two people (COMAR 36.05.03.10).
* The statistical win of a table and game, by gaming day: closing inventory -
  opening inventory + credits - fills + drop, beside the drop, with the
  win-to-drop percentage (COMAR 36.05.03.25; K.A.R. 112-108-51). The drop is
  counted in the count room, after the table closed: a supervisor enters it
  (or it is imported), and until then the statistical win is not known.

This module is pure: :class:`TableDay` checks a procedure a person asks for and
returns the journal entry's body (kind :data:`ENTRY_KIND`); the conductor
journals it, then calls :meth:`TableDay.apply` (journal before act), and asks
:meth:`TableDay.check_may_deal` before it opens a round. :meth:`TableDay.replay`
rebuilds the state from the journal's entries after a restart. Who the two
people are (authenticated, with a dealer's and a supervisor's role) is for the
front door to prove; this module refuses one person signing twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Callable, Iterable, Mapping

#: The journal entry kind of every procedure here.
ENTRY_KIND = "gaming_day"
#: The procedures, in the words of the floor.
PROCEDURES = ("open", "shift_change", "fill", "credit", "close", "drop")
#: Procedures that carry a table inventory slip (chips by denomination).
INVENTORY_SLIPS = ("open", "shift_change", "close")
#: The largest count of chips of one denomination on one slip, and the largest amount (cents).
MAX_CHIPS = 100_000
MAX_AMOUNT_CENTS = 10_000_000_000
#: The chip denominations a slip may list, in cents ($0.25 to $100,000).
MAX_DENOMINATION_CENTS = 10_000_000

_PERSON_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")
#: a front door's own id for one ask of a procedure (its retries send the same id)
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}\Z")


def ask_digest(procedure: str, args: Mapping[str, Any], dealer: str, supervisor: str) -> str:
    """The fingerprint of one ask of a procedure (what was asked, as sent: procedure,
    slip, dealer, supervisor), 32 hex digits of SHA-256 over its canonical JSON: a
    retry of the same ask has the same one."""
    canon = json.dumps({"procedure": procedure, "slip": dict(args), "dealer": dealer, "supervisor": supervisor},
                       sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:32]


class ProcedureError(ValueError):
    """A procedure refused: ``code`` is ``"bad_request"`` (a malformed slip, naming
    the key) or ``"refused"`` (not now: the table is closed, already open, one
    person signing twice)."""

    def __init__(self, message: str, code: str = "bad_request") -> None:
        super().__init__(message)
        self.code = code


class TableClosed(ProcedureError):
    """A round asked for while the table is closed: no round is dealt on a closed table."""

    def __init__(self, message: str = "the table is closed: open it first (an opening inventory signed by "
                                       "the dealer and a supervisor, COMAR 36.05.03.10)") -> None:
        super().__init__(message, "refused")


def _person(value: Any, key: str) -> str:
    if not isinstance(value, str) or not _PERSON_RE.match(value):
        raise ProcedureError(f"{key} must name a person of the people file, got {value!r:.40}")
    return value


#: a gaming day as the slips and the count room write it: ASCII digits only (``\d`` takes any script's)
ISO_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
ASCII_DIGITS_RE = re.compile(r"[0-9]+")


def _cents(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_AMOUNT_CENTS:
        raise ProcedureError(f"{key} must be whole cents, 0..{MAX_AMOUNT_CENTS:,}, got {value!r:.40}")
    return value


@dataclass(frozen=True)
class Inventory:
    """Chips by denomination: ``chips`` maps a denomination in cents to how many chips.

    :meth:`parse` reads ``{"2500": 40, "500": 100}`` (keys: cents as text or int).
    Raises :class:`ProcedureError` naming the key for a denomination that is not
    a whole number of cents in 1..:data:`MAX_DENOMINATION_CENTS`, or a count
    that is not 0..:data:`MAX_CHIPS`."""

    chips: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any, key: str = "inventory") -> "Inventory":
        if not isinstance(value, Mapping) or len(value) > 64:
            raise ProcedureError(f"{key} must be an object of denomination (cents) -> chips, at most 64 lines")
        chips: dict[int, int] = {}
        for d, n in value.items():
            text = str(d)
            if not ASCII_DIGITS_RE.fullmatch(text) or len(text) > 9 or not 1 <= int(text) <= MAX_DENOMINATION_CENTS:
                raise ProcedureError(f"{key}: {text[:20]!r} is not a denomination in cents "
                                     f"(1..{MAX_DENOMINATION_CENTS:,})")
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_CHIPS:
                raise ProcedureError(f"{key}.{text}: a chip count is 0..{MAX_CHIPS:,}, got {n!r:.40}")
            if int(text) in chips:
                raise ProcedureError(f"{key}: denomination {text} listed twice")
            if n:
                chips[int(text)] = n
        return cls(dict(sorted(chips.items(), reverse=True)))

    @property
    def total(self) -> int:
        """The slip's value in cents."""
        return sum(d * n for d, n in self.chips.items())

    def to_record(self) -> dict[str, int]:
        """The journal's form: denomination (text, cents) -> chips, largest first."""
        return {str(d): n for d, n in self.chips.items()}


def statistical_win(opening: int, closing: int, fills: int, credits: int, drop: int) -> int:
    """The inventory-based win of a table, in cents: closing - opening + credits - fills
    + drop (COMAR 36.05.03.25; K.A.R. 112-108-51)."""
    return closing - opening + credits - fills + drop


@dataclass
class DayFigures:
    """What people entered for one gaming day: the inventories (cents), fills and credits
    (cents, summed), the drop (``None`` until entered) and the slips in order.

    A table may close and open again in one gaming day: ``opening`` and ``closing`` are the
    sums over its sessions (each opening slip and each closing slip), so closing - opening
    is the sum of each session's own change and the statistical win stays one formula. It
    is known only when every session of the day was opened and closed within it (a table
    already open when the day began, or still open, has no inventory change of its own)."""

    opening: int | None = None
    closing: int | None = None
    fills: int = 0
    credits: int = 0
    drop: int | None = None
    slips: list[dict[str, Any]] = field(default_factory=list)
    #: openings and closings seen; ``unpaired``: a close with no opening before it that day
    sessions_opened: int = 0
    sessions_closed: int = 0
    unpaired: bool = False
    #: drops entered again (``corrects`` an earlier slip), in words: a report flags them
    corrections: list[str] = field(default_factory=list)

    @property
    def statistical_win(self) -> int | None:
        """:func:`statistical_win` over the day's sessions, or ``None`` while an opening,
        a closing or the drop is not known (a session open across the day's start or end)."""
        if self.opening is None or self.closing is None or self.drop is None:
            return None
        if self.unpaired or self.sessions_opened != self.sessions_closed:
            return None
        return statistical_win(self.opening, self.closing, self.fills, self.credits, self.drop)

    @property
    def unknown_why(self) -> str | None:
        """Why :attr:`statistical_win` is not known (one phrase), or None when it is."""
        if self.unpaired:
            return "the table was open when the gaming day began (no opening that day)"
        if self.opening is None:
            return "no opening entered"
        if self.sessions_opened != self.sessions_closed or self.closing is None:
            return "the table was not closed (no closing inventory)"
        if self.drop is None:
            return "no drop entered"
        return None

    def add(self, body: Mapping[str, Any]) -> None:
        """Take one journaled procedure body into the figures."""
        p = body.get("procedure")
        self.slips.append(dict(body))
        total = body.get("total")
        if p == "open" and isinstance(total, int):
            self.opening = (self.opening or 0) + total
            self.sessions_opened += 1
        elif p == "close" and isinstance(total, int):
            if self.sessions_closed >= self.sessions_opened:
                self.unpaired = True  # the table was open when the day began
            self.closing = (self.closing or 0) + total
            self.sessions_closed += 1
        elif p == "fill":
            self.fills += body.get("amount", 0)
        elif p == "credit":
            self.credits += body.get("amount", 0)
        elif p == "drop":
            if "corrects" in body or self.drop is not None:
                before = f"${self.drop / 100:,.2f}" if isinstance(self.drop, int) else "none"
                amount = body.get("amount")
                now = f"${amount / 100:,.2f}" if isinstance(amount, int) else "?"
                self.corrections.append(f"drop slip {body.get('slip')} corrects slip {body.get('corrects', '?')} "
                                        f"({before} -> {now}, entered by {body.get('supervisor')})")
            self.drop = body.get("amount")


class TableDay:
    """The table's state between rounds: open or closed, the current shift, and the
    last inventory. ``table_id`` is written into every slip.

    The narrow interface the conductor calls, between rounds only:
    ``body = day.prepare(procedure, args, dealer=..., supervisor=...)`` (raises
    :class:`ProcedureError`), journal ``(ENTRY_KIND, body)``, then
    ``day.apply(body)``; before a round, ``day.check_may_deal()`` (raises
    :class:`TableClosed`)."""

    def __init__(self, table_id: str = "table", today: "Callable[[], str] | None" = None) -> None:
        self.table_id = table_id
        #: the table's current gaming day (``YYYY-MM-DD``) by its clock and ``[gaming_day]``; None
        #: (a bare TableDay, no clock): openings are not stamped with their day
        self.today = today
        #: the gaming days the table was opened on (stamped on each opening slip), and the slip of
        #: each gaming day's drop: a drop is entered only for a day opened, once (then corrected)
        self.opened_days: set[str] = set()
        self.drops: dict[str, int] = {}
        #: the gaming day of the last opening (a re-opening that day starts its next shift)
        self.shift_day: str | None = None
        self.is_open = False
        self.shift = 0
        self.slip_no = 0
        self.last_inventory: dict[str, int] | None = None
        #: the dealer who holds the table's current shift (opened it, or took it over), None when closed
        self.on_shift: str | None = None
        #: request id -> the journaled body it made (the front doors' retries, :meth:`repeated`)
        self.requests: dict[str, Mapping[str, Any]] = {}

    def repeated(self, request_id: str | None, procedure: str, args: Mapping[str, Any], *, dealer: str,
                 supervisor: str) -> Mapping[str, Any] | None:
        """The slip an earlier ask with ``request_id`` made, when this ask is a retry of it
        (its answer was lost: a dropped connection, a timeout), so the retry makes no second
        slip (a fill retried must not be two fills on the record, COMAR 36.05.03.10); None
        when ``request_id`` is None or new. Raises :class:`ProcedureError` (``bad_request``)
        for a malformed id, (``refused``) for an id already used by a different ask."""
        if request_id is None:
            return None
        if not isinstance(request_id, str) or not REQUEST_ID_RE.match(request_id):
            raise ProcedureError(f"request_id must be 1-64 of letters, digits, '_', '.', ':', '-' (starting with "
                                 f"a letter or digit), got {request_id!r:.40}")
        before = self.requests.get(request_id)
        if before is None:
            return None
        if before.get("request", {}).get("ask") != ask_digest(procedure, args, dealer, supervisor):
            raise ProcedureError(f"request_id {request_id} was already used for slip {before.get('slip')} "
                                 f"({before.get('procedure')}), a different ask: a new ask needs a new request_id",
                                 "refused")
        return before

    def check_may_deal(self) -> None:
        """Raises :class:`TableClosed` unless the table is open."""
        if not self.is_open:
            raise TableClosed()

    def prepare(self, procedure: str, args: Mapping[str, Any], *, dealer: str, supervisor: str,
                request_id: str | None = None) -> dict[str, Any]:
        """Check ``procedure`` (one of :data:`PROCEDURES`) with its ``args`` and the two
        people signing it; return the journal entry's body. ``request_id``: the front
        door's id of this ask (checked first with :meth:`repeated`); the body then keeps
        ``request`` (the id and :func:`ask_digest`) so a retry after a restart is known too.

        ``args``: ``inventory`` (denomination -> chips) for ``open``, ``shift_change``
        and ``close``; ``amount`` (cents) for ``fill``, ``credit`` and ``drop``; for a
        drop also ``gaming_day`` (``YYYY-MM-DD``, the day counted) and, from the count
        room's sheet, ``counted_by`` and ``verified_by`` (two people). ``dealer`` and
        ``supervisor``: the two people signing (two different people, COMAR
        36.05.03.10); for a shift change the incoming dealer is ``args["opener"]``.
        Raises :class:`ProcedureError` (``bad_request`` for a malformed slip,
        ``refused`` for one the table's state does not allow now)."""
        if procedure not in PROCEDURES:
            raise ProcedureError(f"unknown procedure {procedure!r:.40}; allowed: {', '.join(PROCEDURES)}")
        dealer = _person(dealer, "dealer")
        supervisor = _person(supervisor, "supervisor")
        if dealer == supervisor:
            raise ProcedureError(f"{dealer} cannot sign as both dealer and supervisor: a slip needs two people "
                                 "(COMAR 36.05.03.10)", "refused")
        if procedure == "open" and self.is_open:
            raise ProcedureError("the table is already open", "refused")
        if procedure in ("shift_change", "fill", "credit", "close") and not self.is_open:
            raise ProcedureError(f"the table is closed: a {procedure.replace('_', ' ')} needs an open table",
                                 "refused")
        if procedure == "drop" and self.is_open:
            raise ProcedureError("the drop is entered after the table closes (the count follows the close)",
                                 "refused")
        allowed = ({"inventory", "opener", "empty_confirmed"} if procedure in INVENTORY_SLIPS else
                   {"amount", "gaming_day", "counted_by", "verified_by"} if procedure == "drop" else {"amount"})
        extra = sorted(set(args) - allowed)
        if extra:
            raise ProcedureError(f"{procedure}: unknown key {extra[0]!r:.40}; allowed: {', '.join(sorted(allowed))}")
        body: dict[str, Any] = {"procedure": procedure, "slip": self.slip_no + 1, "dealer": dealer,
                                "supervisor": supervisor}
        if procedure in INVENTORY_SLIPS:
            inv = Inventory.parse(args.get("inventory"), "inventory")
            confirmed = args.get("empty_confirmed", False)
            if not isinstance(confirmed, bool):
                raise ProcedureError(f"{procedure}: empty_confirmed is true or false, got {confirmed!r:.40}")
            if inv.total == 0 and procedure in ("open", "close") and not confirmed:
                # a $0 slip is a slip typed without its chips: COMAR 36.05.03.10, .25 (the win counts them)
                raise ProcedureError(f"{procedure}: the inventory is empty ($0): if the table truly holds no "
                                     "chips, the supervisor confirms it (empty_confirmed: true)", "refused")
            body.update(inventory=inv.to_record(), total=inv.total)
            if inv.total == 0 and confirmed:  # journaled: the supervisor said the table held no chips
                body["empty_confirmed"] = True
            if procedure == "shift_change":
                opener = _person(args.get("opener"), "opener")
                if opener == supervisor:
                    raise ProcedureError("the incoming dealer cannot also sign as the supervisor", "refused")
                if opener == dealer:
                    raise ProcedureError(f"{opener} cannot hand the shift over to themself: the incoming dealer "
                                         "is another dealer", "refused")
                if self.on_shift is not None and dealer != self.on_shift:
                    raise ProcedureError(f"the outgoing dealer signs the shift change: {self.on_shift} holds this "
                                         f"shift, not {dealer}", "refused")
                body.update(shift=self.shift + 1, opener=opener)
        else:
            if procedure in ("fill", "credit") and self.on_shift is not None and dealer != self.on_shift:
                # the dealer who holds the shift countersigns what comes to and goes from the table
                # (COMAR 36.05.03.10): not a dealer off shift, nor one never at this table
                raise ProcedureError(f"the {procedure} is countersigned by the dealer who holds the shift: "
                                     f"{self.on_shift}, not {dealer}", "refused")
            body["amount"] = _cents(args.get("amount"), "amount")
            if procedure in ("fill", "credit") and body["amount"] == 0:
                raise ProcedureError(f"{procedure}: amount must be more than 0 cents: a slip for no chips moves "
                                     "nothing")
            if procedure == "drop":
                self._drop_fields(args, body)
        if procedure == "open" and self.today is not None:
            body["gaming_day"] = self.today()  # the day opened: a drop is entered only for such a day
        if request_id is not None:
            if not isinstance(request_id, str) or not REQUEST_ID_RE.match(request_id) or request_id in self.requests:
                raise ProcedureError(f"request_id {request_id!r:.40}: malformed or already used (TableDay.repeated "
                                     "answers a retry)")
            body["request"] = {"id": request_id, "ask": ask_digest(procedure, args, dealer, supervisor)}
        return body

    def _drop_fields(self, args: Mapping[str, Any], body: dict[str, Any]) -> None:
        """A drop slip's own fields into ``body``: the gaming day counted (one that has begun
        and was opened: :meth:`_check_drop_day`), ``corrects`` when that day's drop was
        entered before, and the count room's two people. Raises :class:`ProcedureError`."""
        day = args.get("gaming_day")
        try:
            if not isinstance(day, str) or not ISO_DAY_RE.fullmatch(day):
                raise ValueError
            date.fromisoformat(day)
        except ValueError:
            raise ProcedureError(f"drop: gaming_day must be the day counted, a date YYYY-MM-DD, got "
                                 f"{day!r:.40}") from None
        self._check_drop_day(day)
        body["gaming_day"] = day
        if day in self.drops:  # entered again: a correction of the earlier slip, never a silent replace
            body["corrects"] = self.drops[day]
        if "counted_by" in args or "verified_by" in args:
            # the count room's two people who signed the count (an imported count sheet)
            counted = _person(args.get("counted_by"), "counted_by")
            verified = _person(args.get("verified_by"), "verified_by")
            if counted.casefold() == verified.casefold():  # 'C-1' and 'c-1' are one person
                raise ProcedureError(f"{counted} cannot both count and verify the drop: two people",
                                     "refused")
            body.update(counted_by=counted, verified_by=verified)

    def _check_drop_day(self, day: str) -> None:
        """A drop is counted from a gaming day that has begun and on which the table was
        opened (COMAR 36.05.03.25: the drop of the table's gaming day, counted after its
        close): a day to come, or one the table never opened (1970-01-01, 2099-12-31, a
        day it stayed closed), has no drop box of this table's. Raises :class:`ProcedureError`
        (``refused``). A bare TableDay that knows neither its day nor any opening day
        (no clock, a record older than the stamp) takes the day as given."""
        today = self.today() if self.today is not None else None
        if today is not None and day > today:
            raise ProcedureError(f"drop: gaming day {day} has not begun (today is {today}): a drop is counted "
                                 "after the day's close", "refused")
        if (today is not None or self.opened_days) and day not in self.opened_days:
            recent = ", ".join(sorted(self.opened_days)[-3:]) or "none"
            raise ProcedureError(f"drop: the table was not opened on gaming day {day} (days opened, latest: "
                                 f"{recent}): a drop is for a day the table was open", "refused")

    def history(self) -> dict[str, Any]:
        """What a new gaming day's segment carries of the days before it: ``{"opened":
        [days], "drops": {day: slip}}`` (the drop rules need them past the day's close)."""
        return {"opened": sorted(self.opened_days), "drops": dict(sorted(self.drops.items()))}

    def take_history(self, history: Any) -> None:
        """Take what :meth:`history` gave (carried by a segment; ignored when malformed)."""
        if not isinstance(history, Mapping):
            return
        self.opened_days.update(d for d in history.get("opened", ()) if isinstance(d, str) and ISO_DAY_RE.fullmatch(d))
        drops = history.get("drops")
        if isinstance(drops, Mapping):
            self.drops.update({d: n for d, n in drops.items() if isinstance(d, str) and isinstance(n, int)})

    def apply(self, body: Mapping[str, Any]) -> None:
        """Take a journaled procedure into the state (after it is journaled)."""
        p = body.get("procedure")
        self.slip_no = max(self.slip_no, int(body.get("slip", 0)))
        if p in ("open", "drop") and isinstance(body.get("gaming_day"), str):
            if p == "open":
                self.opened_days.add(body["gaming_day"])
            else:
                self.drops[body["gaming_day"]] = int(body.get("slip", 0))
        if p == "open":
            # a table opened again in the gaming day it closed in starts the day's next shift (the
            # report numbers shifts the same way: table.day.day_report.Counter.shift_of)
            opened_on = body.get("gaming_day") if isinstance(body.get("gaming_day"), str) else None
            again = opened_on is not None and opened_on == self.shift_day
            self.is_open, self.shift = True, (self.shift + 1 if again else 1)
            self.shift_day = opened_on
            self.on_shift = body.get("dealer") if isinstance(body.get("dealer"), str) else None
        elif p == "shift_change":
            self.shift = int(body.get("shift", self.shift + 1))
            self.on_shift = body.get("opener") if isinstance(body.get("opener"), str) else None
        elif p == "close":
            self.is_open = False
            self.on_shift = None
        if p in INVENTORY_SLIPS:
            self.last_inventory = dict(body.get("inventory", {}))
        request = body.get("request")
        if isinstance(request, Mapping) and isinstance(request.get("id"), str):
            self.requests[request["id"]] = body

    @classmethod
    def replay(cls, bodies: Iterable[Mapping[str, Any]], table_id: str = "table", *, history: Any = None,
               today: "Callable[[], str] | None" = None) -> "TableDay":
        """The state after the journaled procedure bodies ``bodies``, in order (recovery);
        ``history``: what the segment carried of the days before it (:meth:`history`)."""
        day = cls(table_id, today)
        day.take_history(history)
        for b in bodies:
            day.apply(b)
        return day


# -- the count room's drop, imported from its CSV --------------------------------------------------

#: the count room's CSV columns, in this order (docs/reporting.md)
DROP_COLUMNS = ("gaming_day", "table_id", "amount_cents", "counted_by", "verified_by")
#: rows a count-room file may hold (a year of days for one table, with room)
MAX_DROP_ROWS = 1000
def count_room_problem(people: Mapping[str, Any], counted_by: Any, verified_by: Any) -> str | None:
    """Why the count room's two people of a drop slip are not two people of the people file
    (``people``: id -> a person with a ``role``), compared case-folded ('C-1' and 'c-1' are
    one person), or None. A seat's terminal account is no one of the count room."""
    folded = {str(k).casefold(): v for k, v in people.items()}
    found = []
    for key, who in (("counted_by", counted_by), ("verified_by", verified_by)):
        person = folded.get(str(who).casefold())
        role = getattr(getattr(person, "role", None), "value", None)
        if person is None or role in (None, "seat"):
            return f"drop: {key} {str(who)[:40]!r} is no person of the people file with a role"
        found.append(str(getattr(person, "id", who)))
    if found[0].casefold() == found[1].casefold():
        return f"drop: {found[0]} cannot both count and verify the drop: two people"
    return None


#: the largest count-room file read (bytes): 1,000 rows are ~100 KB; a larger file is refused whole,
#: never read in part
MAX_DROP_FILE_BYTES = 1 << 20


class DropFileError(ValueError):
    """A count-room CSV refused: ``file``, ``line`` (1-based, the header is line 1),
    ``column`` (None: the whole line) and the rule broken, all in the message."""

    def __init__(self, file: str, line: int, column: str | None, why: str) -> None:
        where = f"{file}:{line}" + (f": column {column}" if column else "")
        super().__init__(f"{where}: {why}")
        self.file, self.line, self.column = file, line, column


@dataclass(frozen=True)
class DropRow:
    """One gaming day's drop as the count room counted it: the slip of a ``drop``
    procedure (:meth:`slip`), from ``line`` of the file."""

    line: int
    gaming_day: str
    amount_cents: int
    counted_by: str
    verified_by: str

    def slip(self) -> dict[str, Any]:
        """The ``drop`` slip (:meth:`TableDay.prepare` args)."""
        return {"amount": self.amount_cents, "gaming_day": self.gaming_day, "counted_by": self.counted_by,
                "verified_by": self.verified_by}


def read_drop_csv(text: str, file: str, table_id: str) -> list[DropRow]:
    """Every row of a count-room CSV (header :data:`DROP_COLUMNS`, one row a gaming day),
    checked before any is used: a date ``YYYY-MM-DD`` that is one, this table's id
    (a row for another table is refused, not skipped), whole cents
    0..:data:`MAX_AMOUNT_CENTS`, two different people's ids, each gaming day once.
    Raises :class:`DropFileError` naming the file, the line and the column."""
    import csv
    import io

    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise DropFileError(file, 1, None, f"empty: the header is {','.join(DROP_COLUMNS)}") from None
    except csv.Error as exc:
        raise DropFileError(file, 1, None, f"not CSV: {exc}") from None
    if [h.strip().lstrip("\ufeff") for h in header] != list(DROP_COLUMNS):
        raise DropFileError(file, 1, None, f"the header must be {','.join(DROP_COLUMNS)}, got "
                                           f"{','.join(header)[:120]!r}")
    rows: list[DropRow] = []
    seen: dict[str, int] = {}
    try:
        ended = reader.line_num  # the line the record before ended on: a record starts on the next one
        for cells in reader:
            line, ended = ended + 1, reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(rows) >= MAX_DROP_ROWS:
                raise DropFileError(file, line, None, f"more than {MAX_DROP_ROWS} rows")
            if len(cells) != len(DROP_COLUMNS):
                raise DropFileError(file, line, None, f"{len(cells)} cells; a row has {len(DROP_COLUMNS)}: "
                                                      f"{','.join(DROP_COLUMNS)}")
            for col, cell in zip(DROP_COLUMNS, cells):
                if any(ord(ch) < 32 or ord(ch) == 127 for ch in cell):
                    raise DropFileError(file, line, col, f"{cell[:20]!r} holds a line break or control character")
            day, tid, amount, counted, verified = (c.strip() for c in cells)
            try:
                if not ISO_DAY_RE.fullmatch(day):
                    raise ValueError
                date.fromisoformat(day)
            except ValueError:
                raise DropFileError(file, line, "gaming_day", f"{day[:20]!r} is not a date YYYY-MM-DD") from None
            if tid != table_id:
                raise DropFileError(file, line, "table_id", f"{tid[:64]!r} is another table's: this is "
                                                            f"{table_id} (import each table's rows at that table)")
            if not ASCII_DIGITS_RE.fullmatch(amount) or len(amount) > 11 or int(amount) > MAX_AMOUNT_CENTS:
                raise DropFileError(file, line, "amount_cents", f"{amount[:20]!r} is not whole cents, "
                                                                f"0..{MAX_AMOUNT_CENTS:,}")
            for col, who in (("counted_by", counted), ("verified_by", verified)):
                if not _PERSON_RE.match(who):
                    raise DropFileError(file, line, col, f"{who[:64]!r} is not a person's id")
            if counted.casefold() == verified.casefold():  # "C-1" and "c-1" are one person
                raise DropFileError(file, line, "verified_by", f"{counted} cannot both count and verify: "
                                                               "two people")
            if day in seen:
                raise DropFileError(file, line, "gaming_day", f"{day} is also on line {seen[day]}: one drop a "
                                                              "gaming day")
            seen[day] = line
            rows.append(DropRow(line, day, int(amount), counted, verified))
    except csv.Error as exc:
        raise DropFileError(file, reader.line_num, None, f"not CSV: {exc}") from None
    if not rows:
        raise DropFileError(file, 2, None, "no row: nothing to import")
    return rows
