"""``refresh()``: one read of the state tells whether the stored conversation moved; only then the view is read.

Every backend: another handle's commit, erasure, or a session deleted and made again up
to the same version is seen; an unmoved conversation reads no view (counted on the
store's ``load``), and a hypothesis property checks that after any mix of these -- written
through this ledger or through another process -- a refresh, and an open through the
ledger's shared views, give what an open without shared views gives.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.errors import SessionDeleted
from contextledger.stores.capabilities import CompleteStore
from tests.conversation.helpers import CountingLoads, made_again_to, two_turns


def _texts(conversation: Conversation) -> list[str]:
    return [entry.message.plain_text for entry in conversation.view]


def test_an_unmoved_conversation_reads_its_state_and_no_view(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = Ledger(store).conversation("s", "a")
    chat.append(Message.user("one"), Message.assistant("two"))
    loads = CountingLoads(store, monkeypatch)
    chat.refresh()  # the state held was made here (its created_at may not be the store's): one view read at most
    first = loads.count
    assert first <= 1
    for _ in range(3):
        chat.refresh()
    assert loads.count == first
    assert _texts(chat) == ["one", "two"]
    chat.append(Message.user("three"))  # a commit of its own keeps the store's created_at
    chat.refresh()
    assert loads.count == first
    assert _texts(chat) == ["one", "two", "three"]


def test_another_handles_commit_is_read(store: CompleteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(
        store, shared_views=0
    )  # the other's view is not handed over (tests/conversation/test_shared_views.py)
    mine = ledger.conversation("s", "a")
    mine.append(Message.user("one"))
    mine.refresh()
    other = ledger.conversation("s", "a")
    other.append(Message.assistant("two"))
    loads = CountingLoads(store, monkeypatch)
    mine.refresh()
    assert loads.count == 1
    assert _texts(mine) == ["one", "two"]
    assert mine.state.version == other.state.version


def test_an_erasure_elsewhere_is_read(store: CompleteStore) -> None:
    ledger = Ledger(store)
    mine = ledger.conversation("s", "a")
    (secret,) = mine.append(Message.user("my card is 4111"))
    mine.append(Message.assistant("noted"))
    mine.refresh()
    ledger.erase("s", secret.message_id, reason="asked")
    mine.refresh()
    assert "4111" not in " ".join(_texts(mine))
    assert _texts(mine)[1] == "noted"


def test_an_erasure_through_forks_is_read_by_a_conversation_open_on_each(store: CompleteStore) -> None:
    ledger = Ledger(store)
    origin = ledger.conversation("p", "default")
    (secret,) = origin.append(Message.user("my card is 4111"))
    origin.append(Message.assistant("noted"))
    ledger.fork("p", "c")
    ledger.fork("c", "g")
    opened = {session: ledger.conversation(session, "default") for session in ("p", "c", "g")}
    for chat in opened.values():
        chat.refresh()
        assert "4111" in " ".join(_texts(chat))
    ledger.erase("p", secret.message_id, reason="asked")
    for session, chat in opened.items():
        chat.refresh()
        assert "4111" not in " ".join(_texts(chat)), session
        assert _texts(chat)[1] == "noted"


def test_a_session_deleted_and_made_again_to_the_same_version_is_read(store: CompleteStore) -> None:
    ledger = Ledger(store)
    mine = ledger.conversation("s", "a")
    two_turns(mine, "old one", "old two")
    mine.refresh()
    made_again_to(ledger, mine.state.version)
    mine.refresh()
    assert _texts(mine) == ["new one", "new two"]


def test_a_deleted_session_refreshes_to_nothing(store: CompleteStore) -> None:
    ledger = Ledger(store)
    mine = ledger.conversation("s", "a")
    mine.append(Message.user("one"))
    mine.refresh()
    assert ledger.delete_session("s")
    mine.refresh()
    assert _texts(mine) == []
    assert mine.state.version == 0


steps = st.lists(
    st.sampled_from(
        [
            "append here",
            "append there",
            "append elsewhere",
            "erase there",
            "erase elsewhere",
            "delete elsewhere",
            "check",
        ]
    ),
    max_size=12,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_a_refresh_and_an_open_give_what_an_open_without_shared_views_gives(
    store: CompleteStore, steps: list[str]
) -> None:
    """ "there": another conversation of the same ledger (its views shared); "elsewhere": another process."""
    session = f"p-{uuid.uuid4().hex}"  # the store outlives an example: a session of its own each
    ledger, elsewhere = Ledger(store), Ledger(store, shared_views=0)
    writers = {"there": ledger, "elsewhere": elsewhere}
    mine = ledger.conversation(session, "a")
    for number, step in enumerate(steps):
        action, _, where = step.partition(" ")
        if step == "append here":
            try:
                mine.append(Message.user(f"here {number}"))
            except SessionDeleted:  # deleted elsewhere since mine last read it: never re-created by mine
                assert not elsewhere.conversation(session, "a").state.version, steps
                mine.refresh()
                mine.append(Message.user(f"here {number}"))
        elif action == "append":
            writers[where].conversation(session, "a").append(Message.assistant(f"{where} {number}"))
        elif action == "erase":
            view = writers[where].conversation(session, "a").view
            if len(view):
                writers[where].erase(session, view[0].entry_id, reason="asked")
        elif action == "delete":
            elsewhere.delete_session(session)
        else:
            opened = ledger.conversation(session, "a")  # before mine's refresh, which would share what it reads
            mine.refresh()
            fresh = elsewhere.conversation(session, "a")
            for chat in (mine, opened):
                assert _texts(chat) == _texts(fresh), steps
                assert chat.state.version == fresh.state.version, steps
                if fresh.state.version:  # a conversation not made yet has no creation time of its own
                    assert chat.state.created_at == fresh.state.created_at, steps
    elsewhere.delete_session(session)
