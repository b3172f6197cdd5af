"""The model-call cycle alone: what it counts, what it commits, how commits are stamped."""

from __future__ import annotations

import pytest

from contextledger import SlidingWindowConversationManager
from contextledger.core.changeset import Edit
from contextledger.errors import ContextWindowOverflowError
from contextledger.model.messages import Message
from tests.conversation.helpers import RecordingStore, compose
from tests.managers.helpers import chat, overflow


def test_a_count_committed_at_once_is_one_commit_and_nothing_else() -> None:
    store = RecordingStore()
    parts = compose(store)
    parts.calls.before_model_call(defer_count=False)
    assert [(c.model_call_count, c.appends, c.reduction) for c in store.committed] == [(1, (), None)]
    assert store.load("s", "default").state.model_call_count == 1  # type: ignore[union-attr]


def test_a_deferred_count_rides_with_the_next_write() -> None:
    store = RecordingStore()
    parts = compose(store)
    for _ in range(3):
        parts.calls.before_model_call(defer_count=True)
    assert store.attempts == 0  # nothing to do: nothing written
    assert parts.transaction.model_call_count == 3
    parts.transaction.edit(lambda _view: Edit(appends=(Message.assistant("answer"),)))
    [changeset] = store.committed
    assert changeset.model_call_count == 3
    assert changeset.from_call == 4  # the answer is input of the next call, not of call 3


def test_a_reduction_requested_before_the_call_carries_the_count_and_reaches_that_call() -> None:
    store = RecordingStore()
    parts = compose(store, manager=SlidingWindowConversationManager(window_size=4, per_turn=True))
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(8))))
    parts.calls.before_model_call(defer_count=True)
    reduced = store.committed[-1]
    assert reduced.reduction is not None
    assert reduced.model_call_count == 1
    assert reduced.from_call == 1
    assert len(store.committed) == 2  # the count did not need a commit of its own


def test_a_call_not_handed_keeps_stamping_its_input_and_counts_once() -> None:
    store = RecordingStore()
    parts = compose(store)
    parts.calls.before_model_call(defer_count=True, handed=False)
    parts.transaction.edit(lambda _view: Edit(appends=(Message.user("hook input"),)))
    parts.calls.before_model_call(defer_count=True, handed=False)  # prepared again: the same call
    parts.calls.input_handed()
    parts.transaction.edit(lambda _view: Edit(appends=(Message.assistant("answer"),)))
    assert [(c.model_call_count, c.from_call) for c in store.committed] == [(1, 1), (None, 2)]
    assert parts.transaction.model_call_count == 1


def test_after_model_call_retries_after_a_reactive_reduction_and_reraises_an_unhandled_overflow() -> None:
    store = RecordingStore()
    parts = compose(store, manager=SlidingWindowConversationManager(window_size=4))
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(8))))
    parts.calls.before_model_call(defer_count=True)
    assert parts.calls.after_model_call(overflow()) is True
    assert len(parts.transaction.view) < 8
    bare = compose(RecordingStore(), session_id="bare")
    bare.calls.before_model_call(defer_count=True)
    with pytest.raises(ContextWindowOverflowError):
        bare.calls.after_model_call(overflow())
    assert bare.calls.after_model_call(None) is False


def test_after_invocation_commits_the_pending_answer_once() -> None:
    store = RecordingStore()
    parts = compose(store)
    answer = Message.assistant("final")
    parts.calls.after_invocation(lambda _view: Edit(appends=(answer,)))
    assert [[a.entry_id for a in c.appends] for c in store.committed] == [[answer.message_id]]
