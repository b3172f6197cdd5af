"""The read-only listings of :class:`~contextledger.stores.sql.SQLStore`: history, evictions, summaries...

Each method runs its listing of :mod:`.listings` where :meth:`SQLListings._run` sends
it: on the store's SQLite reader when it has one (the compiled text of the same
statement, one read transaction on the standard library's driver, no SQLAlchemy), else
-- and while the engine has statement listeners to honour -- on the engine (one
transaction). The listing is the same code on both paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from contextledger.errors import ConfigurationError
from contextledger.model.paging import WHOLE, Page
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
from contextledger.stores.sql.events import sends_on_driver
from contextledger.stores.sql.read import listings
from contextledger.stores.sql.read.runner import Runner, SQLiteRunner
from contextledger.stores.sql.reader import SQLiteReader

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

__all__ = ["SQLListings"]

_T = TypeVar("_T")


class SQLListings:
    """The listings of :class:`~contextledger.stores.sql.SQLStore`, which provides the reader, gate and transactions."""

    _reader: SQLiteReader | None
    _engine: Engine | None
    _gate: Gate

    def _transaction(self, *, write: bool = False, snapshot: bool = False) -> AbstractContextManager[Connection]:
        raise NotImplementedError  # SQLStore's unit of work

    def _serving_reader(self) -> SQLiteReader | None:
        """The SQLite reader, unless the engine has statement events to honour (then ``None``: read on the engine).

        A statement log or an instrumentation listening to the engine sees what goes
        through SQLAlchemy only (see :func:`~contextledger.stores.sql.events.sends_on_driver`);
        an engine not built yet has no listener.
        """
        reader, engine = self._reader, self._engine
        if reader is not None and engine is not None and not sends_on_driver(engine):
            return None
        return reader

    def _run(self, listing: Callable[[Runner], _T], *, snapshot: bool = False) -> _T:
        """Run ``listing`` on the SQLite reader when the store has one, else on the engine.

        The reader runs it in one read transaction on its connection (no SQLAlchemy); the
        engine in a transaction (``snapshot``: one that sees a single commit on
        PostgreSQL too).
        """
        reader = self._serving_reader()
        if reader is not None:
            with self._gate.call(), reader.read() as conn:
                return listing(SQLiteRunner(conn))
        from contextledger.stores.sql.read.runner import EngineRunner

        with self._transaction(snapshot=snapshot) as conn:
            return listing(EngineRunner(conn))

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``page`` (default: all) in seq order: one statement reading those rows only."""
        return self._run(
            lambda run: listings.history(run, session_id, agent_id, include_evicted=include_evicted, page=page or WHOLE)
        )

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        With ``appended_by`` the query returns only the rows appended at or before its cut.
        """
        return self._run(lambda run: listings.entries(run, session_id, agent_id, ids, appended_by=appended_by))

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why, by which reduction and which summary replaced them (or one page)."""
        return self._run(
            lambda run: listings.evictions(run, session_id, agent_id, trigger=trigger, since=since, page=page or WHOLE)
        )

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in commit order (or one page)."""
        return self._run(lambda run: listings.reductions(run, session_id, agent_id, page=page or WHOLE))

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """Every summary, superseded ones included, oldest first (or one page)."""
        return self._run(lambda run: listings.summaries(run, session_id, agent_id, page=page or WHOLE), snapshot=True)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Stored original contents, oldest first."""
        return self._run(lambda run: listings.revisions(run, session_id, agent_id, message_id))

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order (or one page)."""
        return self._run(lambda run: listings.pin_history(run, session_id, agent_id, page=page or WHOLE))

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session, sorted."""
        return self._run(lambda run: listings.agents(run, session_id))

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first, paged; only those of ``app`` / ``user`` when given.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError("limit and offset must be >= 0")
        return self._run(
            lambda run: listings.sessions(run, limit=limit, offset=offset, app=app, user=user), snapshot=True
        )

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone (one indexed read, no view), or ``None``."""
        reader = self._serving_reader()
        if reader is not None:
            with self._gate.call():
                return reader.conversation_state(session_id, agent_id)
        from contextledger.stores.sql.read.restore import conversation_state

        with self._transaction() as conn:
            return conversation_state(conn, session_id, agent_id)

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        return self._run(lambda run: listings.owner(run, session_id))

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        return self._run(lambda run: listings.scope_state(run, app, user))
