"""Hostile content in every field and id, on every page and in the timeline file: shown as text, never run.

The ledger is written at the lowest level (changesets straight to the store, see
:mod:`tests.web.hostile`), so it holds ids an import would refuse. Each page is opened
in Chromium with a watcher installed before any of its scripts: the test fails if any
payload ran (``window.__pwned``), opened a dialog, raised a script error, or was refused
by the Content-Security-Policy (a refusal means the escaping let it through).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli import app
from contextledger.web.app import create_app
from contextledger.web.security import SERVED_HEADERS, served_policy

from .conftest import Server, Watched, serving
from .hostile import AGENTS, SESSION, build_hostile, evil
from .test_browser import markers, ready


@dataclass(frozen=True)
class Hostile:
    path: Path
    url: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    path = tmp_path_factory.mktemp("hostile") / "hostile.db"
    url = f"sqlite:///{path}"
    return Hostile(path=path, url=url, ids=build_hostile(url))


@pytest.fixture(scope="module")
def hostile_server(hostile: Hostile, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(hostile.path, tmp_path_factory.mktemp("serve-hostile")) as running:
        yield running


def url(server: Server, route: str, **params: str) -> str:
    return f"{server.base}/{route}?{urlencode(params)}"


def visit(page: Any, address: str, *, status: int = 200) -> None:
    reply = page.goto(address)
    assert reply.status == status, address
    if page.locator("#timeline").count():
        ready(page)


def hover_everything(page: Any) -> list[str]:
    """Hover every marker the chart drew; return the texts of its tooltips."""
    tips = []
    for m in markers(page):
        page.mouse.move(m["page_x"], m["page_y"])
        tip = page.locator("#chart-tip")
        tip.wait_for(state="visible")
        tips.append(tip.inner_text())
    return tips


def head(text: str) -> str:
    """The start of a payload: what a preview of it shows whatever its cut."""
    return text[:40]


def test_every_served_page_shows_hostile_content_as_text(page: Any, hostile_server: Server, hostile: Hostile) -> None:
    ids = hostile.ids
    agent, other = AGENTS
    visit(page, hostile_server.base + "/")
    assert page.locator("#sessions a.session-link").inner_text() == SESSION
    assert set(page.locator("#sessions a.chip").all_inner_texts()) == set(AGENTS)

    visit(page, hostile_server.base + "/?" + urlencode({"q": evil("sessions-query")}))
    assert page.locator("#search").input_value() == evil("sessions-query")

    visit(page, url(hostile_server, "session", id=SESSION))
    assert page.locator("h1.session-id").inner_text() == SESSION
    data = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent)")
    assert [a["id"] for a in data["agents"]] == sorted(AGENTS)
    main = page.locator("main").inner_text()
    for field in ("error", "detail", "strategy", "manager", "summary", "truncating"):
        assert head(evil(field)) in main, field
    assert evil("pin")[:32] in main
    assert head(evil("text")) in main
    tips = "\n".join(hover_everything(page))
    assert agent in tips
    assert other in tips
    assert evil("strategy") in tips
    assert evil("pin")[:32] in tips

    for who in AGENTS:
        visit(page, url(hostile_server, "session", id=SESSION, agent=who))
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        text = page.locator("main").inner_text()
        assert head(json.dumps(evil("state-value"), ensure_ascii=False)[1:]) in text  # shown as JSON
        assert head(evil("summary")) in text
        hover_everything(page)

    # a search for the payload itself, and filters whose values are payloads
    visit(page, url(hostile_server, "session", id=SESSION, q="<script>window.__pwned"))
    assert page.locator("#search-results mark").count() > 0
    assert page.locator("#search-results mark").first.inner_text().lower() == "<script>window.__pwned"
    address = url(hostile_server, "session", id=SESSION, trigger=evil("trigger"), strategy=evil("strategy"))
    visit(page, address)
    assert head(evil("trigger")) in page.locator("#reductions-part .filter-note").inner_text()
    visit(page, url(hostile_server, "session", id=SESSION, part="reductions", trigger="reactive"))

    for name in ("prompt", "use", "result", "image", "answer", "summary"):
        for who, tag in ((agent, ""), (other, "2")):
            visit(page, url(hostile_server, "entry", session=SESSION, agent=who, id=ids[name] + tag))
            assert page.locator("code.entry-id").inner_text() == ids[name] + tag
    page.goto(url(hostile_server, "entry", session=SESSION, agent=agent, id=ids["use"]))
    assert page.locator(".tool.use code").inner_text() == evil("tool")
    page.goto(url(hostile_server, "entry", session=SESSION, agent=agent, id=ids["image"]))
    assert page.locator("figure.image img").count() == 1  # the png; the hostile format is only described
    for name in ("reduction", "truncation"):
        visit(page, url(hostile_server, "reduction", session=SESSION, agent=agent, id=ids[name]))
        assert page.locator("code.entry-id").inner_text() == ids[name]
    assert page.locator("dd.reason").inner_text() == evil("detail")
    page.watch.local_only(hostile_server.base)
    page.watch.clean()


def test_error_pages_show_hostile_ids_as_text(context: Any, hostile_server: Server) -> None:
    page = context.new_page()
    watch = Watched(page)
    cases = [
        (url(hostile_server, "session", id=evil("missing-session")), 404, evil("missing-session")),
        (url(hostile_server, "entry", session=SESSION, agent=AGENTS[0], id=evil("missing")), 404, evil("missing")),
        (url(hostile_server, "reduction", session=SESSION, agent=AGENTS[0], id=evil("gone")), 404, evil("gone")),
        (url(hostile_server, "session", id=SESSION, rpage=evil("page")), 400, evil("page")),
        (url(hostile_server, "session", id=SESSION, part=evil("part")), 400, evil("part")),
    ]
    for address, status, shown in cases:
        reply = page.goto(address)
        assert reply.status == status
        message = page.locator(".error-message").inner_text()
        assert shown.split('"')[0] in message  # the id, quoted as the error quotes it
        assert "<script>window.__pwned" in message
    # the only errors are the failed loads of the pages themselves
    watch.errors = [e for e in watch.errors if "the server responded with a status of" not in e]
    watch.clean()


def test_the_timeline_file_shows_hostile_content_as_text(offline: Any, hostile: Hostile, tmp_path: Path) -> None:
    output = tmp_path / "hostile.html"
    result = CliRunner().invoke(app, ["timeline", SESSION, "--url", hostile.url, "-o", str(output)])
    assert result.exit_code == 0, result.output
    page = offline.new_page()
    watch = Watched(page)
    page.goto(output.as_uri())
    page.wait_for_selector("#timeline[data-unpacked='1']")
    assert page.locator("h1.session-id").inner_text() == SESSION
    text = page.locator("main").inner_text()
    for field in ("error", "detail", "strategy", "manager", "summary", "text"):
        assert head(evil(field)) in text, field
    tips = "\n".join(hover_everything(page))
    assert AGENTS[0] in tips
    # a lone marker leads to its reduction's row, whose id is a payload
    lone = [m for m in markers(page) if m["kind"] == "reduction" and len(m["idx"]) == 1]
    assert lone
    page.mouse.click(lone[0]["page_x"], lone[0]["page_y"])
    page.wait_for_function("() => location.hash.length > 1")
    target = page.evaluate("decodeURIComponent(location.hash.slice(1))")
    assert target.startswith("r-")
    assert target[2:] in set(hostile.ids.values()) | {v + "2" for v in hostile.ids.values()}
    assert page.locator(f"[id={_css_string(target)}]").is_visible()
    # the file's own search, for the payload
    page.fill("#search-box", "<script>window.__pwned")
    page.click("#search button")
    assert int(page.evaluate("document.getElementById('timeline').dataset.searchHits")) > 0
    watch.clean()
    assert [u for u in watch.requested if not u.startswith(("file:", "data:"))] == []


def _css_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ") + '"'


def test_every_response_carries_the_policy_and_nosniff(hostile: Hostile) -> None:
    with Ledger.connect(hostile.url, read_only=True) as ledger:
        client = TestClient(create_app(ledger))
        replies = [
            client.get("/"),
            client.get("/session", params={"id": SESSION}),
            client.get("/session", params={"id": SESSION, "part": "reductions"}),
            client.get("/entry", params={"session": SESSION, "agent": AGENTS[0], "id": hostile.ids["prompt"]}),
            client.get("/reduction", params={"session": SESSION, "agent": AGENTS[0], "id": hostile.ids["reduction"]}),
            client.get("/session", params={"id": "nope"}),
            client.get("/session", params={"id": SESSION, "rpage": "x"}),
            client.get("/static/style.css"),
            client.get("/static/session.js"),
            client.get("/static/vendor/uPlot.iife.min.js"),
            client.get("/healthz"),
        ]
    assert [r.status_code for r in replies] == [200, 200, 200, 200, 200, 404, 400, 200, 200, 200, 200]
    for reply in replies:
        assert reply.headers["content-security-policy"] == served_policy()
        assert reply.headers["x-content-type-options"] == "nosniff"
        for name, value in SERVED_HEADERS.items():
            assert reply.headers[name] == value
    policy = served_policy()
    assert "'unsafe-inline'" not in policy
    assert "'unsafe-eval'" not in policy
    assert "script-src 'self'" in policy
    assert replies[8].headers["content-type"].startswith(("text/javascript", "application/javascript"))
