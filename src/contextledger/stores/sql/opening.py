"""Opening a SQL ledger: on the SQLite reader when the file is current, else on the engine (create, migrate, check).

:meth:`~contextledger.stores.sql.SQLStore.from_url` checks its arguments and calls
:func:`open_store`. A plain SQLite file whose schema is at this library's head is opened
by a :class:`~contextledger.stores.sql.reader.SQLiteReader` alone (no SQLAlchemy until the
first write); anything else builds the engine and creates, upgrades or verifies the schema.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from contextledger.stores.sql.defaults import EngineOptions
from contextledger.stores.sql.reader import SQLiteReader
from contextledger.stores.urls import plain_sqlite_masked

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.engine import URL

__all__ = ["Opened", "open_store"]

logger = logging.getLogger("contextledger.stores.sql.store")


class Opened(Protocol):
    """What opening needs of the store it builds (``SQLStore``; named here without importing it)."""

    url: str
    _reader: SQLiteReader | None

    def upgrade(self, revision: str = "head") -> None:
        """Migrate the schema to ``revision``."""


StoreT = TypeVar("StoreT", bound=Opened)


def open_store(
    url: str | URL,
    options: dict[str, Any],
    *,
    auto_upgrade: bool | None,
    database: str | None,
    on_reader: Callable[[SQLiteReader, str, dict[str, Any]], StoreT],
    on_engine: Callable[[Engine, URL], StoreT],
) -> StoreT:
    """Open ``url`` (see :meth:`~contextledger.stores.sql.SQLStore.from_url` for the errors).

    Args:
        url: The database URL.
        options: The engine options ``from_url`` gathered (``read_only`` and ``busy_timeout`` among them).
        auto_upgrade: As ``from_url`` takes it.
        database: The SQLite file when ``url`` names a plain one opened with default options, else ``None``.
        on_reader: Builds the store that reads through a reader (its engine built on first use).
        on_engine: Builds the store on an engine it owns.
    """
    if database is not None:
        reader = SQLiteReader.open(database, busy_timeout=EngineOptions.of(options).busy_timeout)
        if reader is not None:  # a ledger at this library's head: nothing to create or migrate
            logger.debug("url=<%s> | opened SQL ledger for reading", plain_sqlite_masked(database))
            return on_reader(reader, str(url), options)
    return _open_engine(url, options, auto_upgrade=auto_upgrade, database=database, on_engine=on_engine)


def _open_engine(
    url: str | URL,
    options: dict[str, Any],
    *,
    auto_upgrade: bool | None,
    database: str | None,
    on_engine: Callable[[Engine, URL], StoreT],
) -> StoreT:
    """:func:`open_store` on the engine: build it, then check or upgrade the schema."""
    from contextledger.stores.sql import schema
    from contextledger.stores.sql.engine import build_engine, is_sqlite, parse_url

    read_only = EngineOptions.of(options).read_only
    parsed = parse_url(url)
    engine = build_engine(parsed, **options)
    store = on_engine(engine, parsed)
    upgrade = not read_only and (is_sqlite(parsed) if auto_upgrade is None else auto_upgrade)
    try:
        if upgrade:
            store.upgrade()
        else:
            # A SQLite file without the ledger's schema is some other application's file; an
            # empty PostgreSQL database is a ledger waiting for its `db upgrade`.
            schema.verify(engine, absent_is_foreign=read_only and is_sqlite(parsed))
        if database is not None:  # created or migrated just now: later restores read it directly
            store._reader = SQLiteReader.open(database, busy_timeout=EngineOptions.of(options).busy_timeout)
    except BaseException:
        engine.dispose()
        raise
    logger.debug("url=<%s> | opened SQL ledger", store.url)
    return store
