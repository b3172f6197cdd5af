"""How :meth:`~contextledger.stores.sql.SQLStore.commit` sends a changeset: the hot paths and the held connections.

:class:`SQLWrites` is the store's write dispatch: it picks the path a changeset takes
(:mod:`.sqlite_hot` on SQLite, :mod:`.pg_append` on PostgreSQL, else :mod:`.apply`),
sends it on the connection the store holds for that path (:mod:`.sqlite_writer`,
:mod:`.pg_writer`) or on a pooled one, and reads a commit back from the commit log when
its reply was lost (the exactly-once wrapper of :mod:`~contextledger.stores.exactly_once`
calls :meth:`SQLWrites._send` and :meth:`SQLWrites._read_back`).

SQLAlchemy and the modules built on it are imported on the first commit, once (see
:func:`_pg_path` and :func:`_sqlite_writes`), never at the top of this module: a store
that only reads a SQLite file never imports them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from contextledger.core.changeset import Changeset
from contextledger.core.seam import INLINE, WouldWait
from contextledger.errors import SessionDeleted, SessionExpired, StoreError, StoreUnavailable
from contextledger.model.records import Expiry, utcnow
from contextledger.stores.base import check_storable
from contextledger.stores.exactly_once import ReplyLost, commit_exactly_once
from contextledger.stores.lifecycle import Gate
from contextledger.stores.sql.events import sends_on_driver

if TYPE_CHECKING:
    from sqlalchemy import Connection, Dialect, Engine
    from sqlalchemy.exc import SQLAlchemyError

    from contextledger.stores.sql.write.pg_append import EncodedAppend
    from contextledger.stores.sql.write.pg_writer import HeldAppender
    from contextledger.stores.sql.write.sqlite_hot import HotChangeset
    from contextledger.stores.sql.write.sqlite_writer import HeldWriter

__all__ = ["SQLWrites"]

# The store's logger: a commit logs where the store's other calls do.
logger = logging.getLogger("contextledger.stores.sql.store")


class _PgPath(NamedTuple):
    """What PostgreSQL's append calls, imported once (import statements in every commit cost more than its dispatch)."""

    error: type[SQLAlchemyError]
    encoded_append: type[EncodedAppend]
    is_append_only: Callable[[Changeset], bool]
    send_append: Callable[[HeldAppender, Dialect, Changeset, datetime, EncodedAppend], bool]
    apply_append: Callable[[Connection, Changeset, datetime, EncodedAppend | None], int]
    explain_missed_update: Callable[[Connection, Changeset, Sequence[str]], None]
    statement_values: Callable[[Dialect, Changeset, datetime, EncodedAppend], tuple[str, dict[str, Any]]]
    on_driver: Callable[[Engine], bool]  # the held appender's guard: psycopg's sync driver, no statement events


@cache
def _pg_path() -> _PgPath:
    from sqlalchemy.exc import SQLAlchemyError

    from contextledger.stores.sql.write.guard import explain_missed_update
    from contextledger.stores.sql.write.pg_append import (
        EncodedAppend,
        apply_append,
        is_append_only,
        send_append,
        statement_values,
    )
    from contextledger.stores.sql.write.pg_writer import holds_psycopg

    return _PgPath(
        SQLAlchemyError,
        EncodedAppend,
        is_append_only,
        send_append,
        apply_append,
        explain_missed_update,
        statement_values,
        lambda engine: holds_psycopg(engine) and sends_on_driver(engine),
    )


class _SQLiteWrites(NamedTuple):
    """What a commit on SQLite uses of the modules built on SQLAlchemy (see :func:`_sqlite_writes`)."""

    driver_error: type[SQLAlchemyError]
    hot: ModuleType  # sqlite_hot: its names are looked up on each call (a test may replace one)


@cache
def _sqlite_writes() -> _SQLiteWrites:
    """The SQLite hot path's modules, imported on the first commit (not with this module, see its docstring)."""
    from sqlalchemy.exc import SQLAlchemyError

    from contextledger.stores.sql.write import sqlite_hot

    return _SQLiteWrites(SQLAlchemyError, sqlite_hot)


class SQLWrites:
    """The write dispatch of :class:`~contextledger.stores.sql.SQLStore`, which provides the engine and transactions.

    Contract: :meth:`_send` applies a changeset once or raises; a connection lost after
    the changeset was sent raises :class:`~contextledger.stores.exactly_once.ReplyLost`
    (the outcome is then read back by :meth:`_read_back`), one lost before it raises
    :class:`~contextledger.errors.StoreUnavailable` (nothing was applied).
    """

    _gate: Gate
    _sqlite: bool
    _one_statement_appends: bool
    _engine_lock: threading.Lock
    _writer: HeldWriter | None
    # (session_id, agent_id) -> the conversation's id, for the SQLite hot path's version bump
    # (see sqlite_hot.apply_hot: a cached id is re-checked by the statement itself).
    _conversation_ids: dict[tuple[str, str], int]
    _appender: HeldAppender | None

    @property
    def engine(self) -> Engine:
        """The store's engine (SQLStore's, built on first use)."""
        raise NotImplementedError

    def _translate(self, exc: SQLAlchemyError) -> StoreError:
        raise NotImplementedError  # SQLStore's

    def _transaction(self, *, write: bool = False, snapshot: bool = False) -> AbstractContextManager[Connection]:
        raise NotImplementedError  # SQLStore's unit of work

    def _autocommit(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError  # SQLStore's one-statement unit of work

    def _prepare_writes(self) -> None:
        """No held connection yet, no conversation id known (part of the store's construction)."""
        self._writer = None
        self._appender = None
        self._conversation_ids = {}

    def _commit(self, changeset: Changeset) -> int:
        """:meth:`~contextledger.stores.sql.SQLStore.commit`: check, send once, name an expired conversation."""
        hot = self._hot(changeset)
        if hot is None:
            check_storable(changeset)
        with self._gate.call():
            try:
                version = commit_exactly_once(changeset, lambda cs: self._send(cs, hot), self._read_back)
            except SessionDeleted as exc:
                if isinstance(exc, SessionExpired):
                    raise
                expiry = self._expired(changeset.session_id, changeset.agent_id)
                if expiry is None:
                    raise
                raise SessionExpired(f"{exc} (it expired: {expiry.reason})") from exc
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset",
            changeset.session_id,
            changeset.agent_id,
            version,
        )
        return version

    def one_statement(self, changeset: Changeset) -> tuple[str, dict[str, Any]] | None:
        """``changeset``'s commit as PostgreSQL's one statement (text, driver parameters), or ``None`` when it is more.

        The statement and parameters the held connection would send (see
        :mod:`~contextledger.stores.sql.write.pg_append`), for a sender of its own (the
        async API's native send), which sends exactly this in autocommit mode and, on
        any reply but an applied row, leaves the write to :meth:`_commit`. ``None`` on
        SQLite, for a changeset that is not append-only, and where the sync path would
        not send on its held connection (not psycopg's sync driver, statement events).

        Raises:
            InvalidMessage: Content or a state value cannot be stored as JSON, or an id is too long.
            DuplicateEntry: ``changeset`` appends one id twice.
            LedgerClosed: The store was closed.
        """
        self._gate.check()
        if self._sqlite or not self._one_statement_appends:
            return None
        pg = _pg_path()
        engine = self.engine
        if not pg.is_append_only(changeset) or not pg.on_driver(engine):
            return None
        return pg.statement_values(engine.dialect, changeset, utcnow(), pg.encoded_append(changeset))

    def _expired(self, session_id: str, agent_id: str) -> Expiry | None:
        from contextledger.stores.sql import lineage

        with self._transaction() as conn:
            return lineage.expired(conn, session_id, agent_id)

    def _close_held(self) -> None:
        """Close the held connections (the store's close, once no call runs)."""
        if self._writer is not None:
            self._writer.close()
        if self._appender is not None:
            self._appender.close()

    def _hot(self, changeset: Changeset) -> HotChangeset | EncodedAppend | None:
        """``changeset`` checked and encoded for a hot path (SQLite, PostgreSQL), or ``None`` for the general path."""
        if not self._sqlite:
            if not self._one_statement_appends:
                return None
            pg = _pg_path()
            return pg.encoded_append(changeset) if pg.is_append_only(changeset) else None
        sqlite = _sqlite_writes()
        if not sqlite.hot.takes_hot_path(changeset) or not sends_on_driver(self.engine):
            return None  # the general path, through SQLAlchemy: a statement listener sees it there
        hot: HotChangeset = sqlite.hot.HotChangeset(changeset)
        return hot

    def _send(self, changeset: Changeset, hot: HotChangeset | EncodedAppend | None = None) -> int:
        """Apply ``changeset`` once; a connection lost after it was acquired makes the outcome unknown."""
        if hot is not None and not self._sqlite:  # PostgreSQL's hot changesets are EncodedAppend
            return self._send_append(changeset, cast("EncodedAppend", hot))
        sqlite = _sqlite_writes()  # imported once: import statements here cost each commit 3 us
        sent = False
        try:
            if hot is not None:
                try:
                    with self._held_writer().transaction() as tx:
                        sent = True
                        version: int | None = sqlite.hot.apply_hot(
                            tx, cast("HotChangeset", hot), utcnow(), self._conversation_ids
                        )
                        if version is not None:
                            tx.commit()
                            return version
                except sqlite.driver_error as exc:
                    raise self._translate(exc) from exc
                sent = False  # rolled back, nothing written: the general path applies it or names the error
            if INLINE.get():  # the general path's pooled transaction would wait on the busy timeout
                raise WouldWait("not a hot SQLite changeset")
            from contextledger.stores.sql.write.apply import apply_changeset

            with self._transaction(write=True) as conn:
                sent = True
                return apply_changeset(conn, changeset, utcnow())
        except StoreUnavailable as exc:
            if sent:
                raise ReplyLost(exc) from exc
            raise

    def _send_append(self, changeset: Changeset, hot: EncodedAppend) -> int:
        """Send PostgreSQL's one statement: on the held connection when it is free, else on a pooled one."""
        pg = _pg_path()
        sent = False
        try:
            applied: bool | None = None  # None: not sent on the held connection
            try:
                with (self._appender or self._held_appender()).statement() as held:
                    if held is not None:
                        sent = True
                        applied = pg.send_append(held, self.engine.dialect, changeset, utcnow(), hot)
            except pg.error as exc:
                raise self._translate(exc) from exc
            if applied:
                return changeset.new_version
            # On a pooled connection, which also reads why the held one's statement was refused.
            with self._autocommit() as conn:
                sent = True
                if applied is None:
                    return pg.apply_append(conn, changeset, utcnow(), hot)
                pg.explain_missed_update(conn, changeset, hot.appended)
                return changeset.new_version
        except StoreUnavailable as exc:
            if sent:
                raise ReplyLost(exc) from exc
            raise

    def _held_writer(self) -> HeldWriter:
        """The connection the SQLite hot path commits on (see ``HeldWriter``)."""
        writer = self._writer
        if writer is None:
            from contextledger.stores.sql.write.sqlite_writer import HeldWriter

            engine = self.engine  # built under _engine_lock itself, so not inside it
            with self._engine_lock:
                if self._writer is None:
                    self._writer = HeldWriter(engine)
                writer = self._writer
        return writer

    def _held_appender(self) -> HeldAppender:
        """The connection the PostgreSQL one-statement appends are sent on (see ``HeldAppender``)."""
        appender = self._appender
        if appender is None:
            from contextledger.stores.sql.write.pg_writer import HeldAppender

            engine = self.engine
            with self._engine_lock:
                if self._appender is None:
                    self._appender = HeldAppender(engine)
                appender = self._appender
        return appender

    def _read_back(self, changeset: Changeset) -> int | None:
        from contextledger.stores.sql.write.apply import read_back

        if self._sqlite:
            with self._transaction() as conn:
                return read_back(conn, changeset)
        # Autocommit: the lock wait and the read are two statements, the read a fresh snapshot.
        with self._autocommit() as conn:
            return read_back(conn, changeset)
