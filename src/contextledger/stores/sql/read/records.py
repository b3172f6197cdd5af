"""Rows of the SQL listings as records: one conversion for the engine's rows and the SQLite reader's.

The listings (history, entries, summaries, reductions, revisions, pin events,
evictions, sessions) run one statement each (:mod:`.statements`) on the engine or, as
its generated SQL text, on the standard library's driver; both runners
(:mod:`.runner`) hand the rows here decoded alike (JSON parsed, timestamps aware UTC,
booleans ``bool``), so both return equal records; a property test checks that they
do. This module imports no SQLAlchemy (a fresh process restores without it).

Positional rows follow the column tuples below; whole-table rows (summaries,
reductions, revisions) are mappings of column name to value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from contextledger.model.messages import Message, restored_message
from contextledger.model.records import (
    Eviction,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SummaryEntry,
)
from contextledger.model.trusted import builder
from contextledger.stores.base import decoding, preview
from contextledger.stores.sql.window import message, record

__all__ = [
    "EVICTION_COLUMNS",
    "HISTORY_COLUMNS",
    "evictions",
    "history_entries",
    "lineage_links",
    "pin_events",
    "reductions",
    "revisions",
    "session_infos",
    "summaries",
]

MESSAGE_COLUMNS = ("message_id", "role", "content", "meta")
"""The message's columns that start a history row (``meta`` is the ``metadata`` column)."""

_OUTSIDE_ROW = ("session_id", "agent_id", "message")  # the conversation's, and the message built from its columns
_history_entry = builder(HistoryEntry, _OUTSIDE_ROW, start=len(MESSAGE_COLUMNS))
"""``HistoryEntry`` of its conversation, its message and a history row (its stored fields from the fifth column)."""

HISTORY_COLUMNS = (*MESSAGE_COLUMNS, *(name for name in HistoryEntry.model_fields if name not in _OUTSIDE_ROW))
"""The columns of a history row, in order: the message's, then every other field of the entry in the record's order.

(:data:`.fields.ENTRIES` maps those fields to ``cl_entries``; the statements check at
import that they select these.) A field added to ``HistoryEntry`` is read with nothing
changed here.
"""

EVICTION_COLUMNS = (
    "entry_id",
    "kind",
    "seq",
    "role",
    "content",
    "text",
    "evicted_at",
    "trigger",
    "strategy",
    "reduction_id",
    "error",
    "replaced_by",
    "agent_id",
)
"""The columns of an eviction row (a message's ``content``, or a summary's ``text``), in order."""


JsonText = tuple[Callable[[Any], Any], Callable[[str], bool] | None]
"""How a runner's engine decodes JSON text: its ``loads``, and which text needs it (``None``: none does).

Text the library wrote (no escape, see :mod:`~contextledger.stores.sql.encoding`) is
parsed straight into the message; any other row is decoded with ``loads`` and validated.
"""


def history_entries(
    rows: Iterable[Sequence[Any]], session_id: str, agent_id: str, json_text: JsonText
) -> list[HistoryEntry]:
    """History entries of rows in :data:`HISTORY_COLUMNS` order, content and metadata still JSON text.

    Raises:
        CorruptRecord: A row's message cannot be decoded (named by table and id).
    """
    loads, escaped = json_text
    build = _history_entry
    out = []
    for row in rows:
        message_id, role, content, meta = row[0], row[1], row[2], row[3]
        try:
            if escaped is not None and (escaped(content) or (meta is not None and escaped(meta))):
                raise ValueError("escaped text: decoded by the store")
            found = restored_message(message_id, role, content, meta)  # content held as its text until read
        except Exception:  # re-raised as CorruptRecord, located, by message()
            found = message(message_id, role, _decoded(loads, content), _decoded(loads, meta))
        out.append(build(session_id, agent_id, found, row))
    return out


def _decoded(loads: Callable[[Any], Any], text: Any) -> Any:
    return None if text is None else loads(text)


def evictions(rows: Iterable[Sequence[Any]], session_id: str) -> list[Eviction]:
    """Evictions of rows in :data:`EVICTION_COLUMNS` order, previewing a message's text or a summary's.

    Raises:
        CorruptRecord: An evicted message cannot be decoded.
    """
    out = []
    for entry_id, kind, seq, role, content, text, evicted_at, trigger, strategy, reduction_id, error, by, agent in rows:
        if kind == "message":
            with decoding("cl_entries", entry_id):
                text = Message.from_record({"message_id": entry_id, "role": role, "content": content}).plain_text
        out.append(
            Eviction(
                session_id=session_id,
                agent_id=agent,
                entry_id=entry_id,
                kind=kind,
                seq=seq,
                role=role,
                preview=preview(text),
                evicted_at=evicted_at,
                trigger=trigger,
                strategy=strategy,
                reduction_id=reduction_id,
                replaced_by_summary=by,
                error=error,
            )
        )
    return out


def reductions(rows: Iterable[Mapping[Any, Any]], session_id: str) -> list[Reduction]:
    """Reductions of ``cl_reductions`` rows (with their conversation's ``agent_id``).

    Raises:
        CorruptRecord: A row holds a value the record cannot take.
    """
    return [record(Reduction, row, session_id=session_id, restored=tuple(row["restored"] or ())) for row in rows]


def summaries(
    rows: Iterable[Mapping[Any, Any]], replaces: Mapping[int, Sequence[str]], session_id: str
) -> list[SummaryEntry]:
    """Summaries of ``cl_summaries`` rows (with ``agent_id``); ``replaces`` maps a row's ``id`` to its sources in order.

    Raises:
        CorruptRecord: A row holds a value the record cannot take.
    """
    return [
        record(SummaryEntry, row, session_id=session_id, replaces=tuple(replaces.get(row["id"], ()))) for row in rows
    ]


def revisions(rows: Iterable[Mapping[Any, Any]], session_id: str, agent_id: str) -> list[Revision]:
    """Revisions of ``cl_revisions`` rows.

    Raises:
        CorruptRecord: A row holds a value the record cannot take.
    """
    return [record(Revision, row, session_id=session_id, agent_id=agent_id) for row in rows]


def pin_events(rows: Iterable[Mapping[str, Any]], session_id: str) -> list[PinEvent]:
    """Pin events of rows that name their fields (and the conversation's ``agent_id``).

    Raises:
        CorruptRecord: A row holds a value the record cannot take.
    """
    return [record(PinEvent, row, session_id=session_id) for row in rows]


def lineage_links(rows: Iterable[Mapping[str, Any]], session_id: str) -> list[LineageLink]:
    """Lineage links of rows that name their fields (the conversation's ``agent_id``; ``ledger`` empty: this one).

    Raises:
        CorruptRecord: A row holds a value the record cannot take.
    """
    return [record(LineageLink, row, session_id=session_id, ledger=row["ledger"] or None) for row in rows]


def session_infos(page: Iterable[Sequence[Any]], details: Iterable[Sequence[Any]]) -> list[SessionInfo]:
    """One page of sessions.

    Args:
        page: ``(session_id, created_at, updated_at, app, user)`` rows, in the page's order.
        details: ``(session_id, agent_id, active, total)`` rows of the page's
            conversations, in agent order within each session.
    """
    agents: dict[str, list[Sequence[Any]]] = {}
    for row in details:
        agents.setdefault(row[0], []).append(row)
    return [
        SessionInfo(
            session_id=session_id,
            agents=tuple(d[1] for d in agents.get(session_id, [])),
            created_at=created_at,
            updated_at=updated_at,
            active_entries=sum(d[2] for d in agents.get(session_id, [])),
            total_entries=sum(d[3] for d in agents.get(session_id, [])),
            app=app,
            user=user,
        )
        for session_id, created_at, updated_at, app, user in page
    ]
