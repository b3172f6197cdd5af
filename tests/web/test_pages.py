"""The pages as the server writes them (no browser): sizes, paging, filters, search, tags, why.

Run against the two-agent session of 2,000 turns each (:mod:`tests.web.longsession`)
through the ASGI app in process, with the ledger opened read-only as ``serve`` opens it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from contextledger import Ledger, Message
from contextledger.managers import SlidingWindowConversationManager
from contextledger.model.records import HistoryEntry, Reduction
from contextledger.stores.capabilities import complete
from contextledger.web.app import create_app
from contextledger.web.render import standalone_session
from contextledger.web.timeline import why

from .conftest import LongLedger
from .longsession import NEEDLE

SID = "incident-2000"


@pytest.fixture(scope="module")
def ledger(long_ledger: LongLedger) -> Iterator[Ledger]:
    with Ledger.connect(long_ledger.url, read_only=True) as opened:
        yield opened


@pytest.fixture(scope="module")
def client(ledger: Ledger) -> TestClient:
    return TestClient(create_app(ledger))


def chart_of(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', html, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def rows_of(html: str, table: str = "reductions") -> list[dict[str, str]]:
    """The reductions listed: each row's data attributes."""
    body = html.split(f'<table class="{table}"', 1)[1].split("</table>", 1)[0]
    return [dict(re.findall(r'data-([a-z]+)="([^"]*)"', tr)) for tr in re.findall(r"<tr id=\"r-[^>]*>", body)]


def test_the_session_of_2000_turns_fits_in_one_page_under_a_megabyte(client: TestClient, ledger: Ledger) -> None:
    reply = client.get("/session", params={"id": SID})
    assert reply.status_code == 200
    assert len(reply.content) < 1_000_000, len(reply.content)
    chart = chart_of(reply.text)
    agents = chart["agents"]
    assert isinstance(agents, list)
    assert [a["id"] for a in agents] == ["lead", "writer"]
    for a in agents:
        reductions = ledger.reductions(SID, a["id"])
        assert a["reductions"]["id"] == [r.reduction_id for r in reductions]  # every one, in commit order
        assert len(a["pins"]["t"]) == len(ledger.pin_history(SID, a["id"]))
        snap = ledger.store.load(SID, a["id"])
        assert snap is not None
        assert a["now"]["calls"] == snap.state.model_call_count
    assert len(rows_of(reply.text)) == 50  # the listing is paged on the server
    assert "page 1 of 25" in reply.text


def test_agents_share_one_clock(client: TestClient, ledger: Ledger) -> None:
    chart = chart_of(client.get("/session", params={"id": SID}).text)
    lead, writer = chart["agents"]
    for a in (lead, writer):
        times = a["reductions"]["t"]
        assert times == sorted(times)
        assert a["start"] <= times[0] <= times[-1] <= a["now"]["t"]
    # each agent's reductions are placed at their commit time, not at their own call count:
    # the lead makes two calls a turn, the writer one, yet their spans overlap in time
    assert lead["reductions"]["call"][-1] > 1.5 * writer["reductions"]["call"][-1]
    assert abs(lead["start"] - writer["start"]) < 600
    by_time = {r.reduction_id: r.created_at.timestamp() for r in ledger.reductions(SID)}
    assert all(
        abs(by_time[i] - t) < 0.01 for i, t in zip(writer["reductions"]["id"], writer["reductions"]["t"], strict=True)
    )


def test_reductions_are_paged_and_filtered_on_the_server(client: TestClient, ledger: Ledger) -> None:
    everything = ledger.reductions(SID)
    first = rows_of(client.get("/session", params={"id": SID}).text)
    second = rows_of(client.get("/session", params={"id": SID, "rpage": 2}).text)
    assert len(second) == 50
    assert {r["t"] for r in first}.isdisjoint({r["t"] for r in second}) or first != second
    assert float(first[-1]["t"]) >= float(second[0]["t"])  # newest first, continued
    reactive = [r for r in everything if r.trigger == "reactive"]
    html = client.get("/session", params={"id": SID, "trigger": "reactive"}).text
    listed = rows_of(html)
    assert {r["trigger"] for r in listed} == {"reactive"}
    assert len(listed) == min(50, len(reactive))
    assert f"{len(reactive)} of {len(everything)} match" in html
    html = client.get("/session", params={"id": SID, "strategy": "summarizing", "agent_filter": "writer"}).text
    assert {(r["strategy"], r["agent"]) for r in rows_of(html)} == {("summarizing", "writer")}
    times = sorted(r.created_at.timestamp() for r in everything)
    since, until = times[100], times[160]
    html = client.get("/session", params={"id": SID, "from": since, "to": until}).text
    listed = rows_of(html)
    assert len(listed) == 50
    assert all(since <= float(r["t"]) <= until for r in listed)
    assert "between" in html


def test_the_history_is_paged_on_the_server(client: TestClient, ledger: Ledger) -> None:
    history = ledger.history(SID, "lead")
    html = client.get("/session", params={"id": SID, "agent": "lead", "hpage": 3}).text
    section = html.split('id="history-lead"', 1)[1].split("</details>", 1)[0]
    seqs = [int(s) for s in re.findall(r'<tr class="[^"]*"[^>]*>\s*<td class="num">(\d+)</td>', section)]
    assert len(seqs) == 200
    assert seqs == sorted(seqs)
    assert seqs[0] >= 400 - len(ledger.summaries(SID, "lead"))
    assert len(history) > 8000
    assert re.search(r"page 3 of \d+", section)


def test_search_finds_evicted_messages_and_summaries(client: TestClient, ledger: Ledger) -> None:
    html = client.get("/session", params={"id": SID, "q": NEEDLE.upper()}).text
    results = html.split('id="search-results"', 1)[1].split("</table>", 1)[0]
    hits = re.findall(r'<tr class="(\w+) (\w+)">', results)
    assert ("evicted", "message") in hits
    assert any(kind == "summary" for _, kind in hits)
    assert results.count(f"<mark>{NEEDLE}</mark>") == len(hits)  # the match as written, marked
    # an entry the search finds is one click away
    link = re.search(r'href="(/entry\?[^"]+)"', results)
    assert link is not None
    entry = client.get(link.group(1).replace("&amp;", "&"))
    assert entry.status_code == 200
    assert NEEDLE in entry.text
    assert "evicted" in entry.text
    nothing = client.get("/session", params={"id": SID, "q": "no such words anywhere"}).text
    assert "0 entries hold" in nothing


def test_search_is_paged(client: TestClient) -> None:
    first = client.get("/session", params={"id": SID, "q": "checkout"}).text
    total = int(re.search(r"(\d+) entries hold", first).group(1))  # type: ignore[union-attr]
    assert total > 100
    assert re.search(r"page 1 of \d+", first.split('id="search-results"', 1)[1])
    second = client.get("/session", params={"id": SID, "q": "checkout", "spage": 2}).text
    assert second.split('id="search-results"', 1)[1] != first.split('id="search-results"', 1)[1]


def test_a_part_is_the_listing_alone(client: TestClient) -> None:
    reply = client.get("/session", params={"id": SID, "part": "reductions", "trigger": "restore"})
    assert reply.status_code == 200
    assert reply.text.lstrip().startswith('<div id="reductions-part"')
    (row,) = rows_of(reply.text)
    assert row["strategy"] == "tool_pair_repair"
    assert "a crash left a tool call without its result" in reply.text
    assert client.get("/session", params={"id": SID, "part": "nope"}).status_code == 400


def test_bad_parameters_are_refused(client: TestClient) -> None:
    for params in ({"id": SID, "rpage": "x"}, {"id": SID, "from": "nan"}, {"id": SID, "to": "tomorrow"}, {}):
        assert client.get("/session", params=params).status_code == 400, params
    assert client.get("/session", params={"id": "nope"}).status_code == 404
    assert client.get("/session", params={"id": SID, "agent": "nobody"}).status_code == 404


def test_why_is_never_empty() -> None:
    def reduction(**fields: object) -> Reduction:
        values: dict[str, object] = {
            "session_id": "s",
            "agent_id": "a",
            "strategy": "sliding_window",
            "messages_before": 3,
            "messages_after": 2,
            "tokens_before": 30,
            "tokens_after": 20,
        }
        values.update(fields)
        return Reduction.model_validate(values)

    repair = reduction(trigger="restore", strategy="tool_pair_repair")
    assert why(repair).startswith("a crash left a tool call without its result; the next write closed the pair")
    revised = reduction(trigger="restore", strategy="tool_pair_repair", revised=("m1", "m2"), detail="interrupted")
    assert "removed orphan tool blocks from 2 message(s)" in why(revised)
    assert why(reduction(trigger="reactive", error="Overflow: too long")) == "Overflow: too long"
    assert why(reduction(trigger="manual", detail="Session.clear_session")) == "Session.clear_session"
    for trigger in ("per_turn", "proactive", "reactive", "end_of_invocation", "manual", "import"):
        assert why(reduction(trigger=trigger)).strip(), trigger


def test_the_page_tag_changes_with_every_commit_and_only_then(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    with Ledger.connect(url) as writer:
        conversation = writer.conversation("s", manager=SlidingWindowConversationManager(window_size=4))
        conversation.append(Message.user("hello"))
        with Ledger.connect(url, read_only=True) as reader:
            client = TestClient(create_app(reader))
            first = client.get("/session", params={"id": "s"})
            tag = first.headers["etag"]
            again = client.get("/session", params={"id": "s"}, headers={"If-None-Match": tag})
            assert (again.status_code, again.content) == (304, b"")
            # a listing of another page or filter of the same ledger state answers to the same tag
            other = client.get("/session", params={"id": "s", "trigger": "manual"}, headers={"If-None-Match": tag})
            assert other.status_code == 304
            conversation.before_model_call()
            changed = client.get("/session", params={"id": "s"}, headers={"If-None-Match": tag})
            assert changed.status_code == 200
            assert changed.headers["etag"] != tag
            assert '<dd class="calls">1</dd>' in changed.text


def test_the_file_of_2000_turns_is_under_two_megabytes_offline_and_anonymous(
    ledger: Ledger, long_ledger: LongLedger
) -> None:
    html = standalone_session(ledger, SID)
    size = len(html.encode())
    assert size < 2_000_000, size
    assert not re.search(r"""(src|href|action)=["']?(https?:)?//""", html)
    assert "@import" not in html
    assert str(long_ledger.path) not in html
    assert long_ledger.path.name not in html
    assert "sqlite" not in html
    assert '<meta http-equiv="Content-Security-Policy"' in html
    assert "<script src=" not in html
    assert '<link rel="stylesheet"' not in html
    chart = chart_of(html)
    assert sum(len(a["reductions"]["t"]) for a in chart["agents"]) == len(ledger.reductions(SID))


def test_a_file_over_its_budget_leaves_out_the_oldest_rows_and_says_so(ledger: Ledger) -> None:
    html = standalone_session(ledger, SID, budget=700_000)
    assert len(html.encode()) <= 700_000
    omitted = re.findall(r"The oldest (\d+) of (\d+) entries are left out of this file", html)
    assert len(omitted) == 2
    assert all(0 < int(left) < int(total) for left, total in omitted)


def test_every_reduction_of_the_long_session_says_why(ledger: Ledger) -> None:
    kinds = Counter((r.trigger, bool(why(r).strip())) for r in ledger.reductions(SID))
    assert all(said for _, said in kinds)
    assert {trigger for trigger, _ in kinds} == {"per_turn", "proactive", "reactive", "end_of_invocation", "restore"}


def test_session_times_are_utc(client: TestClient) -> None:
    html = client.get("/session", params={"id": SID}).text
    stamp = re.search(r'<td class="time">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ)</td>', html)
    assert stamp is not None
    assert datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=UTC).year == 2025


def test_the_session_page_and_an_entry_never_read_the_full_history(
    long_ledger: LongLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.connect(long_ledger.url, read_only=True) as opened:
        calls: list[str] = []
        read = complete(opened.store, "tests").history

        def counted(session_id: str, agent_id: str, *, include_evicted: bool = True) -> list[HistoryEntry]:
            calls.append(agent_id)
            return read(session_id, agent_id, include_evicted=include_evicted)

        monkeypatch.setattr(opened.store, "history", counted)
        client = TestClient(create_app(opened))
        assert client.get("/session", params={"id": SID}).status_code == 200
        part = {"id": SID, "part": "reductions", "trigger": "reactive"}
        assert client.get("/session", params=part).status_code == 200
        # an evicted tool result: its call is found among what the same reduction evicted
        evicted = next(
            h for h in read(SID, "lead") if h.status == "evicted" and h.message.tool_result_ids and h.evicted_by
        )
        page = client.get("/entry", params={"session": SID, "agent": "lead", "id": evicted.message.message_id})
        assert page.status_code == 200
        assert "← its call" in page.text
        assert calls == []
        # an agent's own page and a search read it, once per agent
        client.get("/session", params={"id": SID, "agent": "lead"})
        assert calls == ["lead"]
        client.get("/session", params={"id": SID, "q": "anything"})
        assert calls == ["lead", "lead", "writer"]


def test_mounted_under_a_prefix_every_link_follows(ledger: Ledger) -> None:
    site = Starlette(routes=[Mount("/ledger", app=create_app(ledger))])
    client = TestClient(site)
    for path, params in (
        ("/ledger/", {}),
        ("/ledger/session", {"id": SID}),
        ("/ledger/session", {"id": SID, "agent": "writer", "hpage": "2"}),
        ("/ledger/reduction", {"session": SID, "agent": "lead", "id": ledger.reductions(SID, "lead")[0].reduction_id}),
    ):
        reply = client.get(path, params=params)
        assert reply.status_code == 200
        targets = re.findall(r'(?:href|src|action)="(/[^"]*)"', reply.text)
        assert targets
        assert all(t.startswith("/ledger/") for t in targets), [t for t in targets if not t.startswith("/ledger/")]
    assert client.get("/ledger/static/session.js").status_code == 200


def test_pager_links_keep_the_filters_exactly(client: TestClient, ledger: Ledger) -> None:
    times = sorted(r.created_at.timestamp() for r in ledger.reductions(SID))
    since, until = times[10], times[400]
    html = client.get("/session", params={"id": SID, "from": since, "to": until, "trigger": "per_turn"}).text
    part = html.split('id="reductions-part"', 1)[1]
    link = re.search(r'<a class="page" rel="next" data-page="2" href="([^"]+)"', part)
    assert link is not None
    following = client.get(link.group(1).replace("&amp;", "&")).text
    rows = rows_of(following)
    assert rows
    assert all(r["trigger"] == "per_turn" and since - 0.001 <= float(r["t"]) <= until + 0.001 for r in rows)
    assert "page 2 of" in following


def test_the_sessions_page_filters_by_app_and_user(tmp_path: Path) -> None:
    with Ledger.connect(f"sqlite:///{tmp_path / 'owners.db'}") as ledger:
        for session_id, app, user in (
            ("ada-shop", "shop", "ada"),
            ("bob-shop", "shop", "bob"),
            ("ada-bank", "bank", "ada"),
            ("nobody", None, None),
        ):
            ledger.conversation(session_id, app=app, user=user).append(Message.user(f"hi from {session_id}"))
        client = TestClient(create_app(ledger))

        def listed(query: str) -> list[str]:
            response = client.get(f"/{query}")
            assert response.status_code == 200, response.text
            return sorted(re.findall(r'class="session-link" href="[^"]*">([^<]+)</a>', response.text))

        assert listed("") == ["ada-bank", "ada-shop", "bob-shop", "nobody"]
        assert listed("?app=shop") == ["ada-shop", "bob-shop"]
        assert listed("?app=shop&user=ada") == ["ada-shop"]
        assert listed("?user=ada") == ["ada-bank", "ada-shop"]
        assert listed("?user=ada&q=bank") == ["ada-bank"]
        assert listed("?app=none") == []
        page = client.get("/?app=shop").text
        assert 'href="/?app=shop&amp;user=ada"' in page  # a user's chip keeps the app
        assert 'value="shop"' in page  # the form shows the filter


def test_the_session_page_shows_where_a_fork_came_from_and_its_forks(tmp_path: Path) -> None:
    with Ledger.connect(f"sqlite:///{tmp_path / 'forks.db'}") as ledger:
        chat = ledger.conversation("root")
        chat.append(Message.user("q1"))
        chat.before_model_call()
        chat.append(Message.assistant("a1"))
        ledger.fork("root", "child", at_call=1)
        ledger.fork("child", "grandchild")
        client = TestClient(create_app(ledger))
        root = client.get("/session", params={"id": "root"}).text
        assert 'id="lineage"' in root
        assert 'href="/session?id=child"' in root
        assert "model call 1" in root
        assert "grandchild" in root
        assert "fork of a fork (depth 2)" in root
        child = client.get("/session", params={"id": "child"}).text
        assert "forked from" in child
        assert 'href="/session?id=root"' in child
        plain = client.get("/", params={}).text
        assert "root" in plain
        ledger.conversation("alone").append(Message.user("hi"))
        assert 'id="lineage"' not in client.get("/session", params={"id": "alone"}).text


def test_a_new_fork_changes_the_session_pages_tag(tmp_path: Path) -> None:
    # A fork commits in another session: the parent's page must not answer 304 with a stale lineage.
    with Ledger.connect(f"sqlite:///{tmp_path / 'tag.db'}") as ledger:
        ledger.conversation("root").append(Message.user("q1"))
        client = TestClient(create_app(ledger))
        first = client.get("/session", params={"id": "root"})
        tag = first.headers["etag"]
        assert client.get("/session", params={"id": "root"}, headers={"If-None-Match": tag}).status_code == 304
        ledger.fork("root", "child")
        after = client.get("/session", params={"id": "root"}, headers={"If-None-Match": tag})
        assert after.status_code == 200
        assert after.headers["etag"] != tag
        assert 'href="/session?id=child"' in after.text
        ledger.delete_session("child")
        gone = client.get("/session", params={"id": "root"}, headers={"If-None-Match": after.headers["etag"]})
        assert gone.status_code == 200
        assert 'href="/session?id=child"' not in gone.text
