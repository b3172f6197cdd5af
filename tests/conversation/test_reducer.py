"""The reducer alone: plan once, summarize once outside the lock, commit once; best-effort and reactive contracts."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from contextledger import SlidingWindowConversationManager, SummarizingConversationManager
from contextledger.core.changeset import Edit, Planned, ReductionRequest
from contextledger.core.hooks import AfterInvocationEvent
from contextledger.core.view import View
from contextledger.errors import ReductionFailed
from contextledger.model.messages import Message
from tests.conversation.helpers import RecordingStore, compose
from tests.managers.helpers import chat, overflow


def _try(lock: threading.RLock) -> bool:
    if lock.acquire(timeout=2):
        lock.release()
        return True
    return False


def test_a_reduction_is_planned_summarized_once_and_committed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    store = RecordingStore()
    written: list[int] = []
    free: list[bool] = []

    def summarizer(messages: list[Message]) -> str:
        written.append(len(messages))
        probe = threading.Thread(target=lambda: free.append(_try(parts.transaction.lock)))
        probe.start()
        probe.join()
        return "the summary"

    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarizer)
    parts = compose(store, manager=manager)
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(8))))
    store.conflicts = 2  # the first two commits lose: re-planned, the summary reused
    reduction = parts.reducer.reduce(parts.reader.request("manual"))
    assert reduction is not None
    assert reduction.summary_id is not None
    assert written == [4]
    assert free == [True]
    reductions = [c for c in store.committed if c.reduction is not None]
    assert len(reductions) == 1
    assert reductions[0].summary is not None
    assert reductions[0].summary.content == "the summary"
    assert parts.transaction.view.ids[0] == reduction.summary_id


def test_preview_plans_and_writes_nothing() -> None:
    store = RecordingStore()
    parts = compose(store, manager=SlidingWindowConversationManager(window_size=4))
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(8))))
    attempts = store.attempts
    plan = parts.reducer.preview("manual")
    assert plan is not None
    assert len(plan.removed_ids()) == 4
    assert store.attempts == attempts


def test_a_best_effort_reduction_that_fails_is_logged_and_the_event_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(SlidingWindowConversationManager):
        def plan(self, view: View, request: ReductionRequest) -> Planned:
            raise RuntimeError("planner broke")

    store = RecordingStore()
    parts = compose(store, manager=Broken(window_size=2))
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(6))))
    with caplog.at_level(logging.WARNING):
        event = parts.reducer.dispatch(AfterInvocationEvent(parts.reader.context()))
    assert [r.trigger for r in event.requests] == ["end_of_invocation"]  # the sliding window asked
    assert "planner broke" in caplog.text
    assert "best-effort reduction skipped" in caplog.text
    assert len(store.committed) == 1  # only the append


def test_a_reactive_reduction_reduces_once_per_call_or_raises() -> None:
    store = RecordingStore()
    parts = compose(store, manager=SlidingWindowConversationManager(window_size=4))
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(8))))
    parts.transaction.announce_call(defer=True)
    request = parts.reader.request("reactive")
    parts.reducer.reactive(request, overflow())
    assert len(parts.transaction.view) == 4
    with pytest.raises(ReductionFailed, match="already reduced once"):
        parts.reducer.reactive(parts.reader.request("reactive"), overflow())
    lone = compose(RecordingStore(), session_id="lone", manager=SlidingWindowConversationManager(window_size=4))
    lone.transaction.edit(lambda _view: Edit(appends=(Message.user("the newest prompt"),)))
    with pytest.raises(ReductionFailed, match="nothing left to reduce"):
        lone.reducer.reactive(lone.reader.request("reactive"), overflow())


def test_without_a_manager_nothing_is_reduced() -> None:
    store = RecordingStore()
    parts = compose(store)
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(4))))
    assert parts.reducer.reduce(parts.reader.request("manual")) is None
    assert parts.reducer.preview("manual") is None
    assert len(store.committed) == 1
