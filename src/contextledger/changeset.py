"""Plans (what a manager wants) and changesets (what a store applies atomically)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contextledger.messages import ContentBlock, Message
from contextledger.records import Reduction, SummaryEntry, ViewEntry

__all__ = [
    "Changeset",
    "ContentRevision",
    "ReductionPlan",
    "SummaryDraft",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ContentRevision(BaseModel):
    """Replace the content of an active message; the store keeps the original."""

    model_config = _FROZEN

    message_id: str
    content: list[ContentBlock]
    reason: str = "truncate_tool_result"
    tokens: int | None = None


class SummaryDraft(BaseModel):
    """A summary a manager wants inserted in place of ``replaces``.

    Attributes:
        content: The summary text.
        summarizer: What produced it.
        replaces: The entry ids it replaces (evicted with it).
        summary_id: Keep the host's id for the summary (e.g. the Strands ``tracking_id`` of
            the summary message) instead of a fresh one, so the host can find it on restore.
        seq: Where the summary sits in the view (it sorts before a message of equal seq);
            default: the seq of the first entry it replaces. A host that keeps some
            replaced-range entries (pins) ahead of its summary sets it.
    """

    model_config = _FROZEN

    content: str
    summarizer: str
    replaces: tuple[str, ...]
    summary_id: str | None = Field(default=None, min_length=1)
    seq: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _non_empty(self) -> SummaryDraft:
        if not self.replaces:
            raise ValueError("a summary must replace at least one entry")
        return self


class ReductionPlan(BaseModel):
    """What a manager decided for one view: pure data, no I/O.

    Attributes:
        strategy: ``sliding_window``, ``summarizing``, ``turn_window`` or a custom name.
        evict: Entry ids (messages or summaries) to mark evicted.
        revisions: Content rewrites (e.g. truncated tool results).
        summary: A summary to insert in place of the entries it replaces; those entries
            are evicted with it and need not be listed in ``evict``.
        detail: A short human-readable reason.
    """

    model_config = _FROZEN

    strategy: str
    evict: tuple[str, ...] = ()
    revisions: tuple[ContentRevision, ...] = ()
    summary: SummaryDraft | None = None
    detail: str | None = None

    @property
    def is_empty(self) -> bool:
        """True when the plan changes nothing."""
        return not (self.evict or self.revisions or self.summary)

    def removed_ids(self) -> set[str]:
        """Every entry id this plan takes out of the view."""
        ids = set(self.evict)
        if self.summary is not None:
            ids |= set(self.summary.replaces)
        return ids


class Changeset(BaseModel):
    """Everything one commit changes for one (session_id, agent_id).

    A store applies it all-or-nothing, only if the stored version still equals
    ``expected_version``, and bumps the version by one; otherwise it raises
    :class:`~contextledger.errors.ConcurrencyConflict` and changes nothing.

    Attributes:
        appends: New entries with their seq already assigned (``ViewEntry`` of kind message).
        evict: Entry ids (messages or summaries) to mark evicted by ``reduction``.
        revisions: Content rewrites; the previous content is stored as a revision.
        summary: A new summary row (its ``replaces`` are evicted by the same reduction).
        reduction: The reduction row, required when anything is evicted, revised or summarised.
        pins: Entry id -> pinned, applied to active messages (the message metadata follows).
        model_call_count / next_seq / manager_state / agent_state: New state values;
            ``None`` keeps the stored one.
    """

    model_config = _FROZEN

    session_id: str
    agent_id: str
    expected_version: int = Field(ge=0)
    appends: tuple[ViewEntry, ...] = ()
    evict: tuple[str, ...] = ()
    revisions: tuple[ContentRevision, ...] = ()
    summary: SummaryEntry | None = None
    reduction: Reduction | None = None
    pins: dict[str, bool] = Field(default_factory=dict)
    model_call_count: int | None = None
    next_seq: int | None = None
    manager_state: dict[str, Any] | None = None
    agent_state: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _reduction_required(self) -> Changeset:
        if (self.evict or self.revisions or self.summary) and self.reduction is None:
            raise ValueError("evictions, revisions and summaries need a reduction row")
        return self

    @property
    def new_version(self) -> int:
        """The version the conversation has after this changeset commits."""
        return self.expected_version + 1

    def appended_messages(self) -> list[Message]:
        """The appended messages, in order."""
        return [e.message for e in self.appends]
