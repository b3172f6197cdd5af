"""The connection a SQLite store writes its hot changesets on, and the transaction it runs them in.

A pool checkout and check-in (with its reset) per commit cost more Python than the
statements of an append, and SQLite has one writer at a time anyway: a :class:`HeldWriter`
keeps one driver connection for the hot path's commits (see
:mod:`~contextledger.stores.sql.write.sqlite_hot` for what they send). A
:class:`HotTransaction` is the driver's own cursor inside ``BEGIN IMMEDIATE``; driver
errors come out of it as SQLAlchemy's, so the store translates them as it translates
every other statement's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from types import TracebackType
from typing import Any

from sqlalchemy import Dialect, Engine, PoolProxiedConnection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

from contextledger.core.seam import INLINE, WouldWait

__all__ = ["CHECKPOINT_AFTER", "HeldWriter", "HotTransaction", "hot_transaction"]

CHECKPOINT_AFTER = 100
"""Commits at once (:meth:`HotTransaction.begin_at_once`) between two that may checkpoint.

Those commits run on an event loop's thread, so with SQLite's WAL auto-checkpoint off (a
checkpoint flushes to disk); the next one is refused with
:class:`~contextledger.core.seam.WouldWait`, so it runs on a worker with the
connection's auto-checkpoint back on, and a checkpoint then due runs there. A hundred
four-message appends write about 700 pages: the WAL grows at most that far past
SQLite's own threshold (1,000 pages by default) before it is checkpointed.
"""


@contextmanager
def hot_transaction(engine: Engine) -> Iterator[HotTransaction]:
    """A write transaction on a pooled driver connection that rolls back unless committed.

    ``BEGIN IMMEDIATE`` takes the write lock up front (writers queue on the busy
    timeout). Leaving the block without :meth:`HotTransaction.commit` -- an error, or a
    changeset :func:`apply_hot` hands back to the general path -- rolls back, and the
    connection returns to the pool either way.

    Raises:
        sqlalchemy.exc.DBAPIError: The driver failed to connect or to begin.
    """
    fairy = _checkout(engine)
    try:
        with _begun(fairy.dbapi_connection, engine) as tx:
            yield tx
    finally:
        fairy.close()


def _checkout(engine: Engine) -> PoolProxiedConnection:
    dbapi = engine.dialect.loaded_dbapi
    try:
        return engine.raw_connection()  # the pool's connect events run; its errors are the driver's own
    except dbapi.Error as exc:
        raise DBAPIError.instance("connect", (), exc, dbapi.Error) from exc


@contextmanager
def _begun(connection: Any, engine: Engine) -> Iterator[HotTransaction]:
    tx = HotTransaction(connection, engine.dialect.loaded_dbapi, engine.dialect)
    try:
        tx.run("BEGIN IMMEDIATE", ())
        yield tx
    finally:
        tx.close()


class HeldWriter:
    """One driver connection a SQLite store keeps for its hot-path commits.

    A pool checkout and check-in (with its reset) per commit cost more Python than the
    statements of an append; SQLite has one writer at a time anyway. The connection is
    taken from the engine once (its connect events ran: WAL, busy timeout, foreign keys)
    and detached from the pool, so the pool counts only connections in use by a call;
    it is idle, outside any transaction, whenever no commit runs. A thread that finds it
    busy takes a pooled connection as before; a driver error drops it (the next commit
    connects again); a forked child makes its own; :meth:`close` closes it.
    """

    def __init__(self, engine: Engine) -> None:
        """Keep nothing yet: the connection is made by the first commit."""
        self._engine = engine
        self._lock = threading.Lock()
        self._connection: PoolProxiedConnection | None = None
        self._tx: HotTransaction | None = None  # the held connection's, with its cursor
        self._pid = os.getpid()
        self._inherited: list[PoolProxiedConnection] = []  # kept, never closed, in a forked child
        # One in-memory database shares one connection (a StaticPool): nothing to hold.
        self._closed = isinstance(engine.pool, StaticPool)
        self._block = _HeldTransaction(self)  # one for every commit: only the lock's holder uses it

    def transaction(self) -> AbstractContextManager[HotTransaction]:
        """A write transaction (see :func:`hot_transaction`) on the held connection when it is free.

        The held connection's transaction is a :class:`HotTransaction` kept with it (its
        cursor too), begun on entering and ended on leaving the block; a busy or closed
        writer gives a pooled connection's, as before.

        Under :data:`~contextledger.core.seam.INLINE` (an append the async API runs on its
        loop's thread) nothing waits: a busy writer, or a write lock another connection
        holds, raises :class:`~contextledger.core.seam.WouldWait` (on entering).

        Raises:
            sqlalchemy.exc.DBAPIError: The driver failed to connect or to begin (on entering).
            WouldWait: Under ``INLINE``, the write lock is not free.
        """
        if not self._lock.acquire(blocking=False):
            if INLINE.get():  # another thread is committing: its write lock would be waited for
                raise WouldWait("the held SQLite writer is busy")
            return hot_transaction(self._engine)
        if self._closed:  # a commit racing close(), or a static pool: a pooled connection, as before
            self._lock.release()
            return hot_transaction(self._engine)
        return self._block

    def _held(self) -> Any:
        """The held driver connection, made on first use (call with the lock held)."""
        if self._connection is not None and self._pid != os.getpid():
            # A forked child never uses (or closes) its parent's connection: it makes its own.
            self._inherited.append(self._connection)
            self._connection = None
        if self._connection is None:
            self._pid = os.getpid()
            connection = _checkout(self._engine)
            connection.detach()  # ours until close(); the pool no longer counts it
            self._connection = connection
            self._tx = None
        return self._connection.dbapi_connection

    def _held_tx(self) -> HotTransaction:
        """The transaction object of the held connection, made once per connection (call with the lock held)."""
        connection = self._held()
        tx = self._tx
        if tx is None:
            tx = self._tx = HotTransaction(connection, self._engine.dialect.loaded_dbapi, self._engine.dialect)
        return tx

    @contextmanager
    def driver_connection(self) -> Iterator[Any]:
        """The held driver connection, for diagnostics (e.g. to trace its statements); no commit runs meanwhile.

        Raises:
            sqlalchemy.exc.DBAPIError: The driver failed to connect.
        """
        with self._lock:
            yield self._held()

    def _drop(self) -> None:
        connection, self._connection, self._tx = self._connection, None, None
        if connection is not None:
            with suppress(Exception):  # closing a broken connection must not mask the error being raised
                connection.close()

    def close(self) -> None:
        """Close the held connection (waiting for a commit that uses it); later commits refuse."""
        with self._lock:
            self._closed = True
            self._drop()


class _HeldTransaction:
    """The block of :meth:`HeldWriter.transaction` on the held connection (entered with the writer's lock held).

    Entering begins (``BEGIN IMMEDIATE``) on the held connection, made on first use;
    leaving rolls back unless committed and releases the lock. A driver error, on
    entering or inside the block, drops the connection (it may be broken: the next
    commit connects afresh). A class, not a generator, and one per writer, reused by
    every commit: the writer's lock is held from :meth:`HeldWriter.transaction` until
    the block is left, so one commit at a time uses it.
    """

    __slots__ = ("_tx", "_writer")

    def __init__(self, writer: HeldWriter) -> None:
        self._writer = writer
        self._tx: HotTransaction | None = None

    def __enter__(self) -> HotTransaction:
        writer = self._writer
        try:
            tx = writer._held_tx()
            if INLINE.get():
                tx.begin_at_once()
            else:
                tx.begin()
        except BaseException as exc:
            if isinstance(exc, DBAPIError):
                writer._drop()
            writer._lock.release()
            raise
        self._tx = tx
        return tx

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        writer, tx = self._writer, self._tx
        self._tx = None
        try:
            if tx is not None:
                tx.end()
            if isinstance(error, DBAPIError):
                writer._drop()
        finally:
            writer._lock.release()


class HotTransaction:
    """The driver's own cursor on a pooled connection inside ``BEGIN``; driver errors come out as SQLAlchemy's."""

    __slots__ = (
        "_autocheckpoint",
        "_busy_ms",
        "_connection",
        "_cursor",
        "_dbapi",
        "_no_wait",
        "_unchecked",
        "committed",
        "dialect",
    )

    def __init__(self, connection: Any, dbapi: Any, dialect: Dialect) -> None:
        self._dbapi = dbapi
        self._connection = connection
        self._cursor = connection.cursor()
        self.dialect = dialect
        self.committed = False
        self._busy_ms: int | None = None  # the connection's busy timeout, read at the first begin_at_once
        self._autocheckpoint = 0  # the connection's WAL auto-checkpoint (pages), read with it
        self._no_wait = False  # busy timeout and auto-checkpoint are 0 (set by begin_at_once, until begin)
        self._unchecked = 0  # commits since the auto-checkpoint was turned off

    def run(self, sql: str, params: tuple[Any, ...]) -> Any:
        """Execute one statement; return the cursor for its rows."""
        try:
            self._cursor.execute(sql, params)  # the async adapters return None, not the cursor
        except self._dbapi.Error as exc:
            raise DBAPIError.instance(sql, params, exc, self._dbapi.Error) from exc
        return self._cursor

    def run_many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        """Execute one statement once per parameter tuple."""
        try:
            self._cursor.executemany(sql, params)
        except self._dbapi.Error as exc:
            raise DBAPIError.instance(sql, params, exc, self._dbapi.Error) from exc

    def commit(self) -> None:
        """Commit the transaction."""
        try:
            self._connection.commit()
        except self._dbapi.Error as exc:
            raise DBAPIError.instance("COMMIT", (), exc, self._dbapi.Error) from exc
        self.committed = True
        if self._no_wait:
            self._unchecked += 1

    def begin(self) -> None:
        """Begin a write transaction on this object's connection (``BEGIN IMMEDIATE``), to end with :meth:`end`.

        It waits for a write lock another connection holds up to the connection's busy
        timeout, and its commit checkpoints the WAL when SQLite's threshold is passed (both
        put back first if :meth:`begin_at_once` left them at 0).
        """
        self.committed = False
        if self._no_wait:
            self.run(f"PRAGMA busy_timeout = {self._busy_ms}", ())
            self.run(f"PRAGMA wal_autocheckpoint = {self._autocheckpoint}", ())
            self._no_wait = False
            self._unchecked = 0
        self.run("BEGIN IMMEDIATE", ())

    def begin_at_once(self) -> None:
        """:meth:`begin`, without waiting for a write lock another connection holds.

        The connection's busy timeout is set to 0 and left so for the next
        :meth:`begin_at_once` (the async API's appends come in runs: four statements less
        for each); :meth:`begin` puts it back. Inside the transaction nothing waits on
        it: the write lock is held, and WAL readers never block a writer. Nor does its
        commit wait on the disk: the WAL's auto-checkpoint (a passive checkpoint and its
        ``fsync``) is off with the busy timeout, and after :data:`CHECKPOINT_AFTER` such
        commits the next is refused, to run with :meth:`begin` where it may checkpoint.

        Raises:
            WouldWait: The lock is held, or a checkpoint is due (nothing begun).
        """
        if self._busy_ms is None:
            self._busy_ms = int(self.run("PRAGMA busy_timeout", ()).fetchone()[0])
            self._autocheckpoint = int(self.run("PRAGMA wal_autocheckpoint", ()).fetchone()[0])
        if self._unchecked >= CHECKPOINT_AFTER:
            raise WouldWait(f"{self._unchecked} commits since the WAL could checkpoint: this one may")
        self.committed = False
        if not self._no_wait:
            self.run("PRAGMA busy_timeout = 0", ())
            self.run("PRAGMA wal_autocheckpoint = 0", ())
            self._no_wait = True
        try:
            self.run("BEGIN IMMEDIATE", ())
        except DBAPIError as exc:
            if not isinstance(exc.orig, self._dbapi.OperationalError) or "locked" not in str(exc.orig):
                raise
            raise WouldWait("the SQLite write lock is held by another connection") from exc

    def end(self) -> None:
        """Roll back unless committed; the cursor stays open for the next transaction (errors never mask another)."""
        if not self.committed:
            with suppress(self._dbapi.Error):
                self._connection.rollback()

    def close(self) -> None:
        """Roll back unless committed, and close the cursor (errors here never mask the one being raised)."""
        with suppress(self._dbapi.Error):
            if not self.committed:
                self._connection.rollback()
            self._cursor.close()
