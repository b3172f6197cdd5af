"""contextledger: conversation state of LLM agents in a real database.

Each conversation is an append-only ledger; the context window is a view of its
active entries. Managers plan reductions, the :class:`Conversation` commits them
atomically, and every eviction stays queryable.
"""

from contextledger.changeset import Changeset, ContentRevision, ReductionPlan, SummaryDraft
from contextledger.conversation import Conversation, Edit
from contextledger.errors import (
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
    SessionNotFound,
    StoreError,
    StoreUnavailable,
)
from contextledger.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    HookEvent,
    HookProvider,
    HookRegistry,
    MessageAddedEvent,
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
from contextledger.messages import ContentBlock, Message
from contextledger.pinning import (
    PIN_MESSAGE_TOOL_SPEC,
    handle_pin_message_tool,
    is_pinned,
    pin_message,
    unpin_message,
)
from contextledger.records import (
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
from contextledger.stores.base import LedgerStore
from contextledger.stores.memory import MemoryStore
from contextledger.summarizers import ExtractiveSummarizer, Summarizer
from contextledger.tokens import CharTokenCounter, TokenCounter
from contextledger.view import View

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "DEFAULT_URL",
    "PIN_MESSAGE_TOOL_SPEC",
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "BeforeModelCallEvent",
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
