"""The protocols of the optional store capabilities, one per capability.

Each states its methods and contract; :mod:`contextledger.stores.capabilities` names
each with a :class:`~contextledger.stores.capabilities.Capability` and checks that a
store declares it (these names are importable from there too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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
    SummaryEntry,
    Tombstone,
    Trigger,
)
from contextledger.stores.base import AppendedBy
from contextledger.stores.swaps import Swap

if TYPE_CHECKING:
    from contextledger.model.bundle import ConversationRecords

__all__ = [
    "ErasingStore",
    "ExpiringStore",
    "HistoryStore",
    "ImportingStore",
    "LineageStore",
    "ResealingStore",
    "ScopedStore",
    "SessionStore",
    "SettlesErasure",
    "TimeTravelStore",
]


@runtime_checkable
class HistoryStore(Protocol):
    """The listings over one session's rows: entries, evictions, reductions, summaries, revisions, pins.

    Contract (checked by :class:`~contextledger.testing.history.HistoryContract`): each
    reads only, in the order it states; a conversation or session that does not exist
    gives ``[]`` (``None`` for :meth:`conversation_state`). Undo and the inspector need it.
    """

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The state ``load`` returns, read alone (no view), or ``None`` if the conversation is new."""
        ...

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of the conversation in seq order: all of them, or one ``page``.

        A page is a range of seqs and a count from either end (see
        :class:`~contextledger.model.paging.Page`), always returned oldest first; a store
        reads that page's rows, not the whole history, where its layout allows.
        """
        ...

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries (messages and superseded summaries), oldest eviction first: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(evicted_at, agent_id,
        seq, kind, entry_id)``.
        """
        ...

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in the order they were committed: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(created_at, agent_id, version)``.
        """
        ...

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """Every summary, superseded ones included, oldest first: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(created_at, agent_id, summary_id)``.
        """
        ...

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Stored original contents, oldest first."""
        ...

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or of one agent), in commit order: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(at, agent_id, version, position)``.
        """
        ...

    def agents(self, session_id: str) -> list[str]:
        """Agent ids that have a conversation in the session, sorted."""
        ...


@runtime_checkable
class TimeTravelStore(Protocol):
    """Reads of chosen entries, bounded by a cut (what ``view_at`` and undo rebuild from).

    Contract (checked by :class:`~contextledger.testing.travel.TimeTravelContract`).
    """

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        Reads those rows only, whatever the length of the history. With ``appended_by``,
        only the entries it admits (appended at or before a cut) are returned -- filtered
        where the rows are read, so an early cut in a long conversation does not fetch the
        rows appended after it.
        """
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Sessions listed (most recent first, paged, by app and user) and deleted.

    Contract (checked by :class:`~contextledger.testing.sessions.SessionsContract`):
    :meth:`delete_session` is the only call that removes rows (erasure aside).
    """

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions ordered by most recent update first, paged; only those of ``app`` / ``user`` when given."""
        ...

    def delete_session(self, session_id: str) -> bool:
        """Remove every row of the session; return whether it existed."""
        ...


@runtime_checkable
class ErasingStore(Protocol):
    """Erasure and pruning of single entries, leaving tombstones.

    Contract (checked by :class:`~contextledger.testing.retention.RetentionContract` and
    :class:`~contextledger.testing.lifecycle.LifecycleContract`).
    """

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Erase one entry atomically and keep ``tombstone``.

        The entry's content and metadata become ``erased``'s, its revisions are deleted
        and each summary in ``summaries`` gets that text. The old bytes leave the store
        (see :mod:`contextledger.history.lifecycle`).
        """
        ...

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries among ``entry_ids`` atomically; return how many were.

        Never an active one; their revisions go with them, their tombstones stay.
        """
        ...

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        ...


@runtime_checkable
class ImportingStore(Protocol):
    """Conversations written whole, as exported (copies between ledgers, imports).

    Contract (checked by :class:`~contextledger.testing.transfer.TransferContract`).
    """

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's complete records in one atomic commit; ``False`` if it exists.

        Everything is written as given -- ids, timestamps, version, time-travel stamps,
        statuses, summary chains, pin events, tombstones -- so reading it back gives the
        same records.
        """
        ...


@runtime_checkable
class ScopedStore(Protocol):
    """Sessions owned by an app and a user, and key/value state per app and per user.

    Contract (checked by :class:`~contextledger.testing.owners.OwnersContract`): a session
    belongs to the app and user named by the changeset that created it, for its whole
    life; a changeset creating another conversation in it that names others raises
    :class:`~contextledger.errors.SessionOwnerConflict`. Scope state stays when a session
    is deleted; :meth:`merge_scope_state` sets keys atomically.
    """

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when the session does not exist."""
        ...

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The key/value state of ``app`` (``user`` ``None``) or of one user of it; ``{}`` when none is stored."""
        ...

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``), atomically."""
        ...

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); return whether there was any."""
        ...


@runtime_checkable
class LineageStore(Protocol):
    """A store that keeps, under each conversation, the forks (and copies) taken from it.

    Contract (checked by :class:`~contextledger.testing.lineage.LineageContract`):

    * :meth:`add_lineage` records each link under its ancestor conversation when that
      conversation exists (a link whose ancestor does not exist is skipped), and
      recording a link again (same :attr:`~contextledger.model.records.LineageLink.key`) changes
      nothing; the links go when the ancestor's session is deleted or expires.
    * :meth:`lineage` returns the links whose ancestor is in the session (or the one
      agent), oldest first. It only reads.
    """

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record ``links`` under their ancestors; return how many were new."""
        ...

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links whose ancestor is the session (or the one agent), oldest first."""
        ...


@runtime_checkable
class ExpiringStore(Protocol):
    """A store that removes whole idle sessions and remembers that they expired.

    Contract (checked by :class:`~contextledger.testing.lineage.ExpiryContract`):

    * :meth:`expire_session` removes every conversation of the session -- in one atomic
      step per store -- only when none of them was written at or after ``idle_before``
      (checked where the rows are, so a write that races with it keeps the session),
      and keeps one :class:`~contextledger.model.records.Expiry` per conversation.
    * A commit planned on a version > 0 of an expired conversation raises
      :class:`~contextledger.errors.SessionExpired`; a new conversation (version 0)
      may be created under the same ids.
    * :meth:`delete_session` forgets the session's expiries too.
    """

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session if it was idle since before ``idle_before``; its expiries, or ``[]``."""
        ...

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        ...


@runtime_checkable
class SettlesErasure(Protocol):
    """A store whose files can keep erased bytes for a while (SQLite's WAL, PostgreSQL's dead rows, Redis's AOF)."""

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """Make erased bytes leave the files the store writes, waiting at most ``timeout`` seconds.

        Returns ``None`` when no erased byte is known to remain, else a sentence saying
        where they remain and what to do. ``vacuum`` allows a rewrite that takes locks
        (PostgreSQL's ``VACUUM FULL`` of the ledger's tables).
        """
        ...


@runtime_checkable
class ResealingStore(Protocol):
    """A store that can replace sealed tokens in place (a key rotation: :mod:`contextledger.history.rotation`)."""

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Apply the swaps of one conversation atomically, each only where its ``old`` token still is; return how many.

        A swap whose token is no longer there (the value was rewritten or erased since
        it was read) is skipped: the next rotation pass sees the new value. Versions,
        timestamps and everything else stay as they are.
        """
        ...
