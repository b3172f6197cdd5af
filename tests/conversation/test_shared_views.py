"""Shared views: a conversation a ledger opens again takes the view its conversations last held, never a stale one.

Every backend. A view is taken only when the stored state, read first, says the same
conversation stands at the same version; a commit, an erasure or a deletion made through
another ledger on the same database (another process) is read. Counted on the store's
``load``; the hypothesis property of ``test_refresh.py`` checks that after any mix of
writes here and elsewhere an open through the shared views gives what an open without
them gives.
"""

from __future__ import annotations

import asyncio

import pytest

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.conversation.conversation import Conversation
from contextledger.conversation.shared import SharedViews
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.model.records import ConversationState
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.conversation.helpers import CountingLoads, made_again_to, two_turns


def _texts(conversation: Conversation) -> list[str]:
    return [entry.message.plain_text for entry in conversation.view]


def test_a_conversation_opened_again_takes_the_view_held_and_reads_none(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(store)
    first = ledger.conversation("s", "a")
    first.append(Message.user("one"), Message.assistant("two"))
    # The commit that made the conversation could not know the time the store stamped as
    # its creation: one read learns it (the next open would otherwise make that read).
    first.refresh()
    first.append(Message.user("three"))
    loads = CountingLoads(store, monkeypatch)
    again = ledger.conversation("s", "a")
    assert loads.count == 0
    assert again.view is first.view  # one immutable view, held by both
    assert _texts(again) == ["one", "two", "three"]
    assert again.state.version == first.state.version
    again.append(Message.assistant("four"))  # a commit through the view taken
    third = ledger.conversation("s", "a")
    assert loads.count == 0
    assert _texts(third) == ["one", "two", "three", "four"]
    assert _texts(first) == ["one", "two", "three"]  # the first one's view is its own until it refreshes
    first.refresh()
    assert _texts(first) == ["one", "two", "three", "four"]
    assert loads.count == 0


def test_without_shared_views_every_open_reads_the_view(store: CompleteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(store, shared_views=0)
    ledger.conversation("s", "a").append(Message.user("one"))
    loads = CountingLoads(store, monkeypatch)
    for _ in range(3):
        assert _texts(ledger.conversation("s", "a")) == ["one"]
    assert loads.count == 3
    assert len(ledger.shared_views) == 0


def test_a_commit_through_another_ledger_is_read(store: CompleteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    here, elsewhere = Ledger(store), Ledger(store)  # another process on the same database
    here.conversation("s", "a").append(Message.user("one"))
    elsewhere.conversation("s", "a").append(Message.assistant("two"))
    loads = CountingLoads(store, monkeypatch)
    assert _texts(here.conversation("s", "a")) == ["one", "two"]
    assert loads.count == 1
    assert _texts(here.conversation("s", "a")) == ["one", "two"]  # what it read is shared in turn
    assert loads.count == 1


def test_an_erasure_through_another_ledger_is_read(store: CompleteStore) -> None:
    here, elsewhere = Ledger(store), Ledger(store)
    chat = here.conversation("s", "a")
    (secret,) = chat.append(Message.user("my card is 4111"))
    chat.append(Message.assistant("noted"))
    elsewhere.erase("s", secret.message_id, reason="asked")
    opened = here.conversation("s", "a")
    assert "4111" not in " ".join(_texts(opened))
    assert _texts(opened)[1] == "noted"


def test_a_session_deleted_and_made_again_elsewhere_to_the_same_version_is_read(store: CompleteStore) -> None:
    here, elsewhere = Ledger(store), Ledger(store)
    old = here.conversation("s", "a")
    two_turns(old, "old one", "old two")
    here.conversation("s", "a")  # the view shared here holds the store's created_at
    made_again_to(elsewhere, old.state.version)
    assert _texts(here.conversation("s", "a")) == ["new one", "new two"]


def test_the_ledgers_own_erasure_and_deletion_drop_what_it_shared(store: CompleteStore) -> None:
    ledger = Ledger(store)
    chat = ledger.conversation("s", "a")
    (secret,) = chat.append(Message.user("my card is 4111"))
    chat.append(Message.assistant("noted"))
    ledger.conversation("t", "a").append(Message.user("another session"))
    assert len(ledger.shared_views) == 2
    ledger.erase("s", secret.message_id, reason="asked")
    assert len(ledger.shared_views) == 0  # an erasure reaches forks and copies: nothing shared stays
    assert "4111" not in " ".join(_texts(ledger.conversation("s", "a")))
    ledger.conversation("t", "a")
    assert len(ledger.shared_views) == 2
    assert ledger.delete_session("s")
    assert [key[0] for key in ledger.shared_views.held()] == ["t"]
    assert _texts(ledger.conversation("s", "a")) == []


def test_an_async_ledger_shares_the_views_of_its_conversations(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run() -> list[str]:
        ledger = AsyncLedger(store)
        try:
            first = await ledger.conversation("s", "a")
            await first.append(Message.user("one"), Message.assistant("two"))
            await first.refresh()  # the store's creation time learnt (see the first test)
            loads = CountingLoads(store, monkeypatch)
            again = await ledger.conversation("s", "a")
            assert loads.count == 0
            return [entry.message.plain_text for entry in again.view]
        finally:
            await ledger.close()

    assert asyncio.run(run()) == ["one", "two"]


def _state(session: str, version: int) -> ConversationState:
    return ConversationState(session_id=session, agent_id="a", version=version)


def _view(length: int) -> View:
    chat = Ledger(MemoryStore()).conversation("v", "a")
    if length:
        chat.append(*[Message.user(f"m{i}") for i in range(length)])
    return chat.view


def test_shared_views_hold_at_most_their_bound_dropping_the_least_recently_used() -> None:
    shared = SharedViews(max_entries=5)
    shared.put(("a", "x"), _state("a", 1), _view(2))
    shared.put(("b", "x"), _state("b", 1), _view(2))
    assert shared.get(("a", "x")) is not None  # a is used: b is now the oldest
    shared.put(("c", "x"), _state("c", 1), _view(2))
    assert shared.get(("b", "x")) is None
    assert [key[0] for key in shared.held()] == ["a", "c"]
    assert shared.entries == 4
    shared.put(("a", "x"), _state("a", 2), _view(3))  # replaced: its old entries no longer count
    assert shared.entries == 5
    shared.put(("d", "x"), _state("d", 1), _view(6))  # longer than the bound: not kept, nothing dropped
    assert shared.get(("d", "x")) is None
    assert shared.entries == 5
    shared.put(("a", "x"), _state("a", 3), _view(6))  # what a held before goes even when the new view is not kept
    assert shared.get(("a", "x")) is None
    assert shared.entries == 2
    shared.forget()
    assert len(shared) == 0
    assert shared.entries == 0


def test_a_companion_lives_as_long_as_its_view_is_kept() -> None:
    shared = SharedViews(max_entries=4)
    assert shared.companion(("a", "x"), "renderer", list) is not shared.companion(("a", "x"), "renderer", list)
    shared.put(("a", "x"), _state("a", 1), _view(2))
    kept: list[object] = shared.companion(("a", "x"), "renderer", list)
    assert shared.companion(("a", "x"), "renderer", list) is kept  # one per key and kind while the view is kept
    assert shared.companion(("a", "x"), "other", list) is not kept
    shared.put(("a", "x"), _state("a", 2), _view(3))  # the view replaced by a commit: the companion stays
    assert shared.companion(("a", "x"), "renderer", list) is kept
    shared.put(("b", "x"), _state("b", 1), _view(2))  # past the bound: a's view, and its companion, go
    assert shared.get(("a", "x")) is None
    shared.put(("a", "x"), _state("a", 3), _view(1))
    assert shared.companion(("a", "x"), "renderer", list) is not kept
    kept = shared.companion(("a", "x"), "renderer", list)
    shared.put(("a", "x"), _state("a", 4), _view(5))  # too long to keep
    shared.put(("a", "x"), _state("a", 5), _view(1))
    assert shared.companion(("a", "x"), "renderer", list) is not kept
    kept = shared.companion(("a", "x"), "renderer", list)
    shared.forget("a")
    shared.put(("a", "x"), _state("a", 6), _view(1))
    assert shared.companion(("a", "x"), "renderer", list) is not kept
    kept = shared.companion(("a", "x"), "renderer", list)
    shared.forget()
    shared.put(("a", "x"), _state("a", 7), _view(1))
    assert shared.companion(("a", "x"), "renderer", list) is not kept


@pytest.mark.parametrize("bad", [-1, 1.5, "20", True, None])
def test_a_bound_that_is_not_a_count_is_refused_before_anything_opens(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="shared_views"):
        Ledger.connect("sqlite:////nonexistent-directory/never-opened.db", shared_views=bad)
    with pytest.raises(ConfigurationError, match="shared_views"):
        Ledger(MemoryStore(), shared_views=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="shared_views"):
        asyncio.run(AsyncLedger.connect("sqlite:////nonexistent-directory/never-opened.db", shared_views=bad))
    if bad is not None:  # a conversation of no ledger shares nothing: None
        with pytest.raises(ConfigurationError, match="shared"):
            Conversation(MemoryStore(), "s", shared=bad)  # type: ignore[arg-type]
