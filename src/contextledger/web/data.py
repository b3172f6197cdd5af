"""What the web pages show, read from a ledger: plain, render-ready records.

The page builders only read (:meth:`Ledger.history`, ``summaries``, ``reductions``,
``revisions``, the store's ``load``); nothing here writes. Each builder reads one
agent's rows once and derives every cross-reference (which reduction evicted an
entry, which summary replaced it, which entry holds the other half of a tool pair)
in memory, so a page costs a handful of queries whatever its size.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contextledger.errors import EntryNotFound, SessionNotFound
from contextledger.ledger import Ledger
from contextledger.messages import Message
from contextledger.records import (
    ConversationState,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SummaryEntry,
    ViewEntry,
)
from contextledger.text import describe, fmt_time
from contextledger.web.chart import Chart, build_chart

__all__ = [
    "AgentPage",
    "Block",
    "EntryPage",
    "PinRow",
    "Row",
    "SessionsPage",
    "agent_page",
    "entry_page",
    "render_blocks",
    "sessions_page",
]

PREVIEW = 140
SEARCH_SCAN = 20_000
"""Sessions scanned at most by a search (the store lists sessions, it does not search them)."""


@dataclass(frozen=True)
class Block:
    """One content block ready to draw: ``kind`` picks the template's branch."""

    kind: str  # text | tool_use | tool_result | image | json
    text: str = ""
    name: str = ""
    tool_use_id: str = ""
    status: str = ""
    partner: str | None = None  # the entry holding the other half of the tool pair
    data_uri: str = ""
    children: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Row:
    """One entry of a listing (history or live view)."""

    entry_id: str
    kind: str
    seq: int
    role: str
    status: str  # active | evicted | superseded
    pinned: bool
    tokens: int
    preview: str
    created_at: str
    evicted_by: Reduction | None = None
    replaced_by: str | None = None
    revisions: int = 0
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class PinRow:
    """A pin or unpin of an entry: when, by whom (``api``, ``model``, ``host``, ...)."""

    entry_id: str
    pinned: bool
    at: str
    source: str
    preview: str


@dataclass
class AgentPage:
    """Everything the session page draws for one agent."""

    session_id: str
    agent_id: str
    state: ConversationState
    tokens: int
    view: list[Row]
    view_total: int
    history: list[Row]
    history_total: int
    page: int
    pages: int
    evicted: int
    summaries: list[SummaryEntry]
    summary_chains: dict[str, list[str]]
    reductions: list[Reduction]
    revisions: list[tuple[Row, list[tuple[Revision, tuple[Block, ...]]]]]
    pins: list[PinRow]
    chart: Chart
    previews: dict[str, str] = field(default_factory=dict)
    full_history: bool = True

    @property
    def manager(self) -> str:
        """The manager recorded in the state, or ``-``."""
        return str((self.state.manager_state or {}).get("manager", "-"))


@dataclass(frozen=True)
class SessionRow:
    """One session of the sessions page."""

    session_id: str
    agents: tuple[str, ...]
    created_at: str
    updated_at: str
    active: int
    total: int


@dataclass(frozen=True)
class SessionsPage:
    """A page of sessions, with the search that produced it."""

    rows: list[SessionRow]
    query: str
    page: int
    has_next: bool


@dataclass(frozen=True)
class EntryPage:
    """One entry whole."""

    session_id: str
    agent_id: str
    row: Row
    message: Message | None
    summary: SummaryEntry | None
    revisions: list[tuple[Revision, tuple[Block, ...]]]
    replaced: list[Row]
    chain: list[str]
    metadata: str
    pins: list[PinRow]


# -- sessions ------------------------------------------------------------------------------


def sessions_page(ledger: Ledger, *, query: str = "", page: int = 1, per_page: int = 50) -> SessionsPage:
    """Sessions most recently updated first; ``query`` keeps those whose id contains it."""
    page = max(page, 1)
    query = query.strip()
    if not query:
        infos = ledger.sessions(limit=per_page + 1, offset=(page - 1) * per_page)
    else:
        wanted = (page - 1) * per_page, page * per_page + 1
        infos, offset, seen = [], 0, 0
        needle = query.lower()
        while offset < SEARCH_SCAN and len(infos) < wanted[1]:
            batch = ledger.sessions(limit=500, offset=offset)
            for info in batch:
                if needle in info.session_id.lower():
                    if seen >= wanted[0]:
                        infos.append(info)
                    seen += 1
            if len(batch) < 500:
                break
            offset += 500
    rows = [
        SessionRow(
            session_id=i.session_id,
            agents=i.agents,
            created_at=fmt_time(i.created_at),
            updated_at=fmt_time(i.updated_at),
            active=i.active_entries,
            total=i.total_entries,
        )
        for i in infos[:per_page]
    ]
    return SessionsPage(rows=rows, query=query, page=page, has_next=len(infos) > per_page)


# -- one agent ------------------------------------------------------------------------------


def _pin_rows(
    events: Sequence[PinEvent],
    history: Sequence[HistoryEntry],
    view: Sequence[ViewEntry],
) -> tuple[list[PinRow], dict[str, str]]:
    """Every pin change of the agent, oldest first, and a preview of each entry concerned."""
    previews = {e.entry_id: describe(e.message, 80) for e in view if e.pinned}
    wanted = {e.entry_id for e in events} - previews.keys()
    for h in history:
        if h.message.message_id in wanted:
            previews[h.message.message_id] = describe(h.message, 80)
    rows = [
        PinRow(
            entry_id=e.entry_id,
            pinned=e.pinned,
            at=fmt_time(e.at),
            source=e.source,
            preview=previews.get(e.entry_id, ""),
        )
        for e in events
    ]
    return rows, previews


def agent_page(
    ledger: Ledger,
    session_id: str,
    agent_id: str,
    *,
    page: int | None = 1,
    per_page: int = 200,
    view_limit: int | None = 200,
    with_blocks: bool = False,
    full_history: bool = True,
    history: Sequence[HistoryEntry] | None = None,
) -> AgentPage:
    """Read one agent's conversation and derive what the session page draws.

    Only the rows a page draws are turned into :class:`Row` records; the cost that
    grows with the history is one read of it (and none without ``full_history``).

    Args:
        ledger: The ledger (only read).
        session_id: The session.
        agent_id: The agent.
        page: The page of the full history to draw (1-based; ``None``: every entry).
        per_page: History rows per page.
        view_limit: Draw only the newest this many entries of the live view (``None``: all).
        with_blocks: Attach every entry's content blocks (for the self-contained file).
        full_history: Read the full history (the overview of a session does without it:
            its page stays O(window + reductions)).
        history: The history when the caller has read it already.

    Raises:
        SessionNotFound: The session has no such agent.
    """
    snapshot = ledger.store.load(session_id, agent_id)
    if snapshot is None:
        raise SessionNotFound(f"session {session_id!r} has no agent {agent_id!r}")
    if history is None:
        history = ledger.history(session_id, agent_id) if full_history else []
    summaries = ledger.summaries(session_id, agent_id)
    reductions = ledger.reductions(session_id, agent_id)
    revisions = ledger.revisions(session_id, agent_id)
    by_reduction = {r.reduction_id: r for r in reductions}
    replaced_by: dict[str, str] = {}
    for s in summaries:
        for entry_id in s.replaces:
            replaced_by[entry_id] = s.summary_id
    needs_partners = with_blocks or bool(revisions)
    partners = _tool_partners(h.message for h in history) if needs_partners else {}

    def history_row(h: HistoryEntry) -> Row:
        return Row(
            entry_id=h.message.message_id,
            kind="message",
            seq=h.seq,
            role=h.message.role,
            status=h.status,
            pinned=h.pinned,
            tokens=h.tokens,
            preview=describe(h.message, PREVIEW),
            created_at=fmt_time(h.created_at),
            evicted_by=by_reduction.get(h.evicted_by or ""),
            replaced_by=replaced_by.get(h.message.message_id),
            revisions=h.revision_count,
            blocks=render_blocks(h.message, partners) if with_blocks else (),
        )

    def summary_row(s: SummaryEntry) -> Row:
        status = "superseded" if s.superseded_by else s.status
        return Row(
            entry_id=s.summary_id,
            kind="summary",
            seq=s.seq,
            role="user",
            status=status,
            pinned=False,
            tokens=s.tokens,
            preview=f"summary of {len(s.replaces)}: " + " ".join(s.content.split())[:PREVIEW],
            created_at=fmt_time(s.created_at),
            evicted_by=by_reduction.get(s.evicted_by or ""),
            replaced_by=s.superseded_by,
            blocks=(Block(kind="text", text=s.content),) if with_blocks else (),
        )

    items: list[HistoryEntry | SummaryEntry] = [*history, *(summaries if full_history else [])]
    items.sort(key=lambda r: (r.seq, isinstance(r, HistoryEntry)))
    total = len(items)
    pages = max(1, -(-total // per_page))
    if page is None:
        shown_items, current = items, 1
    else:
        current = min(max(page, 1), pages)
        shown_items = items[(current - 1) * per_page : current * per_page]
    by_id: dict[str, HistoryEntry | SummaryEntry] = {
        (i.message.message_id if isinstance(i, HistoryEntry) else i.summary_id): i for i in items
    }
    summary_ids = {s.summary_id: s for s in summaries}
    made: dict[str, Row] = {}

    def row_of(entry_id: str) -> Row | None:
        if entry_id not in made:
            item = by_id.get(entry_id) or summary_ids.get(entry_id)
            if item is None:
                return None
            made[entry_id] = history_row(item) if isinstance(item, HistoryEntry) else summary_row(item)
        return made[entry_id]

    shown = [row_of(i.message.message_id if isinstance(i, HistoryEntry) else i.summary_id) for i in shown_items]
    view_entries: Sequence[ViewEntry] = snapshot.entries
    if view_limit is not None:
        view_entries = view_entries[max(0, len(view_entries) - view_limit) :]
    view = [
        row_of(e.entry_id)
        or Row(
            entry_id=e.entry_id,
            kind=e.kind,
            seq=e.seq,
            role=e.message.role,
            status="active",
            pinned=e.pinned,
            tokens=e.tokens,
            preview=describe(e.message, PREVIEW),
            created_at="",
            replaced_by=replaced_by.get(e.entry_id),
        )
        for e in view_entries
    ]
    in_view = {e.entry_id: e for e in snapshot.entries}
    revised: dict[str, list[tuple[Revision, tuple[Block, ...]]]] = {}
    for rev in revisions:
        revised.setdefault(rev.message_id, []).append((rev, render_blocks(rev.original, partners)))
    revised_rows = []
    for message_id, revs in revised.items():
        found = row_of(message_id)
        if found is None and message_id in in_view:
            e = in_view[message_id]
            found = Row(
                entry_id=e.entry_id,
                kind=e.kind,
                seq=e.seq,
                role=e.message.role,
                status="active",
                pinned=e.pinned,
                tokens=e.tokens,
                preview=describe(e.message, PREVIEW),
                created_at="",
            )
        if found is not None:
            revised_rows.append((found, revs))
    pin_events = ledger.pin_history(session_id, agent_id)
    pins, pin_previews = _pin_rows(pin_events, history, snapshot.entries)
    previews: dict[str, str] = {}
    for s in summaries:
        for entry_id in s.replaces:
            item = by_id.get(entry_id) or summary_ids.get(entry_id)
            if isinstance(item, HistoryEntry):
                previews[entry_id] = describe(item.message, PREVIEW)
            elif item is not None:
                previews[entry_id] = "summary: " + " ".join(item.content.split())[:PREVIEW]
    tokens = sum(e.tokens for e in snapshot.entries)
    if full_history:
        evicted = sum(1 for i in items if i.status != "active" or (isinstance(i, SummaryEntry) and i.superseded_by))
    else:
        evicted = sum(len(r.evicted) for r in reductions)
    return AgentPage(
        session_id=session_id,
        agent_id=agent_id,
        state=snapshot.state,
        tokens=tokens,
        view=view,
        view_total=len(snapshot.entries),
        history=[r for r in shown if r is not None],
        history_total=total,
        page=current,
        pages=pages,
        evicted=evicted,
        summaries=summaries,
        summary_chains={s.summary_id: _chain(s, summaries) for s in summaries},
        reductions=reductions,
        revisions=revised_rows,
        pins=pins,
        chart=build_chart(
            reductions, snapshot.state.model_call_count, tokens, len(snapshot.entries), pin_events, pin_previews
        ),
        previews=previews,
        full_history=full_history,
    )


def _chain(summary: SummaryEntry, summaries: Sequence[SummaryEntry]) -> list[str]:
    """Ids from ``summary`` back through every summary it superseded (newest first)."""
    by_id = {s.summary_id: s for s in summaries}
    chain, current, seen = [summary.summary_id], summary, {summary.summary_id}
    while current.supersedes and current.supersedes in by_id and current.supersedes not in seen:
        current = by_id[current.supersedes]
        chain.append(current.summary_id)
        seen.add(current.summary_id)
    return chain


# -- one entry -------------------------------------------------------------------------------


def _tool_partners(messages: Iterable[Message]) -> dict[tuple[str, str], str]:
    """(``use`` | ``result``, toolUseId) -> the message id holding that half."""
    found: dict[tuple[str, str], str] = {}
    for m in messages:
        for tool_id in m.tool_use_ids:
            found.setdefault(("use", tool_id), m.message_id)
        for tool_id in m.tool_result_ids:
            found.setdefault(("result", tool_id), m.message_id)
    return found


def render_blocks(
    message: Message | Sequence[Mapping[str, Any]], partners: Mapping[tuple[str, str], str]
) -> tuple[Block, ...]:
    """Content blocks as :class:`Block` records (tool halves linked to their partner entry)."""
    blocks = message.content if isinstance(message, Message) else message
    return tuple(_block(b, partners) for b in blocks)


def _block(block: Mapping[str, Any], partners: Mapping[tuple[str, str], str]) -> Block:
    if isinstance(block.get("text"), str):
        return Block(kind="text", text=block["text"])
    tool = block.get("toolUse")
    if isinstance(tool, Mapping):
        tool_id = str(tool.get("toolUseId", ""))
        return Block(
            kind="tool_use",
            name=str(tool.get("name", "")),
            tool_use_id=tool_id,
            text=json.dumps(tool.get("input"), indent=2, ensure_ascii=False, default=str),
            partner=partners.get(("result", tool_id)),
        )
    result = block.get("toolResult")
    if isinstance(result, Mapping):
        tool_id = str(result.get("toolUseId", ""))
        inner = result.get("content")
        children = (
            tuple(_block(b, partners) for b in inner if isinstance(b, Mapping)) if isinstance(inner, list) else ()
        )
        return Block(
            kind="tool_result",
            tool_use_id=tool_id,
            status=str(result.get("status", "success")),
            partner=partners.get(("use", tool_id)),
            children=children,
        )
    for kind in ("image", "document", "video"):
        body = block.get(kind)
        if isinstance(body, Mapping):
            source = body.get("source")
            raw = source.get("bytes") if isinstance(source, Mapping) else None
            fmt = str(body.get("format", ""))
            if kind == "image" and isinstance(raw, bytes):
                mime = "image/jpeg" if fmt in ("jpg", "jpeg") else f"image/{fmt or 'png'}"
                encoded = base64.b64encode(raw).decode("ascii")
                return Block(kind="image", name=fmt, text=f"{len(raw)} bytes", data_uri=f"data:{mime};base64,{encoded}")
            size = f"{len(raw)} bytes" if isinstance(raw, bytes) else ""
            return Block(kind="json", name=kind, text=f"{body.get('name') or fmt} {size}".strip())
    return Block(
        kind="json", name=next(iter(block), "block"), text=json.dumps(_jsonable(block), indent=2, ensure_ascii=False)
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def entry_page(ledger: Ledger, session_id: str, agent_id: str, entry_id: str) -> EntryPage:
    """One entry (message or summary) whole, with its revisions and links.

    Raises:
        SessionNotFound: The session has no such agent.
        EntryNotFound: The agent has no entry with this id.
    """
    if agent_id not in ledger.agents(session_id):
        raise SessionNotFound(f"session {session_id!r} has no agent {agent_id!r}")
    history = ledger.history(session_id, agent_id)
    whole = agent_page(ledger, session_id, agent_id, page=None, view_limit=0, history=history)
    row = next((r for r in whole.history if r.entry_id == entry_id), None)
    if row is None:
        raise EntryNotFound(f"no entry {entry_id!r} in session {session_id!r}, agent {agent_id!r}")
    partners = _tool_partners(h.message for h in history)
    pins = [p for p in whole.pins if p.entry_id == entry_id]
    if row.kind == "summary":
        summary = next(s for s in whole.summaries if s.summary_id == entry_id)
        rows = {r.entry_id: r for r in whole.history}
        replaced = [rows[i] for i in summary.replaces if i in rows]
        return EntryPage(
            session_id=session_id,
            agent_id=agent_id,
            row=row,
            message=None,
            summary=summary,
            revisions=[],
            replaced=replaced,
            chain=whole.summary_chains.get(entry_id, []),
            metadata="",
            pins=pins,
        )
    message = next(h.message for h in history if h.message.message_id == entry_id)
    revisions = [
        (rev, render_blocks(rev.original, partners)) for rev in ledger.revisions(session_id, agent_id, entry_id)
    ]
    row = Row(**{**row.__dict__, "blocks": render_blocks(message, partners)})
    metadata = json.dumps(_jsonable(message.metadata), indent=2, ensure_ascii=False) if message.metadata else ""
    return EntryPage(
        session_id=session_id,
        agent_id=agent_id,
        row=row,
        message=message,
        summary=None,
        revisions=revisions,
        replaced=[],
        chain=[],
        metadata=metadata,
        pins=pins,
    )


def when(value: datetime) -> str:
    """A timestamp as the pages print it."""
    return fmt_time(value)
