"""Entries as the ledger keeps them, active or evicted: messages and first-class summaries."""

from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from contextledger.model.kinds import EntryStatus, new_id, utcnow
from contextledger.model.message import Message
from contextledger.model.trusted import builder

__all__ = ["HistoryEntry", "SummaryEntry", "history_entry"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class HistoryEntry(BaseModel):
    """A message entry as it stands in the ledger, active or evicted."""

    model_config = _FROZEN

    session_id: str
    agent_id: str
    seq: int
    message: Message
    status: EntryStatus
    pinned: bool
    tokens: int
    created_at: datetime
    evicted_by: str | None = None
    revision_count: int = 0
    from_call: int = 0
    """The first model call whose input could hold this entry (see :mod:`contextledger.history.travel`)."""
    version: int = 0
    """The conversation version the commit that appended it produced (0: written before 0.2)."""


history_entry: Callable[..., HistoryEntry] = builder(HistoryEntry, tuple(HistoryEntry.model_fields))
"""``HistoryEntry(...)`` of every field in order, as a store builds it from a row (see :func:`view_entry`).

A history streams one per stored entry; values of exactly the fields' types are taken
as they are, anything else is validated and refused as the constructor refuses it
(raising ``pydantic.ValidationError``). Generated from the record's fields: a field
added to :class:`HistoryEntry` is taken here with nothing else changed.
"""


class SummaryEntry(BaseModel):
    """A summary row: first-class, never overwritten.

    Attributes:
        replaces: Exactly the entry ids it replaced (messages and an earlier summary).
        supersedes: The summary this one replaced, if any.
        superseded_by: The summary that later replaced this one, if any.
        evicted_by: The reduction that took this summary out of the view, if any.
    """

    model_config = _FROZEN

    summary_id: str = Field(default_factory=new_id)
    session_id: str
    agent_id: str
    seq: int
    content: str
    summarizer: str
    reduction_id: str
    replaces: tuple[str, ...]
    supersedes: str | None = None
    status: EntryStatus = "active"
    superseded_by: str | None = None
    evicted_by: str | None = None
    tokens: int = 0
    created_at: datetime = Field(default_factory=utcnow)

    def to_message(self) -> Message:
        """Render the summary as the user message the model sees in its place."""
        return Message(message_id=self.summary_id, role="user", content=[{"text": self.content}])
