"""``ScriptedModel``: an offline Strands model that plays a script (examples and your own tests).

``Agent(model=ScriptedModel(["Hello!", CallTool("lookup", {"key": "a"}, "tu-1"), "Found it."]))``
answers each model call with the next step of its script, without a network or a
provider account. A step is:

* a ``str`` or :class:`Reply` -- the model answers with text and ends its turn;
* a :class:`CallTool` -- the model asks for one tool call;
* an :class:`Overflow` -- the call fails with Strands' ``ContextWindowOverflowException``;
* a callable that receives the messages the model was given and returns one of those
  (it may also raise, or end the process to simulate a crash).

Summarization requests (Strands' summarizing manager asks the model directly) are
answered without consuming the script, deterministically. Like a real Converse
provider, the model refuses a conversation whose tool calls are not answered
(:class:`ProviderValidationError`): every toolUse must be followed by the user message
carrying its toolResult, and every toolResult must answer the toolUse just before it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from strands.models.model import Model
from strands.types.content import Messages
from strands.types.exceptions import ContextWindowOverflowException
from strands.types.streaming import StreamEvent

__all__ = [
    "SUMMARIZE_PROMPT",
    "Call",
    "CallTool",
    "Overflow",
    "ProviderValidationError",
    "Reply",
    "ScriptedModel",
    "Step",
    "estimate_tokens",
    "validate_converse",
]

SUMMARIZE_PROMPT = "Please summarize this conversation."
"""The prompt Strands' summarizing manager ends its summarization request with."""


class ProviderValidationError(Exception):
    """The scripted provider refused the request (a malformed conversation)."""


@dataclass(frozen=True)
class Reply:
    """The model answers with ``text`` and ends its turn.

    Attributes:
        text: The answer.
        input_tokens: Input tokens to report (default: an estimate of the input).
        redact_user: Ask Strands to redact the latest user message with this text.
    """

    text: str
    input_tokens: int | None = None
    redact_user: str | None = None


@dataclass(frozen=True)
class CallTool:
    """The model asks for one tool call.

    Attributes:
        name: The tool's name.
        input: The tool's input.
        tool_use_id: The toolUse id.
        text: Text the model says before the call.
        input_tokens: Input tokens to report (default: an estimate of the input).
    """

    name: str
    input: dict[str, Any]
    tool_use_id: str
    text: str | None = None
    input_tokens: int | None = None


@dataclass(frozen=True)
class Overflow:
    """The model rejects the input as too long (``ContextWindowOverflowException``)."""

    message: str = "Input is too long for requested model"


Outcome = Reply | CallTool | Overflow
Step = str | Outcome | Callable[[Messages], Outcome]


@dataclass
class Call:
    """What one model call was given.

    Attributes:
        messages: A JSON copy of the messages.
        system_prompt: The system prompt.
        summarization: Whether this was a summarization request.
    """

    messages: Messages
    system_prompt: str | None
    summarization: bool


def estimate_tokens(messages: Messages) -> int:
    """Roughly four characters a token over the JSON of ``messages``."""
    return math.ceil(len(json.dumps(messages, default=str)) / 4)


def validate_converse(messages: Messages, *, summarization: bool = False) -> None:
    """Refuse a conversation a Converse provider refuses.

    Raises:
        ProviderValidationError: ``messages`` is empty, does not start with a user
            message (unless ``summarization``), or has a tool call and result that do
            not answer each other.
    """
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
    """A Strands model that plays ``script`` one step per model call.

    Args:
        script: The steps, in order (more can be added with :meth:`extend`).
        context_window_limit: Reported as the model's context window.

    Attributes:
        script: The steps not played yet.
        calls: Every call the model received, in order.
    """

    def __init__(self, script: Iterable[Step] = (), *, context_window_limit: int | None = None) -> None:
        """Start with ``script``; see the class docstring."""
        self.script: list[Step] = list(script)
        self.context_window_limit_tokens = context_window_limit
        self.calls: list[Call] = []

    def extend(self, steps: Iterable[Step]) -> None:
        """Append ``steps`` to the script."""
        self.script.extend(steps)

    @property
    def remaining(self) -> int:
        """Steps not played yet."""
        return len(self.script)

    def update_config(self, **model_config: Any) -> None:
        """Accept ``context_window_limit``; other settings are ignored."""
        if "context_window_limit" in model_config:
            self.context_window_limit_tokens = model_config["context_window_limit"]

    def get_config(self) -> dict[str, Any]:
        """The model id ``scripted`` and the context window."""
        return {"model_id": "scripted", "context_window_limit": self.context_window_limit_tokens}

    def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """Not supported.

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError("the scripted model has no structured output")

    async def stream(
        self,
        messages: Messages,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Play the next step as a Converse stream.

        Raises:
            ProviderValidationError: The conversation is malformed.
            ContextWindowOverflowException: The step is an :class:`Overflow`.
            RuntimeError: The script ran out of steps.
        """
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
                raise RuntimeError("the scripted model ran out of steps")
            head = self.script.pop(0)
            played = head(messages) if callable(head) else head
            step = Reply(played) if isinstance(played, str) else played
        if isinstance(step, Overflow):
            raise ContextWindowOverflowException(step.message)
        for event in _events(step, messages):
            yield event


def _events(step: Reply | CallTool, messages: Messages) -> list[StreamEvent]:
    input_tokens = step.input_tokens if step.input_tokens is not None else estimate_tokens(messages)
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    if isinstance(step, Reply):
        if step.redact_user is not None:
            events.append({"redactContent": {"redactUserContentMessage": step.redact_user}})
        events += [{"contentBlockDelta": {"delta": {"text": step.text}}}, {"contentBlockStop": {}}]
        stop, output = "end_turn", step.text
    else:
        if step.text:
            events += [{"contentBlockDelta": {"delta": {"text": step.text}}}, {"contentBlockStop": {}}]
        events += [
            {"contentBlockStart": {"start": {"toolUse": {"toolUseId": step.tool_use_id, "name": step.name}}}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(step.input)}}}},
            {"contentBlockStop": {}},
        ]
        stop, output = "tool_use", json.dumps(step.input)
    output_tokens = math.ceil(len(output) / 4)
    events += [
        {"messageStop": {"stopReason": stop}},
        {
            "metadata": {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": 1},
            }
        },
    ]
    return events  # type: ignore[return-value]


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
