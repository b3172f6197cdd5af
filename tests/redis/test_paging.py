"""A page of Redis history reads the page, observed with MONITOR, and the seq index stays whole.

Every message of a conversation is in its ``seq`` sorted set; these tests count what a page
reads (one script, the page's records only), and check after each operation that writes
messages -- commit, import, prune, erase, re-seal, delete, expire -- that the index holds
exactly the conversation's messages by seq. A conversation written before the index existed
is indexed by its first page read.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from contextledger import Ledger, Message
from contextledger.cli import app
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan
from contextledger.model.paging import Page
from contextledger.model.records import HistoryEntry
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys
from tests.soak import examples

from .conftest import Backend, raw_client
from .test_hot_path import _from_client, _from_scripts, monitored, monitored_cluster

HISTORY = 200
EVICTED = 50


def _watch(backend: Backend) -> AbstractContextManager[list[dict[str, Any]]]:
    return monitored_cluster(backend.url) if backend.cluster else monitored(backend.url)


def _fill(store: RedisStore, session_id: str, agent_id: str = "a") -> list[str]:
    """A conversation of HISTORY messages whose first EVICTED are evicted; the message ids in order."""
    conv = Conversation(store, session_id, agent_id)
    msgs = [Message.user(f"m{i}") for i in range(HISTORY)]
    conv.append(*msgs)
    conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=tuple(v.ids[:EVICTED])), trigger="manual")
    return [m.message_id for m in msgs]


def _records_read(commands: list[dict[str, Any]], keys: ConversationKeys) -> list[str]:
    """The message ids whose record a script read (HMGET on the msg hash)."""
    ids: list[str] = []
    for command in _from_scripts(commands):
        name, key, *args = command.split(" ")  # message ids hold no space
        if name == "HMGET" and key == keys.msg:
            ids += args
    return ids


def assert_indexed(client: Any, keys: ConversationKeys) -> None:
    """The seq index holds exactly the conversation's messages, each scored by its seq."""
    records = {k.decode(): json.loads(v) for k, v in client.hgetall(keys.msg).items()}
    index = {k.decode(): int(s) for k, s in client.zrange(keys.seq, 0, -1, withscores=True)}
    assert index == {mid: record["seq"] for mid, record in records.items()}


PAGES = [
    (Page(last=3), True),
    (Page(limit=3), True),
    (Page(limit=3), False),
    (Page(after=120, limit=5), True),
    (Page(before=60, last=4), False),
    (Page(after=10, before=20), True),
    (Page(after=10, before=20), False),
    (Page(last=0), True),
]


@pytest.mark.parametrize(("page", "include_evicted"), PAGES)
def test_a_page_reads_its_entries_only(backend: Backend, page: Page, include_evicted: bool) -> None:
    store = backend.store
    _fill(store, "long")
    keys = ConversationKeys.of(backend.prefix, "long", "a")
    whole = store.history("long", "a")
    assert len(whole) == HISTORY
    ranged = [h for h in whole if (include_evicted or h.status == "active") and page.admits(h.seq)]
    expected = page.cut(ranged)
    store.history("long", "a", page=Page(last=1))  # the script is loaded from here on

    with _watch(backend) as commands:
        got = store.history("long", "a", include_evicted=include_evicted, page=page)

    assert got == expected
    assert [c for c in _from_client(commands) if c not in {"PING"}] == ["EVALSHA"]
    read = _records_read(commands, keys)
    assert read == [h.message.message_id for h in expected]
    whole_reads = [c for c in _from_scripts(commands) if c.split(" ", 1)[0] in {"HGETALL", "HKEYS", "HVALS", "LRANGE"}]
    assert whole_reads == []


def test_without_evicted_entries_a_page_steps_over_them(redis_store: RedisStore, redis_url: str) -> None:
    _fill(redis_store, "long")
    keys = ConversationKeys.of(redis_store.key_prefix, "long", "a")
    redis_store.history("long", "a", page=Page(last=1))
    with monitored(redis_url) as commands:
        got = redis_store.history("long", "a", include_evicted=False, page=Page(limit=3))
    assert [h.seq for h in got] == [EVICTED, EVICTED + 1, EVICTED + 2]
    # the evicted entries are looked at by their eviction flag only, never their record
    assert _records_read(commands, keys) == [h.message.message_id for h in got]


def test_history_last_3_of_200_reads_3_entries_from_the_cli(redis_url: str, redis_key_prefix: str) -> None:
    # the CLI opens the default key prefix: a session id of its own keeps the test apart
    session = f"cli-{redis_key_prefix}"
    with Ledger.connect(redis_url) as ledger:
        ids = _fill(ledger.store, session, "default")  # type: ignore[arg-type]
        keys = ConversationKeys.of(ledger.store.key_prefix, session, "default")  # type: ignore[attr-defined]
        try:
            with monitored(redis_url) as commands:
                result = CliRunner().invoke(
                    app, ["history", session, "--url", redis_url, "--last", "3", "--json"], catch_exceptions=False
                )
            assert result.exit_code == 0, result.output
            shown = json.loads(result.output)
            assert [row["message"]["content"][0]["text"] for row in shown] == ["m197", "m198", "m199"]
            assert _records_read(commands, keys) == ids[-3:]
        finally:
            ledger.delete_session(session)


def _unindex(backend: Backend, keys: ConversationKeys) -> None:
    """Make the conversation look written before the index existed."""
    backend.client.delete(keys.seq)


def test_a_conversation_without_the_index_is_read_whole_until_upgraded(backend: Backend) -> None:
    store = backend.store
    ids = _fill(store, "old")
    _fill(store, "indexed")
    keys = ConversationKeys.of(backend.prefix, "old", "a")
    _unindex(backend, keys)
    # written since: only the new messages are indexed, the old ones are not
    Conversation(store, "old", "a").append(Message.user("new"))
    assert backend.client.zcard(keys.seq) == 1

    with _watch(backend) as commands:
        got = store.history("old", "a", page=Page(last=3))
    assert [h.message.plain_text for h in got] == ["m198", "m199", "new"]
    assert len(_records_read(commands, keys)) == 0  # read whole (HGETALL), not by the index
    assert backend.client.zcard(keys.seq) == 1  # a read never writes

    assert store.upgrade() == 1  # only the conversation that lacked its index
    assert_indexed(backend.client, keys)
    assert store.upgrade() == 0
    with _watch(backend) as commands:
        again = store.history("old", "a", page=Page(after=EVICTED - 2, limit=2))
    assert [h.message.message_id for h in again] == ids[EVICTED - 1 : EVICTED + 1]
    assert [c for c in _from_client(commands) if c != "PING"] == ["EVALSHA"]
    assert _records_read(commands, keys) == ids[EVICTED - 1 : EVICTED + 1]


def test_upgrade_drops_what_an_earlier_version_pruned(backend: Backend) -> None:
    store = backend.store
    ids = _fill(store, "pruned-before")
    keys = ConversationKeys.of(backend.prefix, "pruned-before", "a")
    # a version without the index deleted evicted messages, leaving their index members
    backend.client.hdel(keys.msg, *ids[:10])
    backend.client.hdel(keys.content, *ids[:10])
    assert len(store.history("pruned-before", "a")) == HISTORY - 10  # read whole meanwhile
    assert store.upgrade() == 1
    assert_indexed(backend.client, keys)
    assert [h.seq for h in store.history("pruned-before", "a", page=Page(limit=2))] == [10, 11]


def test_upgrade_leaves_other_prefixes_alone(backend: Backend) -> None:
    other = RedisStore.from_url(backend.url, key_prefix=f"{backend.prefix}:other")
    try:
        _fill(other, "elsewhere")
        keys = ConversationKeys.of(other.key_prefix, "elsewhere", "a")
        _unindex(backend, keys)
        assert backend.store.upgrade() == 0
        assert backend.client.zcard(keys.seq) == 0
        assert other.upgrade() == 1
        assert_indexed(backend.client, keys)
    finally:
        other.close()


def test_upgrade_gives_the_index_the_conversations_expiry(redis_url: str, redis_key_prefix: str) -> None:
    store = RedisStore.from_url(redis_url, key_prefix=redis_key_prefix, ttl=timedelta(hours=1))
    client = raw_client(redis_url)
    try:
        _fill(store, "ttl")
        keys = ConversationKeys.of(redis_key_prefix, "ttl", "a")
        assert client.pttl(keys.seq) > 0  # the commit gave it the ttl with the other keys
        client.delete(keys.seq)
        assert store.upgrade() == 1
        assert 0 < client.pttl(keys.seq) <= client.pttl(keys.state) + 1000
        assert_indexed(client, keys)
    finally:
        store.close()
        client.close()


def test_a_damaged_record_met_while_upgrading_is_named(redis_store: RedisStore, redis_url: str) -> None:
    from contextledger.errors import CorruptRecord

    _fill(redis_store, "bad")
    keys = ConversationKeys.of(redis_store.key_prefix, "bad", "a")
    client = raw_client(redis_url)
    try:
        client.delete(keys.seq)
        client.hset(keys.msg, "broken", b"{not json")
        client.hset(keys.content, "broken", b"[]")
        with pytest.raises(CorruptRecord) as caught:
            redis_store.upgrade()
        assert caught.value.record_id == "broken"
        assert caught.value.where == keys.msg
    finally:
        client.close()


def test_db_upgrade_indexes_a_redis_ledger(redis_url: str, redis_key_prefix: str) -> None:
    session = f"upgrade-{redis_key_prefix}"  # the CLI opens the default key prefix
    with Ledger.connect(redis_url) as ledger:
        store = ledger.store
        assert isinstance(store, RedisStore)
        _fill(store, session, "default")
        keys = ConversationKeys.of(store.key_prefix, session, "default")
        client = raw_client(redis_url)
        try:
            client.delete(keys.seq)
            result = CliRunner().invoke(app, ["db", "upgrade", "--url", redis_url], catch_exceptions=False)
            assert result.exit_code == 0, result.output
            assert_indexed(client, keys)
        finally:
            ledger.delete_session(session)
            client.close()


def test_every_writer_keeps_the_index_whole(backend: Backend) -> None:
    store = backend.store
    ledger = Ledger(store)
    ids = _fill(store, "w")
    keys = ConversationKeys.of(backend.prefix, "w", "a")
    assert_indexed(backend.client, keys)

    # import (and copy) write the index with the messages: here into a second prefix on the same server(s)
    (records,) = ledger.export_records("w", "a")
    other = RedisStore.from_url(backend.url, key_prefix=f"{backend.prefix}:copy")
    try:
        assert other.import_conversation(records)
        copy_keys = ConversationKeys.of(other.key_prefix, "w", "a")
        assert_indexed(backend.client, copy_keys)
        assert other.history("w", "a", page=Page(last=3)) == store.history("w", "a", page=Page(last=3))
        assert other.delete_session("w")  # delete takes the index with the conversation
        assert not backend.client.exists(copy_keys.seq)
    finally:
        other.close()

    # erase keeps the entry (and its seq); prune removes evicted entries from the index too
    ledger.erase("w", ids[0], reason="test", agent_id="a")
    assert_indexed(backend.client, keys)
    pruned = ledger.prune(older_than=timedelta(0), session_id="w")
    assert len(pruned) == EVICTED
    assert_indexed(backend.client, keys)
    assert backend.client.zcard(keys.seq) == HISTORY - EVICTED
    assert [h.seq for h in store.history("w", "a", page=Page(limit=2))] == [EVICTED, EVICTED + 1]

    # expire takes the index with the conversation

    assert store.expire_session("w", idle_before=datetime.now(UTC) + timedelta(days=1), reason="test")
    assert not backend.client.exists(keys.seq)


def _entries(history: list[HistoryEntry]) -> list[tuple[int, str]]:
    return [(h.seq, h.message.plain_text) for h in history]


def test_streaming_the_history_pages_through_the_index(redis_store: RedisStore) -> None:
    _fill(redis_store, "it")
    streamed = list(Ledger(redis_store).iter_history("it", "a", page_size=7))
    assert _entries(streamed) == _entries(redis_store.history("it", "a"))
    assert len(streamed) == HISTORY


_bound = st.none() | st.integers(min_value=0, max_value=HISTORY + 5)
_count = st.none() | st.integers(min_value=0, max_value=HISTORY + 5)


@given(
    after=_bound,
    before=_bound,
    count=_count,
    from_end=st.booleans(),
    include_evicted=st.booleans(),
    pruned=st.integers(min_value=0, max_value=EVICTED),
)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_page_is_the_slice_of_the_whole_history(
    redis_store: RedisStore,
    after: int | None,
    before: int | None,
    count: int | None,
    from_end: bool,
    include_evicted: bool,
    pruned: int,
) -> None:
    """Whatever the bounds, the index walk returns what filtering and cutting the whole history gives."""
    session = f"p{pruned}"
    if not redis_store.history(session, "a", page=Page(limit=1)):
        ids = _fill(redis_store, session)
        if pruned:  # holes in the seq range, as prune leaves them
            redis_store.prune(session, "a", ids[:pruned:2], [])
    page = Page(after=after, before=before, limit=None if from_end else count, last=count if from_end else None)
    whole = redis_store.history(session, "a")
    expected = page.cut([h for h in whole if (include_evicted or h.status == "active") and page.admits(h.seq)])
    assert redis_store.history(session, "a", include_evicted=include_evicted, page=page) == expected
