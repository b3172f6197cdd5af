"""A deferred model-call count: nothing written when nothing is to do, durable with the next write.

Counted, never timed: store commits on the memory store, statements SQLite runs on the
SQL store. What a crash loses is shown by reopening the conversation without the write.
"""

from __future__ import annotations

import pytest

from contextledger import Conversation, SlidingWindowConversationManager
from contextledger.errors import ConfigurationError, ModelCallNotFound
from contextledger.history.travel import view_at
from contextledger.model.messages import Message
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.sql import SQLStore
from tests.conversation.helpers import RecordingStore
from tests.managers.helpers import chat
from tests.sql.helpers import trace_sqlite


def _idle_manager() -> SlidingWindowConversationManager:
    # Checked before every call, finds nothing to do with fewer than 40 messages.
    return SlidingWindowConversationManager(window_size=40, per_turn=True)


def test_with_nothing_to_do_a_deferred_call_writes_nothing_and_rides_with_the_answer() -> None:
    store = RecordingStore()
    conv = Conversation(store, "s", manager=_idle_manager(), defer_count=True)
    conv.append(*chat(4))
    for _ in range(50):
        conv.before_model_call()
        conv.after_model_call(None)
    assert store.attempts == 1  # the first append only
    assert conv.model_call_count == 50
    conv.append(Message.assistant("answer"))
    assert store.attempts == 2
    assert store.committed[-1].model_call_count == 50
    assert Conversation(store, "s").model_call_count == 50  # durable once the write returned


def test_committed_at_once_it_is_one_commit_per_call() -> None:
    store = RecordingStore()
    conv = Conversation(store, "s", manager=_idle_manager())
    assert conv.defer_count is False  # the default: the count is durable before the call
    conv.append(*chat(4))
    for _ in range(5):
        conv.before_model_call()
    assert store.attempts == 1 + 5
    assert Conversation(store, "s").model_call_count == 5


def test_the_per_call_choice_overrides_the_conversations() -> None:
    store = RecordingStore()
    conv = Conversation(store, "s", defer_count=True)
    conv.before_model_call(defer_count=False)
    assert [c.model_call_count for c in store.committed] == [1]
    conv.defer_count = False
    conv.before_model_call(defer_count=True)
    assert len(store.committed) == 1
    with pytest.raises(ConfigurationError, match="defer_count"):
        Conversation(store, "t", defer_count="yes")  # type: ignore[arg-type]


def test_a_crash_before_the_next_write_loses_only_the_counts_since_the_last_write(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s", defer_count=True)
    conv.append(Message.user("q1"))
    conv.before_model_call()
    conv.append(Message.assistant("a1"))  # call 1 is durable with its answer
    conv.before_model_call()  # call 2: the process dies during it, its answer never written
    reopened = Conversation(memory_store, "s", defer_count=True)
    assert reopened.model_call_count == 1
    with pytest.raises(ModelCallNotFound):
        view_at(memory_store, "s", model_call=2)
    reopened.before_model_call()  # the call made again after the restart takes number 2
    reopened.append(Message.assistant("a2"))
    assert [e.message.content[0]["text"] for e in view_at(memory_store, "s", model_call=1)] == ["q1"]
    assert [e.message.content[0]["text"] for e in view_at(memory_store, "s", model_call=2)] == ["q1", "a1"]


def test_calls_retried_without_a_write_between_are_each_counted_and_each_input_is_exact(
    memory_store: CompleteStore,
) -> None:
    conv = Conversation(memory_store, "s", defer_count=True)
    conv.append(Message.user("q"))
    conv.before_model_call()
    conv.after_model_call(None)  # the model failed: nothing written; the host calls again
    conv.before_model_call()
    conv.append(Message.assistant("a"))
    conv.before_model_call()
    conv.append(Message.assistant("b"))
    assert memory_store.load("s", "default").state.model_call_count == 3  # type: ignore[union-attr]
    seen = [[e.message.content[0]["text"] for e in view_at(memory_store, "s", model_call=n)] for n in (1, 2, 3)]
    assert seen == [["q"], ["q"], ["q", "a"]]


def test_a_view_left_mid_tool_is_repaired_before_the_call_even_when_counts_defer() -> None:
    store = RecordingStore()
    Conversation(store, "s").append(Message.user("go"), Message.tool_use("t1", "slow", {}))
    conv = Conversation(store, "s", defer_count=True)
    conv.before_model_call()  # the model must not get a toolUse without its result
    [repair] = store.committed[1:]
    assert repair.reduction is not None
    assert repair.reduction.strategy == "tool_pair_repair"
    assert repair.model_call_count == 1
    assert not conv.view.dangling_tool_uses()
    host = Conversation(RecordingStore(), "h")
    host.append(Message.user("go"), Message.tool_use("t2", "slow", {}))
    attempts = host.store.attempts  # type: ignore[attr-defined]
    host.before_model_call(defer_count=True)  # a host deferring explicitly repairs in its next write
    assert host.store.attempts == attempts  # type: ignore[attr-defined]


def test_on_sqlite_a_deferred_call_runs_no_statement_and_the_answer_carries_the_count(
    sqlite_store: SQLStore,
) -> None:
    conv = Conversation(sqlite_store, "s", manager=_idle_manager(), defer_count=True)
    conv.append(*chat(4))
    with trace_sqlite(sqlite_store) as idle:
        for _ in range(20):
            conv.before_model_call()
            conv.after_model_call(None)
    assert idle.statements == []
    with trace_sqlite(sqlite_store) as plain:
        conv.append(Message.user("q"))  # carries the 20 pending calls
    conv.before_model_call(defer_count=False)  # counted on its own
    with trace_sqlite(sqlite_store) as after:
        conv.append(Message.user("r"))  # carries nothing
    assert len(plain.work) == len(after.work)  # the count rode for free: no statement of its own
    assert Conversation(sqlite_store, "s").model_call_count == 21
