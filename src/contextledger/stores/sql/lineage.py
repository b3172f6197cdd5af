"""Lineage and expiry on SQL: the links kept under a conversation, and whole idle sessions removed.

Each function runs inside the caller's transaction (the store's unit of work).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from contextledger.model.records import Expiry, LineageLink
from contextledger.stores.sql.fields import LINEAGE
from contextledger.stores.sql.models import ConversationRow, ExpiryRow, LineageRow, SessionRow

__all__ = ["add_lineage", "expirations", "expire_session", "expired", "forget_expiries"]


def add_lineage(conn: Connection, links: Sequence[LineageLink]) -> int:
    """Insert the links whose ancestor exists and that are not there yet; return how many were."""
    added = 0
    ancestors: dict[tuple[str, str], tuple[int | None, set[str]]] = {}
    for link in links:
        pair = (link.session_id, link.agent_id)
        if pair not in ancestors:
            found: int | None = conn.execute(
                select(ConversationRow.id).where(
                    ConversationRow.session_id == link.session_id, ConversationRow.agent_id == link.agent_id
                )
            ).scalar()
            keys: set[str] = set()
            if found is not None:
                kept = conn.execute(select(LineageRow).where(LineageRow.conversation_id == found))
                keys = {_key(row) for row in kept}
            ancestors[pair] = (found, keys)
        conversation, keys = ancestors[pair]
        if conversation is None or link.key in keys:
            continue
        conn.execute(insert(LineageRow).values(conversation_id=conversation, **LINEAGE.values(link)))
        keys.add(link.key)
        added += 1
    return added


def _key(row: Any) -> str:
    return f"{row.kind}|{row.ledger}|{row.child_session_id}|{row.child_agent_id}"


def expire_session(
    conn: Connection, session_id: str, idle_before: datetime, reason: str, now: datetime
) -> list[Expiry]:
    """Delete the session when none of its conversations was written at or after ``idle_before``; keep expiries."""
    rows = conn.execute(
        select(ConversationRow.agent_id, ConversationRow.updated_at)
        .where(ConversationRow.session_id == session_id)
        .order_by(ConversationRow.agent_id)
    ).all()
    if not rows or any(updated >= idle_before for _, updated in rows):
        return []
    conn.execute(delete(SessionRow).where(SessionRow.session_id == session_id))
    expiries = [
        Expiry(session_id=session_id, agent_id=agent, reason=reason, expired_at=now, last_write=updated)
        for agent, updated in rows
    ]
    conn.execute(
        insert(ExpiryRow),
        [
            {
                "session_id": e.session_id,
                "agent_id": e.agent_id,
                "reason": e.reason,
                "expired_at": e.expired_at,
                "last_write": e.last_write,
            }
            for e in expiries
        ],
    )
    return expiries


def expirations(conn: Connection, session_id: str, agent_id: str | None = None) -> list[Expiry]:
    """The expiries kept for the session (or one agent), oldest first."""
    stmt = select(ExpiryRow).where(ExpiryRow.session_id == session_id).order_by(ExpiryRow.expired_at, ExpiryRow.id)
    if agent_id is not None:
        stmt = stmt.where(ExpiryRow.agent_id == agent_id)
    return [
        Expiry(
            session_id=row.session_id,
            agent_id=row.agent_id,
            reason=row.reason,
            expired_at=row.expired_at,
            last_write=row.last_write,
        )
        for row in conn.execute(stmt)
    ]


def expired(conn: Connection, session_id: str, agent_id: str) -> Expiry | None:
    """The last expiry of the conversation, if it expired."""
    found = expirations(conn, session_id, agent_id)
    return found[-1] if found else None


def forget_expiries(conn: Connection, session_id: str) -> None:
    """Delete what is kept of the session's expiries (``delete_session`` removes everything)."""
    conn.execute(delete(ExpiryRow).where(ExpiryRow.session_id == session_id))
