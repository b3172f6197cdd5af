from __future__ import annotations

import pytest

from contextledger import Conversation, Message, TurnWindowConversationManager
from contextledger.core.view import View
from contextledger.errors import ConfigurationError, ReductionFailed
from contextledger.managers.turn_window import complete_tool_sequences, is_user_turn
from contextledger.model.records import ViewEntry
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import assert_valid_view, ids, model_call, overflow, tool_turn, view_ids


def _view(messages: list[Message]) -> View:
    return View([ViewEntry(entry_id=m.message_id, seq=i, message=m) for i, m in enumerate(messages)])


def test_keeps_the_last_user_turns_and_every_system_message(memory_store: CompleteStore) -> None:
    manager = TurnWindowConversationManager(max_user_turns=2)
    conv = Conversation(memory_store, "s", manager=manager)
    system = Message.system("You are terse.")
    turns = [tool_turn(f"t{i}") for i in range(4)]
    note = Message.system("Mid-conversation instruction.")
    conv.append(system, *turns[0], *turns[1], note, *turns[2], *turns[3])
    conv.after_invocation()
    assert view_ids(conv) == [system.message_id, note.message_id, *ids(turns[2]), *ids(turns[3])]
    (reduction,) = memory_store.reductions("s", "default")
    assert reduction.trigger == "end_of_invocation"
    assert reduction.strategy == "turn_window"
    assert_valid_view(conv)


def test_tool_result_messages_do_not_count_as_user_turns() -> None:
    assert is_user_turn(Message.user("hi"))
    assert not is_user_turn(Message.tool_result("t", "r"))
    assert not is_user_turn(Message.assistant("hi"))
    mixed = Message(role="user", content=[{"toolResult": {"toolUseId": "t", "content": []}}, {"text": "and"}])
    assert is_user_turn(mixed)


def test_within_the_window_nothing_happens(memory_store: CompleteStore) -> None:
    manager = TurnWindowConversationManager(max_user_turns=3)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*tool_turn("a", calls=3), *tool_turn("b"))
    conv.after_invocation()
    assert memory_store.reductions("s", "default") == []


# -- complete and incomplete tool sequences -------------------------------------------------------


def test_removes_a_complete_tool_sequence(memory_store: CompleteStore) -> None:
    # The documented example: system, user, tool call, tool result, final answer, user.
    manager = TurnWindowConversationManager(max_user_turns=10, remove_tool_messages=True)
    conv = Conversation(memory_store, "s", manager=manager)
    system, user = Message.system("sys"), Message.user("What is 2+2?")
    call, result = Message.tool_use("c1", "calc", {"e": "2+2"}), Message.tool_result("c1", "4")
    answer, follow_up = Message.assistant("4."), Message.user("Thanks")
    conv.append(system, user, call, result, answer, follow_up)
    conv.after_invocation()
    assert view_ids(conv) == ids([system, user, follow_up])
    evicted = {e.entry_id for e in memory_store.evictions("s", "default")}
    assert evicted == set(ids([call, result, answer]))


@pytest.mark.parametrize(
    ("tail", "complete"),
    [
        # call, result, final answer
        ([("use", "a"), ("result", "a"), ("answer", None)], True),
        # chained calls, then the answer
        ([("use", "a"), ("result", "a"), ("use", "b"), ("result", "b"), ("answer", None)], True),
        # no final answer yet
        ([("use", "a"), ("result", "a")], False),
        # the call is still running
        ([("use", "a")], False),
        # interrupted by a new user turn before the answer
        ([("use", "a"), ("result", "a"), ("user", None), ("answer", None)], False),
        # a result is missing for one of two parallel calls
        ([("use2", "a"), ("result", "a"), ("answer", None)], False),
    ],
)
def test_only_complete_sequences_are_removed(
    memory_store: CompleteStore, tail: list[tuple[str, str | None]], complete: bool
) -> None:
    def build(kind: str, tid: str | None) -> Message:
        if kind == "use":
            return Message.tool_use(str(tid), "f", {})
        if kind == "use2":
            return Message(
                role="assistant",
                content=[
                    {"toolUse": {"toolUseId": str(tid), "name": "f", "input": {}}},
                    {"toolUse": {"toolUseId": f"{tid}-2", "name": "f", "input": {}}},
                ],
            )
        if kind == "result":
            return Message.tool_result(str(tid), "r")
        if kind == "user":
            return Message.user("wait, also this")
        return Message.assistant("final answer")

    manager = TurnWindowConversationManager(max_user_turns=10, remove_tool_messages=True)
    conv = Conversation(memory_store, "s", manager=manager)
    start = Message.user("go")
    body = [build(kind, tid) for kind, tid in tail]
    conv.append(start, *body)
    sequences = complete_tool_sequences(conv.view)
    conv.after_invocation()
    if complete:
        assert sequences == [list(range(1, len(body) + 1))]
        assert view_ids(conv) == [start.message_id]
    else:
        assert sequences == []
        assert view_ids(conv) == ids([start, *body])


def test_a_pinned_member_keeps_the_whole_sequence(memory_store: CompleteStore) -> None:
    manager = TurnWindowConversationManager(max_user_turns=10, remove_tool_messages=True)
    conv = Conversation(memory_store, "s", manager=manager)
    kept_turn, dropped_turn = tool_turn("kept"), tool_turn("dropped")
    conv.append(*kept_turn, *dropped_turn)
    conv.pin(kept_turn[3].message_id)  # the final answer
    conv.after_invocation()
    assert view_ids(conv) == [*ids(kept_turn), dropped_turn[0].message_id]


def test_complete_tool_sequences_on_a_summary_is_incomplete() -> None:
    call, result, answer = Message.tool_use("a", "f", {}), Message.tool_result("a", "r"), Message.assistant("x")
    view = View(
        [
            ViewEntry(entry_id=call.message_id, seq=0, message=call),
            ViewEntry(entry_id=result.message_id, seq=1, message=result),
            ViewEntry(entry_id="sum", kind="summary", seq=2, message=Message.user("summary")),
            ViewEntry(entry_id=answer.message_id, seq=3, message=answer),
        ]
    )
    assert complete_tool_sequences(view) == []
    assert complete_tool_sequences(_view([call, result, answer])) == [[0, 1, 2]]


# -- reactive --------------------------------------------------------------------------------------


def test_reactive_drops_the_oldest_turn_or_raises(memory_store: CompleteStore) -> None:
    manager = TurnWindowConversationManager(max_user_turns=5)
    conv = Conversation(memory_store, "s", manager=manager)
    first, second = tool_turn("first"), tool_turn("second")
    conv.append(*first, *second)
    assert model_call(conv, error=overflow()) is True
    assert view_ids(conv) == ids(second)
    # One turn left: it is never dropped, so the overflow cannot be handled.
    error = overflow()
    conv.before_model_call()
    with pytest.raises(ReductionFailed) as info:
        conv.after_model_call(error)
    assert info.value.__cause__ is error
    assert view_ids(conv) == ids(second)


def test_reactive_skips_a_turn_that_is_all_pinned(memory_store: CompleteStore) -> None:
    manager = TurnWindowConversationManager(max_user_turns=5)
    conv = Conversation(memory_store, "s", manager=manager)
    turns = [[Message.user(f"q{i}"), Message.assistant(f"a{i}")] for i in range(3)]
    conv.append(*(m for t in turns for m in t))
    conv.pin(turns[0][0].message_id)
    conv.pin(turns[0][1].message_id)
    assert model_call(conv, error=overflow()) is True
    assert view_ids(conv) == ids([*turns[0], *turns[2]])


def test_protected_ranges_are_honoured(memory_store: CompleteStore) -> None:
    manager = TurnWindowConversationManager(max_user_turns=1, protected_messages={"first": 2})
    conv = Conversation(memory_store, "s", manager=manager)
    turns = [tool_turn(f"t{i}") for i in range(3)]
    conv.append(*(m for t in turns for m in t))
    conv.after_invocation()
    # The first two entries (user + toolUse) are protected; the toolUse keeps its result.
    assert view_ids(conv) == [*ids(turns[0][:3]), *ids(turns[2])]
    assert_valid_view(conv)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_user_turns": 0}, "max_user_turns"),
        ({"max_user_turns": True}, "max_user_turns"),
        ({"max_user_turns": "3"}, "max_user_turns"),
        ({"max_user_turns": 2, "remove_tool_messages": 1}, "remove_tool_messages"),
        ({"max_user_turns": 2, "proactive_compression": "yes"}, "proactive_compression"),
    ],
)
def test_invalid_options(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        TurnWindowConversationManager(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"), [("max_user_turns", 0), ("max_user_turns", "2"), ("remove_tool_messages", 1)]
)
def test_options_are_validated_also_at_run_time(option: str, value: object) -> None:
    manager = TurnWindowConversationManager(2, remove_tool_messages=True)
    kept = getattr(manager, option)
    with pytest.raises(ConfigurationError, match=option):
        setattr(manager, option, value)
    assert getattr(manager, option) == kept
