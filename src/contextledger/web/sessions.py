"""The sessions page: every session of a ledger, most recently updated first, searched by id, paged.

Kept apart from the session page so that what it lists by (a search by id, an app, a
user) has one place to grow: :func:`sessions_page` takes its filters as keyword
arguments and reads them with the store's listing (the app and user filters are the
store's own; the search scans what they list).
"""

from __future__ import annotations

from dataclasses import dataclass

from contextledger.ledger import Ledger
from contextledger.model.text import fmt_time

__all__ = ["SEARCH_SCAN", "SessionRow", "SessionsPage", "sessions_page"]

SEARCH_SCAN = 20_000
"""Sessions scanned at most by a search (the store lists sessions, it does not search them)."""


@dataclass(frozen=True)
class SessionRow:
    """One session of the sessions page."""

    session_id: str
    agents: tuple[str, ...]
    created_at: str
    updated_at: str
    active: int
    total: int
    app: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class SessionsPage:
    """A page of sessions, with the search that produced it."""

    rows: list[SessionRow]
    query: str
    page: int
    has_next: bool
    app: str | None = None
    user: str | None = None


def sessions_page(
    ledger: Ledger,
    *,
    query: str = "",
    page: int = 1,
    per_page: int = 50,
    app: str | None = None,
    user: str | None = None,
) -> SessionsPage:
    """Sessions most recently updated first; ``query`` keeps those whose id contains it.

    ``app`` and ``user`` keep the sessions of that app and/or user (see ``Ledger.sessions``).

    Raises:
        ConfigurationError: ``app`` or ``user`` is an empty string.
    """
    page = max(page, 1)
    query = query.strip()
    if not query:
        infos = ledger.sessions(limit=per_page + 1, offset=(page - 1) * per_page, app=app, user=user)
    else:
        wanted = (page - 1) * per_page, page * per_page + 1
        infos, offset, seen = [], 0, 0
        needle = query.lower()
        while offset < SEARCH_SCAN and len(infos) < wanted[1]:
            batch = ledger.sessions(limit=500, offset=offset, app=app, user=user)
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
            app=i.app,
            user=i.user,
        )
        for i in infos[:per_page]
    ]
    return SessionsPage(rows=rows, query=query, page=page, has_next=len(infos) > per_page, app=app, user=user)
