"""The floor's figures with their 95 % band, per table, per pit and for the person's view, and
the plot of settled against expected win (table/floor/figures.py). The numbers are worked out
here from the rounds the tables signed, not read back from the floor: each table has 40 rounds
in February won and lost alternately (1000 cents each), then loses all 12 rounds of 5 March."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from console_helpers import close_contexts, chromium_path, screenshot_dir
from floor_helpers import call, database  # noqa: F401  (fixtures)
from test_floor_roles import FLUCTUATION_DAY, Clock, floor_of_two_pits, token  # noqa: F401  (fixture)
from test_floor_roles_page import floor_server, sign_in
from floor_helpers import SignedTable
from test_floor_roles import fluctuating

pytestmark = pytest.mark.timeout(180)

#: one table's rounds' wins, as the table saw them (its win is minus the players' net)
WINS = [(-1000 if n % 2 == 0 else 1000) for n in range(40)] + [-1000] * 12
MEAN = sum(WINS) / len(WINS)
VAR = sum(w * w for w in WINS) / len(WINS) - MEAN ** 2
DAY_EXPECTED = round(12 * MEAN)
DAY_BAND = round(1.96 * math.sqrt(12 * VAR))


def test_the_figures_give_each_table_pit_and_view_its_expected_win_and_95_percent_band(floor_of_two_pits):
    floor, server, _ = floor_of_two_pits
    fm = token(server, "FM-1")
    status, f = call(server, f"/api/v1/floor/figures?day={FLUCTUATION_DAY}", token=fm)
    assert status == 200, f
    by_table = {t["table_id"]: t for t in f["tables"]}
    assert set(by_table) == {"pit1-tcp-01", "pit2-tcp-01"}
    for t in by_table.values():
        assert t["day"] == {"rounds": 12, "win_cents": -12000, "expected_cents": DAY_EXPECTED,
                            "band_cents": DAY_BAND, "outside": True}
        assert t["year_to_date"]["rounds"] == 52 and t["year_to_date"]["outside"] is False
    assert [p["pit"] for p in f["pits"]] == ["pit1", "pit2"]
    assert f["pits"][0]["day"] == by_table["pit1-tcp-01"]["day"]
    # the view: the expectations add, and so do the variances (independent tables)
    assert f["scope"]["day"] == {"rounds": 24, "win_cents": -24000, "expected_cents": round(24 * MEAN),
                                 "band_cents": round(1.96 * math.sqrt(24 * VAR)), "outside": True}
    # the plot's series: cumulative, day by day from the 1st of the month
    assert [p["gaming_day"] for p in f["series"]] == [f"2026-03-0{d}" for d in range(1, 6)]
    assert f["series"][0] == {"gaming_day": "2026-03-01", "win_cents": 0, "expected_cents": 0, "band_cents": 0}
    assert f["series"][-1] == {"gaming_day": FLUCTUATION_DAY, "win_cents": -24000, "expected_cents": round(24 * MEAN),
                               "band_cents": round(1.96 * math.sqrt(24 * VAR))}
    status, y = call(server, f"/api/v1/floor/figures?day={FLUCTUATION_DAY}&series=year", token=fm)
    assert status == 200 and y["series"][0]["gaming_day"] == "2026-01-01" and len(y["series"]) == 31 + 28 + 5
    assert y["series"][-1]["win_cents"] == -24000


def test_a_pit_boss_gets_the_figures_of_their_pits_only(floor_of_two_pits):
    floor, server, _ = floor_of_two_pits
    pb = token(server, "PB-1")
    status, f = call(server, f"/api/v1/floor/figures?day={FLUCTUATION_DAY}", token=pb)
    assert status == 200
    assert [t["table_id"] for t in f["tables"]] == ["pit1-tcp-01"] and [p["pit"] for p in f["pits"]] == ["pit1"]
    assert f["scope"]["day"]["win_cents"] == -12000 and f["series"][-1]["win_cents"] == -12000
    assert call(server, f"/api/v1/floor/figures?day={FLUCTUATION_DAY}&pit=pit2", token=pb)[0] == 403
    assert call(server, f"/api/v1/floor/figures?day={FLUCTUATION_DAY}&table=pit2-tcp-01", token=pb)[0] == 404
    status, one = call(server, f"/api/v1/floor/figures?day={FLUCTUATION_DAY}&table=pit1-tcp-01", token=pb)
    assert status == 200 and [t["table_id"] for t in one["tables"]] == ["pit1-tcp-01"]
    assert call(server, "/api/v1/floor/figures?series=decade", token=pb)[0] == 400
    assert call(server, "/api/v1/floor/figures")[0] == 401


CHROMIUM = chromium_path()


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_page_plots_settled_against_expected_win_with_the_band_on_a_phone(chromium, tmp_path):
    a = SignedTable(tmp_path / "a", "pit1-tcp-01", "pit1")
    store, floor, server = floor_server(tmp_path, (a,), Clock(dt.datetime(2026, 3, 5, 22, 0, tzinfo=dt.timezone.utc)))
    try:
        for topic, payload in [a.status(), *fluctuating(a)]:
            assert floor.receive(topic, payload.encode())
        assert floor.wait_idle(30)
        browser = chromium
        try:
            page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            sign_in(page, server.url, "PB-1")
            page.wait_for_selector("#plot polyline.settled")
            assert page.locator("#plot polygon.band-area").count() == 1
            assert page.locator("#plot polyline.expected").count() == 1
            caption = page.inner_text("#plot-caption")
            assert "-$120.00 settled" in caption and f"{DAY_EXPECTED / 100:.2f}".lstrip("-") in caption, caption
            day_row = page.locator('[data-band="pit:pit1"] tr[data-period="day"]')
            assert "outside the band" in day_row.inner_text()
            assert "outside" not in page.locator('[data-band="pit:pit1"] tr[data-period="year_to_date"]').inner_text()
            page.select_option("#plot-span", "year")
            page.wait_for_function("() => /from 2026-01-01/.test(document.querySelector('#plot-caption').textContent)")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.locator("#plot-box").screenshot(path=str(screenshot_dir() / "floor-plot-390px.png"))
            assert errors == []
        finally:
            close_contexts(browser)
    finally:
        server.close()
        floor.close()
        store.close()
        a.close()


def test_a_pit_boss_cannot_open_another_pits_table_or_grid_by_its_address(floor_of_two_pits):
    """The attack: PB-1 (pit1) types pit2's table into the address, or asks the grid for pit2:
    nothing of pit2 comes back (404 as for a table the floor never heard of; 403 for the pit)."""
    floor, server, _ = floor_of_two_pits
    pb, fm = token(server, "PB-1"), token(server, "FM-1")
    status, body = call(server, "/api/v1/floor/table/pit2-tcp-01", token=pb)
    assert status == 404 and "pit2 table held" not in str(body)
    assert call(server, "/api/v1/floor/table/pit9-never-heard", token=pb)[0] == 404
    status, mine = call(server, "/api/v1/floor/pit", token=pb)
    assert status == 200 and [t["table_id"] for t in mine["tables"]] == ["pit1-tcp-01"]
    assert call(server, "/api/v1/floor/pit?pit=pit2", token=pb)[0] == 403
    status, theirs = call(server, f"/api/v1/floor/table/pit2-tcp-01?day={FLUCTUATION_DAY}", token=fm)
    assert status == 200 and theirs["day"]["rounds"] == 12 and theirs["day"]["win_cents"] == -12000
    assert len(theirs["rounds"]) == 50 and theirs["more"] is True  # 52 rounds: a page of 50
    older = call(server, f"/api/v1/floor/table/pit2-tcp-01?before={theirs['rounds'][-1]['seq']}", token=fm)[1]
    assert len(older["rounds"]) == 2 and older["more"] is False
    assert call(server, "/api/v1/floor/table/pit2-tcp-01?before=x", token=fm)[0] == 400
    assert call(server, "/api/v1/floor/table/pit2-tcp-01")[0] == 401
