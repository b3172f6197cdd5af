"""Hot paths, observed with MONITOR on the server(s): what one append and one restore cost."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.model.messages import Message
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys


@contextmanager
def monitored(url: str) -> Iterator[list[dict[str, Any]]]:
    """Collect every command the server runs inside the block (scripts' commands included)."""
    seen: list[dict[str, Any]] = []
    watcher = Redis.from_url(url, decode_responses=True)
    poker = Redis.from_url(url)
    poker.ping()  # connect now, so its handshake is not seen inside the block
    try:
        with watcher.monitor() as monitor:  # type: ignore[no-untyped-call]
            yield seen
            sentinel = f"end-of-block-{uuid.uuid4().hex}"
            poker.echo(sentinel)
            for _ in range(100_000):
                command = monitor.next_command()
                if sentinel in command["command"]:
                    break
                seen.append(command)
    finally:
        watcher.close()
        poker.close()


@contextmanager
def monitored_cluster(url: str) -> Iterator[list[dict[str, Any]]]:
    """Collect every command any primary of the cluster at ``url`` runs inside the block."""
    scheme, _, rest = url.partition("://")
    probe = RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    try:
        nodes = [f"redis://{node.host}:{node.port}" for node in probe.get_primaries()]  # type: ignore[no-untyped-call]
    finally:
        probe.close()
    seen: list[dict[str, Any]] = []
    with ExitStack() as stack:
        per_node = [stack.enter_context(monitored(node)) for node in nodes]
        yield seen
    for commands in per_node:
        seen.extend(commands)


def _from_client(commands: list[dict[str, Any]]) -> list[str]:
    return [c["command"].split(" ", 1)[0].upper() for c in commands if c["client_type"] != "lua"]


def _from_scripts(commands: list[dict[str, Any]]) -> list[str]:
    return [c["command"] for c in commands if c["client_type"] == "lua"]


def _conversation(store: RedisStore, session_id: str, *, evicted: int, window: int) -> tuple[Conversation, list[str]]:
    conv = Conversation(store, session_id, "a")
    msgs = [Message.user(f"old {i}") for i in range(evicted)] + [Message.user(f"live {i}") for i in range(window)]
    conv.append(*msgs)
    if evicted:
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=tuple(v.ids[:evicted])), trigger="manual")
    conv.pin(conv.view[0].entry_id)
    return conv, [m.message_id for m in msgs[:evicted]]


def test_restore_reads_only_the_window(redis_store: RedisStore, redis_url: str) -> None:
    window = 12
    _conversation(redis_store, "small", evicted=0, window=window)
    _, evicted_ids = _conversation(redis_store, "large", evicted=2_000, window=window)
    redis_store.load("small", "a")  # the script is loaded and cached from here on

    with monitored(redis_url) as small:
        snap_small = redis_store.load("small", "a")
    with monitored(redis_url) as large:
        snap_large = redis_store.load("large", "a")

    assert snap_small is not None
    assert snap_large is not None
    assert len(snap_large.entries) == len(snap_small.entries) == window
    assert snap_large.entries[0].pinned
    # one round trip, and the same work whatever the evicted history holds
    assert _from_client(small) == _from_client(large) == ["EVALSHA"]
    small_ops = [c.split(" ", 1)[0] for c in _from_scripts(small)]
    large_ops = [c.split(" ", 1)[0] for c in _from_scripts(large)]
    assert small_ops == large_ops
    assert set(large_ops) <= {"HGETALL", "ZRANGE", "HMGET"}
    script_text = "\n".join(_from_scripts(large))
    assert not [i for i in evicted_ids if i in script_text]
    # the only whole-key read is the state hash
    assert [c for c in _from_scripts(large) if c.startswith("HGETALL") and not c.endswith(":state")] == []


def test_append_is_one_round_trip(redis_store: RedisStore, redis_url: str) -> None:
    conv = Conversation(redis_store, "hot", "a")
    conv.append(Message.user("first"))  # creates the conversation and caches the script
    for turn in range(3):
        with monitored(redis_url) as commands:
            conv.append(Message.user(f"turn {turn}"), Message.assistant(f"answer {turn}"))
        assert _from_client(commands) == ["EVALSHA"]
    snap = redis_store.load("hot", "a")
    assert snap is not None
    assert len(snap.entries) == 7


@pytest.mark.parametrize("evicted", [0, 300])
def test_a_reduction_touches_only_what_it_changes(redis_store: RedisStore, redis_url: str, evicted: int) -> None:
    conv, evicted_ids = _conversation(redis_store, f"r{evicted}", evicted=evicted, window=6)
    victim = conv.view[1].entry_id
    with monitored(redis_url) as commands:
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(victim,)), trigger="manual")
    assert _from_client(commands) == ["EVALSHA"]
    script_text = "\n".join(_from_scripts(commands))
    assert not [i for i in evicted_ids if i in script_text]
    assert not [c for c in _from_scripts(commands) if c.split(" ", 1)[0] in {"HGETALL", "HKEYS", "HVALS", "LRANGE"}]


def test_a_large_window_loads_in_order(backend_store: RedisStore) -> None:
    # wider than one HMGET chunk of the load script
    conv = Conversation(backend_store, "wide", "a")
    msgs = [Message.user(f"m{i}") for i in range(1_100)]
    conv.append(*msgs)
    conv.apply_plan(
        lambda v: ReductionPlan(
            strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=tuple(v.ids[:300]))
        ),
        trigger="manual",
    )
    conv.pin(msgs[700].message_id)
    snap = backend_store.load("wide", "a")
    assert snap is not None
    assert [e.entry_id for e in snap.entries][1:] == [m.message_id for m in msgs[300:]]
    assert snap.entries[0].kind == "summary"
    assert [e.entry_id for e in snap.entries if e.pinned] == [msgs[700].message_id]
    assert list(snap.entries) == list(conv.view.entries)


@pytest.fixture(params=["redis", "redis_cluster"])
def backend_store(request: pytest.FixtureRequest) -> RedisStore:
    store: RedisStore = request.getfixturevalue(f"{request.param}_store")
    return store


HANDSHAKE = {"HELLO", "CLIENT", "AUTH", "SELECT", "READONLY", "PING"}


def test_cluster_append_is_one_round_trip(redis_cluster_store: RedisStore, redis_cluster_url: str) -> None:
    store = redis_cluster_store
    conv = Conversation(store, "hot", "a")
    with monitored_cluster(redis_cluster_url) as creation:
        conv.append(Message.user("first"))
    # creating a conversation lists its agent (before and after the script) and its slot
    sent = [c for c in _from_client(creation) if c not in HANDSHAKE]
    assert sent.count("SADD") == 3
    assert set(sent) <= {"SADD", "EVALSHA", "SCRIPT"}  # SCRIPT LOAD when the node lacked it
    conv.append(Message.user("warm"))
    slot_index = SessionKeys.slot_index(store.key_prefix, ConversationKeys.of(store.key_prefix, "hot", "a").slot)
    for turn in range(3):
        with monitored_cluster(redis_cluster_url) as commands:
            conv.append(Message.user(f"turn {turn}"), Message.assistant(f"answer {turn}"))
        assert _from_client(commands) == ["EVALSHA"]
        with monitored_cluster(redis_cluster_url) as state_only:
            conv.before_model_call()
        assert _from_client(state_only) == ["EVALSHA"]
        # the script itself moves the session up in its slot's index
        zadds = [c for c in _from_scripts(state_only) if c.startswith("ZADD")]
        assert len(zadds) == 1
        assert zadds[0].startswith(f"ZADD {slot_index} GT ")
        assert zadds[0].endswith(" hot")
    snap = store.load("hot", "a")
    assert snap is not None
    assert len(snap.entries) == 8
    listed = store.sessions()
    assert [s.session_id for s in listed] == ["hot"]
    assert listed[0].updated_at == snap.state.updated_at
