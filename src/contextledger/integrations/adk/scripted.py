"""``ScriptedLlm``: an offline ADK model that plays a script (examples and your own tests).

``LlmAgent(model=ScriptedLlm(script=["Hello!", CallTool("lookup", {"key": "a"}), "Found it."]))``
answers each model call with the next step of its script, with no network and no
provider account. A step is:

* a ``str`` or :class:`Reply` -- the model answers with text;
* a :class:`CallTool` -- the model asks for one function call;
* an :class:`Overflow` -- the call fails with
  :class:`~contextledger.errors.ContextWindowOverflowError` (the input is too long);
* a callable that receives the contents the model was given and returns one of those
  (it may also raise, or end the process to simulate a crash).

Every call is recorded (:attr:`ScriptedLlm.calls`): the contents exactly as the model
received them. Like a real provider, the model refuses contents whose function calls
and responses do not pair up (:class:`ProviderValidationError`): a function response
must answer a call of the content just before it, and a call must be answered by the
content right after it, unless it is the last content.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field, PrivateAttr

from contextledger.errors import ContextLedgerError, ContextWindowOverflowError

__all__ = [
    "CallTool",
    "ModelCall",
    "Overflow",
    "ProviderValidationError",
    "Reply",
    "ScriptExhausted",
    "ScriptedLlm",
    "Step",
    "validate_pairs",
]


class ProviderValidationError(ContextLedgerError):
    """The scripted provider refused the request: its function calls and responses do not pair up."""


class ScriptExhausted(ContextLedgerError):
    """The model was called more often than its script has steps."""


@dataclass(frozen=True)
class Reply:
    """The model answers with ``text``.

    Attributes:
        text: The answer.
        input_tokens: Prompt tokens to report (default: about four characters a token of the input).
    """

    text: str
    input_tokens: int | None = None


@dataclass(frozen=True)
class CallTool:
    """The model asks for one function call.

    Attributes:
        name: The tool's name.
        args: Its arguments.
        call_id: The call's id (default: none, and ADK gives it one).
        text: Text the model says before the call.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class Overflow:
    """The model rejects the input as longer than its context window."""

    message: str = "input is too long for the model's context window"


Outcome = Reply | CallTool | Overflow
Step = str | Outcome | Callable[[list[types.Content]], Outcome]


@dataclass(frozen=True)
class ModelCall:
    """What one model call was given.

    Attributes:
        contents: The contents, as JSON (``model_dump(mode="json", exclude_none=True)`` of each).
        system_instruction: The system instruction, as text.
        tools: The names of the functions the model could call.
    """

    contents: list[dict[str, Any]]
    system_instruction: str | None
    tools: list[str]


class ScriptedLlm(BaseLlm):
    """An ADK model that answers from a script and records every call (see the module docstring).

    ``ScriptedLlm(script=[...])``; a pydantic model, as every ADK model is.

    Attributes:
        script: The steps, consumed one per model call.
        model: The model's name.
    """

    model: str = "scripted"
    script: list[Any] = Field(default_factory=list)
    _calls: list[ModelCall] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> list[ModelCall]:
        """Every call so far, oldest first."""
        return self._calls

    def extend(self, steps: Sequence[Step]) -> None:
        """Add steps at the end of the script."""
        self.script.extend(steps)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Answer with the next step (one final response, streamed or not).

        Raises:
            ScriptExhausted: The script has no step left.
            ProviderValidationError: The contents' calls and responses do not pair up.
            ContextWindowOverflowError: The step is an :class:`Overflow`.
        """
        contents = list(llm_request.contents)
        self._calls.append(
            ModelCall(
                contents=[c.model_dump(mode="json", exclude_none=True) for c in contents],
                system_instruction=_text(llm_request.config.system_instruction if llm_request.config else None),
                tools=sorted(llm_request.tools_dict),
            )
        )
        validate_pairs(contents)
        if not self.script:
            raise ScriptExhausted(f"model call {len(self._calls)}: the script has no step left")
        step = self.script.pop(0)
        outcome = step(contents) if callable(step) else step
        if isinstance(outcome, str):
            outcome = Reply(outcome)
        if isinstance(outcome, Overflow):
            raise ContextWindowOverflowError(outcome.message)
        prompt = outcome.input_tokens if isinstance(outcome, Reply) and outcome.input_tokens else _estimate(contents)
        parts: list[types.Part] = []
        if isinstance(outcome, CallTool):
            if outcome.text:
                parts.append(types.Part(text=outcome.text))
            parts.append(
                types.Part(function_call=types.FunctionCall(id=outcome.call_id, name=outcome.name, args=outcome.args))
            )
        else:
            parts.append(types.Part(text=outcome.text))
        answer = types.Content(role="model", parts=parts)
        yield LlmResponse(
            content=answer,
            partial=False,
            turn_complete=True,
            finish_reason=types.FinishReason.STOP,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt,
                candidates_token_count=_estimate([answer]),
                total_token_count=prompt + _estimate([answer]),
            ),
        )


def validate_pairs(contents: Sequence[types.Content]) -> None:
    """Refuse contents whose function calls and responses do not pair up, as a provider refuses them.

    A function response must answer a call of the content just before it, and a call must
    be answered by the content right after it (the last content may still wait for its
    responses).

    Raises:
        ProviderValidationError: They do not pair up.
    """
    for index, content in enumerate(contents):
        calls = {p.function_call.id for p in content.parts or [] if p.function_call is not None}
        responses = {p.function_response.id for p in content.parts or [] if p.function_response is not None}
        if responses:
            before = contents[index - 1] if index else None
            asked = {p.function_call.id for p in (before.parts or [] if before else []) if p.function_call is not None}
            if not responses <= asked:
                raise ProviderValidationError(
                    f"content {index} answers calls {sorted(map(str, responses - asked))} never made just before it"
                )
        if calls and index + 1 < len(contents):
            answered = {
                p.function_response.id for p in contents[index + 1].parts or [] if p.function_response is not None
            }
            if not calls <= answered:
                raise ProviderValidationError(
                    f"content {index} makes calls {sorted(map(str, calls - answered))} left unanswered"
                )


def _estimate(contents: Sequence[types.Content]) -> int:
    return max(1, math.ceil(len(json.dumps([c.model_dump(mode="json", exclude_none=True) for c in contents])) / 4))


def _text(instruction: Any) -> str | None:
    if instruction is None:
        return None
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, types.Content):
        return "".join(p.text or "" for p in instruction.parts or [])
    return str(instruction)
