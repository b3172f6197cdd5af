"""Conversation managers: pure policies that plan reductions and subscribe to hooks."""

from contextledger.managers.base import ConversationManager, ManagerState, ProtectedMessages, ReductionRequest
from contextledger.managers.null import NullConversationManager
from contextledger.managers.policy import (
    DEFAULT_COMPRESSION_THRESHOLD,
    PolicyManager,
    PolicyState,
    ProactiveCompressionConfig,
)
from contextledger.managers.sliding_window import SlidingWindowConversationManager
from contextledger.managers.summarizing import SummarizingConversationManager
from contextledger.managers.turn_window import TurnWindowConversationManager

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
    "TurnWindowConversationManager",
]
