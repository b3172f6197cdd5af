"""The read-only listings of :class:`~contextledger.stores.sql.SQLStore`: history, evictions, summaries...

Each listing runs where :meth:`SQLListings._listing` sends it: on the store's SQLite
reader when it has one (:mod:`~contextledger.stores.sql.reader_queries`, one read
transaction on the standard library's driver, no SQLAlchemy), else on the engine
(:mod:`~contextledger.stores.sql.queries`, one transaction). Both return the same
records; a property test holds them equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextledger.errors import ConfigurationError
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
from contextledger.stores.base import AppendedBy
from contextledger.stores.lifecycle import Gate
from contextledger.stores.sql.reader import SQLiteReader

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["SQLListings"]


class SQLListings:
    """The listings of :class:`~contextledger.stores.sql.SQLStore`, which provides the reader, gate and transactions."""

    _reader: SQLiteReader | None
    _gate: Gate

    def _transaction(self, *, write: bool = False, snapshot: bool = False) -> AbstractContextManager[Connection]:
        raise NotImplementedError  # SQLStore's unit of work

    def _listing(self, name: str, *args: Any, snapshot: bool = False, **kwargs: Any) -> Any:
        """Run the listing ``name``: on the SQLite reader when the store has one, else on the engine.

        The reader runs :mod:`.reader_queries`' function ``name`` in one read transaction
        on its connection (no SQLAlchemy); the engine runs :mod:`.queries`' in a
        transaction (``snapshot``: one that sees a single commit on PostgreSQL too). Both
        return the same records.
        """
        reader = self._reader
        if reader is not None:
            from contextledger.stores.sql import reader_queries

            with self._gate.call(), reader.read() as conn:
                return getattr(reader_queries, name)(conn, *args, **kwargs)
        from contextledger.stores.sql import queries

        with self._transaction(snapshot=snapshot) as conn:
            return getattr(queries, name)(conn, *args, **kwargs)

    def history(self, session_id: str, agent_id: str, *, include_evicted: bool = True) -> list[HistoryEntry]:
        """Every message entry in seq order."""
        found: list[HistoryEntry] = self._listing("history", session_id, agent_id, include_evicted=include_evicted)
        return found

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        With ``appended_by`` the query returns only the rows appended at or before its cut.
        """
        found: list[HistoryEntry] = self._listing("entries", session_id, agent_id, ids, appended_by=appended_by)
        return found

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why, by which reduction and which summary replaced them."""
        found: list[Eviction] = self._listing("evictions", session_id, agent_id, trigger=trigger, since=since)
        return found

    def reductions(self, session_id: str, agent_id: str | None = None) -> list[Reduction]:
        """Reductions in commit order."""
        found: list[Reduction] = self._listing("reductions", session_id, agent_id)
        return found

    def summaries(self, session_id: str, agent_id: str | None = None) -> list[SummaryEntry]:
        """Every summary, superseded ones included, oldest first."""
        found: list[SummaryEntry] = self._listing("summaries", session_id, agent_id, snapshot=True)
        return found

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Stored original contents, oldest first."""
        found: list[Revision] = self._listing("revisions", session_id, agent_id, message_id)
        return found

    def pin_history(self, session_id: str, agent_id: str | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order."""
        found: list[PinEvent] = self._listing("pin_history", session_id, agent_id)
        return found

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session, sorted."""
        found: list[str] = self._listing("agents", session_id)
        return found

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first, paged; only those of ``app`` / ``user`` when given.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError("limit and offset must be >= 0")
        found: list[SessionInfo] = self._listing(
            "sessions", limit=limit, offset=offset, app=app, user=user, snapshot=True
        )
        return found

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone (one indexed read, no view), or ``None``."""
        found: ConversationState | None = self._listing("conversation_state", session_id, agent_id)
        return found

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        found: SessionOwner | None = self._listing("owner", session_id)
        return found

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        found: dict[str, Any] = self._listing("scope_state", app, user)
        return found
