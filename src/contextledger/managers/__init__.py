"""Conversation managers: pure policies that plan reductions and subscribe to hooks.

Names are imported on first use (PEP 562): opening a conversation imports
:mod:`contextledger.managers.base` only, never the policies it does not use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextledger.managers.base import ConversationManager, ManagerState, ProtectedMessages, ReductionRequest
    from contextledger.managers.null import NullConversationManager
    from contextledger.managers.policy import (
        DEFAULT_COMPRESSION_THRESHOLD,
        PolicyManager,
        PolicyState,
        ProactiveCompressionConfig,
    )
    from contextledger.managers.sliding_window import SlidingWindowConversationManager
    from contextledger.managers.summarizing import SummarizingConversationManager, SummarizingState
    from contextledger.managers.turn_window import TurnWindowConversationManager

_EXPORTS: dict[str, str] = {
    "ConversationManager": "contextledger.managers.base",
    "ManagerState": "contextledger.managers.base",
    "ProtectedMessages": "contextledger.managers.base",
    "ReductionRequest": "contextledger.managers.base",
    "NullConversationManager": "contextledger.managers.null",
    "DEFAULT_COMPRESSION_THRESHOLD": "contextledger.managers.policy",
    "PolicyManager": "contextledger.managers.policy",
    "PolicyState": "contextledger.managers.policy",
    "ProactiveCompressionConfig": "contextledger.managers.policy",
    "SlidingWindowConversationManager": "contextledger.managers.sliding_window",
    "SummarizingConversationManager": "contextledger.managers.summarizing",
    "SummarizingState": "contextledger.managers.summarizing",
    "TurnWindowConversationManager": "contextledger.managers.turn_window",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "ConversationManager",
    "ManagerState",
    "NullConversationManager",
    "PolicyManager",
    "PolicyState",
    "ProactiveCompressionConfig",
    "ProtectedMessages",
    "ReductionRequest",
    "SlidingWindowConversationManager",
    "SummarizingConversationManager",
    "SummarizingState",
    "TurnWindowConversationManager",
]
