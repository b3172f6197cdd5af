"""Runs of a real ``Runner`` on a :class:`LedgerSession`, for the OpenAI contract and the property tests.

The scripted turns, the managers and run modes the suites iterate over, a way to run
each test's ledger in its own event loop, and the one check they share: every call's
input is what ``view_at`` says it was.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agents import Agent, Runner, function_tool

from contextledger.aio import AsyncLedger
from contextledger.integrations.openai_agents import LedgerSession, Reply, ScriptedModel, ToolCall, messages_to_items
from contextledger.integrations.openai_agents.scripted import ModelCall, ScriptStep
from contextledger.managers import (
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)
from contextledger.managers.base import ConversationManager

__all__ = [
    "MANAGERS",
    "MODES",
    "PROMPTS",
    "LedgerURL",
    "Logged",
    "assert_inputs_exact",
    "get_weather",
    "run_in_loop",
    "run_turns",
    "script",
]

T = TypeVar("T")
LedgerURL = tuple[str, dict[str, Any]]

MODES = ("run", "run_sync", "run_streamed")
"""How the SDK can run an agent; each must leave the same session."""

MANAGERS: dict[str, Callable[[], ConversationManager | None]] = {
    "none": lambda: None,
    "sliding-per-turn": lambda: SlidingWindowConversationManager(window_size=6, per_turn=True),
    "sliding-proactive": lambda: SlidingWindowConversationManager(window_size=40, proactive_compression=True),
    "summarizing": lambda: SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent_messages=2, proactive_compression={"compression_threshold": 0.01}
    ),
    "turns": lambda: TurnWindowConversationManager(max_user_turns=2, proactive_compression=True),
}
"""contextledger's managers (``none``: the view only grows)."""


@function_tool
def get_weather(city: str) -> str:
    """Report the weather of a city."""
    return f"sunny in {city}, " + "warm " * 80


def run_in_loop(ledger_url: LedgerURL, work: Callable[[AsyncLedger], Awaitable[T]]) -> T:
    """Open the ledger in a fresh event loop, run ``work`` with it, close it."""

    async def main() -> T:
        url, options = ledger_url
        ledger = await AsyncLedger.connect(url, **options)
        try:
            return await work(ledger)
        finally:
            await ledger.close()

    return asyncio.run(main())


def script() -> list[ScriptStep]:
    """Three user turns: tool calls (two at once), a reasoning item, answers."""
    return [
        ToolCall("get_weather", {"city": "Oslo"}),
        "Oslo is sunny.",
        Reply(
            reasoning="Two cities.",
            calls=(ToolCall("get_weather", {"city": "Rome"}), ToolCall("get_weather", {"city": "Lima"})),
        ),
        ToolCall("get_weather", {"city": "Pisa"}),
        "Sunny everywhere.",
        "You're welcome.",
    ]


PROMPTS = ("Weather in Oslo?", "And Rome, Lima and Pisa?", "Thanks!")


async def run_turns(
    session: LedgerSession, agent: Agent[Any], prompts: Sequence[str], mode: str, **run: Any
) -> list[Any]:
    """Run each prompt with the session in ``mode``; returns the final outputs."""
    outputs: list[Any] = []
    for prompt in prompts:
        result: Any
        if mode == "run":
            result = await Runner.run(agent, prompt, session=session, **run)
        elif mode == "run_streamed":
            streamed = Runner.run_streamed(agent, prompt, session=session, **run)
            async for _event in streamed.stream_events():
                pass
            result = streamed
        else:  # run_sync owns its event loop: it runs on a thread of its own
            result = await asyncio.to_thread(functools.partial(Runner.run_sync, agent, prompt, session=session, **run))
        outputs.append(result.final_output)
    return outputs


async def assert_inputs_exact(ledger: AsyncLedger, session: LedgerSession, calls: Sequence[ModelCall]) -> int:
    """``view_at(model_call=N)`` equals what call ``N`` was given (``calls``: every call, in order)."""
    count = (await session.conversation()).model_call_count
    assert count == len(calls), f"{count} calls counted, {len(calls)} made"
    for number, call in enumerate(calls, start=1):
        view = await ledger.view_at(session.session_id, session.agent_id, model_call=number)
        assert messages_to_items(view.messages) == call.input, f"call {number}"
    return count


class Logged(ScriptedModel):
    """A scripted model that also notes each call in a log shared by the models of one session."""

    def __init__(self, script: Sequence[ScriptStep], *, name: str, log: list[ModelCall]) -> None:
        """Play ``script``; append each call to ``log``."""
        super().__init__(script, name=name)
        self.log = log

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        """Answer as :class:`ScriptedModel` does and note the call."""
        try:
            return await super().get_response(*args, **kwargs)
        finally:
            self.log.append(self.calls[-1])
