"""``SQLStore``: the ledger on SQLite (embedded default) or PostgreSQL.

The store is the unit of work: each call opens one transaction, runs the
listings of :mod:`~contextledger.stores.sql.read` and
:mod:`~contextledger.stores.sql.write.apply` inside it (they never commit), and commits
or rolls back; driver errors are translated to the library's errors here. A commit is
sent by :class:`~contextledger.stores.sql.write.dispatch.SQLWrites`, on a hot path
where it has one (a turn on SQLite, an append on PostgreSQL, on a connection the store
holds for it).

A SQLite file whose schema is current is opened by a
:class:`~contextledger.stores.sql.reader.SQLiteReader` on the standard library's driver,
which serves every :meth:`SQLStore.load` and every listing the inspector uses (history,
entries, summaries, reductions, revisions, pin events, evictions, agents, sessions); the
engine (and SQLAlchemy, which costs a fresh process more than the read itself) is built on
the first write or other query (tombstones, which an export reads too).
So SQLAlchemy and the modules built on it are imported inside the methods that use the
engine, never at the top of this module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self

from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError, StoreError
from contextledger.model.bundle import ConversationRecords, check_records
from contextledger.model.messages import Message
from contextledger.model.records import (
    Expiry,
    LineageLink,
    Snapshot,
    Tombstone,
    utcnow,
)
from contextledger.stores.capabilities import Swap
from contextledger.stores.lifecycle import Gate
from contextledger.stores.sql.defaults import EngineOptions
from contextledger.stores.sql.read.store import SQLListings
from contextledger.stores.sql.reader import SQLiteReader
from contextledger.stores.sql.write.dispatch import SQLWrites
from contextledger.stores.urls import plain_sqlite_file, plain_sqlite_masked

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine
    from sqlalchemy.engine import URL
    from sqlalchemy.exc import SQLAlchemyError

__all__ = ["SQLStore"]

logger = logging.getLogger(__name__)


class SQLStore(SQLWrites, SQLListings):
    """A :class:`~contextledger.stores.base.LedgerStore` on SQLAlchemy 2.

    Open one with :meth:`from_url` (what ``Ledger.connect("sqlite:///…")`` and
    ``Ledger.connect("postgresql+psycopg://…")`` do), or wrap an engine you own. The
    schema must be at this library's Alembic head: SQLite upgrades itself on open by
    default, PostgreSQL only with ``auto_upgrade=True`` (or ``contextledger db upgrade``).

    Contract: every method runs in one transaction; :meth:`commit` is all-or-nothing
    and version-checked (on PostgreSQL, appending a turn is one statement and one
    round trip) and writes its changeset id to the commit log (``cl_changesets``) in
    the same transaction, so a commit whose connection dropped is resolved by reading
    the id back (exactly once); :meth:`load` reads only the active rows (indexed);
    nothing is removed except by :meth:`delete_session`. Errors are
    :class:`~contextledger.errors.StoreError` subclasses (``StoreUnavailable`` when the
    database cannot be reached). After :meth:`close` every call raises
    :class:`~contextledger.errors.LedgerClosed` (the engine does not reconnect).

    A SQLite file opened by :meth:`from_url` with the default engine options is read
    by a :class:`~contextledger.stores.sql.reader.SQLiteReader`: :meth:`load` and the
    listings run on it, and the engine is built on first use (see the module docstring).

    Attributes:
        url: The database URL with its password masked.
    """

    _url: URL  # set with the engine
    _engine: Engine | None

    def __init__(self, engine: Engine, *, url: URL | None = None, owns_engine: bool = False) -> None:
        """Wrap ``engine`` (the schema is not checked; see :meth:`from_url`).

        Args:
            engine: An engine on SQLite or PostgreSQL (psycopg 3).
            url: The URL to report (default: the engine's).
            owns_engine: Whether :meth:`close` disposes the engine.
        """
        from contextledger.stores.sql.engine import is_sqlite, mask

        self._url = url or engine.url
        self._prepare(mask(self._url), sqlite=is_sqlite(self._url), owns_engine=owns_engine)
        self._engine = engine
        self._one_statement_appends = engine.dialect.name == "postgresql"

    def _prepare(self, url: str, *, sqlite: bool, owns_engine: bool) -> None:
        self.url = url
        self._sqlite = sqlite
        self._owns_engine = owns_engine
        self._gate = Gate(url)
        self._engine = None
        self._engine_lock = threading.Lock()
        self._one_statement_appends = False
        self._reader: SQLiteReader | None = None
        self._source = ""
        self._engine_options: dict[str, Any] = {}
        self._prepare_writes()

    @classmethod
    def _on_reader(cls, reader: SQLiteReader, url: str, engine_options: dict[str, Any]) -> Self:
        """A SQLite store reading through ``reader``, whose engine is built from ``url`` on first use."""
        store = cls.__new__(cls)
        store._prepare(plain_sqlite_masked(reader.database), sqlite=True, owns_engine=True)
        store._reader = reader
        store._source = url
        store._engine_options = engine_options
        return store

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (built here on first use when the store was opened by its reader)."""
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    from contextledger.stores.sql.engine import build_engine, parse_url

                    self._url = parse_url(self._source)
                    self._engine = build_engine(self._url, **self._engine_options)
                    logger.debug("url=<%s> | built the SQL engine on first use", self.url)
        return self._engine

    @property
    def reader(self) -> SQLiteReader | None:
        """The SQLite reader that serves :meth:`load`, or ``None`` (PostgreSQL, in-memory, engine options)."""
        return self._reader

    def _translate(self, exc: SQLAlchemyError) -> StoreError:
        from contextledger.stores.sql.engine import translate

        return translate(exc, self._url)

    @classmethod
    def from_url(cls, url: str | URL, *, auto_upgrade: bool | None = None, **options: Any) -> SQLStore:
        """Open the ledger at ``url`` and check (or upgrade) its schema.

        Args:
            url: ``sqlite:///path.db`` or ``postgresql[+psycopg]://user:password@host/db``.
            auto_upgrade: Upgrade the schema to head on open; default ``True`` for SQLite,
                ``False`` for PostgreSQL (where migrations are usually a deploy step).
            **options: How the engine is built, declared in
                :class:`~contextledger.stores.sql.defaults.EngineOptions`: ``echo``, the pool
                options, ``busy_timeout`` (SQLite), ``connect_timeout``, ``lock_timeout`` and
                ``statement_timeout`` (PostgreSQL; default 5 and 30 seconds, then
                ``StoreTimeout``), ``connect_args``, and ``read_only`` -- open for reading only
                (what the inspector and the web view do): the schema is checked, never
                upgraded; a SQLite file is opened ``mode=ro`` and never switched to WAL; a
                SQLite file without the ledger's tables is refused with
                :class:`~contextledger.errors.NotALedger`. Any other keyword is passed to
                :func:`sqlalchemy.create_engine`.

        Raises:
            InvalidLedgerURL: The URL is malformed or names an unsupported driver.
            StoreUnavailable: The database cannot be reached.
            SchemaOutOfDate: The schema is not at this library's head (and was not upgraded).
            ConfigurationError: ``auto_upgrade`` is not a bool or ``None``, or asks for an
                upgrade of a read-only store.
            NotALedger: ``read_only`` and the SQLite file holds no ledger schema.
        """
        engine_options = EngineOptions.of(options)
        if auto_upgrade is not None and not isinstance(auto_upgrade, bool):
            raise ConfigurationError(f"auto_upgrade must be True, False or None, got {auto_upgrade!r}")
        if engine_options.read_only and auto_upgrade:
            raise ConfigurationError("a read-only ledger cannot be upgraded: auto_upgrade=True with read_only=True")
        # A plain SQLite file opened with the engine's defaults is read without SQLAlchemy
        # (echo, driver arguments and pools all need the engine).
        database = plain_sqlite_file(url) if isinstance(url, str) and engine_options.reader_serves else None
        from contextledger.stores.sql.opening import open_store

        return open_store(
            url,
            options,
            auto_upgrade=auto_upgrade,
            database=database,
            on_reader=cls._on_reader,
            on_engine=lambda engine, parsed: cls(engine, url=parsed, owns_engine=True),
        )

    # -- schema ---------------------------------------------------------------------------

    def upgrade(self, revision: str = "head") -> None:
        """Migrate the schema to ``revision`` (default: this library's head).

        A SQLite reader stays only while the schema is at this library's head.
        """
        from contextledger.stores.sql import schema

        with self._gate.call():
            schema.upgrade(self.engine, revision)
            reader = self._reader
            if reader is not None and revision != "head":
                self._reader = None
                reader.close()

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        from contextledger.stores.sql import schema

        with self._gate.call():
            return schema.current(self.engine)

    # -- the unit of work -------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, write: bool = False, snapshot: bool = False) -> Iterator[Connection]:
        from sqlalchemy.exc import SQLAlchemyError

        from contextledger.stores.sql.engine import BEGIN_OPTION

        try:
            with self._gate.call(), self.engine.connect() as conn:
                if write and self._sqlite:
                    # Take the write lock up front: writers queue on the busy timeout.
                    conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
                elif snapshot and not self._sqlite:
                    # Several reads that must see one commit (SQLite read transactions do).
                    conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise self._translate(exc) from exc

    @contextmanager
    def _autocommit(self) -> Iterator[Connection]:
        """A pooled connection in autocommit mode, for one statement that is atomic by itself.

        Nothing sends ``BEGIN`` or ``COMMIT``; SQLAlchemy restores the connection's
        isolation level when it returns to the pool (a client-side setting in psycopg).
        """
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self._gate.call(), self.engine.connect() as conn:
                yield conn.execution_options(isolation_level="AUTOCOMMIT")
        except SQLAlchemyError as exc:
            raise self._translate(exc) from exc

    # -- writes ---------------------------------------------------------------------------

    def commit(self, changeset: Changeset) -> int:
        """Apply ``changeset`` in one transaction, checked against its expected version.

        On PostgreSQL a changeset that only appends to an existing conversation (and
        perhaps sets state fields) is one statement in autocommit mode: one round trip.
        Every other changeset, and every one on SQLite, is a transaction. When the
        connection fails after the changeset was sent, the commit log tells whether it
        applied (see :mod:`contextledger.stores.exactly_once`).

        Raises:
            ConcurrencyConflict: The conversation moved on since the changeset was planned.
            SessionDeleted: The conversation was deleted since the changeset was planned.
            DuplicateEntry: An appended id already exists.
            EntryNotFound: An evicted, revised or pinned id is not an active entry.
            InvalidMessage: A value cannot be stored as JSON (checked before the transaction).
            StoreUnavailable: The database could not be reached; nothing was applied.
            CommitOutcomeUnknown: The connection dropped after sending and the database
                stayed unreachable, so the outcome could not be read back.
            LedgerClosed: The store was closed.
        """
        return self._commit(changeset)

    def delete_session(self, session_id: str) -> bool:
        """Remove every row of the session (rows cascade from the session row)."""
        from sqlalchemy import delete

        from contextledger.stores.sql.lineage import forget_expiries
        from contextledger.stores.sql.models import SessionRow

        with self._transaction(write=True) as conn:
            result = conn.execute(delete(SessionRow).where(SessionRow.session_id == session_id))
            forget_expiries(conn, session_id)
            return bool(result.rowcount)

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``): one upsert per key, one transaction.

        Raises:
            ConfigurationError: ``app``, ``user`` or a key is longer than 255 characters.
        """
        from contextledger.stores.sql.scopes import merge_scope

        with self._transaction(write=True) as conn:
            merge_scope(conn, app, user, delta, utcnow())

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        from contextledger.stores.sql.scopes import delete_scope

        with self._transaction(write=True) as conn:
            return delete_scope(conn, app, user)

    # -- reads ----------------------------------------------------------------------------

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """The state and active view (reads only active rows), or ``None``.

        On a SQLite file opened with its reader the three reads run there, on the standard
        library's driver; elsewhere (and while the engine has statement listeners) on the
        engine. Both build the snapshot with
        :func:`~contextledger.stores.sql.window.snapshot`.
        """
        reader = self._serving_reader()
        if reader is not None:
            with self._gate.call():
                return reader.load(session_id, agent_id)
        from contextledger.stores.sql.read.restore import load

        with self._transaction(snapshot=True) as conn:
            return load(conn, session_id, agent_id)

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Overwrite an entry, delete its revisions, rewrite ``summaries``, keep ``tombstone``: one transaction.

        On SQLite the transaction runs with ``secure_delete``, so the pages it frees are
        zeroed; :meth:`settle_erasure` then moves the WAL into the file and empties it
        (see :mod:`.erasure`).

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
        """
        from contextledger.stores.sql import erasure

        with self._transaction(write=True) as conn:
            erasure.secure(conn)
            erasure.erase(conn, tombstone, erased, summaries)

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries among ``entry_ids`` (never an active one) in one transaction."""
        from contextledger.stores.sql import erasure

        with self._transaction(write=True) as conn:
            erasure.secure(conn)
            count = erasure.prune(conn, session_id, agent_id, entry_ids, tombstones)
        return count

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        from contextledger.stores.sql import erasure

        with self._transaction() as conn:
            return erasure.tombstones(conn, session_id, agent_id)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records in one transaction; ``False`` (nothing written) if it exists."""
        from contextledger.stores.sql import transfer

        check_records(records)
        with self._transaction(write=True) as conn:
            return transfer.import_conversation(conn, records)

    def vacuum(self, *, full: bool = False) -> None:
        """Reclaim the space (and bytes) of erased and pruned rows: ``VACUUM`` (``full``: ``VACUUM FULL``)."""
        from contextledger.stores.sql import erasure

        with self._autocommit() as conn:
            erasure.vacuum(conn, full=full)

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """Make erased bytes leave the database files; ``None`` when none is known to remain, else why and what to do.

        SQLite: checkpoint the WAL (``TRUNCATE``), trying again for at most ``timeout``
        seconds while another connection's read transaction holds old pages in it.
        PostgreSQL: the erased row versions stay in the table files until ``VACUUM``;
        with ``vacuum`` the ledger's tables are rewritten (``VACUUM FULL``) first.
        """
        from contextledger.stores.sql import erasure

        if self._sqlite:
            with self._autocommit() as conn:
                return erasure.settle_sqlite(conn, timeout=timeout, what=self.url)
        if vacuum:
            self.vacuum(full=True)
            return None
        return erasure.POSTGRES_PENDING

    # -- lineage and expiry -----------------------------------------------------------------

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its existing ancestor conversation (one transaction); return how many were new."""
        from contextledger.stores.sql import lineage

        if not links:
            return 0
        with self._transaction(write=True) as conn:
            return lineage.add_lineage(conn, links)

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links kept under the session's conversations (or one agent's), oldest first.

        On the SQLite reader when the store has one (no SQLAlchemy: ``contextledger show`` lists forks).
        """
        from contextledger.stores.sql.read import listings

        return self._run(lambda run: listings.lineage(run, session_id, agent_id))

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Delete the session in one transaction when it was idle since before ``idle_before``; keep its expiries."""
        from contextledger.stores.sql import erasure, lineage

        with self._transaction(write=True) as conn:
            erasure.secure(conn)
            return lineage.expire_session(conn, session_id, idle_before, reason, utcnow())

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        from contextledger.stores.sql import lineage

        with self._transaction() as conn:
            return lineage.expirations(conn, session_id)

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are, in one transaction (``secure_delete`` on SQLite)."""
        from contextledger.stores.sql import erasure, reseal

        if not swaps:
            return 0
        with self._transaction(write=True) as conn:
            erasure.secure(conn)
            return reseal.reseal(conn, session_id, agent_id, swaps)

    def close(self) -> None:
        """Refuse further calls, let running ones finish, then dispose the engine (when this store created it)."""
        self._gate.close(self._release)

    def _release(self) -> None:
        self._close_held()
        if self._reader is not None:
            self._reader.close()
        if self._owns_engine and self._engine is not None:
            self._engine.dispose()

    def __repr__(self) -> str:
        """The masked URL."""
        return f"SQLStore({self.url!r})"
