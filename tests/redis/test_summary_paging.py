"""A page of Redis summaries reads a range of their creation-time index, observed with MONITOR.

Every summary of a conversation is a member of its ``sumat`` sorted set, scored by its
``created_at``; a page of one agent is a rank range of it (ties ordered by summary id, as
the listing orders them), whatever order the summaries were committed in. These tests count
what a page reads, check after each writer -- commit, import, prune, erase, delete, expire,
ttl -- that the index holds exactly the summaries, and that a conversation without it is read
whole until ``upgrade()`` builds it; any page equals the slice of the whole listing.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.core.changeset import Changeset
from contextledger.model.paging import Page, cursor, paged
from contextledger.model.records import SummaryEntry, ViewEntry
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.codec import epoch_micros
from contextledger.stores.redis.keys import ConversationKeys
from contextledger.testing.required import reduction
from tests.soak import examples

from .conftest import Backend, raw_client
from .paged import assert_cli_last_3_reads_3, assert_expires_with_the_conversation, watch
from .test_hot_path import _from_client, _from_scripts, monitored

COUNT = 200
BASE = datetime(2026, 1, 1, tzinfo=UTC)


def _summarize(
    store: RedisStore, session_id: str, agent_id: str, times: list[datetime], *, chain: bool = False
) -> list[str]:
    """One message per time, then one commit per time: a summary made then replacing its message.

    With ``chain`` each summary also replaces the one before it (which is then evicted and
    superseded). Returns the summary ids in commit order.
    """
    messages = [Message.user(f"m{i}") for i in range(len(times))]
    appends = tuple(ViewEntry(entry_id=m.message_id, seq=i, message=m, tokens=1) for i, m in enumerate(messages))
    version = store.commit(
        Changeset(session_id=session_id, agent_id=agent_id, expected_version=0, appends=appends, next_seq=len(times))
    )
    ids: list[str] = []
    for i, at in enumerate(times):
        replaces = (messages[i].message_id, *(ids[-1:] if chain else ()))
        red = reduction(session_id, agent_id, created_at=at, evicted=replaces, version=version + 1)
        summary = SummaryEntry(
            session_id=session_id,
            agent_id=agent_id,
            seq=i,
            content=f"summary {i}",
            summarizer="test",
            reduction_id=red.reduction_id,
            replaces=replaces,
            supersedes=ids[-1] if chain and ids else None,
            created_at=at,
        )
        version = store.commit(
            Changeset(
                session_id=session_id, agent_id=agent_id, expected_version=version, summary=summary, reduction=red
            )
        )
        ids.append(summary.summary_id)
    return ids


def _summaries_read(commands: list[dict[str, Any]], keys: ConversationKeys) -> list[str] | None:
    """The summary ids a script read by HMGET on the sum hash; ``None`` if a script read it whole."""
    ids: list[str] = []
    for command in _from_scripts(commands):
        name, key, *args = (part.strip('"') for part in command.split(" "))  # ids hold no space
        if key != keys.sum:
            continue
        if name == "HGETALL":
            return None
        if name == "HMGET":
            ids += args
    return ids


def assert_indexed(client: Any, keys: ConversationKeys) -> None:
    """The creation-time index holds exactly the conversation's summaries, each scored by its time."""
    stored = {k.decode(): SummaryEntry.model_validate_json(v) for k, v in client.hgetall(keys.sum).items()}
    index = {k.decode(): int(s) for k, s in client.zrange(keys.sumat, 0, -1, withscores=True)}
    assert index == {sid: epoch_micros(s.created_at) for sid, s in stored.items()}


def test_summaries_last_3_of_200_read_3(backend: Backend) -> None:
    store = backend.store
    ids = _summarize(store, "s", "a", [BASE + timedelta(seconds=i) for i in range(COUNT)], chain=True)
    keys = ConversationKeys.of(backend.prefix, "s", "a")
    whole = store.summaries("s", "a")
    assert [s.summary_id for s in whole] == ids
    assert [s.status for s in whole].count("evicted") == COUNT - 1
    assert whole[5].superseded_by == ids[6]
    store.summaries("s", "a", page=Page(last=1))  # the script is loaded from here on

    with watch(backend) as commands:
        got = store.summaries("s", "a", page=Page(last=3))
    assert got == whole[-3:]
    assert [c for c in _from_client(commands) if c != "PING"] == ["EVALSHA"]
    assert _summaries_read(commands, keys) == ids[-3:]

    with watch(backend) as commands:
        after = store.summaries("s", "a", page=Page(after=cursor(whole[100]), limit=5))
    assert after == whole[101:106]
    assert _summaries_read(commands, keys) == ids[101:106]
    rank_reads = [c for c in _from_scripts(commands) if c.split(" ", 1)[0].strip('"') in {"ZCOUNT", "ZRANGEBYSCORE"}]
    assert len(rank_reads) <= 2 * math.ceil(math.log2(COUNT))  # a rank lookup, not a walk


def test_summaries_last_3_from_the_cli_read_3(redis_url: str, redis_key_prefix: str) -> None:
    assert_cli_last_3_reads_3(
        redis_url,
        "summaries",
        f"cli-{redis_key_prefix}",
        lambda store, session: _summarize(store, session, "default", [BASE + timedelta(seconds=i) for i in range(50)]),
        _summaries_read,
    )


def test_a_clock_going_back_still_pages_by_the_index(redis_store: RedisStore, redis_url: str) -> None:
    """A summary made on a lagging clock is ranked where its time puts it: no whole read."""
    times = [BASE + timedelta(seconds=(7 * i) % 23) for i in range(23)] + [BASE + timedelta(seconds=3)] * 4
    ids = _summarize(redis_store, "skew", "a", times)
    keys = ConversationKeys.of(redis_store.key_prefix, "skew", "a")
    whole = redis_store.summaries("skew", "a")
    assert whole == paged(whole, None)  # in the listing's order, not the commit order
    assert sorted(ids) == sorted(s.summary_id for s in whole)
    tied = [s.summary_id for s in whole if s.created_at == BASE + timedelta(seconds=3)]
    assert tied == sorted(tied)  # ties by id
    assert len(tied) == 5
    with monitored(redis_url) as commands:
        got = redis_store.summaries("skew", "a", page=Page(after=cursor(whole[4]), limit=3))
    assert got == whole[5:8]
    assert _summaries_read(commands, keys) == [s.summary_id for s in whole[5:8]]


def test_a_time_a_score_cannot_hold_leaves_the_conversation_read_whole(redis_store: RedisStore, redis_url: str) -> None:
    times = [BASE + timedelta(seconds=i) for i in range(5)] + [datetime(1600, 1, 1, tzinfo=UTC)]
    _summarize(redis_store, "old-times", "a", times)
    keys = ConversationKeys.of(redis_store.key_prefix, "old-times", "a")
    client = raw_client(redis_url)
    try:
        assert client.zcard(keys.sumat) == 5  # the 1600 one is not indexed
    finally:
        client.close()
    whole = redis_store.summaries("old-times", "a")
    assert whole[0].created_at.year == 1600
    with monitored(redis_url) as commands:
        got = redis_store.summaries("old-times", "a", page=Page(last=2))
    assert got == whole[-2:]
    assert _summaries_read(commands, keys) is None  # read whole, the page kept
    assert redis_store.upgrade() == 0  # nothing the upgrade can index either


def test_a_conversation_without_the_index_is_read_whole_until_upgraded(backend: Backend) -> None:
    store = backend.store
    ids = _summarize(store, "old", "a", [BASE + timedelta(seconds=i) for i in range(30)], chain=True)
    keys = ConversationKeys.of(backend.prefix, "old", "a")
    whole = store.summaries("old", "a")
    backend.client.delete(keys.sumat)  # as written before the index existed
    with watch(backend) as commands:
        got = store.summaries("old", "a", page=Page(last=3))
    assert got == whole[-3:]
    assert _summaries_read(commands, keys) is None
    assert backend.client.zcard(keys.sumat) == 0  # a read never writes

    assert store.upgrade() == 1
    assert_indexed(backend.client, keys)
    assert store.upgrade() == 0
    with watch(backend) as commands:
        again = store.summaries("old", "a", page=Page(after=cursor(whole[9]), limit=2))
    assert again == whole[10:12]
    assert _summaries_read(commands, keys) == ids[10:12]


def test_a_summary_written_without_the_index_is_noticed(backend: Backend) -> None:
    """During a rolling upgrade a writer without the index adds a summary: pages are read whole until upgraded."""
    store = backend.store
    ids = _summarize(store, "roll", "a", [BASE + timedelta(seconds=i) for i in range(10)])
    keys = ConversationKeys.of(backend.prefix, "roll", "a")
    stored = backend.client.hget(keys.sum, ids[-1])
    assert isinstance(stored, bytes)
    older = SummaryEntry.model_validate_json(stored).model_copy(
        update={"summary_id": "older-writer", "created_at": BASE + timedelta(seconds=4, microseconds=5)}
    )
    backend.client.hset(keys.sum, older.summary_id, older.model_dump_json())
    whole = store.summaries("roll", "a")
    assert [s.summary_id for s in whole][5] == "older-writer"
    with watch(backend) as commands:
        assert store.summaries("roll", "a", page=Page(after=cursor(whole[3]), limit=3)) == whole[4:7]
    assert _summaries_read(commands, keys) is None  # the index lacks it: read whole
    assert store.upgrade() == 1
    assert_indexed(backend.client, keys)
    with watch(backend) as commands:
        assert store.summaries("roll", "a", page=Page(after=cursor(whole[3]), limit=3)) == whole[4:7]
    assert _summaries_read(commands, keys) == [s.summary_id for s in whole[4:7]]


def test_upgrade_drops_summaries_an_earlier_version_pruned(backend: Backend) -> None:
    store = backend.store
    ids = _summarize(store, "pruned-before", "a", [BASE + timedelta(seconds=i) for i in range(10)], chain=True)
    keys = ConversationKeys.of(backend.prefix, "pruned-before", "a")
    backend.client.hdel(keys.sum, *ids[:3])  # a version without the index deleted them
    assert [s.summary_id for s in store.summaries("pruned-before", "a", page=Page(limit=2))] == ids[3:5]
    assert store.upgrade() == 1
    assert_indexed(backend.client, keys)
    assert [s.summary_id for s in store.summaries("pruned-before", "a", page=Page(limit=2))] == ids[3:5]


def test_every_writer_keeps_the_index_whole(backend: Backend) -> None:
    store = backend.store
    ledger = Ledger(store)
    ids = _summarize(store, "w", "a", [BASE + timedelta(seconds=i) for i in range(12)], chain=True)
    keys = ConversationKeys.of(backend.prefix, "w", "a")
    assert_indexed(backend.client, keys)

    (records,) = ledger.export_records("w", "a")
    other = RedisStore.from_url(backend.url, key_prefix=f"{backend.prefix}:copy")
    try:
        assert other.import_conversation(records)
        copy_keys = ConversationKeys.of(other.key_prefix, "w", "a")
        assert_indexed(backend.client, copy_keys)
        assert other.summaries("w", page=Page(last=4)) == store.summaries("w", page=Page(last=4))
        assert other.delete_session("w")
        assert not backend.client.exists(copy_keys.sumat)
    finally:
        other.close()

    # erase rewrites a summary's text, not its time; prune takes evicted summaries out of the index
    first = store.history("w", "a", page=Page(limit=1))[0]
    ledger.erase("w", first.message.message_id, reason="test", agent_id="a")
    assert_indexed(backend.client, keys)
    pruned = ledger.prune(older_than=timedelta(0), session_id="w", keep_summaries=False)
    assert {p.entry_id for p in pruned} >= set(ids[:-1])
    assert_indexed(backend.client, keys)
    assert [s.summary_id for s in store.summaries("w", "a", page=Page(last=3))] == ids[-1:]

    assert store.expire_session("w", idle_before=datetime.now(UTC) + timedelta(days=1), reason="test")
    assert not backend.client.exists(keys.sumat)


def test_with_a_ttl_the_index_expires_with_the_conversation(redis_url: str, redis_key_prefix: str) -> None:
    store = RedisStore.from_url(redis_url, key_prefix=redis_key_prefix, ttl=timedelta(hours=1))
    client = raw_client(redis_url)
    try:
        _summarize(store, "ttl", "a", [BASE + timedelta(seconds=i) for i in range(3)])
        keys = ConversationKeys.of(redis_key_prefix, "ttl", "a")
        assert_expires_with_the_conversation(client, keys.sumat, keys)
        client.delete(keys.sumat)
        assert store.upgrade() == 1
        assert_expires_with_the_conversation(client, keys.sumat, keys)
        assert_indexed(client, keys)
    finally:
        store.close()
        client.close()


def test_a_damaged_summary_met_while_upgrading_is_named(redis_store: RedisStore, redis_url: str) -> None:
    from contextledger.errors import CorruptRecord

    _summarize(redis_store, "bad", "a", [BASE])
    keys = ConversationKeys.of(redis_store.key_prefix, "bad", "a")
    client = raw_client(redis_url)
    try:
        client.delete(keys.sumat)
        client.hset(keys.sum, "broken", b'{"created_at": "yesterday"}')
        with pytest.raises(CorruptRecord) as caught:
            redis_store.upgrade()
        assert caught.value.record_id == "broken"
        assert caught.value.where == keys.sum
    finally:
        client.close()


def test_a_page_of_a_conversation_without_summaries_is_empty(redis_store: RedisStore) -> None:
    _summarize(redis_store, "none", "a", [])
    assert redis_store.summaries("none", "a", page=Page(last=3)) == []
    assert redis_store.summaries("none", page=Page(after=(BASE, "a", "x"), limit=2)) == []


def _session(store: RedisStore) -> list[SummaryEntry]:
    """Three agents: ties by time, interleaved times, a clock going back; chained and not."""
    if store.summaries("prop", "a", page=Page(limit=1)):
        return store.summaries("prop")
    _summarize(store, "prop", "a", [BASE + timedelta(seconds=i // 3) for i in range(25)], chain=True)
    _summarize(store, "prop", "b", [BASE + timedelta(seconds=i) for i in range(12)])
    _summarize(store, "prop", "c", [BASE + timedelta(seconds=(7 * i) % 11) for i in range(11)], chain=True)
    return store.summaries("prop")


_index = st.none() | st.integers(min_value=0, max_value=60)
_count = st.none() | st.integers(min_value=0, max_value=60)


@given(
    agent=st.sampled_from([None, "a", "b", "c"]),
    after=_index,
    before=_index,
    count=_count,
    from_end=st.booleans(),
    shift=st.sampled_from([timedelta(0), timedelta(microseconds=1), -timedelta(microseconds=1)]),
)
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_page_is_the_slice_of_the_whole_listing(
    redis_store: RedisStore,
    agent: str | None,
    after: int | None,
    before: int | None,
    count: int | None,
    from_end: bool,
    shift: timedelta,
) -> None:
    """Cursors of any agent's summaries (or between them), counts from either end: the whole listing cut."""
    records = _session(redis_store)

    def at(index: int | None) -> tuple[Any, ...] | None:
        if index is None:
            return None
        record = records[index % len(records)]
        return (record.created_at + shift, record.agent_id, record.summary_id)

    page = Page(after=at(after), before=at(before), limit=None if from_end else count, last=count if from_end else None)
    whole = [s for s in records if agent is None or s.agent_id == agent]
    assert redis_store.summaries("prop", agent, page=page) == paged(whole, page)
