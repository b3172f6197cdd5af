"""A conversation restored on the engine: its state and active view (the SQLite reader has its own, same reads).

The statements and the rows-to-snapshot code are :mod:`~contextledger.stores.sql.window`'s,
which also holds the same reads as SQL text for
:class:`~contextledger.stores.sql.reader.SQLiteReader`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from contextledger.model.records import ConversationState, Snapshot
from contextledger.stores.sql import encoding, window

__all__ = ["conversation_state", "json_text_decoding", "load"]


def load(conn: Connection, session_id: str, agent_id: str) -> Snapshot | None:
    """The state and the active view: three indexed reads, none touching evicted rows."""
    # Core rows (flat columns) rather than ORM objects: no identity map, no unit of work.
    reads = window.statements()
    row = conn.execute(reads.state, {"session_id": session_id, "agent_id": agent_id}).first()
    if row is None:
        return None
    messages = conn.execute(reads.active_messages, {"conversation_id": row.id}).all()
    summaries = conn.execute(reads.active_summaries, {"conversation_id": row.id}).all()
    loads, escaped = json_text_decoding(conn)
    return window.snapshot(
        row._mapping, messages, summaries, session_id=session_id, agent_id=agent_id, loads=loads, escaped=escaped
    )


def conversation_state(conn: Connection, session_id: str, agent_id: str) -> ConversationState | None:
    """The conversation's state alone (one indexed read), or ``None``."""
    row = conn.execute(window.statements().state, {"session_id": session_id, "agent_id": agent_id}).first()
    return None if row is None else window.state_of(row._mapping, session_id, agent_id)


def json_text_decoding(conn: Connection) -> tuple[Callable[[Any], Any], Callable[[str], bool] | None]:
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
