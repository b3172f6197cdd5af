"""``pin_message_tool``: a Strands tool the agent calls to pin or unpin a message by index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from strands.tools.tools import PythonAgentTool
from strands.types.tools import ToolResult, ToolSpec, ToolUse

from contextledger.conversation.pins import (
    PIN_MESSAGE_TOOL_NAME,
    PIN_MESSAGE_TOOL_SPEC,
    handle_pin_message_tool,
    pin_message,
    unpin_message,
)
from contextledger.integrations.strands import _compat
from contextledger.integrations.strands.binding import AgentBinding
from contextledger.integrations.strands.convert import ensure_tracking_ids, is_pinned_dict
from contextledger.ledger import Ledger
from contextledger.stores.memory import MemoryStore

if TYPE_CHECKING:
    from strands import Agent

__all__ = ["pin_message_tool"]


def _binding_of(agent: Agent) -> AgentBinding | None:
    from contextledger.integrations.strands.adapter import StrandsConversationManager
    from contextledger.integrations.strands.session import LedgerSessionManager

    session = _compat.session_manager_of(agent)
    if isinstance(session, LedgerSessionManager):
        return session.binding(agent.agent_id)
    cm = getattr(agent, "conversation_manager", None)
    if isinstance(cm, StrandsConversationManager):
        return cm.binding(agent)
    return None


def _pin_message(tool_use: ToolUse, **invocation_state: Any) -> ToolResult:
    """Pin or unpin ``agent.messages[index]`` (and, with a ledger, commit it at once)."""
    agent = invocation_state.get("agent")
    tool_use_id = tool_use["toolUseId"]
    tool_input = tool_use.get("input")
    if agent is None:
        result = {"status": "error", "content": [{"text": "pin_message needs the calling agent"}]}
    else:
        binding = _binding_of(agent)
        result = (
            binding.pin_index(agent, tool_input, tool_use_id)
            if binding is not None
            else _pin_without_ledger(agent, tool_input, tool_use_id)
        )
    result["toolUseId"] = tool_use_id
    return cast(ToolResult, result)


def _pin_without_ledger(agent: Agent, tool_input: Any, tool_use_id: str) -> dict[str, Any]:
    """The same validation and answers, on a scratch conversation; the pin lands in ``agent.messages`` only."""
    messages = agent.messages
    ensure_tracking_ids(cast(list[dict[str, Any]], messages))
    scratch = Ledger(MemoryStore()).conversation("pin_message", repair=False)
    scratch.append(*[dict(m) for m in messages])
    result = handle_pin_message_tool(scratch, tool_input, tool_use_id=tool_use_id)
    if result.get("status") == "success":
        for index, entry in enumerate(scratch.view):
            if is_pinned_dict(messages[index]) != entry.message.pinned:
                changed = pin_message(messages[index]) if entry.message.pinned else unpin_message(messages[index])
                messages[index].clear()  # type: ignore[attr-defined]
                messages[index].update(changed)  # type: ignore[typeddict-item]
    return result


pin_message_tool = PythonAgentTool(PIN_MESSAGE_TOOL_NAME, cast(ToolSpec, dict(PIN_MESSAGE_TOOL_SPEC)), _pin_message)
"""Give it to an agent (``Agent(tools=[pin_message_tool])``) to let the model pin or unpin
messages: ``{"index": 3}`` pins message 3, ``{"index": -1, "action": "unpin"}`` unpins the
last one. With a :class:`~contextledger.integrations.strands.LedgerSessionManager` (or the
adapter) the pin is committed to the ledger at once and survives restore; out-of-range
indexes and summaries are answered with an error result, never an exception."""
