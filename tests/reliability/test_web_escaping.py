"""The web view escapes by construction: any text in any field or id stays text, on every page and in the file.

Hypothesis draws strings out of markup's own pieces (``<``, ``>``, quotes, ``&``,
``</script>``, ``on...=``, ``javascript:``, ``{{ }}``, ``\\u2028``, ...) and writes a
session whose every field and id is one of them, through changesets committed straight
to a store (what an import would refuse is still written). Every page of it is then
parsed as a browser would tokenize it; the property: the only elements and attributes
are the templates' own -- no ``<script>`` but the page's data blocks and its own
scripts, no event-handler attribute, no link to a ``javascript:`` URL -- and the
session id and the chart's data read back exactly as written. The browser tests
(``tests/web/test_escaping.py``) render fixed payloads of the same kind in Chromium.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from contextledger import Ledger
from contextledger.stores.capabilities import complete
from contextledger.stores.memory import MemoryStore
from contextledger.web.app import create_app
from contextledger.web.render import SCRIPTS, asset, standalone_session
from contextledger.web.security import digest
from tests.reliability.conftest import SOAK, Report
from tests.web.hostile import IDS, write_session

EXAMPLES = 300 if SOAK else 25
PIECES = [
    "<", ">", "&", '"', "'", "`", "/", "=", " ", ";", ":", "(", ")", "\\", "\n", "\u2028", "\u2029",
    "<script>", "</script>", "<img src=x onerror=", "onload=", "javascript:", "<!--", "-->", "]]>",
    "{{", "}}", "{%", "%}", "&lt;", "&#60;", "%3C", "<svg>", "<style>", "</style>", "<a href=",
    "window.__pwned=1", "é", "😀", "a", "0",
]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)
FIELDS = ("session", "agent", "other", "text", "use-text", "tool", "tool-use-id", "key", "value", "result", "format",
          "block-kind", "k", "unknown-block", "meta-key", "meta-value", "answer", "pin", "manager", "mk", "mv",
          "state-key", "state-value", "revised", "why", "truncating", "detail", "summary", "summarizer", "strategy",
          "error", *(f"{name}-id" for name in IDS))  # fmt: skip


class Tokens(HTMLParser):
    """Every start tag with its attributes, and the text of the session title and of data blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.title = ""
        self._in: str | None = None
        self._attrs: dict[str, str | None] = {}
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "script" or (tag == "h1" and found.get("class") == "session-id"):
            self._in, self._attrs, self._text = tag, found, []

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != self._in:
            return
        if tag == "script":
            self.scripts.append((self._attrs, "".join(self._text)))
        else:
            self.title = "".join(self._text)
        self._in = None


def tokens(html: str) -> Tokens:
    parser = Tokens()
    parser.feed(html)
    parser.close()
    return parser


OWN_SCRIPTS = {digest(asset(name)) for name in SCRIPTS}


def check(html: str, session: str | None) -> dict[str, Any] | None:
    """Fail on any element or attribute the templates did not write; return the chart's data, if any."""
    page = tokens(html)
    chart = None
    for tag, attrs in page.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for name in ("href", "src", "action"):
            value = re.sub(r"[\s\x00-\x1f]", "", attrs.get(name) or "").lower()
            assert not value.startswith(("javascript:", "vbscript:", "data:text")), (tag, attrs)
        assert tag not in {"iframe", "object", "embed", "base", "meta"} or (
            tag == "meta" and set(attrs) <= {"charset", "http-equiv", "content", "name"}
        ), (tag, attrs)
    for attrs, text in page.scripts:
        kind = attrs.get("type")
        if kind == "application/json":
            chart = json.loads(text)
        elif kind == "application/octet-stream":
            assert re.fullmatch(r"[A-Za-z0-9+/=\s]*", text)
        elif attrs.get("src"):
            assert str(attrs["src"]).startswith("/static/")
        else:
            assert digest(text) in OWN_SCRIPTS, text[:80]
    if session is not None:
        assert page.title == session
    return chart


def test_any_text_in_any_field_stays_text(report: Report) -> None:
    checked: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(values=st.fixed_dictionaries({name: texts for name in FIELDS}))
    def any_text(values: dict[str, str]) -> None:
        checked.append(check_session(values))

    any_text()
    report(
        f"web escaping: {len(checked)} drawn sessions, {sum(checked)} pages and files parsed: "
        "no element, attribute or script from data"
    )
    assert len(checked) >= EXAMPLES


def check_session(values: dict[str, str]) -> int:
    """Write a session of ``values`` and check every page of it; return how many were checked."""
    other = values["other"] if values["other"] != values["agent"] else values["other"] + "·2"
    agents = (values["agent"], other)
    session = values["session"]
    with Ledger(MemoryStore()) as ledger:
        ids = write_session(complete(ledger.store, "tests"), session, agents, lambda field: values[field])
        client = TestClient(create_app(ledger))
        pages = [
            client.get("/"),
            client.get("/", params={"q": values["text"]}),
            client.get("/session", params={"id": session}),
            client.get("/session", params={"id": session, "agent": agents[0]}),
            client.get("/session", params={"id": session, "q": values["text"], "trigger": values["why"]}),
            client.get("/session", params={"id": session, "part": "reductions", "strategy": values["strategy"]}),
            *(client.get("/entry", params={"session": session, "agent": agents[0], "id": ids[n]}) for n in IDS[:6]),
            *(client.get("/reduction", params={"session": session, "agent": agents[0], "id": ids[n]}) for n in IDS[6:]),
            client.get("/entry", params={"session": session, "agent": agents[0], "id": values["text"]}),
        ]
        assert [p.status_code for p in pages] == [200] * (len(pages) - 1) + [404]
        charts = [check(reply.text, session if 'class="session-id"' in reply.text else None) for reply in pages]
        drawn = [sorted(a["id"] for a in chart["agents"]) for chart in charts if chart is not None]
        assert drawn[0] == sorted(agents)  # the session page: every agent
        assert drawn[1] == [agents[0]]  # one agent's page
        chart = check(standalone_session(ledger, session), session)
        assert chart is not None
        assert sorted(a["id"] for a in chart["agents"]) == sorted(agents)
    return len(pages) + 1
