"""Session indexes: derived data that never hides or invents a conversation."""

from __future__ import annotations

import time

import pytest

from contextledger.changeset import Changeset
from contextledger.conversation import Conversation
from contextledger.errors import ConfigurationError, DuplicateEntry
from contextledger.messages import Message
from contextledger.records import ViewEntry
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
    assert backend.stored_keys() == []


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
    left = [k.decode() for k in backend.stored_keys()]
    assert left
    assert all("kept" in k or k.endswith(":sessions") for k in left)
    assert store.agents("doomed") == []
    assert store.history("doomed", "a") == []
    assert store.revisions("doomed", "a") == []
    assert [s.session_id for s in store.sessions()] == ["kept"]
