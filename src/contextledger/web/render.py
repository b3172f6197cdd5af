"""Rendering pages to HTML with the templates shipped in the package.

The same templates serve the web app and the self-contained file of
``contextledger timeline``: in a file the stylesheet is inlined, every entry is drawn
with its content, and links point to anchors in the file instead of other pages.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape

from contextledger import __version__
from contextledger.ledger import Ledger
from contextledger.web.data import agent_page, entry_page, sessions_page

__all__ = ["Links", "environment", "render_entry", "render_session", "render_sessions", "stylesheet"]


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
    return env


@cache
def stylesheet() -> str:
    """The stylesheet, for inlining into a self-contained file."""
    return (files("contextledger.web") / "static" / "style.css").read_text(encoding="utf-8")


class Links:
    """Where a page's links go: routes of the web app, or anchors in one file."""

    def __init__(self, *, standalone: bool = False, root: str = "") -> None:
        """Links for the app mounted at ``root``, or (``standalone``) anchors in a file."""
        self.standalone = standalone
        self.root = root

    def static(self, name: str) -> str:
        """A file under ``static/``."""
        return f"{self.root}/static/{name}"

    def sessions(self, *, query: str = "", page: int = 1) -> str:
        """The sessions page."""
        params = {k: v for k, v in (("q", query), ("page", page if page > 1 else "")) if v}
        return f"{self.root}/" + (f"?{urlencode(params)}" if params else "")

    def session(
        self, session_id: str, agent_id: str | None = None, *, page: int | None = None, anchor: str = ""
    ) -> str:
        """A session page (one agent's when ``agent_id`` is given)."""
        if self.standalone:
            return f"#{anchor or ('agent-' + agent_id if agent_id else 'top')}"
        params: dict[str, Any] = {"id": session_id}
        if agent_id is not None:
            params["agent"] = agent_id
        if page is not None:
            params["page"] = page
        return f"{self.root}/session?{urlencode(params)}" + (f"#{anchor}" if anchor else "")

    def reductions(self, session_id: str, agent_id: str) -> str:
        """One agent's page listing every reduction."""
        if self.standalone:
            return f"#reductions-{agent_id}"
        params = urlencode({"id": session_id, "agent": agent_id, "reductions": "all"})
        return f"{self.root}/session?{params}#reductions-{agent_id}"

    def entry(self, session_id: str, agent_id: str, entry_id: str) -> str:
        """One entry whole."""
        if self.standalone:
            return f"#e-{agent_id}-{entry_id}"
        return f"{self.root}/entry?{urlencode({'session': session_id, 'agent': agent_id, 'id': entry_id})}"


def render_sessions(ledger: Ledger, *, query: str = "", page: int = 1, links: Links | None = None) -> str:
    """The sessions page."""
    data = sessions_page(ledger, query=query, page=page)
    return (
        environment()
        .get_template("sessions.html")
        .render(data=data, links=links or Links(), url=ledger.url, title="Sessions")
    )


def render_session(
    ledger: Ledger,
    session_id: str,
    *,
    agent: str | None = None,
    page: int = 1,
    standalone: bool = False,
    all_reductions: bool = False,
    links: Links | None = None,
) -> str:
    """A session page: every agent side by side, or one agent with its full history paged.

    ``standalone`` draws one self-contained document: all agents, every entry with
    its content, the stylesheet inlined, no link leaving the file.

    Raises:
        SessionNotFound: No such session, or the session has no agent ``agent``.
    """
    agents = ledger.require_session(session_id)
    if agent is not None:
        if agent not in agents:
            from contextledger.errors import SessionNotFound

            raise SessionNotFound(f"session {session_id!r} has no agent {agent!r} (agents: {', '.join(agents)})")
        agents = [agent]
    links = links or Links(standalone=standalone)
    if standalone:
        pages = [agent_page(ledger, session_id, a, page=None, view_limit=None, with_blocks=True) for a in agents]
    elif agent is not None:
        pages = [agent_page(ledger, session_id, agent, page=page)]
    else:
        # Side by side: each column draws the chart and the live view; the full history
        # is one click away, so this page never reads it.
        pages = [agent_page(ledger, session_id, a, view_limit=60, full_history=False) for a in agents]
    return (
        environment()
        .get_template("session.html")
        .render(
            session_id=session_id,
            agents=pages,
            focus=agent,
            all_agents=ledger.agents(session_id),
            standalone=standalone,
            css=stylesheet() if standalone else "",
            links=links,
            url=ledger.url,
            title=f"{session_id}" + (f" / {agent}" if agent else ""),
        )
    )


def render_entry(ledger: Ledger, session_id: str, agent_id: str, entry_id: str, *, links: Links | None = None) -> str:
    """One entry whole.

    Raises:
        SessionNotFound: No such session or agent.
        EntryNotFound: No such entry.
    """
    data = entry_page(ledger, session_id, agent_id, entry_id)
    return (
        environment()
        .get_template("entry.html")
        .render(data=data, links=links or Links(), url=ledger.url, title=f"{entry_id} · {session_id}")
    )
