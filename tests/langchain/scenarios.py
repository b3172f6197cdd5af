"""A real LangChain agent (``create_agent``) on the ledger, driven by a scripted model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from contextledger import Ledger
from contextledger.integrations.langchain import LedgerMiddleware, ScriptedChatModel, Step, from_view
from contextledger.managers import SlidingWindowConversationManager
from contextledger.managers.base import ConversationManager

SYSTEM = "You are a terse support agent."


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped from the warehouse in Lyon. " + "tracking history line. " * 40


@tool
def refund(order: str, amount: float) -> str:
    """Refund part of an order."""
    return f"refunded {amount} on {order}"


def sliding(window: int = 8) -> SlidingWindowConversationManager:
    return SlidingWindowConversationManager(window_size=window, per_turn=True, truncate_threshold=200)


def build(
    ledger: Ledger,
    session_id: str | None,
    script: Sequence[Step],
    *,
    manager: ConversationManager | Any = None,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    **options: Any,
) -> tuple[CompiledStateGraph[Any, Any, Any, Any], ScriptedChatModel, LedgerMiddleware]:
    """An agent with two tools whose model plays ``script``; the ledger middleware listed last."""
    model = ScriptedChatModel(script=list(script))
    ledger_middleware = LedgerMiddleware(ledger, session_id, manager=manager, **options)
    agent = create_agent(
        model, tools=[lookup, refund], system_prompt=SYSTEM, middleware=[*middleware, ledger_middleware]
    )
    return agent, model, ledger_middleware


def inputs(model: ScriptedChatModel) -> list[list[BaseMessage]]:
    """What each model call received after the system prompt (which the agent adds, not the ledger)."""
    out = []
    for call in model.received:
        assert isinstance(call[0], SystemMessage)
        assert call[0].content == SYSTEM
        out.append(call[1:])
    return out


def assert_view_at_is_what_the_model_received(
    ledger: Ledger, session_id: str, model: ScriptedChatModel, *, first_call: int = 1
) -> None:
    for n, received in enumerate(inputs(model), start=first_call):
        assert from_view(ledger.view_at(session_id, model_call=n)) == received, f"model call {n}"
