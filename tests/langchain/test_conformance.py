"""The LangChain session contract of ``LedgerMiddleware``, on every backend.

A real agent from ``create_agent`` with two tools, a scripted model, and the ledger
middleware. Each test states one clause of the contract.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, SummarizationMiddleware
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime

from contextledger import Ledger
from contextledger.errors import ConfigurationError, ReductionFailed
from contextledger.integrations.langchain import (
    HOST_STRATEGY,
    CallTool,
    LedgerMiddleware,
    ScriptedChatModel,
    Step,
    from_ledger,
    from_view,
    to_ledger,
)
from contextledger.managers import NullConversationManager
from contextledger.stores.capabilities import CompleteStore
from tests.langchain.scenarios import (
    SYSTEM,
    assert_view_at_is_what_the_model_received,
    build,
    inputs,
    lookup,
    sliding,
)

SCRIPT: list[Step] = [
    CallTool("lookup", {"order": "A-1"}),
    "It shipped from Lyon.",
    CallTool("refund", {"order": "A-1", "amount": 5.0}),
    ContextOverflowError("prompt is too long"),
    "Refunded 5 on A-1.",
    "You are welcome.",
]
PROMPTS = ["Where is order A-1?", "Refund 5 on A-1, please.", "Thanks!"]


def run(agent: Any, prompts: list[str], **config: Any) -> list[dict[str, Any]]:
    return [agent.invoke({"messages": [HumanMessage(p)]}, **config) for p in prompts]


def test_every_model_call_receives_the_view_the_ledger_records(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, model, middleware = build(ledger, "order-help", SCRIPT, manager=sliding())
    run(agent, PROMPTS)

    conversation = middleware.conversation()
    assert conversation.model_call_count == len(model.received) == 6  # the overflowed call counts too
    assert_view_at_is_what_the_model_received(ledger, "order-help", model)
    triggers = [r.trigger for r in ledger.reductions("order-help")]
    assert "reactive" in triggers
    assert "per_turn" in triggers
    # The retried call was given the reduced view: the old tool result truncated, its original kept.
    (revision,) = ledger.revisions("order-help")
    original = revision.original[0]["toolResult"]["content"][0]["text"]
    assert original.startswith("order A-1: shipped")
    retried = inputs(model)[4]
    (truncated,) = [m for m in retried if isinstance(m, ToolMessage) and m.tool_call_id == revision_call(ledger)]
    assert len(truncated.content) < len(original)


def revision_call(ledger: Ledger) -> str:
    (revision,) = ledger.revisions("order-help")
    call_id: str = revision.original[0]["toolResult"]["toolUseId"]
    return call_id


def test_the_ledger_keeps_every_message_exactly_and_the_state_follows_the_view(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, _, middleware = build(ledger, "exact", SCRIPT, manager=sliding())
    outputs = run(agent, PROMPTS)

    final = outputs[-1]["messages"]
    assert final == from_view(middleware.conversation().view)  # the state is the active view
    kept = {h.message.message_id: h.message for h in ledger.history("exact")}
    every = [m for out in outputs for m in out["messages"]]
    for message in every:
        stored = kept[message.id]
        if not ledger.revisions("exact", message_id=message.id):
            assert from_ledger(stored) == message
    evicted = [h for h in ledger.history("exact") if h.status == "evicted"]
    assert evicted, "the window evicted nothing"
    assert all(e.entry_id in kept for e in ledger.evictions("exact"))


def test_a_new_agent_continues_from_the_ledger_alone(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, _, _ = build(ledger, "resume", SCRIPT[:2], manager=sliding())
    run(agent, PROMPTS[:1])
    before = from_view(ledger.conversation("resume").view)

    # Another agent object, no checkpointer: the graph state starts empty; the ledger is the memory.
    again, model, middleware = build(ledger, "resume", ["Yes, it did."], manager=sliding())
    out = again.invoke({"messages": [HumanMessage("Did it ship?")]})
    assert inputs(model)[0] == [*before, out["messages"][-2]]
    assert out["messages"] == [*before, *out["messages"][-2:]]
    assert middleware.conversation().model_call_count == 3
    assert_view_at_is_what_the_model_received(ledger, "resume", model, first_call=3)


def test_tool_calls_and_their_results_leave_together(store: CompleteStore) -> None:
    ledger = Ledger(store)
    script = [CallTool("lookup", {"order": f"B-{n}"}) if n % 2 == 0 else f"answer {n}" for n in range(12)]
    agent, model, _ = build(ledger, "pairs", script, manager=sliding(window=5))
    run(agent, [f"question {n}" for n in range(6)])

    for received in inputs(model):
        assert not isinstance(received[0], ToolMessage | AIMessage), "the view opens on a user prompt"
        called = {c["id"] for m in received if isinstance(m, AIMessage) for c in m.tool_calls}
        answered = {m.tool_call_id for m in received if isinstance(m, ToolMessage)}
        assert called == answered
    messages = {h.message.message_id: h.message for h in ledger.history("pairs")}
    assert ledger.reductions("pairs")
    for reduction in ledger.reductions("pairs"):
        gone = [messages[i] for i in reduction.evicted]
        assert {u for m in gone for u in m.tool_use_ids} == {u for m in gone for u in m.tool_result_ids}


def test_an_overflow_nothing_can_reduce_raises_a_typed_error_and_loses_nothing(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, _, middleware = build(ledger, "full", [ContextOverflowError("too long")], manager=sliding())
    with pytest.raises(ReductionFailed):
        agent.invoke({"messages": [HumanMessage("A prompt the model cannot take.")]})
    conversation = middleware.conversation()
    assert [m.plain_text for m in conversation.messages] == ["A prompt the model cannot take."]
    assert ledger.reductions("full") == []

    # The null manager re-raises the host's own overflow error.
    agent, _, _ = build(ledger, "null", [ContextOverflowError("too long")], manager=NullConversationManager())
    with pytest.raises(ContextOverflowError):
        agent.invoke({"messages": [HumanMessage("Again.")]})


class DropOldest(AgentMiddleware[AgentState[Any], Any, Any]):
    """Another middleware that removes the oldest message from the state before each call."""

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < 5:
            return None
        return {"messages": [RemoveMessage(id=messages[0].id or "")]}


def test_what_another_middleware_removes_is_recorded_as_a_host_reduction(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, model, _ = build(ledger, "host", [*SCRIPT[:2], "Noted.", "Bye."], middleware=[DropOldest()])
    run(agent, ["Where is A-1?", "Also B-2.", "Bye."])

    host = [r for r in ledger.reductions("host") if r.strategy == HOST_STRATEGY]
    assert host
    evicted = {e.entry_id for e in ledger.evictions("host")}
    assert {i for r in host for i in r.evicted} == evicted
    assert_view_at_is_what_the_model_received(ledger, "host", model)


def test_async_runs_record_what_sync_runs_record(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, model, middleware = build(ledger, "async", SCRIPT, manager=sliding())

    async def main() -> None:
        for prompt in PROMPTS:
            await agent.ainvoke({"messages": [HumanMessage(prompt)]})

    asyncio.run(main())
    assert middleware.conversation().model_call_count == 6
    assert_view_at_is_what_the_model_received(ledger, "async", model)
    assert {r.trigger for r in ledger.reductions("async")} >= {"reactive", "per_turn"}


def test_each_thread_is_a_session_and_a_checkpointer_adds_no_duplicates(store: CompleteStore) -> None:
    ledger = Ledger(store)
    model = ScriptedChatModel(script=["one", "two", "three", "four"])
    middleware = LedgerMiddleware(ledger, manager=lambda: sliding(window=20))  # a session per thread_id
    agent = create_agent(
        model, tools=[lookup], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )
    for thread, prompt in [("t1", "hi"), ("t2", "hello"), ("t1", "again"), ("t2", "more")]:
        agent.invoke({"messages": [HumanMessage(prompt)]}, {"configurable": {"thread_id": thread}})
    for thread, texts in [("t1", ["hi", "one", "again", "three"]), ("t2", ["hello", "two", "more", "four"])]:
        view = ledger.conversation(thread).view
        assert [e.message.plain_text for e in view] == texts
        state = agent.get_state({"configurable": {"thread_id": thread}}).values["messages"]
        assert state == from_view(view)
    threadless = create_agent(model, tools=[lookup], system_prompt=SYSTEM, middleware=[middleware])
    with pytest.raises(ConfigurationError, match="thread_id"):
        threadless.invoke({"messages": [HumanMessage("no thread")]})


def test_a_message_the_ledger_cannot_keep_is_refused_before_anything_is_written(store: CompleteStore) -> None:
    ledger = Ledger(store)
    agent, model, middleware = build(ledger, "bad", ["never"], manager=sliding())
    bad = HumanMessage("hi", additional_kwargs={"when": (1, 2)})  # a tuple comes back as a list
    with pytest.raises(Exception, match="would not come back equal"):
        agent.invoke({"messages": [bad]})
    assert model.received == []
    assert middleware.conversation().messages == []
    assert to_ledger(HumanMessage("hi", additional_kwargs={"when": [1, 2]})).plain_text == "hi"


def test_langchains_own_summarization_is_recorded_as_a_summary_row(store: CompleteStore) -> None:
    ledger = Ledger(store)
    summarizer = ScriptedChatModel(script=["The customer asked three things."] * 3)
    summarization = SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))
    agent, model, _ = build(ledger, "summarized", [f"answer {n}" for n in range(5)], middleware=[summarization])
    run(agent, [f"question {n}" for n in range(5)])

    (summary,) = ledger.summaries("summarized")
    assert summary.summarizer == "langchain"
    assert summary.content.endswith("The customer asked three things.")
    (reduction,) = ledger.reductions("summarized")
    assert (reduction.strategy, reduction.summary_id) == (HOST_STRATEGY, summary.summary_id)
    assert set(summary.replaces) == set(reduction.evicted) - {summary.summary_id}
    assert_view_at_is_what_the_model_received(ledger, "summarized", model)
