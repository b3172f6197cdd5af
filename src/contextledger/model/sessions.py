"""Sessions as listed and owned, and the lineage of their conversations.

Also what is left of an erased entry (a tombstone) and of an expired conversation.
"""

from datetime import datetime
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from contextledger.model.kinds import LineageKind, utcnow

__all__ = ["Expiry", "LineageLink", "SessionInfo", "SessionOwner", "Tombstone"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class SessionInfo(BaseModel):
    """One session as listed by ``sessions()``.

    A conversation whose stored state is damaged is still listed, its agent named in
    ``damaged`` (its timestamps then come from the session's readable agents, or the
    epoch), so one corrupt record never hides the rest of a ledger.
    """

    model_config = _FROZEN

    session_id: str
    agents: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    active_entries: int
    total_entries: int
    damaged: tuple[str, ...] = ()
    """Agents of the session whose stored state could not be read (see ``CorruptRecord``)."""
    app: str | None = None
    """The app the session belongs to (``None``: none was named when it was created)."""
    user: str | None = None
    """The user of ``app`` the session belongs to (``None``: none was named)."""


class SessionOwner(NamedTuple):
    """The app and the user a session belongs to, as named by the commit that created it.

    Either may be ``None`` (a session created without it).
    """

    app: str | None
    user: str | None


class Tombstone(BaseModel):
    """What is left of an erased (or pruned) entry: which, when, and why.

    Attributes:
        session_id: The session.
        agent_id: The agent.
        entry_id: The message erased (or the entry pruned).
        reason: Why, as given (``prune`` for retention).
        erased_at: When.
        summaries: Summaries whose text was redacted or re-written because they covered it.
    """

    model_config = _FROZEN

    session_id: str
    agent_id: str
    entry_id: str
    reason: str
    erased_at: datetime = Field(default_factory=utcnow)
    summaries: tuple[str, ...] = ()


class LineageLink(BaseModel):
    """One descendant of a conversation: a fork (of a fork...) in this ledger, or a copy in another.

    Kept under the ancestor, so erasing in it reaches every descendant (see
    :mod:`contextledger.history.lineage`). A fork of a fork is recorded under each ancestor,
    with its ``depth``, so a descendant stays reachable when a session between them is
    deleted or expires.

    Attributes:
        session_id: The ancestor session.
        agent_id: The ancestor agent (forks and copies keep the agent id).
        child_session_id: The descendant session.
        child_agent_id: The descendant agent.
        kind: ``fork`` or ``copy``.
        depth: 1 for a direct fork or copy, 2 for a fork of a fork, ...
        at_call: The model call whose view a fork started from (``None``: the view then current).
        version: The ancestor's version when the descendant was taken from it.
        created_at: When.
        ledger: For a copy, the (masked) URL of the ledger that holds it; ``None``: this ledger.
    """

    model_config = _FROZEN

    session_id: str
    agent_id: str
    child_session_id: str
    child_agent_id: str
    kind: LineageKind = "fork"
    depth: int = 1
    at_call: int | None = None
    version: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    ledger: str | None = None

    @property
    def key(self) -> str:
        """What identifies the link under its ancestor (recording it again changes nothing)."""
        return f"{self.kind}|{self.ledger or ''}|{self.child_session_id}|{self.child_agent_id}"


class Expiry(BaseModel):
    """What is left of a conversation that expired (``Ledger.expire``): which, when, why.

    Attributes:
        session_id: The session.
        agent_id: The agent.
        reason: Why, e.g. ``idle since 2026-01-01T00:00:00+00:00``.
        expired_at: When it was removed.
        last_write: Its last write before that.
    """

    model_config = _FROZEN

    session_id: str
    agent_id: str
    reason: str
    expired_at: datetime = Field(default_factory=utcnow)
    last_write: datetime
