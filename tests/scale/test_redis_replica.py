"""``durability`` on a standalone Redis with one replica, and how the option is given and checked."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from contextledger import Ledger, Message
from contextledger.errors import CommitOutcomeUnknown, ConfigurationError, InvalidLedgerURL, StoreUnavailable
from tests.plugins import unavailable
from tests.plugins.redis_replicas import ReplicatedRedis, start_primary_with_replica


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedRedis]:
    try:
        deployment = start_primary_with_replica()
    except StoreUnavailable as exc:
        unavailable(f"a Redis primary with a replica could not be started: {exc}")
    yield deployment
    deployment.stop()


def _message(n: int) -> Message:
    return Message.user(f"message {n}", message_id=f"m{n}")


def _wait_in_sync(pair: ReplicatedRedis, primary: int, replica: int) -> None:
    deadline = time.monotonic() + 30
    while replica not in pair.replicas_of(primary):
        assert time.monotonic() < deadline, "the replica did not come back"
        time.sleep(0.1)


def test_a_commit_no_replica_acknowledged_is_unknown_then_settled_once(pair: ReplicatedRedis) -> None:
    primary, replica = pair.processes  # started in that order
    with Ledger.connect(f"{pair.url}?durability=replicated", key_prefix="settle", replica_timeout=0.3) as ledger:
        assert ledger.store.durability == "replicated"  # type: ignore[attr-defined]
        conversation = ledger.conversation("s")
        conversation.append(_message(1))
        pair.cut_off(primary, replica)
        try:
            started = time.monotonic()
            with pytest.raises(CommitOutcomeUnknown) as raised:
                conversation.append(_message(2))
            assert time.monotonic() - started < 5  # the WAIT timeout, not a hang
            assert "replica" in str(raised.value)
        finally:
            pair.resume(replica)
        _wait_in_sync(pair, primary, replica)
        conversation.append(_message(3))  # settles m2 first: sent again under its id, applied once
        ids = [h.message.message_id for h in ledger.history("s")]
    assert ids == ["m1", "m2", "m3"]
    with pair.client(replica) as client:  # what the replica holds: the settled commit too
        assert client.hget("{settle:s:default}:state", "version") == "3"


def test_the_default_acknowledges_without_a_replica(pair: ReplicatedRedis) -> None:
    primary, replica = pair.processes  # started in that order
    with Ledger.connect(pair.url, key_prefix="plain") as ledger:
        assert ledger.store.durability == "primary"  # type: ignore[attr-defined]
        conversation = ledger.conversation("s")
        pair.cut_off(primary, replica)
        try:
            conversation.append(_message(1))  # acknowledged by the primary alone
        finally:
            pair.resume(replica)
        _wait_in_sync(pair, primary, replica)
        assert [h.message.message_id for h in ledger.history("s")] == ["m1"]


@pytest.mark.parametrize(
    ("url", "options", "error"),
    [
        ("redis://127.0.0.1:1/0?durability=sometimes", {}, ConfigurationError),
        ("redis://127.0.0.1:1/0?durability=replicated&durability=primary", {}, ConfigurationError),
        ("redis://127.0.0.1:1/0?durability=replicated", {"durability": "primary"}, ConfigurationError),
        ("redis://127.0.0.1:1/0", {"durability": "replicated", "replica_timeout": 0}, ConfigurationError),
        ("redis://127.0.0.1:1/0", {"durability": "replicated", "replicas": 0}, ConfigurationError),
        ("sqlite:///never.db", {"durability": "replicated"}, ConfigurationError),
        ("memory://", {"durability": "sometimes"}, ConfigurationError),
    ],
)
def test_bad_durability_options_are_refused_before_connecting(
    url: str, options: dict[str, object], error: type[Exception]
) -> None:
    # port 1 answers nothing: the option is refused before any connection is tried
    with pytest.raises(error) as raised:
        Ledger.connect(url, **options)
    assert not isinstance(raised.value, StoreUnavailable)
    assert not isinstance(raised.value, InvalidLedgerURL) or "durability" in str(raised.value)


def test_the_url_option_reaches_the_store_and_not_the_driver(pair: ReplicatedRedis) -> None:
    with Ledger.connect(f"{pair.url}?durability=replicated&socket_timeout=5", key_prefix="u") as ledger:
        assert ledger.store.durability == "replicated"  # type: ignore[attr-defined]
        assert "durability=replicated" in ledger.url or ledger.url.startswith("redis://")
        ledger.conversation("s").append(_message(1))


def test_a_replicated_append_is_the_script_and_wait_on_one_connection(pair: ReplicatedRedis) -> None:
    from tests.redis.test_hot_path import monitored

    with Ledger.connect(pair.url, key_prefix="hot", durability="replicated") as ledger:
        conversation = ledger.conversation("s")
        conversation.append(_message(1))  # creates the conversation, loads the script
        with monitored(pair.url) as seen:
            conversation.append(_message(2))
    from_client = [
        (f"{c['client_address']}:{c['client_port']}", c["command"].split(" ", 1)[0].upper())
        for c in seen
        if c["client_type"] != "lua"
    ]
    assert [command for _, command in from_client] == ["EVALSHA", "WAIT"]
    assert len({peer for peer, _ in from_client}) == 1  # WAIT counts the writes of its own connection


def test_the_async_api_keeps_replicated_durability(pair: ReplicatedRedis) -> None:
    """The async API runs the sync store on its worker threads: a commit is acknowledged after WAIT there too."""
    import asyncio

    from contextledger.aio import AsyncLedger

    primary, replica = pair.processes

    async def run() -> list[str]:
        ledger = await AsyncLedger.connect(pair.url, key_prefix="async", durability="replicated", replica_timeout=0.3)
        try:
            conversation = await ledger.conversation("s")
            await conversation.append(_message(1))
            pair.cut_off(primary, replica)
            try:
                with pytest.raises(CommitOutcomeUnknown):
                    await conversation.append(_message(2))
            finally:
                pair.resume(replica)
            _wait_in_sync(pair, primary, replica)
            await conversation.append(_message(3))  # settles m2 once
            return [h.message.message_id for h in await ledger.history("s")]
        finally:
            await ledger.close()

    assert asyncio.run(run()) == ["m1", "m2", "m3"]
