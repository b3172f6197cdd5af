"""The live view of one (session_id, agent_id) and the owner of its transactions."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contextledger.changeset import Changeset, ContentRevision, ReductionPlan
from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    ContextWindowOverflowError,
    EntryNotFound,
    InvalidMessage,
    PinError,
)
from contextledger.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    HookRegistry,
    MessageAddedEvent,
)
from contextledger.managers.base import ConversationManager, ReductionRequest
from contextledger.messages import Message
from contextledger.records import (
    TRIGGERS,
    ConversationState,
    Reduction,
    Snapshot,
    SummaryEntry,
    Trigger,
    ViewEntry,
    new_id,
)
from contextledger.stores.base import LedgerStore
from contextledger.tokens import CharTokenCounter, TokenCounter, projected_input_tokens
from contextledger.view import View

__all__ = ["Conversation", "Edit"]

logger = logging.getLogger(__name__)

INTERRUPTED_TOOL_TEXT = "Tool execution was interrupted before it returned a result."


class Edit(BaseModel):
    """One intended change, turned into a :class:`Changeset` against the current view.

    Attributes:
        appends: Messages to append, in order.
        pins: Entry id -> pinned.
        plan: A reduction to apply (evictions, revisions, a summary).
        trigger: Why the reduction runs (recorded on the reduction row).
        error: The error that caused a reactive reduction.
        strategy: Overrides ``plan.strategy`` for a reduction without a plan (e.g. a repair).
        agent_state: New host key/value state.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    appends: tuple[Message, ...] = ()
    pins: dict[str, bool] = Field(default_factory=dict)
    plan: ReductionPlan | None = None
    trigger: Trigger = "manual"
    error: str | None = None
    strategy: str | None = None
    agent_state: dict[str, Any] | None = None

    @property
    def is_empty(self) -> bool:
        """True when the edit changes nothing."""
        return not (
            self.appends
            or self.pins
            or (self.plan is not None and not self.plan.is_empty)
            or self.agent_state is not None
        )


Planner = Callable[[View], Edit | None]


class Conversation:
    """One conversation's active view, kept in step with its store.

    Every change (append, pin, reduction, model-call count) is committed as one
    :class:`Changeset` with the version this object read. On a
    :class:`ConcurrencyConflict` it re-reads, re-plans and retries up to ``max_retries``
    times; then the conflict propagates. Methods are thread-safe.

    Args:
        store: Where the ledger lives.
        session_id: The session.
        agent_id: The agent within the session.
        manager: The policy whose hooks are registered (``None`` registers nothing).
        token_counter: Estimates per-message tokens (default: :class:`CharTokenCounter`).
        context_window_limit: The model's window, used when a caller gives none.
        max_retries: Conflict retries per commit.
        overflow_errors: Exception types treated as a context-window overflow.
    """

    def __init__(
        self,
        store: LedgerStore,
        session_id: str,
        agent_id: str = "default",
        *,
        manager: ConversationManager | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        max_retries: int = 8,
        overflow_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        """Open (or create lazily) the conversation; see the class docstring.

        Raises:
            ConfigurationError: An id is not a non-empty string, ``manager`` is not a
                :class:`ConversationManager`, ``token_counter`` has no ``count``,
                ``context_window_limit`` is not a positive int, ``max_retries`` is negative
                or ``overflow_errors`` holds something that is not an exception type.
        """
        if not (isinstance(session_id, str) and session_id and isinstance(agent_id, str) and agent_id):
            raise ConfigurationError(
                f"session_id and agent_id must be non-empty strings, got {session_id!r} and {agent_id!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
        if manager is not None and not isinstance(manager, ConversationManager):
            raise ConfigurationError(
                f"manager must be a ConversationManager (e.g. SlidingWindowConversationManager), got {manager!r}"
            )
        if token_counter is not None and not callable(getattr(token_counter, "count", None)):
            raise ConfigurationError(f"token_counter must have a count(message) method, got {token_counter!r}")
        _check_limit(context_window_limit)
        if not all(isinstance(e, type) and issubclass(e, BaseException) for e in overflow_errors):
            raise ConfigurationError(f"overflow_errors must be exception types, got {overflow_errors!r}")
        self.store = store
        self.session_id = session_id
        self.agent_id = agent_id
        self.manager = manager
        self.token_counter: TokenCounter = token_counter or CharTokenCounter()
        self.context_window_limit = context_window_limit
        self.max_retries = max_retries
        self.overflow_errors: tuple[type[BaseException], ...] = (ContextWindowOverflowError, *overflow_errors)
        self.hooks = HookRegistry()
        self._lock = threading.RLock()
        self._pending_calls = 0
        self._state = ConversationState(session_id=session_id, agent_id=agent_id)
        self._view = View(())
        self.refresh()
        if manager is not None:
            self.hooks.add_hook(manager)

    # -- reading -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read state and active view from the store (one read of the active view)."""
        with self._lock:
            snapshot: Snapshot | None = self.store.load(self.session_id, self.agent_id)
            if snapshot is None:
                self._state = ConversationState(session_id=self.session_id, agent_id=self.agent_id)
                self._view = View(())
            else:
                self._state, self._view = snapshot.state, View(snapshot.entries)
            if self.manager is not None:
                self.manager.restore_state(self._state.manager_state)

    @property
    def view(self) -> View:
        """The active view as last committed."""
        return self._view

    @property
    def messages(self) -> list[Message]:
        """Copies of the active messages, in order (summaries as user messages)."""
        return [m.model_copy(deep=True) for m in self._view.messages]

    @property
    def state(self) -> ConversationState:
        """The state as last committed."""
        return self._state

    @property
    def version(self) -> int:
        """The version last read or committed (0 before the first commit)."""
        return self._state.version

    @property
    def model_call_count(self) -> int:
        """Model calls so far, including one announced but not yet committed."""
        return self._state.model_call_count + self._pending_calls

    @property
    def agent_state(self) -> dict[str, Any]:
        """Host key/value state (a copy)."""
        return dict(self._state.agent_state or {})

    def projected_input_tokens(self) -> int:
        """Last reported usage plus the estimate of every entry after it."""
        return projected_input_tokens(self._view.messages, [e.tokens for e in self._view])

    def is_overflow(self, error: BaseException | None) -> bool:
        """Whether ``error`` is a context-window overflow."""
        return error is not None and isinstance(error, self.overflow_errors)

    # -- writing -------------------------------------------------------------------------

    def append(self, *messages: Message | Mapping[str, Any]) -> list[Message]:
        """Append messages in one commit, then fire :class:`MessageAddedEvent` for each.

        Strands message dicts are accepted and converted with :meth:`Message.from_strands`.

        Returns:
            The appended messages (ids assigned), in order.

        Raises:
            InvalidMessage: A message is malformed or holds a value JSON cannot store;
                nothing is appended.
            DuplicateEntry: A message id is already in the conversation; nothing is appended.
        """
        converted = [m if isinstance(m, Message) else Message.from_strands(m) for m in messages]
        if not converted:
            return []
        self.edit(lambda _view: Edit(appends=tuple(converted)))
        for message in converted:
            self.hooks.invoke(MessageAddedEvent(self, message))
        return converted

    def pin(self, entry_id: str) -> None:
        """Pin an active message (persisted at once).

        Raises:
            PinError: ``entry_id`` is not an active message (summaries cannot be pinned).
        """
        self._set_pin(entry_id, True)

    def unpin(self, entry_id: str) -> None:
        """Unpin an active message (persisted at once).

        Raises:
            PinError: ``entry_id`` is not an active message.
        """
        self._set_pin(entry_id, False)

    def pin_index(self, index: int, pinned: bool = True) -> str:
        """Pin or unpin the message at ``index`` of the view and return its id.

        Raises:
            PinError: ``index`` is not an int, is out of range or names a summary.
        """
        if isinstance(index, bool) or not isinstance(index, int):
            raise PinError(f"index must be an int, got {index!r}")
        with self._lock:
            size = len(self._view)
            if not -size <= index < size:
                raise PinError(f"index {index} is out of range: the conversation has {size} messages")
            entry_id = self._view[index].entry_id
            self._set_pin(entry_id, pinned)
            return entry_id

    def _set_pin(self, entry_id: str, pinned: bool) -> None:
        def build(view: View) -> Edit:
            index = view.index_of(entry_id)
            if index is None or view[index].kind != "message":
                raise PinError(f"{entry_id} is not an active message of this conversation")
            return Edit(pins={entry_id: pinned})

        self.edit(build)

    def set_agent_state(self, state: Mapping[str, Any]) -> None:
        """Replace the host key/value state (one commit).

        Raises:
            InvalidMessage: ``state`` is not a mapping, or holds a value JSON cannot store.
        """
        if not isinstance(state, Mapping):
            raise InvalidMessage(f"agent state must be a mapping, got {type(state).__name__}")
        snapshot = dict(state)
        self.edit(lambda _view: Edit(agent_state=snapshot))

    def reduce(self, trigger: Trigger = "manual", *, error: BaseException | None = None) -> Reduction | None:
        """Ask the manager for a plan now and commit it; ``None`` when nothing changed.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
        """
        _check_trigger(trigger)
        if self.manager is None:
            return None
        manager = self.manager
        request = self._request(trigger, error)
        return self.apply_plan(lambda view: manager.plan(view, request), trigger=trigger, error=error)

    def apply_plan(
        self,
        planner: Callable[[View], ReductionPlan | None],
        *,
        trigger: Trigger,
        error: BaseException | None = None,
    ) -> Reduction | None:
        """Commit the plan ``planner`` makes for the current view (re-planned on conflict).

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
        """
        _check_trigger(trigger)

        def build(view: View) -> Edit | None:
            plan = planner(view)
            if plan is None or plan.is_empty:
                return None
            return Edit(plan=plan, trigger=trigger, error=_describe(error))

        return self.edit(build)

    def edit(self, build: Planner) -> Reduction | None:
        """Turn ``build(view)`` into one changeset and commit it.

        ``build`` is called again on a fresh view after each concurrency conflict; it
        returns ``None`` (or an empty edit) when there is nothing to do. A pending
        model-call increment rides along with the first commit that happens.

        Returns:
            The reduction row committed, if the edit carried one.

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-plans.
        """
        with self._lock:
            for attempt in range(self.max_retries + 1):
                edit = build(self._view)
                if (edit is None or edit.is_empty) and not self._pending_calls:
                    return None
                edit = edit or Edit()
                changeset, entries = self._changeset(edit)
                try:
                    version = self.store.commit(changeset)
                except ConcurrencyConflict:
                    logger.info(
                        "session_id=<%s>, agent_id=<%s>, attempt=<%d> | version conflict, re-planning",
                        self.session_id,
                        self.agent_id,
                        attempt + 1,
                    )
                    if attempt == self.max_retries:
                        raise
                    self.refresh()
                    continue
                self._after_commit(changeset, entries, version)
                return changeset.reduction
        raise AssertionError("unreachable")  # pragma: no cover

    def _changeset(self, edit: Edit) -> tuple[Changeset, list[ViewEntry]]:
        state, view = self._state, self._view
        appends = tuple(
            ViewEntry(
                entry_id=m.message_id,
                seq=state.next_seq + i,
                message=m.stored_copy(),
                tokens=self.token_counter.count(m),
            )
            for i, m in enumerate(edit.appends)
        )
        plan = edit.plan if edit.plan is not None and not edit.plan.is_empty else None
        summary: SummaryEntry | None = None
        reduction: Reduction | None = None
        removed = plan.removed_ids() if plan else set()
        reduction_id = new_id()
        if plan is not None and plan.summary is not None:
            seqs = [view[i].seq for i in (view.index_of(r) for r in plan.summary.replaces) if i is not None]
            previous = [
                r for r in plan.summary.replaces if (i := view.index_of(r)) is not None and view[i].kind == "summary"
            ]
            draft_message = Message(role="user", content=[{"text": plan.summary.content}])
            summary = SummaryEntry(
                summary_id=plan.summary.summary_id or new_id(),
                session_id=self.session_id,
                agent_id=self.agent_id,
                seq=plan.summary.seq
                if plan.summary.seq is not None
                else min(seqs)
                if seqs
                else state.next_seq + len(appends),
                content=plan.summary.content,
                summarizer=plan.summary.summarizer,
                reduction_id=reduction_id,
                replaces=plan.summary.replaces,
                supersedes=previous[-1] if previous else None,
                tokens=self.token_counter.count(draft_message),
            )
        revisions = tuple(
            r.model_copy(update={"tokens": self.token_counter.count(_revised(view, r))})
            for r in (plan.revisions if plan else ())
        )
        revised = {r.message_id: r for r in revisions}
        pins = dict(edit.pins)
        entries = _next_view(view, appends, removed, revised, pins, summary)
        if plan is not None or edit.strategy is not None:
            reduction = Reduction(
                reduction_id=reduction_id,
                session_id=self.session_id,
                agent_id=self.agent_id,
                trigger=edit.trigger,
                strategy=edit.strategy or (plan.strategy if plan else "manual"),
                messages_before=len(view) + len(appends),
                messages_after=len(entries),
                tokens_before=view.tokens + sum(a.tokens for a in appends),
                tokens_after=sum(e.tokens for e in entries),
                evicted=tuple(sorted(removed, key=lambda r: view.index_of(r) or 0)),
                revised=tuple(revised),
                summary_id=summary.summary_id if summary else None,
                model_call_count=self.model_call_count,
                error=edit.error,
                detail=plan.detail if plan else None,
            )
        changeset = Changeset(
            session_id=self.session_id,
            agent_id=self.agent_id,
            expected_version=state.version,
            appends=appends,
            evict=tuple(sorted(set(plan.evict))) if plan else (),
            revisions=revisions,
            summary=summary,
            reduction=reduction,
            pins=pins,
            model_call_count=self.model_call_count if self._pending_calls else None,
            next_seq=state.next_seq + len(appends) if appends else None,
            manager_state=self.manager.export_state() if self.manager is not None else None,
            agent_state=edit.agent_state,
        )
        return changeset, entries

    def _after_commit(self, changeset: Changeset, entries: list[ViewEntry], version: int) -> None:
        updates: dict[str, Any] = {"version": version}
        for name in ("model_call_count", "next_seq", "manager_state", "agent_state"):
            value = getattr(changeset, name)
            if value is not None:
                updates[name] = value
        self._state = self._state.model_copy(update=updates)
        self._view = View(entries)
        self._pending_calls = 0
        if changeset.reduction is not None:
            r = changeset.reduction
            logger.info(
                "session_id=<%s>, agent_id=<%s>, trigger=<%s>, strategy=<%s>, evicted=<%d>, revised=<%d>"
                " | committed reduction",
                self.session_id,
                self.agent_id,
                r.trigger,
                r.strategy,
                len(r.evicted),
                len(r.revised),
            )

    # -- the model-call cycle --------------------------------------------------------------

    def before_model_call(
        self,
        *,
        context_window_limit: int | None = None,
        projected_input_tokens: int | None = None,
    ) -> BeforeModelCallEvent:
        """Count the model call, fire :class:`BeforeModelCallEvent`, commit the count.

        A reduction made by a callback carries the new count in the same commit;
        otherwise the count is committed on its own.
        """
        with self._lock:
            self._pending_calls += 1
            event = BeforeModelCallEvent(
                self,
                projected_input_tokens=(
                    projected_input_tokens if projected_input_tokens is not None else self.projected_input_tokens()
                ),
                context_window_limit=context_window_limit or self.context_window_limit,
            )
            try:
                self.hooks.invoke(event)
            finally:
                if self._pending_calls:
                    self.edit(lambda _view: None)
            return event

    def after_model_call(self, error: BaseException | None = None) -> bool:
        """Fire :class:`AfterModelCallEvent`; return whether the model call should be retried.

        Raises:
            BaseException: ``error`` itself when it is a context overflow that no callback
                reduced (the null manager re-raises this way), or the manager's
                :class:`~contextledger.errors.ReductionFailed`.
        """
        with self._lock:
            event = self.hooks.invoke(AfterModelCallEvent(self, error=error))
            if event.retry_model_call:
                return True
            if error is not None and self.is_overflow(error):
                raise error
            return False

    def after_invocation(self) -> None:
        """Fire :class:`AfterInvocationEvent` (end-of-invocation management)."""
        with self._lock:
            self.hooks.invoke(AfterInvocationEvent(self))

    def repair_interrupted_tools(self) -> Reduction | None:
        """Make a view left mid-tool by a crash valid again, recording the repair.

        A toolUse without a result in the last message gets an error toolResult
        appended; any other orphan call or result is revised away (the original is
        kept as a revision). Recorded as a ``restore``/``tool_pair_repair`` reduction.
        """

        def build(view: View) -> Edit | None:
            dangling = set(view.dangling_tool_uses())
            orphans = set(view.orphan_results())
            if not dangling and not orphans:
                return None
            tail = set(view[-1].message.tool_use_ids) & dangling if len(view) else set()
            appends = tuple(
                Message(
                    role="user",
                    content=[
                        {
                            "toolResult": {
                                "toolUseId": t,
                                "status": "error",
                                "content": [{"text": INTERRUPTED_TOOL_TEXT}],
                            }
                        }
                        for t in sorted(tail)
                    ],
                    metadata={"custom": {"contextledger": {"repair": "interrupted_tool"}}},
                )
                for _ in [0]
                if tail
            )
            revisions: list[ContentRevision] = []
            for entry in view:
                drop = (set(entry.message.tool_use_ids) & (dangling - tail)) | (
                    set(entry.message.tool_result_ids) & orphans
                )
                if not drop or entry.kind != "message":
                    continue
                kept = [b for b in entry.message.content if _block_tool_id(b) not in drop]
                revisions.append(
                    ContentRevision(
                        message_id=entry.entry_id,
                        content=kept or [{"text": "[interrupted tool call removed]"}],
                        reason="repair_orphan_tool_block",
                    )
                )
            plan = ReductionPlan(
                strategy="tool_pair_repair", revisions=tuple(revisions), detail="interrupted tool call"
            )
            return Edit(
                appends=appends, plan=plan if revisions else None, trigger="restore", strategy="tool_pair_repair"
            )

        return self.edit(build)

    def _request(self, trigger: Trigger, error: BaseException | None = None) -> ReductionRequest:
        return ReductionRequest(
            trigger=trigger,
            error=_describe(error),
            model_call_count=self.model_call_count,
            projected_input_tokens=self.projected_input_tokens(),
            context_window_limit=self.context_window_limit,
        )

    def request(self, trigger: Trigger, error: BaseException | None = None, **overrides: Any) -> ReductionRequest:
        """Build the :class:`ReductionRequest` a manager callback plans with."""
        return self._request(trigger, error).model_copy(update=overrides)


def _check_limit(limit: object) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigurationError(f"context_window_limit must be a positive int or None, got {limit!r}")


def _check_trigger(trigger: object) -> None:
    if trigger not in TRIGGERS:
        raise ConfigurationError(f"unknown trigger {trigger!r}; one of {', '.join(TRIGGERS)}")


def _revised(view: View, revision: ContentRevision) -> Message:
    index = view.index_of(revision.message_id)
    if index is None:
        raise EntryNotFound(f"cannot revise {revision.message_id}: not an active message")
    return view[index].message.with_content(revision.content)


def _describe(error: BaseException | None) -> str | None:
    return None if error is None else f"{type(error).__name__}: {error}"


def _block_tool_id(block: Mapping[str, Any]) -> str | None:
    for key in ("toolUse", "toolResult"):
        if key in block:
            value = block[key].get("toolUseId")
            return str(value) if value is not None else None
    return None


def _next_view(
    view: View,
    appends: Sequence[ViewEntry],
    removed: set[str],
    revised: Mapping[str, ContentRevision],
    pins: Mapping[str, bool],
    summary: SummaryEntry | None,
) -> list[ViewEntry]:
    """The view after a changeset, computed locally so a commit needs no re-read."""
    in_order = not appends or not view.entries or appends[0].seq > view.entries[-1].seq
    if in_order and not (removed or revised or pins or summary):
        # Appends take seqs above every active entry, so the order holds without a sort
        # and the hot path (a turn appended) costs O(appended), not O(window log window).
        return [*view.entries, *appends]
    entries: list[ViewEntry] = []
    for entry in _chain(view.entries, appends):
        if entry.entry_id in removed:
            continue
        message = entry.message
        if entry.entry_id in revised:
            message = message.with_content(revised[entry.entry_id].content)
        if entry.entry_id in pins:
            message = message.with_pin(pins[entry.entry_id])
        if message is not entry.message:
            tokens = revised[entry.entry_id].tokens if entry.entry_id in revised else entry.tokens
            entry = entry.model_copy(update={"message": message, "tokens": tokens})
        entries.append(entry)
    if summary is not None:
        entries.append(
            ViewEntry(
                entry_id=summary.summary_id,
                kind="summary",
                seq=summary.seq,
                message=summary.to_message(),
                tokens=summary.tokens,
            )
        )
    entries.sort(key=lambda e: (e.seq, e.kind != "summary"))
    return entries


def _chain(a: Iterable[ViewEntry], b: Iterable[ViewEntry]) -> Iterable[ViewEntry]:
    yield from a
    yield from b
