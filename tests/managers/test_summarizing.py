from __future__ import annotations

import logging

import pytest

from contextledger import (
    Conversation,
    ExtractiveSummarizer,
    Message,
    SummarizingConversationManager,
)
from contextledger.errors import ConfigurationError, ReductionFailed
from contextledger.managers.base import ReductionRequest
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import assert_valid_view, chat, ids, model_call, overflow, tool_turn, view_ids


def recording_summarizer(calls: list[list[Message]]):  # type: ignore[no-untyped-def]
    def summarize(messages: list[Message]) -> str:
        calls.append(messages)
        return f"S({len(messages)}): " + " | ".join(m.plain_text[:12] for m in messages)

    return summarize


def test_reactive_summarizes_the_oldest_entries(memory_store: CompleteStore) -> None:
    calls: list[list[Message]] = []
    manager = SummarizingConversationManager(
        summary_ratio=0.3, preserve_recent_messages=2, summarizer=recording_summarizer(calls)
    )
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(10)
    conv.append(*messages)
    assert model_call(conv, error=overflow()) is True
    # max(1, int(10 * 0.3)) == 3 entries replaced by one summary, placed first.
    (summary,) = memory_store.summaries("s", "default")
    assert summary.replaces == tuple(ids(messages[:3]))
    assert summary.summarizer == "summarize"
    assert view_ids(conv) == [summary.summary_id, *ids(messages[3:])]
    assert conv.view[0].kind == "summary"
    assert conv.view[0].message.plain_text == summary.content
    assert [m.message_id for m in calls[0]] == ids(messages[:3])
    (reduction,) = memory_store.reductions("s", "default")
    assert reduction.strategy == "summarizing"
    assert reduction.summary_id == summary.summary_id
    assert reduction.trigger == "reactive"


def test_whole_tool_groups_are_summarized(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.2, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    turn = tool_turn("a")
    conv.append(*turn, *chat(6))
    # int(10 * 0.2) == 2: the user message and the toolUse -- which drags its result along.
    conv.reduce("manual")
    (summary,) = memory_store.summaries("s", "default")
    assert summary.replaces == tuple(ids(turn[:3]))
    assert_valid_view(conv)


def test_recent_messages_are_preserved_and_then_it_raises(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=4)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(8)
    conv.append(*messages)
    assert model_call(conv, error=overflow()) is True
    assert view_ids(conv)[1:] == ids(messages[4:])
    # Only the summary and the 4 preserved entries remain: a summary alone is not re-summarized.
    error = overflow()
    conv.before_model_call()
    with pytest.raises(ReductionFailed) as info:
        conv.after_model_call(error)
    assert info.value.__cause__ is error
    assert len(memory_store.summaries("s", "default")) == 1


def test_summaries_chain_and_stay_queryable(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    first_batch = chat(6, prefix="first-")
    conv.append(*first_batch)
    assert model_call(conv, error=overflow()) is True
    second_batch = chat(6, prefix="second-")
    conv.append(*second_batch)
    assert model_call(conv, error=overflow()) is True

    first, second = memory_store.summaries("s", "default")
    assert first.status == "evicted"
    assert first.superseded_by == second.summary_id
    assert second.supersedes == first.summary_id
    assert second.status == "active"
    assert first.summary_id in second.replaces
    assert first.evicted_by == second.reduction_id
    # The chain keeps the older facts: the first summary's lines are carried over.
    assert "first-0." in second.content
    # The view shows only the newest summary, first.
    assert conv.view[0].entry_id == second.summary_id
    assert first.summary_id not in view_ids(conv)
    # Every message is still in history; evictions point at the summary that replaced them.
    history_ids = {h.message.message_id for h in memory_store.history("s", "default")}
    assert set(ids(first_batch + second_batch)) <= history_ids
    evictions = {e.entry_id: e for e in memory_store.evictions("s", "default")}
    assert evictions[first.summary_id].kind == "summary"
    assert evictions[first.summary_id].replaced_by_summary == second.summary_id
    assert evictions[first_batch[0].message_id].replaced_by_summary == first.summary_id
    # A restored conversation sees the same view.
    assert list(Conversation(memory_store, "s").view.entries) == list(conv.view.entries)


def test_pinned_and_protected_entries_are_never_summarized(memory_store: CompleteStore) -> None:
    calls: list[list[Message]] = []
    manager = SummarizingConversationManager(
        summary_ratio=0.5,
        preserve_recent_messages=0,
        summarizer=recording_summarizer(calls),
        protected_messages={"first": 1, "last": 2},
    )
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(10)
    conv.append(*messages)
    conv.pin(messages[2].message_id)
    conv.reduce("manual")
    (summary,) = memory_store.summaries("s", "default")
    summarized = set(summary.replaces)
    assert summarized.isdisjoint({messages[0].message_id, messages[2].message_id})
    assert summarized.isdisjoint(ids(messages[-2:]))
    assert summary.replaces == tuple(ids([messages[1], *messages[3:7]]))
    assert all(m.message_id not in {messages[0].message_id, messages[2].message_id} for m in calls[0])
    # Protected entries stay in place; the pinned one keeps its order ahead of the summary,
    # which stands right before the oldest entry kept after what it replaced.
    assert view_ids(conv) == [
        messages[0].message_id,
        messages[2].message_id,
        summary.summary_id,
        *ids(messages[7:]),
    ]


def test_a_protected_earlier_summary_is_not_superseded(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(10))
    conv.reduce("manual")
    manager.protected_messages = {"first": 1}
    conv.append(*chat(4, prefix="more-"))
    conv.reduce("manual")
    first, second = memory_store.summaries("s", "default")
    assert first.status == "active"
    assert second.supersedes is None
    assert first.summary_id not in second.replaces
    assert view_ids(conv)[:2] == [first.summary_id, second.summary_id]


def test_summarizer_failure_on_overflow_raises_reduction_failed(memory_store: CompleteStore) -> None:
    def broken(messages: list[Message]) -> str:
        raise TimeoutError("summary model timed out")

    manager = SummarizingConversationManager(preserve_recent_messages=1, summarizer=broken)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    conv.before_model_call()
    with pytest.raises(ReductionFailed, match="timed out") as info:
        conv.after_model_call(overflow())
    assert isinstance(info.value.__cause__, TimeoutError)
    assert len(conv.view) == 6
    assert memory_store.summaries("s", "default") == []
    assert manager.state.reductions == 0


@pytest.mark.parametrize("returned", ["", "   ", None, 42])
def test_summarizer_returning_no_text_is_a_failure(memory_store: CompleteStore, returned: object) -> None:
    manager = SummarizingConversationManager(preserve_recent_messages=1, summarizer=lambda _m: returned)  # type: ignore[arg-type,return-value]
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    conv.before_model_call()
    with pytest.raises(ReductionFailed, match="no summary text"):
        conv.after_model_call(overflow())
    assert len(conv.view) == 6


def test_proactive_summarizer_failure_does_not_break_the_turn(
    memory_store: CompleteStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(messages: list[Message]) -> str:
        raise ConnectionError("summary model unreachable")

    manager = SummarizingConversationManager(preserve_recent_messages=1, summarizer=broken, proactive_compression=True)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    with caplog.at_level(logging.WARNING, logger="contextledger.managers.policy"):
        event = conv.before_model_call(context_window_limit=100, projected_input_tokens=95)
    assert event.projected_input_tokens == 95
    assert conv.after_model_call(None) is False
    assert len(conv.view) == 6
    assert conv.model_call_count == 1
    assert Conversation(memory_store, "s").model_call_count == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("trigger=<proactive>" in m and "unreachable" in m for m in messages)


def test_extractive_summarizer_is_the_offline_default(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=1)
    assert isinstance(manager.summarizer, ExtractiveSummarizer)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*tool_turn("weather", "Sunny. 24 degrees and dry."), *chat(2))
    conv.reduce("manual")
    (summary,) = memory_store.summaries("s", "default")
    assert summary.summarizer == "extractive"
    assert summary.content.splitlines() == [
        "Summary of 3 messages from turn 1 (1 user prompt, 1 model call):",
        "- turn 1, user: Please do weather.",
        '- turn 1, assistant: called lookup({"k": 0, "q": "weather"})',
        "- turn 1, user: lookup -> success: Sunny.",
    ]


def test_plan_is_deterministic_for_a_view(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(12))
    request = ReductionRequest(trigger="reactive")
    assert manager.make_plan(conv.view, request) == manager.make_plan(conv.view, request)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"summary_ratio": 0}, "summary_ratio"),
        ({"summary_ratio": 1.5}, "summary_ratio"),
        ({"summary_ratio": True}, "summary_ratio"),
        ({"preserve_recent_messages": -1}, "preserve_recent_messages"),
        ({"preserve_recent_messages": 1.5}, "preserve_recent_messages"),
        ({"summarizer": "not callable"}, "summarizer"),
        ({"proactive_compression": {"compression_threshold": 2}}, "compression_threshold"),
        ({"protected_messages": {"last": "x"}}, "protected_messages"),
    ],
)
def test_invalid_options(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        SummarizingConversationManager(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"),
    [("summary_ratio", 0), ("summary_ratio", 5), ("preserve_recent_messages", -3), ("summarizer", "nope")],
)
def test_options_are_validated_also_at_run_time(memory_store: CompleteStore, option: str, value: object) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    kept = getattr(manager, option)
    with pytest.raises(ConfigurationError, match=option):
        setattr(manager, option, value)
    assert getattr(manager, option) == kept
    # The manager still plans with the old value.
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(10))
    assert conv.reduce() is not None
    assert_valid_view(conv)


def test_options_can_change_at_run_time(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.2, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(10))
    manager.summary_ratio = 1
    manager.summarizer = lambda messages: f"{len(messages)} messages"
    reduction = conv.reduce()
    assert reduction is not None
    (summary,) = memory_store.summaries("s")
    assert summary.content == "8 messages"  # all but the two preserved, at ratio 1


def test_summarizing_does_nothing_at_end_of_invocation(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(preserve_recent_messages=0)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(30))
    conv.after_invocation()
    assert memory_store.reductions("s", "default") == []


def test_extractive_summarizer_is_bounded_and_deterministic() -> None:
    summarizer = ExtractiveSummarizer(max_chars=300, sentence_chars=40)
    messages = [Message.user(f"Message {i} has a long first sentence that goes on and on. Second.") for i in range(50)]
    out = summarizer(messages)
    assert len(out) <= 300
    assert out == summarizer(messages)
    # Without stamps (a list built by hand) the turns are not numbered but still counted.
    assert out.startswith("Summary of 50 messages (50 user prompts, 0 model calls):\n- ... ")
    assert " lines dropped\n" in out
    assert out.endswith("\n- user: Message 49 has a long first sentence th…")  # the newest is kept
    assert "Second." not in out
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(max_chars=10)
