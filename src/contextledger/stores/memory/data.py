"""What the memory store holds: its conversations, owners, app/user state and expiries, behind one lock.

The store's parts (:mod:`.reads`, :mod:`.writes`, :mod:`.sessions`, :mod:`.lifecycle`)
each take the one :class:`MemoryData` of their store; this is their whole shared
interface, every access under :meth:`MemoryData.guarded` (or :attr:`MemoryData.lock`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime

from contextledger.model.messages import Message
from contextledger.model.records import (
    ConversationState,
    EntryStatus,
    Expiry,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionOwner,
    SummaryEntry,
    Tombstone,
)
from contextledger.stores.lifecycle import Gate

__all__ = ["NO_OWNER", "ROW_FIELDS", "MemoryData", "Row", "StoredConversation", "history_entry", "row_of"]

NO_OWNER = SessionOwner(None, None)
"""The owner of a session created without an app or a user."""


@dataclass
class Row:
    """A message entry as the store keeps it (the fields of a ``HistoryEntry`` it does not derive)."""

    seq: int
    message: Message
    tokens: int
    created_at: datetime
    status: EntryStatus = "active"
    evicted_by: str | None = None
    revision_count: int = 0
    from_call: int = 0
    version: int = 0


ROW_FIELDS = tuple(f.name for f in fields(Row) if f.name != "message")
"""The fields a :class:`Row` shares, by name, with the ``HistoryEntry`` it is read as (all but the message)."""


def history_entry(row: Row, session_id: str, agent_id: str) -> HistoryEntry:
    """``row`` as the history entry a read returns (a copy of its message)."""
    values = {name: getattr(row, name) for name in ROW_FIELDS}
    message = row.message.model_copy(deep=True)
    return HistoryEntry(session_id=session_id, agent_id=agent_id, message=message, pinned=row.message.pinned, **values)


def row_of(entry: HistoryEntry) -> Row:
    """The row that keeps ``entry`` (an import)."""
    return Row(message=entry.message.stored_copy(), **{name: getattr(entry, name) for name in ROW_FIELDS})


@dataclass
class StoredConversation:
    """Everything kept for one (session, agent)."""

    state: ConversationState
    rows: dict[str, Row] = field(default_factory=dict)
    summaries: dict[str, SummaryEntry] = field(default_factory=dict)
    reductions: list[Reduction] = field(default_factory=list)
    revisions: list[Revision] = field(default_factory=list)
    pins: list[PinEvent] = field(default_factory=list)
    log: dict[int, str] = field(default_factory=dict)
    """version -> id of the changeset that produced it (the commit log, for exactly-once)."""
    tombstones: list[Tombstone] = field(default_factory=list)
    lineage: dict[str, LineageLink] = field(default_factory=dict)


class MemoryData:
    """The state of one memory store and the lock and gate guarding it."""

    def __init__(self, url: str) -> None:
        """Empty, for the store at (masked) ``url``."""
        self.lock = threading.RLock()
        self.gate = Gate(url)
        self.conversations: dict[tuple[str, str], StoredConversation] = {}
        self.owners: dict[str, SessionOwner] = {}  # session id -> the app and user it was created for
        self.scopes: dict[tuple[str, str | None], dict[str, str]] = {}  # (app, user) -> key -> JSON text
        self.expired: dict[tuple[str, str], Expiry] = {}

    @contextmanager
    def guarded(self) -> Iterator[None]:
        """One call of the store: refused once it is closed, under the lock.

        Raises:
            LedgerClosed: The store was closed.
        """
        with self.gate.call(), self.lock:
            yield

    def of_session(self, session_id: str, agent_id: str | None) -> list[StoredConversation]:
        """The session's conversations (or the one of ``agent_id``), by agent id (call it guarded)."""
        return [
            c
            for (sid, aid), c in sorted(self.conversations.items())
            if sid == session_id and (agent_id is None or aid == agent_id)
        ]
