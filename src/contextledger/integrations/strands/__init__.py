"""Strands Agents integration: a ledger-backed session manager, a manager adapter, a pin tool.

* :class:`LedgerSessionManager` -- ``Agent(session_manager=LedgerSessionManager("s1",
  url="sqlite:///agents.db"))`` keeps the agent's conversation in the ledger: one atomic
  commit per sync, exact restore, crash-safe tool pairs, queryable evictions.
* :class:`StrandsConversationManager` -- run one of contextledger's managers as the
  agent's ``conversation_manager``.
* :data:`pin_message_tool` -- a tool that lets the model pin or unpin a message by index.
* :class:`ScriptedModel` -- an offline Strands model that plays a script (examples, tests).
* :func:`import_file_sessions` -- read a ``FileSessionManager`` directory into a ledger.
* :class:`StrandsReductionFailed` -- ``ReductionFailed`` that is also Strands'
  ``ContextWindowOverflowException``.
* :class:`DuplicateAgentId` -- ``ConfigurationError`` that is also Strands'
  ``SessionException`` (two live agents with one ``agent_id`` in a session).

Supported Strands versions: ``strands-agents>=1.62,<2``.

Needs ``strands-agents`` (``pip install 'contextledger[strands]'``).
"""

try:
    import strands  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "contextledger.integrations.strands needs strands-agents: pip install 'contextledger[strands]'"
    ) from exc

from contextledger.integrations.strands.adapter import StrandsConversationManager
from contextledger.integrations.strands.binding import AgentBinding
from contextledger.integrations.strands.errors import DuplicateAgentId, StrandsReductionFailed
from contextledger.integrations.strands.scripted import CallTool, Overflow, Reply, ScriptedModel
from contextledger.integrations.strands.session import LedgerSessionManager
from contextledger.integrations.strands.tools import pin_message_tool

__all__ = [
    "AgentBinding",
    "CallTool",
    "DuplicateAgentId",
    "LedgerSessionManager",
    "Overflow",
    "Reply",
    "ScriptedModel",
    "StrandsConversationManager",
    "StrandsReductionFailed",
    "pin_message_tool",
]
