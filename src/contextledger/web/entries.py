"""One entry whole, and one reduction whole: the pages a session page links to.

Both read only the rows they show (the store's ``entries`` by id) and the agent's
reductions and summaries, never the full history (but for a tool pair whose halves a
host's own edits parted; see :func:`_partners`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from contextledger.errors import EntryNotFound, SessionNotFound
from contextledger.ledger import Ledger
from contextledger.model.messages import Message
from contextledger.model.records import HistoryEntry, Reduction, Revision, SummaryEntry
from contextledger.model.text import fmt_time
from contextledger.stores.capabilities import TIME_TRAVEL
from contextledger.web.rows import (
    Block,
    PinRow,
    Row,
    history_row,
    jsonable,
    pin_rows,
    render_blocks,
    summary_row,
    tool_partners,
)
from contextledger.web.timeline import letter, why

__all__ = ["EntryPage", "ReductionPage", "entry_page", "reduction_page"]


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
    why: str = ""


@dataclass(frozen=True)
class ReductionPage:
    """One reduction whole: why it ran, what it took out, what it wrote."""

    session_id: str
    agent_id: str
    reduction: Reduction
    why: str
    letter: str
    at: str
    evicted: list[Row]
    summary: SummaryEntry | None
    revised: list[tuple[Revision, tuple[Block, ...]]]
    restored: tuple[str, ...]


def _require_agent(ledger: Ledger, session_id: str, agent_id: str) -> None:
    agents = ledger.require_session(session_id)
    if agent_id not in agents:
        raise SessionNotFound(f"session {session_id!r} has no agent {agent_id!r}")


def _rows(ledger: Ledger, session_id: str, agent_id: str, ids: tuple[str, ...]) -> list[Row]:
    """The entries ``ids`` (messages and summaries) as rows, in the order given."""
    reductions = {r.reduction_id: r for r in ledger.reductions(session_id, agent_id)}
    summaries = {s.summary_id: s for s in ledger.summaries(session_id, agent_id)}
    replaced_by = {entry_id: s.summary_id for s in summaries.values() for entry_id in s.replaces}
    found: dict[str, Row] = {}
    for h in TIME_TRAVEL.of(ledger.store, "the web view").entries(
        session_id, agent_id, [i for i in ids if i not in summaries]
    ):
        found[h.message.message_id] = history_row(h, reductions=reductions, replaced_by=replaced_by)
    for i in ids:
        if i in summaries:
            found[i] = summary_row(summaries[i], reductions=reductions)
    return [found[i] for i in ids if i in found]


def _partners(
    ledger: Ledger, session_id: str, agent_id: str, entry: HistoryEntry, reductions: dict[str, Reduction]
) -> dict[tuple[str, str], str]:
    """The entries holding the other half of each tool pair of ``entry``.

    A pair lives and leaves together: the other half is in the live view, or among what
    the reduction that evicted ``entry`` evicted -- both read without the history, which
    is read only when neither holds it (a pair split by a host's own edits).
    """
    wanted = set(entry.message.tool_use_ids) | set(entry.message.tool_result_ids)
    if not wanted:
        return {}
    snapshot = ledger.store.load(session_id, agent_id)
    near = [e.message for e in snapshot.entries] if snapshot is not None else []
    evictor = reductions.get(entry.evicted_by or "")
    if evictor is not None:
        near += [
            h.message
            for h in TIME_TRAVEL.of(ledger.store, "the web view").entries(session_id, agent_id, list(evictor.evicted))
        ]
    partners = tool_partners([entry.message, *near])
    halves = {("result", t) for t in entry.message.tool_use_ids} | {("use", t) for t in entry.message.tool_result_ids}
    if halves <= partners.keys():
        return partners
    return tool_partners(h.message for h in ledger.history(session_id, agent_id))


def entry_page(ledger: Ledger, session_id: str, agent_id: str, entry_id: str) -> EntryPage:
    """One entry (message or summary) whole, with its revisions and links.

    Raises:
        SessionNotFound: The session has no such agent.
        EntryNotFound: The agent has no entry with this id.
    """
    _require_agent(ledger, session_id, agent_id)
    reductions = {r.reduction_id: r for r in ledger.reductions(session_id, agent_id)}
    summaries = {s.summary_id: s for s in ledger.summaries(session_id, agent_id)}
    pins = [p for p in ledger.pin_history(session_id, agent_id) if p.entry_id == entry_id]
    summary = summaries.get(entry_id)
    if summary is not None:
        row = summary_row(summary, reductions=reductions)
        by_id = summaries
        chain, current = [summary.summary_id], summary
        while current.supersedes and current.supersedes in by_id and current.supersedes not in chain:
            current = by_id[current.supersedes]
            chain.append(current.summary_id)
        return EntryPage(
            session_id=session_id,
            agent_id=agent_id,
            row=row,
            message=None,
            summary=summary,
            revisions=[],
            replaced=_rows(ledger, session_id, agent_id, summary.replaces),
            chain=chain,
            metadata="",
            pins=[],
            why=why(row.evicted_by) if row.evicted_by else "",
        )
    found = TIME_TRAVEL.of(ledger.store, "the web view").entries(session_id, agent_id, [entry_id])
    if not found:
        raise EntryNotFound(f"no entry {entry_id!r} in session {session_id!r}, agent {agent_id!r}")
    entry = found[0]
    partners = _partners(ledger, session_id, agent_id, entry, reductions)
    replaced_by = {i: s.summary_id for s in summaries.values() for i in s.replaces}
    row = history_row(entry, reductions=reductions, replaced_by=replaced_by, partners=partners)
    revisions = [
        (rev, render_blocks(rev.original, partners)) for rev in ledger.revisions(session_id, agent_id, entry_id)
    ]
    message = entry.message
    metadata = json.dumps(jsonable(message.metadata), indent=2, ensure_ascii=False) if message.metadata else ""
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
        pins=pin_rows(pins, {}),
        why=why(row.evicted_by) if row.evicted_by else "",
    )


def reduction_page(ledger: Ledger, session_id: str, agent_id: str, reduction_id: str) -> ReductionPage:
    """One reduction whole: its facts, why it ran, the entries it evicted, its summary and rewrites.

    Raises:
        SessionNotFound: The session has no such agent.
        EntryNotFound: The agent has no reduction with this id.
    """
    _require_agent(ledger, session_id, agent_id)
    reduction = next((r for r in ledger.reductions(session_id, agent_id) if r.reduction_id == reduction_id), None)
    if reduction is None:
        raise EntryNotFound(f"no reduction {reduction_id!r} in session {session_id!r}, agent {agent_id!r}")
    summary = None
    if reduction.summary_id:
        summary = next(
            (s for s in ledger.summaries(session_id, agent_id) if s.summary_id == reduction.summary_id), None
        )
    revised = [
        (rev, render_blocks(rev.original))
        for rev in ledger.revisions(session_id, agent_id)
        if rev.reduction_id == reduction_id
    ]
    return ReductionPage(
        session_id=session_id,
        agent_id=agent_id,
        reduction=reduction,
        why=why(reduction),
        letter=letter(reduction.strategy),
        at=fmt_time(reduction.created_at),
        evicted=_rows(ledger, session_id, agent_id, reduction.evicted),
        summary=summary,
        revised=revised,
        restored=reduction.restored,
    )
