"""Session indexes: derived data that never hides or invents a conversation."""

from __future__ import annotations

import random
import time
from datetime import datetime

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError, DuplicateEntry
from contextledger.model.messages import Message
from contextledger.model.records import ViewEntry
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.data import RedisData
from contextledger.stores.redis.index import most_recent
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys
from contextledger.stores.redis.sessions import RedisSessions
from contextledger.stores.redis.writes import RedisWrites
from tests.redis.conftest import Backend


def _failed_creation(backend: Backend, session_id: str) -> None:
    msg = Message.user("twice")
    entry = ViewEntry(entry_id=msg.message_id, seq=0, message=msg)
    with pytest.raises(DuplicateEntry):
        backend.store.commit(
            Changeset(session_id=session_id, agent_id="ghost", expected_version=0, appends=(entry, entry), next_seq=2)
        )


def test_a_failed_creation_lists_nothing(backend: Backend) -> None:
    store = backend.store
    Conversation(store, "old", "a").append(Message.user("x"))
    time.sleep(0.002)
    _failed_creation(backend, "ghost-session")
    time.sleep(0.002)
    _failed_creation(backend, "old")  # a new agent in an existing session
    Conversation(store, "new", "a").append(Message.user("y"), Message.user("z"))

    assert [s.session_id for s in store.sessions()] == ["new", "old"]
    assert [s.session_id for s in store.sessions(limit=1)] == ["new"]
    assert [s.session_id for s in store.sessions(limit=1, offset=1)] == ["old"]
    assert store.sessions(limit=1, offset=2) == []
    assert store.sessions(limit=0) == []
    assert store.agents("ghost-session") == []
    assert store.agents("old") == ["a"]
    assert store.sessions()[1].agents == ("a",)
    assert store.load("ghost-session", "ghost") is None
    assert store.delete_session("ghost-session") is False
    assert store.delete_session("old") is True
    assert store.delete_session("new") is True
    assert backend.stored_keys_but_slot_list() == []


def test_sessions_follow_the_latest_commit_of_any_agent(backend: Backend) -> None:
    store = backend.store
    convs = {sid: Conversation(store, sid, "a") for sid in ("s1", "s2", "s3")}
    for conv in convs.values():
        conv.append(Message.user("hi"))
        time.sleep(0.002)
    assert [s.session_id for s in store.sessions()] == ["s3", "s2", "s1"]
    Conversation(store, "s1", "b").append(Message.user("late"))
    time.sleep(0.002)
    convs["s2"].before_model_call()
    listed = store.sessions()
    assert [s.session_id for s in listed] == ["s2", "s1", "s3"]
    s1 = listed[1]
    assert s1.agents == ("a", "b")
    assert (s1.active_entries, s1.total_entries) == (2, 2)
    snap = store.load("s2", "a")
    assert snap is not None
    assert listed[0].updated_at == snap.state.updated_at


@pytest.mark.parametrize(("limit", "offset"), [(-1, 0), (1, -1)])
def test_negative_paging_is_rejected(backend: Backend, limit: int, offset: int) -> None:
    with pytest.raises(ConfigurationError):
        backend.store.sessions(limit=limit, offset=offset)


def test_delete_removes_every_key_of_every_agent(backend: Backend) -> None:
    store = backend.store
    for aid in ("a", "b:{c}"):
        conv = Conversation(store, "doomed", aid)
        conv.append(Message.tool_use("t", "f", {}), Message.tool_result("t", "r" * 50), Message.user("q"))
        conv.pin(conv.view[2].entry_id)
    Conversation(store, "kept", "a").append(Message.user("stay"))
    assert store.delete_session("doomed") is True
    left = [k.decode() for k in backend.stored_keys_but_slot_list()]
    assert left
    # the kept session's keys, and the index that lists it (on Cluster, its slot's)
    assert all("kept" in k or k.endswith(":sessions") or ":sessions:{" in k for k in left)
    assert len([k for k in left if "kept" not in k]) == 1
    assert store.agents("doomed") == []
    assert store.history("doomed", "a") == []
    assert store.revisions("doomed", "a") == []
    assert [s.session_id for s in store.sessions()] == ["kept"]


def test_listing_merges_every_slot_by_latest_update(backend: Backend) -> None:
    # sessions whose agents live in different slots, updated in a shuffled order: the
    # listing must equal the order recomputed from every conversation's own state
    store = backend.store
    rng = random.Random(7)
    pairs = [(f"s{n:02d}", f"a{k}") for n in range(30) for k in range(1 + n % 3)]
    convs = {pair: Conversation(store, *pair) for pair in pairs}
    for pair in pairs:
        convs[pair].append(Message.user("hello"))
    for pair in rng.sample(pairs, 25):
        convs[pair].before_model_call()
    latest: dict[str, datetime] = {}
    for sid, aid in pairs:
        snap = store.load(sid, aid)
        assert snap is not None
        latest[sid] = max(latest.get(sid, snap.state.updated_at), snap.state.updated_at)
    expected = sorted(latest, key=lambda sid: (latest[sid], sid), reverse=True)
    listed = store.sessions(limit=100)
    assert [s.session_id for s in listed] == expected
    assert [s.updated_at for s in listed] == [latest[sid] for sid in expected]
    assert {s.session_id: len(s.agents) for s in listed} == {f"s{n:02d}": 1 + n % 3 for n in range(30)}
    for limit, offset in [(1, 0), (5, 0), (5, 5), (7, 20), (10, 25), (3, 29), (4, 30)]:
        page = [s.session_id for s in store.sessions(limit=limit, offset=offset)]
        assert page == expected[offset : offset + limit], (limit, offset)
    if backend.cluster:  # the sessions really are spread over several slots
        assert len(backend.slots_in_use()) > 10


class _DeletesBeforeTheScript(RedisWrites):
    """Runs a deletion of the session right after a creation listed its agent, before its script."""

    def __init__(self, data: RedisData, other: RedisStore) -> None:
        super().__init__(data)
        self.other = other

    def _register(self, cs: Changeset, index: SessionKeys, slot: int) -> None:
        super()._register(cs, index, slot)
        assert self.other.delete_session(cs.session_id) is True


def test_a_conversation_created_across_a_deletion_stays_listed(
    redis_cluster_store: RedisStore, redis_cluster_url: str
) -> None:
    # On Cluster the creator lists its agent, then the whole deletion runs (reading that
    # agent and removing it), then the creating script: the conversation exists, so it
    # must be listed. (On a single server the commit script lists the agent itself.)
    store = redis_cluster_store
    Conversation(store, "shared", "first").append(Message.user("old"))
    racing = RedisStore.from_url(redis_cluster_url, key_prefix=store.key_prefix)
    racing._writes = _DeletesBeforeTheScript(racing._data, store)
    try:
        Conversation(racing, "shared", "late").append(Message.user("new"))
    finally:
        racing.close()
    assert store.load("shared", "first") is None
    assert store.agents("shared") == ["late"]
    assert [s.session_id for s in store.sessions()] == ["shared"]
    assert store.delete_session("shared") is True
    assert store.agents("shared") == []
    assert store.sessions() == []


class _CreatesDuringTheDeletion(RedisSessions):
    """Recreates a conversation of the session after its keys were deleted, before the re-check."""

    def __init__(self, data: RedisData, other: RedisStore) -> None:
        super().__init__(data)
        self.data = data
        self.other = other

    def _relist_recreated(
        self, session_id: str, index: SessionKeys, agents: list[str], conversations: list[ConversationKeys]
    ) -> None:
        # the creation lands between the deletion's DEL and its index updates: as if its
        # listing had been made before the deletion removed the agent and the session
        Conversation(self.other, session_id, agents[0]).append(Message.user("reborn"))
        client = self.data.client
        client.srem(index.agents, agents[0])
        slot = conversations[0].slot
        prefix = self.data.key_prefix
        client.zrem(SessionKeys.slot_index(prefix, slot) if self.data.cluster else index.sessions, session_id)
        super()._relist_recreated(session_id, index, agents, conversations)


def test_a_deletion_relists_what_was_created_meanwhile(backend: Backend) -> None:
    store = backend.store
    Conversation(store, "phoenix", "a").append(Message.user("old"))
    deleting = RedisStore.from_url(backend.url, key_prefix=backend.prefix)
    deleting._sessions = _CreatesDuringTheDeletion(deleting._data, store)
    try:
        assert deleting.delete_session("phoenix") is True
    finally:
        deleting.close()
    snap = store.load("phoenix", "a")
    assert snap is not None
    assert [e.message.plain_text for e in snap.entries] == ["reborn"]
    assert store.agents("phoenix") == ["a"]
    listed = store.sessions()
    assert [s.session_id for s in listed] == ["phoenix"]
    assert listed[0].updated_at == snap.state.updated_at


def test_merging_sorted_sets_reads_only_what_can_rank(backend: Backend) -> None:
    # many sets, sessions in several of them with different scores, ties included: the
    # merge must give what sorting everything gives, for every depth
    rng = random.Random(11)
    slots = rng.sample(range(16_384), 40)
    keys = [SessionKeys.slot_index(backend.prefix, slot) for slot in slots]
    best: dict[bytes, float] = {}
    for key in keys:
        members = {f"s{rng.randrange(300)}".encode(): float(rng.randrange(12)) for _ in range(rng.randrange(0, 25))}
        if members:
            backend.client.zadd(key, members)
        for member, score in members.items():
            best[member] = max(best.get(member, score), score)
    everything = [m.decode() for m, _ in sorted(best.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]
    for n in (*range(1, 40), 50, 100, len(everything), len(everything) + 5):
        assert most_recent(backend.client, keys, n) == everything[:n], n


def test_merging_reads_on_through_ties_at_the_threshold(backend: Backend) -> None:
    # eight wanted from four sets read four at a time: the first set's fifth and sixth
    # entries tie the eighth best found so far and outrank it (ties order by member)
    keys = [SessionKeys.slot_index(backend.prefix, slot) for slot in (11, 2_222, 9_999, 16_000)]
    sets = [["z", "y", "x", "w", "v", "u"], ["b", "a"], ["c"], ["d"]]
    for key, members in zip(keys, sets, strict=True):
        backend.client.zadd(key, dict.fromkeys(members, 5.0))
    assert most_recent(backend.client, keys, 8) == ["z", "y", "x", "w", "v", "u", "d", "c"]
