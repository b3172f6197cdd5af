"""Every access to Strands internals, in one place.

The integration reads and writes a few things Strands does not publish as API: the
agent's internal state (interrupt and model state) carried by ``SessionAgent``, the
resolved proactive-compression threshold of a conversation manager, the session
manager an agent was given, and the layout of the state dicts Strands' own managers
and ``FileSessionManager`` write. Each is wrapped here by one function, and
``tests/strands/test_compat.py`` checks each against the installed Strands with a
message naming what changed. Supported: :data:`SUPPORTED_STRANDS` (also stated in
``pyproject.toml`` and the README).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from strands.types.session import SessionAgent

if TYPE_CHECKING:
    from strands import Agent

__all__ = [
    "SUPPORTED_STRANDS",
    "agent_states",
    "compression_threshold",
    "internal_state",
    "interrupt_activated",
    "removed_message_count",
    "restore_internal_state",
    "session_manager_of",
    "stored_internal_state",
    "strands_version",
    "summary_message",
]

logger = logging.getLogger(__name__)

SUPPORTED_STRANDS = ">=1.62,<2"
"""The strands-agents versions this integration is tested against."""


def strands_version() -> str:
    """The installed strands-agents version (``unknown`` when not installed as a distribution)."""
    try:
        return version("strands-agents")
    except PackageNotFoundError:  # pragma: no cover - a source checkout of Strands
        return "unknown"


def internal_state(agent: Agent) -> dict[str, Any]:
    """The Strands-managed state of ``agent`` (interrupt and model state), as its session managers store it.

    Strands builds it in ``SessionAgent.from_agent`` and keeps it in the private
    ``SessionAgent._internal_state`` field.
    """
    return agent_states(agent)[2]


def agent_states(agent: Agent) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``agent``'s state, its conversation manager's ``get_state()`` and its internal state (:func:`internal_state`).

    All three from one ``SessionAgent.from_agent``, which reads each once (the agent's
    state as a deep copy), as Strands' own session managers take them.
    """
    snapshot = SessionAgent.from_agent(agent)
    return snapshot.state, snapshot.conversation_manager_state, dict(snapshot._internal_state)


def stored_internal_state(session_agent: SessionAgent) -> dict[str, Any]:
    """The Strands-managed state a session manager stored with ``session_agent`` (its ``_internal_state``)."""
    return dict(session_agent._internal_state or {})


def restore_internal_state(agent: Agent, state: Mapping[str, Any]) -> None:
    """Put Strands-managed state written by :func:`internal_state` back into ``agent``.

    Uses ``SessionAgent(_internal_state=...).initialize_internal_state(agent)``, the path
    Strands' own session managers restore through.
    """
    SessionAgent(
        agent_id=agent.agent_id,
        state={},
        conversation_manager_state={},
        _internal_state=dict(state),
    ).initialize_internal_state(agent)


def interrupt_activated(state: Mapping[str, Any] | None) -> bool:
    """Whether stored internal state says the agent was paused on an interrupt.

    A pending toolUse is then legitimate (the interrupt's answer resumes it) and must
    not be repaired. Reads ``internal_state["interrupt_state"]["activated"]``.
    """
    if not state:
        return False
    interrupt = state.get("interrupt_state")
    return isinstance(interrupt, Mapping) and interrupt.get("activated") is True


def compression_threshold(conversation_manager: object) -> float | None:
    """The proactive-compression threshold a Strands conversation manager resolved, or ``None``.

    Strands' base ``ConversationManager`` keeps it in ``_compression_threshold`` and
    checks it before its per-turn callback; the integration reads it only to tell a
    ``proactive`` reduction from a ``per_turn`` one.
    """
    value = getattr(conversation_manager, "_compression_threshold", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def session_manager_of(agent: object) -> object | None:
    """The session manager ``agent`` was constructed with (``agent._session_manager``), or ``None``."""
    return getattr(agent, "_session_manager", None)


def removed_message_count(conversation_manager_state: Mapping[str, Any] | None) -> int:
    """How many leading stored messages a Strands manager had removed (its ``removed_message_count``).

    ``RepositorySessionManager`` restores messages from this offset on.
    """
    if not conversation_manager_state:
        return 0
    value = conversation_manager_state.get("removed_message_count", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def summary_message(conversation_manager_state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The summary message a Strands summarizing manager holds in its state (``summary_message``), if any."""
    if not conversation_manager_state:
        return None
    value = conversation_manager_state.get("summary_message")
    return dict(value) if isinstance(value, Mapping) else None
