"""The connection a PostgreSQL store sends its one-statement appends on.

An append on PostgreSQL is one statement (:mod:`~contextledger.stores.sql.write.pg_append`),
and the Python around it was mostly SQLAlchemy's: a pool checkout and check-in (with its
reset), switching the connection to autocommit and back, the execution context and the
result's metadata cost about twice the client CPU of the statement itself. A
:class:`HeldAppender` keeps one psycopg connection, in autocommit mode, with one cursor,
for those statements: taken from the engine once (its connect events ran: the NUL
adapters, the timeouts), and detached from the pool, so the pool counts only connections
in use by a call and a store that also runs transactions never waits for itself.

What it does not change: the statement, its parameters and its one round trip are the
same; it is prepared on the server as psycopg prepares it on a pooled connection (after
the connection's ``prepare_threshold`` uses, at most ``prepared_max`` statements);
driver errors come out as SQLAlchemy's, flagged as a disconnect where the dialect says
so, so the store translates them as it translates every other statement's.

The statement goes out through psycopg's low-level API rather than a cursor (see
:mod:`~contextledger.stores.sql.write.pg_direct`).

Statement events are honoured: an engine with ``echo`` or with
``before_cursor_execute`` / ``after_cursor_execute`` listeners (a statement log, an
instrumentation) gets ``None`` from :meth:`HeldAppender.statement` and the store sends
the statement through SQLAlchemy, where they see it.

A thread that finds the held connection busy gets ``None`` too (the pooled path, as
before); a driver error that may have left the connection unusable drops it (the next
append connects again), and a lost connection also empties the engine's pool -- as
SQLAlchemy does itself on a disconnect -- so the read that resolves the lost reply
connects afresh. The other way round too: when the pool invalidates a connection (a
disconnect seen on a pooled one, a server restart), the held connection is replaced
before its next statement instead of being found dead by it. A forked child makes its
own; :meth:`HeldAppender.close` closes it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from types import TracebackType
from typing import Any, NamedTuple

from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError

from contextledger.stores.sql.events import sends_on_driver
from contextledger.stores.sql.write.pg_direct import DirectSend

__all__ = ["HeldAppender", "HeldSettings", "HeldStatement", "holds_psycopg"]

_NOT_HELD: nullcontext[None] = nullcontext(None)


class HeldSettings(NamedTuple):
    """What another connection needs to match the held one (see :meth:`HeldAppender.settings`)."""

    conninfo: str
    prepare_threshold: int | None
    prepared_max: int | None


def holds_psycopg(engine: Engine) -> bool:
    """Whether ``engine``'s connections are psycopg's own sync ones (the only ones a statement is sent on directly).

    An engine on another driver, or the sync face of an async engine
    (``create_async_engine(...).sync_engine``, whose connections are driven through
    greenlets), keeps SQLAlchemy's pooled path.
    """
    return engine.dialect.driver == "psycopg" and not engine.dialect.is_async


class HeldAppender:
    """One psycopg connection in autocommit mode a PostgreSQL store keeps for its one-statement appends."""

    def __init__(self, engine: Engine) -> None:
        """Keep nothing yet: the connection is made by the first append."""
        self._engine = engine
        self._dbapi = engine.dialect.loaded_dbapi
        self._holds = holds_psycopg(engine)  # only psycopg's own (sync) connection is held
        self._lock = threading.Lock()
        self._connection: Any = None
        self._send: DirectSend | None = None  # how a statement is sent on it (made with it)
        self._pid = os.getpid()
        self._inherited: list[Any] = []  # kept, never closed, in a forked child
        self._closed = False
        # Set while a statement runs and left set when it failed other than by a
        # constraint: the connection may be unusable (a lost server, an interrupt mid-protocol).
        self._suspect = False
        self._lost = False
        # Set when the pool invalidates a connection (SQLAlchemy saw a disconnect): the
        # server may have dropped the idle held connection too, so it is replaced before
        # its next statement rather than found dead by it (which would spend one of the
        # exactly-once attempts of that commit).
        self._stale = False
        event.listen(engine, "invalidate", self._on_invalidate)

    def _on_invalidate(self, dbapi_connection: Any, record: Any, exception: BaseException | None) -> None:
        self._stale = True

    def statement(self) -> HeldStatement | nullcontext[None]:
        """A block that runs one statement on the held connection, or that gives ``None``.

        ``None`` (nothing taken, nothing sent) when another thread is using the held
        connection, when the appender is closed, when the engine has statement events
        to honour (``echo``, ``before_cursor_execute`` / ``after_cursor_execute``
        listeners), or when its connections are not psycopg's sync ones: the caller
        sends the statement through SQLAlchemy instead.
        """
        if not self._holds or not sends_on_driver(self._engine):
            return _NOT_HELD
        if not self._lock.acquire(blocking=False):
            return _NOT_HELD
        if self._closed:
            self._lock.release()
            return _NOT_HELD
        return HeldStatement(self)

    def _held_connection(self) -> DirectSend:
        """How a statement is sent on the held connection, the connection made on first use (call with the lock held).

        Raises:
            sqlalchemy.exc.DBAPIError: The driver failed to connect.
        """
        if self._connection is not None and self._pid != os.getpid():
            # A forked child never uses (or closes) its parent's connection: it makes its own.
            self._inherited.append(self._connection)
            self._connection = self._send = None
        if self._stale:
            self._stale = False
            self._drop()
        if self._send is None:
            self._pid = os.getpid()
            proxied = self._checkout()
            connection = proxied.driver_connection
            proxied.detach()  # ours until close(); the pool no longer counts it
            self._connection = connection
            try:
                connection.autocommit = True  # a client-side setting: nothing is sent
                self._send = DirectSend(connection)
            except self._dbapi.Error as exc:
                raise DBAPIError.instance("connect", (), exc, self._dbapi.Error) from exc
        return self._send

    def _checkout(self) -> Any:
        try:
            return self._engine.raw_connection()  # the pool's connect events run; its errors are the driver's own
        except self._dbapi.Error as exc:
            raise DBAPIError.instance("connect", (), exc, self._dbapi.Error) from exc

    def run(self, sql: str, values: dict[str, Any]) -> Any:
        """Execute ``sql`` on the held connection and return its one row (call inside :meth:`statement`'s block).

        The row's values are as the server wrote them (text), ``None`` for SQL ``NULL``;
        no row: ``None``.

        Raises:
            sqlalchemy.exc.DBAPIError: The driver's error, ``connection_invalidated`` when
                the dialect calls it a disconnect.
        """
        connection = self._connection
        send = self._send
        assert send is not None  # made by statement()'s block
        self._suspect = True
        try:
            row = send.execute(sql, values)
        except self._dbapi.Error as exc:
            lost = self._engine.dialect.is_disconnect(exc, connection, None)
            error = DBAPIError.instance(
                sql, values, exc, self._dbapi.Error, hide_parameters=True, connection_invalidated=lost
            )
            if isinstance(error, IntegrityError):
                self._suspect = False  # the statement failed as a whole; the connection is idle
            self._lost = lost
            raise error from exc
        self._suspect = False
        return row

    @contextmanager
    def driver_connection(self) -> Iterator[Any]:
        """The held psycopg connection (made if need be), for diagnostics such as tracing its protocol.

        No append runs on it meanwhile: one in this thread takes the pooled path.

        Raises:
            sqlalchemy.exc.DBAPIError: The driver failed to connect.
        """
        with self._lock:
            self._held_connection()
            yield self._connection

    def settings(self) -> HeldSettings:
        """How the held connection was made and prepares statements, for another connection to match.

        The libpq connection string (password included) is what the engine's URL,
        ``connect_args`` and connect events gave it (the ledger's timeouts among them);
        ``prepare_threshold`` / ``prepared_max`` are psycopg's (``connect_args`` may set
        them). The async API's native send makes its connections with these. Connects
        if need be, waiting for an append that uses the held connection.

        Raises:
            sqlalchemy.exc.DBAPIError: The driver failed to connect.
        """
        from psycopg.conninfo import make_conninfo

        with self.driver_connection() as connection:
            info = connection.info
            return HeldSettings(
                make_conninfo(info.dsn, password=info.password),
                connection.prepare_threshold,
                connection.prepared_max,
            )

    def _drop(self, *, lost: bool = False) -> None:
        connection, self._connection, self._send = self._connection, None, None
        self._suspect = self._lost = False
        if connection is not None and self._pid != os.getpid():
            # A forked child's copy of its parent's connection: closing it would end the
            # parent's session on the server (the socket is shared).
            self._inherited.append(connection)
        elif connection is not None:
            with suppress(Exception):  # closing a broken connection must not mask the error being raised
                connection.close()
        if lost:
            # The server may have gone away for every connection (a restart, a failover):
            # empty the pool as SQLAlchemy does on a disconnect, so the next checkout connects.
            self._engine.dispose()

    def close(self) -> None:
        """Close the held connection (waiting for an append that uses it); later appends take the pool."""
        with self._lock:
            self._closed = True
            self._drop()
        with suppress(Exception):  # an engine already disposed of its listeners
            event.remove(self._engine, "invalidate", self._on_invalidate)


class HeldStatement:
    """The block of :meth:`HeldAppender.statement` on the held connection (the appender's lock is held on creation).

    Entering gives the appender, its connection made on first use; leaving releases the
    lock. A statement that failed other than by a constraint violation (which leaves an
    autocommit connection idle) drops the connection: it may be unusable. A class, not
    a generator: every append makes one.
    """

    __slots__ = ("_appender",)

    def __init__(self, appender: HeldAppender) -> None:
        self._appender = appender

    def __enter__(self) -> HeldAppender:
        appender = self._appender
        try:
            appender._held_connection()
        except BaseException:
            appender._drop()
            appender._lock.release()
            raise
        return appender

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        appender = self._appender
        try:
            if appender._suspect:
                appender._drop(lost=appender._lost)
        finally:
            appender._lock.release()
