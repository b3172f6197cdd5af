"""The sync redis-py surface :class:`~contextledger.stores.redis.RedisStore` uses, over ``redis.asyncio``.

Each call becomes ``await_only(<the async client's coroutine>)``, so the store's code --
scripts, pipelines, error translation -- runs unchanged inside ``greenlet_spawn`` on a
``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``. Pipelines queue commands
synchronously in redis-py's asyncio clients too; only ``execute`` is awaited.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from sqlalchemy.util import await_only

__all__ = ["AsyncRedisClient", "connect"]


class _Script:
    def __init__(self, script: Any) -> None:
        self._script = script

    @property
    def sha(self) -> str:
        """The script's SHA1 (as redis-py's ``Script.sha``)."""
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


class AsyncRedisClient:
    """A sync-looking Redis client whose every round trip awaits a ``redis.asyncio`` client.

    Only usable inside ``greenlet_spawn`` (see :mod:`contextledger.aio`).

    Attributes:
        is_cluster: Whether the client talks to a Redis Cluster (the store routes by it).
    """

    def __init__(self, client: AsyncRedis | AsyncRedisCluster) -> None:
        """Wrap ``client``."""
        self._client = client
        self.is_cluster = isinstance(client, AsyncRedisCluster)

    def get_encoder(self) -> Any:
        """The client's encoder (the store checks it does not decode responses)."""
        return self._client.get_encoder()

    def register_script(self, script: str) -> _Script:
        """A script object called like redis-py's ``Script`` (``keys=``, ``args=``)."""
        return _Script(self._client.register_script(script))

    def pipeline(self, transaction: bool = False) -> _Pipeline:
        """A pipeline whose ``execute`` is awaited."""
        return _Pipeline(self._client.pipeline(transaction=transaction))

    def close(self) -> None:
        """Close the async client's connections."""
        await_only(self._client.aclose())

    def __getattr__(self, name: str) -> Callable[..., Any]:
        command = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return await_only(command(*args, **kwargs))

        return call


def connect(driver_url: str, cluster: bool, options: dict[str, Any]) -> Any:
    """The ``client_factory`` of :meth:`RedisStore.from_url` for the async API."""
    client: AsyncRedis | AsyncRedisCluster
    if cluster:
        client = AsyncRedisCluster.from_url(driver_url, **options)
    else:
        client = AsyncRedis.from_url(driver_url, **options)
    return AsyncRedisClient(client)
