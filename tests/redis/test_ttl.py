"""``ttl=`` on a Redis ledger: every key of a conversation expires together, refreshed by each commit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.errors import ConfigurationError
from contextledger.history.transfer import read_conversation
from contextledger.stores.capabilities import complete
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys
from contextledger.testing.transfer import rich_conversation
from tests.plugins.redis import purge

TTL = 120.0  # seconds: long enough never to expire during a test that checks the expiry


@pytest.fixture(params=["redis", "redis_cluster"])
def url(request: pytest.FixtureRequest, redis_key_prefix: str) -> Iterator[str]:
    """A Redis (or Cluster) URL; the keys under the test's prefix are removed afterwards."""
    value: str = request.getfixturevalue(f"{request.param}_url")
    yield value
    purge(value, redis_key_prefix)


def _client(url: str) -> Redis | RedisCluster:
    if url.startswith("redis+cluster://"):
        return RedisCluster.from_url(url.replace("redis+cluster://", "redis://", 1))
    return Redis.from_url(url)


def _pttls(client: Redis | RedisCluster, prefix: str, session: str, agent: str = "default") -> dict[str, int]:
    """The remaining time to live (ms) of every existing key of the conversation."""
    keys = ConversationKeys.of(prefix, session, agent)
    out = {}
    for key in keys.all:
        if client.exists(key):
            out[key.rsplit(":", 1)[1]] = int(client.pttl(key))
    return out


def _assert_all_expire(pttls: dict[str, int], at_least: float = TTL - 30) -> None:
    assert pttls
    for part, left in pttls.items():
        assert at_least * 1000 <= left <= TTL * 1000, (part, left)


def test_every_key_carries_the_ttl_after_each_kind_of_write(url: str, redis_key_prefix: str) -> None:
    client = _client(url)
    with Ledger.connect(url, key_prefix=redis_key_prefix, ttl=TTL) as ledger:
        conv = ledger.conversation("s")
        first, second, *_ = conv.append(*(Message.user(f"u{i}") for i in range(6)))
        pttls = _pttls(client, redis_key_prefix, "s")
        assert set(pttls) >= {"state", "msg", "content", "active", "cs"}
        _assert_all_expire(pttls)
        # shorten every key, then each kind of commit gives all of them the full ttl again
        writes: list[Callable[[], object]] = [
            lambda: conv.append(Message.assistant("more")),
            lambda: conv.pin(second.message_id),
            lambda: conv.apply_plan(
                lambda _v: ReductionPlan(
                    strategy="summarizing",
                    summary=SummaryDraft(content="sum", summarizer="x", replaces=(first.message_id,)),
                ),
                trigger="manual",
            ),
            lambda: conv.unpin(second.message_id),
        ]
        for write in writes:
            for key in ConversationKeys.of(redis_key_prefix, "s", "default").all:
                client.pexpire(key, 5_000)
            write()
            _assert_all_expire(_pttls(client, redis_key_prefix, "s"))
        assert set(_pttls(client, redis_key_prefix, "s")) >= {"pins", "sum", "red", "mut"}
        agents = SessionKeys.of(redis_key_prefix, "s").agents
        assert 0 < client.pttl(agents) <= TTL * 1000


def test_a_read_does_not_refresh_the_ttl(url: str, redis_key_prefix: str) -> None:
    client = _client(url)
    with Ledger.connect(url, key_prefix=redis_key_prefix, ttl=TTL) as ledger:
        ledger.conversation("s").append(Message.user("hi"))
        for key in ConversationKeys.of(redis_key_prefix, "s", "default").all:
            client.pexpire(key, 50_000)
        ledger.conversation("s")
        ledger.history("s")
        ledger.sessions()
        assert all(left <= 50_000 for left in _pttls(client, redis_key_prefix, "s").values())


def test_an_expired_conversation_is_gone_and_unlisted(url: str, redis_key_prefix: str) -> None:
    client = _client(url)
    with Ledger.connect(url, key_prefix=redis_key_prefix, ttl=timedelta(milliseconds=400)) as ledger:
        ledger.conversation("old").append(Message.user("forget me"))
        deadline = time.monotonic() + 10
        while ledger.store.load("old", "default") is not None:
            assert time.monotonic() < deadline, "the conversation did not expire"
            time.sleep(0.1)
        assert ledger.agents("old") == []
        assert _pttls(client, redis_key_prefix, "old") == {}
        # the next commit cleans the sessions index it writes to
        ledger.conversation("new").append(Message.user("hello"))
        assert [i.session_id for i in ledger.sessions()] == ["new"]
        index = (
            SessionKeys.slot_index(redis_key_prefix, ConversationKeys.of(redis_key_prefix, "new", "default").slot)
            if url.startswith("redis+cluster://")
            else SessionKeys.index(redis_key_prefix)
        )
        members = {bytes(m).decode() for m in cast(list[bytes], client.zrange(index, 0, -1))}
        assert "new" in members
        if ConversationKeys.of(redis_key_prefix, "old", "default").slot == ConversationKeys.of(
            redis_key_prefix, "new", "default"
        ).slot or not url.startswith("redis+cluster://"):
            assert "old" not in members
        assert 0 < client.pttl(index) <= 400


def test_an_import_and_an_erase_keep_every_key_expiring(url: str, redis_key_prefix: str) -> None:
    client = _client(url)
    with Ledger.connect(url, key_prefix=redis_key_prefix) as plain:
        records = rich_conversation(complete(plain.store, "tests"), "s", "a")
        plain.delete_session("s")
    with Ledger.connect(url, key_prefix=redis_key_prefix, ttl=TTL) as ledger:
        assert ledger.import_records(records) == "imported"
        _assert_all_expire(_pttls(client, redis_key_prefix, "s", "a"))
        assert read_conversation(ledger.store, "s", "a") == records
        client.delete(ConversationKeys.of(redis_key_prefix, "s", "a").mut)  # as if it had never been written
        entry = next(h for h in records.messages if h.status == "active").message.message_id
        ledger.erase("s", entry, reason="gdpr")
        _assert_all_expire(_pttls(client, redis_key_prefix, "s", "a"))
        assert "mut" in _pttls(client, redis_key_prefix, "s", "a")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), timedelta(0), "60", True])
def test_a_bad_ttl_is_a_configuration_error(redis_url: str, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="ttl"):
        Ledger.connect(redis_url, ttl=bad)


def test_ttl_on_another_backend_is_a_configuration_error(tmp_path: Path) -> None:
    for url in (f"sqlite:///{tmp_path / 'x.db'}", "memory://"):
        with pytest.raises(ConfigurationError, match="Redis only"):
            Ledger.connect(url, ttl=60)
        with pytest.raises(ConfigurationError, match="Redis only"):
            asyncio.run(AsyncLedger.connect(url, ttl=60))
    with Ledger.connect("memory://", ttl=None) as ledger:  # no ttl is fine anywhere
        assert ledger.sessions() == []
    assert not (tmp_path / "x.db").exists()


def test_the_async_api_takes_ttl(redis_url: str, redis_key_prefix: str) -> None:
    async def run() -> int:
        ledger = await AsyncLedger.connect(redis_url, key_prefix=redis_key_prefix, ttl=TTL)
        async with ledger:
            conv = await ledger.conversation("s")
            await conv.append(Message.user("hi"))
        return int(_client(redis_url).pttl(ConversationKeys.of(redis_key_prefix, "s", "default").state))

    try:
        assert 0 < asyncio.run(run()) <= TTL * 1000
    finally:
        purge(redis_url, redis_key_prefix)
