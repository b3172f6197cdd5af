"""The restore's three reads, in both forms, and the rows-to-records code they share.

A restore reads the conversation row, its active messages and its active summaries:
three indexed reads that never touch an evicted row. They exist twice, side by side
here: as SQLAlchemy statements (built on first use) that the engine runs on every
engine, and as SQL text that :mod:`~contextledger.stores.sql.reader` runs on SQLite
through the standard library's driver, so that a fresh process can restore without
importing SQLAlchemy. Both forms select the same columns in the same order and hand
their rows to :func:`snapshot`; a property test checks that they return equal
snapshots. This module imports no SQLAlchemy at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pydantic import BaseModel

from contextledger.model.messages import Message, restored_message
from contextledger.model.records import (
    ConversationState,
    PinEvent,
    Reduction,
    Revision,
    Snapshot,
    SummaryEntry,
    Tombstone,
    ViewEntry,
    view_entry,
)
from contextledger.model.trusted import trusted
from contextledger.stores.base import decoding

if TYPE_CHECKING:
    from sqlalchemy import Select

__all__ = [
    "ACTIVE_MESSAGES_SQL",
    "ACTIVE_SUMMARIES_SQL",
    "STATE_COLUMNS",
    "STATE_SQL",
    "Statements",
    "message",
    "record",
    "snapshot",
    "state_of",
    "statements",
]

STATE_COLUMNS = (
    "id",
    "session_id",
    "agent_id",
    "version",
    "model_call_count",
    "next_seq",
    "manager_state",
    "agent_state",
    "created_at",
    "updated_at",
)
"""The columns of ``cl_conversations`` a restore reads (every column), in :data:`STATE_SQL`'s order."""

# The SQL text (SQLite, named parameters). Keep each in step with its statement below.
STATE_SQL = (
    f"SELECT {', '.join(STATE_COLUMNS)} FROM cl_conversations WHERE session_id = :session_id AND agent_id = :agent_id"
)
ACTIVE_MESSAGES_SQL = (
    "SELECT message_id, seq, role, content, metadata AS meta, tokens FROM cl_entries "
    "WHERE conversation_id = :conversation_id AND status = 'active' ORDER BY seq, id"
)
ACTIVE_SUMMARIES_SQL = (
    "SELECT summary_id, seq, content, tokens FROM cl_summaries "
    "WHERE conversation_id = :conversation_id AND status = 'active' ORDER BY seq, id"
)


class Statements(NamedTuple):
    """The restore's reads as SQLAlchemy statements (bound by name, like the SQL text)."""

    state: Select[*tuple[Any, ...]]
    active_messages: Select[*tuple[Any, ...]]
    active_summaries: Select[*tuple[Any, ...]]


@cache
def statements() -> Statements:
    """The three statements, built once (a restore then only binds and executes them)."""
    from sqlalchemy import Text, bindparam, cast, select

    from contextledger.stores.sql.models import ConversationRow, EntryRow, SummaryRow

    return Statements(
        state=select(*(ConversationRow.__table__.c[name] for name in STATE_COLUMNS)).where(
            ConversationRow.session_id == bindparam("session_id"), ConversationRow.agent_id == bindparam("agent_id")
        ),
        # The JSON columns as text (no decode by the driver or the engine): the
        # snapshot parses each once, into the message (see snapshot()).
        active_messages=select(
            EntryRow.message_id,
            EntryRow.seq,
            EntryRow.role,
            cast(EntryRow.content, Text).label("content"),
            cast(EntryRow.metadata_, Text).label("meta"),
            EntryRow.tokens,
        )
        .where(EntryRow.conversation_id == bindparam("conversation_id"), EntryRow.status == "active")
        .order_by(EntryRow.seq, EntryRow.id),
        active_summaries=select(SummaryRow.summary_id, SummaryRow.seq, SummaryRow.content, SummaryRow.tokens)
        .where(SummaryRow.conversation_id == bindparam("conversation_id"), SummaryRow.status == "active")
        .order_by(SummaryRow.seq, SummaryRow.id),
    )


_R = TypeVar("_R", bound=BaseModel)

_TABLES: dict[type[BaseModel], tuple[str, str]] = {
    ConversationState: ("cl_conversations", "agent_id"),
    Reduction: ("cl_reductions", "reduction_id"),
    SummaryEntry: ("cl_summaries", "summary_id"),
    Revision: ("cl_revisions", "message_id"),
    PinEvent: ("cl_pin_events", "entry_id"),
    Tombstone: ("cl_tombstones", "entry_id"),
}


def record(model: type[_R], row: Mapping[Any, Any], **values: Any) -> _R:
    """Build ``model`` from the row's columns of the same names (the tables mirror the records).

    Raises:
        CorruptRecord: A column holds a value the record cannot take (damaged JSON included).
    """
    fields = model.model_fields
    data = {**{k: v for k, v in row.items() if k in fields}, **values}
    table, id_field = _TABLES.get(model, (model.__name__, ""))
    record_id = data.get(id_field)
    if model is ConversationState:
        record_id = f"{data.get('session_id')}/{data.get('agent_id')}"
    with decoding(table, record_id if isinstance(record_id, str) else None):
        return model.model_validate(data)


def message(message_id: str, role: Any, content: Any, meta: Any) -> Message:
    """The message of a ``cl_entries`` row (JSON columns already decoded).

    Raises:
        CorruptRecord: The row cannot be decoded (named by table and id).
    """
    with decoding("cl_entries", message_id):
        return Message.from_record({"message_id": message_id, "role": role, "content": content, "metadata": meta})


def state_of(state: Mapping[Any, Any], session_id: str, agent_id: str) -> ConversationState:
    """The conversation row (JSON and time columns decoded) as a record; see :func:`_state`."""
    return _state(state, session_id, agent_id)


def _state(state: Mapping[Any, Any], session_id: str, agent_id: str) -> ConversationState:
    """The conversation row as a record; one whose columns have the stored types is taken as it is.

    A row written by the library has exactly these types, and validating them again
    would change nothing: building the record's validator is the one cost of a fresh
    process's restore that the row does not need. Anything else is validated (and a
    damaged value reported as ``CorruptRecord``).
    """
    if (
        all(type(state.get(name)) is int for name in ("version", "model_call_count", "next_seq"))
        and all(state.get(name) is None or type(state.get(name)) is dict for name in ("manager_state", "agent_state"))
        and all(
            type(value) is datetime and value.tzinfo is not None
            for value in (state.get("created_at"), state.get("updated_at"))
        )
    ):
        fields = ConversationState.model_fields
        values = {k: v for k, v in state.items() if k in fields}
        return ConversationState.model_construct(**{**values, "session_id": session_id, "agent_id": agent_id})
    return record(ConversationState, state, session_id=session_id, agent_id=agent_id)


def _decoded(loads: Callable[[Any], Any], text: Any) -> Any:
    return None if text is None else loads(text)


def snapshot(
    state: Mapping[Any, Any],
    messages: Sequence[Sequence[Any]],
    summaries: Iterable[Sequence[Any]],
    *,
    session_id: str,
    agent_id: str,
    loads: Callable[[Any], Any],
    escaped: Callable[[str], bool] | None = None,
) -> Snapshot:
    """The snapshot of a restore's rows, in the column orders of the reads above.

    The messages' content and metadata come as the JSON text stored, and are parsed
    once, into the message (:func:`~contextledger.model.messages.restored_message`): what
    the library wrote is taken without a second validation, and the content is held as
    its text until first used. When a row is anything
    else, or ``escaped`` says some text needs the store's own decoding, every row is
    decoded with ``loads`` (the engine's JSON deserializer) and validated, as the
    engine's JSON columns would have decoded it.

    Raises:
        CorruptRecord: A row cannot be decoded (named by table and id).
    """
    conversation = _state(state, session_id, agent_id)
    try:
        # One guard for the whole window; a damaged row is then located row by row below.
        if escaped is not None and any(escaped(text) for row in messages for text in row[3:5] if text is not None):
            raise ValueError("escaped text: decoded by the store")
        entries = [
            view_entry(message_id, "message", seq, restored_message(message_id, role, content, meta), tokens)
            for message_id, seq, role, content, meta, tokens in messages
        ]
    except Exception:  # re-raised as CorruptRecord, located, by message() below
        entries = [
            ViewEntry(
                entry_id=message_id,
                seq=seq,
                message=message(message_id, role, _decoded(loads, content), _decoded(loads, meta)),
                tokens=tokens,
            )
            for message_id, seq, role, content, meta, tokens in messages
        ]
    if summaries := list(summaries):
        entries += [
            view_entry(
                summary_id,
                "summary",
                seq,
                Message.from_record({"message_id": summary_id, "role": "user", "content": [{"text": text}]}),
                tokens,
            )
            for summary_id, seq, text, tokens in summaries
        ]
        # A stable sort keeps insertion order among equal seqs, as the memory store does
        # (the messages alone come in that order already).
        entries.sort(key=lambda e: (e.seq, e.kind != "summary"))
    return trusted(Snapshot, {"state": conversation, "entries": tuple(entries)})
