"""The session page at 2,000 turns in Chromium: zoom, filters, grouped markers and search, served and as a file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli import app

from .conftest import LongLedger, Server, Watched, screenshot_dir
from .longsession import NEEDLE
from .test_browser import markers, ready

SID = "incident-2000"
PNG = b"\x89PNG\r\n\x1a\n"
ROWS = (
    "n => document.querySelector(\"#reductions-part [data-pager='reductions'] .where\")"
    ".textContent.endsWith(n + ' rows')"
)
"""Wait until the file's reductions listing holds ``n`` rows after its filters."""


def drag(page: Any, selector: str, start: float, end: float) -> None:
    """Drag across the element ``selector`` from ``start`` to ``end`` (shares of its width)."""
    box = page.locator(selector).bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * end, y + 4, steps=8)
    page.mouse.up()


def shown(page: Any) -> dict[str, str]:
    found: dict[str, str] = page.evaluate("({...document.getElementById('timeline').dataset})")
    return found


def listed(page: Any) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = page.locator("#reductions-part tbody tr").evaluate_all(
        "rows => rows.filter(r => !r.hidden).map(r => ({...r.dataset}))"
    )
    return rows


def save(page: Any, name: str, tmp_path: Path) -> None:
    data = page.screenshot(path=str(tmp_path / name))
    assert data.startswith(PNG)
    target = screenshot_dir()
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(data)


def test_zoom_groups_and_filters_at_2000_turns(
    page: Any, long_server: Server, long_ledger: LongLedger, tmp_path: Path
) -> None:
    with Ledger.connect(long_ledger.url, read_only=True) as ledger:
        reductions = ledger.reductions(SID)
    page.set_viewport_size({"width": 1500, "height": 1250})
    page.goto(f"{long_server.base}/session?id={SID}")
    whole = ready(page)
    assert whole["full"] == "1"
    assert int(whole["reductionsShown"]) == len(reductions)
    # over 1,200 reductions cannot be drawn apart on 1,400 pixels: they are grouped, counted in the tip
    assert int(whole["grouped"]) > 0
    assert int(whole["markers"]) < len(reductions) / 4
    group = max((m for m in markers(page) if m["kind"] == "reduction"), key=lambda m: len(m["idx"]))
    page.mouse.move(group["page_x"], group["page_y"])
    page.locator("#chart-tip").wait_for(state="visible")
    assert f"{len(group['idx'])} reductions" in page.locator("#chart-tip").inner_text()
    save(page, "web-session.png", tmp_path)

    # zoom: drag across a tenth of the chart
    drag(page, "#plot-main .u-over", 0.45, 0.55)
    page.wait_for_function("() => document.getElementById('timeline').dataset.full === '0'")
    zoomed = shown(page)
    low, high = float(zoomed["xMin"]), float(zoomed["xMax"])
    assert high - low < (float(whole["xMax"]) - float(whole["xMin"])) / 5
    inside = [r for r in reductions if low <= r.created_at.timestamp() <= high]
    assert int(zoomed["reductionsShown"]) == len(inside)
    assert int(zoomed["markers"]) > int(zoomed["grouped"])  # closer in, markers stand apart
    # the listing follows the zoom, filtered and paged on the server; the URL keeps the range
    page.wait_for_function(
        "() => (document.querySelector('#reductions-part .filter-note') || {}).textContent.includes('between')"
    )
    rows = listed(page)
    assert rows
    assert all(low - 0.01 <= float(r["t"]) <= high + 0.01 for r in rows)
    assert f"{len(inside)} of {len(reductions)} match" in page.locator("#reductions-part .filter-note").inner_text()
    query = parse_qs(urlparse(page.url).query)
    assert abs(float(query["from"][0]) - low) < 0.01
    save(page, "web-zoomed.png", tmp_path)

    # filter: leave out the per-turn trims and the writer
    per_turn = sum(1 for r in inside if r.trigger == "per_turn")
    page.uncheck("#filters input[name='trigger'][value='per_turn']")
    page.wait_for_function(
        "n => document.getElementById('timeline').dataset.reductionsShown === String(n)", arg=len(inside) - per_turn
    )
    page.wait_for_function("() => !document.querySelector('#reductions-part tr[data-trigger=\"per_turn\"]')")
    assert {r["trigger"] for r in listed(page)} <= {"proactive", "reactive", "end_of_invocation", "restore"}
    page.uncheck("#filters input[name='agent_filter'][value='writer']")
    only_lead = [r for r in inside if r.agent_id == "lead" and r.trigger != "per_turn"]
    page.wait_for_function(
        "n => document.getElementById('timeline').dataset.reductionsShown === String(n)", arg=len(only_lead)
    )
    assert page.evaluate("window.contextledger.main.series[2].show") is False
    page.wait_for_function("() => !document.querySelector('#reductions-part tr[data-agent=\"writer\"]')")
    save(page, "web-filtered.png", tmp_path)
    # a reload keeps the range and the filters (they are in the URL)
    page.reload()
    again = ready(page)
    assert abs(float(again["xMin"]) - low) < 0.01
    assert page.is_checked("#filters input[name='trigger'][value='per_turn']") is False
    assert int(again["reductionsShown"]) == len(only_lead)

    # back to everything: the button, and the overview strip drags a range too
    page.check("#filters input[name='trigger'][value='per_turn']")
    page.check("#filters input[name='agent_filter'][value='writer']")
    page.click("#reset-zoom")
    page.wait_for_function("() => document.getElementById('timeline').dataset.full === '1'")
    drag(page, "#plot-overview .u-over", 0.2, 0.3)
    page.wait_for_function("() => document.getElementById('timeline').dataset.full === '0'")
    strip = shown(page)
    assert float(strip["xMin"]) < low
    # clicking a group zooms into it
    page.click("#reset-zoom")
    page.wait_for_function("() => document.getElementById('timeline').dataset.full === '1'")
    group = max((m for m in markers(page) if m["kind"] == "reduction"), key=lambda m: len(m["idx"]))
    page.mouse.click(group["page_x"], group["page_y"])
    page.wait_for_function("() => document.getElementById('timeline').dataset.full === '0'")
    page.watch.local_only(long_server.base)
    page.watch.clean()


def test_search_at_2000_turns(page: Any, long_server: Server, long_ledger: LongLedger) -> None:
    page.goto(f"{long_server.base}/session?id={SID}")
    ready(page)
    page.fill("#search-box", NEEDLE)
    page.click("#search button")
    page.wait_for_url(re.compile(r"q="))
    hits = page.locator("#search-results tbody tr")
    assert hits.count() >= 2  # the user's message, long evicted, and the summary that kept it
    assert page.locator("#search-results tr.message.evicted").count() >= 1
    assert page.locator("#search-results tr.summary").count() >= 1
    assert page.locator("#search-results mark").first.inner_text() == NEEDLE
    page.locator("#search-results tr.message a.entry-link").first.click()
    page.wait_for_url(re.compile(r"/entry\?"))
    assert parse_qs(urlparse(page.url).query)["id"] == [long_ledger.session.needle_entry]
    assert NEEDLE in page.locator("section.content").inner_text()
    page.watch.clean()


def test_the_file_of_2000_turns_zooms_filters_and_searches_offline(
    offline: Any, long_ledger: LongLedger, tmp_path: Path
) -> None:
    output = tmp_path / "long.html"
    result = CliRunner().invoke(app, ["timeline", SID, "--url", long_ledger.url, "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert output.stat().st_size < 2_000_000
    with Ledger.connect(long_ledger.url, read_only=True) as ledger:
        reductions = ledger.reductions(SID)
    page = offline.new_page()
    watch = Watched(page)
    page.goto(output.as_uri())
    page.wait_for_selector("#timeline[data-unpacked='1']")
    assert (
        page.locator("#reductions-part [data-pager='reductions'] .where")
        .inner_text()
        .endswith(f"{len(reductions)} rows")
    )
    drag(page, "#plot-main .u-over", 0.3, 0.4)
    page.wait_for_function("() => document.getElementById('timeline').dataset.full === '0'")
    zoomed = shown(page)
    low, high = float(zoomed["xMin"]), float(zoomed["xMax"])
    inside = [r for r in reductions if low <= r.created_at.timestamp() <= high]
    page.wait_for_function(ROWS, arg=len(inside))
    page.uncheck("#filters input[name='trigger'][value='per_turn']")
    rest = [r for r in inside if r.trigger != "per_turn"]
    page.wait_for_function(ROWS, arg=len(rest))
    assert {r["trigger"] for r in listed(page)} <= {"proactive", "reactive", "end_of_invocation", "restore"}
    page.fill("#search-box", "stale resolver")
    page.click("#search button")
    assert int(shown(page)["searchHits"]) >= 1
    assert NEEDLE[:20] in page.locator("#search-results tbody").inner_text()
    watch.clean()
    assert [u for u in watch.requested if not u.startswith(("file:", "data:"))] == []
