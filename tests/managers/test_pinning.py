from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from contextledger import (
    PIN_MESSAGE_TOOL_SPEC,
    Conversation,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
    handle_pin_message_tool,
    is_pinned,
    pin_message,
    unpin_message,
)
from contextledger.errors import PinError, ReductionFailed
from contextledger.managers.policy import PolicyManager
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import chat, ids, model_call, overflow, tool_turn, view_ids

# -- helpers -------------------------------------------------------------------------------------


def test_pin_and_unpin_return_copies() -> None:
    message = Message.user("remember: the code is 7", metadata={"usage": {"inputTokens": 3}})
    pinned = pin_message(message)
    assert pinned is not message
    assert is_pinned(pinned)
    assert not is_pinned(message)
    assert pinned.message_id == message.message_id
    assert pinned.metadata["custom"] == {"pinned": True}
    assert pinned.metadata["usage"] == {"inputTokens": 3}
    unpinned = unpin_message(pinned)
    assert not is_pinned(unpinned)
    assert is_pinned(pinned)
    assert unpinned.metadata == message.metadata


def test_pinning_strands_dicts_keeps_their_shape() -> None:
    raw: dict[str, Any] = {"role": "user", "content": [{"text": "hi"}]}
    pinned = pin_message(raw)
    assert pinned == {"role": "user", "content": [{"text": "hi"}], "metadata": {"custom": {"pinned": True}}}
    assert "metadata" not in raw
    assert is_pinned(pinned)
    assert unpin_message(pinned) == {"role": "user", "content": [{"text": "hi"}], "metadata": {}}
    assert unpin_message(raw) == raw
    assert Message.from_strands(pinned).pinned


def test_is_pinned_with_an_index_protects_the_tool_pair_partner() -> None:
    turn = tool_turn("x")
    turn[2] = pin_message(turn[2])  # the toolResult
    assert [is_pinned(turn, i) for i in range(len(turn))] == [False, True, True, False]
    assert is_pinned(turn, -2)
    assert not is_pinned(turn[1])
    as_dicts = [m.to_strands() for m in turn]
    assert [is_pinned(as_dicts, i) for i in range(len(turn))] == [False, True, True, False]


@pytest.mark.parametrize("index", [4, -5, 100])
def test_is_pinned_index_out_of_range(index: int) -> None:
    with pytest.raises(PinError, match="out of range"):
        is_pinned(tool_turn("x"), index)


def test_is_pinned_rejects_mixed_up_arguments() -> None:
    with pytest.raises(TypeError):
        is_pinned(tool_turn("x"))  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        is_pinned(Message.user("a"), 0)  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        pin_message("text")  # type: ignore[call-overload]


# -- pins in managers ----------------------------------------------------------------------------

FACTORIES: dict[str, Callable[[dict[str, int]], PolicyManager]] = {
    "sliding_window": lambda protected: SlidingWindowConversationManager(window_size=2, protected_messages=protected),
    "summarizing": lambda protected: SummarizingConversationManager(
        summary_ratio=1.0, preserve_recent_messages=0, protected_messages=protected
    ),
    "turn_window": lambda protected: TurnWindowConversationManager(max_user_turns=1, protected_messages=protected),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("protected", [{"first": 2, "last": 1}, {"first": 0, "last": 3}, {"first": 1}])
def test_pins_and_protected_ranges_survive_every_manager(
    memory_store: CompleteStore, name: str, protected: dict[str, int]
) -> None:
    manager: PolicyManager = FACTORIES[name](protected)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = [m for i in range(4) for m in tool_turn(f"t{i}")] + chat(4)
    conv.append(*messages)
    pinned = [messages[5], messages[9]]  # a toolUse and a toolResult of two different turns
    for m in pinned:
        conv.pin(m.message_id)
    first_ids = ids(messages[: protected.get("first", 0)])
    last_ids = ids(messages[len(messages) - protected.get("last", 0) :])
    for _ in range(3):
        conv.reduce("manual")
        with contextlib.suppress(ReductionFailed):  # nothing left to reduce is fine here
            model_call(conv, error=overflow())
    kept = set(view_ids(conv))
    assert memory_store.reductions("s", "default"), "the managers did reduce"
    partners = {messages[6].message_id, messages[10].message_id}  # result of 5, use of 9
    assert {m.message_id for m in pinned} | partners <= kept
    assert set(first_ids) <= kept
    assert set(last_ids) <= kept
    for entry in conv.view:
        if entry.entry_id in {m.message_id for m in pinned}:
            assert entry.pinned
    restored = Conversation(memory_store, "s")
    assert [e.pinned for e in restored.view] == [e.pinned for e in conv.view]


# -- the pin_message tool -----------------------------------------------------------------------


def test_pin_tool_spec_shape() -> None:
    assert PIN_MESSAGE_TOOL_SPEC["name"] == "pin_message"
    schema = PIN_MESSAGE_TOOL_SPEC["inputSchema"]["json"]
    assert schema["type"] == "object"
    assert schema["properties"]["index"]["type"] == "integer"
    assert schema["properties"]["action"]["enum"] == ["pin", "unpin"]
    assert schema["properties"]["action"]["default"] == "pin"
    assert schema["required"] == ["index"]
    assert PIN_MESSAGE_TOOL_SPEC["description"]


def test_pin_tool_pins_and_unpins_and_persists(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s")
    messages = chat(4)
    conv.append(*messages)
    result = handle_pin_message_tool(conv, {"index": 1}, tool_use_id="tu-1")
    assert result["status"] == "success"
    assert result["toolUseId"] == "tu-1"
    assert "pinned" in result["content"][0]["text"]
    assert conv.view[1].pinned
    assert Conversation(memory_store, "s").view[1].pinned
    assert memory_store.history("s", "default")[1].pinned
    result = handle_pin_message_tool(conv, {"index": -3, "action": "unpin"})
    assert result == {"status": "success", "content": [{"text": f"message -3 ({messages[1].message_id}) unpinned"}]}
    assert not Conversation(memory_store, "s").view[1].pinned


@pytest.mark.parametrize(
    ("tool_input", "match"),
    [
        ({"index": 4}, "out of range"),
        ({"index": -5}, "out of range"),
        ({"index": 10_000}, "out of range"),
        ({"index": "1"}, "must be an integer"),
        ({"index": 1.0}, "must be an integer"),
        ({"index": True}, "must be an integer"),
        ({}, "'index' is required"),
        ({"index": 1, "action": "toggle"}, "'pin' or 'unpin'"),
        ({"index": 1, "action": None}, "'pin' or 'unpin'"),
        ({"index": 1, "why": "important"}, "unknown argument"),
        ([1], "expects an object"),
        ("pin 1", "expects an object"),
    ],
)
def test_pin_tool_errors_are_results_not_exceptions(
    memory_store: CompleteStore, tool_input: object, match: str
) -> None:
    conv = Conversation(memory_store, "s")
    conv.append(*chat(4))
    version = conv.version
    result = handle_pin_message_tool(conv, tool_input)
    assert result["status"] == "error"
    assert match in result["content"][0]["text"]
    assert conv.version == version
    assert not any(e.pinned for e in conv.view)


def test_pin_tool_on_an_empty_conversation(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s")
    result = handle_pin_message_tool(conv, {"index": 0})
    assert result["status"] == "error"
    assert "no messages" in result["content"][0]["text"]


def test_pin_tool_refuses_summaries(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s", manager=SummarizingConversationManager(preserve_recent_messages=2))
    conv.append(*chat(10))
    conv.reduce("manual")
    assert conv.view[0].kind == "summary"
    result = handle_pin_message_tool(conv, {"index": 0})
    assert result["status"] == "error"
    assert "summary" in result["content"][0]["text"]
    with pytest.raises(PinError):
        conv.pin_index(0)
