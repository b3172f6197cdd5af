"""Connecting: URLs, unreachable servers, passwords, and a server that goes away."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from redis import Redis

from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError, InvalidLedgerURL, StoreError, StoreUnavailable
from contextledger.ledger import Ledger
from contextledger.model.messages import Message
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.store import mask_password
from tests.plugins import unavailable
from tests.plugins.redis_server import RedisServer, start_local_redis


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def private_server() -> Iterator[RedisServer]:
    """A server of this test alone (it may be stopped or need a password)."""
    try:
        server = start_local_redis(password="s3cr3t pw")
    except StoreUnavailable as exc:
        unavailable(f"redis-server could not be started: {exc}")
    yield server
    server.stop()


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
def test_unreachable_server_raises_store_unavailable(scheme: str) -> None:
    port = _dead_port()
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}") as info:
        Ledger.connect(
            f"{scheme}://:hunter2@127.0.0.1:{port}/0" if scheme == "redis" else f"{scheme}://127.0.0.1:{port}"
        )
    assert "\n" not in str(info.value)
    assert "hunter2" not in str(info.value)
    assert info.value.__cause__ is not None


def test_ledger_connect_opens_the_redis_store(redis_url: str, redis_key_prefix: str) -> None:
    with Ledger.connect(redis_url, key_prefix=redis_key_prefix) as ledger:
        assert isinstance(ledger.store, RedisStore)
        conv = ledger.conversation("s", "a")
        conv.append(Message.user("hello"))
        assert ledger.agents("s") == ["a"]
        assert [h.message.plain_text for h in ledger.history("s", "a")] == ["hello"]
        assert ledger.delete_session("s") is True


def test_ledger_connect_opens_a_cluster(redis_cluster_url: str, redis_key_prefix: str) -> None:
    with Ledger.connect(redis_cluster_url, key_prefix=redis_key_prefix) as ledger:
        assert ledger.url == redis_cluster_url
        for n in range(20):  # sessions spread over the nodes
            ledger.conversation(f"s{n}", "a").append(Message.user(f"m{n}"))
        assert {s.session_id for s in ledger.sessions()} == {f"s{n}" for n in range(20)}
        for n in range(20):
            assert ledger.delete_session(f"s{n}") is True


def test_not_a_redis_url_is_rejected() -> None:
    with pytest.raises(InvalidLedgerURL):
        RedisStore.from_url("postgresql://127.0.0.1/x")


def test_password_is_masked_and_required(private_server: RedisServer) -> None:
    assert "s3cr3t" in private_server.url  # percent-encoded, as URLs carry it
    store = RedisStore.from_url(private_server.url, key_prefix="pw")
    try:
        assert "s3cr3t" not in store.url
        assert "***" in store.url
        assert "s3cr3t" not in repr(store)
        store.load("s", "a")
    finally:
        store.close()
    wrong = private_server.url.replace("s3cr3t%20pw", "wrong")
    with pytest.raises(StoreUnavailable) as info:
        RedisStore.from_url(wrong)
    assert "wrong" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://:pw@h:1/0", "redis://:***@h:1/0"),
        ("redis://user:pw@h/0", "redis://user:***@h/0"),
        ("redis://h:1/0", "redis://h:1/0"),
        ("rediss://u:p%40ss@[::1]:6380", "rediss://u:***@[::1]:6380"),
    ],
)
def test_mask_password(url: str, masked: str) -> None:
    assert mask_password(url) == masked


def test_server_going_away_raises_store_unavailable_and_loses_nothing(private_server: RedisServer) -> None:
    store = RedisStore.from_url(private_server.url, key_prefix="gone", socket_timeout=2)
    try:
        with Ledger(store) as ledger:
            conv = ledger.conversation("s", "a")
            conv.append(Message.user("kept"))
            private_server.stop()
            with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1"):
                conv.append(Message.user("lost"))
            with pytest.raises(StoreUnavailable):
                store.load("s", "a")
            # the conversation object still holds what was committed
            assert [m.plain_text for m in conv.messages] == ["kept"]
            assert issubclass(StoreUnavailable, StoreError)
    finally:
        store.close()


def test_unknown_option_is_a_configuration_error(redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match="option"):
        Ledger.connect(redis_url, auto_upgrade=True)


def test_wrapping_a_client(redis_url: str, redis_key_prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="decode_responses"):
        RedisStore(Redis.from_url(redis_url, decode_responses=True))
    store = RedisStore(Redis.from_url(redis_url), key_prefix=redis_key_prefix)
    try:
        assert store.url == f"redis://{redis_url.split('://')[1].split('/')[0]}"
        store.commit(Changeset(session_id="s", agent_id="a", expected_version=0, model_call_count=2))
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.state.model_call_count == 2
        assert store.delete_session("s") is True
    finally:
        store.close()


@pytest.mark.parametrize("url", ["redis://127.0.0.1:notaport/0", "redis://127.0.0.1:99999/0"])
def test_malformed_url_is_a_typed_error(url: str) -> None:
    with pytest.raises(InvalidLedgerURL, match="Port"):
        Ledger.connect(url)


@pytest.mark.parametrize("path", ["/myapp", "/0/extra", "/1x"])
def test_a_path_that_is_not_a_database_number_is_refused(redis_url: str, path: str) -> None:
    # redis-py ignores such a path and connects to database 0; a typo must not do that silently.
    base = redis_url.rsplit("/", 1)[0]
    with pytest.raises(InvalidLedgerURL, match="the path names the database number"):
        Ledger.connect(base + path)


@pytest.mark.parametrize("path", ["", "/", "/0", "/3"])
def test_database_number_paths_are_accepted(redis_url: str, redis_key_prefix: str, path: str) -> None:
    base = redis_url.rsplit("/", 1)[0]
    with Ledger.connect(base + path, key_prefix=redis_key_prefix) as ledger:
        assert ledger.agents("nothing") == []
