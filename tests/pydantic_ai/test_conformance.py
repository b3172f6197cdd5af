"""The Pydantic AI session contract of ``LedgerHistory``, on every backend.

A real ``Agent`` with two tools whose ``FunctionModel`` plays a script; each test
states one clause of the contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext

from contextledger.aio import AsyncLedger
from contextledger.errors import ReductionFailed
from contextledger.integrations.pydantic_ai import HOST_STRATEGY, LedgerHistory, dump
from contextledger.managers import NullConversationManager
from tests.pydantic_ai.scenarios import Script, assert_view_at_is_what_the_model_received, build, call, sliding

PROMPTS = ["Where is order A-1?", "Refund 5 on A-1, please.", "Thanks!"]


def script() -> Script:
    return Script(
        [
            call("lookup", "c1", order="A-1"),
            "It shipped from Lyon.",
            call("refund", "c2", order="A-1", amount=5.0),
            ModelContextWindowExceededError("scripted", "prompt is too long"),
            "Refunded 5 on A-1.",
            "You are welcome.",
        ]
    )


def on(backend_url: tuple[str, dict[str, Any]], test: Callable[[AsyncLedger], Awaitable[None]]) -> None:
    url, options = backend_url

    async def main() -> None:
        async with await AsyncLedger.connect(url, **options) as ledger:
            await test(ledger)

    asyncio.run(main())


def test_every_model_request_receives_the_view_the_ledger_records(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        model = script()
        history = LedgerHistory("order-help", ledger=ledger, manager=sliding())
        agent = build(model, history)
        for prompt in PROMPTS:
            await agent.run(prompt)
        conversation = await history.conversation()
        assert conversation.model_call_count == len(model.received) == 6  # the overflowed request counts too
        await assert_view_at_is_what_the_model_received(ledger, "order-help", model.received)
        reductions = await ledger.reductions("order-help")
        assert {r.trigger for r in reductions} >= {"reactive", "per_turn"}
        reactive = next(r for r in reductions if r.trigger == "reactive")
        assert reactive.error is not None
        assert "ModelContextWindowExceededError" in reactive.error
        # The attempt after the overflow was given the reduced view: the long tool return truncated.
        retried = [p for m in model.received[4] for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        assert any(p.tool_call_id == "c1" and len(str(p.content)) < 400 for p in retried)
        (revision,) = await ledger.revisions("order-help")
        assert revision.original[0]["toolResult"]["content"][0]["text"].startswith("order A-1: shipped")

    on(backend_url, test)


def test_the_ledger_gives_back_the_runs_messages_exactly(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        history = LedgerHistory("exact", ledger=ledger)  # no manager: nothing is reduced
        agent = build(Script([call("lookup", "c1", order="A-1"), "Shipped.", "Bye."]), history)
        first = await agent.run(PROMPTS[0])
        second = await agent.run("Bye?", message_history=first.all_messages())
        restored = await LedgerHistory("exact", ledger=ledger).messages()
        assert dump(restored) == dump(second.all_messages())  # instructions, run ids, usage, timestamps
        assert restored == second.all_messages()
        assert len(await ledger.history("exact")) == 6

    on(backend_url, test)


def test_a_new_agent_continues_from_the_ledger_alone(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        agent = build(
            Script([call("lookup", "c1", order="A-1"), "It shipped."]), LedgerHistory("resume", ledger=ledger)
        )
        await agent.run(PROMPTS[0])
        before = await LedgerHistory("resume", ledger=ledger).messages()

        model = Script(["Yes, it did.", "Still yes."])
        history = LedgerHistory("resume", ledger=ledger)
        again = build(model, history)
        result = await again.run("Did it ship?")  # no message_history: the ledger is the memory
        assert model.received[0][:-1] == before
        assert dump(result.all_messages()[:-2]) == dump(before)
        # Handing the ledger's messages over explicitly is the same: nothing is stored twice.
        await again.run("Sure?", message_history=await history.messages())
        assert len(await ledger.history("resume")) == len(before) + 4
        await assert_view_at_is_what_the_model_received(ledger, "resume", model.received, first_call=3)

    on(backend_url, test)


def test_tool_calls_and_their_returns_leave_together(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        steps: list[Any] = [call("lookup", f"c{n}", order=f"B-{n}") if n % 2 == 0 else f"answer {n}" for n in range(12)]
        model = Script(steps)
        agent = build(model, LedgerHistory("pairs", ledger=ledger, manager=sliding(window=5)))
        for n in range(6):
            await agent.run(f"question {n}")
        for received in model.received:
            first = received[0]
            assert isinstance(first, ModelRequest)
            assert not any(isinstance(p, ToolReturnPart) for p in first.parts), "the view opens on a user prompt"
        messages = {h.message.message_id: h.message for h in await ledger.history("pairs")}
        reductions = await ledger.reductions("pairs")
        assert reductions
        for reduction in reductions:
            gone = [messages[i] for i in reduction.evicted]
            assert {u for m in gone for u in m.tool_use_ids} == {u for m in gone for u in m.tool_result_ids}

    on(backend_url, test)


def test_an_overflow_nothing_can_reduce_raises_a_typed_error_and_loses_nothing(
    backend_url: tuple[str, dict[str, Any]],
) -> None:
    async def test(ledger: AsyncLedger) -> None:
        overflow = ModelContextWindowExceededError("scripted", "too long")
        history = LedgerHistory("full", ledger=ledger, manager=sliding())
        with pytest.raises(ReductionFailed):
            await build(Script([overflow]), history).run("A prompt the model cannot take.")
        conversation = await history.conversation()
        assert [m.plain_text for m in conversation.messages] == ["A prompt the model cannot take."]
        assert await ledger.reductions("full") == []
        null = LedgerHistory("null", ledger=ledger, manager=NullConversationManager())
        with pytest.raises(ModelContextWindowExceededError):
            await build(Script([overflow]), null).run("Again.")

    on(backend_url, test)


class DropOldest(AbstractCapability[Any]):
    """A capability ordered before the ledger's that drops the oldest message from the history."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        if len(ctx.messages) >= 5:
            del ctx.messages[0]
            request_context.messages = list(ctx.messages)
        return request_context


def test_what_the_host_drops_is_recorded_as_a_host_reduction(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        model = Script([call("lookup", "c1", order="A-1"), "Shipped.", "Noted.", "Bye."])
        agent = build(model, DropOldest(), LedgerHistory("host", ledger=ledger))
        result = None
        for prompt in ["Where is A-1?", "Also B-2.", "Bye."]:
            result = await agent.run(prompt, message_history=result.all_messages() if result else None)
        host = [r for r in await ledger.reductions("host") if r.strategy == HOST_STRATEGY]
        assert host
        assert {i for r in host for i in r.evicted} == {e.entry_id for e in await ledger.evictions("host")}
        await assert_view_at_is_what_the_model_received(ledger, "host", model.received)

    on(backend_url, test)


def test_save_appends_only_what_is_new_and_records_an_edit(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        result = await build(Script(["Hello."])).run("Hi, I am Ada.")  # an agent without the capability
        history = LedgerHistory("saved", ledger=ledger)
        await history.save(result.all_messages())
        await history.save(result.all_messages())  # again: nothing new
        assert len(await ledger.history("saved")) == 2
        edited: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("Hi, I am Ada Lovelace.")]),
            result.all_messages()[1],
        ]
        await history.save(edited)
        (revision,) = await ledger.revisions("saved")
        assert revision.original[0] == {"text": "Hi, I am Ada."}
        first = (await history.messages())[0]  # the edit, in the message as it was first stored
        assert isinstance(first, ModelRequest)
        assert [p.content for p in first.parts if isinstance(p, UserPromptPart)] == ["Hi, I am Ada Lovelace."]
        assert first.timestamp == result.all_messages()[0].timestamp

    on(backend_url, test)


def test_the_history_processor_alone_manages_and_records(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        history = LedgerHistory("processor", ledger=ledger, manager=sliding(window=4))
        model = Script([f"answer {n}" for n in range(4)])
        agent = build(model, ProcessHistory(history.process))
        result = None
        for n in range(4):
            result = await agent.run(f"question {n}", message_history=result.all_messages() if result else None)
        assert result is not None
        await history.save(result.all_messages())
        await assert_view_at_is_what_the_model_received(ledger, "processor", model.received)
        assert {r.trigger for r in await ledger.reductions("processor")} == {"per_turn"}

    on(backend_url, test)


def test_extend_appends_a_runs_new_messages_in_one_commit(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        history = LedgerHistory("extended", ledger=ledger)
        agent = build(Script(["Hello.", "Fine."]))
        first = await agent.run("Hi.")
        await history.extend(first.new_messages())
        second = await agent.run("How are you?", message_history=await history.messages())
        version = (await history.conversation()).version
        await history.extend(second.new_messages())
        assert (await history.conversation()).version == version + 1
        assert dump(await history.messages()) == dump(second.all_messages())

    on(backend_url, test)


def test_a_run_sees_what_another_writer_added_since_the_last_run(backend_url: tuple[str, dict[str, Any]]) -> None:
    async def test(ledger: AsyncLedger) -> None:
        model = Script(["First.", "Second."])
        agent = build(model, LedgerHistory("shared", ledger=ledger))
        await agent.run("One.")
        other = LedgerHistory("shared", ledger=ledger)  # another process's writer, on the same session
        await other.extend([ModelRequest(parts=[UserPromptPart("A note from elsewhere.")])])
        await agent.run("Two.")
        texts = [p.content for m in model.received[1] for p in getattr(m, "parts", []) if isinstance(p, UserPromptPart)]
        assert texts == ["One.", "A note from elsewhere.", "Two."]

    on(backend_url, test)
