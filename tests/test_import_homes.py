"""Names moved to modules of their own stay importable, as the same objects, from where they were."""

from __future__ import annotations

import importlib

import pytest

# (old module, new module, names that moved)
MOVED = [
    ("contextledger.model.messages", "contextledger.model.message", ["Message", "Role", "new_message_id"]),
    (
        "contextledger.model.messages",
        "contextledger.model.restored",
        [
            "holding_text",
            "message_from_json",
            "message_from_stored_content",
            "restored_message",
            "restored_record_message",
        ],
    ),
    (
        "contextledger.model.messages",
        "contextledger.model.metadata",
        ["LINKS_KEY", "links_in", "pinned_in", "usage_in"],
    ),
    ("contextledger.model.messages", "contextledger.model.blocks", ["ToolResultBlock", "ToolUseBlock"]),
    (
        "contextledger.model.records",
        "contextledger.model.kinds",
        ["TRIGGERS", "EntryKind", "Trigger", "new_id", "utcnow"],
    ),
    (
        "contextledger.model.records",
        "contextledger.model.view",
        ["ConversationState", "Snapshot", "ViewEntry", "view_entry"],
    ),
    ("contextledger.model.records", "contextledger.model.entries", ["HistoryEntry", "SummaryEntry", "history_entry"]),
    (
        "contextledger.model.records",
        "contextledger.model.changes",
        ["Eviction", "PinEvent", "Reduction", "Revision", "in_commit_order", "pin_positions"],
    ),
    (
        "contextledger.model.records",
        "contextledger.model.sessions",
        ["Expiry", "LineageLink", "SessionInfo", "SessionOwner", "Tombstone"],
    ),
    (
        "contextledger.history.lifecycle",
        "contextledger.history.erasure",
        ["DEFAULT_SETTLE_TIMEOUT", "Erasure", "catch_up", "erase", "settle_erasure"],
    ),
    ("contextledger.history.lifecycle", "contextledger.history.pruning", ["prune"]),
    (
        "contextledger.history.lifecycle",
        "contextledger.history.redaction",
        ["ERASED_TEXT", "PRUNE_REASON", "REDACTED_TEXT", "erase_blocks", "summaries_covering"],
    ),
    (
        "contextledger.stores.capabilities",
        "contextledger.stores.protocols",
        [
            "ErasingStore",
            "ExpiringStore",
            "HistoryStore",
            "ImportingStore",
            "LineageStore",
            "ResealingStore",
            "ScopedStore",
            "SessionStore",
            "SettlesErasure",
            "TimeTravelStore",
        ],
    ),
    ("contextledger.stores.encrypted", "contextledger.stores.sealing", ["place"]),
    (
        "contextledger.stores.redis.codec",
        "contextledger.stores.redis.encode",
        ["RECORD_FIELDS", "commit_args", "dumps", "epoch_micros", "record_values", "time_score"],
    ),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED)
def test_moved_names_stay_importable_from_their_old_module(old: str, new: str, names: list[str]) -> None:
    before, after = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(before, name) is getattr(after, name), name
        assert name in before.__all__, name


# (class, the base class its members moved to, members that moved)
MOVED_MEMBERS = [
    (
        "contextledger.conversation.conversation:Conversation",
        "contextledger.conversation.accessors:Accessors",
        [
            "store",
            "session_id",
            "agent_id",
            "app",
            "user",
            "manager",
            "token_counter",
            "max_retries",
            "repair",
            "defer_count",
            "context_window_limit",
            "overflow_errors",
            "view",
            "messages",
            "state",
            "version",
            "model_call_count",
            "agent_state",
            "projected_input_tokens",
            "is_overflow",
            "context",
            "request",
            "refresh",
        ],
    ),
]


def _class(path: str) -> type:
    module, name = path.split(":")
    found = getattr(importlib.import_module(module), name)
    assert isinstance(found, type)
    return found


@pytest.mark.parametrize(("old", "new", "names"), MOVED_MEMBERS)
def test_moved_members_stay_members_of_their_old_class(old: str, new: str, names: list[str]) -> None:
    before, after = _class(old), _class(new)
    assert issubclass(before, after)
    for name in names:
        assert name not in vars(before), name  # not shadowed: the one definition is the base's
        assert getattr(before, name) is getattr(after, name), name
