"""``LedgerSession`` driven by the real ``Runner`` with scripted models (no network)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.memory import Session, SessionSettings

from contextledger import Ledger, SlidingWindowConversationManager
from contextledger.aio import AsyncLedger
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.openai_agents import (
    HandoffTo,
    LedgerRunHooks,
    LedgerSession,
    Reply,
    ScriptedModel,
    ToolCall,
)
from contextledger.stores.memory import MemoryStore

ROOT = Path(__file__).resolve().parents[2]


@function_tool
def get_weather(city: str) -> str:
    """Report the weather of a city."""
    return f"sunny in {city}"


def kinds(items: list[Any]) -> list[str]:
    return [i.get("type", "message") for i in items]


def test_it_is_an_sdk_session() -> None:
    session = LedgerSession("s", ledger=AsyncLedger(MemoryStore()))
    assert isinstance(session, Session)
    assert session.session_id == "s"
    assert session.session_settings is None


def test_tool_calls_and_a_handoff_in_one_session_are_what_the_models_saw(tmp_path: Path) -> None:
    billing_model = ScriptedModel(["Billing here: refund sent."], name="billing")
    billing = Agent(name="Billing", model=billing_model)
    triage_model = ScriptedModel(
        [
            Reply(text="Checking.", reasoning="One tool call.", calls=(ToolCall("get_weather", {"city": "Paris"}),)),
            "It is sunny in Paris.",
            HandoffTo("Billing"),
        ],
        name="triage",
    )
    triage = Agent(name="Triage", model=triage_model, tools=[get_weather], handoffs=[billing])
    url = f"sqlite:///{tmp_path / 'agents.db'}"

    async def main() -> list[Any]:
        session = LedgerSession("u1", url=url)
        try:
            first = await Runner.run(triage, "Weather in Paris?", session=session)
            assert first.final_output == "It is sunny in Paris."
            second = await Runner.run(triage, "I want a refund.", session=session)
            assert second.last_agent.name == "Billing"
            return await session.get_items()
        finally:
            await session.close()

    items = asyncio.run(main())
    assert kinds(items).count("function_call") == 2  # the tool and transfer_to_billing
    assert kinds(items).count("function_call_output") == 2
    assert "reasoning" in kinds(items)
    # Each model was given exactly the session's items so far.
    assert billing_model.calls[-1].input == items[: len(billing_model.calls[-1].input)]
    assert triage_model.calls[-1].input == items[: len(triage_model.calls[-1].input)]
    with Ledger.connect(url) as ledger:  # the sync API reads the same conversation
        assert [h.message.message_id for h in ledger.history("u1")] == [
            e.message.message_id for e in ledger.conversation("u1").view
        ]


def test_per_turn_management_and_the_model_call_count_through_the_run_hooks() -> None:
    ledger = AsyncLedger(MemoryStore())
    session = LedgerSession("u2", ledger=ledger, manager=SlidingWindowConversationManager(window_size=4, per_turn=True))
    model = ScriptedModel([ToolCall("get_weather", {"city": "Oslo"}), "Sunny.", "Still sunny.", "Yes."], name="m")
    agent = Agent(name="A", model=model, tools=[get_weather])

    async def main() -> tuple[int, list[Any], list[Any]]:
        hooks = LedgerRunHooks(session)
        for prompt in ("Weather in Oslo?", "And now?", "Sure?"):
            await Runner.run(agent, prompt, session=session, hooks=hooks, run_config=session.run_config())
        conversation = await session.conversation()
        return conversation.model_call_count, await ledger.reductions("u2"), await session.get_items()

    count, reductions, items = asyncio.run(main())
    assert count == 4 == len(model.calls)
    assert reductions
    assert {r.trigger for r in reductions} == {"per_turn"}
    assert len(items) <= 5  # the window (4) plus what the last turn added after the reduction
    assert kinds(items)[0] != "function_call_output"  # never an output without its call
    # The window reached the calls it was made for: no model input was longer than window + 1.
    assert max(len(call.input) for call in model.calls) <= 5


def test_a_pinned_item_outlives_the_window() -> None:
    ledger = AsyncLedger(MemoryStore())
    session = LedgerSession("u3", ledger=ledger, manager=SlidingWindowConversationManager(window_size=2, per_turn=True))
    model = ScriptedModel([f"answer {n}" for n in range(5)], name="p")
    agent = Agent(name="A", model=model)

    async def main() -> list[Any]:
        config = session.run_config()
        await Runner.run(agent, "My order is A-1042; remember it.", session=session, run_config=config)
        await (await session.conversation()).pin_index(0)
        for n in range(4):
            await Runner.run(agent, f"question {n}", session=session, run_config=config)
        return await session.get_items()

    items = asyncio.run(main())
    assert items[0]["content"] == "My order is A-1042; remember it."
    assert model.calls[-1].input[0]["content"] == "My order is A-1042; remember it."  # type: ignore[typeddict-item]
    assert len(model.calls[-1].input) < 10  # the rest was evicted


def test_get_items_limit_never_splits_a_tool_pair_and_honours_session_settings() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    items = [{"role": "user", "content": "hi"}, call, output, {"role": "assistant", "content": "done"}]
    session = LedgerSession("u4", ledger=AsyncLedger(MemoryStore()), session_settings=SessionSettings(limit=2))

    async def main() -> tuple[list[Any], ...]:
        await session.add_items(items)  # type: ignore[arg-type]
        return (
            await session.get_items(),  # the settings' limit: 2
            await session.get_items(3),
            await session.get_items(4),
            await session.get_items(0),
        )

    two, three, four, none = asyncio.run(main())
    assert two == [items[3]]  # the pair would be cut: left out whole
    assert three == items[1:]
    assert four == items
    assert none == []


def test_pop_item_is_a_recorded_reduction_and_the_item_stays_in_history() -> None:
    ledger = AsyncLedger(MemoryStore())
    session = LedgerSession("u5", ledger=ledger)
    items = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}]

    async def main() -> tuple[Any, Any, list[Any], list[Any], list[Any]]:
        await session.add_items(items)  # type: ignore[arg-type]
        popped = await session.pop_item()
        left = await session.get_items()
        empty_pop = (await session.pop_item(), await session.pop_item())
        return popped, empty_pop, left, await ledger.reductions("u5"), await ledger.history("u5")

    popped, (again, nothing), left, reductions, history = asyncio.run(main())
    assert popped == items[1]
    assert again == items[0]
    assert nothing is None
    assert left == items[:1]
    assert [r.strategy for r in reductions] == ["pop", "pop"]
    assert [h.status for h in history] == ["evicted", "evicted"]


def test_clear_session_evicts_the_whole_view_in_one_reduction() -> None:
    ledger = AsyncLedger(MemoryStore())
    session = LedgerSession("u6", ledger=ledger)

    async def main() -> tuple[list[Any], list[Any], int]:
        await session.add_items([{"role": "user", "content": f"m{n}"} for n in range(3)])
        await session.clear_session()
        await session.clear_session()  # nothing left: nothing recorded
        return await session.get_items(), await ledger.reductions("u6"), len(await ledger.history("u6"))

    items, reductions, kept = asyncio.run(main())
    assert items == []
    (reduction,) = reductions
    assert reduction.strategy == "clear"
    assert len(reduction.evicted) == 3
    assert kept == 3


def test_a_reasoning_item_stays_with_the_call_after_it() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]}
    call = {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c9", "output": "ok"}
    thought = {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "answer now"}]}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    prompt, follow_up = {"role": "user", "content": "go"}, {"role": "user", "content": "?"}
    items = [prompt, reasoning, call, output, thought, answer, follow_up]
    session = LedgerSession("u7", ledger=AsyncLedger(MemoryStore()))

    async def main() -> tuple[list[list[int]], list[Any], list[Any]]:
        await session.add_items(items)  # type: ignore[arg-type]
        view = (await session.conversation()).view
        return view.groups, await session.get_items(), await session.get_items(2)

    groups, back, newest = asyncio.run(main())
    assert back == items  # linking changes no item
    assert [1, 2, 3] in groups
    assert [4, 5] in groups
    assert newest == [items[-1]]  # a limit that would cut reasoning from its answer leaves both out


def test_bad_input_is_refused_and_nothing_is_stored() -> None:
    ledger = AsyncLedger(MemoryStore())
    session = LedgerSession("u8", ledger=ledger)

    async def main() -> list[Any]:
        with pytest.raises(InvalidMessage):
            await session.add_items([{"role": "user", "content": "ok"}, {"type": "function_call"}])  # type: ignore[list-item,misc]
        holding_itself: dict[str, Any] = {"type": "function_call_output", "call_id": "c1", "output": "x"}
        holding_itself["extra"] = [holding_itself]
        with pytest.raises(InvalidMessage, match="nested more than 100 levels deep"):
            await session.add_items([{"role": "user", "content": "ok"}, holding_itself])  # type: ignore[list-item]
        assert await session.get_items() == []
        with pytest.raises(ConfigurationError):
            await session.get_items(-1)
        return await ledger.history("u8")

    assert asyncio.run(main()) == []
    with pytest.raises(ConfigurationError):
        LedgerSession("s", ledger=AsyncLedger(MemoryStore()), url="memory://")
    with pytest.raises(ConfigurationError):
        LedgerSession("s", ledger=Ledger(MemoryStore()))  # type: ignore[arg-type]


CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from agents import Agent, Runner, set_tracing_disabled
    from contextledger import SlidingWindowConversationManager
    from contextledger.integrations.openai_agents import LedgerSession, ScriptedModel

    set_tracing_disabled(True)

    async def main(url, prompt, answer):
        manager = SlidingWindowConversationManager(window_size=4, per_turn=True)
        session = LedgerSession("restart", url=url, manager=manager)
        model = ScriptedModel([answer], name="child")
        agent = Agent(name="A", model=model)
        result = await Runner.run(agent, prompt, session=session, run_config=session.run_config())
        print(json.dumps({"output": result.final_output, "input": model.calls[0].input}))
        await session.close()

    if __name__ == "__main__":
        asyncio.run(main(*sys.argv[1:4]))
    """
)


def test_a_restart_in_a_fresh_process_continues_the_conversation(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    namespace: dict[str, Any] = {"__name__": "child"}
    exec(CHILD, namespace)  # the same program, in this process

    def turn_here(prompt: str, answer: str) -> None:
        asyncio.run(namespace["main"](url, prompt, answer))

    turn_here("My name is Ada.", "Hello Ada.")
    # A fresh process continues the conversation.
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, "What is my name?", "Ada."],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT,
    )
    second = json.loads(done.stdout.strip().splitlines()[-1])
    assert second["output"] == "Ada."
    # It was given what this process stored, then its own prompt.
    texts = [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in second["input"]]
    assert texts == ["My name is Ada.", "Hello Ada.", "What is my name?"]
    turn_here("And my order?", "A-1042.")  # five items at this model call: the window (4) evicts
    # What left the view, as the command line shows it.
    shown = subprocess.run(
        [sys.executable, "-m", "contextledger", "evictions", "restart", "--url", url, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT,
    )
    evicted = json.loads(shown.stdout)
    assert evicted, shown.stdout
    assert {e["trigger"] for e in evicted} == {"per_turn"}
    assert any("My name is Ada." in json.dumps(e) for e in evicted)
