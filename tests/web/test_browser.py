"""The web view in a real browser: headless Chromium through the pages of a demo ledger."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli import app

from .conftest import MULTI, DemoLedger, Server, screenshot_dir

PNG = b"\x89PNG\r\n\x1a\n"


def _local_only(page: Any, base: str) -> None:
    outside = [u for u in page.requested if not (u.startswith(base) or u.startswith("data:") or u.startswith("file:"))]
    assert outside == [], f"the page fetched from elsewhere: {outside}"


def test_sessions_page_lists_and_searches(page: Any, server: Server, demo_ledger: DemoLedger) -> None:
    page.goto(server.base + "/")
    with Ledger.connect(demo_ledger.url, read_only=True) as ledger:
        expected = {s.session_id for s in ledger.sessions()}
    listed = set(page.locator("#sessions a.session-link").all_inner_texts())
    assert listed == expected
    assert MULTI in listed
    assert page.locator("#sessions tr", has_text=MULTI).locator("a.chip").all_inner_texts() == ["lead", "writer"]
    page.fill("#search", "triage")
    page.click("form.search button")
    page.wait_for_url(re.compile(r"q=triage"))
    assert page.locator("#sessions a.session-link").all_inner_texts() == ["demo-3-triage"]
    page.fill("#search", "no-such-session")
    page.click("form.search button")
    assert "No session id contains" in page.locator("main").inner_text()
    _local_only(page, server.base)


def test_session_page_draws_every_reduction_and_the_live_view(
    page: Any, server: Server, demo_ledger: DemoLedger
) -> None:
    page.goto(server.base + "/")
    page.click("a.session-link:text('demo-3-triage')")
    page.wait_for_url(re.compile(r"/session\?id=demo-3-triage"))
    with Ledger.connect(demo_ledger.url, read_only=True) as ledger:
        (agent,) = ledger.agents("demo-3-triage")
        reductions = ledger.reductions("demo-3-triage", agent)
        snapshot = ledger.store.load("demo-3-triage", agent)
    assert snapshot is not None
    assert len(reductions) >= 3
    tokens_panel = page.locator("svg.timeline g.panel.tokens")
    assert tokens_panel.locator("g.marker").count() == len(reductions)
    triggers = {t for t in tokens_panel.locator("g.marker").evaluate_all("els => els.map(e => e.classList[1])")}
    assert triggers == {f"t-{r.trigger}" for r in reductions}
    titles = tokens_panel.locator("g.marker title").all_text_contents()
    assert titles[0].startswith(
        f"call {reductions[0].model_call_count}: {reductions[0].trigger} · {reductions[0].strategy}"
    )
    assert page.locator(f"#reductions-{agent} tbody tr").count() == len(reductions)
    assert page.locator(f"#view-{agent} tbody tr").count() == len(snapshot.entries)
    # a marker links to its reduction's row
    page.locator("svg.timeline g.panel.tokens a.marker-link circle").first.click()
    page.wait_for_url(re.compile(rf"#r-{reductions[0].reduction_id}$"))
    assert page.locator(f"#r-{reductions[0].reduction_id}").count() == 1
    _local_only(page, server.base)


def test_full_history_greys_evicted_entries_and_links_to_each_entry(
    page: Any, server: Server, demo_ledger: DemoLedger
) -> None:
    page.goto(f"{server.base}/session?id=demo-2-support&agent=support")
    history = page.locator("#history-support")
    evicted = history.locator("tr.evicted")
    assert evicted.count() > 0
    active_color = history.locator("tr.active td.num").first.evaluate("e => getComputedStyle(e).color")
    evicted_color = evicted.first.locator("td.num").first.evaluate("e => getComputedStyle(e).color")
    assert evicted_color != active_color
    assert history.locator("tr.summary").count() > 0
    # the summaries section shows a chain of superseded summaries and what each replaced
    chain = page.locator("#summaries-support p.chain").first
    assert "supersedes" in chain.inner_text()
    # an evicted entry's page says which reduction took it and which summary replaced it
    evicted.first.locator("a.entry-link").click()
    page.wait_for_url(re.compile(r"/entry\?"))
    facts = page.locator("dl.facts").inner_text()
    assert "evicted" in facts
    assert "proactive" in facts
    assert "summarizing" in facts
    page.locator("a.into").first.click()
    assert page.locator("h1 .role").inner_text().lower() == "summary"
    assert page.locator("table.entries tbody tr").count() > 0


def test_entry_page_draws_images_and_links_tool_pairs(page: Any, server: Server, demo_ledger: DemoLedger) -> None:
    page.goto(f"{server.base}/entry?session={MULTI}&agent=lead&id={demo_ledger.image_id}")
    image = page.locator("figure.image img")
    assert image.get_attribute("src").startswith("data:image/png;base64,")
    assert image.evaluate("img => img.complete && img.naturalWidth") == 24
    assert page.locator(".pin.big").count() == 0
    page.goto(f"{server.base}/entry?session={MULTI}&agent=lead&id={demo_ledger.tool_use_id}")
    assert page.locator(".tool.use code").inner_text() == "search"
    page.click("a.pair")
    page.wait_for_url(re.compile(demo_ledger.tool_result_id))
    assert page.locator(".tool.result").count() == 1
    page.click("a.pair")
    assert parse_qs(urlparse(page.url).query)["id"] == [demo_ledger.tool_use_id]
    # the pinned goal says so
    page.goto(f"{server.base}/entry?session={MULTI}&agent=lead&id={demo_ledger.pinned_id}")
    assert "pinned" in page.locator(".pin.big").inner_text()


def test_pins_show_when_and_who_asked(page: Any, server: Server, demo_ledger: DemoLedger) -> None:
    with Ledger.connect(demo_ledger.url) as ledger:
        events = ledger.pin_history(MULTI, "lead")
    assert events
    page.goto(f"{server.base}/session?id={MULTI}&agent=lead")
    rows = page.locator("#pins-lead tbody tr")
    assert rows.count() == len(events)
    first = rows.first.locator("td").all_inner_texts()
    assert first[1] == ("📌 pinned" if events[0].pinned else "unpinned")
    assert first[2] == events[0].source
    assert "Goal: compare three vector databases" in first[3]
    # the chart draws each change at the first model call it affected
    titles = page.locator("svg.timeline g.pin-mark title").all_text_contents()
    for event in events:
        change = "pinned" if event.pinned else "unpinned"
        assert any(t.startswith(f"call {event.from_call}: {change} by {event.source}: ") for t in titles), titles


def test_truncated_tool_results_keep_their_originals(page: Any, server: Server) -> None:
    page.goto(f"{server.base}/session?id={MULTI}&agent=lead")
    revisions = page.locator("#revisions-lead article.revision")
    assert revisions.count() > 0
    revisions.first.locator("details summary").first.click()
    original = revisions.first.locator("details pre").first.inner_text()
    assert "p99 latency figures." * 2 in original.replace(" p99", "p99")
    revisions.first.locator("header a").click()
    assert page.locator("section.original").count() >= 1


def test_multi_agent_session_side_by_side_and_every_link_answers(
    page: Any, server: Server, demo_ledger: DemoLedger
) -> None:
    page.goto(f"{server.base}/session?id={MULTI}")
    columns = page.locator("section.agent")
    assert columns.count() == 2
    left, right = (columns.nth(i).bounding_box() for i in range(2))
    assert abs(left["y"] - right["y"]) < 2
    assert right["x"] > left["x"] + left["width"] - 1
    assert page.locator("svg.timeline").count() == 2
    hrefs = set(
        page.locator("a[href]").evaluate_all(
            "els => els.map(e => new URL(e.getAttribute('href'), document.baseURI).href)"
        )
    )
    checked = 0
    for href in sorted(hrefs):
        if not href.startswith(server.base):
            continue
        reply = page.request.get(href.split("#", 1)[0])
        assert reply.status == 200, href
        checked += 1
    assert checked > 20
    _local_only(page, server.base)


def test_screenshots(page: Any, server: Server, tmp_path: Path) -> None:
    shots = {
        "timeline.png": (f"{server.base}/session?id=demo-3-triage", 1400, 1300),
        "side-by-side.png": (f"{server.base}/session?id={MULTI}", 1600, 1200),
    }
    for name, (url, width, height) in shots.items():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(url)
        data = page.screenshot(path=str(tmp_path / name))
        assert data.startswith(PNG)
        assert len(data) > 20_000  # a drawn page, not a blank one
        target = screenshot_dir()
        if target is not None:
            target.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(data)


def test_timeline_file_is_self_contained(browser: Any, demo_ledger: DemoLedger, tmp_path: Path) -> None:
    output = tmp_path / "session.html"
    before = hashlib.sha256(demo_ledger.path.read_bytes()).hexdigest()
    result = CliRunner().invoke(app, ["timeline", MULTI, "--url", demo_ledger.url, "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(demo_ledger.path.read_bytes()).hexdigest() == before
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    try:
        page = context.new_page()
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(output.as_uri())
        assert [u for u in requested if not u.startswith(("file:", "data:"))] == []
        assert page.locator("section.agent").count() == 2
        assert page.locator("svg.timeline").count() == 2
        # every link stays in the file, and every anchor it names exists
        hrefs = page.locator("a[href]").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert hrefs
        assert all(h.startswith("#") for h in hrefs), [h for h in hrefs if not h.startswith("#")][:5]
        missing = [h for h in set(hrefs) if page.locator(f"[id='{h[1:]}']").count() == 0]
        assert missing == []
        # entries carry their whole content: the image is inline
        assert page.locator("figure.image img").count() == 1
        # a stylesheet is inlined
        assert page.locator("head style").count() == 1
    finally:
        context.close()
