"""``SQLStore``: the ledger on SQLite (embedded default) or PostgreSQL.

The store is the unit of work: each call opens one transaction, runs the
repository functions of :mod:`~contextledger.stores.sql.queries` and
:mod:`~contextledger.stores.sql.changes` inside it (they never commit), and commits
or rolls back. One exception, on PostgreSQL: a changeset that only appends to a
conversation that exists is a single statement
(:mod:`~contextledger.stores.sql.appends`), run in autocommit mode, where the
statement is the transaction -- one round trip instead of four. Driver errors are
translated to the library's errors here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from contextledger.changeset import Changeset
from contextledger.errors import ConcurrencyConflict, ConfigurationError
from contextledger.records import (
    Eviction,
    HistoryEntry,
    Reduction,
    Revision,
    SessionInfo,
    Snapshot,
    SummaryEntry,
    Trigger,
    utcnow,
)
from contextledger.stores.base import check_storable
from contextledger.stores.sql import queries, schema
from contextledger.stores.sql.appends import apply_append, is_append_only
from contextledger.stores.sql.changes import apply_changeset
from contextledger.stores.sql.engine import BEGIN_OPTION, build_engine, is_sqlite, mask, parse_url, translate
from contextledger.stores.sql.models import SessionRow

__all__ = ["SQLStore"]

logger = logging.getLogger(__name__)


class SQLStore:
    """A :class:`~contextledger.stores.base.LedgerStore` on SQLAlchemy 2.

    Open one with :meth:`from_url` (what ``Ledger.connect("sqlite:///…")`` and
    ``Ledger.connect("postgresql+psycopg://…")`` do), or wrap an engine you own. The
    schema must be at this library's Alembic head: SQLite upgrades itself on open by
    default, PostgreSQL only with ``auto_upgrade=True`` (or ``contextledger db upgrade``).

    Contract: every method runs in one transaction; :meth:`commit` is all-or-nothing
    and version-checked (on PostgreSQL, appending a turn is one statement and one
    round trip); :meth:`load` reads only the active rows (indexed); nothing is
    removed except by :meth:`delete_session`. Errors are
    :class:`~contextledger.errors.StoreError` subclasses (``StoreUnavailable`` when the
    database cannot be reached).

    Attributes:
        url: The database URL with its password masked.
        engine: The SQLAlchemy engine.
        conflicts: How many commits this store rejected with ``ConcurrencyConflict``.
    """

    def __init__(self, engine: Engine, *, url: URL | None = None, owns_engine: bool = False) -> None:
        """Wrap ``engine`` (the schema is not checked; see :meth:`from_url`).

        Args:
            engine: An engine on SQLite or PostgreSQL (psycopg 3).
            url: The URL to report (default: the engine's).
            owns_engine: Whether :meth:`close` disposes the engine.
        """
        self.engine = engine
        self._url = url or engine.url
        self.url = mask(self._url)
        self._owns_engine = owns_engine
        self._sqlite = is_sqlite(self._url)
        self._one_statement_appends = engine.dialect.name == "postgresql"
        self._lock = threading.Lock()
        self.conflicts = 0

    @classmethod
    def from_url(
        cls,
        url: str | URL,
        *,
        auto_upgrade: bool | None = None,
        echo: bool = False,
        pool_size: int | None = None,
        max_overflow: int | None = None,
        pool_timeout: float | None = None,
        pool_recycle: int | None = None,
        pool_pre_ping: bool = False,
        busy_timeout: float = 30.0,
        connect_timeout: int = 10,
        connect_args: dict[str, Any] | None = None,
        read_only: bool = False,
        **engine_options: Any,
    ) -> SQLStore:
        """Open the ledger at ``url`` and check (or upgrade) its schema.

        Args:
            url: ``sqlite:///path.db`` or ``postgresql[+psycopg]://user:password@host/db``.
            auto_upgrade: Upgrade the schema to head on open; default ``True`` for SQLite,
                ``False`` for PostgreSQL (where migrations are usually a deploy step).
            echo: Log every statement.
            pool_size: Connections kept open.
            max_overflow: Extra connections beyond ``pool_size``.
            pool_timeout: Seconds to wait for a pooled connection.
            pool_recycle: Reconnect connections older than this many seconds.
            pool_pre_ping: Test each connection on checkout.
            busy_timeout: SQLite: seconds a writer waits for the lock.
            connect_timeout: PostgreSQL: seconds to wait for the server.
            connect_args: Extra driver ``connect`` arguments.
            read_only: Open for reading only (what the inspector and the web view do): the
                schema is checked, never upgraded; a SQLite file is opened ``mode=ro`` and
                never switched to WAL; a SQLite file without the ledger's tables is refused
                with :class:`~contextledger.errors.NotALedger`.
            **engine_options: Passed to :func:`sqlalchemy.create_engine`.

        Raises:
            InvalidLedgerURL: The URL is malformed or names an unsupported driver.
            StoreUnavailable: The database cannot be reached.
            SchemaOutOfDate: The schema is not at this library's head (and was not upgraded).
            ConfigurationError: ``auto_upgrade`` is not a bool or ``None``, or asks for an
                upgrade of a read-only store.
            NotALedger: ``read_only`` and the SQLite file holds no ledger schema.
        """
        if auto_upgrade is not None and not isinstance(auto_upgrade, bool):
            raise ConfigurationError(f"auto_upgrade must be True, False or None, got {auto_upgrade!r}")
        if read_only and auto_upgrade:
            raise ConfigurationError("a read-only ledger cannot be upgraded: auto_upgrade=True with read_only=True")
        parsed = parse_url(url)
        engine = build_engine(
            parsed,
            echo=echo,
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
            pool_recycle=pool_recycle,
            pool_pre_ping=pool_pre_ping,
            busy_timeout=busy_timeout,
            connect_timeout=connect_timeout,
            connect_args=connect_args,
            read_only=read_only,
            **engine_options,
        )
        store = cls(engine, url=parsed, owns_engine=True)
        upgrade = not read_only and (is_sqlite(parsed) if auto_upgrade is None else auto_upgrade)
        try:
            if upgrade:
                store.upgrade()
            else:
                # A SQLite file without the ledger's schema is some other application's file; an
                # empty PostgreSQL database is a ledger waiting for its `db upgrade`.
                schema.verify(engine, absent_is_foreign=read_only and is_sqlite(parsed))
        except BaseException:
            engine.dispose()
            raise
        logger.debug("url=<%s> | opened SQL ledger", store.url)
        return store

    # -- schema ---------------------------------------------------------------------------

    def upgrade(self, revision: str = "head") -> None:
        """Migrate the schema to ``revision`` (default: this library's head)."""
        schema.upgrade(self.engine, revision)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        return schema.current(self.engine)

    # -- the unit of work -------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, write: bool = False, snapshot: bool = False) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                if write and self._sqlite:
                    # Take the write lock up front: writers queue on the busy timeout.
                    conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
                elif snapshot and not self._sqlite:
                    # Several reads that must see one commit (SQLite read transactions do).
                    conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise translate(exc, self._url) from exc

    @contextmanager
    def _autocommit(self) -> Iterator[Connection]:
        """A pooled connection in autocommit mode, for one statement that is atomic by itself.

        Nothing sends ``BEGIN`` or ``COMMIT``; SQLAlchemy restores the connection's
        isolation level when it returns to the pool (a client-side setting in psycopg).
        """
        try:
            with self.engine.connect() as conn:
                yield conn.execution_options(isolation_level="AUTOCOMMIT")
        except SQLAlchemyError as exc:
            raise translate(exc, self._url) from exc

    # -- writes ---------------------------------------------------------------------------

    def commit(self, changeset: Changeset) -> int:
        """Apply ``changeset`` in one transaction, checked against its expected version.

        On PostgreSQL a changeset that only appends to an existing conversation (and
        perhaps sets state fields) is one statement in autocommit mode: one round trip.
        Every other changeset, and every one on SQLite, is a transaction.

        Raises:
            ConcurrencyConflict: The conversation moved on since the changeset was planned.
            DuplicateEntry: An appended id already exists.
            EntryNotFound: An evicted, revised or pinned id is not an active entry.
            InvalidMessage: A value cannot be stored as JSON (checked before the transaction).
        """
        check_storable(changeset)
        try:
            if self._one_statement_appends and is_append_only(changeset):
                with self._autocommit() as conn:
                    version = apply_append(conn, changeset, utcnow())
            else:
                with self._transaction(write=True) as conn:
                    version = apply_changeset(conn, changeset, utcnow())
        except ConcurrencyConflict:
            with self._lock:
                self.conflicts += 1
            raise
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset",
            changeset.session_id,
            changeset.agent_id,
            version,
        )
        return version

    def delete_session(self, session_id: str) -> bool:
        """Remove every row of the session (rows cascade from the session row)."""
        with self._transaction(write=True) as conn:
            result = conn.execute(delete(SessionRow).where(SessionRow.session_id == session_id))
            return bool(result.rowcount)

    # -- reads ----------------------------------------------------------------------------

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """The state and active view (reads only active rows), or ``None``."""
        with self._transaction(snapshot=True) as conn:
            return queries.load(conn, session_id, agent_id)

    def history(self, session_id: str, agent_id: str, *, include_evicted: bool = True) -> list[HistoryEntry]:
        """Every message entry in seq order."""
        with self._transaction() as conn:
            return queries.history(conn, session_id, agent_id, include_evicted=include_evicted)

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why, by which reduction and which summary replaced them."""
        with self._transaction() as conn:
            return queries.evictions(conn, session_id, agent_id, trigger=trigger, since=since)

    def reductions(self, session_id: str, agent_id: str | None = None) -> list[Reduction]:
        """Reductions in commit order."""
        with self._transaction() as conn:
            return queries.reductions(conn, session_id, agent_id)

    def summaries(self, session_id: str, agent_id: str | None = None) -> list[SummaryEntry]:
        """Every summary, superseded ones included, oldest first."""
        with self._transaction(snapshot=True) as conn:
            return queries.summaries(conn, session_id, agent_id)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Stored original contents, oldest first."""
        with self._transaction() as conn:
            return queries.revisions(conn, session_id, agent_id, message_id)

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session, sorted."""
        with self._transaction() as conn:
            return queries.agents(conn, session_id)

    def sessions(self, *, limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        """Sessions, most recently updated first, paged.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError("limit and offset must be >= 0")
        with self._transaction(snapshot=True) as conn:
            return queries.sessions(conn, limit=limit, offset=offset)

    def close(self) -> None:
        """Dispose the engine's pooled connections (when this store created the engine)."""
        if self._owns_engine:
            self.engine.dispose()

    def __repr__(self) -> str:
        """The masked URL."""
        return f"SQLStore({self.url!r})"
