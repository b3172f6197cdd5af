"""The name the Redis store gives the server, and what making a connection costs for it."""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis import DriverInfo, Redis
from redis.cluster import RedisCluster

import contextledger
from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.asend import NativeSend
from tests.plugins.redis import purge

NAME = f"redis-py(contextledger_v{contextledger.__version__})"


@pytest.fixture
def options(redis_url: str, redis_key_prefix: str) -> Iterator[dict[str, Any]]:
    """The options of a fresh ledger on the test server (its keys removed after)."""
    yield {"key_prefix": redis_key_prefix}
    purge(redis_url, redis_key_prefix)


def _store(ledger: Ledger) -> RedisStore:
    store = ledger.store
    assert isinstance(store, RedisStore)
    return store


def _kwargs(client: Redis | RedisCluster) -> dict[str, Any]:
    """What the client's connections are made with (a cluster: its nodes')."""
    if isinstance(client, RedisCluster):
        kwargs: dict[str, Any] = client.nodes_manager.connection_kwargs
        return kwargs
    return client.get_connection_kwargs()


@pytest.mark.parametrize("scheme", ["redis", "redis_cluster"])
def test_the_store_names_contextledger_as_redis_pys_upstream_driver(
    scheme: str, request: pytest.FixtureRequest, redis_key_prefix: str
) -> None:
    url = request.getfixturevalue(f"{scheme}_url")
    with Ledger.connect(url, key_prefix=redis_key_prefix) as ledger:
        client = _store(ledger).client
        info = _kwargs(client)["driver_info"]
        assert info.formatted_name == NAME
        assert info.lib_version == redis.__version__
        seen = client.client_info() if isinstance(client, Redis) else None
        if seen is not None and "lib-name" in seen:  # Redis 7.2 and later record CLIENT SETINFO
            assert seen["lib-name"] == NAME
            assert seen["lib-ver"] == redis.__version__
    purge(url, redis_key_prefix)


def test_a_name_the_caller_gives_wins(redis_url: str, options: dict[str, Any]) -> None:
    own = DriverInfo().add_upstream_driver("myagents", "1.0")
    with Ledger.connect(redis_url, driver_info=own, **options) as ledger:
        assert _kwargs(_store(ledger).client)["driver_info"] is own


@pytest.fixture
def no_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any look-up of an installed package's metadata fails the test (redis-py's own, per connection)."""

    def looked_up(name: str) -> Any:
        raise AssertionError(f"package metadata of {name!r} looked up")

    monkeypatch.setattr(importlib.metadata, "version", looked_up)
    monkeypatch.setattr(importlib.metadata, "distribution", looked_up)


def test_new_connections_look_nothing_up(redis_url: str, options: dict[str, Any], no_metadata: None) -> None:
    """A pool growing (threads, a burst of agents) makes each connection without reading package metadata."""
    with Ledger.connect(redis_url, **options) as ledger:
        client = _store(ledger).client
        assert isinstance(client, Redis)
        pool = client.connection_pool
        held = [pool.get_connection() for _ in range(4)]  # four at once: each a new connection
        assert len({id(c) for c in held}) == 4
        for connection in held:
            pool.release(connection)
        ledger.conversation("pool").append(Message.user("hello"))


def test_the_native_async_sends_connections_look_nothing_up_and_carry_the_name(
    redis_url: str, options: dict[str, Any], no_metadata: None
) -> None:
    async def main() -> list[str]:
        async with await AsyncLedger.connect(redis_url, native=True, **options) as ledger:
            conversations = [await ledger.conversation(f"burst-{n}") for n in range(4)]
            for conversation in conversations:  # made (the first commit of each is not a native one)
                await conversation.append(Message.user("first"))
            send = ledger._native  # the ledger's own sender, read, never replaced
            assert isinstance(send, NativeSend)
            sent = send.sent
            # At once: each task takes a connection of the loop's own, made for it when none is idle.
            await asyncio.gather(*(c.append(Message.user(f"m{n}")) for n, c in enumerate(conversations)))
            assert send.sent == sent + 4
            made = [c for idle in send._clients.values() for c in idle]
            return [str(c.driver_info.formatted_name) if c.driver_info else "" for c in made]

    names = asyncio.run(main())
    assert len(names) >= 4
    assert set(names) == {NAME}
