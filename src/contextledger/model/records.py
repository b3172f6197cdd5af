"""Typed records of the ledger: entries, summaries, reductions, revisions and state.

These are what stores persist and what queries return. They are immutable pydantic
models; a store never hands out a record that a caller could mutate behind its back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from contextledger.model.changes import Eviction, PinEvent, Reduction, Revision, in_commit_order, pin_positions
from contextledger.model.entries import HistoryEntry, SummaryEntry, history_entry
from contextledger.model.jsonvalues import encode_blocks
from contextledger.model.kinds import (
    TRIGGERS,
    EntryKind,
    EntryStatus,
    LineageKind,
    PinSource,
    Trigger,
    new_id,
    utcnow,
)
from contextledger.model.message import Message
from contextledger.model.sessions import Expiry, LineageLink, SessionInfo, SessionOwner, Tombstone
from contextledger.model.view import ConversationState, Snapshot, ViewEntry, view_entry

__all__ = [
    "TRIGGERS",
    "ConversationState",
    "EntryKind",
    "EntryStatus",
    "Eviction",
    "Expiry",
    "HistoryEntry",
    "LineageKind",
    "LineageLink",
    "PinEvent",
    "PinSource",
    "Reduction",
    "Revision",
    "SessionInfo",
    "SessionOwner",
    "Snapshot",
    "SummaryEntry",
    "Tombstone",
    "Trigger",
    "ViewEntry",
    "history_entry",
    "in_commit_order",
    "new_id",
    "pin_positions",
    "record_json",
    "utcnow",
    "view_entry",
]


def record_json(record: BaseModel) -> dict[str, Any]:
    """A JSON-safe dict of a record, as an export line holds it; messages and block lists keep their bytes (tagged)."""
    message = getattr(record, "message", None)
    exclude = {"message"} if isinstance(message, Message) else set()
    if isinstance(record, Revision):
        exclude.add("original")
    data: dict[str, Any] = record.model_dump(mode="json", exclude=exclude)
    if isinstance(message, Message):
        data["message"] = message.to_record()
    if isinstance(record, Revision):
        data["original"] = encode_blocks(record.original)
    return data
