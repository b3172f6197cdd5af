"""contextledger: conversation state of LLM agents in a real database.

Each conversation is an append-only ledger; the context window is a view of its
active entries. Managers plan reductions, the :class:`Conversation` commits them
atomically, and every eviction stays queryable.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# The one place the version is written: the build reads it (pyproject.toml), and
# CHANGELOG.md's newest release must name it (tests/docs/test_changelog.py).
__version__ = "0.2.0"

if TYPE_CHECKING:
    from contextledger.aio import AsyncConversation, AsyncLedger
    from contextledger.conversation.conversation import Conversation, Edit
    from contextledger.conversation.pins import (
        PIN_MESSAGE_TOOL_SPEC,
        handle_pin_message_tool,
        is_pinned,
        pin_message,
        unpin_message,
    )
    from contextledger.core.changeset import Changeset, ContentRevision, ReductionPlan, SummaryDraft
    from contextledger.core.hooks import (
        AfterInvocationEvent,
        AfterModelCallEvent,
        BeforeModelCallEvent,
        HookEvent,
        HookProvider,
        HookRegistry,
        MessageAddedEvent,
    )
    from contextledger.core.view import View
    from contextledger.errors import (
        CapabilityMissing,
        CommitOutcomeUnknown,
        ConcurrencyConflict,
        ConfigurationError,
        ContextLedgerError,
        ContextWindowOverflowError,
        DuplicateEntry,
        EntryNotFound,
        InvalidLedgerURL,
        InvalidMessage,
        LedgerClosed,
        PinError,
        ReductionFailed,
        SchemaOutOfDate,
        SessionDeleted,
        SessionExpired,
        SessionNotFound,
        StoreError,
        StoreUnavailable,
    )
    from contextledger.ledger import DEFAULT_URL, Ledger
    from contextledger.managers import (
        DEFAULT_COMPRESSION_THRESHOLD,
        NullConversationManager,
        PolicyManager,
        PolicyState,
        ProactiveCompressionConfig,
        SlidingWindowConversationManager,
        SummarizingConversationManager,
        TurnWindowConversationManager,
    )
    from contextledger.managers.base import ConversationManager, ManagerState, ProtectedMessages, ReductionRequest
    from contextledger.managers.summarizers import ExtractiveSummarizer, Summarizer
    from contextledger.model.messages import ContentBlock, Message
    from contextledger.model.records import (
        ConversationState,
        Eviction,
        HistoryEntry,
        PinEvent,
        Reduction,
        Revision,
        SessionInfo,
        Snapshot,
        SummaryEntry,
        Trigger,
        ViewEntry,
    )
    from contextledger.model.tokens import CharTokenCounter, TokenCounter
    from contextledger.stores.base import LedgerStore
    from contextledger.stores.memory import MemoryStore

# Names are imported on first use (PEP 562), so ``contextledger --version`` and the
# inspector start without importing pydantic models, managers and stores they never touch.
_EXPORTS: dict[str, str] = {
    "AsyncConversation": "contextledger.aio",
    "AsyncLedger": "contextledger.aio",
    "Changeset": "contextledger.core.changeset",
    "ContentRevision": "contextledger.core.changeset",
    "ReductionPlan": "contextledger.core.changeset",
    "SummaryDraft": "contextledger.core.changeset",
    "Conversation": "contextledger.conversation.conversation",
    "Edit": "contextledger.conversation.conversation",
    "CapabilityMissing": "contextledger.errors",
    "CommitOutcomeUnknown": "contextledger.errors",
    "ConcurrencyConflict": "contextledger.errors",
    "ConfigurationError": "contextledger.errors",
    "ContextLedgerError": "contextledger.errors",
    "ContextWindowOverflowError": "contextledger.errors",
    "DuplicateEntry": "contextledger.errors",
    "EntryNotFound": "contextledger.errors",
    "InvalidLedgerURL": "contextledger.errors",
    "InvalidMessage": "contextledger.errors",
    "LedgerClosed": "contextledger.errors",
    "PinError": "contextledger.errors",
    "ReductionFailed": "contextledger.errors",
    "SchemaOutOfDate": "contextledger.errors",
    "SessionDeleted": "contextledger.errors",
    "SessionExpired": "contextledger.errors",
    "SessionNotFound": "contextledger.errors",
    "StoreError": "contextledger.errors",
    "StoreUnavailable": "contextledger.errors",
    "AfterInvocationEvent": "contextledger.core.hooks",
    "AfterModelCallEvent": "contextledger.core.hooks",
    "BeforeModelCallEvent": "contextledger.core.hooks",
    "HookEvent": "contextledger.core.hooks",
    "HookProvider": "contextledger.core.hooks",
    "HookRegistry": "contextledger.core.hooks",
    "MessageAddedEvent": "contextledger.core.hooks",
    "DEFAULT_URL": "contextledger.ledger",
    "Ledger": "contextledger.ledger",
    "DEFAULT_COMPRESSION_THRESHOLD": "contextledger.managers",
    "NullConversationManager": "contextledger.managers",
    "PolicyManager": "contextledger.managers",
    "PolicyState": "contextledger.managers",
    "ProactiveCompressionConfig": "contextledger.managers",
    "SlidingWindowConversationManager": "contextledger.managers",
    "SummarizingConversationManager": "contextledger.managers",
    "TurnWindowConversationManager": "contextledger.managers",
    "ConversationManager": "contextledger.managers.base",
    "ManagerState": "contextledger.managers.base",
    "ProtectedMessages": "contextledger.managers.base",
    "ReductionRequest": "contextledger.managers.base",
    "ContentBlock": "contextledger.model.messages",
    "Message": "contextledger.model.messages",
    "PIN_MESSAGE_TOOL_SPEC": "contextledger.conversation.pins",
    "handle_pin_message_tool": "contextledger.conversation.pins",
    "is_pinned": "contextledger.conversation.pins",
    "pin_message": "contextledger.conversation.pins",
    "unpin_message": "contextledger.conversation.pins",
    "ConversationState": "contextledger.model.records",
    "Eviction": "contextledger.model.records",
    "HistoryEntry": "contextledger.model.records",
    "PinEvent": "contextledger.model.records",
    "Reduction": "contextledger.model.records",
    "Revision": "contextledger.model.records",
    "SessionInfo": "contextledger.model.records",
    "Snapshot": "contextledger.model.records",
    "SummaryEntry": "contextledger.model.records",
    "Trigger": "contextledger.model.records",
    "ViewEntry": "contextledger.model.records",
    "LedgerStore": "contextledger.stores.base",
    "MemoryStore": "contextledger.stores.memory",
    "ExtractiveSummarizer": "contextledger.managers.summarizers",
    "Summarizer": "contextledger.managers.summarizers",
    "CharTokenCounter": "contextledger.model.tokens",
    "TokenCounter": "contextledger.model.tokens",
    "View": "contextledger.core.view",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value: Any = getattr(import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'contextledger' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "DEFAULT_URL",
    "PIN_MESSAGE_TOOL_SPEC",
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "AsyncConversation",
    "AsyncLedger",
    "BeforeModelCallEvent",
    "CapabilityMissing",
    "Changeset",
    "CharTokenCounter",
    "CommitOutcomeUnknown",
    "ConcurrencyConflict",
    "ConfigurationError",
    "ContentBlock",
    "ContentRevision",
    "ContextLedgerError",
    "ContextWindowOverflowError",
    "Conversation",
    "ConversationManager",
    "ConversationState",
    "DuplicateEntry",
    "Edit",
    "EntryNotFound",
    "Eviction",
    "ExtractiveSummarizer",
    "HistoryEntry",
    "HookEvent",
    "HookProvider",
    "HookRegistry",
    "InvalidLedgerURL",
    "InvalidMessage",
    "Ledger",
    "LedgerClosed",
    "LedgerStore",
    "ManagerState",
    "MemoryStore",
    "Message",
    "MessageAddedEvent",
    "NullConversationManager",
    "PinError",
    "PinEvent",
    "PolicyManager",
    "PolicyState",
    "ProactiveCompressionConfig",
    "ProtectedMessages",
    "Reduction",
    "ReductionFailed",
    "ReductionPlan",
    "ReductionRequest",
    "Revision",
    "SchemaOutOfDate",
    "SessionDeleted",
    "SessionExpired",
    "SessionInfo",
    "SessionNotFound",
    "SlidingWindowConversationManager",
    "Snapshot",
    "StoreError",
    "StoreUnavailable",
    "Summarizer",
    "SummarizingConversationManager",
    "SummaryDraft",
    "SummaryEntry",
    "TokenCounter",
    "Trigger",
    "TurnWindowConversationManager",
    "View",
    "ViewEntry",
    "handle_pin_message_tool",
    "is_pinned",
    "pin_message",
    "unpin_message",
]
