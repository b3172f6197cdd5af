"""A real Pydantic AI ``Agent`` on the ledger, its model a ``FunctionModel`` that plays a script."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, repair_messages
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextledger.aio import AsyncLedger
from contextledger.integrations.pydantic_ai import dump, from_view
from contextledger.managers import SlidingWindowConversationManager

INSTRUCTIONS = "You are a terse support agent."

Step = str | ToolCallPart | BaseException


@dataclass
class Script:
    """The model: one step per request; what each request received is recorded."""

    steps: list[Step]
    received: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.received.append(list(messages))
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return ModelResponse(parts=[TextPart(step) if isinstance(step, str) else step])


def call(tool: str, call_id: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool, args, tool_call_id=call_id)


def sliding(window: int = 8) -> SlidingWindowConversationManager:
    return SlidingWindowConversationManager(window_size=window, per_turn=True, truncate_threshold=200)


def build(script: Script, *capabilities: AbstractCapability[Any]) -> Agent[None, str]:
    """An agent with two tools whose model is ``script``."""
    agent = Agent(FunctionModel(script), instructions=INSTRUCTIONS, capabilities=list(capabilities))

    @agent.tool_plain
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: shipped from the warehouse in Lyon. " + "tracking history line. " * 40

    @agent.tool_plain
    def refund(order: str, amount: float) -> str:
        """Refund part of an order."""
        return f"refunded {amount} on {order}"

    return agent


async def assert_view_at_is_what_the_model_received(
    ledger: AsyncLedger, session_id: str, received: Sequence[list[ModelMessage]], *, first_call: int = 1
) -> None:
    """Each request's messages are the view at its call, as Pydantic AI sends a history (``repair_messages``)."""
    for n, messages in enumerate(received, start=first_call):
        sent = repair_messages(from_view(await ledger.view_at(session_id, model_call=n)))
        assert dump(sent) == dump(messages), f"model call {n}"
        assert sent == messages, f"model call {n}"
