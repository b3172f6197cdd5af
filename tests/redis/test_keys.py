"""Key layout: one slot per conversation, ids that look like key syntax stay harmless."""

from __future__ import annotations

from collections import defaultdict
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.cluster import RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.errors import ConfigurationError
from contextledger.model.messages import Message
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys, encode_id, slot_tag
from tests.redis.conftest import Backend
from tests.soak import examples

NASTY_IDS = ["a:b", "{x}", "}{", "a}:{b", "%7B", "s p a c e", "ünï©ødé✓", ":", "{", "}"]


def _hash_tag(key: str) -> str:
    """The part of ``key`` Redis Cluster hashes (the first ``{...}`` with content)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    assert start >= 0
    assert end > start + 1
    return key[start + 1 : end]


@given(session_id=st.text(min_size=1), agent_id=st.text(min_size=1))
@settings(max_examples=examples(200), deadline=None)
def test_every_key_of_a_conversation_shares_one_tag(session_id: str, agent_id: str) -> None:
    keys = ConversationKeys.of("pfx", session_id, agent_id)
    tags = {_hash_tag(k) for k in keys.all}
    assert tags == {f"pfx:{encode_id(session_id)}:{encode_id(agent_id)}"}
    assert len({key_slot(k.encode()) for k in keys.all}) == 1
    assert len(set(keys.all)) == len(keys.all)


@given(a=st.tuples(st.text(min_size=1), st.text(min_size=1)), b=st.tuples(st.text(min_size=1), st.text(min_size=1)))
@settings(max_examples=examples(300), deadline=None)
def test_distinct_conversations_never_share_keys(a: tuple[str, str], b: tuple[str, str]) -> None:
    ka, kb = ConversationKeys.of("p", *a), ConversationKeys.of("p", *b)
    assert (set(ka.all) & set(kb.all) == set()) == (a != b)
    assert (SessionKeys.of("p", a[0]).agents == SessionKeys.of("p", b[0]).agents) == (a[0] == b[0])


def test_a_colon_cannot_move_the_boundary_between_session_and_agent() -> None:
    assert ConversationKeys.of("p", "a:b", "c").state != ConversationKeys.of("p", "a", "b:c").state


@pytest.mark.parametrize("prefix", ["", "a{b", "x}", "{p}"])
def test_prefix_with_braces_is_rejected(prefix: str, redis_url: str) -> None:
    with pytest.raises(ConfigurationError):
        RedisStore.from_url(redis_url, key_prefix=prefix)


def test_written_keys_of_a_conversation_live_in_one_slot(backend: Backend) -> None:
    for sid, aid in [("s1", "a"), ("s1", "b"), ("{s}:2", "x:{y}")]:
        conv = Conversation(backend.store, sid, aid)
        msgs = [Message.user(f"m{i}") for i in range(4)]
        conv.append(*msgs)
        conv.pin(msgs[3].message_id)
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=(v.ids[0],))
            ),
            trigger="manual",
        )
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[1],)), trigger="manual")
    by_tag: dict[str, set[int]] = defaultdict(set)
    conversation_keys = [k.decode() for k in backend.stored_keys() if k.startswith(b"{") and not k.endswith(b":agents")]
    for key in conversation_keys:
        by_tag[_hash_tag(key)].add(key_slot(key.encode()))
    assert len(by_tag) == 3
    assert all(len(slots) == 1 for slots in by_tag.values())
    if backend.cluster:
        # the server agrees with the client-side slot computation
        for key in conversation_keys:
            assert cast(RedisCluster, backend.client).cluster_keyslot(key) == key_slot(key.encode())
    # state, msg, content, mut, active, sum, red, cs, pins, seq, sumat, evat, evtr per conversation (no revisions)
    assert len(conversation_keys) == 3 * 13


@pytest.mark.parametrize("session_id", NASTY_IDS)
def test_ids_with_key_syntax_round_trip(backend: Backend, session_id: str) -> None:
    agent_id = "agent:{1}"
    store = backend.store
    conv = Conversation(store, session_id, agent_id)
    msgs = [Message.user("hello", message_id="m:{1}"), Message.assistant("hi", message_id="}{:%")]
    conv.append(*msgs)
    conv.pin("}{:%")
    Conversation(store, session_id, "plain").append(Message.user("other"))
    snap = store.load(session_id, agent_id)
    assert snap is not None
    assert [e.entry_id for e in snap.entries] == ["m:{1}", "}{:%"]
    assert snap.entries[1].pinned
    assert store.agents(session_id) == sorted([agent_id, "plain"])
    assert [s.session_id for s in store.sessions()] == [session_id]
    assert store.load(session_id, "agent") is None
    assert store.delete_session(session_id) is True
    assert store.load(session_id, agent_id) is None
    assert backend.stored_keys_but_slot_list() == []
    if backend.cluster:  # what is left: the numbers of the slots the two conversations used
        used = {ConversationKeys.of(backend.prefix, session_id, aid).slot for aid in (agent_id, "plain")}
        assert backend.slots_in_use() == used


def test_every_slot_has_a_tag_that_hashes_to_it() -> None:
    tags = [slot_tag(slot) for slot in range(REDIS_CLUSTER_HASH_SLOTS)]
    assert [key_slot(tag.encode()) for tag in tags] == list(range(REDIS_CLUSTER_HASH_SLOTS))
    assert all(tag.isdigit() for tag in tags)  # no brace can end the tag early
    for bad in (-1, REDIS_CLUSTER_HASH_SLOTS):
        with pytest.raises(ConfigurationError):
            slot_tag(bad)


@given(session_id=st.text(min_size=1, max_size=30), agent_id=st.text(min_size=1, max_size=30))
@settings(max_examples=examples(200))
def test_a_conversations_slot_index_shares_its_slot(session_id: str, agent_id: str) -> None:
    keys = ConversationKeys.of("pfx", session_id, agent_id)
    index = SessionKeys.slot_index("pfx", keys.slot)
    assert key_slot(index.encode()) == keys.slot == key_slot(keys.rev.encode())


def test_the_server_agrees_on_the_slot_index_slots(redis_cluster_url: str) -> None:
    scheme, _, rest = redis_cluster_url.partition("://")
    client = RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    try:
        for slot in (0, 1, 5460, 5461, 10922, 10923, 16383):
            assert client.cluster_keyslot(SessionKeys.slot_index("p", slot)) == slot
    finally:
        client.close()
