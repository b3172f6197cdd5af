"""Plans (what a manager wants), edits (what a caller wants) and changesets (what a store applies).

Everything here is pure data plus one pure function, :func:`build_changeset`, which
turns an :class:`Edit` made against a view into the one :class:`Changeset` a store
commits atomically and the view that commit leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contextledger.core.view import View
from contextledger.errors import EntryNotFound, InvalidMessage, PinError
from contextledger.model.jsonvalues import storable_text
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
from contextledger.model.tokens import TokenCounter
from contextledger.model.trusted import trusted

__all__ = [
    "Changeset",
    "ContentRevision",
    "Edit",
    "Planned",
    "ReductionPlan",
    "ReductionRequest",
    "SummaryDraft",
    "build_changeset",
    "describe_error",
    "pin_edit",
    "projected",
    "ride_with",
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
    def appending(cls, messages: Sequence[Message]) -> Edit:
        """``Edit(appends=tuple(messages))`` for messages already validated (every append builds one).

        The messages are :class:`Message` instances, which the constructor would take as
        they are, so the edit is built without a second validation.
        """
        if not all([type(m) is Message or isinstance(m, Message) for m in messages]):
            return cls(appends=tuple(messages))  # the constructor names what is wrong
        return trusted(
            cls,
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
    def _reduction_required(self) -> Changeset:
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

    def state_after(self, state: ConversationState, version: int) -> ConversationState:
        """``state`` as this changeset leaves it, committed at ``version``."""
        values = dict(state.__dict__)  # every field, in order: built as model_copy builds it, without its steps
        values["version"] = version
        for name in ("model_call_count", "next_seq", "manager_state", "agent_state"):
            value = getattr(self, name)
            if value is not None:
                values[name] = value
        return trusted(type(state), values)


def projected(state: ConversationState, view: View, edit: Edit | None, counter: TokenCounter) -> View:
    """The view ``edit`` would leave, computed without committing anything (pure)."""
    if edit is None or edit.is_empty:
        return view
    _, entries = build_changeset(
        state,
        view,
        edit,
        counter=counter,
        model_call_count=state.model_call_count,
        count_changed=False,
        manager_state=None,
    )
    return entries


def ride_with(ride: Edit, edit: Edit | None) -> Edit | None:
    """``ride`` (a host's pending write) and ``edit`` (planned on the view ``ride`` leaves) as one edit.

    Returns ``None`` when they cannot share a changeset: both carry a reduction (one
    reduction row per changeset), or ``edit``'s plan evicts, revises or summarizes what
    ``ride`` appends (the store applies a plan to the entries it already holds).
    """
    if edit is None or edit.is_empty:
        return ride
    appended = {m.message_id for m in ride.appends}
    plan = edit.plan if edit.plan is not None and not edit.plan.is_empty else None
    if plan is not None and (plan.removed_ids() | {r.message_id for r in plan.revisions}) & appended:
        return None
    if (plan is not None or edit.strategy) and ((ride.plan is not None and not ride.plan.is_empty) or ride.strategy):
        return None
    reducing = edit if plan is not None or edit.strategy else ride
    return Edit(
        appends=(*ride.appends, *edit.appends),
        pins={**ride.pins, **edit.pins},
        pin_source=edit.pin_source if edit.pins else ride.pin_source,
        plan=reducing.plan,
        trigger=reducing.trigger,
        error=reducing.error,
        strategy=reducing.strategy,
        agent_state=edit.agent_state if edit.agent_state is not None else ride.agent_state,
        as_given=True,  # each part was held to the rules (or given) on its own
    )


def describe_error(error: BaseException | None) -> str | None:
    """The text a reduction row records for the model error that caused it."""
    return None if error is None else f"{type(error).__name__}: {error}"


def pin_edit(view: View, entry_id: str, pinned: bool, source: str) -> Edit | None:
    """The edit pinning (or unpinning) ``entry_id`` of ``view``, as asked by ``source``.

    ``None`` when the entry already is: a pin that changes nothing commits nothing and
    records no pin event.

    Raises:
        PinError: ``entry_id`` is not an active message of ``view`` (summaries cannot be pinned).
    """
    index = view.index_of(entry_id)
    if index is None or view[index].kind != "message":
        raise PinError(f"{entry_id} is not an active message of this conversation")
    if view[index].message.pinned == pinned:
        return None
    return Edit(pins={entry_id: pinned}, pin_source=source)


def build_changeset(
    state: ConversationState,
    view: View,
    edit: Edit,
    *,
    counter: TokenCounter,
    model_call_count: int,
    count_changed: bool,
    manager_state: dict[str, Any] | None,
    before_call: bool = False,
) -> tuple[Changeset, View]:
    """The changeset that applies ``edit`` to ``view`` and the view it leaves (pure).

    The view left is ``view`` itself when the changeset changes no entry (a state-only
    commit such as the model-call count), so what ``view`` has computed stays cached.

    Args:
        state: The conversation state ``view`` was read with (its version is expected).
        view: The active view.
        edit: What to change.
        counter: Estimates the tokens of appended, revised and summary entries.
        model_call_count: The count recorded on a reduction row (and committed when
            ``count_changed``).
        count_changed: Whether the changeset carries a new ``model_call_count``.
        manager_state: The manager state to commit (``None`` keeps the stored one).
        before_call: The changeset commits while model call ``model_call_count`` is being
            prepared (its request not sent yet), so that call sees it.

    Raises:
        EntryNotFound: A revision names an entry that is not an active message.
        InvalidMessage: A summary draft has no content (it must be written first).
    """
    count = counter.count
    appends = tuple([_appended(m, seq, count(m)) for seq, m in enumerate(edit.appends, state.next_seq)])
    plan = edit.plan if edit.plan is not None and not edit.plan.is_empty else None
    # Only what commits while the call is prepared reaches it: a count deferred to ride
    # with the answer (the Strands adapter) commits after the call, like the answer.
    from_call = model_call_count if before_call else model_call_count + 1
    # A pin that changes nothing is not a change: no pin event, so the pin history of an
    # entry alternates and every event tells the state before it (time travel needs that).
    pins = {
        entry_id: pinned
        for entry_id, pinned in edit.pins.items()
        if (i := view.index_of(entry_id)) is None or view[i].message.pinned != pinned
    }
    removed = plan.removed_ids() if plan else set()
    # Only a changeset with a reduction row needs an id for it (a plain append makes none).
    reduction_id = new_id() if plan is not None or edit.strategy is not None else ""
    summary = _summary_entry(state, view, plan, reduction_id, counter, state.next_seq + len(appends))
    restored = {e.entry_id: e for e in edit.restore}
    revisions = tuple(
        r.model_copy(update={"tokens": counter.count(_revised(view, r, restored))})
        for r in (plan.revisions if plan else ())
    )
    revised = {r.message_id: r for r in revisions}
    entries = view.project((*edit.restore, *appends), removed, revised, pins, summary)
    reduction: Reduction | None = None
    if plan is not None or edit.strategy is not None:
        reduction = Reduction(
            reduction_id=reduction_id,
            session_id=state.session_id,
            agent_id=state.agent_id,
            trigger=edit.trigger,
            strategy=edit.strategy or (plan.strategy if plan else "manual"),
            messages_before=len(view) + len(appends),
            restored=tuple(restored),
            messages_after=len(entries),
            tokens_before=view.tokens + sum(a.tokens for a in appends),
            tokens_after=entries.tokens,
            evicted=tuple(sorted(removed, key=lambda r: view.index_of(r) or 0)),
            revised=tuple(revised),
            summary_id=summary.summary_id if summary else None,
            model_call_count=model_call_count,
            # Diagnostic text: a lone surrogate in an exception's message must not fail the write.
            error=storable_text(edit.error) if edit.error is not None else None,
            detail=storable_text(plan.detail) if plan and plan.detail is not None else None,
            from_call=from_call,
            version=state.version + 1,
        )
    if reduction is None and not (pins or edit.restore) and _plain(edit, manager_state):
        # The hot path (a turn appended): every value is one this function built or one
        # already validated, so the changeset is not validated a second time.
        changeset = trusted(
            Changeset,
            {
                "session_id": state.session_id,
                "agent_id": state.agent_id,
                "expected_version": state.version,
                "appends": appends,
                "evict": (),
                "revisions": (),
                "summary": None,
                "reduction": None,
                "pins": {},
                "pin_source": edit.pin_source,
                "changeset_id": new_id(),
                "from_call": from_call,
                "model_call_count": model_call_count if count_changed else None,
                "next_seq": state.next_seq + len(appends) if appends else None,
                "manager_state": manager_state,
                "agent_state": edit.agent_state,
                "restore": (),
                "app": None,
                "user": None,
            },
        )
        return changeset, entries
    changeset = Changeset(
        session_id=state.session_id,
        agent_id=state.agent_id,
        expected_version=state.version,
        appends=appends,
        evict=tuple(sorted(set(plan.evict))) if plan else (),
        revisions=revisions,
        summary=summary,
        reduction=reduction,
        pins=pins,
        pin_source=edit.pin_source,
        from_call=from_call,
        model_call_count=model_call_count if count_changed else None,
        next_seq=state.next_seq + len(appends) if appends else None,
        manager_state=manager_state,
        agent_state=edit.agent_state,
        restore=edit.restore,
    )
    return changeset, entries


def _appended(message: Message, seq: int, tokens: Any) -> ViewEntry:
    """The view entry of an appended message (validated only when the counter gave no plain ``int``)."""
    if type(tokens) is int:
        # Every field has its type: an id a Message validated, a seq and a count that are ints.
        return trusted(
            ViewEntry,
            {
                "entry_id": message.message_id,
                "kind": "message",
                "seq": seq,
                "message": message.stored_copy(),
                "tokens": tokens,
            },
        )
    return ViewEntry(entry_id=message.message_id, seq=seq, message=message.stored_copy(), tokens=tokens)


def _plain(edit: Edit, manager_state: Any) -> bool:
    """Whether the values of a changeset without a reduction need no validation (see :class:`Changeset`)."""
    return (
        0 < len(edit.pin_source) <= 32
        and (manager_state is None or type(manager_state) is dict)
        and (edit.agent_state is None or type(edit.agent_state) is dict)
    )


def _summary_entry(
    state: ConversationState,
    view: View,
    plan: ReductionPlan | None,
    reduction_id: str,
    counter: TokenCounter,
    next_seq: int,
) -> SummaryEntry | None:
    if plan is None or plan.summary is None:
        return None
    draft = plan.summary
    if draft.content is None:
        raise InvalidMessage("a summary draft has no content yet: the summarizer must write it before the commit")
    indexes = [i for i in (view.index_of(r) for r in draft.replaces) if i is not None]
    previous = [view[i].entry_id for i in indexes if view[i].kind == "summary"]
    seq = draft.seq if draft.seq is not None else min((view[i].seq for i in indexes), default=next_seq)
    return SummaryEntry(
        summary_id=draft.summary_id or new_id(),
        session_id=state.session_id,
        agent_id=state.agent_id,
        seq=seq,
        content=draft.content,
        summarizer=draft.summarizer,
        reduction_id=reduction_id,
        replaces=draft.replaces,
        supersedes=previous[-1] if previous else None,
        tokens=counter.count(Message(role="user", content=[{"text": draft.content}])),
    )


def _revised(view: View, revision: ContentRevision, restored: Mapping[str, ViewEntry]) -> Message:
    index = view.index_of(revision.message_id)
    if index is None:
        if revision.message_id in restored:
            return restored[revision.message_id].message.with_content(revision.content)
        raise EntryNotFound(f"cannot revise {revision.message_id}: not an active message")
    return view[index].message.with_content(revision.content)
