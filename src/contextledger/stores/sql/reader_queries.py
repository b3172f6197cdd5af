"""The listings of a SQLite ledger on the standard library's driver, as SQL text.

Each function runs inside :meth:`~contextledger.stores.sql.reader.SQLiteReader.read`
(one read transaction) and returns what the function of the same name in
:mod:`~contextledger.stores.sql.queries` returns on the engine: the statements are the
ones SQLAlchemy compiles for SQLite (same joins, filters and order, so the same query
plans and the same row order), the values are decoded as the engine's column types
decode them, and :mod:`~contextledger.stores.sql.rows` builds the records for both. A
property test checks that the two paths return equal listings. A fresh process that only
reads a SQLite file so never imports SQLAlchemy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from contextledger.model.records import (
    ConversationState,
    Eviction,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    SummaryEntry,
    Trigger,
)
from contextledger.stores.base import AppendedBy, decoding
from contextledger.stores.sql import rows, window
from contextledger.stores.sql.encoding import tolerant_sqlite_loads

__all__ = [
    "agents",
    "conversation_state",
    "entries",
    "evictions",
    "history",
    "owner",
    "pin_history",
    "reductions",
    "revisions",
    "scope_state",
    "sessions",
    "sqlite_time",
    "stored_json",
    "stored_time",
    "summaries",
]

_CHUNK = 500
"""Values per ``IN (...)`` list, as the engine's queries batch them."""

_HISTORY_SELECT = (
    "SELECT cl_entries.message_id, cl_entries.seq, cl_entries.role, cl_entries.content, "
    "cl_entries.metadata AS meta, cl_entries.status, cl_entries.pinned, cl_entries.tokens, "
    "cl_entries.created_at, cl_entries.evicted_by, cl_entries.revision_count, cl_entries.from_call, "
    "cl_entries.version"
)
_HISTORY_SQL = (
    f"{_HISTORY_SELECT} FROM cl_entries JOIN cl_conversations ON cl_conversations.id = cl_entries.conversation_id "
    "WHERE cl_conversations.session_id = :session_id AND cl_conversations.agent_id = :agent_id{active} "
    "ORDER BY cl_entries.seq, cl_entries.id"
)
_CONVERSATION_SQL = (
    "SELECT cl_conversations.id FROM cl_conversations "
    "WHERE cl_conversations.session_id = :session_id AND cl_conversations.agent_id = :agent_id"
)
_SUMMARIES_SQL = (
    "SELECT cl_summaries.id, cl_summaries.conversation_id, cl_summaries.summary_id, cl_summaries.seq, "
    "cl_summaries.content, cl_summaries.summarizer, cl_summaries.reduction_id, cl_summaries.supersedes, "
    "cl_summaries.superseded_by, cl_summaries.status, cl_summaries.evicted_by, cl_summaries.tokens, "
    "cl_summaries.created_at, cl_conversations.agent_id "
    "FROM cl_summaries JOIN cl_conversations ON cl_conversations.id = cl_summaries.conversation_id "
    "WHERE {conversations} ORDER BY cl_summaries.created_at, cl_summaries.id"
)
_SOURCES_SQL = (
    "SELECT cl_summary_sources.summary_row_id, cl_summary_sources.entry_id FROM cl_summary_sources "
    "WHERE cl_summary_sources.summary_row_id IN ({ids}) "
    "ORDER BY cl_summary_sources.summary_row_id, cl_summary_sources.position"
)
_REDUCTIONS_SQL = (
    'SELECT cl_reductions.id, cl_reductions.conversation_id, cl_reductions.reduction_id, cl_reductions."trigger", '
    "cl_reductions.strategy, cl_reductions.created_at, cl_reductions.messages_before, cl_reductions.messages_after, "
    "cl_reductions.tokens_before, cl_reductions.tokens_after, cl_reductions.evicted, cl_reductions.revised, "
    "cl_reductions.summary_id, cl_reductions.model_call_count, cl_reductions.error, cl_reductions.detail, "
    "cl_reductions.restored, cl_reductions.from_call, cl_reductions.version, cl_conversations.agent_id "
    "FROM cl_reductions JOIN cl_conversations ON cl_conversations.id = cl_reductions.conversation_id "
    "WHERE {conversations} ORDER BY cl_reductions.created_at, cl_reductions.id"
)
_REVISIONS_SQL = (
    "SELECT cl_revisions.id, cl_revisions.conversation_id, cl_revisions.message_id, cl_revisions.number, "
    "cl_revisions.original, cl_revisions.reason, cl_revisions.reduction_id, cl_revisions.created_at "
    "FROM cl_revisions JOIN cl_conversations ON cl_conversations.id = cl_revisions.conversation_id "
    "WHERE cl_conversations.session_id = :session_id AND cl_conversations.agent_id = :agent_id{message} "
    "ORDER BY cl_revisions.id"
)
_PINS_SQL = (
    "SELECT cl_conversations.agent_id, cl_pin_events.entry_id, cl_pin_events.pinned, cl_pin_events.source, "
    "cl_pin_events.changeset_id, cl_pin_events.created_at, cl_pin_events.from_call, cl_pin_events.version "
    "FROM cl_pin_events JOIN cl_conversations ON cl_conversations.id = cl_pin_events.conversation_id "
    "WHERE {conversations} ORDER BY cl_pin_events.created_at, cl_conversations.agent_id, cl_pin_events.id"
)
_AGENTS_SQL = (
    "SELECT cl_conversations.agent_id FROM cl_conversations "
    "WHERE cl_conversations.session_id = :session_id ORDER BY cl_conversations.agent_id"
)
_SESSIONS_SQL = (
    "SELECT cl_conversations.session_id, min(cl_conversations.created_at) AS created_at, "
    "max(cl_conversations.updated_at) AS updated_at, cl_sessions.app, cl_sessions.user_id FROM cl_conversations "
    "JOIN cl_sessions ON cl_sessions.session_id = cl_conversations.session_id{owner} "
    "GROUP BY cl_conversations.session_id, cl_sessions.app, cl_sessions.user_id "
    "ORDER BY max(cl_conversations.updated_at) DESC, cl_conversations.session_id DESC LIMIT :limit OFFSET :offset"
)
_OWNER_SQL = (
    "SELECT cl_sessions.app, cl_sessions.user_id FROM cl_sessions WHERE cl_sessions.session_id = :session_id "
    "AND EXISTS (SELECT 1 FROM cl_conversations WHERE cl_conversations.session_id = cl_sessions.session_id)"
)
_SCOPE_SQL = 'SELECT "key", value FROM cl_scope_state WHERE app = :app AND user_id = :user'
_COUNT = "(SELECT count(*) FROM {table} WHERE {table}.conversation_id = cl_conversations.id{active})"
_SESSION_DETAILS_SQL = (
    "SELECT cl_conversations.session_id, cl_conversations.agent_id, "
    + _COUNT.format(table="cl_entries", active=" AND cl_entries.status = 'active'")
    + " + "
    + _COUNT.format(table="cl_summaries", active=" AND cl_summaries.status = 'active'")
    + " AS active, "
    + _COUNT.format(table="cl_entries", active="")
    + " + "
    + _COUNT.format(table="cl_summaries", active="")
    + " AS total FROM cl_conversations WHERE cl_conversations.session_id IN ({ids}) "
    "ORDER BY cl_conversations.session_id, cl_conversations.agent_id"
)
# Evicted messages and evicted summaries, each with its reduction and the summary that
# replaced it: one UNION ALL, ordered as the engine's subquery is.
_EVICTED_SQL = (
    "SELECT {entry}.{entry_id} AS entry_id, '{kind}' AS kind, {entry}.seq AS seq, {role} AS role, "
    '{content} AS content, {text} AS text, r.created_at AS evicted_at, r."trigger" AS "trigger", '
    "r.strategy AS strategy, r.reduction_id AS reduction_id, r.error AS error, "
    "replacing.summary_id AS replaced_by, cl_conversations.agent_id AS agent_id "
    "FROM {table} AS {entry} JOIN cl_conversations ON cl_conversations.id = {entry}.conversation_id "
    "JOIN cl_reductions AS r ON r.conversation_id = {entry}.conversation_id AND r.reduction_id = {entry}.evicted_by "
    "LEFT OUTER JOIN cl_summary_sources AS src ON src.conversation_id = {entry}.conversation_id "
    "AND src.entry_id = {entry}.{entry_id} "
    "LEFT OUTER JOIN cl_summaries AS replacing ON replacing.id = src.summary_row_id "
    "WHERE {entry}.status = 'evicted' AND {conversations}{filters}"
)
_EVICTED_KINDS = (
    dict(
        table="cl_entries",
        entry="e",
        entry_id="message_id",
        kind="message",
        role="e.role",
        content="e.content",
        text="CAST(NULL AS TEXT)",
    ),
    dict(
        table="cl_summaries",
        entry="s",
        entry_id="summary_id",
        kind="summary",
        role="'user'",
        content="NULL",
        text="s.content",
    ),
)
_EVICTIONS_SQL = (
    'SELECT entry_id, kind, seq, role, content, text, evicted_at, "trigger", strategy, reduction_id, error, '
    "replaced_by, agent_id FROM ("
    + " UNION ALL ".join(
        _EVICTED_SQL.format(**kind, conversations="{conversations}", filters="{filters}") for kind in _EVICTED_KINDS
    )
    + ") ORDER BY evicted_at, agent_id, seq, kind"
)


def sqlite_time(value: datetime) -> str:
    """A timestamp as the engine binds it on SQLite: naive UTC text (aware values converted, naive ones taken as UTC).

    Stored timestamps are this text, so comparisons with it order by time.
    """
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="microseconds")


def stored_time(value: Any) -> Any:
    """A stored timestamp as the engine reads it: aware UTC (SQLite stores naive UTC text); ``None`` stays."""
    if not isinstance(value, str):
        return value
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def stored_json(value: Any) -> Any:
    """A JSON column as the engine reads it on SQLite (a bare number is taken as it is)."""
    if value is None or isinstance(value, int | float):
        return value
    return tolerant_sqlite_loads(value)


def _bool(value: Any) -> Any:
    return None if value is None else bool(value)


def _conversations(session_id: str, agent_id: str | None) -> tuple[str, dict[str, Any]]:
    """The filter on the session (and agent) and its parameters."""
    if agent_id is None:
        return "cl_conversations.session_id = :session_id", {"session_id": session_id}
    clause = "cl_conversations.session_id = :session_id AND cl_conversations.agent_id = :agent_id"
    return clause, {"session_id": session_id, "agent_id": agent_id}


def _mappings(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _history_rows(found: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """History rows with their JSON, boolean and time columns decoded (see :data:`.rows.HISTORY_COLUMNS`)."""
    return [
        (m, seq, role, stored_json(content), stored_json(meta), status, _bool(pinned), tokens, stored_time(at), *rest)
        for m, seq, role, content, meta, status, pinned, tokens, at, *rest in found
    ]


def history(conn: sqlite3.Connection, session_id: str, agent_id: str, *, include_evicted: bool) -> list[HistoryEntry]:
    """Every message entry in seq order."""
    sql = _HISTORY_SQL.format(active="" if include_evicted else " AND cl_entries.status = 'active'")
    found = conn.execute(sql, {"session_id": session_id, "agent_id": agent_id}).fetchall()
    return rows.history_entries(_history_rows(found), session_id, agent_id)


def entries(
    conn: sqlite3.Connection,
    session_id: str,
    agent_id: str,
    ids: Sequence[str],
    *,
    appended_by: AppendedBy | None = None,
) -> list[HistoryEntry]:
    """The message entries of ``ids`` (active or evicted) in seq order, bounded by ``appended_by``."""
    conversation = conn.execute(_CONVERSATION_SQL, {"session_id": session_id, "agent_id": agent_id}).fetchone()
    if conversation is None:
        return []
    bounds = ""
    values: list[Any] = []
    if appended_by is not None:
        for column, bound in (
            ("from_call", appended_by.from_call),
            ("version", appended_by.version),
            ("created_at", None if appended_by.created_at is None else sqlite_time(appended_by.created_at)),
        ):
            if bound is not None:
                bounds += f" AND cl_entries.{column} <= ?"
                values.append(bound)
    out: list[HistoryEntry] = []
    for batch in _chunks(sorted(set(ids))):
        sql = (
            f"{_HISTORY_SELECT} FROM cl_entries WHERE cl_entries.conversation_id = ? "
            f"AND cl_entries.message_id IN ({_marks(len(batch))}){bounds}"
        )
        found = conn.execute(sql, [conversation[0], *batch, *values]).fetchall()
        out += rows.history_entries(_history_rows(found), session_id, agent_id)
    return sorted(out, key=lambda h: h.seq)


def summaries(conn: sqlite3.Connection, session_id: str, agent_id: str | None) -> list[SummaryEntry]:
    """Every summary, superseded ones included, oldest first."""
    where, parameters = _conversations(session_id, agent_id)
    found = _mappings(conn.execute(_SUMMARIES_SQL.format(conversations=where), parameters))
    replaces: dict[int, list[str]] = {}
    for batch in _chunks([s["id"] for s in found]):
        for row_id, entry_id in conn.execute(_SOURCES_SQL.format(ids=_marks(len(batch))), batch).fetchall():
            replaces.setdefault(row_id, []).append(entry_id)
    for summary in found:
        summary["created_at"] = stored_time(summary["created_at"])
    return rows.summaries(found, replaces, session_id)


def reductions(conn: sqlite3.Connection, session_id: str, agent_id: str | None) -> list[Reduction]:
    """Reductions in commit order."""
    where, parameters = _conversations(session_id, agent_id)
    found = _mappings(conn.execute(_REDUCTIONS_SQL.format(conversations=where), parameters))
    for reduction in found:
        for name in ("evicted", "revised", "restored"):
            reduction[name] = stored_json(reduction[name])
        reduction["created_at"] = stored_time(reduction["created_at"])
    return rows.reductions(found, session_id)


def revisions(conn: sqlite3.Connection, session_id: str, agent_id: str, message_id: str | None) -> list[Revision]:
    """Stored original contents, oldest first."""
    parameters = {"session_id": session_id, "agent_id": agent_id, "message_id": message_id}
    message = "" if message_id is None else " AND cl_revisions.message_id = :message_id"
    found = _mappings(conn.execute(_REVISIONS_SQL.format(message=message), parameters))
    for revision in found:
        revision["original"] = stored_json(revision["original"])
        revision["created_at"] = stored_time(revision["created_at"])
    return rows.revisions(found, session_id, agent_id)


def pin_history(conn: sqlite3.Connection, session_id: str, agent_id: str | None) -> list[PinEvent]:
    """Pin events of the session (or one agent), in commit order."""
    where, parameters = _conversations(session_id, agent_id)
    found = conn.execute(_PINS_SQL.format(conversations=where), parameters).fetchall()
    decoded = [
        (agent, entry, _bool(pinned), source, cs, stored_time(at), *rest)
        for agent, entry, pinned, source, cs, at, *rest in found
    ]
    return rows.pin_events(decoded, session_id)


def conversation_state(conn: sqlite3.Connection, session_id: str, agent_id: str) -> ConversationState | None:
    """The conversation's state alone (one indexed read), or ``None``."""
    row = conn.execute(window.STATE_SQL, {"session_id": session_id, "agent_id": agent_id}).fetchone()
    if row is None:
        return None
    state = dict(zip(window.STATE_COLUMNS, row, strict=True))
    with decoding("cl_conversations", f"{session_id}/{agent_id}"):
        for name in ("manager_state", "agent_state"):
            state[name] = stored_json(state[name])
        for name in ("created_at", "updated_at"):
            state[name] = stored_time(state[name])
    return window.state_of(state, session_id, agent_id)


def owner(conn: sqlite3.Connection, session_id: str) -> SessionOwner | None:
    """The app and user of the session, or ``None`` when it has no conversation."""
    found = conn.execute(_OWNER_SQL, {"session_id": session_id}).fetchone()
    return None if found is None else SessionOwner(found[0], found[1])


def scope_state(conn: sqlite3.Connection, app: str, user: str | None) -> dict[str, Any]:
    """The key/value state of ``app`` (``user`` ``None``) or of one of its users."""
    found = conn.execute(_SCOPE_SQL, {"app": app, "user": user or ""}).fetchall()
    return {key: stored_json(value) for key, value in found}


def agents(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """Agent ids of the session, sorted."""
    return [row[0] for row in conn.execute(_AGENTS_SQL, {"session_id": session_id}).fetchall()]


def sessions(
    conn: sqlite3.Connection, *, limit: int, offset: int, app: str | None = None, user: str | None = None
) -> list[SessionInfo]:
    """One page of sessions (of ``app`` / ``user`` when given), most recently updated first."""
    parameters: dict[str, Any] = {"limit": limit, "offset": offset, "app": app, "user": user}
    owner = ""
    if app is not None:
        owner += " AND cl_sessions.app = :app"
    if user is not None:
        owner += " AND cl_sessions.user_id = :user"
    found = conn.execute(_SESSIONS_SQL.format(owner=owner), parameters).fetchall()
    page = [
        (session_id, stored_time(created), stored_time(updated), app_of, user_of)
        for session_id, created, updated, app_of, user_of in found
    ]
    if not page:
        return []
    details: list[tuple[Any, ...]] = []
    for batch in _chunks([p[0] for p in page]):
        details += conn.execute(_SESSION_DETAILS_SQL.format(ids=_marks(len(batch))), batch).fetchall()
    return rows.session_infos(page, details)


def evictions(
    conn: sqlite3.Connection,
    session_id: str,
    agent_id: str | None,
    *,
    trigger: Trigger | None,
    since: datetime | None,
) -> list[Eviction]:
    """Evicted messages and summaries with their reduction and replacing summary: one query."""
    where, parameters = _conversations(session_id, agent_id)
    filters = ""
    if trigger is not None:
        filters += ' AND r."trigger" = :trigger'
        parameters["trigger"] = trigger
    if since is not None:
        filters += " AND r.created_at >= :since"
        parameters["since"] = sqlite_time(since)
    found = conn.execute(_EVICTIONS_SQL.format(conversations=where, filters=filters), parameters).fetchall()
    decoded = [
        (entry_id, kind, seq, role, stored_json(content), text, stored_time(at), *rest)
        for entry_id, kind, seq, role, content, text, at, *rest in found
    ]
    return rows.evictions(decoded, session_id)
