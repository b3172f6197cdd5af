"""The async bridge of contextledger 0.2, kept here as the baseline ``aio.py`` measures against.

0.2's ``contextledger.aio`` ran each sync call in a greenlet on the caller's event loop
(SQLAlchemy's ``greenlet_spawn``) over asyncio drivers: the ``SQLStore`` on the
``sync_engine`` of an async engine (aiosqlite, psycopg's async mode) with the ledger's
own engine settings, the ``RedisStore`` on an adapter whose every round trip awaited a
``redis.asyncio`` client. The library replaced it with one worker-thread hop per call
(:mod:`contextledger.aio.runner`); this module rebuilds the old bridge -- with
SQLAlchemy's ``greenlet_spawn``/``await_only`` (``sqlalchemy.util``, which SQLAlchemy does
not present as public API: one more reason the library left it) and the ledger's own
engine settings -- so both can be measured side by side in one run. It is a measurement
baseline, not library code. Needs ``greenlet`` and ``aiosqlite`` (the ``bench`` extra).

Only what the benchmark calls is here: opening a ledger and running a sync call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import await_only, greenlet_spawn

from contextledger import Ledger
from contextledger.stores.sql import SQLStore, encoding
from contextledger.stores.sql import engine as ledger_engine
from contextledger.stores.sql.defaults import DEFAULT_BUSY_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_STATEMENT_TIMEOUT
from contextledger.stores.urls import backend_of

__all__ = ["call", "open_ledger"]

R = TypeVar("R")


async def call(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run the sync ``fn`` in a greenlet on this loop, as 0.2's async shells did."""
    spawn: Any = greenlet_spawn
    result: R = await spawn(fn, *args, **kwargs)
    return result


async def open_ledger(url: str, **options: Any) -> Ledger:
    """A sync ``Ledger`` on the asyncio drivers: every call on it must go through :func:`call`."""
    return await call(_open, url, options)


def _open(url: str, options: dict[str, Any]) -> Ledger:
    if backend_of(url) == "redis":
        from contextledger.stores.redis import RedisStore

        return Ledger(RedisStore.from_url(url, client_factory=_redis_client, **options))
    parsed = ledger_engine.parse_url(url)
    engine: Engine
    if ledger_engine.is_sqlite(parsed):
        engine = create_async_engine(
            parsed.set(drivername="sqlite+aiosqlite"),
            connect_args={"timeout": DEFAULT_BUSY_TIMEOUT, "check_same_thread": False},
            json_deserializer=encoding.tolerant_sqlite_loads,
        ).sync_engine
        ledger_engine._configure_sqlite(engine, busy_timeout_ms=int(DEFAULT_BUSY_TIMEOUT * 1000), wal=True)
    else:
        engine = create_async_engine(
            parsed,
            connect_args={
                "connect_timeout": 10,
                "options": ledger_engine._timeout_options("", DEFAULT_LOCK_TIMEOUT, DEFAULT_STATEMENT_TIMEOUT),
            },
            json_serializer=encoding.dumps,
            json_deserializer=encoding.tolerant_loads,
        ).sync_engine
        event.listen(engine, "connect", lambda dbapi_conn, _record: encoding.register_nul_adapters(dbapi_conn))
    store = SQLStore(engine, url=parsed, owns_engine=True)
    if options.get("auto_upgrade"):
        store.upgrade()
    return Ledger(store)


class _Script:
    def __init__(self, script: Any) -> None:
        self._script = script

    @property
    def sha(self) -> str:
        sha: str = self._script.sha
        return sha

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = (), client: Any = None) -> Any:
        return await_only(self._script(keys=list(keys), args=list(args)))


class _Pipeline:
    def __init__(self, pipeline: Any) -> None:
        self._pipeline = pipeline

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipeline, name)  # queueing a command is synchronous

    def execute(self) -> list[Any]:
        result: list[Any] = await_only(self._pipeline.execute())
        return result


class _AsyncRedisClient:
    """The sync redis-py surface the store uses, each round trip awaiting a ``redis.asyncio`` client."""

    def __init__(self, client: AsyncRedis | AsyncRedisCluster) -> None:
        self._client = client
        self.is_cluster = isinstance(client, AsyncRedisCluster)

    def get_encoder(self) -> Any:
        return self._client.get_encoder()

    def register_script(self, script: str) -> _Script:
        return _Script(self._client.register_script(script))

    def pipeline(self, transaction: bool = False) -> _Pipeline:
        return _Pipeline(self._client.pipeline(transaction=transaction))

    def close(self) -> None:
        await_only(self._client.aclose())

    def __getattr__(self, name: str) -> Callable[..., Any]:
        command = getattr(self._client, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            return await_only(command(*args, **kwargs))

        return run


def _redis_client(driver_url: str, cluster: bool, options: dict[str, Any]) -> Any:
    client: AsyncRedis | AsyncRedisCluster
    if cluster:
        client = AsyncRedisCluster.from_url(driver_url, **options)
    else:
        client = AsyncRedis.from_url(driver_url, **options)
    return _AsyncRedisClient(client)
