"""The table's figures per shift, gaming day, month to date and year to date.

Read from the journal alone (its ``round``, ``incident``, ``supervisor``,
``link`` and ``gaming_day`` entries), so a report is a re-count anyone with the
journal can make:

* per period: rounds settled, hands (seats dealt), decisions (play, fold),
  handle and the house's result by wager (ante, play, ante bonus, Pair Plus,
  Six Card Bonus, progressive), voids, incidents, deck changes and device
  downtime;
* the settled win (the sum of the journal's settlements), the expected win
  given the decisions and the theoretical win (:mod:`table.rules.expectation`),
  each with its 95 % band, and a flag when the settled win falls outside one
  (investigating fluctuations outside the 95 % interval: COMAR 36.05.03.25 B(2);
  K.A.R. 112-108-51);
* the statistical win (closing - opening + credits - fills + drop,
  :mod:`table.day.gaming_day`) once people have entered the inventories and the
  drop, else "not known"; a statistical win that differs from the settled win
  is flagged (chips gone from the table, or a round paid other than settled).

A round belongs to the gaming day and shift its settlement falls in
(``[gaming_day]`` in the table config: start hour, time zone, shift length; a
shift change journaled by people ends a shift instead of the clock).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

from protocols.cards import Card

from .calendar import Calendar
from .gaming_day import ENTRY_KIND, DayFigures
from ..in_force import ENTRY_KIND as IN_FORCE_KIND, METER_KIND, InForce, InForceError, Pricing, read_in_force, read_meter
from ..journal import Journal
from ..rules.expectation import (WAGER_KINDS, Expectation, but_six_card, round_expectation, round_theoretical,
                                total)
from ..rules.profiles import PENNSYLVANIA, RulesProfile
from ..rules.settlement import SeatRound, SettlementError, Tables, all_slots, settle_seat
from ..rules.wagers import Decision, Wagers

KINDS = ("shift", "day", "month", "year")
#: z for a two-sided 95 % band.
Z95 = Fraction(196, 100)


class ReportError(ValueError):
    """The journal cannot be reported on as asked: an entry that does not read, paytables
    that do not settle the journal's rounds as it recorded them, a period with no record."""


@dataclass(frozen=True)
class RoundRecord:
    """One settled round as the journal holds it: ``seats`` (wagers, decision, cards),
    ``dealer`` (its cards), ``results`` (seat -> the journal's settlement of the seat)
    and ``at`` (when its bets closed, UTC, else when it opened, else when it settled: the
    shift it counts in is the one it was played in). A round counts in the gaming day of
    the journal segment that holds it (``day``; the day's close waits for the round in
    play), in a journal kept whole in the day ``at`` falls in."""

    number: int
    round_id: str
    at: datetime
    seats: tuple[SeatRound, ...]
    dealer: tuple[Card, ...]
    results: dict[int, dict[str, Any]]
    #: the gaming day of the journal segment that holds it (None: a journal kept whole; then
    #: the day ``at`` falls in)
    day: date | None = None
    #: what was in force when it was settled (the journal's last ``in_force`` entry before
    #: its settlement; None: a journal older than that record, :mod:`table.in_force`)
    in_force: InForce | None = None
    #: the progressive meter reading it was settled against (its settlement's, else the last
    #: reading journaled before it; None: none recorded)
    meter_cents: int | None = None


@dataclass
class JournalFacts:
    """What a report counts, read once from a journal (:func:`read_journal`)."""

    table_id: str
    rounds: list[RoundRecord] = field(default_factory=list)
    voids: list[datetime] = field(default_factory=list)
    incidents: list[datetime] = field(default_factory=list)
    deck_changes: list[datetime] = field(default_factory=list)
    downtime: list[tuple[str, datetime, datetime]] = field(default_factory=list)
    #: (when, the slip's body, the gaming day of the segment holding it or None)
    procedures: list[tuple[datetime, dict[str, Any], date | None]] = field(default_factory=list)
    last_at: datetime | None = None
    #: gaming days a folder of archives lacks (its segments do not chain: :func:`read_days`):
    #: (the day, YYYY-MM-DD, and what says so)
    missing_days: list[tuple[str, str]] = field(default_factory=list)
    #: archived gaming days that do not read (an edited or damaged archive): (the day, why);
    #: their rounds are in no figure (:func:`read_days`)
    bad_days: list[tuple[str, str]] = field(default_factory=list)


_CARDS = {str(c): c for c in (Card.from_index(i) for i in range(52))}


def _card(text: str) -> Card:
    """A journaled card text (``"As"``) as a :class:`Card` (a look-up: a day has ~40,000)."""
    c = _CARDS.get(text)
    return c if c is not None else Card.parse(text)


def _when(ts: str) -> datetime:
    t = datetime.fromisoformat(ts)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def read_journal(journal: Journal) -> JournalFacts:
    """The facts of ``journal`` (open, read-only is enough). Raises :class:`ReportError`
    for a round entry that does not read (naming its seq)."""
    try:
        return _read_journal(journal)
    except ReportError:
        raise
    except UNREADABLE as exc:
        raise unreadable(journal, exc) from None


#: what reading an entry edited into something that is not a journal entry's JSON raises
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, OverflowError)


def unreadable(journal: Journal, exc: BaseException) -> ReportError:
    """The :class:`ReportError` for an entry of ``journal`` that does not read (``exc``,
    one of :data:`UNREADABLE`): named, never a crash."""
    return ReportError(f"{journal.path}: an entry does not read ({type(exc).__name__}: {exc}): "
                       "the journal was edited or damaged (tablectl audit verify names the entry)")


def _read_journal(journal: Journal) -> JournalFacts:
    reader = FactsReader(journal.table_id, segment_day(journal))
    reader.read(journal)
    return reader.facts()


class FactsReader:
    """A report's reading of one journal segment, kept: :meth:`read` reads the entries
    committed after the last it read (each once), :meth:`facts` gives what a report counts
    as :func:`read_journal` of the whole segment would (a fresh :class:`JournalFacts`,
    the caller may change it). ``table_id``; ``day``: the segment's gaming day
    (:func:`segment_day`; None for a journal kept whole). A running table's queries keep
    one per live segment (:mod:`table.day.report_cache`). :meth:`read` and :meth:`facts`
    raise :class:`ReportError` naming an entry that does not read (the reader is then
    no longer usable: start a new one)."""

    #: the entry kinds a report counts from
    KINDS = ("round", "incident", "violation", "supervisor", "link", ENTRY_KIND, IN_FORCE_KIND, METER_KIND)

    def __init__(self, table_id: str, day: date | None) -> None:
        self.table_id = table_id
        self.day = day
        #: the last entry read (its seq): the next :meth:`read` starts after it
        self.last_seq = 0
        self._steps: dict[str, dict[str, Any]] = {}  # round id -> step -> (seq, at, body)
        self._rounds: dict[str, RoundRecord] = {}  # the settled rounds, not voided
        self._touched: set[str] = set()  # round ids with an entry read since the last facts()
        self._down: dict[str, datetime] = {}  # a device's link down since
        self._downtime: list[tuple[str, datetime, datetime]] = []
        self._voids: list[datetime] = []
        self._incidents: list[datetime] = []
        self._deck_changes: list[datetime] = []
        self._procedures: list[tuple[datetime, dict[str, Any], date | None]] = []
        self._in_force: list[tuple[int, InForce | int]] = []  # (seq, what was in force, or a meter reading)
        self._last_at: datetime | None = None

    def read(self, journal: Journal, upto: int | None = None) -> None:
        """Read ``journal``'s entries after :attr:`last_seq` (through ``upto``, default
        the journal's last), kind by kind (each kind's entries in sequence order: what
        a report counts of one kind never depends on another's order)."""
        upto = journal.last_seq if upto is None else upto
        if upto <= self.last_seq:
            return
        for kind in self.KINDS:
            for e in journal.entries(kind, since=self.last_seq, upto=upto):
                self._one(kind, e.seq, e.ts, e.round_id, e.body)
        self.last_seq = upto

    def _one(self, kind: str, seq: int, ts: str, round_id: str | None, b: dict[str, Any]) -> None:
        at = _when(ts)
        self._last_at = at if self._last_at is None or at > self._last_at else self._last_at
        if kind == "round":
            rid = round_id or ""
            step = b.get("step")
            self._steps.setdefault(rid, {})[step] = (seq, at, b)
            self._touched.add(rid)
            if step == "voided":
                self._voids.append(at)
            elif step == "held" and b.get("cause") in ("device", "restart"):
                self._incidents.append(at)
        elif kind in ("incident", "violation"):
            # Incidents: the incident entries, the custody rules broken (violation entries), and the
            # rounds held for a device or a restart (a custody hold comes with its violation already).
            self._incidents.append(at)
        elif kind == "supervisor" and b.get("action") == "register_deck":
            self._deck_changes.append(at)
        elif kind == "link":
            src = str(b.get("source"))
            if b.get("notice") == "link_down":
                self._down.setdefault(src, at)
            elif b.get("notice") in ("link_up", "device_rebooted") and src in self._down:
                self._downtime.append((src, self._down.pop(src), at))
        elif kind == ENTRY_KIND:
            self._procedures.append((at, dict(b), self.day))
        elif kind in (IN_FORCE_KIND, METER_KIND):
            try:
                self._in_force.append((seq, read_in_force(seq, b) if kind == IN_FORCE_KIND else read_meter(seq, b)))
            except InForceError as exc:
                raise ReportError(str(exc)) from None

    def facts(self) -> JournalFacts:
        """What a report counts of the entries read so far (the rounds read since the last
        call made into records once each). Raises :class:`ReportError`."""
        self._in_force.sort(key=lambda p: p[0])
        for rid in sorted(self._touched):
            r = self._steps[rid]
            if "settle" not in r or "voided" in r:
                self._rounds.pop(rid, None)
                continue
            try:
                self._rounds[rid] = _round_record(rid, r, self.day, self._in_force)
            except (KeyError, TypeError, ValueError) as exc:
                raise ReportError(f"round {rid} (entry {r['settle'][0]}): does not read as a settled round: "
                                  f"{exc}") from None
        self._touched.clear()
        facts = JournalFacts(self.table_id, last_at=self._last_at)
        facts.downtime = [*self._downtime,  # a device still down at the segment's end: down to its end
                          *((src, since, self._last_at or since) for src, since in self._down.items())]
        facts.voids = sorted(self._voids)
        facts.incidents = sorted(self._incidents)
        facts.deck_changes = sorted(self._deck_changes)
        facts.procedures = sorted(self._procedures, key=lambda p: p[0])
        # in the order each round was first journaled, then by when it was played (as ever)
        facts.rounds = sorted((self._rounds[rid] for rid in self._steps if rid in self._rounds),
                              key=lambda x: (x.at, x.number))
        return facts


def segment_day(journal: Journal) -> date | None:
    """The gaming day whose record ``journal`` is, when it is one day's segment
    (``docs/journal.md``, "Gaming days"): the day its opening entry names, else the day
    its close entry names (the first day's segment starts at entry 1); None for a
    journal kept whole. Everything in a day's segment counts in that day: the close
    waits for the round in play, so a round settled just past the next day's start is
    in the day's archive and in the day's report alike."""
    from ..journal import SEGMENT_KIND

    opening = journal.segment
    try:
        if opening is not None:
            return date.fromisoformat(str(opening.body.get("open")))
        for e in journal.entries(SEGMENT_KIND):
            if "close" in e.body:
                return date.fromisoformat(str(e.body["close"]))
    except ValueError:
        return None
    return None


def read_days(archive_dir: Any, live: Journal | None = None) -> JournalFacts:
    """The facts of every gaming day archived in ``archive_dir``
    (``YYYY-MM-DD.journal.xz``, :mod:`table.day.segments`) and of the live segment ``live``,
    as one journal's: the report over them is the report over the same rounds live.
    Raises :class:`ReportError` (an archive that does not read, naming it)."""
    from ..journal import JournalError
    from .segments import archives, opened

    parts: list[JournalFacts] = []
    links: list[tuple[str, str | None, str | None]] = []  # (name, its day, the day its opening names before it)
    bad: list[tuple[str, str]] = []
    first_previous: dict[str, Any] | None = None  # what the oldest segment read names before it
    retired = 0  # the last entry the table's retention entries say it removed
    for name, path in archives(archive_dir):
        try:
            with opened(path) as db, Journal(db, read_only=True) as j:
                part = read_journal(j)
                prev = _previous(j)
                retired = max(retired, _retention_through(j))
        except (JournalError, ReportError) as exc:
            # an archive edited or damaged: named and flagged, its rounds in no figure (never a crash)
            bad.append((name, f"{name} ({path.name}) does not read: {exc}"))
            links.append((name, name, None))
            continue
        if not parts:
            first_previous = prev
        parts.append(part)
        links.append((name, name, str(prev["gaming_day"]) if prev and prev.get("gaming_day") else None))
    if live is not None:
        part = read_journal(live)
        prev = _previous(live)
        retired = max(retired, _retention_through(live))
        if not parts:
            first_previous = prev
        parts.append(part)
        links.append(("the live journal", None, str(prev["gaming_day"]) if prev and prev.get("gaming_day") else None))
    if not parts:
        if bad:
            raise ReportError("no archived gaming day reads: " + "; ".join(why for _, why in bad))
        raise ReportError(f"no archived gaming day in {archive_dir}")
    out = merge_facts(parts)
    out.bad_days = bad
    for (_, day_before, _), (name, _, names_before) in zip(links, links[1:]):
        if names_before is not None and day_before is not None and names_before != day_before:
            out.missing_days.append((names_before, f"{names_before} (after {day_before}: {name} follows it)"))
    # The oldest day read chains to a day before it: unless the table's retention journaled
    # removing it, that day and those before it were deleted (docs/journal.md, "Gaming days
    # and archives"; the same rule as tablectl audit verify --archive, table.day.segments.verify_chain).
    if first_previous is not None and not (links and links[0][1] in {d for d, _ in bad}):
        seq = first_previous.get("seq")
        day_before = str(first_previous.get("gaming_day"))
        if not (isinstance(seq, int) and retired >= seq):
            out.missing_days.insert(0, (day_before, f"{day_before} and the days before it (the oldest day read "
                                                    f"chains to it; no retention entry of the table removed it)"))
    return out


def _previous(journal: Journal) -> dict[str, Any] | None:
    """What a segment's opening entry names of the day before it (None: a first segment)."""
    opening = journal.segment
    prev = opening.body.get("previous") if opening is not None else None
    return prev if isinstance(prev, dict) else None


def _retention_through(journal: Journal) -> int:
    """The last entry the segment's retention entries say the table removed (0: none)."""
    from .segments import RETENTION_KIND

    best = 0
    for e in journal.entries(RETENTION_KIND):
        through = e.body.get("through_seq") if isinstance(e.body, dict) else None
        if isinstance(through, int) and not isinstance(through, bool):
            best = max(best, through)
    return best


def merge_facts(parts: Sequence[JournalFacts]) -> JournalFacts:
    """The facts of consecutive segments of one table's journal, as one (a device down at
    one segment's end counts to that end, as at a journal's end)."""
    out = JournalFacts(parts[0].table_id)
    for f in parts:
        out.rounds += f.rounds
        out.voids += f.voids
        out.incidents += f.incidents
        out.deck_changes += f.deck_changes
        out.downtime += f.downtime
        out.procedures += f.procedures
        if f.last_at is not None and (out.last_at is None or f.last_at > out.last_at):
            out.last_at = f.last_at
    out.voids.sort()
    out.procedures.sort(key=lambda p: p[0])
    out.rounds.sort(key=lambda x: (x.at, x.number))
    return out


def round_wagers_and_hands(r: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """The one reader of older round entries' shapes: a round's wagers (seat -> wager kind ->
    cents) and each seat's hand (seat -> card texts) from its steps ``r`` (step -> (seq,
    at, body)), whichever journal format wrote them. Nothing of a stored entry is changed
    (the chain hashes them as written: docs/journal.md, "Formats").

    * Wagers: the bets frozen at ``close_bets`` (a table that takes bets opens its round
      with none, 58 Pa. Code 816a.1); formats 1 and 2 (and a simulated table's fixed bets)
      froze nothing there: the wagers the round's ``open`` entry names.
    * Hands: ``decisions_done``'s ``hands`` (formats 2 on); format 1's ``decisions_done``
      names the decisions only, and its ``settle`` results hold each seat's ``hand``
      (``cards``, sorted by rank: a category, a paytable line and the Six Card Bonus do
      not depend on the order).

    Raises ``KeyError``/``TypeError`` for a round that names neither (the caller names it)."""
    frozen = r["close_bets"][2] if "close_bets" in r else {}
    wagers = frozen["wagers"] if "wagers" in frozen else r["open"][2]["wagers"]
    done = r["decisions_done"][2]
    if "hands" in done:
        hands = done["hands"]
    else:  # format 1 (tablectl before journal format 2)
        hands = {s: v["hand"]["cards"] for s, v in r["settle"][2]["results"].items()}
    return wagers, hands


def _round_record(rid: str, r: dict[str, Any], day: date | None = None,
                  in_force: Sequence[tuple[int, InForce | int]] = ()) -> RoundRecord:
    seq, at, settle = r["settle"]
    force, meter = None, None
    for s, x in in_force:  # (in seq order) what was in force at the settlement's entry
        if s > seq:
            break
        if isinstance(x, InForce):
            force, meter = x, x.tables.progressive_meter_cents
        else:
            meter = x
    if isinstance(settle.get("progressive_meter_cents"), int):
        meter = settle["progressive_meter_cents"]
    # The shift a round counts in is the one it was played in (its bets closed; a round open for
    # bets across a shift change is the next dealer's); its day is its segment's (read_journal).
    at = r["close_bets"][1] if "close_bets" in r else r["open"][1] if "open" in r else at
    wagers, hands = round_wagers_and_hands(r)
    done = r["decisions_done"][2]
    dealer = tuple(_card(c) for c in r["dealer_reveal"][2]["dealer_hand"])
    seats = []
    for s, w in wagers.items():
        wg = Wagers(**{"ante": 0, **{k: int(v) for k, v in w.items()}})  # a Pair Plus-only seat has no ante
        d = done.get("decisions", {}).get(s)
        seats.append(SeatRound(int(s), wg, Decision.parse(d) if wg.ante else None,
                               tuple(_card(c) for c in hands[s])))
    results = {int(s): v for s, v in settle["results"].items()}
    return RoundRecord(int(settle.get("number", 0)), rid, at, tuple(seats), dealer, results, day, force, meter)


# -- the calendar ---------------------------------------------------------------------------------


# -- counting -------------------------------------------------------------------------------------


def _dec(x: Fraction) -> float:
    return round(float(x), 2)


def _money(c: float | int | None) -> str:
    if c is None:
        return "not known"
    sign = "-" if c < 0 else ""
    c = abs(c)
    return f"{sign}${int(c) // 100:,}.{int(round(c)) % 100:02d}" if float(c).is_integer() else \
        f"{sign}${c / 100:,.2f}"


class Counter:
    """Counts periods of one journal's facts; each round is priced at what was in force
    for it as journaled (:class:`~table.in_force.Pricing`): ``tables`` and ``profile``
    price only the rounds of a journal older than that record, ``what_if`` (slot ->
    paytable, ``progressive_meter_cents``, ``profile``) every round, labelled. Each
    round's expectation is counted once. Raises :class:`ReportError`."""

    def __init__(self, facts: JournalFacts, tables: Tables | None, profile: RulesProfile = PENNSYLVANIA,
                 calendar: Calendar = Calendar(), check_settlement: bool = True,
                 cache: "dict[str, dict[str, Any]] | None" = None,
                 what_if: "dict[str, Any] | None" = None) -> None:
        self.facts = facts
        try:
            self.pricing = Pricing(tables, profile, what_if)
        except InForceError as exc:
            raise ReportError(str(exc)) from None
        self.calendar = calendar
        # ``cache``: expectations kept across reports of one journal (a running table's queries)
        cache = cache if cache is not None else {}
        self._exp: dict[str, tuple[RoundRecord, Expectation]] = cache.setdefault("expected", {})
        self._theo: dict[str, tuple[RoundRecord, Expectation]] = cache.setdefault("theoretical", {})
        # the rounds already checked against the paytables (the very records: a round read
        # again is checked again); a cache holds one table's queries, one tables and profile
        self._checked: dict[str, RoundRecord] = cache.setdefault("checked", {})
        if what_if:  # priced at other paytables on purpose: kept apart from the record's expectations
            self._exp, self._theo = {}, {}
        elif check_settlement:
            try:
                self._check_paytables()
            except ReportError as exc:
                if all(r.in_force is not None for r in facts.rounds):
                    raise
                raise ReportError(f"{exc} (the journal is older than its in_force record of what was in force: "
                                  "give the paytables it was played with, --ante-bonus, --pair-plus, --six-card, "
                                  "--progressive, --meter-cents)") from None

    def priced(self, r: RoundRecord) -> tuple[Tables, RulesProfile]:
        """The paytables and profile round ``r`` is priced at. Raises :class:`ReportError`."""
        try:
            return self.pricing.for_round(r.in_force, r.meter_cents, r.number)
        except InForceError as exc:
            raise ReportError(str(exc)) from None

    def _check_paytables(self) -> None:
        """The paytables given must settle the journal's rounds as the journal recorded
        them: every seat a paytable paid, or could have paid (a pair or better), is
        settled again but for its Six Card Bonus; a Six Card Bonus is checked against
        the paytable's line for the six-card hand the journal names."""
        for r in self.facts.rounds:
            if self._checked.get(r.round_id) is r:
                continue
            self._check_round(r)
            self._checked[r.round_id] = r

    def _check_round(self, r: RoundRecord) -> None:
        from ..rules.hands import SixCardCategory, SixCardHand

        tables, profile = self.priced(r)
        six_pt = tables.six_card_bonus
        for s in r.seats:
            rec = r.results.get(s.seat)
            if rec is None:
                raise ReportError(f"round {r.number}: seat {s.seat} has wagers but no settlement")
            wagers = {w["wager"]: w for w in rec.get("wagers", ())}
            rest = [w for k, w in wagers.items() if k != "six_card"]
            if any("line" in w for w in rest) or rec.get("hand", {}).get("category", "high card") != "high card":
                w = s.wagers
                try:
                    st = settle_seat(but_six_card(w), s.decision, s.cards,
                                     r.dealer, tables, profile)
                except SettlementError as exc:
                    raise ReportError(f"round {r.number}, seat {s.seat}: {exc}") from None
                net = st.net
                want = sum(x["amount"] for x in rest)
                if net != want:
                    raise ReportError(
                        f"round {r.number}, seat {s.seat}: the paytables {self._names(r, tables)} settle it at "
                        f"{net} cents, the journal at {want} (but its Six Card Bonus): "
                        + ("the journal's in_force entry does not describe what the round was settled with"
                           if r.in_force is not None else
                           "report with the paytables the table used (its config's [paytables])"))
            six = wagers.get("six_card")
            if six is not None:
                if six_pt is None:
                    raise ReportError(f"round {r.number}, seat {s.seat}: a six_card_bonus wager was placed "
                                      "but no six_card_bonus paytable was given")
                label = rec.get("six_card_hand", "nothing").replace(" ", "_").upper()
                try:
                    line = six_pt.line_for(SixCardHand(SixCardCategory[label]))
                except KeyError:
                    raise ReportError(f"round {r.number}, seat {s.seat}: six-card hand "
                                      f"{rec.get('six_card_hand')!r:.40} is not one") from None
                if (line is None) != ("line" not in six) or (line is not None and line != six["line"]
                                                              and not six["line"].startswith(line)):
                    raise ReportError(
                        f"round {r.number}, seat {s.seat}: the Six Card Bonus paytable {six_pt.name} "
                        f"pays {line or 'nothing'} on a {rec.get('six_card_hand')}, the journal "
                        f"{six.get('line', 'nothing')}: report with the paytables the table used")

    @staticmethod
    def _names(r: RoundRecord, t: Tables) -> str:
        names = ", ".join(pt.name for k in all_slots() if (pt := t.slot(k)) is not None)
        return f"({names}, {'journaled in force' if r.in_force is not None else 'given'})"

    def expectation(self, r: RoundRecord) -> Expectation:
        """Round ``r``'s exact expectation given its decisions, counted once per record (a
        round read again, from an archive replaced, is counted again)."""
        kept = self._exp.get(r.round_id)
        if kept is None or kept[0] is not r:
            kept = self._exp[r.round_id] = (r, round_expectation(r.seats, *self.priced(r)))
        return kept[1]

    def theoretical(self, r: RoundRecord) -> Expectation:
        """Round ``r``'s theoretical expectation (Q-6-4 play), counted once per record."""
        kept = self._theo.get(r.round_id)
        if kept is None or kept[0] is not r:
            kept = self._theo[r.round_id] = (r, round_theoretical([s.wagers for s in r.seats], *self.priced(r)))
        return kept[1]

    def shift_of(self, at: datetime, day: date | None = None) -> int:
        """The shift ``at`` falls in: by the shift changes people journaled that gaming day
        (``day``: the segment's, when the journal is one; else the day ``at`` falls in),
        else by the clock."""
        day = day or self.calendar.gaming_day(at)
        starts = self._shift_starts(day)
        if starts is None:
            return self.calendar.clock_shift(at)
        return 1 + sum(1 for t in starts if t <= at)

    def _shift_starts(self, day: date) -> list[datetime] | None:
        """When shifts 2, 3, ... of gaming ``day`` began, as the table numbers them
        (:class:`table.day.gaming_day.TableDay`): each shift change, and each opening after the
        day's first (a table closed and opened again starts a new shift, so the report's
        shift is the banner's, and never mixes two sessions' rounds); None when people
        journaled no opening nor shift change that day (the clock's shifts then)."""
        marks = sorted((t, b.get("procedure")) for t, b, d in self.facts.procedures
                       if (d or self.calendar.gaming_day(t)) == day and b.get("procedure") in ("open", "shift_change"))
        if not marks:
            return None
        return [t for i, (t, p) in enumerate(marks) if not (i == 0 and p == "open")]

    def shift_bounds(self, day: date, n: int) -> tuple[datetime, datetime]:
        """When shift ``n`` of gaming ``day`` began and ended: by the opening and shift changes
        people journaled that day (the last one ends with the day), else by the clock
        (``shift_hours`` from the day's start). A shift's voids, incidents, deck changes and
        downtime are those between the two."""
        day_start, day_end = self.calendar.bounds(day)
        changes = self._shift_starts(day)
        if changes is not None:  # as shift_of counts them: shift 1 until the next shift starts, and so on
            start = day_start if n == 1 else changes[n - 2] if n - 2 < len(changes) else day_end
            end = changes[n - 1] if n - 1 < len(changes) else day_end
            return start, end
        start = day_start + timedelta(hours=self.calendar.shift_hours * (n - 1))
        return start, min(day_end, start + timedelta(hours=self.calendar.shift_hours))

    def periods(self, rounds: Sequence[RoundRecord]) -> list[dict[str, Any]]:
        """:meth:`table.in_force.Pricing.periods` of ``rounds``. Raises :class:`ReportError`."""
        try:
            return self.pricing.periods(rounds)
        except InForceError as exc:
            raise ReportError(str(exc)) from None

    def summary(self, label: dict[str, Any], rounds: Sequence[RoundRecord], start: datetime | None,
                end: datetime | None, days: Iterable[date] = ()) -> dict[str, Any]:
        """The figures of ``rounds`` (and of the events between ``start`` and ``end``), as JSON."""
        handle = {k: 0 for k in WAGER_KINDS}
        result = {k: 0 for k in WAGER_KINDS}
        decisions = {"play": 0, "fold": 0}
        hands = 0
        for r in rounds:
            for s in r.seats:
                hands += 1
                if s.decision is not None:
                    decisions[s.decision.value] += 1
                for w in r.results[s.seat].get("wagers", ()):
                    if w["wager"] != "ante_bonus":  # paid on the ante: no stake of its own
                        handle[w["wager"]] += int(w["stake"])
                    result[w["wager"]] -= int(w["amount"])
        settled = sum(result.values())
        exp = total([self.expectation(r) for r in rounds])
        theo = total([self.theoretical(r) for r in rounds])

        def inside(t: datetime) -> bool:
            return (start is None or t >= start) and (end is None or t < end)

        downtime = sum(max(0.0, (min(b, end or b) - max(a, start or a)).total_seconds())
                       for _, a, b in self.facts.downtime)
        flags = []
        out: dict[str, Any] = {
            **label,
            "start": start.isoformat() if start else None, "end": end.isoformat() if end else None,
            "rounds": len(rounds), "hands": hands, "decisions": decisions,
            "handle": {k: v for k, v in handle.items() if k != "ante_bonus"}, "house_result": result,
            "voids": sum(1 for t in self.facts.voids if inside(t)),
            "incidents": sum(1 for t in self.facts.incidents if inside(t)),
            "deck_changes": sum(1 for t in self.facts.deck_changes if inside(t)),
            "device_downtime_s": round(downtime, 1),
            "settled_win": settled,
            # each period under its own paytables, as journaled (or the what-if / the options given)
            "in_force": self.periods(rounds),
        }
        for name, e, what in (("expected_win", exp, "the expected win given the decisions"),
                              ("theoretical_win", theo, "the theoretical win (Q-6-4 play)")):
            low, high = e.band(Z95)
            out[name] = {"cents": _dec(e.mean), "fraction": f"{e.mean.numerator}/{e.mean.denominator}",
                         "sd": round(float(e.variance) ** 0.5, 2), "band_95": [round(low, 2), round(high, 2)],
                         "by_wager": {k: _dec(v) for k, v in e.by_wager.items()}}
            if rounds and not low <= settled <= high:
                out[name]["outside"] = True
                flags.append(f"settled win {_money(settled)} is outside the 95 % band of {what}, "
                             f"{_money(low)} to {_money(high)}: investigate (COMAR 36.05.03.25 B(2); "
                             "K.A.R. 112-108-51)")
            else:
                out[name]["outside"] = False
        out["theoretical_win"]["variance"] = "approximate: the covariance between seats is left out"
        out["statistical"] = self._statistical(list(days), settled, flags)
        out["flags"] = flags
        return out

    def _statistical(self, days: list[date], settled: int, flags: list[str]) -> dict[str, Any]:
        """The inventory-based win of whole gaming days (``days``), once known."""
        if not days:
            return {"known": False, "why": "a shift has no drop of its own: the drop is counted per gaming day"}
        per_day = {d: DayFigures() for d in days}
        for t, b, seg in self.facts.procedures:
            if b.get("procedure") == "drop":
                try:
                    d = date.fromisoformat(b.get("gaming_day", ""))
                except ValueError:
                    continue
            else:
                d = seg or self.calendar.gaming_day(t)
            if d in per_day:
                per_day[d].add(b)
        for d, f in per_day.items():  # a drop entered again: the correction is on the record, and flagged
            if f.corrections:
                flags.append(f"gaming day {d}: the drop was entered again: {'; '.join(f.corrections)}")
        missing = [d.isoformat() for d, f in per_day.items() if f.statistical_win is None]
        fig = {"opening": sum(f.opening or 0 for f in per_day.values()),
               "closing": sum(f.closing or 0 for f in per_day.values()),
               "fills": sum(f.fills for f in per_day.values()), "credits": sum(f.credits for f in per_day.values())}
        if missing:
            return {"known": False, **fig, "drop": None, "win": None,
                    "why": "; ".join(f"{d}: {per_day[date.fromisoformat(d)].unknown_why}" for d in missing[:5])
                           + (f" and {len(missing) - 5} more days" if len(missing) > 5 else "")}
        drop = sum(f.drop or 0 for f in per_day.values())
        win = sum(f.statistical_win or 0 for f in per_day.values())
        out = {"known": True, **fig, "drop": drop, "win": win,
               "win_to_drop": round(win / drop, 4) if drop else None, "difference_from_settled": win - settled}
        if win != settled:
            flags.append(f"statistical win {_money(win)} differs from the settled win {_money(settled)} by "
                         f"{_money(win - settled)}: chips missing from the table, or a round paid other than "
                         "it was settled, look like this")
        return out


def _head(c: "Counter", kind: str, rounds: Sequence[RoundRecord], calendar: Calendar) -> dict:
    """The report's head: the table, the kind, the pricing (:meth:`table.in_force.Pricing.label`:
    the record's, the options', a what-if) and the profile and paytables of the last period
    (each row's ``in_force`` names every period's)."""
    periods = c.periods(rounds)
    last = periods[-1] if periods else None
    if last is None:
        t = c.pricing.fallback
        names = {k: pt.name for k in all_slots() if t is not None and (pt := t.slot(k)) is not None}
    return {"table_id": c.facts.table_id, "report": kind,
            "profile": last["profile"] if last else c.pricing.what_if.get("profile", c.pricing.profile).name,
            "paytables": last["paytables"] if last else names, "pricing": c.pricing.label(rounds),
            "gaming_day_starts": f"{calendar.start_hour:02d}:00 {calendar.tz}"}


def report(facts: JournalFacts, kind: str, tables: Tables | None = None, profile: RulesProfile = PENNSYLVANIA,
           calendar: Calendar = Calendar(), on: date | None = None, shift: int | None = None,
           cache: dict | None = None, *, what_if: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``kind`` report (:data:`KINDS`) of ``facts`` as JSON.

    ``on``: a gaming day (default: the last one with a settled round, or the
    journal's last entry's); ``day``: that day with its shifts; ``shift``: one
    shift of it (``shift``, default the last); ``month``/``year``: month or year to
    date through ``on``, with its days or months. Each round is priced at what was in
    force for it as journaled; ``tables`` and ``profile`` only the rounds of an older
    journal; ``what_if`` every round (:class:`Counter`), labelled in ``pricing``.
    Raises :class:`ReportError` for an unknown kind or paytables that do not settle
    the journal as it did."""
    if kind not in KINDS:
        raise ReportError(f"unknown report {kind!r}; allowed: {', '.join(KINDS)}")
    c = Counter(facts, tables, profile, calendar, cache=cache, what_if=what_if)
    if on is None:
        last = facts.rounds[-1].at if facts.rounds else facts.last_at
        on = (facts.rounds[-1].day if facts.rounds else None) or (
            calendar.gaming_day(last) if last else datetime.now(timezone.utc).date())
    by_day: dict[date, list[RoundRecord]] = {}
    for r in facts.rounds:
        by_day.setdefault(r.day or calendar.gaming_day(r.at), []).append(r)
    def day_summary(d: date) -> dict[str, Any]:
        a, b = calendar.bounds(d)
        return c.summary({"period": "day", "gaming_day": d.isoformat()}, by_day.get(d, []), a, b, [d])

    out = _report(c, facts, kind, on, shift, by_day, day_summary, calendar)
    since = on if kind in ("day", "shift") else date(on.year, on.month if kind == "month" else 1, 1)
    return _flag_days(out, facts, since, on)


def _flag_days(out: dict[str, Any], facts: JournalFacts, since: date, on: date) -> dict[str, Any]:
    """Name and flag, in the report ``out`` of ``since``..``on``, the gaming days of that span
    missing from the archive folder (deleted; for the oldest day read, the day it chains to
    and those before it) and those whose archive does not read (edited or damaged): their
    rounds are in no figure of ``out``, and a report that says nothing of them would be
    short without a word."""
    def within(days: list[tuple[str, str]]) -> list[str]:
        return [why for d, why in days if since.isoformat() <= d <= on.isoformat()]

    missing, bad = within(facts.missing_days), within(facts.bad_days)
    if bad:  # an archive edited or damaged: named, its rounds not counted
        out["unreadable_days"] = bad
        out["flags"] = [f"archived gaming days that do not read, their rounds not counted: "
                        f"{'; '.join(bad[:5])}" + (f" and {len(bad) - 5} more" if len(bad) > 5 else ""),
                        *out["flags"]]
    if missing:  # a day deleted from the folder: its rounds are in no figure above
        out["missing_days"] = missing
        out["flags"] = [f"gaming days missing from the archive folder, their rounds not counted: "
                        f"{'; '.join(missing[:5])}" + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""),
                        *out["flags"]]
    return out


def _report(c: "Counter", facts: JournalFacts, kind: str, on: date, shift: int | None,
            by_day: dict[date, list[RoundRecord]], day_summary: Callable[[date], dict],
            calendar: Calendar) -> dict[str, Any]:
    """:func:`report`'s body, by kind."""
    if kind in ("day", "shift"):
        rounds = by_day.get(on, [])
        head = _head(c, kind, rounds, calendar)
        shifts: dict[int, list[RoundRecord]] = {}
        for r in rounds:
            shifts.setdefault(c.shift_of(r.at, r.day), []).append(r)
        rows = [c.summary({"period": "shift", "gaming_day": on.isoformat(), "shift": n}, rs,
                          *c.shift_bounds(on, n)) for n, rs in sorted(shifts.items())]
        if kind == "shift":
            pick = shift if shift is not None else (max(shifts) if shifts else 1)
            row = next((x for x in rows if x["shift"] == pick), None)
            if row is None:
                raise ReportError(f"gaming day {on}: no settled round in shift {pick} "
                                  f"(shifts with rounds: {sorted(shifts) or 'none'})")
            return {**_head(c, kind, shifts.get(pick, []), calendar), **row}
        return {**head, **day_summary(on), "shifts": rows}
    if kind == "month":
        days = [d for d in sorted(by_day) if d.year == on.year and d.month == on.month and d <= on]
        first = date(on.year, on.month, 1)
    else:
        days = [d for d in sorted(by_day) if d.year == on.year and d <= on]
        first = date(on.year, 1, 1)
    span = [first + timedelta(days=i) for i in range((on - first).days + 1)]
    rounds = [r for d in days for r in by_day[d]]
    head = _head(c, kind, rounds, calendar)
    a, _ = calendar.bounds(first)
    _, b = calendar.bounds(on)
    label = {"period": f"{kind} to date", "from": first.isoformat(), "through": on.isoformat()}
    out = {**head, **c.summary(label, rounds, a, b, span)}
    if kind == "month":
        out["days"] = [day_summary(d) for d in days]
    else:
        months = sorted({(d.year, d.month) for d in days})
        out["months"] = []
        for y, m in months:
            ds = [d for d in days if (d.year, d.month) == (y, m)]
            mf = date(y, m, 1)
            ml = min(on, (date(y + (m == 12), m % 12 + 1, 1) - timedelta(days=1)))
            out["months"].append(c.summary({"period": "month", "month": f"{y:04d}-{m:02d}"},
                                           [r for d in ds for r in by_day[d]], calendar.bounds(mf)[0],
                                           calendar.bounds(ml)[1],
                                           [mf + timedelta(days=i) for i in range((ml - mf).days + 1)]))
    return out


def house_result(r: RoundRecord) -> int:
    """The house's settled result of round ``r`` in cents (minus what the seats were paid net)."""
    return -sum(int(w["amount"]) for res in r.results.values() for w in res.get("wagers", ()))


def series(counter: Counter, rounds: Sequence[RoundRecord]) -> list[dict[str, Any]]:
    """One item per round of ``rounds``, in order, for a plot of the period so far:
    ``{"round": number, "settled_cum_cents", "expected_cum_cents", "band_lo_cents",
    "band_hi_cents"}``: the cumulative settled house win, the cumulative expected win
    given the decisions, and its 95 % band from the cumulative exact variance (rounds
    are independent: their variances add). Cents, the expected ones rounded to 0.01."""
    out = []
    settled, mean, var = 0, Fraction(0), Fraction(0)
    for r in rounds:
        e = counter.expectation(r)
        settled += house_result(r)
        mean += e.mean
        var += e.variance
        half = float(Z95) * float(var) ** 0.5
        out.append({"round": r.number, "settled_cum_cents": settled, "expected_cum_cents": _dec(mean),
                    "band_lo_cents": round(float(mean) - half, 2), "band_hi_cents": round(float(mean) + half, 2)})
    return out


def live_report(facts: JournalFacts, period: str, tables: Tables | None, profile: RulesProfile = PENNSYLVANIA,
                calendar: Calendar = Calendar(), *, on: date | None = None, shift: int | None = None,
                now: datetime | None = None, cache: dict | None = None) -> dict[str, Any]:
    """A running table's report of the current ``period`` (``"shift"`` or ``"day"``): the
    :func:`report` JSON of that shift or gaming day (``on``: default the gaming day
    ``now`` falls in; ``shift``: default the shift ``now`` falls in, by the shift changes
    journaled, else the clock) plus ``series`` (:func:`series`) over its rounds. A shift
    with no settled round yet is reported with zeros. ``cache``: kept between calls to
    count each round's expectation once. Raises :class:`ReportError`."""
    if period not in ("shift", "day"):
        raise ReportError(f"unknown period {period!r}; allowed: shift, day")
    now = now or datetime.now(timezone.utc)
    on = on or calendar.gaming_day(now)
    c = Counter(facts, tables, profile, calendar, cache=cache)
    rounds = [r for r in facts.rounds if (r.day or calendar.gaming_day(r.at)) == on]
    if period == "day":
        rep = report(facts, "day", tables, profile, calendar, on, cache=cache)
    else:
        today = calendar.gaming_day(now) == on
        pick = shift or (c.shift_of(now) if today else max((c.shift_of(r.at, r.day) for r in rounds), default=1))
        rounds = [r for r in rounds if c.shift_of(r.at, r.day) == pick]
        head = _head(c, "shift", rounds, calendar)
        label = {"period": "shift", "gaming_day": on.isoformat(), "shift": pick}
        row = c.summary(label, rounds, *c.shift_bounds(on, pick))  # the shift's own hours, rounds or none
        rep = _flag_days({**head, **row}, facts, on, on)
    rep["series"] = series(c, rounds)
    return rep


# -- output ---------------------------------------------------------------------------------------


def rows_of(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's periods, sub-periods first then the whole: one row each."""
    return [*rep.get("shifts", []), *rep.get("days", []), *rep.get("months", []),
            {k: v for k, v in rep.items() if k not in ("shifts", "days", "months")}]


def _name(row: dict[str, Any]) -> str:
    if row.get("period") == "shift":
        return f"{row['gaming_day']} shift {row['shift']}"
    if row.get("period") == "day":
        return row["gaming_day"]
    if row.get("period") == "month":
        return row["month"]
    return f"{row['from']}..{row['through']}"


CSV_FIELDS = (["period", "rounds", "hands", "play", "fold"] + [f"handle_{k}" for k in WAGER_KINDS if k != "ante_bonus"]
              + [f"result_{k}" for k in WAGER_KINDS]
              + ["settled_win", "expected_win", "expected_sd", "expected_low", "expected_high", "theoretical_win",
                 "theoretical_low", "theoretical_high", "voids", "incidents", "deck_changes", "device_downtime_s",
                 "opening", "closing", "fills", "credits", "drop", "statistical_win", "flags", "in_force"])


def to_csv(rep: dict[str, Any]) -> str:
    """The report as CSV (cents; one row a period, :data:`CSV_FIELDS`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    what_if = "WHAT-IF " if rep.get("pricing", {}).get("what_if") else ""
    for row in rows_of(rep):
        st = row["statistical"]
        w.writerow({
            "period": _name(row), "rounds": row["rounds"], "hands": row["hands"],
            "play": row["decisions"]["play"], "fold": row["decisions"]["fold"],
            **{f"handle_{k}": v for k, v in row["handle"].items()},
            **{f"result_{k}": v for k, v in row["house_result"].items()},
            "settled_win": row["settled_win"], "expected_win": row["expected_win"]["cents"],
            "expected_sd": row["expected_win"]["sd"], "expected_low": row["expected_win"]["band_95"][0],
            "expected_high": row["expected_win"]["band_95"][1], "theoretical_win": row["theoretical_win"]["cents"],
            "theoretical_low": row["theoretical_win"]["band_95"][0],
            "theoretical_high": row["theoretical_win"]["band_95"][1],
            "voids": row["voids"], "incidents": row["incidents"], "deck_changes": row["deck_changes"],
            "device_downtime_s": row["device_downtime_s"],
            **{k: st.get(k) for k in ("opening", "closing", "fills", "credits", "drop")},
            "statistical_win": st.get("win") if st.get("known") else "",
            "flags": " | ".join(row["flags"]),
            # each period's paytables (rounds first-last: names), the what-if's when one
            "in_force": what_if + " | ".join(f"{p['first_round']}-{p['last_round']}: {' '.join(p['paytables'].values())}"
                                            for p in row.get("in_force", ())),
        })
    return buf.getvalue()


def to_text(rep: dict[str, Any]) -> list[str]:
    """The report for people: one block a period."""
    lines = [f"table {rep['table_id']}: {rep['report']} report; profile {rep['profile']}; paytables "
             f"{', '.join(rep['paytables'].values())}; gaming day starts {rep['gaming_day_starts']}"]
    pricing = rep.get("pricing", {})
    if pricing.get("what_if"):
        lines.append("WHAT-IF: every round priced at " + ", ".join(f"{k} {v}" for k, v in pricing["what_if"].items())
                     + ", not at what the journal records in force: these are not the table's figures")
    if pricing.get("older_format"):
        lines.append(f"OLDER JOURNAL: {pricing['older_format']}")
    for row in rows_of(rep):
        d = row["decisions"]
        e, t, st = row["expected_win"], row["theoretical_win"], row["statistical"]
        lines += [
            "",
            f"{_name(row)}: {row['rounds']} rounds, {row['hands']} hands ({d['play']} played, {d['fold']} folded), "
            f"{row['voids']} voids, {row['incidents']} incidents, {row['deck_changes']} deck changes, "
            f"device downtime {row['device_downtime_s']} s",
            f"  {'wager':<12} {'handle':>14} {'house result':>14}",
            *(f"  {k:<12} {_money(row['handle'][k]) if k in row['handle'] else '-':>14} "
              f"{_money(row['house_result'][k]):>14}" for k in WAGER_KINDS),
            *(f"  in force: rounds {p['first_round']}-{p['last_round']} ({p['rounds']}): "
              f"{', '.join(p['paytables'].values())}; profile {p['profile']}"
              + (f"; meter {', '.join(_money(m) for m in p['progressive_meter_cents'])}"
                 if p["progressive_meter_cents"] else "")
              + (f" (in_force entry {p['in_force_entry']})" if p["in_force_entry"] is not None else " (given)")
              for p in row.get("in_force", ())),
            f"  settled win      {_money(row['settled_win'])}",
            f"  expected win     {_money(e['cents'])} given the decisions; 95 % band {_money(e['band_95'][0])} to "
            f"{_money(e['band_95'][1])}" + ("  OUTSIDE" if e["outside"] else ""),
            f"  theoretical win  {_money(t['cents'])} at Q-6-4; 95 % band {_money(t['band_95'][0])} to "
            f"{_money(t['band_95'][1])} (approximate)" + ("  OUTSIDE" if t["outside"] else ""),
        ]
        if st.get("known"):
            lines.append(f"  statistical win  {_money(st['win'])} (drop {_money(st['drop'])}, win to drop "
                         f"{st['win_to_drop']:.2%})" if st["win_to_drop"] is not None else
                         f"  statistical win  {_money(st['win'])} (drop {_money(st['drop'])})")
        else:
            lines.append(f"  statistical win  not known ({st['why']})")
        lines += [f"  FLAG: {f}" for f in row["flags"]]
    return lines
