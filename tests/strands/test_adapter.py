"""contextledger's managers driving a Strands agent through ``StrandsConversationManager``, and the pin tool."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from strands.agent.conversation_manager import SlidingWindowConversationManager as StrandsSlidingWindow
from strands.types.content import Messages
from strands.types.exceptions import ContextWindowOverflowException

from contextledger.errors import ConfigurationError, ReductionFailed
from contextledger.integrations.strands import (
    LedgerSessionManager,
    StrandsConversationManager,
    StrandsReductionFailed,
    pin_message_tool,
)
from contextledger.integrations.strands.scripted import CallTool, Overflow, Reply, Step
from contextledger.ledger import Ledger
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager
from tests.strands.scenarios import build_agent, lookup, model_of, play, remember

TOOLS = (lookup, remember, pin_message_tool)


def sliding(**options: Any) -> StrandsConversationManager:
    settings: dict[str, Any] = {"window_size": 6, "per_turn": 2, "protected_messages": {"first": 1}}
    settings.update(options)
    return StrandsConversationManager(SlidingWindowConversationManager(**settings))


def chat(n: int, start: int = 0) -> list[tuple[str, list[Step]]]:
    return [(f"question {i}", [Reply(f"answer {i}")]) for i in range(start, start + n)]


TOOL_RUN: list[tuple[str, list[Step]]] = [
    ("I'm Ada.", [Reply("Hello Ada.")]),
    ("Look up alpha.", [CallTool("lookup", {"key": "alpha"}, "tu-a"), Reply("alpha found")]),
    ("Look up beta.", [CallTool("lookup", {"key": "beta"}, "tu-b"), Reply("beta found")]),
    *chat(4),
]


def test_the_adapter_runs_a_contextledger_manager_on_the_ledger(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, sliding(), tools=TOOLS)
    first = None
    for prompt, steps in TOOL_RUN:
        play(agent, [(prompt, steps)])
        first = first or agent.messages[0]["tracking_id"]
        # the agent always shows exactly the ledger's view
        assert [m["tracking_id"] for m in agent.messages] == session_manager.conversation().view.ids
        assert len(agent.messages) <= 6
    assert agent.messages[0]["tracking_id"] == first  # protected first range
    reductions = memory_ledger.reductions("s")
    assert {r.strategy for r in reductions} == {"sliding_window"}
    assert {r.trigger for r in reductions} == {"per_turn", "end_of_invocation"}
    for eviction in memory_ledger.evictions("s"):
        assert eviction.strategy == "sliding_window"
    # tool pairs were evicted together: the view never starts with or keeps half a pair
    view = session_manager.conversation().view
    assert not view.dangling_tool_uses()
    assert not view.orphan_results()

    before = list(agent.messages)
    state = session_manager.conversation().state.manager_state
    del agent
    gc.collect()
    again = LedgerSessionManager("s", ledger=memory_ledger)
    restored = build_agent(again, sliding(), tools=TOOLS)
    assert restored.messages == before
    assert again.conversation().state.manager_state == state
    assert state is not None
    assert state["inner"]["manager"] == "sliding_window"
    assert state["inner"]["reductions"] == len(reductions)


def test_an_overflow_is_reduced_reactively_and_the_call_retried(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, sliding(window_size=20, per_turn=False), tools=TOOLS)
    play(agent, chat(4))
    assert len(agent.messages) == 8
    play(agent, [("overflowing", [Overflow(), Reply("retried")])])
    assert str(agent.messages[-1]["content"][0]["text"]) == "retried"
    [reactive] = [r for r in memory_ledger.reductions("s") if r.trigger == "reactive"]
    assert reactive.error is not None
    assert "ContextWindowOverflowException" in reactive.error
    assert reactive.evicted
    assert not set(reactive.evicted) & {m["tracking_id"] for m in agent.messages}
    assert agent.messages[0]["content"] == [{"text": "question 0"}]  # protected


def test_an_overflow_with_nothing_left_to_reduce_raises_reduction_failed(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, sliding(protected_messages={"first": 50}, per_turn=False), tools=TOOLS)
    play(agent, chat(2))
    before = list(agent.messages)
    model_of(agent).extend([Overflow()])
    with pytest.raises(ContextWindowOverflowException, match="nothing left to reduce") as raised:
        agent("too long")
    # one error, both types: Strands apps' handlers and contextledger's catch it
    assert isinstance(raised.value, ReductionFailed)
    assert isinstance(raised.value, StrandsReductionFailed)
    assert isinstance(raised.value.__cause__, ReductionFailed)
    # nothing was lost: the conversation and the ledger still hold every message
    assert agent.messages[: len(before)] == before
    assert [h.status for h in memory_ledger.history("s")] == ["active"] * len(agent.messages)


def test_contextledger_summaries_appear_in_the_agent_and_restore(memory_ledger: Ledger) -> None:
    def summarizing() -> StrandsConversationManager:
        return StrandsConversationManager(
            SummarizingConversationManager(
                summary_ratio=0.5, preserve_recent_messages=2, protected_messages={"first": 1}
            )
        )

    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, summarizing(), tools=TOOLS)
    play(agent, [*TOOL_RUN[:3], ("overflow", [Overflow(), Reply("after summary")])])
    [summary] = memory_ledger.summaries("s")
    rendered = agent.messages[1]
    assert rendered["tracking_id"] == summary.summary_id
    assert rendered["content"] == [{"text": summary.content}]
    assert agent.messages[0]["content"] == [{"text": "I'm Ada."}]
    evicted = {e.entry_id for e in memory_ledger.evictions("s")}
    assert evicted == set(summary.replaces)

    before = list(agent.messages)
    del agent
    gc.collect()
    assert build_agent(LedgerSessionManager("s", ledger=memory_ledger), summarizing(), tools=TOOLS).messages == before


def test_the_adapter_works_without_a_session_manager() -> None:
    adapter = sliding(window_size=4, per_turn=True)
    agent = build_agent(None, adapter, tools=TOOLS)
    play(agent, chat(5))
    conversation = adapter.binding(agent).conversation
    assert conversation.view.ids == [m["tracking_id"] for m in agent.messages]
    assert len(agent.messages) <= 4
    assert conversation.model_call_count == 5
    assert agent.messages[0]["content"] == [{"text": "question 0"}]


def test_the_adapter_needs_a_contextledger_manager() -> None:
    with pytest.raises(ConfigurationError, match="ConversationManager"):
        StrandsConversationManager(StrandsSlidingWindow())  # type: ignore[arg-type]


# -- the pin tool ------------------------------------------------------------------------


def _pin_then_check(index: int, action: str, check: Any) -> list[tuple[str, list[Step]]]:
    def after_the_tool(messages: Messages) -> Reply:
        check()  # runs inside the same turn, right after the tool returned
        return Reply("done")

    return [
        ("pin it", [CallTool("pin_message", {"index": index, "action": action}, f"tu-pin-{index}"), after_the_tool])
    ]


def _tool_result(agent: Any, tool_use_id: str) -> dict[str, Any]:
    for message in agent.messages:
        for block in message["content"]:
            if "toolResult" in block and block["toolResult"]["toolUseId"] == tool_use_id:
                result: dict[str, Any] = block["toolResult"]
                return result
    raise AssertionError(f"no result for {tool_use_id}")


def test_the_pin_tool_commits_at_once_and_the_pin_survives_restore(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, StrandsSlidingWindow(window_size=6), tools=TOOLS)
    play(agent, chat(2))
    target = agent.messages[2]["tracking_id"]

    def committed() -> None:
        fresh = Ledger(memory_ledger.store).history("s")
        assert [h.message.message_id for h in fresh if h.pinned] == [target]

    play(agent, _pin_then_check(2, "pin", committed))
    assert _tool_result(agent, "tu-pin-2")["status"] == "success"
    [pinned] = [m for m in agent.messages if m["tracking_id"] == target]
    assert pinned["metadata"]["custom"]["pinned"] is True
    # Strands' own sliding window honours the pin the tool set
    play(agent, chat(6, start=2))
    assert agent.messages[0]["tracking_id"] == target
    assert target not in {e.entry_id for e in memory_ledger.evictions("s")}
    before = list(agent.messages)
    del agent
    gc.collect()
    restored = build_agent(
        LedgerSessionManager("s", ledger=memory_ledger), StrandsSlidingWindow(window_size=6), tools=TOOLS
    )
    assert restored.messages == before


def test_the_pin_tool_unpins_and_reports_bad_input_as_an_error_result(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, StrandsSlidingWindow(window_size=40), tools=TOOLS)
    play(agent, chat(2))
    play(agent, _pin_then_check(0, "pin", lambda: None))
    play(agent, _pin_then_check(0, "unpin", lambda: None))
    assert not session_manager.conversation().view[0].pinned
    assert "metadata" not in agent.messages[0]
    play(
        agent,
        [
            ("bad", [CallTool("pin_message", {"index": 99}, "tu-bad-index"), Reply("out of range")]),
            ("worse", [CallTool("pin_message", {"index": "one"}, "tu-bad-type"), Reply("not an int")]),
        ],
    )
    bad_index = _tool_result(agent, "tu-bad-index")
    assert bad_index["status"] == "error"
    assert "out of range" in bad_index["content"][0]["text"]
    assert _tool_result(agent, "tu-bad-type")["status"] == "error"
    assert [e.pinned for e in session_manager.conversation().view] == [False] * len(agent.messages)


def test_the_pin_tool_without_a_ledger_pins_in_the_agent() -> None:
    agent = build_agent(None, StrandsSlidingWindow(window_size=40), tools=TOOLS)
    play(agent, chat(2))
    play(agent, _pin_then_check(2, "pin", lambda: None))
    assert agent.messages[2]["metadata"]["custom"]["pinned"] is True
    assert _tool_result(agent, "tu-pin-2")["status"] == "success"
