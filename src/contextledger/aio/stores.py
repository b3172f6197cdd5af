"""Open a store on the asyncio drivers (call only inside ``greenlet_spawn``).

The stores are the sync classes themselves: a :class:`~contextledger.stores.sql.SQLStore`
on the ``sync_engine`` of an async engine (``sqlite+aiosqlite``, psycopg 3 async), a
:class:`~contextledger.stores.redis.RedisStore` on :class:`~contextledger.aio.redis.AsyncRedisClient`,
and the :class:`~contextledger.stores.memory.MemoryStore`, which does no I/O.
"""

from __future__ import annotations

from typing import Any

from contextledger.errors import InvalidLedgerURL
from contextledger.stores.base import LedgerStore
from contextledger.urls import backend_of

__all__ = ["open_async_store"]


def open_async_store(url: str, **options: Any) -> LedgerStore:
    """Open the store ``url`` names on the asyncio drivers, with the options of ``Ledger.connect``.

    Raises:
        InvalidLedgerURL: The URL is malformed, names no supported backend, or needs a
            driver that is not installed.
        ConfigurationError: An option is not one the backend takes.
        StoreUnavailable: The database or server could not be reached.
        SchemaOutOfDate: The SQL schema does not match this library.
    """
    encryption = options.pop("encryption", None)
    if encryption is not None:
        from contextledger.stores.encrypted import key_provider, with_encryption

        provider = key_provider(encryption)  # before opening: a bad option opens nothing
        return with_encryption(open_async_store(url, **options), provider)
    backend = backend_of(url)
    if backend != "redis":
        from contextledger.ledger import open_store

        # SQL: the same engine options, on the asyncio driver (see stores.sql.engine).
        return open_store(url, asyncio=True, **options) if backend == "sql" else open_store(url, **options)
    try:
        from contextledger.aio.redis import connect
        from contextledger.stores.redis import RedisStore
    except ImportError as exc:
        raise InvalidLedgerURL(
            f"the redis backend needs an optional dependency: pip install 'contextledger[redis]' ({exc})"
        ) from exc
    return RedisStore.from_url(url, client_factory=connect, **options)
