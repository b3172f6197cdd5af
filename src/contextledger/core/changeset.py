"""Plans (what a manager wants), edits (what a caller wants) and changesets (what a store applies).

Everything here is pure data; :func:`~contextledger.core.building.build_changeset` turns
an :class:`Edit` made against a view into the one :class:`Changeset` a store commits
atomically and the view that commit leaves.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contextledger.model.messages import ContentBlock, Message
from contextledger.model.records import (
    ConversationState,
    PinEvent,
    Reduction,
    SummaryEntry,
    Trigger,
    ViewEntry,
    new_id,
)
from contextledger.model.trusted import maker, trusted

__all__ = [
    "Changeset",
    "ContentRevision",
    "Edit",
    "Planned",
    "ReductionPlan",
    "ReductionRequest",
    "SummaryDraft",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


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
        content: The summary text; ``None`` asks the :class:`~contextledger.Conversation`
            to have the manager's summarizer write it, once, outside its retry loop.
        summarizer: What produced (or will produce) it.
        replaces: The entry ids it replaces (evicted with it).
        summary_id: Keep the host's id for the summary (e.g. the Strands ``tracking_id`` of
            the summary message) instead of a fresh one, so the host can find it on restore.
        seq: Where the summary sits in the view (it sorts before a message of equal seq);
            default: the seq of the first entry it replaces. For a manager's plan the
            conversation sets it: right before the oldest kept entry after the span.
    """

    model_config = _FROZEN

    content: str | None = None
    summarizer: str
    replaces: tuple[str, ...]
    summary_id: str | None = Field(default=None, min_length=1)
    seq: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _non_empty(self) -> "SummaryDraft":
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
        tokens_before: Estimated tokens of the view the plan was made for (set by the
            conversation when it checks the plan).
        tokens_after: Estimated tokens of the view the plan leaves (a summary not yet
            written counts as an empty message).
    """

    model_config = _FROZEN

    strategy: str
    evict: tuple[str, ...] = ()
    revisions: tuple[ContentRevision, ...] = ()
    summary: SummaryDraft | None = None
    detail: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None

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


class ReductionRequest(BaseModel):
    """Why a plan is asked for, with what the policy may need to know.

    Attributes:
        trigger: What asked for the reduction.
        error: The model error text for a reactive reduction.
        model_call_count: The conversation's model call count (this call included).
        projected_input_tokens: Projected tokens of the next model input, when known.
        context_window_limit: The model's context window, when known.
        threshold: Reduce only when ``projected_input_tokens / context_window_limit``
            reaches this share (proactive compression); ``None`` always plans.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    trigger: Trigger
    error: str | None = None
    model_call_count: int = 0
    projected_input_tokens: int | None = None
    context_window_limit: int | None = None
    threshold: float | None = None


Summarize = Callable[[Sequence[ViewEntry]], str]
"""Writes the text of a summary from the entries it replaces (the one outside call)."""


@dataclass(frozen=True)
class Planned:
    """What a manager's ``plan()`` returns: the plan and the manager's next state.

    ``plan()`` is pure: calling it again on the same view changes nothing, and the
    conversation commits ``state`` together with ``plan`` (or neither).

    Attributes:
        plan: The reduction, or ``None`` when nothing should or can change.
        state: The manager's state after the plan commits (a pydantic model or its
            JSON); ``None`` keeps the current one.
        summarize: Writes the summary when ``plan.summary.content`` is ``None``.
        note: Why nothing could be reduced although a reduction was due (everything
            pinned or protected); a best-effort reduction logs it as a warning.
    """

    plan: ReductionPlan | None = None
    state: BaseModel | Mapping[str, Any] | None = None
    summarize: Summarize | None = None
    note: str | None = None

    def __iter__(self) -> Any:
        """Unpack as ``plan, state = manager.plan(view, request)``."""
        return iter((self.plan, self.state))


class Edit(BaseModel):
    """One intended change, turned into a :class:`Changeset` against the current view.

    Attributes:
        appends: Messages to append, in order.
        pins: Entry id -> pinned.
        pin_source: Who asked for the pin changes (``api``, ``model``, ``host``).
        plan: A reduction to apply (evictions, revisions, a summary).
        trigger: Why the reduction runs (recorded on the reduction row).
        error: The error that caused a reactive reduction.
        strategy: Overrides ``plan.strategy`` for a reduction without a plan (e.g. a repair).
        agent_state: New host key/value state.
        as_given: Record ``plan`` exactly as given, without holding it to the view rules:
            it mirrors a reduction a host already made to its own copy of the messages
            (a Strands manager, an import), so the ledger must match the host, and the
            host answers for the view. Every other plan is held to the rules.
        restore: Evicted entries made active again, as the view will show them (undo).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    appends: tuple[Message, ...] = ()
    pins: dict[str, bool] = Field(default_factory=dict)
    pin_source: str = "api"
    plan: ReductionPlan | None = None
    trigger: Trigger = "manual"
    error: str | None = None
    strategy: str | None = None
    agent_state: dict[str, Any] | None = None
    as_given: bool = False
    restore: tuple[ViewEntry, ...] = ()

    @classmethod
    def appending(cls, messages: Sequence[Message], *, checked: bool = False) -> "Edit":
        """``Edit(appends=tuple(messages))`` for messages already validated (every append builds one).

        The messages are :class:`Message` instances, which the constructor would take as
        they are, so the edit is built without a second validation. ``checked``: the
        caller has made sure each one is a :class:`Message` (as
        :meth:`Transaction.converted <contextledger.conversation.transaction.Transaction.converted>`
        returns them), so they are not looked at again.
        """
        if cls is not Edit or not (checked or all([type(m) is Message or isinstance(m, Message) for m in messages])):
            return cls(appends=tuple(messages))  # the constructor names what is wrong (or a subclass builds)
        return _edit(
            {
                "appends": tuple(messages),
                "pins": {},
                "pin_source": "api",
                "plan": None,
                "trigger": "manual",
                "error": None,
                "strategy": None,
                "agent_state": None,
                "as_given": False,
                "restore": (),
            },
        )

    @property
    def is_empty(self) -> bool:
        """True when the edit changes nothing."""
        return not (
            self.restore
            or self.appends
            or self.pins
            or (self.plan is not None and not self.plan.is_empty)
            or self.agent_state is not None
        )


_state = maker(ConversationState)  # the state after each commit (see Changeset.state_after)
_edit = maker(Edit)  # the edit of each append (see Edit.appending)


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
        pin_source: Who asked for the pin changes (``api``, ``model``, ``host``); each
            is recorded as a :class:`~contextledger.model.records.PinEvent`.
        changeset_id: A client-generated id stored with what the changeset wrote, so a
            commit whose reply was lost is resolved by reading it back (exactly once).
        from_call: The first model call whose input reflects this changeset: the call
            being prepared when it commits before that call's request is sent (the
            model-call count it announces, reductions a ``before_model_call`` requested),
            else the next call. Stores keep it with every appended entry and pin event
            (reductions carry it themselves) so :func:`contextledger.history.travel.view_at` can
            rebuild the input of any call without a write per call.
        model_call_count / next_seq / manager_state / agent_state: New state values;
            ``None`` keeps the stored one.
        restore: Evicted entries (messages or summaries) made active again by
            ``reduction`` (an undo); applied before revisions, so a restored message can
            be revised in the same commit.
        app / user: The app and the user the session belongs to. Read only from a
            changeset that creates its conversation (``expected_version`` 0): a new session
            is created with them; an existing session must have the same ones (a store
            raises :class:`~contextledger.errors.SessionOwnerConflict` otherwise), or the
            changeset names neither.
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
    pin_source: str = Field(default="api", min_length=1, max_length=32)
    changeset_id: str = Field(default_factory=new_id, min_length=1, max_length=64)
    from_call: int = Field(default=0, ge=0)
    model_call_count: int | None = None
    next_seq: int | None = None
    manager_state: dict[str, Any] | None = None
    agent_state: dict[str, Any] | None = None
    restore: tuple[ViewEntry, ...] = ()
    app: str | None = Field(default=None, min_length=1)
    user: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _reduction_required(self) -> "Changeset":
        if (self.evict or self.revisions or self.summary or self.restore) and self.reduction is None:
            raise ValueError("evictions, revisions and summaries need a reduction row")
        return self

    @property
    def new_version(self) -> int:
        """The version the conversation has after this changeset commits."""
        return self.expected_version + 1

    def appended_messages(self) -> list[Message]:
        """The appended messages, in order."""
        return [e.message for e in self.appends]

    def stamps(self, at: Any) -> dict[str, Any]:
        """The stamps this commit gives every entry it appends, by the fields' names of a ``HistoryEntry``.

        The one place they are made: the stores add them to each appended row as they are
        (``at``, the commit's time, in the form the store writes it).
        """
        return {"created_at": at, "from_call": self.from_call, "version": self.new_version}

    def pin_events(self, at: datetime) -> list[PinEvent]:
        """The pin events this changeset records, committed at ``at``, in ``pins`` order.

        The one place the commit's stamps (``changeset_id``, ``at``, ``from_call``,
        ``version``) are copied onto its pin events: every store records these records as
        they are, field by field by name, so a field added to :class:`PinEvent` is set here
        and nowhere else in the stores.
        """
        return [
            PinEvent(
                session_id=self.session_id,
                agent_id=self.agent_id,
                entry_id=entry_id,
                pinned=pinned,
                source=self.pin_source,
                at=at,
                changeset_id=self.changeset_id,
                from_call=self.from_call,
                version=self.new_version,
                position=position,
            )
            for position, (entry_id, pinned) in enumerate(self.pins.items())
        ]

    def state_after(self, state: ConversationState, version: int, at: datetime | None = None) -> ConversationState:
        """``state`` as this changeset leaves it, committed at ``version`` (and at the time ``at``, when given).

        ``at`` becomes ``updated_at``, as a store stamps the conversation it commits to;
        without it, ``updated_at`` stays as it was (the conversation layer's copy of the state).
        """
        values = dict(state.__dict__)  # every field, in order: built as model_copy builds it, without its steps
        values["version"] = version
        if at is not None:
            values["updated_at"] = at
        mine = self.__dict__
        # The four state values a changeset may carry (None keeps the stored one), read
        # one by one: this runs after every commit.
        if (value := mine["model_call_count"]) is not None:
            values["model_call_count"] = value
        if (value := mine["next_seq"]) is not None:
            values["next_seq"] = value
        if (value := mine["manager_state"]) is not None:
            values["manager_state"] = value
        if (value := mine["agent_state"]) is not None:
            values["agent_state"] = value
        return _state(values) if type(state) is ConversationState else trusted(type(state), values)
