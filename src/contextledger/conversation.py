"""The live view of one (session_id, agent_id) and the owner of its transactions.

One straight line: dispatch hooks -> plan what the callbacks requested -> write the
summary once (outside the lock) -> build one changeset -> commit, re-planning on a
version conflict after a short randomized back-off.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from contextledger.changeset import (
    Changeset,
    Edit,
    ReductionPlan,
    ReductionRequest,
    build_changeset,
)
from contextledger.checks import check_conversation_options, check_trigger
from contextledger.errors import (
    ConcurrencyConflict,
    ContextLedgerError,
    ContextWindowOverflowError,
    DuplicateEntry,
    InvalidMessage,
    InvalidPlan,
    PinError,
    ReductionFailed,
)
from contextledger.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    ConversationContext,
    HookEvent,
    HookRegistry,
    MessageAddedEvent,
)
from contextledger.managers.base import ConversationManager
from contextledger.managers.repair import INTERRUPTED_TOOL_TEXT, REPAIR_STRATEGY, needs_repair, plan_repair
from contextledger.messages import Message, normalize_json
from contextledger.records import ConversationState, Reduction, Trigger, ViewEntry
from contextledger.reduction import SummaryNeeded, Written, plan_reduction, reduction_edit, write_summary
from contextledger.stores.base import LedgerStore
from contextledger.tokens import CharTokenCounter, TokenCounter, projected_input_tokens
from contextledger.view import View

__all__ = ["INTERRUPTED_TOOL_TEXT", "REPAIR_STRATEGY", "Conversation", "Edit"]

logger = logging.getLogger(__name__)

BACKOFF_BASE = 0.002
"""Seconds: the first conflict retry waits up to this long, doubling per retry (full jitter)."""
BACKOFF_CAP = 0.1
MAX_SUMMARIES = 3
"""Summarizer calls per reduction at most (the first, plus re-plans whose entries changed)."""

Planner = Callable[[View], Edit | None]
_E = TypeVar("_E", bound=HookEvent)
_Build = Callable[[View], tuple[Edit | None, dict[str, Any] | None]]


class Conversation:
    """One conversation's active view, kept in step with its store.

    Every change (append, pin, reduction, model-call count) is committed as one
    changeset with the version this object read. On a
    :class:`~contextledger.errors.ConcurrencyConflict` it waits a random, growing
    moment, re-reads, re-plans and retries up to ``max_retries`` times; then the
    conflict propagates. Opening and reading never write. Methods are thread-safe.

    Args:
        store: Where the ledger lives.
        session_id: The session.
        agent_id: The agent within the session.
        manager: The policy whose hooks are registered (``None`` registers nothing).
        token_counter: Estimates per-message tokens (default: :class:`CharTokenCounter`).
        context_window_limit: The model's window, used when a caller gives none.
        max_retries: Conflict retries per commit.
        overflow_errors: Exception types treated as a context-window overflow.
        repair: Repair a view left mid-tool by a crash inside the next real write (an
            append that is not the missing result, or a model call).
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
        repair: bool = True,
    ) -> None:
        """Open the conversation (read only; a new one is created by its first commit).

        Raises:
            ConfigurationError: An id is not a non-empty string, ``manager`` is not a
                :class:`ConversationManager`, ``token_counter`` has no ``count``,
                ``context_window_limit`` is not a positive int, ``max_retries`` is negative
                or ``overflow_errors`` holds something that is not an exception type.
        """
        check_conversation_options(
            session_id,
            agent_id,
            is_manager=isinstance(manager, ConversationManager),
            manager=manager,
            token_counter=token_counter,
            context_window_limit=context_window_limit,
            max_retries=max_retries,
            overflow_errors=overflow_errors,
        )
        self.store, self.session_id, self.agent_id = store, session_id, agent_id
        self.manager = manager
        self.token_counter: TokenCounter = token_counter or CharTokenCounter()
        self.context_window_limit = context_window_limit
        self.max_retries = max_retries
        self.overflow_errors: tuple[type[BaseException], ...] = (ContextWindowOverflowError, *overflow_errors)
        self.repair = repair
        self.hooks = HookRegistry()
        self._lock = threading.RLock()
        self._pending_calls = 0
        self._reactive_call: int | None = None
        self._note: str | None = None  # why the last planned reduction came to nothing
        self._state = ConversationState(session_id=session_id, agent_id=agent_id)
        self._view = View(())
        self.refresh()
        if manager is not None:
            self.hooks.add_hook(manager)

    # -- reading -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read state and active view from the store (one read of the active view)."""
        with self._lock:
            snapshot = self.store.load(self.session_id, self.agent_id)
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

    def context(
        self, *, error: BaseException | None = None, projected: int | None = None, limit: int | None = None
    ) -> ConversationContext:
        """The read-only context hook events carry (a snapshot of this conversation)."""
        return ConversationContext(
            session_id=self.session_id,
            agent_id=self.agent_id,
            view=self._view,
            model_call_count=self.model_call_count,
            projected_input_tokens=projected if projected is not None else self.projected_input_tokens(),
            context_window_limit=limit or self.context_window_limit,
            error=error,
            overflow=self.is_overflow(error),
            version=self.version,
        )

    def request(self, trigger: Trigger, error: BaseException | None = None, **overrides: Any) -> ReductionRequest:
        """The :class:`ReductionRequest` a manager plans with for ``trigger`` now."""
        return ReductionRequest(
            trigger=trigger,
            error=_describe(error),
            model_call_count=self.model_call_count,
            projected_input_tokens=self.projected_input_tokens(),
            context_window_limit=self.context_window_limit,
        ).model_copy(update=overrides)

    # -- writing -------------------------------------------------------------------------

    def append(self, *messages: Message | Mapping[str, Any]) -> list[Message]:
        """Append messages in one commit, then fire :class:`MessageAddedEvent` for each.

        Strands message dicts are accepted and converted with :meth:`Message.from_strands`.
        Appending again messages whose ids are already stored as the same messages (a
        retry after an error) writes nothing and returns the stored ones.

        Raises:
            InvalidMessage: A message is malformed or holds a value JSON cannot store;
                nothing is appended.
            DuplicateEntry: A message id is already in the conversation as another
                message; nothing is appended.
        """
        converted = [m if isinstance(m, Message) else Message.from_strands(m) for m in messages]
        if not converted:
            return []
        stored = self._stored_as(converted)
        if stored is not None:
            return stored
        try:
            self.edit(lambda _view: Edit(appends=tuple(converted)))
        except DuplicateEntry:
            self.refresh()
            stored = self._stored_as(converted)
            if stored is None:
                raise
            return stored
        if self.hooks.has_callbacks(MessageAddedEvent):  # the hot path builds no context otherwise
            for message in converted:
                self._dispatch(MessageAddedEvent(self.context(), message=message))
        return converted

    def _stored_as(self, messages: Sequence[Message]) -> list[Message] | None:
        with self._lock:
            found = [self._view.index_of(m.message_id) for m in messages]
            if any(i is None for i in found):
                return None
            stored = [self._view[i].message for i in found if i is not None]
            return stored if all(map(_same_message, messages, stored)) else None

    def pin(self, entry_id: str, *, source: str = "api") -> None:
        """Pin an active message (persisted at once, recorded as a pin event from ``source``).

        Raises:
            PinError: ``entry_id`` is not an active message (summaries cannot be pinned).
        """
        self._set_pin(entry_id, True, source)

    def unpin(self, entry_id: str, *, source: str = "api") -> None:
        """Unpin an active message (persisted at once, recorded as a pin event from ``source``).

        Raises:
            PinError: ``entry_id`` is not an active message.
        """
        self._set_pin(entry_id, False, source)

    def pin_index(self, index: int, pinned: bool = True, *, source: str = "api") -> str:
        """Pin or unpin the message at ``index`` of the view and return its id.

        ``source`` says who asked (``api``, ``model`` for the ``pin_message`` tool, ``host``).

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
            self._set_pin(entry_id, pinned, source)
            return entry_id

    def _set_pin(self, entry_id: str, pinned: bool, source: str = "api") -> None:
        def build(view: View) -> Edit:
            index = view.index_of(entry_id)
            if index is None or view[index].kind != "message":
                raise PinError(f"{entry_id} is not an active message of this conversation")
            return Edit(pins={entry_id: pinned}, pin_source=source)

        self.edit(build)

    def set_agent_state(self, state: Mapping[str, Any]) -> None:
        """Replace the host key/value state (one commit).

        Raises:
            InvalidMessage: ``state`` is not a mapping, has a key that is not a string,
                or holds a value JSON cannot store.
        """
        if not isinstance(state, Mapping):
            raise InvalidMessage(f"agent state must be a mapping, got {type(state).__name__}")
        for key in state:
            if not isinstance(key, str):
                raise InvalidMessage(f"agent state keys are strings, got {type(key).__name__} {key!r:.40}")
        snapshot = normalize_json(dict(state), "agent state", coerce_keys=True)
        self.edit(lambda _view: Edit(agent_state=snapshot))

    # -- reductions ----------------------------------------------------------------------

    def preview(self, trigger: Trigger = "manual") -> ReductionPlan | None:
        """The plan :meth:`reduce` would commit now (tokens estimated), or ``None``; writes nothing.

        A summary the manager would write is named (``removed_ids()``) but not written.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
        """
        check_trigger(trigger)
        if self.manager is None:
            return None
        with self._lock:
            return plan_reduction(self.manager, self._view, self.request(trigger), self.token_counter).plan

    def reduce(self, trigger: Trigger = "manual", *, error: BaseException | None = None) -> Reduction | None:
        """Ask the manager for a plan now and commit it; ``None`` when nothing changed.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
            ReductionFailed: The summarizer failed.
        """
        check_trigger(trigger)
        return self._reduce(self.request(trigger, error))

    def apply_plan(
        self, planner: Callable[[View], ReductionPlan | None], *, trigger: Trigger, error: BaseException | None = None
    ) -> Reduction | None:
        """Commit exactly the plan ``planner`` makes for the current view (re-planned on conflict).

        The plan is taken as given -- a host mirroring its own reductions, a test -- so the
        caller answers for the view rules; managers' plans go through :meth:`reduce` and
        the hooks, which enforce them.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
        """
        check_trigger(trigger)

        def build(view: View) -> Edit | None:
            plan = planner(view)
            return None if plan is None or plan.is_empty else Edit(plan=plan, trigger=trigger, error=_describe(error))

        return self.edit(build)

    def repair_interrupted_tools(self) -> Reduction | None:
        """Repair a view left mid-tool by a crash now, recording a ``restore``/``tool_pair_repair`` reduction.

        Writes only when the view needs it (see :mod:`contextledger.managers.repair`).
        """
        return self._transact(lambda view: (plan_repair(view), None), repair=False)

    def _reduce(self, request: ReductionRequest) -> Reduction | None:
        """Plan ``request`` once, write its summary once (outside the lock), commit once."""
        manager = self.manager
        if manager is None:
            return None
        written: Written = []

        def build(view: View) -> tuple[Edit | None, dict[str, Any] | None]:
            planned = plan_reduction(manager, view, request, self.token_counter)
            self._note = planned.note
            return reduction_edit(view, planned, request, written, self.token_counter)

        for _ in range(MAX_SUMMARIES + 1):
            try:
                return self._transact(build)
            except SummaryNeeded as need:
                if len(written) == MAX_SUMMARIES:
                    break
                written.append((need.entries, write_summary(need)))
        raise ReductionFailed(f"the summarized entries kept changing under concurrent writers ({MAX_SUMMARIES} tries)")

    # -- the transaction -------------------------------------------------------------------

    def edit(self, build: Planner) -> Reduction | None:
        """Turn ``build(view)`` into one changeset and commit it.

        ``build`` is called again on a fresh view after each concurrency conflict; it
        returns ``None`` (or an empty edit) when there is nothing to do. A pending
        model-call increment rides along with the first commit that happens, and so
        does the repair of a view left mid-tool (see ``repair``).

        Returns:
            The reduction row committed, if the edit carried one.

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-plans.
        """
        return self._transact(lambda view: (build(view), None))

    def _transact(self, build: _Build, *, repair: bool = True) -> Reduction | None:
        for attempt in range(self.max_retries + 1):
            with self._lock:
                edit, manager_state = build(self._view)
                if (edit is None or edit.is_empty) and not self._pending_calls:
                    return None
                edit = edit or Edit()
                real_write = bool(edit.appends or self._pending_calls)
                if repair and self.repair and real_write and needs_repair(self._view, edit.appends):
                    if edit.plan is not None or edit.strategy is not None:
                        # One reduction row per changeset: the repair commits first, alone.
                        self._transact(lambda view: (plan_repair(view), None), repair=False)
                        continue
                    edit = self._with_repair(edit)
                if manager_state is None and self.manager is not None:
                    manager_state = self.manager.export_state()
                changeset, entries = build_changeset(
                    self._state,
                    self._view,
                    edit,
                    counter=self.token_counter,
                    model_call_count=self.model_call_count,
                    count_changed=bool(self._pending_calls),
                    manager_state=manager_state,
                )
                try:
                    version = self.store.commit(changeset)
                except ConcurrencyConflict:
                    if attempt == self.max_retries:
                        raise
                    self.refresh()
                else:
                    self._after_commit(changeset, entries, version)
                    return changeset.reduction
            logger.info(
                "session_id=<%s>, agent_id=<%s>, attempt=<%d> | version conflict, re-planning",
                self.session_id,
                self.agent_id,
                attempt + 1,
            )
            time.sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)))
        raise AssertionError("unreachable")  # pragma: no cover

    def _with_repair(self, edit: Edit) -> Edit:
        """``edit`` with the repair of the view in front of it, in the same changeset."""
        repair = plan_repair(self._view)
        assert repair is not None
        logger.warning(
            "session_id=<%s>, agent_id=<%s> | conversation was interrupted mid-tool; repaired in this write",
            self.session_id,
            self.agent_id,
        )
        return repair.model_copy(
            update={"appends": (*repair.appends, *edit.appends), "pins": edit.pins, "agent_state": edit.agent_state}
        )

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
            if self.manager is not None:
                self.manager.restore_state(self._state.manager_state)
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
        self, *, context_window_limit: int | None = None, projected_input_tokens: int | None = None
    ) -> BeforeModelCallEvent:
        """Count the model call, fire :class:`BeforeModelCallEvent`, run what it requested.

        The first commit (a requested reduction, else the count alone) carries the new
        count; requested reductions are best-effort and never break the turn.
        """
        with self._lock:
            self._pending_calls += 1
            context = self.context(projected=projected_input_tokens, limit=context_window_limit)
        try:
            return self._dispatch(BeforeModelCallEvent(context))
        finally:
            if self._pending_calls:
                self.edit(lambda _view: None)

    def after_model_call(self, error: BaseException | None = None) -> bool:
        """Fire :class:`AfterModelCallEvent`; return whether the model call should be retried.

        A reactive reduction a callback requested runs once per model call: committed,
        it asks for the retry; impossible, it raises without asking.

        Raises:
            ReductionFailed: A reactive reduction was requested and nothing could be
                reduced without breaking the view rules (or the summarizer failed).
            BaseException: ``error`` itself when it is a context overflow that no callback
                handled (the null manager re-raises this way).
        """
        event = self._dispatch(AfterModelCallEvent(self.context(error=error)))
        reactive = next((r for r in event.requests if r.trigger == "reactive"), None)
        if reactive is not None and error is not None:
            self._reduce_reactive(reactive, error)
            event.retry_model_call = True
        if event.retry_model_call:
            return True
        if error is not None and self.is_overflow(error):
            raise error
        return False

    def after_invocation(self) -> None:
        """Fire :class:`AfterInvocationEvent` (end-of-invocation management)."""
        self._dispatch(AfterInvocationEvent(self.context()))

    def _dispatch(self, event: _E) -> _E:
        """Run the callbacks, then every best-effort reduction they requested, in order."""
        self.hooks.invoke(event)
        reduced = False
        for request in event.requests:
            if request.trigger == "reactive":
                continue  # the caller runs it: it must reduce or raise
            if reduced and request.projected_input_tokens is not None:
                # An earlier reduction of this event lowered what the host projected.
                projected = min(request.projected_input_tokens, self.projected_input_tokens())
                request = request.model_copy(update={"projected_input_tokens": projected})
            reduced = self._reduce_best_effort(request) or reduced
        return event

    def _reduce_best_effort(self, request: ReductionRequest) -> bool:
        try:
            reduction = self._reduce(request)
        except Exception as exc:  # best-effort by contract: the turn must go on
            self._warn(
                request.trigger, f"{type(exc).__name__}: {exc}", exc_info=not isinstance(exc, ContextLedgerError)
            )
            return False
        if reduction is None and self._note:
            self._warn(request.trigger, self._note)
        return reduction is not None

    def _reduce_reactive(self, request: ReductionRequest, error: BaseException) -> None:
        call = self.model_call_count
        if self._reactive_call == call:
            raise ReductionFailed(
                f"session_id={self.session_id} agent_id={self.agent_id}: model call {call} was already reduced once;"
                " count the retried call with before_model_call()"
            ) from error
        try:
            reduction = self._reduce(request)
        except InvalidPlan as exc:
            raise ReductionFailed(f"session_id={self.session_id} agent_id={self.agent_id}: {exc}") from exc
        if reduction is None:
            raise ReductionFailed(
                f"session_id={self.session_id} agent_id={self.agent_id}: the context window overflowed and the"
                f" {getattr(self.manager, 'name', 'manager')} manager found nothing left to reduce"
                f" ({len(self._view)} entries: {self._note or 'all protected, pinned or too recent'})"
            ) from error
        self._reactive_call = call

    def _warn(self, trigger: str, reason: str, *, exc_info: bool = False) -> None:
        logger.warning(
            "session_id=<%s>, agent_id=<%s>, manager=<%s>, trigger=<%s>, reason=<%s>"
            " | best-effort reduction skipped, the turn goes on",
            self.session_id,
            self.agent_id,
            getattr(self.manager, "name", None),
            trigger,
            reason,
            exc_info=exc_info,
        )


def _describe(error: BaseException | None) -> str | None:
    return None if error is None else f"{type(error).__name__}: {error}"


def _same_message(new: Message, stored: Message) -> bool:
    """Whether ``stored`` is ``new`` as committed (pins may have changed since)."""
    return (new.role, new.content, new.with_pin(False).metadata) == (
        stored.role,
        stored.content,
        stored.with_pin(False).metadata,
    )
