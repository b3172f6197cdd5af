"""What changed a conversation's view, recorded with the changeset that did it.

Reductions, revisions, evictions and pin events.
"""

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contextledger.model.jsonvalues import normalize_json
from contextledger.model.kinds import EntryKind, PinSource, Trigger, new_id, utcnow

__all__ = ["Eviction", "PinEvent", "Reduction", "Revision", "in_commit_order", "pin_positions"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Reduction(BaseModel):
    """One reduction: why, what it removed, what it produced."""

    model_config = _FROZEN

    reduction_id: str = Field(default_factory=new_id)
    session_id: str
    agent_id: str
    trigger: Trigger
    strategy: str
    created_at: datetime = Field(default_factory=utcnow)
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    evicted: tuple[str, ...] = ()
    revised: tuple[str, ...] = ()
    summary_id: str | None = None
    model_call_count: int = 0
    error: str | None = None
    detail: str | None = None
    restored: tuple[str, ...] = ()
    """Entries (messages and summaries) made active again (an ``undo`` reduction)."""
    from_call: int = 0
    """The first model call whose input reflects this reduction (see :mod:`contextledger.history.travel`)."""
    version: int = 0
    """The conversation version its commit produced (0: written before 0.2)."""


class Revision(BaseModel):
    """A content rewrite of a message; ``original`` is the content before it."""

    model_config = _FROZEN

    session_id: str
    agent_id: str
    message_id: str
    number: int
    original: list[dict[str, Any]]
    reason: str
    reduction_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("original", mode="after")
    @classmethod
    def _freeze_original(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # History: read-only all the way down, like a message's content.
        frozen: list[dict[str, Any]] = normalize_json(value, "revision original", coerce_keys=True, freeze=True)
        return frozen


class Eviction(BaseModel):
    """Answer to "what was evicted, when, and why?" for one entry."""

    model_config = _FROZEN

    session_id: str
    agent_id: str
    entry_id: str
    kind: EntryKind
    seq: int
    role: str
    preview: str
    evicted_at: datetime
    trigger: Trigger
    strategy: str
    reduction_id: str
    replaced_by_summary: str | None = None
    error: str | None = None


class PinEvent(BaseModel):
    """One pin or unpin of an entry, recorded in the changeset that made it.

    Attributes:
        session_id: The session.
        agent_id: The agent.
        entry_id: The message pinned or unpinned.
        pinned: ``True`` for a pin, ``False`` for an unpin.
        source: Who asked (see :data:`PinSource`).
        at: When the changeset committed.
        changeset_id: The changeset that carried the change.
        position: Its index among the changeset's pin events.
    """

    model_config = _FROZEN

    session_id: str
    agent_id: str
    entry_id: str
    pinned: bool
    source: PinSource
    at: datetime
    changeset_id: str
    from_call: int = 0
    """The first model call whose input reflects the change (see :mod:`contextledger.history.travel`)."""
    version: int = 0
    """The conversation version its commit produced (0: written before 0.2)."""
    position: int = Field(default=0, ge=0)
    """Its index among the pin events of its changeset (they share the stamps above)."""


def pin_positions() -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A filler of ``position`` for pin event rows read in commit order (rows written before 0.3 lack it).

    Each call takes the next row and returns it with its ``position``: as stored, or
    else its index among the rows of its changeset read so far -- the order the library
    wrote a changeset's pin events in.
    """
    seen: dict[Any, int] = {}

    def fill(row: Mapping[str, Any]) -> dict[str, Any]:
        changeset = row.get("changeset_id")
        index = seen.get(changeset, 0)
        seen[changeset] = index + 1
        return {**row} if "position" in row else {**row, "position": index}

    return fill


def in_commit_order(reductions: list[Reduction]) -> list[Reduction]:
    """``reductions`` of one conversation in commit order.

    Version stamps order commits exactly; rows written before 0.2 (version 0) keep the
    store's order (by creation).
    """
    if all(r.version > 0 for r in reductions):
        return sorted(reductions, key=lambda r: r.version)
    return reductions
