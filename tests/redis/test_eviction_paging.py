"""A page of Redis evictions (one trigger's too) reads a range of their index, observed with MONITOR.

Every standing eviction of a conversation is a member of its ``evat`` sorted set, scored by
its reduction's time, the member ordering ties as the listing does (seq, kind, id); a page
reads that range and its entries, their reductions (``rp|`` position in the list) and the
replacing summaries (``rb|``) only; a page of one trigger's evictions reads a range of the
``evtr`` index (ordered by bytes: trigger, time code, member) the same way. These tests
count what a page reads, check after each writer -- commit (evict, summary, undo/restore),
import, prune, erase, delete, expire, ttl -- that the index holds exactly the standing
evictions, that a conversation without it (or written by a version without it) is read
whole until ``upgrade()`` builds it, and that any page equals the slice of the whole listing read without the index.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, ReductionPlan, SummaryDraft
from contextledger.model.paging import Page, cursor, paged
from contextledger.model.records import Eviction, SummaryEntry, ViewEntry
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.codec import epoch_micros
from contextledger.stores.redis.erasure import PRUNE
from contextledger.stores.redis.eviction_index import member, trigger_member
from contextledger.stores.redis.keys import ConversationKeys
from contextledger.testing.required import reduction
from tests.soak import examples

from .conftest import Backend, RawClient, raw_client
from .paged import assert_cli_last_3_reads_3, assert_expires_with_the_conversation, watch
from .test_hot_path import _from_client, _from_scripts, monitored

COUNT = 200
BASE = datetime(2026, 1, 1, tzinfo=UTC)


class _Writer:
    """Commits to one conversation straight to the store, with the reduction times given."""

    def __init__(self, store: RedisStore, session_id: str, agent_id: str) -> None:
        self.store, self.session_id, self.agent_id = store, session_id, agent_id
        self.version = 0
        self.messages: dict[str, ViewEntry] = {}

    def append(self, count: int) -> list[str]:
        start = len(self.messages)
        messages = [Message.user(f"{self.agent_id} message {start + i}") for i in range(count)]
        entries = tuple(
            ViewEntry(entry_id=m.message_id, seq=start + i, message=m, tokens=1) for i, m in enumerate(messages)
        )
        self._commit(appends=entries, next_seq=start + count)
        self.messages.update({e.entry_id: e for e in entries})
        return [e.entry_id for e in entries]

    def evict(self, ids: list[str], at: datetime, *, trigger: str = "manual") -> str:
        red = reduction(
            self.session_id, self.agent_id, created_at=at, evicted=tuple(ids), version=self.version + 1, trigger=trigger
        )
        self._commit(evict=tuple(ids), reduction=red)
        return red.reduction_id

    def summarize(self, replaces: list[str], at: datetime, seq: int) -> str:
        red = reduction(
            self.session_id, self.agent_id, created_at=at, evicted=tuple(replaces), version=self.version + 1
        )
        summary = SummaryEntry(
            session_id=self.session_id,
            agent_id=self.agent_id,
            seq=seq,
            content=f"summary at {seq}",
            summarizer="test",
            reduction_id=red.reduction_id,
            replaces=tuple(replaces),
            created_at=at,
        )
        self._commit(summary=summary, reduction=red)
        return summary.summary_id

    def restore(self, ids: list[str], at: datetime) -> None:
        red = reduction(
            self.session_id,
            self.agent_id,
            created_at=at,
            restored=tuple(ids),
            version=self.version + 1,
            strategy="undo",
        )
        self._commit(restore=tuple(self.messages[i] for i in ids), reduction=red)

    def _commit(self, **fields: Any) -> None:
        self.version = self.store.commit(
            Changeset(session_id=self.session_id, agent_id=self.agent_id, expected_version=self.version, **fields)
        )


def _two_hundred(store: RedisStore, session_id: str, agent_id: str = "a") -> list[str]:
    """200 evicted messages, 5 per reduction a second apart; the ids in eviction order.

    One reduction in eight (25 evictions) is ``reactive``, the others ``manual``.
    """
    writer = _Writer(store, session_id, agent_id)
    ids = writer.append(COUNT + 5)
    for i in range(0, COUNT, 5):
        writer.evict(ids[i : i + 5], BASE + timedelta(seconds=i), trigger="reactive" if i % 40 == 15 else "manual")
    return ids[:COUNT]


def _reactive(store: RedisStore, session_id: str, agent_id: str = "a") -> list[str]:
    """:func:`_two_hundred`'s ``reactive`` evictions, in order."""
    ids = _two_hundred(store, session_id, agent_id)
    return [x for i, x in enumerate(ids) if i // 5 % 8 == 3]


def _hidden(client: RawClient, store: RedisStore, session_id: str) -> list[Eviction]:
    """The whole listing as read without the index (its completeness mark hidden, then put back)."""
    listing: list[Eviction] = _unindexed(client, store, lambda: store.evictions(session_id), session_id)
    return listing


def _unindexed(client: RawClient, store: RedisStore, read: Any, session_id: str) -> Any:
    """What ``read()`` returns with the indexes' completeness marks hidden (then put back)."""
    marks = {}
    for aid in store.agents(session_id):
        keys = ConversationKeys.of(store.key_prefix, session_id, aid)
        marks[keys.state] = client.hget(keys.state, "ev_v")
        client.hdel(keys.state, "ev_v")
    try:
        return read()
    finally:
        for key, mark in marks.items():
            if mark is not None:
                client.hset(key, "ev_v", mark)


def _read(commands: list[dict[str, Any]], keys: ConversationKeys) -> list[str] | None:
    """The entry ids a script read from the msg / sum hashes; ``None`` if it read one whole."""
    ids: list[str] = []
    for command in _from_scripts(commands):
        name, key, *args = (part.strip('"') for part in command.split(" "))  # ids hold no space
        if key not in (keys.msg, keys.sum):
            continue
        if name == "HGETALL":
            return None
        if name in ("HGET", "HMGET"):
            ids += args
    return ids


def assert_indexed(client: Any, keys: ConversationKeys, listing: list[Eviction]) -> None:
    """The index holds exactly the standing evictions of ``listing``, scored by their time, and is marked complete."""
    index = {k.decode(): int(s) for k, s in client.zrange(keys.evat, 0, -1, withscores=True)}
    assert index == {member(e.seq, e.kind, e.entry_id): epoch_micros(e.evicted_at) for e in listing}
    assert client.hget(keys.state, "ev_v") == client.hget(keys.state, "version")
    by_trigger = {k.decode(): s for k, s in client.zrange(keys.evtr, 0, -1, withscores=True)}
    assert by_trigger == {
        trigger_member(e.trigger, str(epoch_micros(e.evicted_at)), member(e.seq, e.kind, e.entry_id)): 0
        for e in listing
    }
    assert client.hget(keys.state, "et_v") == client.hget(keys.state, "version")


def test_evictions_last_3_of_200_read_3(backend: Backend) -> None:
    store = backend.store
    ids = _two_hundred(store, "s")
    keys = ConversationKeys.of(backend.prefix, "s", "a")
    whole = store.evictions("s", "a")
    assert [e.entry_id for e in whole] == ids
    assert whole == _hidden(backend.client, store, "s")
    assert_indexed(backend.client, keys, whole)
    store.evictions("s", "a", page=Page(last=1))  # the script is loaded from here on

    with watch(backend) as commands:
        got = store.evictions("s", "a", page=Page(last=3))
    assert got == whole[-3:]
    assert [c for c in _from_client(commands) if c != "PING"] == ["EVALSHA"]
    assert _read(commands, keys) == ids[-3:]
    assert sum(1 for c in _from_scripts(commands) if c.split(" ", 1)[0].strip('"').upper() == "LINDEX") == 3

    with watch(backend) as commands:
        after = store.evictions("s", "a", page=Page(after=cursor(whole[100]), limit=5))
    assert after == whole[101:106]
    assert _read(commands, keys) == ids[101:106]
    rank_reads = [c for c in _from_scripts(commands) if c.split(" ", 1)[0].strip('"') in {"ZCOUNT", "ZRANGEBYSCORE"}]
    assert len(rank_reads) <= 2 * math.ceil(math.log2(COUNT))  # a rank lookup, not a walk

    since = whole[150].evicted_at
    with watch(backend) as commands:
        assert store.evictions("s", "a", since=since, page=Page(limit=2)) == whole[150:152]
    assert _read(commands, keys) == ids[150:152]


def test_evictions_last_3_from_the_cli_read_3(redis_url: str, redis_key_prefix: str) -> None:
    assert_cli_last_3_reads_3(
        redis_url,
        "evictions",
        f"cli-ev-{redis_key_prefix}",
        lambda store, session: _two_hundred(store, session, "default"),
        _read,
    )


def test_a_page_of_one_trigger_reads_its_rows_only(backend: Backend) -> None:
    """A trigger of 1 eviction in 8: a page of it reads the page's rows, not the others between them."""
    store = backend.store
    ids = _reactive(store, "t")
    keys = ConversationKeys.of(backend.prefix, "t", "a")
    whole = store.evictions("t", "a", trigger="reactive")
    assert [e.entry_id for e in whole] == ids
    assert whole == _unindexed(backend.client, store, lambda: store.evictions("t", trigger="reactive"), "t")
    assert_indexed(backend.client, keys, store.evictions("t", "a"))
    store.evictions("t", "a", trigger="reactive", page=Page(last=1))  # the script is loaded from here on

    with watch(backend) as commands:
        got = store.evictions("t", "a", trigger="reactive", page=Page(last=3))
    assert got == whole[-3:]
    assert [c for c in _from_client(commands) if c != "PING"] == ["EVALSHA"]
    assert _read(commands, keys) == ids[-3:]
    assert sum(1 for c in _from_scripts(commands) if c.split(" ", 1)[0].strip('"').upper() == "LINDEX") == 3
    ranks = [c for c in _from_scripts(commands) if c.split(" ", 1)[0].strip('"').upper() == "ZLEXCOUNT"]
    assert len(ranks) == 2  # where the trigger's members start and end: no walk

    with watch(backend) as commands:
        middle = store.evictions("t", "a", trigger="reactive", page=Page(after=cursor(whole[10]), limit=4))
    assert middle == whole[11:15]
    assert _read(commands, keys) == ids[11:15]
    with watch(backend) as commands:
        before = store.evictions("t", "a", trigger="reactive", page=Page(before=cursor(whole[10]), last=2))
    assert before == whole[8:10]
    assert _read(commands, keys) == ids[8:10]
    since = whole[20].evicted_at
    with watch(backend) as commands:
        assert store.evictions("t", "a", trigger="reactive", since=since, page=Page(limit=2)) == whole[20:22]
    assert _read(commands, keys) == ids[20:22]
    # a trigger with no eviction: an empty page, read as such
    with watch(backend) as commands:
        assert store.evictions("t", "a", trigger="proactive", page=Page(last=3)) == []
    assert _read(commands, keys) == []


def test_a_page_of_one_trigger_from_the_cli_reads_3(redis_url: str, redis_key_prefix: str) -> None:
    assert_cli_last_3_reads_3(
        redis_url,
        "evictions",
        f"cli-evt-{redis_key_prefix}",
        lambda store, session: _reactive(store, session, "default"),
        _read,
        ("--trigger", "reactive"),
    )


def test_a_conversation_indexed_before_the_trigger_index_pages_by_trigger_after_upgrade(backend: Backend) -> None:
    """Written with the eviction index but not the trigger index: a page by trigger is read whole until upgraded."""
    store = backend.store
    ids = _reactive(store, "pre")
    keys = ConversationKeys.of(backend.prefix, "pre", "a")
    whole = store.evictions("pre", "a", trigger="reactive")
    backend.client.delete(keys.evtr)
    backend.client.hdel(keys.state, "et_v")
    client: Any = backend.client
    backend.client.hdel(keys.mut, *[f for f in client.hkeys(keys.mut) if f.startswith(b"rt|")])
    with watch(backend) as commands:
        assert store.evictions("pre", "a", trigger="reactive", page=Page(last=3)) == whole[-3:]
    assert _read(commands, keys) is None
    with watch(backend) as commands:  # the unfiltered pages still go through their index
        assert store.evictions("pre", "a", page=Page(last=1)) == store.evictions("pre", "a")[-1:]
    assert _read(commands, keys) is not None
    # a commit in between keeps the trigger index incomplete, the other one complete
    writer = _Writer(store, "pre", "a")
    writer.version = int(client.hget(keys.state, "version"))
    late = writer.append(2)
    writer.evict(late[:1], BASE + timedelta(days=1), trigger="reactive")
    assert backend.client.hget(keys.state, "et_v") is None
    assert backend.client.hget(keys.state, "ev_v") == backend.client.hget(keys.state, "version")
    whole = store.evictions("pre", "a", trigger="reactive")
    assert [e.entry_id for e in whole] == [*ids, late[0]]
    with watch(backend) as commands:
        assert store.evictions("pre", "a", trigger="reactive", page=Page(last=3)) == whole[-3:]
    assert _read(commands, keys) is None

    assert store.upgrade() == 1
    assert_indexed(backend.client, keys, store.evictions("pre", "a"))
    with watch(backend) as commands:
        assert store.evictions("pre", "a", trigger="reactive", page=Page(last=3)) == whole[-3:]
    assert _read(commands, keys) == [*ids[-2:], late[0]]


def _old(backend: Backend, keys: ConversationKeys) -> None:
    """Make a conversation look written before the index existed."""
    backend.client.delete(keys.evat, keys.evtr)
    backend.client.hdel(keys.state, "ev_v", "et_v")
    client: Any = backend.client
    facts = [f for f in client.hkeys(keys.mut) if f.startswith((b"rp|", b"rb|", b"rt|"))]
    if facts:
        backend.client.hdel(keys.mut, *facts)


def test_a_conversation_without_the_index_is_read_whole_until_upgraded(backend: Backend) -> None:
    store = backend.store
    ids = _two_hundred(store, "old")
    keys = ConversationKeys.of(backend.prefix, "old", "a")
    whole = store.evictions("old", "a")
    _old(backend, keys)
    with watch(backend) as commands:
        got = store.evictions("old", "a", page=Page(last=3))
    assert got == whole[-3:]
    assert _read(commands, keys) is None
    assert backend.client.zcard(keys.evat) == 0  # a read never writes

    assert store.upgrade() == 1
    assert_indexed(backend.client, keys, whole)
    assert store.upgrade() == 0
    with watch(backend) as commands:
        again = store.evictions("old", "a", page=Page(after=cursor(whole[9]), limit=2))
    assert again == whole[10:12]
    assert _read(commands, keys) == ids[10:12]


def test_a_commit_by_a_writer_without_the_index_is_noticed(backend: Backend) -> None:
    """During a rolling upgrade a writer without the index commits: pages are read whole until upgraded."""
    store = backend.store
    _two_hundred(store, "roll")
    keys = ConversationKeys.of(backend.prefix, "roll", "a")
    whole = store.evictions("roll", "a")
    backend.client.hincrby(keys.state, "version", 1)  # what an earlier version's commit leaves
    with watch(backend) as commands:
        assert store.evictions("roll", "a", page=Page(last=2)) == whole[-2:]
    assert _read(commands, keys) is None
    assert store.upgrade() == 1
    assert_indexed(backend.client, keys, whole)


def test_every_writer_keeps_the_index_whole(backend: Backend) -> None:
    store = backend.store
    ledger = Ledger(store)
    writer = _Writer(store, "w", "a")
    ids = writer.append(20)
    first = writer.summarize(ids[0:3], BASE, seq=0)
    writer.evict(ids[3:5], BASE + timedelta(seconds=1))
    writer.summarize([first, *ids[5:7]], BASE + timedelta(seconds=2), seq=0)
    writer.restore([ids[3]], BASE + timedelta(seconds=3))
    keys = ConversationKeys.of(backend.prefix, "w", "a")
    whole = store.evictions("w")
    assert whole == _hidden(backend.client, store, "w")
    assert {e.entry_id for e in whole} == {*ids[0:3], ids[4], first, *ids[5:7]}
    assert next(e for e in whole if e.entry_id == first).replaced_by_summary is not None
    assert_indexed(backend.client, keys, whole)

    (records,) = ledger.export_records("w", "a")
    other = RedisStore.from_url(backend.url, key_prefix=f"{backend.prefix}:copy")
    try:
        assert other.import_conversation(records)
        copy_keys = ConversationKeys.of(other.key_prefix, "w", "a")
        assert_indexed(backend.client, copy_keys, whole)
        assert other.evictions("w", page=Page(last=4)) == store.evictions("w", page=Page(last=4))
        assert other.delete_session("w")
        assert not backend.client.exists(copy_keys.evat, copy_keys.evtr)
    finally:
        other.close()

    # erase rewrites a text, not an eviction; prune takes what it deletes out of the index
    ledger.erase("w", ids[10], reason="test", agent_id="a")
    assert_indexed(backend.client, keys, store.evictions("w"))
    pruned = ledger.prune(older_than=timedelta(0), session_id="w", keep_summaries=False)
    assert {p.entry_id for p in pruned} >= {*ids[0:3], ids[4]}
    left = _hidden(backend.client, store, "w")
    assert store.evictions("w") == left
    client: Any = backend.client
    assert {k.decode() for k in client.zrange(keys.evat, 0, -1)} == {member(e.seq, e.kind, e.entry_id) for e in left}
    assert client.zcard(keys.evtr) == len(left)
    for trigger in {e.trigger for e in whole}:
        assert (
            store.evictions("w", trigger=trigger, page=Page(last=2)) == [e for e in left if e.trigger == trigger][-2:]
        )

    assert store.expire_session("w", idle_before=datetime.now(UTC) + timedelta(days=1), reason="test")
    assert not backend.client.exists(keys.evat, keys.evtr)


def test_with_a_ttl_the_index_expires_with_the_conversation(redis_url: str, redis_key_prefix: str) -> None:
    store = RedisStore.from_url(redis_url, key_prefix=redis_key_prefix, ttl=timedelta(hours=1))
    client = raw_client(redis_url)
    try:
        writer = _Writer(store, "ttl", "a")
        ids = writer.append(6)
        writer.evict(ids[:3], BASE)
        keys = ConversationKeys.of(redis_key_prefix, "ttl", "a")
        assert_expires_with_the_conversation(client, keys.evat, keys)
        assert_expires_with_the_conversation(client, keys.evtr, keys)
        whole = store.evictions("ttl")
        client.delete(keys.evat, keys.evtr)
        client.hdel(keys.state, "ev_v")
        assert store.upgrade() == 1
        assert_expires_with_the_conversation(client, keys.evat, keys)
        assert_expires_with_the_conversation(client, keys.evtr, keys)
        assert_indexed(client, keys, whole)
    finally:
        store.close()
        client.close()


def test_a_time_a_score_cannot_hold_leaves_the_conversation_read_whole(redis_store: RedisStore, redis_url: str) -> None:
    writer = _Writer(redis_store, "old-times", "a")
    ids = writer.append(8)
    writer.evict(ids[:2], BASE)
    writer.evict(ids[2:4], datetime(1600, 1, 1, tzinfo=UTC))
    keys = ConversationKeys.of(redis_store.key_prefix, "old-times", "a")
    whole = redis_store.evictions("old-times")
    assert whole[0].evicted_at.year == 1600
    with monitored(redis_url) as commands:
        assert redis_store.evictions("old-times", page=Page(last=3)) == whole[-3:]
    assert _read(commands, keys) is None
    assert redis_store.upgrade() == 0  # nothing the upgrade can index either


def test_a_page_of_a_conversation_without_evictions_is_empty(redis_store: RedisStore) -> None:
    _Writer(redis_store, "none", "a").append(3)
    assert redis_store.evictions("none", "a", page=Page(last=3)) == []
    assert redis_store.evictions("none", page=Page(after=(BASE, "a", 0, "message", "x"), limit=2)) == []


def _session(backend: Backend) -> list[Eviction]:
    """Three agents: ties by time across reductions, a clock going back, summaries replacing
    entries and summaries, restores and re-evictions, and a real undo."""
    store = backend.store
    if store.evictions("prop", "a", page=Page(limit=1)):
        return _hidden(backend.client, store, "prop")
    a = _Writer(store, "prop", "a")
    ids = a.append(40)
    s1 = a.summarize(ids[0:4], BASE + timedelta(seconds=5), seq=0)
    a.evict([ids[9], ids[4], ids[7]], BASE + timedelta(seconds=5), trigger="reactive")  # tied with the summary's
    a.evict([ids[5], ids[6]], BASE + timedelta(seconds=2))  # a clock going back
    a.restore([ids[2], ids[4]], BASE + timedelta(seconds=6))
    a.evict([ids[2]], BASE + timedelta(seconds=7))  # replaced once, evicted again without a summary
    a.summarize([s1, ids[8], ids[10]], BASE + timedelta(seconds=7), seq=0)
    for i in range(11, 35, 3):
        a.evict(ids[i : i + 3], BASE + timedelta(seconds=8 + i // 6), trigger="per_turn" if i % 2 else "reactive")
    # replaced three times, the last on a lagging clock: the one created last is named
    a.summarize([ids[35]], BASE + timedelta(seconds=20), seq=35)
    a.restore([ids[35]], BASE + timedelta(seconds=20))
    latest = a.summarize([ids[35]], BASE + timedelta(seconds=21), seq=35)
    a.restore([ids[35]], BASE + timedelta(seconds=21))
    a.summarize([ids[35]], BASE + timedelta(seconds=19), seq=35)
    b = _Writer(store, "prop", "b")
    other = b.append(20)
    for i in range(0, 18, 2):  # reactive at 5 s too: tied with a's
        b.evict(other[i : i + 2], BASE + timedelta(seconds=i // 2), trigger="reactive" if i in (0, 10) else "proactive")
    conv = Conversation(store, "prop", "c")
    conv.append(*(Message.user(f"c {i}") for i in range(20)))
    conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=tuple(v.ids[:4])), trigger="manual")
    summary = conv.apply_plan(
        lambda v: ReductionPlan(
            strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=v.ids[:3])
        ),
        trigger="manual",
    )
    assert summary is not None
    conv.undo(summary.reduction_id)
    conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=tuple(v.ids[:5])), trigger="manual")
    records = _hidden(backend.client, store, "prop")
    for aid in ("a", "b", "c"):  # pages of every agent go through the index
        keys = ConversationKeys.of(store.key_prefix, "prop", aid)
        assert_indexed(backend.client, keys, [e for e in records if e.agent_id == aid])
    # replaced by a summary, restored, evicted again by a plain reduction: still named as replaced
    assert next(e for e in records if e.entry_id == ids[2]).replaced_by_summary == s1
    assert next(e for e in records if e.entry_id == ids[35]).replaced_by_summary == latest
    assert len({e.evicted_at for e in records if e.agent_id == "a"}) < len([e for e in records if e.agent_id == "a"])
    return records


_index = st.none() | st.integers(min_value=0, max_value=80)
_count = st.none() | st.integers(min_value=0, max_value=80)


@given(
    agent=st.sampled_from([None, "a", "b", "c"]),
    after=_index,
    before=_index,
    count=_count,
    from_end=st.booleans(),
    shift=st.sampled_from([timedelta(0), timedelta(microseconds=1), -timedelta(microseconds=1)]),
    kind=st.sampled_from([None, "a", "messagf", "t"]),
    since=st.none() | st.integers(min_value=0, max_value=20),
    trigger=st.sampled_from([None, None, "manual", "reactive", "per_turn", "proactive", "import"]),
)
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_page_is_the_slice_of_the_whole_listing(
    backend: Backend,
    agent: str | None,
    after: int | None,
    before: int | None,
    count: int | None,
    from_end: bool,
    shift: timedelta,
    kind: str | None,
    since: int | None,
    trigger: Any,
) -> None:
    """Cursors of any agent's evictions (or between them, or of a kind no entry has), from either end, by trigger."""
    records = _session(backend)
    assert backend.store.evictions("prop") == records

    def at(index: int | None) -> tuple[Any, ...] | None:
        if index is None:
            return None
        e = records[index % len(records)]
        return (e.evicted_at + shift, e.agent_id, e.seq, e.kind if kind is None else kind, e.entry_id)

    page = Page(after=at(after), before=at(before), limit=None if from_end else count, last=count if from_end else None)
    floor = None if since is None else BASE + timedelta(seconds=since)
    whole = [
        e
        for e in records
        if (agent is None or e.agent_id == agent)
        and (floor is None or e.evicted_at >= floor)
        and (trigger is None or e.trigger == trigger)
    ]
    assert backend.store.evictions("prop", agent, trigger=trigger, since=floor, page=page) == paged(whole, page)


def test_pruning_the_summary_that_replaced_a_kept_entry_keeps_the_index(backend: Backend) -> None:
    """The next replacing summary is found when the summary goes: pages keep going through the index."""
    store = backend.store
    writer = _Writer(store, "pr", "a")
    ids = writer.append(10)
    first = writer.summarize(ids[0:2], BASE, seq=0)
    writer.summarize([first, ids[2]], BASE + timedelta(seconds=1), seq=0)  # first is evicted, superseded
    writer.restore([ids[1]], BASE + timedelta(seconds=2))
    again = writer.summarize([ids[1]], BASE + timedelta(seconds=3), seq=1)  # ids[1]: first, then again
    writer.evict([again], BASE + timedelta(seconds=4), trigger="reactive")
    keys = ConversationKeys.of(backend.prefix, "pr", "a")
    before = store.evictions("pr")
    assert {e.entry_id: e.replaced_by_summary for e in before}[ids[1]] == again

    assert store.prune("pr", "a", [again], []) == 1
    after = _hidden(backend.client, store, "pr")
    assert {e.entry_id: e.replaced_by_summary for e in after}[ids[1]] == first  # the next one
    assert_indexed(backend.client, keys, after)
    with watch(backend) as commands:
        assert store.evictions("pr", page=Page(last=3)) == after[-3:]
    assert _read(commands, keys) == [e.entry_id for e in after[-3:]]

    assert store.prune("pr", "a", [first], []) == 1  # none left for ids[0] and ids[1]
    after = _hidden(backend.client, store, "pr")
    assert {e.entry_id: e.replaced_by_summary for e in after}[ids[0]] is None
    assert {e.entry_id: e.replaced_by_summary for e in after}[ids[1]] is None
    assert_indexed(backend.client, keys, after)
    with watch(backend) as commands:
        assert store.evictions("pr", page=Page(limit=2)) == after[:2]
    assert _read(commands, keys) == [e.entry_id for e in after[:2]]
    assert store.upgrade() == 0


def test_a_prune_that_cannot_know_the_next_replacing_summary_marks_the_index_incomplete(backend: Backend) -> None:
    """A commit between the prune's read and its script (its version moved): read whole until upgraded."""
    store = backend.store
    writer = _Writer(store, "pr2", "a")
    ids = writer.append(10)
    first = writer.summarize(ids[0:2], BASE, seq=0)
    writer.summarize([first, ids[2]], BASE + timedelta(seconds=1), seq=0)
    keys = ConversationKeys.of(backend.prefix, "pr2", "a")
    client: Any = backend.client
    summary = SummaryEntry.model_validate_json(client.hget(keys.sum, first))
    version = int(client.hget(keys.state, "version"))
    # the prune script as the store sends it, with what was read one version ago
    args = ["0", "1", first, "0", "0", "1", first, member(summary.seq, "summary", first)]
    args += ["1", first, str(len(summary.replaces)), *summary.replaces, str(version - 1), "1", ids[0], ""]
    prune = client.register_script(PRUNE)
    order = [keys.msg, keys.content, keys.mut, keys.rev, keys.sum, keys.active, keys.seq, keys.sumat, keys.evat]
    assert prune(keys=[*order, keys.state, keys.evtr], args=args) == 1
    after = _hidden(backend.client, store, "pr2")
    assert {e.entry_id: e.replaced_by_summary for e in after}[ids[0]] is None
    assert backend.client.hget(keys.state, "ev_v") is None
    with watch(backend) as commands:
        assert store.evictions("pr2", page=Page(last=2)) == after[-2:]
    assert _read(commands, keys) is None  # read whole: still the listing's answer
    assert store.upgrade() == 1
    assert_indexed(backend.client, keys, after)


def test_every_cursor_of_a_trigger_pages_as_the_listing(backend: Backend) -> None:
    """Each row of each trigger as a cursor, every agent at once: ties across agents fall on the right side."""
    records = _session(backend)
    for trigger in sorted({e.trigger for e in records}):
        rows = [e for e in records if e.trigger == trigger]
        for i, e in enumerate(rows):
            after = backend.store.evictions("prop", trigger=trigger, page=Page(after=cursor(e), limit=3))
            assert after == rows[i + 1 : i + 4], (trigger, i)
            before = backend.store.evictions("prop", trigger=trigger, page=Page(before=cursor(e), last=3))
            assert before == rows[max(0, i - 3) : i], (trigger, i)
