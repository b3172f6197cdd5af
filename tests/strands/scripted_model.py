"""A Strands model that plays a script instead of calling a provider (no network).

Each model call consumes one step of the script. A step is a :class:`Reply`, a
:class:`CallTool`, an :class:`Overflow` (the call fails with Strands'
``ContextWindowOverflowException``) or a callable that receives the messages the model
was given and returns one of those (it may also end the process, to simulate a crash).
Summarization requests (Strands' summarizing manager asks the model directly) are
answered without consuming the script, deterministically.

Like a real Converse provider, the model rejects a conversation whose tool calls are
not answered: every toolUse must be followed by the user message carrying its
toolResult, and every toolResult must answer the toolUse just before it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from strands.models.model import Model
from strands.types.content import Messages
from strands.types.event_loop import StopReason
from strands.types.exceptions import ContextWindowOverflowException
from strands.types.streaming import StreamEvent

SUMMARIZE_PROMPT = "Please summarize this conversation."


class ProviderValidationError(Exception):
    """The provider refused the request (malformed conversation)."""


@dataclass(frozen=True)
class Reply:
    """The model answers with text and ends its turn."""

    text: str
    input_tokens: int | None = None
    redact_user: str | None = None  # a guardrail asks to redact the latest user message


@dataclass(frozen=True)
class CallTool:
    """The model asks for one tool call."""

    name: str
    input: dict[str, Any]
    tool_use_id: str
    text: str | None = None
    input_tokens: int | None = None


@dataclass(frozen=True)
class Overflow:
    """The model rejects the input as too long."""

    message: str = "Input is too long for requested model"


Outcome = Reply | CallTool | Overflow
Step = Outcome | Callable[[Messages], Outcome]


@dataclass
class Call:
    """What one model call was given."""

    messages: Messages
    system_prompt: str | None
    summarization: bool


def estimate_tokens(messages: Messages) -> int:
    """Roughly four characters a token over the JSON of the messages."""
    return math.ceil(len(json.dumps(messages, default=str)) / 4)


def validate_converse(messages: Messages, *, summarization: bool = False) -> None:
    """Raise :class:`ProviderValidationError` for a conversation a Converse provider rejects."""
    if not messages:
        raise ProviderValidationError("messages must not be empty")
    if not summarization and messages[0]["role"] != "user":
        raise ProviderValidationError("a conversation must start with a user message")
    for index, message in enumerate(messages):
        uses = [b["toolUse"]["toolUseId"] for b in message["content"] if "toolUse" in b]
        results = [b["toolResult"]["toolUseId"] for b in message["content"] if "toolResult" in b]
        if uses:
            following = messages[index + 1] if index + 1 < len(messages) else None
            answered = (
                [b["toolResult"]["toolUseId"] for b in following["content"] if "toolResult" in b]
                if following is not None and following["role"] == "user"
                else []
            )
            if sorted(answered) != sorted(uses):
                raise ProviderValidationError(
                    f"toolUse {uses} at message {index} is not followed by its toolResult (got {answered})"
                )
        if results:
            previous = messages[index - 1] if index > 0 else None
            called = [b["toolUse"]["toolUseId"] for b in previous["content"] if "toolUse" in b] if previous else []
            if sorted(called) != sorted(results):
                raise ProviderValidationError(f"toolResult {results} at message {index} answers no toolUse")


class ScriptedModel(Model):
    """Plays ``script`` one step per model call; fails the call when the script runs out."""

    def __init__(self, script: Iterable[Step] = (), *, context_window_limit: int | None = None) -> None:
        self.script: list[Step] = list(script)
        self.context_window_limit_tokens = context_window_limit
        self.calls: list[Call] = []

    def extend(self, steps: Iterable[Step]) -> None:
        self.script.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self.script)

    def update_config(self, **model_config: Any) -> None:
        if "context_window_limit" in model_config:
            self.context_window_limit_tokens = model_config["context_window_limit"]

    def get_config(self) -> dict[str, Any]:
        return {"model_id": "scripted", "context_window_limit": self.context_window_limit_tokens}

    def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError("the scripted model has no structured output")

    async def stream(
        self,
        messages: Messages,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        summarization = _is_summarization(messages)
        self.calls.append(
            Call(
                messages=json.loads(json.dumps(messages, default=str)),
                system_prompt=system_prompt,
                summarization=summarization,
            )
        )
        validate_converse(messages, summarization=summarization)
        step: Outcome
        if summarization:
            step = Reply(f"Summary #{sum(c.summarization for c in self.calls)}: " + _digest(messages[:-1]))
        else:
            if not self.script:
                raise AssertionError("the scripted model ran out of steps")
            head = self.script.pop(0)
            step = head(messages) if callable(head) else head
        if isinstance(step, Overflow):
            raise ContextWindowOverflowException(step.message)
        input_tokens = step.input_tokens if step.input_tokens is not None else estimate_tokens(messages)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, Reply) and step.redact_user is not None:
            yield {"redactContent": {"redactUserContentMessage": step.redact_user}}
        if isinstance(step, Reply):
            yield {"contentBlockDelta": {"delta": {"text": step.text}}}
            yield {"contentBlockStop": {}}
            stop: StopReason = "end_turn"
            output = step.text
        else:
            if step.text:
                yield {"contentBlockDelta": {"delta": {"text": step.text}}}
                yield {"contentBlockStop": {}}
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": step.tool_use_id, "name": step.name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(step.input)}}}}
            yield {"contentBlockStop": {}}
            stop = "tool_use"
            output = json.dumps(step.input)
        yield {"messageStop": {"stopReason": stop}}
        output_tokens = math.ceil(len(output) / 4)
        yield {
            "metadata": {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": 1},
            }
        }


def _is_summarization(messages: Messages) -> bool:
    if not messages:
        return False
    last = messages[-1]
    return last.get("role") == "user" and any(b.get("text") == SUMMARIZE_PROMPT for b in last.get("content", []))


def _digest(messages: Messages) -> str:
    texts: list[str] = []
    for message in messages:
        for block in message.get("content", []):
            if "text" in block:
                texts.append(block["text"][:24])
            elif "toolUse" in block:
                texts.append(f"called {block['toolUse']['name']}")
            elif "toolResult" in block:
                texts.append("tool result")
    return "; ".join(texts)
