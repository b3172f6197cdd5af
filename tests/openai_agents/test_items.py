"""Responses input items <-> ledger messages: lossless both ways, tool pairs linked by call id."""

from __future__ import annotations

import base64
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import ConfigurationError, Conversation, InvalidMessage, Message, SlidingWindowConversationManager
from contextledger.core.view import View
from contextledger.integrations.openai_agents.items import (
    item_to_message,
    items_to_messages,
)
from contextledger.integrations.openai_agents.rendering import (
    kept_item,
    messages_to_items,
    newest_messages,
)
from contextledger.model.records import ViewEntry
from contextledger.stores.memory import MemoryStore
from tests.openai_agents.strategies import ITEM_STRATEGIES, any_item, tool_pairs
from tests.soak import examples

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-pixels-").decode("ascii")


def view_of(messages: list[Message]) -> View:
    return View([ViewEntry(entry_id=m.message_id, seq=i, message=m) for i, m in enumerate(messages)])


# -- the identity -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(ITEM_STRATEGIES))
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_item_type_round_trips(kind: str, data: st.DataObject) -> None:
    item = data.draw(ITEM_STRATEGIES[kind])
    original = {**item}
    message = item_to_message(item)
    assert item == original, "the caller's item is not modified"
    assert messages_to_items([message]) == [item]
    # ... and through the storage codec every store uses.
    stored = Message.from_record(message.to_record())
    assert messages_to_items([stored]) == [item]


@settings(max_examples=examples(150), deadline=None)
@given(items=st.lists(any_item, max_size=8))
def test_item_sequences_round_trip_in_order(items: list[dict[str, Any]]) -> None:
    messages = items_to_messages(items)
    assert len(messages) == len(items)
    assert messages_to_items(messages) == items
    assert messages_to_items([Message.from_record(m.to_record()) for m in messages]) == items


@settings(max_examples=examples(40), deadline=None)
@given(items=st.lists(any_item, min_size=1, max_size=6))
def test_items_survive_a_conversation_and_a_restart(items: list[dict[str, Any]]) -> None:
    store = MemoryStore()
    Conversation(store, "s").append(*items_to_messages(items))
    assert messages_to_items(Conversation(store, "s").messages) == items


# -- tool pairs -------------------------------------------------------------------------------


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data(), call_id=st.text(alphabet="abc123_", min_size=1, max_size=8))
def test_a_call_and_its_output_are_one_tool_pair(data: st.DataObject, call_id: str) -> None:
    call, output = data.draw(tool_pairs(call_id))
    before = data.draw(st.lists(ITEM_STRATEGIES["easy_message"], max_size=2))
    messages = items_to_messages([*before, call, output])
    view = view_of(messages)
    n = len(before)
    assert messages[n].tool_use_ids == [call_id]
    assert messages[n + 1].tool_result_ids == [call_id]
    assert view.group_of(n) == [n, n + 1]
    assert view.dangling_tool_uses() == []
    assert view.orphan_results() == []
    assert messages_to_items(messages) == [*before, call, output]


def test_parallel_calls_pair_by_call_id_not_by_position() -> None:
    items = [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "c2", "output": "rain"},
        {"type": "function_call_output", "call_id": "c1", "output": "sun"},
    ]
    view = view_of(items_to_messages(items))
    assert view.group_of(1) == [1, 4]
    assert view.group_of(2) == [2, 3]


def test_a_pinned_call_pins_its_output() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "type": "computer_call",
            "id": "cu1",
            "call_id": "c1",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
            "status": "completed",
        },
        {
            "type": "computer_call_output",
            "call_id": "c1",
            "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{PNG}"},
        },
    ]
    messages = items_to_messages(items)
    messages[1] = messages[1].with_pin(True)
    view = view_of(messages)
    assert view.is_pinned(2)
    assert messages_to_items(messages) == items, "a pin does not change the item"


# -- the projection managers and token counters see ----------------------------------------------


def test_projection_of_the_common_types() -> None:
    fc = item_to_message({"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1}'})
    assert fc.role == "assistant"
    assert fc.content == [{"toolUse": {"toolUseId": "c1", "name": "add", "input": {"a": 1}}}]
    out = item_to_message({"type": "function_call_output", "call_id": "c1", "output": "2"})
    assert out.role == "user"
    assert out.content == [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "2"}]}}]
    image = item_to_message(
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "what is it?"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            ],
        }
    )
    assert image.content == [
        {"text": "what is it?"},
        {"image": {"format": "png", "source": {"bytes": base64.b64decode(PNG)}}},
    ]
    dev = item_to_message({"role": "developer", "content": "be brief"})
    assert (dev.role, dev.content) == ("system", [{"text": "be brief"}])
    rs = item_to_message({"type": "reasoning", "id": "rs1", "summary": [{"type": "summary_text", "text": "think"}]})
    assert rs.content == [{"reasoningContent": {"reasoningText": {"text": "think"}}}]
    web = {"type": "web_search_call", "id": "ws1", "status": "completed", "action": {"type": "search", "query": "q"}}
    assert item_to_message(web).content == [{"json": web}]
    shell_out = item_to_message({"type": "local_shell_call_output", "id": "c9", "output": "ok"})
    assert shell_out.tool_result_ids == ["c9"]


# -- messages that never were items --------------------------------------------------------------


def test_foreign_messages_render_as_items() -> None:
    summary = Message.user("Summary of the earlier conversation: the user likes tea.")
    assert messages_to_items([summary]) == [
        {"role": "user", "content": "Summary of the earlier conversation: the user likes tea."}
    ]
    strands_turn = Message(
        role="assistant",
        content=[{"text": "Let me add."}, {"toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 1}}}],
    )
    result = Message.tool_result("t1", "2")
    assert messages_to_items([strands_turn, result]) == [
        {"role": "assistant", "content": "Let me add."},
        {"type": "function_call", "call_id": "t1", "name": "add", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "t1", "output": "2"},
    ]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "interrupted"},
        ),
        (
            {
                "type": "local_shell_call",
                "id": "ls",
                "call_id": "c1",
                "action": {"type": "exec", "command": ["ls"], "env": {}},
                "status": "completed",
            },
            {"type": "local_shell_call_output", "call_id": "c1", "output": "interrupted"},
        ),
        (
            {
                "type": "apply_patch_call",
                "call_id": "c1",
                "status": "completed",
                "operation": {"type": "delete_file", "path": "a"},
            },
            {"type": "apply_patch_call_output", "call_id": "c1", "status": "failed", "output": "interrupted"},
        ),
        (
            {"type": "custom_tool_call", "call_id": "c1", "name": "grammar", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "interrupted"},
        ),
        (
            {"type": "mcp_approval_request", "id": "c1", "arguments": "{}", "name": "rm", "server_label": "fs"},
            {"type": "mcp_approval_response", "approval_request_id": "c1", "approve": False, "reason": "interrupted"},
        ),
        (
            {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}},
            {
                "type": "shell_call_output",
                "call_id": "c1",
                "output": [{"stdout": "", "stderr": "interrupted", "outcome": {"type": "exit", "exit_code": 1}}],
            },
        ),
    ],
)
def test_a_repaired_result_answers_its_call_in_the_calls_own_output_type(
    call: dict[str, Any], expected: dict[str, Any]
) -> None:
    # What Conversation.repair_interrupted_tools appends for a call left without a result.
    repair = Message.tool_result("c1", "interrupted", status="error")
    items = messages_to_items([item_to_message(call), repair])
    assert items == [call, expected]


def test_a_crash_mid_tool_is_repaired_into_a_valid_item_sequence() -> None:
    store = MemoryStore()
    items = [
        {"role": "user", "content": "list files"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
    ]
    Conversation(store, "s").append(*items_to_messages(items))
    reopened = Conversation(store, "s")
    reopened.repair_interrupted_tools()
    restored = messages_to_items(reopened.messages)
    assert restored[:2] == items
    assert restored[2]["type"] == "function_call_output"
    assert restored[2]["call_id"] == "c1"


# -- revisions reach the host where the item type can carry them ---------------------------------


def test_a_truncated_tool_output_comes_back_truncated_with_its_other_fields() -> None:
    store = MemoryStore()
    conversation = Conversation(
        store, "s", manager=SlidingWindowConversationManager(window_size=50, truncate_threshold=100)
    )
    big = "x" * 5000
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "read it"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "read",
            "arguments": "{}",
            "id": "fc1",
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "c1", "output": big, "x_extra": [1, 2]},
        {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
        {"role": "user", "content": "thanks"},
    ]
    conversation.append(*items_to_messages(items))
    reduction = conversation.reduce("reactive")
    assert reduction is not None
    assert reduction.revised
    restored = messages_to_items(conversation.messages)
    output = next(i for i in restored if i.get("type") == "function_call_output")
    assert output["call_id"] == "c1"
    assert output["x_extra"] == [1, 2]
    assert isinstance(output["output"], str)
    assert len(output["output"]) < len(big)
    assert [i for i in restored if i.get("type") != "function_call_output"] == [
        i for i in items if i.get("type") != "function_call_output"
    ]


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("hello", "an item is a dict"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "non-empty string 'call_id'"),
        ({"type": "function_call_output", "call_id": "", "output": "x"}, "non-empty string 'call_id'"),
        ({"type": "mcp_approval_response", "approve": True}, "approval_request_id"),
        ({"role": "tool", "content": "x"}, "role is one of"),
        ({"role": ["user"], "content": "x"}, "role is one of"),
        ({"role": "user", "content": 3}, "content is a string or a list"),
        ({"type": "message", "role": "user", "content": ("a", "tuple")}, "tuple is not a JSON value"),
        ({"type": "x", "data": b"bytes"}, "bytes is not a JSON value"),
        ({"type": "x", "score": math.nan}, "not a JSON number"),
        ({"type": "x", 1: "int key"}, "keys are strings"),
    ],
)
def test_invalid_items_are_rejected_with_a_clear_error(item: Any, match: str) -> None:
    with pytest.raises(InvalidMessage, match=match):
        item_to_message(item)


@pytest.mark.parametrize(
    "item",
    [
        {"__enc__": 1, "v": 1, "kid": "hkdf-v1", "payload": "gAAAAAB..."},  # the SDK's EncryptedSession envelope
        {"content": "no role, no type"},
        {"type": 5, "data": [1, 2.5, None, {"deep": True}]},
        {},
    ],
)
def test_an_item_with_neither_type_nor_role_is_kept_exactly(item: dict[str, Any]) -> None:
    message = item_to_message(item)
    assert message.role == "user"  # opaque: any view may open with it, managers keep it whole
    assert messages_to_items([message]) == [item]
    conversation = Conversation(MemoryStore(), "s")
    conversation.append(message)
    assert messages_to_items(Conversation(conversation.store, "s").messages) == [item]


def _holding_itself() -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output", "call_id": "c1", "output": "x"}
    item["extra"] = [item]
    return item


def _nested(levels: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"inner": value}
    return {"type": "x", "data": value}


@pytest.mark.parametrize("item", [_holding_itself(), _nested(150)], ids=["holds-itself", "150-levels"])
def test_an_item_that_holds_itself_or_nests_too_deep_is_refused_typed(item: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessage, match="nested more than 100 levels deep"):
        item_to_message(item)
    conversation = Conversation(MemoryStore(), "s")
    with pytest.raises(InvalidMessage, match=r"item 1: .*nested more than"):
        conversation.append(*items_to_messages([{"role": "user", "content": "ok"}, item]))
    assert conversation.messages == []


def test_an_item_nested_as_deep_as_a_message_may_be_is_kept() -> None:
    item = _nested(90)
    assert messages_to_items([item_to_message(item)]) == [item]


def test_a_bad_item_in_a_batch_names_its_index_and_nothing_is_appended() -> None:
    store = MemoryStore()
    conversation = Conversation(store, "s")
    with pytest.raises(InvalidMessage, match=r"item 1: "):
        conversation.append(*items_to_messages([{"role": "user", "content": "ok"}, {"type": "function_call"}]))
    assert conversation.messages == []


def test_kept_item_is_the_original() -> None:
    item = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert kept_item(item_to_message(item)) == item
    assert kept_item(Message.user("plain")) is None


# -- get_items(limit) -------------------------------------------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Messages and tool pairs, with parallel calls answered in any order."""
    items: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(0, 5))):
        items.append(draw(ITEM_STRATEGIES["easy_message"]))
        pairs = [draw(tool_pairs(f"t{turn}_{n}")) for n in range(draw(st.integers(0, 3)))]
        items += [call for call, _ in pairs]
        items += draw(st.permutations([output for _, output in pairs]))
    return items


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=sessions(), limit=st.integers(0, 12))
def test_the_newest_items_never_split_a_tool_pair(items: list[dict[str, Any]], limit: int) -> None:
    view = view_of(items_to_messages(items))
    newest = messages_to_items(newest_messages(view, limit))
    assert len(newest) <= limit
    tail = items[max(len(items) - limit, 0) :]
    rest = iter(tail)
    assert all(any(n == t for t in rest) for n in newest), "an ordered selection of the newest items"
    kept = view_of(items_to_messages(newest))
    assert kept.dangling_tool_uses() == []
    assert kept.orphan_results() == []
    whole = [t for t in tail if all(i in tail for i in _partners(t, items))]
    assert newest == whole, "everything the limit did not cut through is kept"
    assert messages_to_items(newest_messages(view, None)) == items


def _partners(item: dict[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = item_to_message(item).tool_ids
    return [i for i in items if i is item or ids & item_to_message(i).tool_ids]


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_a_bad_limit_is_rejected(limit: Any) -> None:
    with pytest.raises(ConfigurationError, match="limit must be"):
        newest_messages(view_of([]), limit)
