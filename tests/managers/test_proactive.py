from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextledger import (
    DEFAULT_COMPRESSION_THRESHOLD,
    Conversation,
    Message,
    PolicyManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)
from contextledger.core.changeset import Changeset
from contextledger.errors import ConcurrencyConflict, ConfigurationError
from contextledger.managers.policy import parse_proactive_compression
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.managers.helpers import chat, model_call, triggers

MANAGERS: dict[str, Callable[[Any], PolicyManager]] = {
    "sliding_window": lambda pc: SlidingWindowConversationManager(window_size=40, proactive_compression=pc),
    "summarizing": lambda pc: SummarizingConversationManager(preserve_recent_messages=2, proactive_compression=pc),
    "turn_window": lambda pc: TurnWindowConversationManager(max_user_turns=10, proactive_compression=pc),
}


@pytest.mark.parametrize("manager_name", sorted(MANAGERS))
@pytest.mark.parametrize(
    ("option", "projected", "limit", "fires"),
    [
        (True, 700, 1000, True),  # exactly at the default threshold
        (True, 699, 1000, False),  # just below
        (True, 5000, 1000, True),
        ({"compression_threshold": 0.9}, 900, 1000, True),
        ({"compression_threshold": 0.9}, 899, 1000, False),
        ({"compression_threshold": 1}, 1000, 1000, True),
        (None, 10_000, 1000, False),  # off
        (False, 10_000, 1000, False),  # off
        (True, 10_000, None, False),  # no context window limit: no proactive compression
    ],
)
def test_proactive_fires_at_and_above_the_threshold_only(
    memory_store: CompleteStore,
    manager_name: str,
    option: object,
    projected: int,
    limit: int | None,
    fires: bool,
) -> None:
    manager = MANAGERS[manager_name](option)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(12))
    model_call(conv, limit=limit, projected=projected)
    assert triggers(memory_store, "s") == (["proactive"] if fires else [])
    assert conv.model_call_count == 1


def test_the_projection_comes_from_the_conversation_when_the_host_has_none(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager(proactive_compression={"compression_threshold": 0.5})
    conv = Conversation(memory_store, "s", manager=manager, context_window_limit=1000)
    conv.append(*chat(4))
    model_call(conv)  # projection: the token estimates, far below 500
    assert triggers(memory_store, "s") == []
    conv.append(Message.user("x" * 4000))  # ~1000 tokens
    event = conv.before_model_call()
    assert event.context_window_limit == 1000
    assert event.projected_input_tokens is not None
    assert event.projected_input_tokens >= 1000
    assert triggers(memory_store, "s") == ["proactive"]


def test_proactive_can_be_switched_on_at_run_time(memory_store: CompleteStore) -> None:
    manager = SlidingWindowConversationManager()
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    model_call(conv, limit=100, projected=99)
    assert triggers(memory_store, "s") == []
    manager.proactive_compression = {"compression_threshold": 0.9}
    assert manager.compression_threshold == 0.9
    model_call(conv, limit=100, projected=99)
    assert triggers(memory_store, "s") == ["proactive"]
    with pytest.raises(ConfigurationError):
        manager.proactive_compression = 2  # type: ignore[assignment]
    assert manager.compression_threshold == 0.9


@pytest.mark.parametrize(
    ("value", "threshold"),
    [
        (None, None),
        (False, None),
        (True, DEFAULT_COMPRESSION_THRESHOLD),
        ({"compression_threshold": 0.5}, 0.5),
        ({"compression_threshold": 1}, 1.0),
        ({}, DEFAULT_COMPRESSION_THRESHOLD),
    ],
)
def test_valid_proactive_options(value: object, threshold: float | None) -> None:
    assert parse_proactive_compression(value) == threshold
    assert SlidingWindowConversationManager(proactive_compression=value).compression_threshold == threshold  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        0.7,
        1,
        0,
        "0.7",
        [0.7],
        {"compression_threshold": 0},
        {"compression_threshold": -0.1},
        {"compression_threshold": 1.01},
        {"compression_threshold": True},
        {"compression_threshold": "0.5"},
        {"threshold": 0.5},
        {"compression_threshold": 0.5, "extra": 1},
    ],
)
def test_invalid_proactive_options(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"proactive_compression|compression_threshold"):
        parse_proactive_compression(value)
    for build in MANAGERS.values():
        with pytest.raises(ConfigurationError):
            build(value)


def test_a_conflict_after_summarizing_reuses_the_summary(memory_store: CompleteStore) -> None:
    other = Conversation(memory_store, "s")
    calls: list[int] = []

    def racing(messages: list[Message]) -> str:
        # Another process appends while the summary is written: the commit conflicts once.
        calls.append(len(messages))
        other.refresh()
        other.append(Message.user("concurrent"))
        return "summary"

    manager = SummarizingConversationManager(
        summary_ratio=0.2, preserve_recent_messages=1, summarizer=racing, proactive_compression=True
    )
    conv = Conversation(memory_store, "s", manager=manager, max_retries=2)
    conv.append(*chat(6))
    conv.before_model_call(context_window_limit=100, projected_input_tokens=100)
    assert conv.after_model_call(None) is False
    # The summarized entries did not change: the summary written once is committed.
    assert calls == [1]
    (summary,) = memory_store.summaries("s", "default")
    assert summary.content == "summary"
    assert conv.model_call_count == 1
    assert Conversation(memory_store, "s").model_call_count == 1
    assert manager.state.reductions == 1
    assert "concurrent" in conv.view[-1].message.plain_text


class _ReductionsConflict(MemoryStore):
    """A store on which every reduction commit loses the version race."""

    def commit(self, changeset: Changeset) -> int:
        if changeset.reduction is not None:
            raise ConcurrencyConflict("someone else committed first")
        return super().commit(changeset)


def test_a_conflict_during_proactive_compression_is_logged_and_the_turn_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _ReductionsConflict()
    manager = SummarizingConversationManager(preserve_recent_messages=1, proactive_compression=True)
    conv = Conversation(store, "s", manager=manager, max_retries=2)
    conv.append(*chat(6))
    with caplog.at_level("WARNING", logger="contextledger.conversation.conversation"):
        conv.before_model_call(context_window_limit=100, projected_input_tokens=100)
    assert conv.after_model_call(None) is False
    assert store.summaries("s", "default") == []
    assert conv.model_call_count == 1
    assert Conversation(store, "s").model_call_count == 1
    assert manager.state.reductions == 0
    assert any(
        "ConcurrencyConflict" in r.getMessage() and "trigger=<proactive>" in r.getMessage() for r in caplog.records
    )


def test_a_conflict_is_re_planned_on_the_fresh_view(memory_store: CompleteStore) -> None:
    other = Conversation(memory_store, "s")
    raced: list[int] = []

    def racing_once(messages: list[Message]) -> str:
        if not raced:
            raced.append(1)
            other.refresh()
            other.append(Message.user("concurrent"))
        return f"summary of {len(messages)}"

    manager = SummarizingConversationManager(preserve_recent_messages=1, summarizer=racing_once)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    conv.reduce("manual")
    (summary,) = memory_store.summaries("s", "default")
    # Planned again on 7 entries: the concurrent message is part of the view and was not lost.
    assert "concurrent" in conv.view[-1].message.plain_text
    assert summary.content == "summary of 2"
    assert manager.state.reductions == 1
    assert Conversation(memory_store, "s", manager=SummarizingConversationManager()).view.ids == conv.view.ids
