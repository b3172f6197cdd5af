"""Fixtures for the Redis store's own tests: each runs on a single server and on Cluster."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from contextledger.stores.redis import RedisStore

RawClient = Redis | RedisCluster


@dataclass
class Backend:
    """A store, a raw client on the same server(s), and the store's key prefix."""

    name: str
    url: str
    store: RedisStore
    client: RawClient
    prefix: str

    @property
    def cluster(self) -> bool:
        return self.name == "redis_cluster"

    def slots_in_use(self) -> set[int]:
        """On Cluster, the slots listed as holding a session index (the one key a deletion keeps)."""
        return {int(s) for s in self.client.smembers(f"{self.prefix}:session-slots")}

    def stored_keys_but_slot_list(self) -> list[bytes]:
        """Every key the store wrote except the list of slots in use, which is never shrunk."""
        return [k for k in self.stored_keys() if k != f"{self.prefix}:session-slots".encode()]

    def stored_keys(self) -> list[bytes]:
        """Every key the store wrote (all nodes)."""
        found: set[bytes] = set()
        for pattern in (f"{{{self.prefix}:*", f"{self.prefix}:*"):
            found.update(self.client.scan_iter(match=pattern, count=500))
        return sorted(found)

    def dump(self) -> dict[bytes, Any]:
        """The full content of every key, for before/after comparisons."""
        out: dict[bytes, Any] = {}
        for key in self.stored_keys():
            kind = self.client.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind == "hash":
                out[key] = ("hash", dict(self.client.hgetall(key)))
            elif kind == "zset":
                out[key] = ("zset", self.client.zrange(key, 0, -1, withscores=True))
            elif kind == "list":
                out[key] = ("list", self.client.lrange(key, 0, -1))
            elif kind == "set":
                out[key] = ("set", set(self.client.smembers(key)))
            else:
                out[key] = (kind, self.client.get(key))
        return out


def raw_client(url: str) -> RawClient:
    scheme, _, rest = url.partition("://")
    if scheme.endswith("+cluster"):
        return RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    return Redis.from_url(url)


@pytest.fixture(params=["redis", "redis_cluster"])
def backend(request: pytest.FixtureRequest, redis_key_prefix: str) -> Iterator[Backend]:
    """The Redis store on a single server, then on Cluster, with a raw client beside it."""
    name = request.param
    store: RedisStore = request.getfixturevalue(f"{name}_store")
    url: str = request.getfixturevalue(f"{name}_url")
    client = raw_client(url)
    try:
        yield Backend(name=name, url=url, store=store, client=client, prefix=store.key_prefix)
    finally:
        client.close()
