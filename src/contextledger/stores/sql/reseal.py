"""Replacing sealed tokens in place on SQL (a key rotation), inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from contextledger.stores.capabilities import Swap, swap_in
from contextledger.stores.sql.models import ConversationRow, EntryRow, RevisionRow, SummaryRow

__all__ = ["reseal"]


def reseal(conn: Connection, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
    """Apply each swap where its token still is; return how many were applied."""
    conversation: int | None = conn.execute(
        select(ConversationRow.id).where(ConversationRow.session_id == session_id, ConversationRow.agent_id == agent_id)
    ).scalar()
    if conversation is None:
        return 0
    done = 0
    for sw in swaps:
        done += _one(conn, conversation, sw)
    return done


def _one(conn: Connection, conversation: int, sw: Swap) -> int:
    column: Any
    if sw.where in ("content", "meta"):
        column = EntryRow.content if sw.where == "content" else EntryRow.metadata_
        row = conn.execute(
            select(EntryRow.id, column).where(EntryRow.conversation_id == conversation, EntryRow.message_id == sw.ident)
        ).first()
        table: Any = EntryRow
    elif sw.where == "summary":
        column = SummaryRow.content
        row = conn.execute(
            select(SummaryRow.id, column).where(
                SummaryRow.conversation_id == conversation, SummaryRow.summary_id == sw.ident
            )
        ).first()
        table = SummaryRow
    elif sw.where == "revision":
        column = RevisionRow.original
        row = conn.execute(
            select(RevisionRow.id, column).where(
                RevisionRow.conversation_id == conversation,
                RevisionRow.message_id == sw.ident,
                RevisionRow.number == sw.number,
            )
        ).first()
        table = RevisionRow
    else:
        column = ConversationRow.manager_state if sw.where == "manager_state" else ConversationRow.agent_state
        row = conn.execute(select(ConversationRow.id, column).where(ConversationRow.id == conversation)).first()
        table = ConversationRow
    if row is None:
        return 0
    value, hit = swap_in(row[1], sw.old, sw.new)
    if not hit:
        return 0
    conn.execute(update(table).where(table.id == row[0]).values({column: value}))
    return 1
