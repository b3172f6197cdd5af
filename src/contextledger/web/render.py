"""Rendering pages to HTML with the templates shipped in the package.

Every page is a Jinja2 template with autoescaping on, so ledger content is always data,
never markup; the chart's data reaches the script as JSON (Jinja's ``tojson``, which
escapes ``<``, ``>``, ``&`` and quotes) inside a ``<script type="application/json">``
block. The same templates serve the web app and the self-contained file of
``contextledger timeline``: in the file the stylesheets and scripts are inlined (and
named by hash in its Content-Security-Policy), links point to anchors in the file, and
the long listings (every reduction, every entry) travel gzip-compressed, unpacked and
paged by the file's script (see :func:`standalone_session`).
"""

from __future__ import annotations

import base64
import gzip
from functools import cache
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape

from contextledger import __version__
from contextledger.ledger import Ledger
from contextledger.model.text import short
from contextledger.stores.urls import mask
from contextledger.web.data import SessionPage, session_page
from contextledger.web.entries import entry_page, reduction_page
from contextledger.web.query import SessionQuery
from contextledger.web.security import file_policy
from contextledger.web.sessions import sessions_page
from contextledger.web.timeline import PIN_PATH

__all__ = [
    "SCRIPTS",
    "STYLESHEETS",
    "Links",
    "asset",
    "environment",
    "render_entry",
    "render_error",
    "render_part",
    "render_reduction",
    "render_session",
    "render_sessions",
    "standalone_session",
]

STYLESHEETS = ("vendor/uPlot.min.css", "style.css")
"""The stylesheets of every page, in order (files under ``static/``)."""
SCRIPTS = ("vendor/uPlot.iife.min.js", "session.js")
"""The scripts of a session page, in order (files under ``static/``)."""
PARTS = {"reductions": "_reductions.html"}
"""Parts of a session page the script fetches alone (``/session?...&part=NAME``)."""


@cache
def environment() -> Environment:
    """The Jinja environment (autoescaping on: ledger content is data, never markup)."""
    env = Environment(
        loader=PackageLoader("contextledger.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["version"] = __version__
    env.globals["pin_path"] = PIN_PATH
    env.filters["short"] = short  # an id as the CLI's tables show it (a time-ordered one by its end)
    return env


@cache
def asset(name: str) -> str:
    """A file under ``static/`` as text, for inlining into a self-contained file."""
    folder = files("contextledger.web") / "static"
    for part in name.split("/"):
        folder = folder / part
    return folder.read_text(encoding="utf-8")


class Links:
    """Where a page's links go: routes of the web app, or anchors in one file."""

    def __init__(self, *, standalone: bool = False, root: str = "") -> None:
        """Links for the app mounted at ``root``, or (``standalone``) anchors in a file."""
        self.standalone = standalone
        self.root = root

    def static(self, name: str) -> str:
        """A file under ``static/``."""
        return f"{self.root}/static/{name}"

    def route(self, name: str) -> str:
        """A route of the app by name (``session``, ``entry``, ...), without parameters."""
        return f"{self.root}/{name}"

    def sessions(self, *, query: str = "", page: int = 1, app: str | None = None, user: str | None = None) -> str:
        """The sessions page (searched, of one app and/or user)."""
        pairs = (("q", query), ("app", app or ""), ("user", user or ""), ("page", page if page > 1 else ""))
        params = {k: v for k, v in pairs if v}
        return f"{self.root}/" + (f"?{urlencode(params)}" if params else "")

    def session(self, session_id: str, agent_id: str | None = None, *, anchor: str = "") -> str:
        """A session page (one agent's when ``agent_id`` is given)."""
        if self.standalone:
            return f"#{anchor or ('agent-' + agent_id if agent_id else 'top')}"
        params: dict[str, Any] = {"id": session_id}
        if agent_id is not None:
            params["agent"] = agent_id
        return f"{self.root}/session?{urlencode(params)}" + (f"#{anchor}" if anchor else "")

    def query(self, session_id: str, query: SessionQuery, anchor: str = "", **changes: Any) -> str:
        """The session page asked by ``query`` with ``changes`` (``rpage``, ``hpage``, ``spage``, ``part``)."""
        params: list[tuple[str, Any]] = [("id", session_id)]
        if query.agent is not None:
            params.append(("agent", query.agent))
        params += query.filters.params()
        if query.q:
            params.append(("q", query.q))
        if query.unit != "tokens":
            params.append(("unit", query.unit))
        for name in ("rpage", "hpage", "spage"):
            value = changes.get(name, getattr(query, name))
            if value and value > 1:
                params.append((name, value))
        if changes.get("part"):
            params.append(("part", changes["part"]))
        return f"{self.root}/session?{urlencode(params)}" + (f"#{anchor}" if anchor else "")

    def entry(self, session_id: str, agent_id: str, entry_id: str) -> str:
        """One entry whole (in a file: its row in the history)."""
        if self.standalone:
            return f"#e-{agent_id}-{entry_id}"
        return f"{self.root}/entry?{urlencode({'session': session_id, 'agent': agent_id, 'id': entry_id})}"

    def reduction(self, session_id: str, agent_id: str, reduction_id: str) -> str:
        """One reduction whole (in a file: its row in the reductions)."""
        if self.standalone:
            return f"#r-{reduction_id}"
        return f"{self.root}/reduction?{urlencode({'session': session_id, 'agent': agent_id, 'id': reduction_id})}"

    def reduction_base(self) -> str:
        """What the chart's script prefixes to a reduction's query (``session``, ``agent``, ``id``)."""
        return "#r-" if self.standalone else f"{self.root}/reduction?"


def _render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def render_sessions(
    ledger: Ledger,
    *,
    query: str = "",
    page: int = 1,
    links: Links | None = None,
    app: str | None = None,
    user: str | None = None,
) -> str:
    """The sessions page (of one app and/or user when given)."""
    data = sessions_page(ledger, query=query, page=page, app=app, user=user)
    return _render("sessions.html", data=data, links=links or Links(), url=mask(ledger.url), title="Sessions")


def _session_context(page: SessionPage, links: Links, url: str, etag: str = "") -> dict[str, Any]:
    title = page.session_id + (f" / {page.focus}" if page.focus else "")
    return {"page": page, "links": links, "url": url, "title": title, "standalone": page.standalone, "etag": etag}


def render_session(
    ledger: Ledger,
    session_id: str,
    query: SessionQuery | None = None,
    *,
    page: SessionPage | None = None,
    links: Links | None = None,
    etag: str = "",
) -> str:
    """A session page of the web app: the chart of every agent, and listings paged on the server.

    ``etag`` is the page's entity tag, which its script sends back to learn whether the
    ledger changed (empty: the page does not follow the ledger).

    Raises:
        SessionNotFound: No such session, or the session has no agent ``query.agent``.
    """
    page = page or session_page(ledger, session_id, query)
    return _render("session.html", **_session_context(page, links or Links(), mask(ledger.url), etag))


def render_part(page: SessionPage, part: str, links: Links | None = None) -> str:
    """One part of a session page alone (what the script swaps in when a filter or page changes).

    Raises:
        KeyError: ``part`` is not one of :data:`PARTS`.
    """
    return _render(PARTS[part], **_session_context(page, links or Links(), ""))


def _packed(html: str) -> str:
    """``html`` gzip-compressed and base64-encoded (the file's script unpacks it with DecompressionStream)."""
    return base64.b64encode(gzip.compress(html.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


FILE_BUDGET = 1_900_000
"""Bytes a self-contained file stays under: beyond, its oldest history rows (then summaries) are left out."""


def standalone_session(ledger: Ledger, session_id: str, *, agent: str | None = None, budget: int = FILE_BUDGET) -> str:
    """One self-contained HTML document of a session (every agent, or ``agent`` alone).

    The document fetches nothing: stylesheets and scripts are inlined and allowed by
    hash in its ``<meta http-equiv="Content-Security-Policy">``, images are ``data:``
    URIs. It holds the chart, every reduction, the summaries and pins, the live view
    whole, and every entry of the history (whole when the file stays small, else its
    first characters); the reductions and the history travel gzip-compressed and are
    paged, filtered and searched by the file's script. The ledger's URL is not written
    into it.

    A file stays under ``budget`` bytes: when a session is too large, the oldest rows
    of each agent's history, and then the oldest summaries, are left out (the file says
    how many; ``contextledger export`` holds everything).

    Raises:
        SessionNotFound: No such session, or the session has no agent ``agent``.
    """
    query = SessionQuery(agent=agent)
    page = session_page(ledger, session_id, query, standalone=True)
    # A small session travels whole: every entry with its content, as the app shows it.
    tokens = sum(r.tokens for p in page.panels if p.history is not None for r in p.history.rows)
    if tokens * 4 < budget:
        whole = session_page(ledger, session_id, query, standalone=True, with_content=True)
        html, _ = _standalone(whole)
        if len(html.encode("utf-8")) <= budget:
            return html
    html, packed = _standalone(page)
    for _ in range(12):
        excess = len(html.encode("utf-8")) - budget
        if excess <= 0:
            break
        # The rows left out shrink the packed listings about in proportion.
        _trim(page, keep=max(0.0, 1 - excess / max(packed, 1)) * 0.95 if packed > excess else 0.5)
        html, packed = _standalone(page)
    return html


def _trim(page: SessionPage, keep: float) -> None:
    """Keep the newest ``keep`` share of each agent's history rows, or of its summaries when no row is left."""
    for panel in page.panels:
        history = panel.history
        if history is not None and history.rows:
            kept = int(len(history.rows) * keep)
            panel.omitted_history += len(history.rows) - kept
            history.rows = history.rows[len(history.rows) - kept :]
        elif panel.summaries:
            kept = int(len(panel.summaries) * keep)
            panel.omitted_summaries += len(panel.summaries) - kept
            panel.summaries = panel.summaries[:kept]  # newest first


def _standalone(page: SessionPage) -> tuple[str, int]:
    """The file of ``page``, and the bytes its packed histories take (what trimming can save)."""
    links = Links(standalone=True)
    context = _session_context(page, links, "")
    packs = {"reductions": _packed(_render("_reductions.html", **context, packing=True))}
    for p in page.panels:
        packs[f"history-{p.agent_id}"] = _packed(_render("_history.html", **context, p=p, packing=True))
    styles = [asset(name) for name in STYLESHEETS]
    scripts = [asset(name) for name in SCRIPTS]
    html = _render(
        "session.html",
        **context,
        packs=packs,
        inline_styles=styles,
        inline_scripts=scripts,
        policy=file_policy(scripts, styles),
    )
    return html, sum(len(v) for k, v in packs.items() if k.startswith("history-"))


def render_entry(ledger: Ledger, session_id: str, agent_id: str, entry_id: str, *, links: Links | None = None) -> str:
    """One entry whole.

    Raises:
        SessionNotFound: No such session or agent.
        EntryNotFound: No such entry.
    """
    data = entry_page(ledger, session_id, agent_id, entry_id)
    return _render(
        "entry.html", data=data, links=links or Links(), url=mask(ledger.url), title=f"{entry_id} · {session_id}"
    )


def render_reduction(
    ledger: Ledger, session_id: str, agent_id: str, reduction_id: str, *, links: Links | None = None
) -> str:
    """One reduction whole.

    Raises:
        SessionNotFound: No such session or agent.
        EntryNotFound: No such reduction.
    """
    data = reduction_page(ledger, session_id, agent_id, reduction_id)
    return _render(
        "reduction.html",
        data=data,
        links=links or Links(),
        url=mask(ledger.url),
        title=f"reduction {reduction_id} · {session_id}",
    )


def render_error(status: int, message: str, *, links: Links | None = None) -> str:
    """An error page (the message is escaped like every other text)."""
    return _render("error.html", status=status, message=message, links=links or Links(), url="", title=str(status))
