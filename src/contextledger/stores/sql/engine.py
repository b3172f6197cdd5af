"""Engines and the translation of driver errors (URLs are parsed by :mod:`contextledger.stores.urls`).

SQLite engines get WAL, a busy timeout and foreign keys on every connection, and take
the write lock when a write transaction begins (``BEGIN IMMEDIATE``) so two writers
queue on the busy timeout instead of failing to upgrade a read lock. PostgreSQL runs
on psycopg 3 with a connection pool.

Both APIs use these engines: the async API (:mod:`contextledger.aio`) runs each sync call
on a worker thread, so there is one engine, on the sync drivers, for both.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import StaticPool

from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    InvalidLedgerURL,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
)
from contextledger.stores.sql import encoding
from contextledger.stores.sql.defaults import DEFAULT_LOCK_TIMEOUT, DEFAULT_STATEMENT_TIMEOUT, EngineOptions
from contextledger.stores.urls import mask as mask_url
from contextledger.stores.urls import mask_text, parse_sql

__all__ = [
    "BEGIN_OPTION",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_STATEMENT_TIMEOUT",
    "build_engine",
    "describe",
    "mask",
    "parse_url",
    "translate",
]

logger = logging.getLogger(__name__)

BEGIN_OPTION = "contextledger_sqlite_begin"
"""Execution option naming the SQLite ``BEGIN`` mode (``DEFERRED`` or ``IMMEDIATE``)."""

_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}
_POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}
# SQLSTATEs a retry can cure: serialization failure and deadlock.
_RETRYABLE = {"40001", "40P01"}
# lock_not_available (lock_timeout) and query_canceled (statement_timeout).
_TIMEOUTS = {"55P03", "57014"}


def parse_url(url: str | URL) -> URL:
    """Parse and normalise a SQL ledger URL (see :func:`contextledger.stores.urls.parse_sql`).

    Raises:
        InvalidLedgerURL: The URL is malformed or names an unsupported driver.
    """
    return parse_sql(url)


def mask(url: URL) -> str:
    """The URL as a string with every credential masked: its password and secret query parameters.

    See :func:`contextledger.stores.urls.mask` (``?password=``, ``?sslpassword=``... are masked too).
    """
    return mask_url(url.render_as_string(hide_password=True))


def is_sqlite(url: URL) -> bool:
    """Whether ``url`` names a SQLite database."""
    return url.get_backend_name() == "sqlite"


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url.query)


def build_engine(url: URL, **options: Any) -> Engine:
    """Create the engine for a parsed ledger URL (see :func:`parse_url`).

    Args:
        url: A normalised URL.
        **options: The engine options, declared in
            :class:`~contextledger.stores.sql.defaults.EngineOptions` (pools, timeouts,
            ``read_only``...); any other keyword is passed to :func:`sqlalchemy.create_engine`.

    Raises:
        InvalidLedgerURL: The URL needs a driver that is not installed (psycopg).
    """
    opts = EngineOptions.of(options)
    read_only, busy_timeout = opts.read_only, opts.busy_timeout
    kwargs: dict[str, Any] = {"echo": opts.echo, "pool_pre_ping": opts.pool_pre_ping, **opts.extra, **opts.pools}
    args = dict(opts.connect_args or {})
    if is_sqlite(url):
        kwargs.setdefault("json_deserializer", encoding.tolerant_sqlite_loads)
        args.setdefault("timeout", busy_timeout)
        args.setdefault("check_same_thread", False)
        if read_only and not _is_memory(url):
            # SQLite's URI form is the only way to open a file read-only through pysqlite.
            path = Path(url.database or "").resolve()
            url = url.set(database=f"file:{quote(str(path))}", query={"mode": "ro", "uri": "true"})
        if _is_memory(url):
            # One shared connection: a private :memory: database per connection would be empty.
            kwargs.setdefault("poolclass", StaticPool)
            for name in ("pool_size", "max_overflow", "pool_timeout"):
                kwargs.pop(name, None)
        try:
            engine = create_engine(url, connect_args=args, **kwargs)
        except ArgumentError as exc:  # SQLAlchemy's own check of the URL; its message may echo it
            raise InvalidLedgerURL(f"invalid SQLite URL {mask(url)!r}: {mask_text(_first_line(exc), url)}") from None
        _configure_sqlite(engine, busy_timeout_ms=int(busy_timeout * 1000), wal=not (_is_memory(url) or read_only))
        return engine
    args.setdefault("connect_timeout", opts.connect_timeout)
    args["options"] = _timeout_options(str(args.get("options") or ""), opts.lock_timeout, opts.statement_timeout)
    # NUL in text and JSON(B) columns: see contextledger.stores.sql.encoding.
    kwargs.setdefault("json_serializer", encoding.dumps)
    kwargs.setdefault("json_deserializer", encoding.tolerant_loads)
    if read_only:
        args["options"] = f"{args.get('options', '')} -c default_transaction_read_only=on".strip()
    try:
        engine = create_engine(url, connect_args=args, **kwargs)
        event.listen(engine, "connect", lambda dbapi_conn, _record: encoding.register_nul_adapters(dbapi_conn))
        return engine
    except ImportError as exc:  # SQLAlchemy imports the driver here
        raise InvalidLedgerURL(
            f"the PostgreSQL backend needs psycopg 3: pip install 'contextledger[postgres]' ({exc})"
        ) from exc


def _timeout_options(options: str, lock_timeout: float | None, statement_timeout: float | None) -> str:
    """Libpq ``options`` with the ledger's default timeouts added (the caller's win)."""
    parts = [options] if options else []
    for name, seconds in (("lock_timeout", lock_timeout), ("statement_timeout", statement_timeout)):
        if seconds is None or name in options:
            continue
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ConfigurationError(f"{name} must be a positive number of seconds or None, got {seconds!r}")
        parts.append(f"-c {name}={max(1, round(seconds * 1000))}")
    return " ".join(parts)


def _configure_sqlite(engine: Engine, *, busy_timeout_ms: int, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module: it would not BEGIN before a
        # SELECT, and could not BEGIN IMMEDIATE for writers.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if wal:
                _enable_wal(cursor, busy_timeout_ms / 1000)
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(BEGIN_OPTION, "DEFERRED")
        if mode not in ("DEFERRED", "IMMEDIATE"):
            raise StoreError(f"unknown SQLite BEGIN mode {mode!r}")
        connection.exec_driver_sql(f"BEGIN {mode}")


def _enable_wal(cursor: Any, timeout: float) -> None:
    """Switch a database file to WAL (persistent: a no-op once any connection did it).

    Switching needs an exclusive lock, and SQLite reports "database is locked" at once,
    without the busy handler, when connections opening a new file race for it; so retry
    for up to the busy timeout.
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode")
            (mode,) = cursor.fetchone()  # not execute(...).fetchone(): DB-API leaves execute's return open
            if str(mode).lower() != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def describe(url: URL) -> str:
    """Where a URL points, for error messages: ``host:port/db`` or the SQLite file."""
    if is_sqlite(url):
        database = url.database or ":memory:"
        if database.startswith("file:"):  # a read-only URI (see build_engine)
            database = unquote(database.removeprefix("file:"))
        return f"SQLite database {database}"
    host = url.host or "localhost"
    port = f":{url.port}" if url.port else ""
    return f"PostgreSQL server {host}{port}/{url.database or ''}"


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__


def translate(exc: SQLAlchemyError, url: URL) -> StoreError:
    """Map a SQLAlchemy/driver error to the library's error (caller raises ``from exc``).

    The message never holds a credential of ``url``, even when the driver echoed one.
    """
    where = describe(url)
    detail = mask_text(_first_line(exc), url)
    orig = getattr(exc, "orig", None)
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate in _RETRYABLE:
        return ConcurrencyConflict(f"{where}: transaction could not be serialized, retry it ({detail})")
    if sqlstate in _TIMEOUTS:
        return StoreTimeout(f"{where}: timed out, nothing was applied ({detail})")
    if isinstance(exc, IntegrityError):
        return StoreError(f"{where}: integrity error: {detail}")
    if isinstance(exc, PoolTimeout):
        return StoreError(f"{where}: no free pooled connection: {detail}")
    if isinstance(exc, DBAPIError) and _is_unavailable(exc, url, sqlstate):
        return StoreUnavailable(f"cannot reach {where}: {detail}")
    return StoreError(f"{where}: {detail}")


def _is_unavailable(exc: DBAPIError, url: URL, sqlstate: str | None) -> bool:
    if exc.connection_invalidated:
        return True
    if is_sqlite(url):
        message = str(exc.orig).lower()
        return "unable to open" in message or "disk i/o error" in message
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    # No SQLSTATE: the client could not connect; 08xxx: connection exception;
    # 57P0x: the server is shutting down or not accepting connections.
    return sqlstate is None or sqlstate.startswith("08") or sqlstate.startswith("57P0")
