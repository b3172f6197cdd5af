"""Retention: whole idle sessions expire (every backend, and the CLI); a Redis ttl says SessionExpired."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from contextledger import Ledger, Message
from contextledger.errors import ConfigurationError, SessionDeleted, SessionExpired
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import CompleteStore, complete
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys
from contextledger.testing.transfer import rich_conversation
from tests.cli.conftest import Invoke
from tests.plugins.redis import purge


def test_expire_removes_idle_sessions_only_and_keeps_expiries(store: CompleteStore) -> None:
    ledger = Ledger(store)
    idle = ledger.conversation("idle")
    idle.append(Message.user("old news"))
    ledger.conversation("idle", "helper").append(Message.user("also old"))
    time.sleep(0.05)
    cutoff = utcnow()
    time.sleep(0.05)
    ledger.conversation("busy").append(Message.user("written after the cut-off"))
    assert [e.session_id for e in ledger.expire(idle=cutoff, dry_run=True)] == ["idle", "idle"]
    assert ledger.agents("idle") == ["default", "helper"]  # a dry run changes nothing
    expired = ledger.expire(idle=cutoff)
    assert sorted((e.session_id, e.agent_id) for e in expired) == [("idle", "default"), ("idle", "helper")]
    assert all(e.last_write < cutoff <= e.expired_at for e in expired)
    assert ledger.agents("idle") == []
    assert [i.session_id for i in ledger.sessions()] == ["busy"]
    assert [e.agent_id for e in ledger.expirations("idle")] == ["default", "helper"]
    with pytest.raises(SessionExpired, match="expired"):
        idle.append(Message.user("still there?"))
    again = ledger.conversation("idle")  # starts afresh
    assert again.version == 0
    assert list(again.view) == []
    again.append(Message.user("new start"))
    assert ledger.expire(idle=timedelta(days=1)) == []
    with pytest.raises(ConfigurationError):
        ledger.expire(idle=timedelta(0))


def test_cli_prune_idle_asks_lists_and_expires(invoke: Invoke, sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        ledger.conversation("a").append(Message.user("one"))
        ledger.conversation("b").append(Message.user("two"))
    dry = invoke("prune", "--idle", "0s", "--dry-run", "--url", sqlite_url)
    assert dry.exit_code == 0, dry.output
    assert "would expire 2 session(s)" in dry.stdout
    declined = invoke("prune", "--idle", "0s", "--url", sqlite_url, input="n\n")
    assert declined.exit_code == 1
    assert "nothing expired" in declined.output
    with Ledger.connect(sqlite_url) as ledger:
        assert len(ledger.sessions()) == 2
    kept = invoke("prune", "--idle", "30d", "--yes", "--url", sqlite_url)
    assert kept.exit_code == 0, kept.output
    assert "expired 0 sessions" in kept.stdout
    done = invoke("prune", "--idle", "0s", "--yes", "--url", sqlite_url)
    assert done.exit_code == 0, done.output
    assert "expired 2 session(s) (2 conversations)" in done.stdout
    with Ledger.connect(sqlite_url) as ledger:
        assert ledger.sessions() == []
        assert [e.reason.startswith("idle since before") for e in ledger.expirations("a")] == [True]
    neither = invoke("prune", "--url", sqlite_url)
    assert neither.exit_code == 2


@pytest.fixture(params=["redis", "redis_cluster"])
def redis_any(request: pytest.FixtureRequest, redis_key_prefix: str) -> Iterator[str]:
    """A Redis (or Cluster) URL; the keys under the test's prefix are removed afterwards."""
    value: str = request.getfixturevalue(f"{request.param}_url")
    yield value
    purge(value, redis_key_prefix)


def _client(url: str) -> Redis | RedisCluster:
    if url.startswith("redis+cluster://"):
        return RedisCluster.from_url(url.replace("redis+cluster://", "redis://", 1))
    return Redis.from_url(url)


def _wait_gone(ledger: Ledger, session: str) -> None:
    deadline = time.monotonic() + 10
    while ledger.store.load(session, "default") is not None:
        assert time.monotonic() < deadline, "the conversation did not expire"
        time.sleep(0.05)


def test_an_agent_idle_longer_than_the_ttl_is_told_its_session_expired(redis_any: str, redis_key_prefix: str) -> None:
    with Ledger.connect(redis_any, key_prefix=redis_key_prefix, ttl=timedelta(milliseconds=300)) as ledger:
        chat = ledger.conversation("s")
        chat.append(Message.user("hello"))
        _wait_gone(ledger, "s")
        with pytest.raises(SessionExpired, match="ttl"):
            chat.append(Message.user("I am back"))
        fresh = ledger.conversation("s")  # starts afresh
        assert fresh.version == 0
        fresh.append(Message.user("a new start"))
        assert [e.message.plain_text for e in ledger.conversation("s").view] == ["a new start"]
        # deleted, not expired: the writer is told so
        ledger.delete_session("s")
        with pytest.raises(SessionDeleted) as deleted:
            fresh.append(Message.user("after the delete"))
        assert not isinstance(deleted.value, SessionExpired)


def test_import_and_copy_into_a_ttl_ledger_give_the_indexes_an_expiry(redis_any: str, redis_key_prefix: str) -> None:
    client = _client(redis_any)
    cluster = redis_any.startswith("redis+cluster://")
    with Ledger.connect("memory://") as source:
        records = rich_conversation(complete(source.store, "tests"), "s", "a")
        with Ledger.connect(redis_any, key_prefix=redis_key_prefix, ttl=60) as target:
            assert target.import_records(records) == "imported"
            source.conversation("copied").append(Message.user("copied in"))
            source.copy_to(target, ["copied"])
            for session in ("s", "copied"):
                index = SessionKeys.of(redis_key_prefix, session)
                assert 0 < int(client.pttl(index.agents)) <= 60_000, session
                agent = "a" if session == "s" else "default"
                slot = ConversationKeys.of(redis_key_prefix, session, agent).slot
                listing = SessionKeys.slot_index(redis_key_prefix, slot) if cluster else index.sessions
                assert 0 < int(client.pttl(listing)) <= 60_000, session
            if cluster:
                assert 0 < int(client.pttl(SessionKeys.slots(redis_key_prefix))) <= 60_000
            assert {i.session_id for i in target.sessions()} == {"s", "copied"}


def test_the_slot_set_of_a_ttl_cluster_ledger_expires_with_its_writes(
    redis_cluster_url: str, redis_key_prefix: str
) -> None:
    client = _client(redis_cluster_url)
    try:
        with Ledger.connect(redis_cluster_url, key_prefix=redis_key_prefix, ttl=timedelta(milliseconds=400)) as ledger:
            ledger.conversation("s").append(Message.user("hello"))
            slots = SessionKeys.slots(redis_key_prefix)
            assert 0 < int(client.pttl(slots)) <= 400
            _wait_gone(ledger, "s")
            deadline = time.monotonic() + 10
            while client.exists(slots):
                assert time.monotonic() < deadline, "the slot set never expired"
                time.sleep(0.05)
            assert ledger.sessions() == []
    finally:
        purge(redis_cluster_url, redis_key_prefix)
