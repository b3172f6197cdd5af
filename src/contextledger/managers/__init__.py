"""Conversation managers: pure policies that plan reductions and subscribe to hooks."""

from contextledger.managers.base import ConversationManager, ManagerState, ProtectedMessages, ReductionRequest

__all__ = ["ConversationManager", "ManagerState", "ProtectedMessages", "ReductionRequest"]
