"""What was in force at the table, as its journal records it, and read back from it.

The table journals, signed like every entry, one ``in_force`` entry at start, at
the start of every gaming day's segment and at every change
(docs/journal.md, "What was in force"):

* ``profile``: the rules profile's name;
* ``paytables``: each paytable in force by slot (``ante_bonus``, ``pair_plus``,
  ``six_card_bonus``, ``progressive``), with its name, kind, title, filing
  citation, its lines (``{line: [form, value]}``) and ``digest``, the SHA-256 of
  its content (:func:`paytable_digest`), so a report prices a round from the
  record alone and a paytable file later edited under the same name is told apart;
* ``progressive_meter_cents``: the meter reading (None: no progressive offered);
* ``limits``, ``seats`` (the layout's player positions), and what the caller
  describes (``gaming_day``, ``floor``, ``software``, ``drivers``);
* ``changed``: ``"start"``, ``"segment"`` or ``"change"``; a change made while the
  table runs names its person in ``by`` (``{"role", "id"}``).

A meter reading that changes while the table runs is its own entry,
``progressive_meter`` (``{"progressive_meter_cents", "by"}``), and each round's
``settle`` entry names the reading it was settled against
(``progressive_meter_cents``, 58 Pa. Code 649a.12(e): a meter line pays a share of
the meter when the round was dealt).

This module is pure (no journal I/O): :func:`describe` makes an entry's body,
:func:`read_in_force` reads one back, raising :class:`InForceError` naming the
entry, the key and the rule.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any, Mapping

from .rules.paytables import FORMS_BY_KIND, KINDS, LINES_BY_KIND, Paytable, Payout
from .rules.settlement import SettlementError, Tables

#: the journal entry naming what is in force
ENTRY_KIND = "in_force"
#: the journal entry of a progressive meter reading changed while the table runs
METER_KIND = "progressive_meter"
#: the shape of :data:`ENTRY_KIND`'s body (a reader refuses a later one it does not know)
FORMAT = 1
#: the package whose version is "the software" in force
PACKAGE = "threecard-table"


class InForceError(ValueError):
    """An ``in_force`` entry (or a ``progressive_meter`` one) that does not read: a key
    missing or of the wrong shape, a paytable whose digest does not match its content."""


def software_version() -> str:
    """The installed controller's version (the package metadata), ``"unknown"`` when the
    package is not installed (run from a source tree)."""
    for name in (PACKAGE,):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def _content(pt: Paytable) -> dict[str, Any]:
    return {"name": pt.name, "kind": pt.kind, "citation": pt.citation,
            "lines": {line: [p.form, p.value] for line, p in pt.lines.items()}}


def paytable_digest(pt: Paytable) -> str:
    """``"sha256:<hex>"`` of the paytable's content: its name, kind, citation and lines
    (forms and values), as canonical JSON (sorted keys, no spaces). Title, notes and the
    file it was read from are left out: they do not change what a round is paid."""
    text = json.dumps(_content(pt), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def paytable_record(pt: Paytable) -> dict[str, Any]:
    """The journaled form of one paytable: ``{"name", "kind", "title", "citation",
    "section", "label", "expires", "lines": {line: [form, value]}, "digest"}``."""
    return {**_content(pt), "title": pt.title, "section": pt.section, "label": pt.label, "expires": pt.expires,
            "digest": paytable_digest(pt)}


def paytable_from_record(rec: Any, where: str) -> Paytable:
    """The :class:`Paytable` a journaled record (:func:`paytable_record`) describes.
    Raises :class:`InForceError` naming ``where`` (entry and slot) for a missing key,
    a line or payout form its kind does not have, or a digest that does not match
    the content (an entry edited, or written by something else)."""
    if not isinstance(rec, Mapping):
        raise InForceError(f"{where}: not a paytable record")
    for k in ("name", "kind", "citation", "lines", "digest"):
        if k not in rec:
            raise InForceError(f"{where}: key {k!r} missing")
    kind = rec["kind"]
    if kind not in KINDS:
        raise InForceError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    lines: dict[str, Payout] = {}
    raw = rec["lines"]
    if not isinstance(raw, Mapping) or not raw:
        raise InForceError(f"{where}: key 'lines' must name at least one line")
    for line, pay in raw.items():
        ok = (line in LINES_BY_KIND[kind] and isinstance(pay, list) and len(pay) == 2
              and pay[0] in FORMS_BY_KIND[kind] and isinstance(pay[1], int) and not isinstance(pay[1], bool)
              and pay[1] >= 1)
        if not ok:
            raise InForceError(f"{where}: line {line!r} = {pay!r:.40} is not a {kind} line [form, value >= 1]")
        lines[line] = Payout(pay[0], pay[1])
    order = {ln: i for i, ln in enumerate(LINES_BY_KIND[kind])}
    pt = Paytable(name=str(rec["name"]), kind=kind, title=str(rec.get("title") or rec["name"]),
                  citation=str(rec["citation"]), lines=dict(sorted(lines.items(), key=lambda kv: order[kv[0]])),
                  section=rec.get("section"), label=rec.get("label"), expires=rec.get("expires"),
                  source=where)
    if paytable_digest(pt) != rec["digest"]:
        raise InForceError(f"{where}: paytable {pt.name!r}: its digest {str(rec['digest'])[:20]}... does not "
                           "match its content (the entry's lines were changed after it was written)")
    return pt


def describe(tables: Tables, profile_name: str, *, seats: int, limits: Mapping[str, Any] | None,
             settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The body of an ``in_force`` entry (without ``changed`` and ``by``): the rules
    profile, each paytable in force (:func:`paytable_record`), the meter reading, the
    limits (``TableLimits.to_dict()``, None: the documented defaults), the seats and
    the caller's ``settings`` (``gaming_day``, ``floor``, ``drivers``; ``software``
    defaults to this package's version)."""
    body: dict[str, Any] = {
        "format": FORMAT, "profile": profile_name,
        "paytables": {slot: paytable_record(pt) for slot in KINDS if (pt := tables.slot(slot)) is not None},
        "progressive_meter_cents": tables.progressive_meter_cents if tables.progressive is not None else None,
        "limits": dict(limits) if limits is not None else None, "seats": seats,
        "software": {"version": software_version()},
    }
    for k, v in (settings or {}).items():
        body[k] = v
    return body


def same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two ``in_force`` bodies describe the same (``changed``, ``by`` aside)."""
    if a is None or b is None:
        return False
    strip = ("changed", "by")
    return {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}


@dataclass(frozen=True)
class InForce:
    """One ``in_force`` entry read back: ``seq`` (its journal entry), ``tables`` (the
    paytables, with the meter reading of the entry), ``profile`` (the rules profile's
    name), ``body`` (the entry as journaled)."""

    seq: int
    tables: Tables
    profile: str
    body: Mapping[str, Any]

    def names(self) -> dict[str, str]:
        """Slot -> the paytable's name."""
        return {slot: pt.name for slot in KINDS if (pt := self.tables.slot(slot)) is not None}

    def with_meter(self, meter_cents: int | None) -> Tables:
        """The tables with the meter reading ``meter_cents`` (None: the entry's)."""
        if meter_cents is None or meter_cents == self.tables.progressive_meter_cents:
            return self.tables
        return replace(self.tables, progressive_meter_cents=meter_cents)


def read_in_force(seq: int, body: Mapping[str, Any]) -> InForce:
    """An ``in_force`` entry's body read back. Raises :class:`InForceError` naming the
    entry (``seq``) and key: a later format, no ante bonus paytable, a paytable record
    that does not read (:func:`paytable_from_record`), or a meter that is not cents."""
    where = f"in_force entry {seq}"
    fmt = body.get("format")
    if fmt != FORMAT:
        raise InForceError(f"{where}: format {fmt!r} is not {FORMAT}, the one this version reads")
    pts = body.get("paytables")
    if not isinstance(pts, Mapping) or "ante_bonus" not in pts:
        raise InForceError(f"{where}: key 'paytables' names no ante_bonus paytable")
    loaded = {slot: paytable_from_record(rec, f"{where}, paytables.{slot}") for slot, rec in pts.items()
              if slot in KINDS}
    meter = body.get("progressive_meter_cents")
    if meter is not None and (isinstance(meter, bool) or not isinstance(meter, int) or meter < 0):
        raise InForceError(f"{where}: progressive_meter_cents {meter!r:.20} is not a whole number of cents")
    try:
        tables = Tables.from_slots(loaded, meter)
    except SettlementError as exc:
        raise InForceError(f"{where}: {exc}") from None
    profile = body.get("profile")
    if not isinstance(profile, str) or not profile:
        raise InForceError(f"{where}: key 'profile' names no rules profile")
    return InForce(seq, tables, profile, dict(body))


def read_meter(seq: int, body: Mapping[str, Any]) -> int:
    """A ``progressive_meter`` entry's reading (cents). Raises :class:`InForceError`."""
    meter = body.get("progressive_meter_cents")
    if isinstance(meter, bool) or not isinstance(meter, int) or meter < 0:
        raise InForceError(f"progressive_meter entry {seq}: progressive_meter_cents {meter!r:.20} is not cents")
    return meter


#: the paytable slots and the meter a what-if may name
WHAT_IF_KEYS = (*KINDS, "progressive_meter_cents", "profile")


class Pricing:
    """How a report prices each round (:mod:`table.day.day_report`): at what was in force for
    it as journaled (:class:`InForce`, with the meter reading it was settled against);
    a round of a journal older than that record at ``fallback`` and ``profile`` (the
    paytables the reader typed, or the config's), or refused naming the options it
    needs; and every round at ``what_if`` when given (``{slot: Paytable,
    "progressive_meter_cents": int, "profile": RulesProfile}``), a labelled what-if a
    signed report refuses."""

    def __init__(self, fallback: Tables | None, profile: Any, what_if: Mapping[str, Any] | None = None) -> None:
        for k in what_if or {}:
            if k not in WHAT_IF_KEYS:
                raise InForceError(f"what-if key {k!r} is not one of {', '.join(WHAT_IF_KEYS)}")
        self.fallback = fallback
        self.profile = profile
        self.what_if = {k: v for k, v in (what_if or {}).items() if v is not None}

    def for_round(self, force: InForce | None, meter: int | None, number: int) -> tuple[Tables, Any]:
        """``(Tables, RulesProfile)`` round ``number`` is priced at. Raises
        :class:`InForceError` for a round of an older journal with no ``fallback``,
        or a what-if that does not fit its slot."""
        from .rules.profiles import get_profile

        if force is not None:
            tables, profile = force.with_meter(meter), get_profile(force.profile)
        elif self.fallback is not None:
            tables, profile = self.fallback, self.profile
        else:
            raise InForceError(
                f"round {number} was settled before the journal recorded what was in force (a journal older than "
                "its in_force entries): give the paytables it was played with (--ante-bonus, --pair-plus, "
                "--six-card, --progressive, --meter-cents) or a config whose [paytables] name them")
        over = {k: v for k, v in self.what_if.items() if k != "profile"}
        if over:
            try:
                tables = replace(tables, **over)
            except SettlementError as exc:
                raise InForceError(f"what-if: {exc}") from None
        return tables, self.what_if.get("profile", profile)

    def label(self, rounds: Any) -> dict[str, Any]:
        """What the report says of its pricing: ``{"source": "journal" | "options" |
        "journal and options", "older_format": text (rounds priced at the options, their
        journal older than the in_force record), "what_if": {slot: name, ...}}``."""
        journaled = sum(1 for r in rounds if r.in_force is not None)
        older = len(rounds) - journaled
        out: dict[str, Any] = {"source": "journal" if not older else "options" if not journaled
                               else "journal and options"}
        if older:
            names = ", ".join(pt.name for k in KINDS
                              if self.fallback is not None and (pt := self.fallback.slot(k)) is not None)
            out["older_format"] = (f"{older} rounds from a journal older than the in_force record are priced at the "
                                   f"paytables given ({names}), not at a record of what was in force")
        if self.what_if:
            out["what_if"] = {k: (v if isinstance(v, int) else getattr(v, "name", str(v)))
                              for k, v in self.what_if.items()}
        return out

    def periods(self, rounds: Any) -> list[dict[str, Any]]:
        """The rounds (in order) cut into periods, one for each ``in_force`` entry that
        priced them: ``[{"in_force_entry": seq or None, "paytables": {slot: name},
        "digests": {slot: digest}, "profile", "progressive_meter_cents": [readings],
        "rounds", "first_round", "last_round", "from", "through"}]``."""
        out: list[dict[str, Any]] = []
        for r in rounds:
            seq = r.in_force.seq if r.in_force is not None else None
            day = str(r.day) if r.day is not None else None
            if not out or out[-1]["in_force_entry"] != seq or out[-1]["_day"] != day:
                tables, profile = self.for_round(r.in_force, r.meter_cents, r.number)
                out.append({"_day": day, "in_force_entry": seq, "paytables": {
                    k: pt.name for k in KINDS if (pt := tables.slot(k)) is not None},
                    "digests": {k: v["digest"] for k, v in r.in_force.body["paytables"].items()}
                    if r.in_force is not None and not self.what_if else {},
                    "profile": profile.name, "progressive_meter_cents": [], "rounds": 0,
                    "first_round": r.number, "from": r.at.isoformat()})
            p = out[-1]
            p["rounds"] += 1
            p["last_round"], p["through"] = r.number, r.at.isoformat()
            meter = self.for_round(r.in_force, r.meter_cents, r.number)[0].progressive_meter_cents
            if meter is not None and meter not in p["progressive_meter_cents"]:
                p["progressive_meter_cents"].append(meter)
        for p in out:
            del p["_day"]
        # a new segment's entry saying the same as the day before does not start a period of its own
        merged: list[dict[str, Any]] = []
        for p in out:
            if merged and merged[-1]["paytables"] == p["paytables"] and merged[-1]["digests"] == p["digests"] \
                    and merged[-1]["profile"] == p["profile"]:
                m = merged[-1]
                m["rounds"] += p["rounds"]
                m["last_round"], m["through"] = p["last_round"], p["through"]
                m["progressive_meter_cents"] += [x for x in p["progressive_meter_cents"]
                                                 if x not in m["progressive_meter_cents"]]
            else:
                merged.append(p)
        return merged


def settings_of(config: Any, drivers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What a table config (:class:`table.config.TableConfig`; None: none) puts in force
    besides the paytables and limits, for the ``in_force`` entry: ``gaming_day`` (start
    hour, time zone, shift length, procedures required, retention; None: no config, the
    documented defaults), ``floor`` (the
    notary's URL and the MQTT floor it reports to; None: none), ``drivers`` (the device
    driver of each device, ``drivers`` over the config's; default ``spec``)."""
    out: dict[str, Any] = {"drivers": {"shuffler": "spec", "shoe": "spec"}, "floor": None, "gaming_day": None}
    if config is not None:  # (None: no config, the documented [gaming_day] defaults, no floor)
        g = config.gaming_day
        out["gaming_day"] = {"start_hour": g.start_hour, "timezone": g.timezone, "shift_hours": g.shift_hours,
                             "procedures_required": g.procedures_required, "retention_years": g.retention_years,
                             "keep_days": g.keep_days}
        floor = {"notary_url": config.floor.url, "mqtt_floor": config.mqtt.floor if config.mqtt.host else None}
        out["floor"] = floor if any(floor.values()) else None
        out["drivers"] = {k: getattr(config.devices, k).driver for k in ("shuffler", "shoe")}
    out["drivers"].update(drivers or {})
    return out
