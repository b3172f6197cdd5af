"""A model that replies from a script: run real ``agents.Runner`` loops without a network.

Each model call consumes the next step of the script::

    model = ScriptedModel([
        ToolCall("get_weather", {"city": "Paris"}),  # the model calls a tool
        "It is sunny in Paris.",                     # then answers in text
        HandoffTo("Billing"),                        # hands off to another agent
        Reply(text="Let me check.", calls=(ToolCall("lookup", {}),), reasoning="The user asks..."),
        ContextWindowOverflow("too long"),           # an exception step is raised
    ])
    agent = Agent(name="assistant", model=model, tools=[get_weather])

Every call is recorded (:attr:`ScriptedModel.calls`: the instructions, input items, tool
and handoff names the model was given), and each response reports a usage estimate
(about four characters a token) so token-aware policies have numbers to work with.
"""

from __future__ import annotations

import copy
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseUsage,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from contextledger.errors import ContextLedgerError

__all__ = [
    "HandoffTo",
    "ModelCall",
    "Reply",
    "ScriptError",
    "ScriptExhausted",
    "ScriptStep",
    "ScriptedModel",
    "ToolCall",
]


class ScriptError(ContextLedgerError):
    """The script cannot answer this call (e.g. a handoff to an agent that is not offered)."""


class ScriptExhausted(ScriptError):
    """The model was called after its last scripted step."""


@dataclass(frozen=True)
class ToolCall:
    """A function-tool call the model makes.

    Attributes:
        name: The tool's name.
        arguments: A JSON object (serialized compactly) or the raw argument string.
        call_id: The call id; a fresh unique one when ``None``.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class HandoffTo:
    """A handoff the model makes, by the target agent's name (or the handoff tool's name)."""

    agent_name: str
    call_id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One model response: optional reasoning, then text, then tool calls and handoffs."""

    text: str | None = None
    calls: tuple[ToolCall | HandoffTo, ...] = ()
    reasoning: str | None = None


ScriptStep: TypeAlias = str | ToolCall | HandoffTo | Reply | BaseException
"""A step: text, one call, a full :class:`Reply`, or an exception the call raises."""


@dataclass(frozen=True)
class ModelCall:
    """What the model was given on one call (deep copies)."""

    system_instructions: str | None
    input: list[TResponseInputItem]
    tools: list[str]
    handoffs: list[str]


class ScriptedModel(Model):
    """An ``agents`` :class:`~agents.models.interface.Model` that answers from a script.

    Args:
        script: The steps, one per model call, in order.
        name: Prefix of the ids this model makes (``msg_<name>_<n>``, ``call_<name>_<n>``);
            a random one by default so two models in one session never share a call id.

    Raises:
        ScriptExhausted: (on a call) every step has been used.
        ScriptError: (on a call) a :class:`HandoffTo` names an agent the caller does not offer.
    """

    def __init__(self, script: Iterable[ScriptStep] = (), *, name: str | None = None) -> None:
        """Queue ``script``; see the class docstring."""
        self._steps: list[ScriptStep] = list(script)
        self._name = name or uuid.uuid4().hex[:8]
        self._ids = itertools.count(1)
        self.calls: list[ModelCall] = []

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self._steps)

    def add(self, *steps: ScriptStep) -> None:
        """Append steps to the script."""
        self._steps.extend(steps)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        """Record the call and answer with the next step (or raise it)."""
        items: list[TResponseInputItem] = (
            [{"role": "user", "content": input}] if isinstance(input, str) else copy.deepcopy(list(input))
        )
        self.calls.append(
            ModelCall(
                system_instructions=system_instructions,
                input=items,
                tools=[tool.name for tool in tools],
                handoffs=[h.tool_name for h in handoffs],
            )
        )
        if not self._steps:
            raise ScriptExhausted(
                f"scripted model {self._name}: called {len(self.calls)} times, script has no step left"
            )
        step = self._steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        output = self._output(step, handoffs)
        input_tokens = _estimate(items) + _estimate(system_instructions or "")
        output_tokens = _estimate([o.model_dump(exclude_unset=True) for o in output])
        usage = Usage(
            requests=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
        return ModelResponse(output=output, usage=usage, response_id=f"resp_{self._name}_{next(self._ids)}")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Answer as :meth:`get_response` does, streamed as one ``response.completed`` event."""
        answer = await self.get_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        usage = answer.usage
        response = Response(
            id=answer.response_id or "",
            created_at=0,
            model=f"scripted-{self._name}",
            object="response",
            output=answer.output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=True,
            status="completed",
            usage=ResponseUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            ),
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)

    # -- building the output -----------------------------------------------------------

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{self._name}_{next(self._ids)}"

    def _output(
        self, step: str | ToolCall | HandoffTo | Reply, handoffs: list[Handoff[Any, Any]]
    ) -> list[TResponseOutputItem]:
        reply = step if isinstance(step, Reply) else Reply(text=step) if isinstance(step, str) else Reply(calls=(step,))
        output: list[TResponseOutputItem] = []
        if reply.reasoning is not None:
            output.append(
                ResponseReasoningItem(
                    id=self._id("rs"),
                    type="reasoning",
                    summary=[Summary(type="summary_text", text=reply.reasoning)],
                )
            )
        if reply.text is not None:
            output.append(
                ResponseOutputMessage(
                    id=self._id("msg"),
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=reply.text, annotations=[])],
                )
            )
        for call in reply.calls:
            if isinstance(call, HandoffTo):
                name, arguments = _handoff_tool(call.agent_name, handoffs), "{}"
            else:
                name = call.name
                arguments = (
                    call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(dict(call.arguments), separators=(",", ":"))
                )
            call_id = call.call_id or self._id("call")
            output.append(
                ResponseFunctionToolCall(
                    id=self._id("fc"),
                    type="function_call",
                    call_id=call_id,
                    name=name,
                    arguments=arguments,
                    status="completed",
                )
            )
        return output


def _handoff_tool(target: str, handoffs: list[Handoff[Any, Any]]) -> str:
    for handoff in handoffs:
        if target in (handoff.agent_name, handoff.tool_name):
            return handoff.tool_name
    offered = sorted(h.agent_name for h in handoffs)
    raise ScriptError(f"scripted handoff to {target!r}, but the agent offers handoffs to {offered}")


def _estimate(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return (len(text) + 3) // 4
