"""The lineage listing on the SQLite reader (standard library only), so ``contextledger show`` imports no SQLAlchemy."""

from __future__ import annotations

import sqlite3
from typing import Any

from contextledger.model.records import LineageLink
from contextledger.stores.sql.read.decode import stored_time

__all__ = ["lineage"]

_SQL = (
    "SELECT cl_conversations.agent_id, cl_lineage.child_session_id, cl_lineage.child_agent_id, cl_lineage.kind, "
    "cl_lineage.ledger, cl_lineage.depth, cl_lineage.at_call, cl_lineage.version, cl_lineage.created_at "
    "FROM cl_lineage JOIN cl_conversations ON cl_conversations.id = cl_lineage.conversation_id "
    "WHERE cl_conversations.session_id = :session_id{agent} "
    "ORDER BY cl_lineage.created_at, cl_lineage.depth, cl_lineage.id"
)


def lineage(conn: sqlite3.Connection, session_id: str, agent_id: str | None) -> list[LineageLink]:
    """The links kept under the session's conversations (or one agent's), oldest first (as the engine's query)."""
    params: dict[str, Any] = {"session_id": session_id}
    agent = ""
    if agent_id is not None:
        agent, params["agent_id"] = " AND cl_conversations.agent_id = :agent_id", agent_id
    return [
        LineageLink(
            session_id=session_id,
            agent_id=row[0],
            child_session_id=row[1],
            child_agent_id=row[2],
            kind=row[3],
            ledger=row[4] or None,
            depth=row[5],
            at_call=row[6],
            version=row[7],
            created_at=stored_time(row[8]),
        )
        for row in conn.execute(_SQL.format(agent=agent), params).fetchall()
    ]
