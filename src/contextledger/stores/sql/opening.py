"""Opening a SQL ledger: on the SQLite reader when the file is current, else on the engine (create, migrate, check).

:meth:`~contextledger.stores.sql.SQLStore.from_url` checks its arguments and calls
:func:`open_store`. A plain SQLite file whose schema is at this library's head is opened
by a :class:`~contextledger.stores.sql.reader.SQLiteReader` alone (no SQLAlchemy until the
first write); anything else builds the engine and creates, upgrades or verifies the schema.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

from contextledger.stores.sql.reader import SQLiteReader
from contextledger.urls import plain_sqlite_masked

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from contextledger.stores.sql.store import SQLStore

__all__ = ["open_store"]

logger = logging.getLogger("contextledger.stores.sql.store")

StoreT = TypeVar("StoreT", bound="SQLStore")


def open_store(
    cls: type[StoreT], url: str | URL, options: dict[str, Any], *, auto_upgrade: bool | None, database: str | None
) -> StoreT:
    """Open ``url`` as a ``cls`` (see :meth:`~contextledger.stores.sql.SQLStore.from_url` for the errors).

    Args:
        cls: The store class.
        url: The database URL.
        options: The engine options ``from_url`` gathered (``read_only`` and ``busy_timeout`` among them).
        auto_upgrade: As ``from_url`` takes it.
        database: The SQLite file when ``url`` names a plain one opened with default options, else ``None``.
    """
    if database is not None:
        reader = SQLiteReader.open(database, busy_timeout=float(options["busy_timeout"]))
        if reader is not None:  # a ledger at this library's head: nothing to create or migrate
            logger.debug("url=<%s> | opened SQL ledger for reading", plain_sqlite_masked(database))
            return cls._on_reader(reader, str(url), options)
    return _open_engine(cls, url, options, auto_upgrade=auto_upgrade, database=database)


def _open_engine(
    cls: type[StoreT], url: str | URL, options: dict[str, Any], *, auto_upgrade: bool | None, database: str | None
) -> StoreT:
    """:func:`open_store` on the engine: build it, then check or upgrade the schema."""
    from contextledger.stores.sql import schema
    from contextledger.stores.sql.engine import build_engine, is_sqlite, parse_url

    read_only = bool(options["read_only"])
    parsed = parse_url(url)
    engine = build_engine(parsed, **options)
    store = cls(engine, url=parsed, owns_engine=True)
    upgrade = not read_only and (is_sqlite(parsed) if auto_upgrade is None else auto_upgrade)
    try:
        if upgrade:
            store.upgrade()
        else:
            # A SQLite file without the ledger's schema is some other application's file; an
            # empty PostgreSQL database is a ledger waiting for its `db upgrade`.
            schema.verify(engine, absent_is_foreign=read_only and is_sqlite(parsed))
        if database is not None:  # created or migrated just now: later restores read it directly
            store._reader = SQLiteReader.open(database, busy_timeout=float(options["busy_timeout"]))
    except BaseException:
        engine.dispose()
        raise
    logger.debug("url=<%s> | opened SQL ledger", store.url)
    return store
