"""Read queries over the ledger tables; each runs on a connection the caller owns.

These are the SQLAlchemy statements every engine runs; on a SQLite file opened by its
reader the listings run as SQL text instead (:mod:`.reader_queries`). Both hand their
rows to :mod:`.rows`, which builds the records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    String,
    Text,
    and_,
    cast,
    exists,
    func,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.orm import aliased

from contextledger.model.records import (
    ConversationState,
    Eviction,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Trigger,
)
from contextledger.stores.base import AppendedBy
from contextledger.stores.sql import encoding, rows, window
from contextledger.stores.sql.models import (
    ConversationRow,
    EntryRow,
    PinEventRow,
    ReductionRow,
    RevisionRow,
    ScopeStateRow,
    SessionRow,
    SummaryRow,
    SummarySourceRow,
)
from contextledger.stores.sql.write.apply import chunks

__all__ = [
    "agents",
    "conversation_state",
    "entries",
    "evictions",
    "history",
    "load",
    "owner",
    "pin_history",
    "reductions",
    "revisions",
    "scope_state",
    "sessions",
    "summaries",
]


def _conversation_filter(session_id: str, agent_id: str | None) -> list[Any]:
    clauses: list[Any] = [ConversationRow.session_id == session_id]
    if agent_id is not None:
        clauses.append(ConversationRow.agent_id == agent_id)
    return clauses


def load(conn: Connection, session_id: str, agent_id: str) -> Snapshot | None:
    """The state and the active view: three indexed reads, none touching evicted rows.

    The statements and the rows-to-snapshot code are :mod:`.window`'s, which also holds
    the same reads as SQL text for the SQLite reader.
    """
    # Core rows (flat columns) rather than ORM objects: no identity map, no unit of work.
    reads = window.statements()
    row = conn.execute(reads.state, {"session_id": session_id, "agent_id": agent_id}).first()
    if row is None:
        return None
    messages = conn.execute(reads.active_messages, {"conversation_id": row.id}).all()
    summaries = conn.execute(reads.active_summaries, {"conversation_id": row.id}).all()
    loads, escaped = _json_text_decoding(conn)
    return window.snapshot(
        row._mapping, messages, summaries, session_id=session_id, agent_id=agent_id, loads=loads, escaped=escaped
    )


def conversation_state(conn: Connection, session_id: str, agent_id: str) -> ConversationState | None:
    """The conversation's state alone (one indexed read), or ``None``."""
    row = conn.execute(window.statements().state, {"session_id": session_id, "agent_id": agent_id}).first()
    return None if row is None else window.state_of(row._mapping, session_id, agent_id)


def _json_text_decoding(conn: Connection) -> tuple[Callable[[Any], Any], Callable[[str], bool] | None]:
    """How the engine decodes its JSON columns, for the JSON text a restore reads.

    The store's own deserializers are ``json.loads`` on text that holds no escaped
    string (PostgreSQL: see :mod:`.encoding`); one an application configured decodes
    every row itself.
    """
    loads: Callable[[Any], Any] = getattr(conn.dialect, "_json_deserializer", None) or json.loads
    if loads is encoding.tolerant_loads:
        return loads, encoding.holds_escapes
    if loads is encoding.tolerant_sqlite_loads or loads is json.loads:
        return loads, None
    return loads, _always


def _always(text: str) -> bool:
    return True


def _history_columns() -> tuple[Any, ...]:
    """The columns :func:`_history_rows` reads, in :data:`.rows.HISTORY_COLUMNS` order."""
    return (
        EntryRow.message_id,
        EntryRow.seq,
        EntryRow.role,
        EntryRow.content,
        EntryRow.metadata_.label("meta"),
        EntryRow.status,
        EntryRow.pinned,
        EntryRow.tokens,
        EntryRow.created_at,
        EntryRow.evicted_by,
        EntryRow.revision_count,
        EntryRow.from_call,
        EntryRow.version,
    )


def history(conn: Connection, session_id: str, agent_id: str, *, include_evicted: bool) -> list[HistoryEntry]:
    """Every message entry in seq order."""
    stmt = (
        select(*_history_columns())
        .join(ConversationRow, ConversationRow.id == EntryRow.conversation_id)
        .where(ConversationRow.session_id == session_id, ConversationRow.agent_id == agent_id)
        .order_by(EntryRow.seq, EntryRow.id)
    )
    if not include_evicted:
        stmt = stmt.where(EntryRow.status == "active")
    return _history_rows(conn, stmt, session_id, agent_id)


def entries(
    conn: Connection, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
) -> list[HistoryEntry]:
    """The message entries of ``ids`` (active or evicted) in seq order: indexed reads of those rows only.

    ``appended_by`` bounds the rows returned to those appended at or before its cut.
    """
    conversation = conn.execute(
        select(ConversationRow.id).where(ConversationRow.session_id == session_id, ConversationRow.agent_id == agent_id)
    ).scalar()
    if conversation is None:
        return []
    out: list[HistoryEntry] = []
    for batch in chunks(sorted(set(ids))):
        stmt = select(*_history_columns()).where(
            EntryRow.conversation_id == conversation, EntryRow.message_id.in_(batch)
        )
        if appended_by is not None:
            if appended_by.from_call is not None:
                stmt = stmt.where(EntryRow.from_call <= appended_by.from_call)
            if appended_by.version is not None:
                stmt = stmt.where(EntryRow.version <= appended_by.version)
            if appended_by.created_at is not None:
                stmt = stmt.where(EntryRow.created_at <= appended_by.created_at)
        out += _history_rows(conn, stmt, session_id, agent_id)
    return sorted(out, key=lambda h: h.seq)


def _history_rows(conn: Connection, stmt: Any, session_id: str, agent_id: str) -> list[HistoryEntry]:
    return rows.history_entries(conn.execute(stmt), session_id, agent_id)


def evictions(
    conn: Connection,
    session_id: str,
    agent_id: str | None,
    *,
    trigger: Trigger | None,
    since: datetime | None,
) -> list[Eviction]:
    """Evicted messages and summaries with their reduction and replacing summary: one query."""
    reduction = aliased(ReductionRow)
    source = aliased(SummarySourceRow)
    replacing = aliased(SummaryRow)
    evicted_summary = aliased(SummaryRow)

    def reduction_filters() -> list[Any]:
        clauses = _conversation_filter(session_id, agent_id)
        if trigger is not None:
            clauses.append(reduction.trigger == trigger)
        if since is not None:
            clauses.append(reduction.created_at >= since)
        return clauses

    common = (
        reduction.created_at.label("evicted_at"),
        reduction.trigger.label("trigger"),
        reduction.strategy.label("strategy"),
        reduction.reduction_id.label("reduction_id"),
        reduction.error.label("error"),
        replacing.summary_id.label("replaced_by"),
        ConversationRow.agent_id.label("agent_id"),
    )
    messages = (
        select(
            EntryRow.message_id.label("entry_id"),
            literal_column("'message'", String()).label("kind"),
            EntryRow.seq.label("seq"),
            EntryRow.role.label("role"),
            EntryRow.content.label("content"),
            cast(null(), Text).label("text"),
            *common,
        )
        .select_from(EntryRow)
        .join(ConversationRow, ConversationRow.id == EntryRow.conversation_id)
        .join(
            reduction,
            and_(reduction.conversation_id == EntryRow.conversation_id, reduction.reduction_id == EntryRow.evicted_by),
        )
        .outerjoin(
            source, and_(source.conversation_id == EntryRow.conversation_id, source.entry_id == EntryRow.message_id)
        )
        .outerjoin(replacing, replacing.id == source.summary_row_id)
        .where(EntryRow.status == "evicted", *reduction_filters())
    )
    summaries_q = (
        select(
            evicted_summary.summary_id.label("entry_id"),
            literal_column("'summary'", String()).label("kind"),
            evicted_summary.seq.label("seq"),
            literal_column("'user'", String()).label("role"),
            literal_column("NULL", JSON()).label("content"),
            evicted_summary.content.label("text"),
            *common,
        )
        .select_from(evicted_summary)
        .join(ConversationRow, ConversationRow.id == evicted_summary.conversation_id)
        .join(
            reduction,
            and_(
                reduction.conversation_id == evicted_summary.conversation_id,
                reduction.reduction_id == evicted_summary.evicted_by,
            ),
        )
        .outerjoin(
            source,
            and_(
                source.conversation_id == evicted_summary.conversation_id,
                source.entry_id == evicted_summary.summary_id,
            ),
        )
        .outerjoin(replacing, replacing.id == source.summary_row_id)
        .where(evicted_summary.status == "evicted", *reduction_filters())
    )
    both = union_all(messages, summaries_q).subquery()
    found = conn.execute(select(both).order_by(both.c.evicted_at, both.c.agent_id, both.c.seq, both.c.kind))
    return rows.evictions(found, session_id)


def reductions(conn: Connection, session_id: str, agent_id: str | None) -> list[Reduction]:
    """Reductions in commit order."""
    found = conn.execute(
        select(ReductionRow, ConversationRow.agent_id)
        .join(ConversationRow, ConversationRow.id == ReductionRow.conversation_id)
        .where(*_conversation_filter(session_id, agent_id))
        .order_by(ReductionRow.created_at, ReductionRow.id)
    )
    return rows.reductions((row._mapping for row in found), session_id)


def summaries(conn: Connection, session_id: str, agent_id: str | None) -> list[SummaryEntry]:
    """Every summary, superseded ones included, oldest first (two queries, not one per row)."""
    found = conn.execute(
        select(SummaryRow, ConversationRow.agent_id)
        .join(ConversationRow, ConversationRow.id == SummaryRow.conversation_id)
        .where(*_conversation_filter(session_id, agent_id))
        .order_by(SummaryRow.created_at, SummaryRow.id)
    ).all()
    replaces: dict[int, list[str]] = {}
    for batch in chunks([s.id for s in found]):
        for src in conn.execute(
            select(SummarySourceRow.summary_row_id, SummarySourceRow.entry_id)
            .where(SummarySourceRow.summary_row_id.in_(batch))
            .order_by(SummarySourceRow.summary_row_id, SummarySourceRow.position)
        ):
            replaces.setdefault(src.summary_row_id, []).append(src.entry_id)
    return rows.summaries([s._mapping for s in found], replaces, session_id)


def revisions(conn: Connection, session_id: str, agent_id: str, message_id: str | None) -> list[Revision]:
    """Stored original contents, oldest first."""
    stmt = (
        select(RevisionRow)
        .join(ConversationRow, ConversationRow.id == RevisionRow.conversation_id)
        .where(ConversationRow.session_id == session_id, ConversationRow.agent_id == agent_id)
        .order_by(RevisionRow.id)
    )
    if message_id is not None:
        stmt = stmt.where(RevisionRow.message_id == message_id)
    return rows.revisions((r._mapping for r in conn.execute(stmt)), session_id, agent_id)


def agents(conn: Connection, session_id: str) -> list[str]:
    """Agent ids of the session, sorted."""
    return list(
        conn.execute(
            select(ConversationRow.agent_id)
            .where(ConversationRow.session_id == session_id)
            .order_by(ConversationRow.agent_id)
        ).scalars()
    )


def sessions(
    conn: Connection, *, limit: int, offset: int, app: str | None = None, user: str | None = None
) -> list[SessionInfo]:
    """One page of sessions (of ``app`` / ``user`` when given), most recently updated first (two queries per page)."""
    updated = func.max(ConversationRow.updated_at)
    stmt = (
        select(
            ConversationRow.session_id,
            func.min(ConversationRow.created_at).label("created_at"),
            updated.label("updated_at"),
            SessionRow.app,
            SessionRow.user_id,
        )
        .join(SessionRow, SessionRow.session_id == ConversationRow.session_id)
        .group_by(ConversationRow.session_id, SessionRow.app, SessionRow.user_id)
        .order_by(updated.desc(), ConversationRow.session_id.desc())
        .limit(limit)
        .offset(offset)
    )
    if app is not None:
        stmt = stmt.where(SessionRow.app == app)
    if user is not None:
        stmt = stmt.where(SessionRow.user_id == user)
    page = conn.execute(stmt).all()
    if not page:
        return []

    def count(model: type[EntryRow] | type[SummaryRow], *, active: bool) -> Any:
        clauses = [model.conversation_id == ConversationRow.id]
        if active:
            clauses.append(model.status == "active")
        return select(func.count()).select_from(model).where(*clauses).scalar_subquery()

    details = conn.execute(
        select(
            ConversationRow.session_id,
            ConversationRow.agent_id,
            (count(EntryRow, active=True) + count(SummaryRow, active=True)).label("active"),
            (count(EntryRow, active=False) + count(SummaryRow, active=False)).label("total"),
        )
        .where(ConversationRow.session_id.in_([p.session_id for p in page]))
        .order_by(ConversationRow.session_id, ConversationRow.agent_id)
    )
    return rows.session_infos(page, details)


def owner(conn: Connection, session_id: str) -> SessionOwner | None:
    """The app and user of the session, or ``None`` when it has no conversation."""
    found = conn.execute(
        select(SessionRow.app, SessionRow.user_id)
        .where(SessionRow.session_id == session_id)
        .where(exists().where(ConversationRow.session_id == SessionRow.session_id))
    ).first()
    return None if found is None else SessionOwner(found.app, found.user_id)


def scope_state(conn: Connection, app: str, user: str | None) -> dict[str, Any]:
    """The key/value state of ``app`` (``user`` ``None``) or of one of its users."""
    found = conn.execute(
        select(ScopeStateRow.key, ScopeStateRow.value).where(
            ScopeStateRow.app == app, ScopeStateRow.user_id == (user or "")
        )
    )
    return {row.key: row.value for row in found}


def pin_history(conn: Connection, session_id: str, agent_id: str | None) -> list[PinEvent]:
    """Pin events of the session (or one agent), in commit order."""
    found = conn.execute(
        select(
            ConversationRow.agent_id,
            PinEventRow.entry_id,
            PinEventRow.pinned,
            PinEventRow.source,
            PinEventRow.changeset_id,
            PinEventRow.created_at,
            PinEventRow.from_call,
            PinEventRow.version,
        )
        .join(ConversationRow, ConversationRow.id == PinEventRow.conversation_id)
        .where(*_conversation_filter(session_id, agent_id))
        .order_by(PinEventRow.created_at, ConversationRow.agent_id, PinEventRow.id)
    )
    return rows.pin_events(found, session_id)
