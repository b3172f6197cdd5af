"""What a session page shows, read from a ledger: plain, render-ready records.

The builders only read (``Ledger`` queries and the store's ``load`` and ``entries``);
nothing here writes. A session page reads each agent's state and live view, and the
session's reductions, summaries and pin events once -- never the full history, which
only an agent's own page (paged) and a search read -- so its cost grows with the
number of reductions, not with the length of the conversation. Listings are paged
here, on the server; the page gets only the rows it draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextledger import __version__
from contextledger.errors import SessionNotFound
from contextledger.ledger import Ledger
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    Snapshot,
    SummaryEntry,
)
from contextledger.model.text import describe, fmt_time
from contextledger.stores.capabilities import LINEAGE, TIME_TRAVEL
from contextledger.web.query import Paged, SessionQuery, paged
from contextledger.web.rows import (
    PinRow,
    Row,
    history_row,
    jsonable,
    pin_rows,
    render_blocks,
    summary_row,
    tool_partners,
    view_row,
)
from contextledger.web.search import SearchResults, search_session
from contextledger.web.timeline import AgentLine, chart_data, letter, why

__all__ = [
    "AgentPanel",
    "ReductionRow",
    "SessionPage",
    "load_session",
    "session_links",
    "session_page",
    "session_tag",
]

REDUCTIONS_PER_PAGE = 50
HISTORY_PER_PAGE = 200
VIEW_ROWS = 40
"""Newest live-view entries a session page draws per agent."""
AGENT_VIEW_ROWS = 200
"""Newest live-view entries an agent's page draws (its full history holds them all, paged)."""
PIN_ROWS = 20
"""Newest pin changes a session page draws per agent (the agent's page draws them all)."""
SUMMARY_CARDS = 5
"""Newest summaries a session page draws per agent (the agent's page draws them all)."""
REVISION_CARDS = 20
"""Newest rewritten messages an agent's page draws with their originals (``export`` has them all)."""


# -- one session -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReductionRow:
    """One reduction of the listing, with its agent and why it ran."""

    agent_id: str
    reduction: Reduction
    why: str
    letter: str
    at: str


@dataclass
class AgentPanel:
    """What a session page draws for one agent besides the chart."""

    agent_id: str
    state: ConversationState
    tokens: int
    view: list[Row]
    view_total: int
    evicted: int
    reductions: int
    summaries: list[SummaryEntry]
    summaries_total: int
    summary_chains: dict[str, list[str]]
    pins: list[PinRow]
    pins_total: int
    history: Paged[Row] | None = None
    revisions: list[tuple[Row, list[tuple[Revision, tuple[object, ...]]]]] = field(default_factory=list)
    revised_total: int = 0
    state_json: str = ""
    """The manager's and the host's state, as indented JSON (an agent's own page and the file)."""
    omitted_history: int = 0
    """Oldest history rows left out of a self-contained file to keep it small."""
    omitted_summaries: int = 0

    @property
    def manager(self) -> str:
        """The manager recorded in the state, or ``-``."""
        return str((self.state.manager_state or {}).get("manager", "-"))


@dataclass(frozen=True)
class LineageRow:
    """One line of a session's lineage: where an agent was forked from, a fork of it, a copy elsewhere.

    ``session_id`` is the other session (linked on the page), ``None`` for a copy in another ledger.
    """

    agent_id: str
    relation: str
    session_id: str | None
    other_agent: str
    detail: str


def lineage_rows(ledger: Ledger, session_id: str, agents: Sequence[str]) -> list[LineageRow]:
    """Where each agent of the session came from and the forks and copies made of it (empty without lineage)."""
    if not LINEAGE.held_by(ledger.store):
        return []
    rows: list[LineageRow] = []
    for agent_id in agents:
        origin = ledger.fork_origin(session_id, agent_id)
        if origin is not None:
            cut = "its view then" if origin.at_call is None else f"model call {origin.at_call}"
            rows.append(LineageRow(agent_id, "forked from", origin.session_id, origin.agent_id, f"at {cut}"))
        for link in ledger.forks(session_id, agent_id, transitive=True):
            when = fmt_time(link.created_at)
            if link.ledger is not None:
                rows.append(LineageRow(agent_id, "copied to", None, link.ledger, when))
                continue
            kin = "fork" if link.depth == 1 else f"fork of a fork (depth {link.depth})"
            cut = (
                ""
                if link.depth > 1
                else ("its view then, " if link.at_call is None else f"model call {link.at_call}, ")
            )
            rows.append(LineageRow(agent_id, kin, link.child_session_id, link.child_agent_id, f"{cut}{when}"))
    return rows


@dataclass
class SessionPage:
    """Everything a session page (or the self-contained file) draws."""

    session_id: str
    all_agents: list[str]
    focus: str | None
    panels: list[AgentPanel]
    chart: dict[str, Any]
    triggers: list[str]
    strategies: list[tuple[str, str]]
    query: SessionQuery
    reductions: Paged[ReductionRow]
    reductions_total: int
    search: SearchResults | None
    tag: str
    standalone: bool = False
    with_content: bool = False
    """The history rows carry every entry's content (a self-contained file of a small session)."""
    lineage: list[LineageRow] = field(default_factory=list)
    """Where the agents were forked from, their forks and copies (see :func:`lineage_rows`)."""


def session_tag(session_id: str, snapshots: Mapping[str, Snapshot | None], links: Sequence[LineageLink] = ()) -> str:
    """A tag that changes whenever anything a page of the session shows may have changed.

    Every commit bumps its conversation's version and time; the tag hashes those of
    every agent (and this library's version, which decides how the page looks). A fork
    or copy taken of the session commits elsewhere, so its ``links`` (see
    :func:`session_links`) are hashed too: the lineage section follows them.
    """
    parts = [__version__, session_id]
    for agent_id in sorted(snapshots):
        snap = snapshots[agent_id]
        if snap is not None:
            parts += [agent_id, str(snap.state.version), snap.state.updated_at.isoformat()]
    for link in links:
        parts += [link.agent_id, link.child_session_id, link.child_agent_id, str(link.depth), link.ledger or ""]
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def session_links(ledger: Ledger, session_id: str) -> list[LineageLink]:
    """The forks (of forks) and copies of every agent of the session; empty without lineage."""
    return ledger.forks(session_id, transitive=True) if LINEAGE.held_by(ledger.store) else []


def load_session(ledger: Ledger, session_id: str) -> dict[str, Snapshot | None]:
    """Each agent's snapshot (state and live view): what the tag and the page both need.

    Raises:
        SessionNotFound: No such session.
    """
    return {a: ledger.store.load(session_id, a) for a in ledger.require_session(session_id)}


def _previews(ledger: Ledger, session_id: str, agent_id: str, snapshot: Snapshot, ids: set[str]) -> dict[str, str]:
    """Short texts of the entries ``ids`` (read from the live view, else the rows themselves)."""
    found = {e.entry_id: describe(e.message, 80) for e in snapshot.entries if e.entry_id in ids}
    missing = ids - found.keys()
    if missing:
        for h in TIME_TRAVEL.of(ledger.store, "the web view").entries(session_id, agent_id, sorted(missing)):
            found[h.message.message_id] = describe(h.message, 80)
    return found


def _chain(summary: SummaryEntry, by_id: Mapping[str, SummaryEntry]) -> list[str]:
    """Ids from ``summary`` back through every summary it superseded (newest first)."""
    chain, current, seen = [summary.summary_id], summary, {summary.summary_id}
    while current.supersedes and current.supersedes in by_id and current.supersedes not in seen:
        current = by_id[current.supersedes]
        chain.append(current.summary_id)
        seen.add(current.summary_id)
    return chain


def session_page(
    ledger: Ledger,
    session_id: str,
    query: SessionQuery | None = None,
    *,
    snapshots: Mapping[str, Snapshot | None] | None = None,
    standalone: bool = False,
    with_content: bool = False,
) -> SessionPage:
    """Read a session and derive what its page draws.

    Without ``query.agent`` the page shows every agent: the chart, each agent's newest
    live-view entries, summaries and pins, and the session's reductions (paged,
    filtered). With it, the same for that agent alone plus its full history, paged
    (the one read that grows with the conversation). ``standalone`` draws everything
    of every agent in one document (the file of ``contextledger timeline``), each
    history row with its whole content when ``with_content``.

    Raises:
        SessionNotFound: No such session, or the session has no agent ``query.agent``.
    """
    query = query or SessionQuery()
    snaps = dict(snapshots) if snapshots is not None else load_session(ledger, session_id)
    all_agents = sorted(snaps)
    if query.agent is not None and query.agent not in snaps:
        raise SessionNotFound(f"session {session_id!r} has no agent {query.agent!r} (agents: {', '.join(all_agents)})")
    agents = [query.agent] if query.agent is not None else all_agents
    reductions = ledger.reductions(session_id) if query.agent is None else ledger.reductions(session_id, query.agent)
    summaries = ledger.summaries(session_id) if query.agent is None else ledger.summaries(session_id, query.agent)
    pins = ledger.pin_history(session_id) if query.agent is None else ledger.pin_history(session_id, query.agent)
    lines, panels = [], []
    for agent_id in agents:
        snap = snaps[agent_id]
        if snap is None:  # deleted between the listing and the read
            continue
        mine = [r for r in reductions if r.agent_id == agent_id]
        my_pins = [p for p in pins if p.agent_id == agent_id]
        my_summaries = [s for s in summaries if s.agent_id == agent_id]
        previews = _previews(ledger, session_id, agent_id, snap, {p.entry_id for p in my_pins})
        tokens = sum(e.tokens for e in snap.entries)
        lines.append(AgentLine(agent_id, snap.state, tokens, len(snap.entries), mine, my_pins, previews))
        panels.append(
            _panel(
                ledger,
                session_id,
                agent_id,
                snap,
                mine,
                my_summaries,
                my_pins,
                previews,
                query,
                standalone,
                with_content,
            )
        )
    chart = chart_data(lines)
    # Newest first: page 1 is where a running agent's next reduction appears.
    by_time = sorted(reductions, key=lambda r: (r.created_at, r.agent_id, r.version), reverse=True)
    listed = [
        ReductionRow(r.agent_id, r, why(r), letter(r.strategy), fmt_time(r.created_at))
        for r in by_time
        if query.filters.admits(r)
    ]
    search = None
    if query.q.strip() and not standalone:
        search = search_session(ledger, session_id, agents, query.q, page=query.spage)
    strategies = [str(s) for s in chart["strategies"]]
    return SessionPage(
        session_id=session_id,
        all_agents=all_agents,
        focus=query.agent,
        panels=panels,
        chart=chart,
        triggers=[str(t) for t in chart["triggers"]],
        strategies=[(s, letter(s)) for s in strategies],
        query=query,
        reductions=paged(listed, query.rpage, 0 if standalone else REDUCTIONS_PER_PAGE),
        reductions_total=len(reductions),
        search=search,
        tag=session_tag(session_id, snaps, session_links(ledger, session_id)),
        standalone=standalone,
        with_content=with_content,
        lineage=lineage_rows(ledger, session_id, agents),
    )


def _panel(
    ledger: Ledger,
    session_id: str,
    agent_id: str,
    snap: Snapshot,
    reductions: Sequence[Reduction],
    summaries: Sequence[SummaryEntry],
    pins: Sequence[PinEvent],
    previews: Mapping[str, str],
    query: SessionQuery,
    standalone: bool,
    with_content: bool,
) -> AgentPanel:
    whole = standalone or query.agent is not None
    by_reduction = {r.reduction_id: r for r in reductions}
    summary_ids = {s.summary_id: s for s in summaries}
    history: Paged[Row] | None = None
    revisions: list[tuple[Row, list[tuple[Revision, tuple[object, ...]]]]] = []
    shown_view = None if standalone else AGENT_VIEW_ROWS if whole else VIEW_ROWS
    entries = snap.entries if shown_view is None else snap.entries[max(0, len(snap.entries) - shown_view) :]
    partners = None
    revised_total = 0
    state_json = ""
    if whole:
        rows = ledger.history(session_id, agent_id)
        partners = tool_partners(h.message for h in rows)
        history = _history(rows, summaries, by_reduction, query.hpage, standalone, partners if with_content else None)
        revisions, revised_total = _revisions(ledger, session_id, agent_id, rows, by_reduction)
        state = {"manager_state": snap.state.manager_state, "agent_state": snap.state.agent_state}
        state_json = json.dumps(jsonable(state), indent=2, ensure_ascii=False, default=str)
    view = [view_row(e, partners if standalone else None) for e in entries]
    shown = list(reversed(summaries)) if whole else list(reversed(summaries))[:SUMMARY_CARDS]
    return AgentPanel(
        agent_id=agent_id,
        state=snap.state,
        tokens=sum(e.tokens for e in snap.entries),
        view=view,
        view_total=len(snap.entries),
        evicted=sum(len(r.evicted) for r in reductions) - sum(len(r.restored) for r in reductions),
        reductions=len(reductions),
        summaries=shown,
        summaries_total=len(summaries),
        summary_chains={s.summary_id: _chain(s, summary_ids) for s in shown},
        pins=pin_rows(pins if whole else pins[-PIN_ROWS:], previews),
        pins_total=len(pins),
        history=history,
        revisions=revisions,
        revised_total=revised_total,
        state_json=state_json,
    )


def _history(
    rows: Sequence[HistoryEntry],
    summaries: Sequence[SummaryEntry],
    by_reduction: Mapping[str, Reduction],
    page: int,
    standalone: bool,
    partners: Mapping[tuple[str, str], str] | None = None,
) -> Paged[Row]:
    """The full history (messages and summaries in seq order), one page of it turned into rows.

    With ``partners`` each row carries its content blocks (tool halves linked).
    """
    replaced_by = {entry_id: s.summary_id for s in summaries for entry_id in s.replaces}
    items: list[HistoryEntry | SummaryEntry] = [*rows, *summaries]
    items.sort(key=lambda r: (r.seq, isinstance(r, HistoryEntry)))
    page_of = paged(items, page, 0 if standalone else HISTORY_PER_PAGE)
    return Paged(
        rows=[
            history_row(i, reductions=by_reduction, replaced_by=replaced_by, partners=partners)
            if isinstance(i, HistoryEntry)
            else summary_row(i, reductions=by_reduction, with_blocks=partners is not None)
            for i in page_of.rows
        ],
        page=page_of.page,
        pages=page_of.pages,
        total=page_of.total,
    )


def _revisions(
    ledger: Ledger,
    session_id: str,
    agent_id: str,
    rows: Sequence[HistoryEntry],
    by_reduction: Mapping[str, Reduction],
) -> tuple[list[tuple[Row, list[tuple[Revision, tuple[object, ...]]]]], int]:
    """The newest :data:`REVISION_CARDS` messages whose content was rewritten, each with its originals.

    Returns those and how many messages were rewritten in all.
    """
    revised: dict[str, list[Revision]] = {}
    for rev in ledger.revisions(session_id, agent_id):
        revised.setdefault(rev.message_id, []).append(rev)
    if not revised:
        return [], 0
    partners = tool_partners(h.message for h in rows)
    out: list[tuple[Row, list[tuple[Revision, tuple[object, ...]]]]] = []
    for h in reversed(rows):
        revs = revised.get(h.message.message_id)
        if revs:
            row = history_row(h, reductions=by_reduction, replaced_by={})
            out.append((row, [(rev, render_blocks(rev.original, partners)) for rev in revs]))
            if len(out) == REVISION_CARDS:
                break
    return out, len(revised)
