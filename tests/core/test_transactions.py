"""Pure plans, one summary per reduction outside the lock, bounded jittered retries, idempotent appends."""

from __future__ import annotations

import threading
import time

import pytest

from contextledger import (
    Changeset,
    Conversation,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from contextledger.conversation import conversation as conversation_module
from contextledger.core.changeset import Planned, ReductionRequest
from contextledger.errors import ConcurrencyConflict, DuplicateEntry, ReductionFailed
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.managers.helpers import chat, overflow


def test_plan_is_pure_and_preview_writes_nothing(store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=2)
    conv = Conversation(store, "s", manager=manager)
    conv.append(*chat(7))
    state, version = manager.state, conv.version
    request = ReductionRequest(trigger="manual")
    first = manager.plan(conv.view, request)
    again = [manager.plan(conv.view, request) for _ in range(3)]
    assert all(p == first for p in again)
    assert isinstance(first, Planned)
    plan, next_state = first
    assert plan is not None
    assert next_state is not None
    assert manager.state == state  # nothing staged on the manager
    preview = conv.preview()
    assert preview is not None
    assert preview.removed_ids() == plan.removed_ids()
    assert preview.tokens_before == conv.view.tokens
    assert preview.tokens_after is not None
    assert preview.tokens_after < preview.tokens_before
    assert conv.version == version
    assert store.reductions("s", "default") == []
    reduction = conv.reduce()
    assert reduction is not None
    assert set(reduction.evicted) == preview.removed_ids()
    assert reduction.tokens_after == preview.tokens_after
    assert manager.state == next_state
    assert conv.preview() is None


def test_preview_without_a_manager_is_none(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s")
    conv.append(*chat(4))
    assert conv.preview() is None


def test_the_summarizer_runs_once_outside_the_lock(memory_store: CompleteStore) -> None:
    conv: Conversation
    seen: list[bool] = []

    def summarizer(messages: list[Message]) -> str:
        # Another thread can take the conversation's lock while the summary is written.
        acquired: list[bool] = []

        def probe() -> None:
            acquired.append(conv.transaction.lock.acquire(timeout=2))
            if acquired[0]:
                conv.transaction.lock.release()

        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
        seen.append(acquired[0])
        return f"summary of {len(messages)}"

    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=1, summarizer=summarizer)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    assert conv.preview() is not None
    assert seen == []  # previewing writes no summary
    conv.reduce()
    assert seen == [True]


class _Conflicting(MemoryStore):
    """Loses the version race ``times`` times on reduction commits."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    def commit(self, changeset: Changeset) -> int:
        if changeset.reduction is not None and self.times:
            self.times -= 1
            raise ConcurrencyConflict("lost the race")
        return super().commit(changeset)


def test_conflicts_back_off_with_jitter_and_reuse_the_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    calls: list[int] = []

    def summarizer(messages: list[Message]) -> str:
        calls.append(len(messages))
        return "summary"

    store = _Conflicting(times=3)
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=1, summarizer=summarizer)
    conv = Conversation(store, "s", manager=manager, max_retries=4)
    conv.append(*chat(6))
    assert conv.reduce() is not None
    assert calls == [3]  # written once, reused on every re-plan
    assert len(sleeps) == 3
    caps = [min(conversation_module.BACKOFF_CAP, conversation_module.BACKOFF_BASE * 2**i) for i in range(3)]
    assert all(0 <= s <= cap for s, cap in zip(sleeps, caps, strict=True))
    store.times = 10
    with pytest.raises(ConcurrencyConflict):
        conv.reduce()
    assert len(sleeps) == 3 + 4  # bounded: max_retries waits, then the conflict propagates


def test_at_most_one_reactive_reduction_per_model_call(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=40)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(9))
    conv.before_model_call()
    assert conv.after_model_call(overflow()) is True
    with pytest.raises(ReductionFailed, match="already reduced once"):
        conv.after_model_call(overflow())
    assert len(memory_store.reductions("s", "default")) == 1
    conv.before_model_call()  # the retried call is counted: it may be reduced again
    assert conv.after_model_call(overflow()) is True
    assert len(memory_store.reductions("s", "default")) == 2


def test_a_retried_append_with_the_same_ids_is_idempotent(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    messages = chat(3)
    conv.append(*messages)
    version = conv.version
    assert [m.message_id for m in conv.append(*messages)] == [m.message_id for m in messages]
    assert conv.version == version
    # Another process that did not see the first append: the store answers DuplicateEntry,
    # the conversation re-reads and finds the same messages stored.
    stale = Conversation(store, "s")
    fresh = Conversation(store, "s")
    fresh.append(Message.user("more", message_id="more-1"))
    again = stale.append(Message.user("more", message_id="more-1"))
    assert [m.plain_text for m in again] == ["more"]
    assert Conversation(store, "s").version == fresh.version
    # The same id with other content is still a duplicate.
    with pytest.raises(DuplicateEntry):
        stale.append(Message.user("other", message_id="more-1"))
