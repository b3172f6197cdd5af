from __future__ import annotations

import logging

import pytest

from contextledger import Conversation, Message, SlidingWindowConversationManager
from contextledger.errors import ConfigurationError, ReductionFailed
from contextledger.managers.base import ReductionRequest
from contextledger.managers.sliding_window import truncate_tool_result_content
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import (
    assert_valid_view,
    chat,
    ids,
    model_call,
    overflow,
    tool_turn,
    triggers,
    view_ids,
)

# -- per_turn ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_turn", "calls", "reduced_at"),
    [
        (False, 6, []),
        (True, 4, [1, 2, 3, 4]),
        (1, 3, [1, 2, 3]),
        (2, 6, [2, 4, 6]),
        (3, 7, [3, 6]),
        (5, 4, []),
    ],
)
def test_per_turn_manages_before_the_right_model_calls(
    memory_store: CompleteStore, per_turn: bool | int, calls: int, reduced_at: list[int]
) -> None:
    manager = SlidingWindowConversationManager(window_size=2, per_turn=per_turn)
    conv = Conversation(memory_store, "s", manager=manager)
    for call in range(calls):
        conv.append(*chat(3, prefix=f"c{call}-"))
        model_call(conv)
    reductions = memory_store.reductions("s", "default")
    assert [r.model_call_count for r in reductions] == reduced_at
    assert {r.trigger for r in reductions} <= {"per_turn"}
    assert conv.model_call_count == calls
    if reduced_at:
        assert all(r.messages_after <= 2 for r in reductions)


def test_per_turn_can_change_at_run_time(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=2)
    conv = Conversation(memory_store, "s", manager=manager)
    for call in range(2):
        conv.append(*chat(3, prefix=f"a{call}-"))
        model_call(conv)
    assert triggers(memory_store, "s") == []
    manager.per_turn = 3
    for call in range(4):
        conv.append(*chat(3, prefix=f"b{call}-"))
        model_call(conv)
    assert [r.model_call_count for r in memory_store.reductions("s", "default")] == [3, 6]
    manager.per_turn = True
    conv.append(*chat(3, prefix="c-"))
    model_call(conv)
    assert [r.model_call_count for r in memory_store.reductions("s", "default")] == [3, 6, 7]
    # Trimmed to the window, the boundary then advances to the next user prompt.
    assert [e.message.role for e in conv.view] == ["user"]
    manager.per_turn = False
    conv.append(*chat(4, prefix="d-"))
    model_call(conv)
    assert len(conv.view) == 5


@pytest.mark.parametrize("value", [0, -1, 2.5, "3", None])
def test_per_turn_is_validated_also_at_run_time(value: object) -> None:
    manager = SlidingWindowConversationManager(per_turn=2)
    with pytest.raises(ConfigurationError, match="per_turn"):
        manager.per_turn = value  # type: ignore[assignment]
    assert manager.per_turn == 2
    with pytest.raises(ConfigurationError, match="per_turn"):
        SlidingWindowConversationManager(per_turn=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window_size": 0}, "window_size"),
        ({"window_size": True}, "window_size"),
        ({"window_size": 2.0}, "window_size"),
        ({"should_truncate_results": "yes"}, "should_truncate_results"),
        ({"truncate_threshold": 10}, "truncate_threshold"),
        ({"protected_messages": {"first": -1}}, "protected_messages"),
        ({"protected_messages": {"middle": 1}}, "protected_messages"),
        ({"protected_messages": [1, 2]}, "protected_messages"),
        ({"proactive_compression": 0.5}, "proactive_compression"),
    ],
)
def test_invalid_options_raise_configuration_error(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        SlidingWindowConversationManager(**kwargs)  # type: ignore[arg-type]


# -- end of invocation ---------------------------------------------------------------------


def test_end_of_invocation_trims_to_the_window(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=4)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(10)
    conv.append(*messages)
    conv.after_invocation()
    assert view_ids(conv) == ids(messages[-4:])
    assert triggers(memory_store, "s") == ["end_of_invocation"]
    conv.after_invocation()  # within the window: nothing to do
    assert triggers(memory_store, "s") == ["end_of_invocation"]


def test_trim_never_splits_a_tool_pair(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=3)
    conv = Conversation(memory_store, "s", manager=manager)
    first, turn = tool_turn("w"), tool_turn("x")  # user, toolUse, toolResult, answer
    conv.append(*first, *turn)
    conv.after_invocation()
    # The first turn goes; the newest prompt is never evicted, and the pair after it goes
    # as a whole (never leaving a toolResult or an orphan toolUse behind).
    assert view_ids(conv) == ids([turn[0], turn[3]])
    manager.window_size = 1
    conv.append(Message.user("next"))
    conv.after_invocation()
    assert [e.message.plain_text for e in conv.view] == ["next"]
    assert_valid_view(conv)


def test_parallel_tool_calls_are_one_group(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=2)
    conv = Conversation(memory_store, "s", manager=manager)
    use = Message(
        role="assistant",
        content=[
            {"toolUse": {"toolUseId": "a", "name": "f", "input": {}}},
            {"toolUse": {"toolUseId": "b", "name": "f", "input": {}}},
        ],
    )
    result_a, result_b = Message.tool_result("a", "1"), Message.tool_result("b", "2")
    last = Message.assistant("done")
    conv.append(Message.user("go"), use, result_a, result_b, last, Message.user("next"))
    conv.after_invocation()
    assert [e.message.plain_text for e in conv.view] == ["next"]
    assert_valid_view(conv)


# -- proactive and reactive ------------------------------------------------------------------


def test_proactive_evicts_at_least_one_group_within_the_window(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=40, proactive_compression=True)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(6)
    conv.append(*messages)
    model_call(conv, limit=1000, projected=900)
    # The oldest turn goes: the view opens on the next user prompt.
    assert view_ids(conv) == ids(messages[2:])
    assert triggers(memory_store, "s") == ["proactive"]


def test_reactive_reduces_and_asks_for_a_retry(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=40)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(6)
    conv.append(*messages)
    assert model_call(conv, error=overflow()) is True
    assert view_ids(conv) == ids(messages[2:])
    (reduction,) = memory_store.reductions("s", "default")
    assert reduction.trigger == "reactive"
    assert reduction.error is not None
    assert "ContextWindowOverflowError" in reduction.error


def test_reactive_raises_when_nothing_can_be_reduced(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=1, protected_messages={"first": 1, "last": 1})
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(3)
    conv.append(*messages)
    conv.pin(messages[1].message_id)
    error = overflow()
    conv.before_model_call()
    with pytest.raises(ReductionFailed, match="nothing left to reduce") as info:
        conv.after_model_call(error)
    assert info.value.__cause__ is error
    assert view_ids(conv) == ids(messages)
    assert memory_store.reductions("s", "default") == []
    assert manager.state.reductions == 0


def test_non_overflow_errors_are_left_to_the_host(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=1)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(4))
    assert model_call(conv, error=RuntimeError("throttled")) is False
    assert memory_store.reductions("s", "default") == []


# -- tool-result truncation --------------------------------------------------------------------


def _big_tool_history(conv: Conversation, size: int = 6000) -> tuple[list[Message], list[Message]]:
    old = tool_turn("old", "x" * size)
    recent = tool_turn("new", "y" * size)[:3]  # the current turn: its result is being read now
    conv.append(*old, *recent)
    return old, recent


@pytest.mark.parametrize("trigger", ["per_turn", "proactive", "end_of_invocation", "manual"])
def test_tool_results_are_never_truncated_outside_reactive(memory_store: CompleteStore, trigger: str) -> None:
    manager = SlidingWindowConversationManager(window_size=40, per_turn=True, proactive_compression=True)
    conv = Conversation(memory_store, "s", manager=manager)
    _big_tool_history(conv)
    if trigger == "per_turn":
        manager.proactive_compression = None
        model_call(conv)
    elif trigger == "proactive":
        manager.per_turn = False
        model_call(conv, limit=100, projected=100)
    elif trigger == "end_of_invocation":
        conv.after_invocation()
    else:
        conv.reduce("manual")
    assert memory_store.revisions("s", "default") == []
    assert all(r.revised == () for r in memory_store.reductions("s", "default"))


def test_reactive_truncates_old_tool_results_and_keeps_the_original(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=40, truncate_threshold=1000)
    conv = Conversation(memory_store, "s", manager=manager)
    old, recent = _big_tool_history(conv)
    before_len = len(conv.view)
    assert model_call(conv, error=overflow()) is True
    # Truncation was enough: nothing evicted.
    assert len(conv.view) == before_len
    (revision,) = memory_store.revisions("s", "default")
    assert revision.message_id == old[2].message_id
    assert revision.original == old[2].to_record()["content"]
    assert revision.reason == "truncate_tool_result"
    truncated = conv.view[conv.view.index_of(old[2].message_id) or 0].message
    assert truncated.tool_result_ids == ["old-t0"]
    text = truncated.plain_text
    assert "characters truncated" in text
    assert text.startswith("x" * 100)
    assert text.endswith("x" * 100)
    assert len(text) < 1000
    # The current turn's result is untouched.
    assert conv.view[-1].message == recent[2]
    # History still holds the message (its current revision); the revision holds the original.
    history = {h.message.message_id: h for h in memory_store.history("s", "default")}
    assert history[old[2].message_id].revision_count == 1
    # A second overflow has nothing left to truncate: it trims instead.
    assert model_call(conv, error=overflow()) is True
    assert len(memory_store.revisions("s", "default")) == 1
    assert len(conv.view) < before_len
    assert_valid_view(conv)


def test_reactive_truncation_skips_pinned_and_protected_results(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=40, truncate_threshold=1000)
    conv = Conversation(memory_store, "s", manager=manager)
    first = tool_turn("a", "x" * 5000)
    second = tool_turn("b", "x" * 5000)
    conv.append(*first, *second, Message.user("next"))
    conv.pin(first[1].message_id)  # the toolUse: its result is protected through the pair
    manager.protected_messages = {"first": 0, "last": 3}  # covers second's result and answer
    assert model_call(conv, error=overflow()) is True
    # Neither result could be truncated; one group was evicted instead.
    assert memory_store.revisions("s", "default") == []
    assert first[1].message_id in view_ids(conv)
    assert first[2].message_id in view_ids(conv)


def test_reactive_without_truncation_trims(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=40, should_truncate_results=False)
    conv = Conversation(memory_store, "s", manager=manager)
    old, _ = _big_tool_history(conv)
    assert model_call(conv, error=overflow()) is True
    assert memory_store.revisions("s", "default") == []
    assert old[0].message_id not in view_ids(conv)


def test_reactive_over_the_window_truncates_and_trims(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=4, truncate_threshold=1000)
    conv = Conversation(memory_store, "s", manager=manager)
    _big_tool_history(conv)
    conv.append(Message.assistant("thinking"), Message.user("more"))
    assert model_call(conv, error=overflow()) is True
    assert len(conv.view) <= 4
    assert_valid_view(conv)


@pytest.mark.parametrize(
    ("block", "changed"),
    [
        ({"text": "a" * 50}, False),
        ({"text": "a" * 500}, True),
        ({"json": {"rows": list(range(200))}}, True),
        ({"json": {"ok": True}}, False),
        ({"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}, True),
        ({"document": {"format": "pdf", "name": "d", "source": {"bytes": b"%PDF"}}}, True),
    ],
)
def test_truncate_tool_result_content(block: dict[str, object], changed: bool) -> None:
    content = [{"toolResult": {"toolUseId": "t", "status": "success", "content": [block]}}]
    new, saved = truncate_tool_result_content(content, 200)
    assert (saved > 0) is changed
    assert new[0]["toolResult"]["toolUseId"] == "t"
    assert new[0]["toolResult"]["status"] == "success"
    if changed:
        assert "text" in new[0]["toolResult"]["content"][0]
        # Truncated output is stable: truncating again changes nothing.
        assert truncate_tool_result_content(new, 200)[1] == 0
    else:
        assert new == content


# -- pins and protected ranges -------------------------------------------------------------------


def test_pins_and_protected_ranges_survive_trimming(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=3, protected_messages={"first": 1, "last": 1})
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(12)
    conv.append(*messages)
    conv.pin(messages[5].message_id)
    conv.after_invocation()
    # messages[10] is the newest prompt: never evicted.
    assert view_ids(conv) == ids([messages[0], messages[5], messages[10], messages[11]])


@pytest.mark.parametrize("pinned_index", [1, 2])
def test_a_pinned_entry_keeps_its_tool_pair_partner(memory_store: CompleteStore, pinned_index: int) -> None:
    manager = SlidingWindowConversationManager(window_size=1)
    conv = Conversation(memory_store, "s", manager=manager)
    turn = tool_turn("p")
    conv.append(*turn, *chat(4, prefix="later-"))
    conv.pin(turn[pinned_index].message_id)
    conv.after_invocation()
    kept = view_ids(conv)
    assert turn[1].message_id in kept
    assert turn[2].message_id in kept
    # The pinned toolUse would open the view: its prompt stays before it.
    assert turn[0].message_id in kept
    assert conv.view[0].message.role == "user"
    assert_valid_view(conv)


def test_plan_is_pure_and_deterministic(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(window_size=3)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*tool_turn("a"), *tool_turn("b"))
    request = ReductionRequest(trigger="reactive")
    first = manager.make_plan(conv.view, request)
    second = manager.make_plan(conv.view, request)
    assert first == second
    assert first is not None
    assert memory_store.reductions("s", "default") == []


def test_best_effort_failure_is_logged_and_the_turn_goes_on(
    memory_store: CompleteStore, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(SlidingWindowConversationManager):
        def make_plan(self, view, request):  # type: ignore[no-untyped-def]
            raise RuntimeError("policy bug")

    manager = Broken(window_size=1, per_turn=True)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(4))
    with caplog.at_level(logging.WARNING, logger="contextledger.conversation.conversation"):
        assert model_call(conv) is False
    assert conv.model_call_count == 1
    assert Conversation(memory_store, "s").model_call_count == 1
    assert len(conv.view) == 4
    (record,) = [r for r in caplog.records if "best-effort reduction skipped" in r.getMessage()]
    assert "trigger=<per_turn>" in record.getMessage()
    assert "policy bug" in record.getMessage()
