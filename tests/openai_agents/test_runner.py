"""A real ``agents.Runner`` driven by ScriptedModel: the items a run produces round-trip
through a contextledger conversation, and reductions over them keep tool pairs whole."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, RunHooks, Runner, SQLiteSession, function_tool

from contextledger import (
    ConfigurationError,
    Conversation,
    Ledger,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from contextledger.integrations.openai_agents import (
    HandoffTo,
    LedgerRunHooks,
    Reply,
    ScriptedModel,
    ScriptError,
    ScriptExhausted,
    ToolCall,
    items_to_messages,
    messages_to_items,
)
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.openai_agents.sdk_examples import SCREENSHOT, all_items, conversation_items


@function_tool
def get_weather(city: str) -> str:
    """Report the weather of a city."""
    return f"sunny in {city}"


@function_tool
def get_time(city: str) -> str:
    """Report the local time of a city."""
    return f"noon in {city}"


def stored_items(session: Any) -> list[dict[str, Any]]:
    """The session's items as plain dicts (the SDK types them as a union of TypedDicts)."""
    return cast(list[dict[str, Any]], asyncio.run(session.get_items()))


def triage_pair() -> tuple[Agent[Any], Agent[Any], ScriptedModel, ScriptedModel]:
    billing_model = ScriptedModel(["Billing here: your refund is on its way."], name="billing")
    billing = Agent(name="Billing", instructions="Handle refunds.", model=billing_model)
    triage_model = ScriptedModel(
        [
            Reply(
                text="Let me check both.",
                reasoning="Two cities: call the tool twice.",
                calls=(ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_time", {"city": "Rome"})),
            ),
            "Paris is sunny; it is noon in Rome.",
            HandoffTo("Billing"),
        ],
        name="triage",
    )
    triage = Agent(name="Triage", model=triage_model, tools=[get_weather, get_time], handoffs=[billing])
    return triage, billing, triage_model, billing_model


async def two_runs(session: SQLiteSession) -> tuple[Any, Any, ScriptedModel, ScriptedModel]:
    triage, _billing, triage_model, billing_model = triage_pair()
    first = await Runner.run(triage, "Weather in Paris, time in Rome?", session=session)
    second = await Runner.run(triage, "I want a refund.", session=session)
    return first, second, triage_model, billing_model


def test_a_real_run_with_tools_and_a_handoff_round_trips_through_the_ledger(tmp_path: Path) -> None:
    session = SQLiteSession("s1")  # the SDK's own session, in memory
    first, second, triage_model, billing_model = asyncio.run(two_runs(session))
    assert first.final_output == "Paris is sunny; it is noon in Rome."
    assert second.last_agent.name == "Billing"
    assert second.final_output == "Billing here: your refund is on its way."
    items = stored_items(session)
    kinds = [i.get("type", "message") for i in items]
    assert kinds.count("function_call") == 3  # two tools, one transfer_to_billing
    assert kinds.count("function_call_output") == 3
    assert "reasoning" in kinds
    # The model saw the session's items: what the ledger must give back.
    assert billing_model.calls[-1].input == items[: len(billing_model.calls[-1].input)]
    assert triage_model.calls[1].input == items[: len(triage_model.calls[1].input)]

    url = f"sqlite:///{tmp_path / 'agents.db'}"
    for ledger_url in ("memory://", url):
        with Ledger.connect(ledger_url) as ledger:
            ledger.conversation("s1").append(*items_to_messages(items))
            assert messages_to_items(ledger.conversation("s1").messages) == items
    with Ledger.connect(url) as reopened:  # a fresh connection: a restart
        conversation = reopened.conversation("s1")
        assert messages_to_items(conversation.messages) == items
        assert conversation.view.dangling_tool_uses() == []


def test_a_handoff_is_a_tool_pair_in_the_ledger() -> None:
    session = SQLiteSession("s2")
    asyncio.run(two_runs(session))
    items = stored_items(session)
    transfer = next(i for i in items if i.get("name") == "transfer_to_billing")
    output = next(i for i in items if i.get("type") == "function_call_output" and i["call_id"] == transfer["call_id"])
    conversation = Conversation(MemoryStore(), "s2")
    conversation.append(*items_to_messages(items))
    view = conversation.view
    assert view.group_of(items.index(transfer)) == [items.index(transfer), items.index(output)]


def test_an_image_input_round_trips_as_the_session_stored_it() -> None:
    session = SQLiteSession("image")
    user: Any = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": SCREENSHOT, "detail": "low"},
        ],
    }
    model = ScriptedModel(["A tiny image."], name="img")
    asyncio.run(Runner.run(Agent(name="A", model=model), [user], session=session))
    items = stored_items(session)
    assert items[0] == user
    messages = items_to_messages(items)
    assert any("image" in block for block in messages[0].content), "managers and token counters see an image"
    assert messages_to_items(messages) == items


async def long_tool_run(session: SQLiteSession, turns: int) -> None:
    script: list[Any] = []
    for n in range(turns):
        calls = (ToolCall("get_weather", {"city": f"c{n}"}),) + (
            (ToolCall("get_time", {"city": f"c{n}"}),) if n % 2 else ()
        )
        script += [Reply(calls=calls, reasoning=f"turn {n}" if n % 3 == 0 else None), f"answer {n}"]
    agent = Agent(name="A", model=ScriptedModel(script, name="long"), tools=[get_weather, get_time])
    for n in range(turns):
        await Runner.run(agent, f"question {n}", session=session)


def assert_pairs_whole(items: list[dict[str, Any]]) -> None:
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert calls == outputs
    for item in items:
        if item.get("type") == "function_call_output":
            position = items.index(item)
            assert any(
                i.get("call_id") == item["call_id"] for i in items[:position] if i.get("type") == "function_call"
            )


@pytest.mark.parametrize("window", [1, 2, 3, 4, 5, 7, 10, 15])
def test_a_sliding_window_over_real_items_never_splits_a_call_from_its_output(window: int) -> None:
    session = SQLiteSession("long")
    asyncio.run(long_tool_run(session, turns=5))
    items = stored_items(session)
    store = MemoryStore()
    conversation = Conversation(store, "long", manager=SlidingWindowConversationManager(window_size=window))
    conversation.append(*items_to_messages(items))
    conversation.reduce("reactive")
    kept = messages_to_items(Conversation(store, "long").messages)
    assert 0 < len(kept) < len(items)
    assert_pairs_whole(kept)
    # What survives are the SDK's items, unchanged and in order (parallel calls are evicted
    # by pair, so the survivors need not be a plain suffix), starting with the newest user
    # prompt or earlier (the view rules keep it).
    rest = iter(items)
    assert all(any(k == i for i in rest) for k in kept)
    newest_prompt = [i for i in items if i.get("role") == "user"][-1]
    assert newest_prompt in kept
    assert kept[0].get("role") == "user"
    # ... and the SDK accepts it as the history of a new run.
    reduced = SQLiteSession("reduced")
    asyncio.run(reduced.add_items(cast(Any, kept)))
    model = ScriptedModel(["fine"], name="after")
    result = asyncio.run(
        Runner.run(Agent(name="A", model=model, tools=[get_weather, get_time]), "go on", session=reduced)
    )
    assert result.final_output == "fine"
    assert model.calls[0].input[: len(kept)] == kept


@pytest.mark.parametrize("ratio", [0.2, 0.5, 0.8, 1.0])
def test_a_summary_over_real_items_takes_or_leaves_each_tool_pair_whole(ratio: float) -> None:
    session = SQLiteSession("summary")
    asyncio.run(long_tool_run(session, turns=4))
    items = stored_items(session)
    store = MemoryStore()
    manager = SummarizingConversationManager(summary_ratio=ratio, preserve_recent_messages=2)
    conversation = Conversation(store, "summary", manager=manager)
    conversation.append(*items_to_messages(items))
    assert conversation.reduce("reactive") is not None
    restored = messages_to_items(Conversation(store, "summary").messages)
    summary, kept = restored[0], restored[1:]
    assert summary["role"] == "user"
    assert isinstance(summary["content"], str)
    assert summary not in items, "the first item is the summary the reduction made"
    assert_pairs_whole(kept)
    rest = iter(items)
    assert all(any(k == i for i in rest) for k in kept)


def test_a_pinned_function_call_keeps_its_output_through_a_reduction() -> None:
    session = SQLiteSession("pins")
    asyncio.run(long_tool_run(session, turns=4))
    items = stored_items(session)
    first_call = next(i for i in items if i.get("type") == "function_call")
    store = MemoryStore()
    conversation = Conversation(store, "pins", manager=SlidingWindowConversationManager(window_size=1))
    messages = items_to_messages(items)
    conversation.append(*messages)
    conversation.pin(messages[items.index(first_call)].message_id)
    conversation.reduce("reactive")
    kept = messages_to_items(Conversation(store, "pins").messages)
    assert first_call in kept
    assert next(
        i
        for i in kept
        if i.get("call_id") == first_call["call_id"] and i is not first_call and i.get("type") == "function_call_output"
    )
    assert_pairs_whole(kept)
    assert len(kept) < len(items)


# -- the SDK's item shapes on every backend -------------------------------------------------


@pytest.mark.parametrize(("name", "item"), sorted(all_items().items()))
def test_each_item_type_the_sdk_produces_round_trips(name: str, item: dict[str, Any]) -> None:
    assert messages_to_items(items_to_messages([item])) == [item], name


def test_the_sdk_item_types_survive_every_store(store: CompleteStore) -> None:
    items = conversation_items()
    Conversation(store, "kinds").append(*items_to_messages(items))
    restored = Conversation(store, "kinds")
    assert messages_to_items(restored.messages) == items
    assert restored.view.dangling_tool_uses() == []
    assert restored.view.orphan_results() == []


# -- the scripted model ------------------------------------------------------------------------


def test_the_scripted_model_streams() -> None:
    model = ScriptedModel([ToolCall("get_weather", {"city": "Oslo"}), "Oslo is sunny."], name="stream")
    agent = Agent(name="A", model=model, tools=[get_weather])

    async def run() -> Any:
        result = Runner.run_streamed(agent, "weather?")
        async for _event in result.stream_events():
            pass
        return result

    result = asyncio.run(run())
    assert result.final_output == "Oslo is sunny."
    assert [c.input[-1].get("type") for c in model.calls] == [None, "function_call_output"]


def test_the_scripted_model_records_what_it_was_given() -> None:
    model = ScriptedModel(["hello"], name="rec")
    agent = Agent(name="A", instructions="Be kind.", model=model, tools=[get_weather])
    asyncio.run(Runner.run(agent, "hi"))
    (call,) = model.calls
    assert call.system_instructions == "Be kind."
    assert call.input == [{"role": "user", "content": "hi"}]
    assert call.tools == ["get_weather"]
    assert model.remaining == 0


def test_the_scripted_model_raises_clear_errors() -> None:
    agent = Agent(name="A", model=ScriptedModel([], name="empty"))
    with pytest.raises(ScriptExhausted, match="no step left"):
        asyncio.run(Runner.run(agent, "hi"))
    lost = Agent(name="A", model=ScriptedModel([HandoffTo("Nobody")], name="lost"), handoffs=[Agent(name="Billing")])
    with pytest.raises(ScriptError, match=r"'Nobody'.*\['Billing'\]"):
        asyncio.run(Runner.run(lost, "hi"))
    failing = Agent(name="A", model=ScriptedModel([TimeoutError("provider down")], name="fail"))
    with pytest.raises(TimeoutError, match="provider down"):
        asyncio.run(Runner.run(failing, "hi"))


# -- run hooks -----------------------------------------------------------------------------------


class MemoryAsyncConversation:
    """Coroutine face of a conversation on the in-process store, which does no I/O.

    Test scaffolding until the async conversation exists; not a pattern for real stores.
    """

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.session_id = conversation.session_id

    async def before_model_call(self) -> Any:
        return self.conversation.before_model_call()

    async def after_model_call(self, error: BaseException | None = None) -> bool:
        return self.conversation.after_model_call(error)


class Recorder(RunHooks[Any]):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        self.events.append("llm_start")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.events.append("llm_end")

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.events.append(f"tool_start:{tool.name}")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.events.append(f"tool_end:{tool.name}")

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self.events.append(f"handoff:{from_agent.name}->{to_agent.name}")

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        self.events.append(f"agent_start:{agent.name}")

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        self.events.append(f"agent_end:{agent.name}")


def test_ledger_run_hooks_count_every_model_call_and_forward_to_the_apps_hooks() -> None:
    store = MemoryStore()
    conversation = Conversation(store, "hooks")
    app = Recorder()
    hooks = LedgerRunHooks(MemoryAsyncConversation(conversation), hooks=app)
    triage, _billing, triage_model, billing_model = triage_pair()
    asyncio.run(Runner.run(triage, "Weather in Paris, time in Rome?", hooks=hooks))
    asyncio.run(Runner.run(triage, "I want a refund.", hooks=hooks))
    model_calls = len(triage_model.calls) + len(billing_model.calls)
    assert model_calls == 4
    assert conversation.model_call_count == model_calls
    assert Conversation(store, "hooks").model_call_count == model_calls, "the count is committed"
    assert app.events.count("llm_start") == app.events.count("llm_end") == model_calls
    assert "handoff:Triage->Billing" in app.events
    assert {"tool_start:get_weather", "tool_end:get_time", "agent_start:Billing", "agent_end:Billing"} <= set(
        app.events
    )


def test_ledger_run_hooks_refuse_a_sync_conversation() -> None:
    with pytest.raises(ConfigurationError, match="coroutine function"):
        LedgerRunHooks(Conversation(MemoryStore(), "s"))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="RunHooks"):
        LedgerRunHooks(MemoryAsyncConversation(Conversation(MemoryStore(), "s")), hooks=object())  # type: ignore[arg-type]
