"""An in-process ledger store: the reference implementation of the store contract.

:class:`MemoryStore` composes its parts, one per group of capabilities, over one
:class:`~.data.MemoryData`: :class:`~.reads.MemoryReads` (restore, history, listings),
:class:`~.writes.MemoryWrites` (commit), :class:`~.sessions.MemorySessions` (sessions,
owners, app/user state, expiry) and :class:`~.lifecycle.MemoryLifecycle` (erasure,
pruning, imports, lineage, resealing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from contextledger.core.changeset import Changeset
from contextledger.model.bundle import ConversationRecords
from contextledger.model.messages import Message
from contextledger.model.paging import Page
from contextledger.model.records import (
    ConversationState,
    Eviction,
    Expiry,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Tombstone,
    Trigger,
)
from contextledger.stores.base import AppendedBy
from contextledger.stores.capabilities import Swap
from contextledger.stores.memory.data import MemoryData
from contextledger.stores.memory.lifecycle import MemoryLifecycle
from contextledger.stores.memory.reads import MemoryReads
from contextledger.stores.memory.sessions import MemorySessions
from contextledger.stores.memory.writes import MemoryWrites
from contextledger.stores.urls import mask

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps ledgers in a dict; thread-safe, lost when the process ends.

    Useful for tests and short-lived agents; it passes the same contract suite as the
    SQL and Redis stores.
    """

    def __init__(self, url: str = "memory://") -> None:
        """Create an empty store."""
        self.url = mask(url)
        self._data = MemoryData(self.url)
        self._reads = MemoryReads(self._data)
        self._writes = MemoryWrites(self._data)
        self._sessions = MemorySessions(self._data)
        self._lifecycle = MemoryLifecycle(self._data)

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view, or ``None``."""
        return self._reads.load(session_id, agent_id)

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``page`` (default: all) in seq order; only the page's entries are copied."""
        return self._reads.history(session_id, agent_id, include_evicted=include_evicted, page=page)

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        With ``appended_by`` only those appended at or before its cut.
        """
        return self._reads.entries(session_id, agent_id, ids, appended_by=appended_by)

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why and which summary replaced them (or one page)."""
        return self._reads.evictions(session_id, agent_id, trigger=trigger, since=since, page=page)

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in commit order (or one page)."""
        return self._reads.reductions(session_id, agent_id, page=page)

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """All summaries, superseded included (or one page)."""
        return self._reads.summaries(session_id, agent_id, page=page)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Original contents kept by revisions."""
        return self._reads.revisions(session_id, agent_id, message_id)

    def agents(self, session_id: str) -> list[str]:
        """Agent ids of the session."""
        return self._reads.agents(session_id)

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first; only those of ``app`` / ``user`` when given.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        return self._sessions.sessions(limit=limit, offset=offset, app=app, user=user)

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone, or ``None``."""
        return self._sessions.conversation_state(session_id, agent_id)

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        return self._sessions.owner(session_id)

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        return self._sessions.scope_state(app, user)

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``)."""
        return self._sessions.merge_scope_state(app, user, delta)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        return self._sessions.delete_scope_state(app, user)

    def commit(self, changeset: Changeset) -> int:
        """Apply ``changeset`` atomically (validated fully before anything changes).

        Raises:
            ConcurrencyConflict: The stored version is not ``changeset.expected_version``.
            SessionDeleted: The conversation was deleted since the changeset was planned.
            DuplicateEntry: An appended id already exists (or is appended twice).
            EntryNotFound: An evicted, revised or pinned id is not an active entry.
            InvalidMessage: A value cannot be stored as JSON.
            LedgerClosed: The store was closed.
        """
        return self._writes.commit(changeset)

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order (or one page)."""
        return self._reads.pin_history(session_id, agent_id, page=page)

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Replace an entry's content by ``erased``, drop its revisions, rewrite ``summaries``, keep ``tombstone``.

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
        """
        return self._lifecycle.erase(tombstone, erased, summaries)

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries (messages or summaries) ``entry_ids``; keep ``tombstones``.

        Active entries are skipped, never deleted. Returns how many entries were deleted.
        """
        return self._lifecycle.prune(session_id, agent_id, entry_ids, tombstones)

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        return self._lifecycle.tombstones(session_id, agent_id)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records as they are; ``False`` (nothing written) if it exists."""
        return self._lifecycle.import_conversation(records)

    def delete_session(self, session_id: str) -> bool:
        """Drop every conversation of the session (and what is remembered of its expiry)."""
        return self._sessions.delete_session(session_id)

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its ancestor conversation when it exists; return how many were new."""
        return self._lifecycle.add_lineage(links)

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links whose ancestor is the session (or the one agent), oldest first."""
        return self._lifecycle.lineage(session_id, agent_id)

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session when none of its conversations was written at or after ``idle_before``."""
        return self._sessions.expire_session(session_id, idle_before=idle_before, reason=reason)

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are (a key rotation); return how many were."""
        return self._lifecycle.reseal(session_id, agent_id, swaps)

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        return self._sessions.expirations(session_id)

    def close(self) -> None:
        """Refuse further calls (there is nothing to release)."""
        self._data.gate.close(lambda: None)
