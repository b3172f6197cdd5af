"""Redis fixtures: a standalone server and a 3-node Redis Cluster, each started once per run.

Servers come from :mod:`tests.plugins.redis_server` (environment URL, else Docker, else
the local ``redis-server``). Stores are per test, each under its own key prefix, so
tests never see each other's sessions; the prefix's keys are removed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from contextledger.errors import StoreUnavailable
from contextledger.stores.redis import RedisStore
from tests.plugins import unavailable
from tests.plugins.redis_server import RedisServer, redis_cluster, redis_server


def _start(start: Callable[[], RedisServer], what: str) -> RedisServer:
    try:
        return start()
    except StoreUnavailable as exc:
        unavailable(f"{what} could not be started: {exc}")


@pytest.fixture(scope="session")
def redis_server_handle() -> Iterator[RedisServer]:
    """The standalone Redis of this run (stopped at the end)."""
    server = _start(redis_server, "Redis")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster_handle() -> Iterator[RedisServer]:
    """The Redis Cluster of this run (stopped at the end)."""
    server = _start(redis_cluster, "Redis Cluster")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server_handle: RedisServer) -> str:
    """URL of the standalone Redis."""
    return redis_server_handle.url


@pytest.fixture(scope="session")
def redis_cluster_url(redis_cluster_handle: RedisServer) -> str:
    """``redis+cluster://`` URL of the Redis Cluster."""
    return redis_cluster_handle.url


@pytest.fixture
def redis_key_prefix() -> str:
    """A key prefix no other test uses."""
    return f"cltest-{uuid.uuid4().hex[:12]}"


def purge_prefix(client: Redis | RedisCluster, prefix: str) -> int:
    """Delete every key a store with ``prefix`` can have written (on every node)."""
    removed = 0
    for pattern in (f"{{{prefix}:*", f"{prefix}:*"):
        keys = list(client.scan_iter(match=pattern, count=500))
        for key in keys:
            removed += int(client.delete(key))
    return removed


def purge(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` on the server (or cluster) at ``url``."""
    scheme, _, rest = url.partition("://")
    client: Redis | RedisCluster
    if scheme.endswith("+cluster"):
        client = RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    else:
        client = Redis.from_url(url)
    try:
        purge_prefix(client, prefix)
    finally:
        client.close()


def _store(url: str, prefix: str) -> Iterator[RedisStore]:
    store = RedisStore.from_url(url, key_prefix=prefix)
    try:
        yield store
    finally:
        store.close()
        purge(url, prefix)


@pytest.fixture
def redis_store(redis_url: str, redis_key_prefix: str) -> Iterator[RedisStore]:
    """A fresh store on the standalone Redis."""
    yield from _store(redis_url, redis_key_prefix)


@pytest.fixture
def redis_cluster_store(redis_cluster_url: str, redis_key_prefix: str) -> Iterator[RedisStore]:
    """A fresh store on the Redis Cluster."""
    yield from _store(redis_cluster_url, redis_key_prefix)
