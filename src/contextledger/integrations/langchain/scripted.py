"""``ScriptedChatModel``: a LangChain chat model that answers from a script, offline.

For examples and tests of agents that call tools: each model call plays the next step
and records the messages it received, so a test can compare them with what the ledger
says the model saw. Put a real chat model in its place in an application.

A step is the answer's text, a :class:`CallTool` (or a list of them: parallel calls), a
ready ``AIMessage``, or an exception instance, raised as the model's error (a
``ContextOverflowError`` stands for a context-window overflow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from contextledger.errors import ContextLedgerError
from contextledger.model.messages import new_message_id

__all__ = ["CallTool", "ScriptExhausted", "ScriptedChatModel", "Step"]


class ScriptExhausted(ContextLedgerError):
    """The model was called after its last scripted step."""


@dataclass(frozen=True)
class CallTool:
    """A tool call the model makes.

    Attributes:
        name: The tool's name.
        args: Its arguments.
        call_id: The call's id (a fresh one by default).
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


Step = str | CallTool | Sequence[CallTool] | AIMessage | BaseException


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays one scripted step per call and records what each call received.

    Args:
        script: The steps, in order (more can be added with :meth:`extend`).
    """

    script: list[Any]
    _received: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "contextledger-scripted"

    @property
    def received(self) -> list[list[BaseMessage]]:
        """The messages each call received, in call order (a system prompt included)."""
        return [list(call) for call in self._received]

    def extend(self, steps: Sequence[Step]) -> None:
        """Add steps to the end of the script."""
        self.script.extend(steps)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        """The model itself: the script decides which tools it calls."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._received.append(list(messages))
        if not self.script:
            raise ScriptExhausted(f"model call {len(self._received)}: the script has no step left")
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return ChatResult(generations=[ChatGeneration(message=_answer(step))])


def _answer(step: str | CallTool | Sequence[CallTool] | AIMessage) -> AIMessage:
    if isinstance(step, AIMessage):
        return step
    if isinstance(step, str):
        return AIMessage(content=step, id=new_message_id())
    calls = [step] if isinstance(step, CallTool) else list(step)
    return AIMessage(
        content="",
        tool_calls=[
            tool_call(name=c.name, args=dict(c.args), id=c.call_id or f"call-{new_message_id()}") for c in calls
        ],
        id=new_message_id(),
    )
