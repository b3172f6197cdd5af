"""The view rules: every reduction leaves a view a provider accepts, for every manager."""

from __future__ import annotations

import logging

import pytest

from contextledger import (
    Conversation,
    Message,
    ReductionPlan,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    SummaryDraft,
    TurnWindowConversationManager,
    View,
)
from contextledger.core.changeset import ReductionRequest
from contextledger.core.viewrules import fit_plan
from contextledger.errors import InvalidPlan, ReductionFailed
from contextledger.stores.capabilities import CompleteStore
from tests.core.helpers import ScriptedManager, rule_violations
from tests.managers.helpers import chat, overflow, tool_turn


def texts(conv: Conversation) -> list[str]:
    return [e.message.plain_text.split(".")[0] if e.kind == "message" else "S" for e in conv.view]


# -- the three cases found with a real agent and a validating provider ---------------------------


def test_the_sliding_window_never_opens_on_an_assistant_message(store: CompleteStore) -> None:
    conv = Conversation(store, "s", manager=SlidingWindowConversationManager(window_size=3))
    conv.append(*chat(6))  # u0 a1 u2 a3 u4 a5
    before = conv.view
    conv.after_invocation()
    # [a3, u4, a5] would be refused: the boundary advances to the next user message.
    assert texts(conv) == ["m4", "m5"]
    assert rule_violations(before, conv.view) == []
    assert Conversation(store, "s").view.ids == conv.view.ids


def test_a_reactive_reduction_never_evicts_the_prompt_nor_asks_a_retry_it_cannot_serve(store: CompleteStore) -> None:
    evict_everything = ScriptedManager(lambda view, request: ReductionPlan(strategy="all", evict=tuple(view.ids)))
    conv = Conversation(store, "s", manager=evict_everything)
    conv.append(*chat(3))
    conv.before_model_call()
    before = conv.view
    assert conv.after_model_call(overflow()) is True
    # Corrected: the newest prompt stays, the view is not empty.
    assert texts(conv) == ["m2"]
    assert rule_violations(before, conv.view) == []
    version = conv.version
    conv.before_model_call()
    error = overflow()
    with pytest.raises(ReductionFailed, match="nothing left to reduce") as info:
        conv.after_model_call(error)
    assert info.value.__cause__ is error
    assert texts(conv) == ["m2"]
    assert conv.version == version + 1  # the model-call count only
    assert len(store.reductions("s", "default")) == 1


def test_a_lone_prompt_overflowing_raises_without_a_retry(store: CompleteStore) -> None:
    conv = Conversation(store, "s", manager=SlidingWindowConversationManager(window_size=1))
    conv.append(Message.user("x" * 5000))
    conv.before_model_call()
    with pytest.raises(ReductionFailed):
        conv.after_model_call(overflow())
    assert len(conv.view) == 1
    assert store.reductions("s", "default") == []


def test_a_summary_does_not_separate_an_answer_from_its_question(store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=3)
    conv = Conversation(store, "s", manager=manager)
    names = ["q1", "a1", "q2", "a2", "q3", "a3", "q4", "a4"]
    messages = [Message.user(f"{n}.") if n[0] == "q" else Message.assistant(f"{n}.") for n in names]
    conv.append(*messages)
    conv.pin(messages[2].message_id)
    before = conv.view
    reduction = conv.reduce("manual")
    assert reduction is not None
    (summary,) = store.summaries("s", "default")
    assert summary.replaces == tuple(messages[i].message_id for i in (0, 1, 3, 4))
    # The pinned q2 keeps its place ahead of the summary, which stands right before a3:
    # a3 follows the summary that holds q3, not q2.
    assert texts(conv) == ["q2", "S", "a3", "q4", "a4"]
    assert rule_violations(before, conv.view, summary.summary_id, summary.replaces) == []
    assert Conversation(store, "s").view.ids == conv.view.ids


# -- custom plans: corrected when safe, refused otherwise ------------------------------------------


def test_a_custom_eviction_boundary_advances_to_the_next_prompt(memory_store: CompleteStore) -> None:
    manager = ScriptedManager(lambda view, request: ReductionPlan(strategy="first", evict=(view.ids[0],)))
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    planned = conv.preview()
    assert planned is not None
    assert len(planned.evict) == 2
    conv.reduce()
    assert texts(conv) == ["m2", "m3", "m4", "m5"]


def test_a_custom_plan_keeps_pins_and_whole_tool_pairs(memory_store: CompleteStore) -> None:
    turn = tool_turn("t")  # u, toolUse, toolResult, answer
    manager = ScriptedManager(
        lambda view, request: ReductionPlan(strategy="x", evict=(turn[0].message_id, turn[1].message_id))
    )
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*turn, *chat(2, prefix="n"))
    before = conv.view
    conv.reduce()
    # The toolUse took its result with it, and the answer that would open the view went too.
    assert texts(conv) == ["n0", "n1"]
    assert rule_violations(before, conv.view) == []
    pinned = Conversation(memory_store, "p", manager=manager)
    pinned.append(*turn, *chat(2, prefix="n"))
    pinned.pin(turn[2].message_id)  # the result: its call is pinned through the pair
    pinned.reduce()
    assert turn[1].message_id in pinned.view.ids
    assert pinned.view[0].message.role == "user"


def test_a_custom_summary_leaving_a_message_inside_its_span_is_refused(
    memory_store: CompleteStore, caplog: pytest.LogCaptureFixture
) -> None:
    def gap(view: View, request: ReductionRequest) -> ReductionPlan:
        return ReductionPlan(
            strategy="gap", summary=SummaryDraft(content="s", summarizer="x", replaces=(view.ids[0], view.ids[2]))
        )

    conv = Conversation(memory_store, "s", manager=ScriptedManager(gap))
    conv.append(*chat(6))
    version = conv.version
    with pytest.raises(InvalidPlan, match="separate"):
        conv.reduce()
    with pytest.raises(InvalidPlan):
        conv.preview()
    assert conv.version == version
    with caplog.at_level(logging.WARNING, logger="contextledger.conversation.conversation"):
        conv.after_invocation()  # best-effort: logged, the turn goes on
    assert any(
        "InvalidPlan" in r.getMessage() and "trigger=<end_of_invocation>" in r.getMessage() for r in caplog.records
    )
    conv.before_model_call()
    with pytest.raises(ReductionFailed):
        conv.after_model_call(overflow())
    assert memory_store.reductions("s", "default") == []


def test_everything_pinned_logs_a_structured_warning_and_the_turn_goes_on(
    memory_store: CompleteStore, caplog: pytest.LogCaptureFixture
) -> None:
    manager = SlidingWindowConversationManager(window_size=2, per_turn=True)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(5))
    for entry in conv.view:
        conv.pin(entry.entry_id)
    with caplog.at_level(logging.WARNING, logger="contextledger.conversation.conversation"):
        conv.before_model_call()
    assert conv.after_model_call(None) is False
    (record,) = [r for r in caplog.records if "best-effort reduction skipped" in r.getMessage()]
    assert "session_id=<s>" in record.getMessage()
    assert "trigger=<per_turn>" in record.getMessage()
    assert "pinned" in record.getMessage()
    assert len(conv.view) == 5
    assert conv.model_call_count == 1


@pytest.mark.parametrize(
    "manager",
    [
        SlidingWindowConversationManager(window_size=3),
        SummarizingConversationManager(summary_ratio=0.6, preserve_recent_messages=1),
        TurnWindowConversationManager(max_user_turns=1),
    ],
    ids=["sliding_window", "summarizing", "turn_window"],
)
def test_built_in_plans_need_no_correction(memory_store: CompleteStore, manager: object) -> None:
    conv = Conversation(memory_store, "s")
    conv.append(*tool_turn("a"), *chat(4), *tool_turn("b", calls=2), Message.user("now"))
    conv.pin(conv.view.ids[5])
    for trigger in ("reactive", "proactive", "end_of_invocation", "manual"):
        planned = manager.plan(conv.view, ReductionRequest(trigger=trigger))  # type: ignore[attr-defined]
        if planned.plan is not None:
            assert fit_plan(conv.view, planned.plan) == planned.plan
