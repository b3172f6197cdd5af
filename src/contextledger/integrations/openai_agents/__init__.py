"""OpenAI Agents SDK integration (placeholder docstring, replaced below)."""

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "contextledger.integrations.openai_agents needs openai-agents: pip install 'contextledger[openai]'"
    ) from exc

from contextledger.integrations.openai_agents.items import items_to_messages, messages_to_items
from contextledger.integrations.openai_agents.scripted import HandoffTo, Reply, ScriptedModel, ToolCall

__all__ = ["HandoffTo", "Reply", "ScriptedModel", "ToolCall", "items_to_messages", "messages_to_items"]
