"""Typed records of the ledger: entries, summaries, reductions, revisions and state.

These are what stores persist and what queries return. They are immutable pydantic
models; a store never hands out a record that a caller could mutate behind its back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contextledger.model.ids import random_uuid_hex
from contextledger.model.messages import Message, encode_blocks, normalize_json
from contextledger.model.trusted import builder, trusted

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

Trigger = Literal["per_turn", "proactive", "reactive", "end_of_invocation", "manual", "restore", "import"]
"""Why a reduction ran. ``restore`` marks the repair of a conversation interrupted mid-tool;
``import`` marks what another store had already evicted when its session was imported."""
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)
"""Every :data:`Trigger`, in the order above."""
PinSource = str
"""Who asked for a pin change: ``api`` (a caller of :meth:`Conversation.pin`), ``model``
(the ``pin_message`` tool), ``host`` (an integration mirroring its host's pins), or
another short name an integration chooses."""
EntryKind = Literal["message", "summary"]
LineageKind = Literal["fork", "copy"]
"""How a conversation was made from another: ``fork`` (:meth:`Ledger.fork`) or ``copy`` (:meth:`Ledger.copy_to`)."""
EntryStatus = Literal["active", "evicted"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the ledger uses."""
    return datetime.now(UTC)


def new_id() -> str:
    """A fresh opaque id for summaries, reductions and commits: a time-ordered UUID (version 7) as hex."""
    return random_uuid_hex()


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


def in_commit_order(reductions: list[Reduction]) -> list[Reduction]:
    """``reductions`` of one conversation in commit order.

    Version stamps order commits exactly; rows written before 0.2 (version 0) keep the
    store's order (by creation).
    """
    if all(r.version > 0 for r in reductions):
        return sorted(reductions, key=lambda r: r.version)
    return reductions


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
