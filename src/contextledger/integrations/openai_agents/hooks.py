"""``LedgerRunHooks``: the SDK's run hooks driving a conversation's model-call cycle.

``on_llm_start`` awaits ``conversation.before_model_call()`` (the model-call count and
per-turn / proactive management) and ``on_llm_end`` awaits
``conversation.after_model_call()``. The conversation is anything with those two
*coroutine* methods -- an :class:`~contextledger.aio.AsyncConversation`, or a
:class:`~contextledger.integrations.openai_agents.LedgerSession`, whose model calls are
counted and managed by its input filter (``run_config=session.run_config()``): with a
session the hooks only check that the filter ran. A sync
:class:`~contextledger.Conversation` is deliberately not accepted: its commits would
block the event loop on every model call.

The SDK takes one ``hooks`` object per run; pass the application's own as ``hooks=``
and every callback is forwarded to it (after the ledger's on start, after the ledger's
on end)::

    await Runner.run(agent, "hi", session=session, hooks=LedgerRunHooks(conversation, hooks=MyHooks()))
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Protocol, runtime_checkable

from agents import Agent, RunHooks
from agents.items import ModelResponse, TResponseInputItem
from agents.lifecycle import RunHooksBase
from agents.run_context import AgentHookContext, RunContextWrapper
from agents.tool import Tool

from contextledger.errors import ConfigurationError

__all__ = ["LedgerRunHooks", "ModelCallCycle"]

logger = logging.getLogger(__name__)


@runtime_checkable
class ModelCallCycle(Protocol):
    """The part of an async conversation the hooks drive."""

    session_id: str

    async def before_model_call(self) -> Any:
        """Count the model call and run the managers' before-call policies."""
        ...

    async def after_model_call(self, error: BaseException | None = None) -> bool:
        """Run the managers' after-call policies; return whether to retry the call."""
        ...


class LedgerRunHooks(RunHooks[Any]):
    """Run hooks that report each model call of an ``agents`` run to a conversation.

    Args:
        conversation: An object whose ``before_model_call`` and ``after_model_call`` are
            coroutine functions (see :class:`ModelCallCycle`).
        hooks: The application's own run hooks; every callback is forwarded to them.

    Raises:
        ConfigurationError: ``conversation`` has no coroutine ``before_model_call`` /
            ``after_model_call`` (a sync conversation would block the event loop), or
            ``hooks`` is not ``RunHooks``.
    """

    def __init__(self, conversation: ModelCallCycle, *, hooks: RunHooks[Any] | None = None) -> None:
        """Bind the conversation; see the class docstring."""
        for name in ("before_model_call", "after_model_call"):
            if not inspect.iscoroutinefunction(getattr(conversation, name, None)):
                raise ConfigurationError(
                    f"LedgerRunHooks needs a conversation whose {name} is a coroutine function "
                    f"(an async conversation), got {type(conversation).__name__}"
                )
        if hooks is not None and not isinstance(hooks, RunHooksBase):
            raise ConfigurationError(f"hooks must be agents.RunHooks, got {type(hooks).__name__}")
        self.conversation = conversation
        self.hooks = hooks

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Announce the model call to the conversation, then to the app's hooks."""
        await self.conversation.before_model_call()
        logger.debug(
            "session_id=<%s>, agent=<%s>, items=<%d> | model call",
            self.conversation.session_id,
            agent.name,
            len(input_items),
        )
        if self.hooks is not None:
            await self.hooks.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        """Report the finished model call to the conversation, then to the app's hooks."""
        await self.conversation.after_model_call(None)
        if self.hooks is not None:
            await self.hooks.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        """Forwarded to the app's hooks."""
        if self.hooks is not None:
            await self.hooks.on_agent_start(context, agent)

    async def on_agent_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        """Forwarded to the app's hooks."""
        if self.hooks is not None:
            await self.hooks.on_agent_end(context, agent, output)

    async def on_handoff(self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]) -> None:
        """Forwarded to the app's hooks."""
        if self.hooks is not None:
            await self.hooks.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        """Forwarded to the app's hooks."""
        if self.hooks is not None:
            await self.hooks.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object) -> None:
        """Forwarded to the app's hooks."""
        if self.hooks is not None:
            await self.hooks.on_tool_end(context, agent, tool, result)
