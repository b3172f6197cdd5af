"""The active view as a store reads it: its entries, the conversation's state, the snapshot a restore reads."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contextledger.model.kinds import EntryKind, utcnow
from contextledger.model.message import Message
from contextledger.model.trusted import trusted

__all__ = ["ConversationState", "Snapshot", "ViewEntry", "view_entry"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ViewEntry(BaseModel):
    """One entry of the active view: a message, or a summary shown in place of others.

    Attributes:
        entry_id: The message id, or the summary id.
        kind: ``message`` or ``summary``.
        seq: Position in the ledger; a summary takes the seq of the first entry it replaced.
        message: What the model sees (a summary renders as a user text message).
        tokens: The token estimate stored with the entry.
    """

    model_config = _FROZEN

    entry_id: str
    kind: EntryKind = "message"
    seq: int
    message: Message
    tokens: int = 0

    @property
    def pinned(self) -> bool:
        """Whether the entry itself is pinned (partners are resolved by the view)."""
        return self.message.pinned


def view_entry(entry_id: Any, kind: Any, seq: Any, message: Any, tokens: Any) -> ViewEntry:
    """``ViewEntry(entry_id=..., kind=..., seq=..., message=..., tokens=...)`` as a store builds it from a row.

    A row written by the library has exactly the fields' types, and validating them
    would change nothing (a message is taken as it is either way), so such a row is
    built directly; anything else is validated, and refused as the constructor refuses it.

    Raises:
        pydantic.ValidationError: A value the entry cannot hold.
    """
    if (
        type(entry_id) is str
        and type(seq) is int
        and type(tokens) is int
        and (kind == "message" or kind == "summary")
        and type(kind) is str
        and isinstance(message, Message)
    ):
        return trusted(
            ViewEntry, {"entry_id": entry_id, "kind": kind, "seq": seq, "message": message, "tokens": tokens}
        )
    return ViewEntry(entry_id=entry_id, kind=kind, seq=seq, message=message, tokens=tokens)


class ConversationState(BaseModel):
    """Per (session_id, agent_id) state that moves with every changeset.

    Attributes:
        version: Optimistic-concurrency version; 0 means the conversation does not exist yet.
        model_call_count: Model calls made so far (drives ``per_turn``).
        next_seq: The seq the next appended entry gets.
        manager_state: The manager's typed state serialised as JSON (validated by the
            manager that owns it).
        agent_state: Host key/value state (e.g. Strands ``agent.state``).
    """

    model_config = _FROZEN

    session_id: str
    agent_id: str
    version: int = 0
    model_call_count: int = 0
    next_seq: int = 0
    manager_state: dict[str, Any] | None = None
    agent_state: dict[str, Any] | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Snapshot(BaseModel):
    """What a restore reads: the state and the active view, nothing else."""

    model_config = _FROZEN

    state: ConversationState
    entries: tuple[ViewEntry, ...] = ()
