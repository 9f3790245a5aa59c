"""The floor's figures with their 95 % band, per table and per pit, and the series the floor
page plots (settled win against expected win, day by day).

For each table, its rounds of the year to date (the gaming day's year, settled and not
voided: ``round_results``) give the mean ``m`` and the standard deviation ``s`` of one
round's win (the table's win: minus its players' net), as the report's fluctuations do
(:func:`table.floor.reports.report`; COMAR 36.05.03.25: fluctuations outside the standard
deviation at 95 %). A period (the gaming day, the month to date, the year to date) of ``n``
rounds then has:

* ``win_cents``: what the table settled (its signed day report's figure for a day it sent
  one, as the report);
* ``expected_cents`` = ``n * m``;
* ``band_cents`` = ``1.96 * s * sqrt(n)``, the half-width of the 95 % band around it;
* ``outside``: ``|win - expected| > band`` (never with fewer than ``min_rounds``
  rounds in the year, :data:`table.floor.reports.MIN_ROUNDS_FOR_BAND`: ``band_cents`` is
  then None).

A pit's (and the scope's) figures add its tables': the expected wins add, and so do the
variances (the tables' rounds are independent): ``band = 1.96 * sqrt(sum(n_t * s_t^2))``.
The year to date is its own reference, so its win is on its expectation by construction
(its row gives the band's width); the day and the month are judged against the year.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

#: two-sided 95 % (COMAR 36.05.03.25), as :data:`table.floor.reports.Z95`
Z95 = 1.96

PERIODS = ("day", "month_to_date", "year_to_date")


def _per_table(rows: dict[tuple[str, str, str], dict[str, Any]],
               only: set[str] | None) -> dict[str, dict[str, dict[str, Any]]]:
    """table -> gaming day -> {rounds, win_cents, sq, sum_rounds, sum_win} summed over its games."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (t, _g, day), row in rows.items():
        if only is not None and t not in only:
            continue
        cell = out.setdefault(t, {}).setdefault(day, {"rounds": 0, "win_cents": 0, "sq": 0.0, "sum_rounds": 0,
                                                       "sum_win": 0})
        cell["rounds"] += row["rounds"]
        cell["win_cents"] += row["win_cents"]
        if row["source"] == "rounds":  # the reference: rounds the floor saw one by one
            cell["sq"] += row["sq"]
            cell["sum_rounds"] += row["rounds"]
            cell["sum_win"] += row["win_cents"]
    return out


def _reference(days: dict[str, dict[str, Any]], min_rounds: int) -> tuple[float, float] | None:
    """(mean, variance) of one round's win over the year's rounds, or None: too few."""
    n = sum(c["sum_rounds"] for c in days.values())
    if n < min_rounds:
        return None
    mean = sum(c["sum_win"] for c in days.values()) / n
    return mean, max(sum(c["sq"] for c in days.values()) / n - mean * mean, 0.0)


def _judge(rounds: int, win: int, expected: float | None, variance: float | None) -> dict[str, Any]:
    if expected is None or variance is None:
        return {"rounds": rounds, "win_cents": win, "expected_cents": None, "band_cents": None, "outside": False}
    band = Z95 * math.sqrt(variance)
    return {"rounds": rounds, "win_cents": win, "expected_cents": round(expected), "band_cents": round(band),
            "outside": rounds > 0 and band > 0 and abs(win - expected) > band}


def figures(rows: dict[tuple[str, str, str], dict[str, Any]], day: _dt.date, only: set[str] | None,
            pits: dict[str, str | None], *, min_rounds: int, series: str = "month") -> dict[str, Any]:
    """The figures of gaming ``day``'s day, month to date and year to date with their 95 %
    band (see the module docstring), for the tables in ``only`` (None: every one), each
    table's pit from ``pits`` (table -> pit). ``rows``: (table, game, gaming day) ->
    ``{rounds, win_cents, sq, source}`` from the first of ``day``'s year to ``day``, as
    :func:`table.floor.reports._figures` reads them; ``min_rounds``: the fewest rounds of
    the year a band is given for. Returns ``{"gaming_day", "tables": [{table_id,
    pit, day, month_to_date, year_to_date}], "pits": [{pit, ...}], "scope": {...},
    "series": [{gaming_day, win_cents, expected_cents, band_cents}] }``: the series is
    cumulative from the month's first day (``series="year"``: the year's) to ``day``, for
    the whole scope, the points a plot of settled against expected win draws. A table
    without a band (too few rounds in the year) adds its win to the pit's and the scope's
    and nothing to their expectation: their ``expected_cents`` is then None."""
    per = _per_table(rows, only)
    first = {"day": day, "month_to_date": day.replace(day=1), "year_to_date": day.replace(month=1, day=1)}
    tables = []
    # per period: [rounds, win, expected, variance, complete]
    groups: dict[str | None, dict[str, list[Any]]] = {}
    scope = {p: [0, 0, 0.0, 0.0, True] for p in PERIODS}
    start = first["month_to_date" if series == "month" else "year_to_date"]
    daily: dict[str, list[Any]] = {}
    for t in sorted(per):
        days = per[t]
        ref = _reference(days, min_rounds)
        row: dict[str, Any] = {"table_id": t, "pit": pits.get(t)}
        g = groups.setdefault(pits.get(t), {p: [0, 0, 0.0, 0.0, True] for p in PERIODS})
        for p in PERIODS:
            cells = [c for dd, c in days.items() if dd >= first[p].isoformat()]
            n, win = sum(c["rounds"] for c in cells), sum(c["win_cents"] for c in cells)
            exp, var = (n * ref[0], n * ref[1]) if ref else (None, None)
            row[p] = _judge(n, win, exp, var)
            for acc in (g[p], scope[p]):
                acc[0] += n
                acc[1] += win
                if ref:
                    acc[2] += exp
                    acc[3] += var
                elif n:
                    acc[4] = False
        for dd, c in days.items():
            if dd >= start.isoformat():
                acc = daily.setdefault(dd, [0, 0.0, 0.0, True])
                acc[0] += c["win_cents"]
                if ref:
                    acc[1] += c["rounds"] * ref[0]
                    acc[2] += c["rounds"] * ref[1]
                elif c["rounds"]:
                    acc[3] = False
        tables.append(row)

    def judged(acc: dict[str, list[Any]]) -> dict[str, Any]:
        return {p: _judge(a[0], a[1], a[2] if a[4] else None, a[3] if a[4] else None) for p, a in acc.items()}

    points, cum = [], [0, 0.0, 0.0, True]
    d = start
    while d <= day:
        acc = daily.get(d.isoformat(), [0, 0.0, 0.0, True])
        cum = [cum[0] + acc[0], cum[1] + acc[1], cum[2] + acc[2], cum[3] and acc[3]]
        points.append({"gaming_day": d.isoformat(), "win_cents": cum[0],
                       "expected_cents": round(cum[1]) if cum[3] else None,
                       "band_cents": round(Z95 * math.sqrt(cum[2])) if cum[3] else None})
        d += _dt.timedelta(days=1)
    return {"schema": "threecard.floor-figures/1", "gaming_day": day.isoformat(), "band": {"z": Z95,
            "min_rounds": min_rounds}, "tables": tables,
            "pits": [{"pit": p, **judged(acc)} for p, acc in sorted(groups.items(), key=lambda kv: kv[0] or "")],
            "scope": judged(scope), "series": points, "series_from": start.isoformat()}
