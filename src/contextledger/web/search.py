"""Search over a session's messages and summaries, evicted and superseded ones included.

A plain, case-insensitive substring search of each entry's text (text blocks, tool
calls with their input, tool results) and each summary's content, across the agents
asked for. The store has no text index, so a search reads the agents' histories once;
hits are paged here and carry the words around the match, split so the template can
mark the match without building markup from data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from contextledger.ledger import Ledger
from contextledger.model.text import describe, fmt_time

__all__ = ["PER_PAGE", "Hit", "SearchResults", "search_session"]

PER_PAGE = 50
CONTEXT = 70
"""Characters of text kept on each side of a match."""
MAX_QUERY = 200


@dataclass(frozen=True)
class Hit:
    """One entry whose text holds the query: where it is, and the text around the match."""

    agent_id: str
    entry_id: str
    kind: str  # message | summary
    seq: int
    role: str
    status: str
    created_at: str
    before: str
    match: str
    after: str


@dataclass(frozen=True)
class SearchResults:
    """One page of hits, oldest first."""

    query: str
    hits: list[Hit]
    page: int
    pages: int
    total: int


def _hit(pattern: re.Pattern[str], text: str) -> tuple[str, str, str] | None:
    found = pattern.search(text)
    if found is None:
        return None
    start, end = found.span()
    before = text[max(0, start - CONTEXT) : start]
    after = text[end : end + CONTEXT]
    return (
        ("…" if start > CONTEXT else "") + before,
        text[start:end],
        after + ("…" if end + CONTEXT < len(text) else ""),
    )


def search_session(
    ledger: Ledger, session_id: str, agents: Sequence[str], query: str, *, page: int = 1, per_page: int = PER_PAGE
) -> SearchResults:
    """Entries and summaries of ``agents`` whose text contains ``query`` (case-insensitive), paged.

    The query is taken literally (no pattern syntax) and cut to :data:`MAX_QUERY` characters.
    """
    query = " ".join(query.split())[:MAX_QUERY]
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    hits: list[tuple[tuple[str, int, int], Hit]] = []
    for agent_id in agents:
        for h in ledger.history(session_id, agent_id):
            text = describe(h.message, 1 << 30)
            found = _hit(pattern, text)
            if found is not None:
                hit = Hit(
                    agent_id, h.message.message_id, "message", h.seq, h.message.role, h.status,
                    fmt_time(h.created_at), *found,
                )  # fmt: skip
                hits.append(((hit.created_at, h.seq, 1), hit))
        for s in ledger.summaries(session_id, agent_id):
            found = _hit(pattern, " ".join(s.content.split()))
            if found is not None:
                status = "superseded" if s.superseded_by else s.status
                hit = Hit(agent_id, s.summary_id, "summary", s.seq, "summary", status, fmt_time(s.created_at), *found)
                hits.append(((hit.created_at, s.seq, 0), hit))
    hits.sort(key=lambda pair: pair[0])
    pages = max(1, -(-len(hits) // per_page))
    current = min(max(page, 1), pages)
    shown = [hit for _, hit in hits[(current - 1) * per_page : current * per_page]]
    return SearchResults(query=query, hits=shown, page=current, pages=pages, total=len(hits))
