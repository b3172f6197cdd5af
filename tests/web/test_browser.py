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

from .conftest import MULTI, DemoLedger, Server, Watched


def ready(page: Any) -> dict[str, str]:
    """Wait for the chart's script to finish its first draw; return the figure's data attributes."""
    page.wait_for_selector("#timeline[data-ready='1']")
    found: dict[str, str] = page.evaluate("({...document.getElementById('timeline').dataset})")
    return found


def markers(page: Any) -> list[dict[str, Any]]:
    """What the chart drew, each with its centre in page coordinates."""
    box = page.locator("#plot-main .u-over").bounding_box()
    drawn: list[dict[str, Any]] = page.evaluate("window.contextledger.markers()")
    for m in drawn:
        m["page_x"], m["page_y"] = box["x"] + m["x"], box["y"] + m["y"]
    return drawn


def a_lone_reduction(page: Any) -> dict[str, Any]:
    """A reduction marker drawn alone; zoomed in on a group while the demo's fast commits share one."""
    for _ in range(8):
        drawn = [m for m in markers(page) if m["kind"] == "reduction"]
        single = [m for m in drawn if len(m["idx"]) == 1]
        if single:
            return single[0]
        group = max(drawn, key=lambda m: len(m["idx"]))
        page.evaluate(
            """(x) => new Promise((done) => {
                const u = window.contextledger.main;
                const at = u.posToVal(x, "x"), span = (u.scales.x.max - u.scales.x.min) / 16;
                u.setScale("x", { min: at - span, max: at + span });
                requestAnimationFrame(() => requestAnimationFrame(done));
            })""",
            group["x"],
        )
    raise AssertionError("no reduction is drawn alone, even zoomed in on a group")


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
    page.watch.local_only(server.base)
    page.watch.clean()


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
    assert 3 <= len(reductions) <= 50
    shown = ready(page)
    assert shown["full"] == "1"
    assert int(shown["reductionsShown"]) == len(reductions)
    triggers = set(page.locator("#filters input[name='trigger']").evaluate_all("els => els.map(e => e.value)"))
    assert triggers == {r.trigger for r in reductions}
    assert page.locator("#reductions-part tbody tr").count() == len(reductions)
    assert page.locator(f"#view-{agent} tbody tr").count() == min(len(snapshot.entries), 40)
    # hovering a marker tells what it stands for; clicking a lone one opens that reduction
    target = a_lone_reduction(page)
    page.mouse.move(target["page_x"], target["page_y"])
    tip = page.locator("#chart-tip")
    tip.wait_for(state="visible")
    reduction = reductions[target["idx"][0]]
    assert f"call {reduction.model_call_count}" in tip.inner_text()
    assert f"{reduction.trigger} · {reduction.strategy}" in tip.inner_text()
    page.mouse.click(target["page_x"], target["page_y"])
    page.wait_for_url(re.compile(r"/reduction\?"))
    assert parse_qs(urlparse(page.url).query)["id"] == [reduction.reduction_id]
    assert reduction.trigger in page.locator("h1").inner_text()
    assert page.locator("dd.reason").inner_text().strip() != ""
    page.watch.local_only(server.base)
    page.watch.clean()


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
    # the summaries section shows a chain of superseded summaries
    chain = page.locator("#summaries-support p.chain").first
    assert "supersedes" in chain.inner_text()
    # an evicted entry's page says which reduction took it, why, and which summary replaced it
    evicted.first.locator("a.entry-link").click()
    page.wait_for_url(re.compile(r"/entry\?"))
    facts = page.locator("dl.facts").inner_text()
    assert "evicted" in facts
    assert "proactive" in facts
    assert "summarizing" in facts
    page.locator("a.into").first.click()
    assert page.locator("h1 .role").inner_text().lower() == "summary"
    assert page.locator("table.entries tbody tr").count() > 0
    page.watch.clean()


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
    # the pinned goal says so, with the pin drawn as an icon (no emoji font needed)
    page.goto(f"{server.base}/entry?session={MULTI}&agent=lead&id={demo_ledger.pinned_id}")
    assert "pinned" in page.locator(".pin.big").inner_text()
    assert page.locator(".pin.big svg.icon.pin path").count() == 1
    assert "📌" not in page.content()
    page.watch.clean()


def test_pins_show_when_and_who_asked_with_an_icon_and_a_legend(
    page: Any, server: Server, demo_ledger: DemoLedger
) -> None:
    with Ledger.connect(demo_ledger.url) as ledger:
        events = ledger.pin_history(MULTI, "lead")
    assert events
    page.goto(f"{server.base}/session?id={MULTI}&agent=lead")
    ready(page)
    rows = page.locator("#pins-lead tbody tr")
    assert rows.count() == len(events)
    newest = rows.first  # newest first
    assert newest.locator("td.source").inner_text() == events[-1].source
    assert newest.locator("svg.icon.pin").count() == 1
    assert "Goal: compare three vector databases" in rows.last.inner_text()
    # the legend names both pin icons
    legend = page.locator("figcaption.legend")
    assert legend.locator(".key.pin svg.icon.pin").count() == 2
    assert "pinned" in legend.inner_text()
    assert "unpinned" in legend.inner_text()
    # the chart draws each change at the time it committed; its tip names the model call and who asked
    pins = [m for m in markers(page) if m["kind"] == "pin"]
    assert len(pins) == len(events)
    page.mouse.move(pins[0]["page_x"], pins[0]["page_y"])
    page.locator("#chart-tip").wait_for(state="visible")
    tip = page.locator("#chart-tip").inner_text()
    assert f"call {events[0].from_call}" in tip
    assert f"{'pinned' if events[0].pinned else 'unpinned'} by {events[0].source}" in tip
    page.watch.clean()


def test_truncated_tool_results_keep_their_originals(page: Any, server: Server) -> None:
    page.goto(f"{server.base}/session?id={MULTI}&agent=lead")
    revisions = page.locator("#revisions-lead article.revision")
    assert revisions.count() > 0
    revisions.first.locator("details summary").first.click()
    original = revisions.first.locator("details pre").first.inner_text()
    assert "p99 latency figures." * 2 in original.replace(" p99", "p99")
    revisions.first.locator("header a").click()
    assert page.locator("section.original").count() >= 1
    page.watch.clean()


def test_multi_agent_session_on_one_chart_and_every_link_answers(
    page: Any, server: Server, demo_ledger: DemoLedger
) -> None:
    page.goto(f"{server.base}/session?id={MULTI}")
    ready(page)
    columns = page.locator("section.agent")
    assert columns.count() == 2
    left, right = (columns.nth(i).bounding_box() for i in range(2))
    assert abs(left["y"] - right["y"]) < 2
    assert right["x"] > left["x"] + left["width"] - 1
    # one chart, one line per agent, on one clock
    assert page.evaluate("window.contextledger.main.series.length") == 3
    assert (
        page.locator("#reductions-part td.agent").evaluate_all("els => new Set(els.map(e => e.textContent)).size") == 2
    )
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
    page.watch.local_only(server.base)
    page.watch.clean()


def test_timeline_file_is_self_contained(offline: Any, demo_ledger: DemoLedger, tmp_path: Path) -> None:
    output = tmp_path / "session.html"
    before = hashlib.sha256(demo_ledger.path.read_bytes()).hexdigest()
    result = CliRunner().invoke(app, ["timeline", MULTI, "--url", demo_ledger.url, "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(demo_ledger.path.read_bytes()).hexdigest() == before
    text = output.read_text()
    # nothing of the machine it was written on: not the ledger's URL or path
    assert demo_ledger.path.name not in text
    assert str(demo_ledger.path.parent) not in text
    assert "sqlite" not in text
    page = offline.new_page()
    watch = Watched(page)
    page.goto(output.as_uri())
    page.wait_for_selector("#timeline[data-unpacked='1']")
    assert [u for u in watch.requested if not u.startswith(("file:", "data:"))] == []
    assert page.locator("section.agent").count() == 2
    assert page.evaluate("window.contextledger.main.series.length") == 3
    # every link stays in the file, and every anchor it names exists (in the page or a packed listing)
    hrefs = page.locator("a[href]").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs
    assert all(h.startswith("#") for h in hrefs), [h for h in hrefs if not h.startswith("#")][:5]
    missing = page.evaluate(
        """hrefs => hrefs.filter(h => {
            const id = h.slice(1);
            if (document.getElementById(id)) return false;
            return !Object.values(window.contextledger.packed).some(p => p.rows.some(r => r.id === id));
        })""",
        sorted(set(hrefs)),
    )
    assert missing == []
    # following a link to an entry of the history shows the page of rows that holds it
    entry = page.locator("#pins-lead a").first
    entry.click()
    target = page.evaluate("decodeURIComponent(location.hash.slice(1))")
    page.wait_for_function("id => !!document.getElementById(id)", arg=target)
    assert page.locator(f"[id='{target}']").is_visible()
    # entries of the live view carry their whole content: the image is inline
    assert page.locator("figure.image img").count() == 1
    # the stylesheets and scripts are inlined, allowed by hash in the file's own policy
    assert page.locator("head style").count() == 2
    policy = page.locator("meta[http-equiv='Content-Security-Policy']").get_attribute("content")
    assert "script-src 'sha256-" in policy
    assert "unsafe-inline" not in policy
    watch.clean()
