from __future__ import annotations

import pytest

from contextledger import (
    CharTokenCounter,
    Conversation,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from contextledger.errors import ConfigurationError, InvalidMessage, PinError
from contextledger.model.tokens import TokenCounter, projected_input_tokens
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import BACKENDS, assert_valid_view, backend_store, chat, model_call, overflow, tool_turn


@pytest.fixture(params=BACKENDS)
def any_store(request: pytest.FixtureRequest) -> CompleteStore:
    return backend_store(request, request.param)


# -- model_call_count ------------------------------------------------------------------------------


def test_model_call_count_is_persisted_and_restored(any_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=2, per_turn=3)
    conv = Conversation(any_store, "s", manager=manager)
    conv.append(*chat(3))
    model_call(conv)
    model_call(conv)
    assert conv.model_call_count == 2
    assert any_store.reductions("s", "default") == []

    # A restart: the count comes back, and the third call (counted across restarts) is managed.
    restored_manager = SlidingWindowConversationManager(window_size=2, per_turn=3)
    restored = Conversation(any_store, "s", manager=restored_manager)
    assert restored.model_call_count == 2
    model_call(restored)
    (reduction,) = any_store.reductions("s", "default")
    assert reduction.trigger == "per_turn"
    assert reduction.model_call_count == 3
    again = Conversation(any_store, "s")
    assert again.model_call_count == 3
    assert list(again.view.entries) == list(restored.view.entries)


def test_the_count_rides_in_the_reduction_commit(any_store: CompleteStore) -> None:
    conv = Conversation(any_store, "s", manager=SlidingWindowConversationManager(window_size=1, per_turn=True))
    conv.append(*chat(3))
    version = conv.version
    conv.before_model_call()
    # One commit carried both the per-turn reduction and the new count.
    assert conv.version == version + 1
    snapshot = any_store.load("s", "default")
    assert snapshot is not None
    assert snapshot.state.model_call_count == 1
    assert len(snapshot.entries) == 1


# -- restore -------------------------------------------------------------------------------------


def test_restore_returns_exactly_the_live_view(any_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    conv = Conversation(any_store, "s", manager=manager)
    turns = [m for i in range(3) for m in tool_turn(f"t{i}", "result " * 50)]
    conv.append(*turns)
    conv.pin(turns[4].message_id)
    assert model_call(conv, error=overflow()) is True
    conv.append(*chat(2, prefix="after-"))
    restored_manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    restored = Conversation(any_store, "s", manager=restored_manager)
    assert list(restored.view.entries) == list(conv.view.entries)
    assert restored.model_call_count == conv.model_call_count
    assert restored.version == conv.version
    assert restored_manager.state == manager.state
    assert [e.pinned for e in restored.view] == [e.pinned for e in conv.view]


def test_a_crash_mid_tool_is_repaired_on_restore(any_store: CompleteStore) -> None:
    conv = Conversation(any_store, "s", manager=SlidingWindowConversationManager(window_size=3))
    conv.append(Message.user("run it"), Message.tool_use("crash-1", "shell", {"cmd": "sleep 100"}))
    # The process dies here: the toolUse never gets its result.
    restored = Conversation(any_store, "s", manager=SlidingWindowConversationManager(window_size=3))
    assert restored.view.dangling_tool_uses() == ["crash-1"]
    reduction = restored.repair_interrupted_tools()
    assert reduction is not None
    assert reduction.trigger == "restore"
    assert reduction.strategy == "tool_pair_repair"
    assert_valid_view(restored)
    assert restored.view[-1].message.tool_result_ids == ["crash-1"]
    assert restored.repair_interrupted_tools() is None
    restored.append(Message.assistant("The command was interrupted."), *chat(4))
    restored.after_invocation()
    assert_valid_view(restored)


def test_pin_index_validates_bounds(any_store: CompleteStore) -> None:
    conv = Conversation(any_store, "s")
    conv.append(*chat(2))
    with pytest.raises(PinError, match="out of range"):
        conv.pin_index(2)
    assert conv.pin_index(-1) == conv.view[1].entry_id
    assert Conversation(any_store, "s").view[1].pinned


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "assistant", "content": [{"toolUse": {"name": "shell", "input": {}}}]},
        {"role": "robot", "content": [{"text": "beep"}]},
        {"role": "user", "content": "not a list"},
        "not a message",
        None,
    ],
)
def test_a_malformed_append_is_rejected_whole(any_store: CompleteStore, bad: object) -> None:
    manager = SlidingWindowConversationManager(window_size=2)
    conv = Conversation(any_store, "s", manager=manager)
    conv.append(*chat(2))
    before = (conv.version, list(conv.view.entries))
    with pytest.raises(InvalidMessage):
        conv.append(Message.user("fine"), bad)  # type: ignore[arg-type]
    assert (conv.version, list(conv.view.entries)) == before
    # Nothing half-written: a restart sees the same view, and managing it still works.
    restored = Conversation(any_store, "s", manager=SlidingWindowConversationManager(window_size=2))
    assert (restored.version, list(restored.view.entries)) == before
    restored.append(*chat(2, prefix="more-"))
    assert restored.reduce() is not None
    assert_valid_view(restored)


@pytest.mark.parametrize(("session_id", "agent_id"), [("", "a"), ("s", ""), (5, "a"), ("s", None)])
def test_conversation_needs_ids(memory_store: CompleteStore, session_id: str, agent_id: str) -> None:
    with pytest.raises(ConfigurationError, match="non-empty strings"):
        Conversation(memory_store, session_id, agent_id)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"manager": "sliding_window"}, "manager must be a ConversationManager"),
        ({"token_counter": 4}, "token_counter must have a count"),
        ({"context_window_limit": -5}, "context_window_limit must be a positive int"),
        ({"context_window_limit": 0}, "context_window_limit must be a positive int"),
        ({"max_retries": -1}, "max_retries must be an int >= 0"),
        ({"overflow_errors": ("TooLong",)}, "overflow_errors must be exception types"),
    ],
)
def test_conversation_options_are_checked(memory_store: CompleteStore, options: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Conversation(memory_store, "s", **options)  # type: ignore[arg-type]
    assert memory_store.load("s", "default") is None


@pytest.mark.parametrize("index", ["0", 1.0, None, True])
def test_pin_index_needs_an_int(any_store: CompleteStore, index: object) -> None:
    conv = Conversation(any_store, "s")
    conv.append(*chat(2))
    version = conv.version
    with pytest.raises(PinError, match="index must be an int"):
        conv.pin_index(index)  # type: ignore[arg-type]
    assert conv.version == version
    assert not any(e.pinned for e in Conversation(any_store, "s").view)


def test_unknown_trigger_and_bad_agent_state_are_rejected(any_store: CompleteStore) -> None:
    conv = Conversation(any_store, "s", manager=SlidingWindowConversationManager(window_size=1))
    conv.append(*chat(3))
    version = conv.version
    with pytest.raises(ConfigurationError, match="unknown trigger 'per-turn'"):
        conv.reduce("per-turn")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown trigger"):
        conv.apply_plan(lambda v: None, trigger="later")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="agent state must be a mapping"):
        conv.set_agent_state([("k", "v")])  # type: ignore[arg-type]
    assert conv.version == version
    assert any_store.reductions("s") == []
    assert len(Conversation(any_store, "s").view) == 3


# -- token estimation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ([{"text": ""}], 4),
        ([{"text": "abcd"}], 5),
        ([{"text": "abcde"}], 6),
        ([{"text": "x" * 400}], 104),
        ([{"image": {"format": "png", "source": {"bytes": b"123"}}}], 1004),
        ([{"toolResult": {"toolUseId": "t", "content": [{"text": "x" * 40}]}}], 14),
        ([{"cachePoint": {"type": "default"}}], 4),
    ],
)
def test_char_token_counter(content: list[dict[str, object]], expected: int) -> None:
    counter = CharTokenCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count(Message(role="user", content=content)) == expected


def test_char_token_counter_is_configurable() -> None:
    counter = CharTokenCounter(chars_per_token=2, per_message=0, per_media=10)
    assert counter.count(Message.user("x" * 10)) == 5
    with pytest.raises(ValueError, match="positive"):
        CharTokenCounter(chars_per_token=0)


def test_projected_input_tokens_starts_from_the_last_reported_usage() -> None:
    messages = [
        Message.user("a"),
        Message.assistant("b", metadata={"usage": {"inputTokens": 100, "outputTokens": 20}}),
        Message.user("c"),
        Message.assistant("d"),
    ]
    assert projected_input_tokens(messages, [1, 2, 3, 4]) == 120 + 3 + 4
    assert projected_input_tokens(messages[:1], [7]) == 7
    assert projected_input_tokens([], []) == 0


def test_conversation_projection_uses_stored_estimates(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s", token_counter=CharTokenCounter(per_message=0))
    conv.append(Message.user("x" * 40))
    assert conv.projected_input_tokens() == 10
    conv.append(Message.assistant("y", metadata={"usage": {"inputTokens": 500, "outputTokens": 5}}))
    conv.append(Message.user("z" * 8))
    assert conv.projected_input_tokens() == 505 + 2
