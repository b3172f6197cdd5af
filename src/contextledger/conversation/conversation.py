"""The live view of one (session_id, agent_id) and the owner of its transactions.

One straight line: dispatch hooks -> plan what the callbacks requested -> write the
summary once (outside the lock) -> build one changeset -> commit, re-planning on a
version conflict after a short randomized back-off.

Only the loop and the dispatch live here. The model-call cycle and the reductions a
caller asks for are in :mod:`contextledger.conversation.modelcalls`, the pin API in
:mod:`contextledger.conversation.pins` (mixins: each of their writes is one :meth:`Conversation.edit`),
reads of the committed state in :mod:`contextledger.conversation.reading`. The pure steps sit next
to what they belong to: changeset building in :mod:`contextledger.core.changeset`, planning
and summary reuse in :mod:`contextledger.core.reduction`, the view rules in
:mod:`contextledger.core.viewrules`, the repair of an interrupted tool call in
:mod:`contextledger.managers.repair`, and the back-off in :mod:`contextledger.core.retry`.
The two outside calls each happen in one place: the summarizer in
:meth:`Conversation._reduce` and the back-off sleep in :meth:`Conversation._transact`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from contextledger.conversation.modelcalls import ModelCallCycle
from contextledger.conversation.pins import ConversationPins
from contextledger.conversation.undo import ConversationUndo
from contextledger.core.changeset import (
    Changeset,
    Edit,
    ReductionPlan,
    ReductionRequest,
    build_changeset,
    describe_error,
    projected,
    ride_with,
)
from contextledger.core.checks import check_agent_state, check_conversation_options, check_owner, check_trigger
from contextledger.core.hooks import (
    HookEvent,
    HookRegistry,
    MessageAddedEvent,
)
from contextledger.core.reduction import (
    MAX_SUMMARIES,
    SummaryNeeded,
    Written,
    log_committed,
    plan_reduction,
    reduction_edit,
    write_summary,
)
from contextledger.core.retry import BACKOFF_BASE, BACKOFF_CAP, MAX_RETRIES, backoff_delay, log_conflict
from contextledger.core.seam import pause
from contextledger.core.view import View
from contextledger.core.viewrules import fit_edit
from contextledger.errors import (
    CommitOutcomeUnknown,
    ConcurrencyConflict,
    ContextWindowOverflowError,
    DuplicateEntry,
    ReductionFailed,
)
from contextledger.managers.base import ConversationManager
from contextledger.managers.repair import (
    INTERRUPTED_TOOL_TEXT,
    REPAIR_STRATEGY,
    log_repair,
    needs_repair,
    plan_repair,
    with_repair,
)
from contextledger.model.messages import Message
from contextledger.model.records import ConversationState, Reduction, Trigger
from contextledger.model.tokens import CharTokenCounter, TokenCounter
from contextledger.stores.base import LedgerStore
from contextledger.telemetry import spans as telemetry

# The retry and summary constants stay importable here, where they were first defined.
__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "INTERRUPTED_TOOL_TEXT",
    "MAX_SUMMARIES",
    "REPAIR_STRATEGY",
    "Conversation",
    "Edit",
]

Planner = Callable[[View], Edit | None]
_E = TypeVar("_E", bound=HookEvent)
_Build = Callable[[View], tuple[Edit | None, dict[str, Any] | None]]


class Conversation(ModelCallCycle, ConversationPins, ConversationUndo):
    """One conversation's active view, kept in step with its store.

    Every change (append, pin, reduction, model-call count) is committed as one
    changeset with the version this object read. On a
    :class:`~contextledger.errors.ConcurrencyConflict` it waits a random, growing
    moment, re-reads, re-plans and retries up to ``max_retries`` times; then the
    conflict propagates. A commit whose outcome stayed unknown
    (:class:`~contextledger.errors.CommitOutcomeUnknown`) is settled by the next write:
    sent again under its changeset id, it applies at most once. Opening and reading
    never write. Methods are thread-safe.

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
        app: The app the session belongs to, set by the commit that creates the session.
        user: The user of ``app`` the session belongs to, set the same way.
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
        max_retries: int = MAX_RETRIES,
        overflow_errors: tuple[type[BaseException], ...] = (),
        repair: bool = True,
        app: str | None = None,
        user: str | None = None,
    ) -> None:
        """Open the conversation (read only; a new one is created by its first commit).

        Raises:
            ConfigurationError: An id is not a non-empty string, ``manager`` is not a
                :class:`ConversationManager`, ``token_counter`` has no ``count``,
                ``context_window_limit`` is not a positive int, ``max_retries`` is negative,
                ``overflow_errors`` holds something that is not an exception type, or
                ``app`` / ``user`` is not ``None`` or a non-empty string.
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
        check_owner(app, user)
        self.store, self.session_id, self.agent_id = store, session_id, agent_id
        self.app, self.user = app, user
        self.manager = manager
        self.token_counter: TokenCounter = token_counter or CharTokenCounter()
        self.context_window_limit = context_window_limit
        self.max_retries = max_retries
        self.overflow_errors: tuple[type[BaseException], ...] = (ContextWindowOverflowError, *overflow_errors)
        self.repair = repair
        self.hooks = HookRegistry()
        self._lock = threading.RLock()
        self._pending_calls = 0
        self._preparing_call = False  # a call is prepared, its input not handed: commits reach that input
        self._reactive_call: int | None = None
        self._riding: Planner | None = None  # a host's pending write, committed with the next commit
        self._defer_count = False  # the pending count waits for a commit with something else in it
        self._unknown: Changeset | None = None  # a commit whose reply was lost
        self._note: str | None = None  # why the last planned reduction came to nothing
        self._state = ConversationState.model_construct(session_id=session_id, agent_id=agent_id)  # ids checked above
        self._view = View(())
        self.refresh()
        if manager is not None:
            self.hooks.add_hook(manager)

    # -- reading -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read state and active view from the store (one read of the active view)."""
        with self._lock:
            snapshot = telemetry.restore(self.store, self.session_id, self.agent_id)
            if snapshot is None:
                self._state = ConversationState(session_id=self.session_id, agent_id=self.agent_id)
                self._view = View(())
            else:
                self._state, self._view = snapshot.state, View(snapshot.entries)
            if self.manager is not None:
                self.manager.restore_state(self._state.manager_state)

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
        with self._lock:
            stored = self._view.stored_as(converted)
        if stored is not None:
            return stored
        try:
            self.edit(lambda _view: Edit(appends=tuple(converted)))
        except DuplicateEntry:
            self.refresh()
            stored = self._view.stored_as(converted)
            if stored is None:
                raise
            return stored
        if self.hooks.has_callbacks(MessageAddedEvent):  # the hot path builds no context otherwise
            for message in converted:
                self._dispatch(MessageAddedEvent(self.context(), message=message))
        return converted

    def set_agent_state(self, state: Mapping[str, Any]) -> None:
        """Replace the host key/value state (one commit).

        Raises:
            InvalidMessage: ``state`` is not a mapping, has a key that is not a string,
                or holds a value JSON cannot store.
        """
        snapshot = check_agent_state(state)
        self.edit(lambda _view: Edit(agent_state=snapshot))

    # -- reductions ----------------------------------------------------------------------

    def apply_plan(
        self,
        planner: Callable[[View], ReductionPlan | None],
        *,
        trigger: Trigger,
        error: BaseException | None = None,
        as_given: bool = False,
    ) -> Reduction | None:
        """Commit the plan ``planner`` makes for the current view (re-planned on conflict).

        The plan is held to the view rules like a manager's (:func:`~contextledger.core.viewrules.fit_plan`):
        corrected where that is safe, else refused. ``as_given=True`` records it exactly
        instead, for a host mirroring a reduction it already made (see :class:`Edit`).

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The plan breaks the view rules beyond correction; nothing is committed.
            EntryNotFound: The plan names an entry that is not in the view.
        """
        check_trigger(trigger)

        def build(view: View) -> Edit | None:
            plan = planner(view)
            if plan is None or plan.is_empty:
                return None
            return Edit(plan=plan, trigger=trigger, error=describe_error(error), as_given=as_given)

        return telemetry.reduction(self, trigger, lambda: self.edit(build))

    def repair_interrupted_tools(self) -> Reduction | None:
        """Repair a view left mid-tool by a crash now, recording a ``restore``/``tool_pair_repair`` reduction.

        Writes only when the view needs it (see :mod:`contextledger.managers.repair`).
        """
        return self._transact(lambda view: (plan_repair(view, self._state.next_seq), None), repair=False)

    def _reduce(self, request: ReductionRequest) -> Reduction | None:
        """Plan ``request`` once, write its summary once (outside the lock), commit once."""
        manager = self.manager
        if manager is None:
            return None
        run = partial(self._plan_and_commit, manager, request)
        return telemetry.reduction(self, request, run, manager=manager.name, note=lambda: self._note)

    def _plan_and_commit(self, manager: ConversationManager, request: ReductionRequest) -> Reduction | None:
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
                summary = telemetry.summarize(self, need.entries, need.summarize, partial(write_summary, need))
                written.append((need.entries, summary))
        raise ReductionFailed(f"the summarized entries kept changing under concurrent writers ({MAX_SUMMARIES} tries)")

    # -- the transaction -------------------------------------------------------------------

    def edit(self, build: Planner) -> Reduction | None:
        """Turn ``build(view)`` into one changeset and commit it.

        ``build`` is called again on a fresh view after each concurrency conflict; it
        returns ``None`` (or an empty edit) when there is nothing to do. A plan it carries
        is held to the view rules (corrected where safe, else refused) unless the edit is
        ``as_given``. A pending model-call increment rides along with the first commit
        that happens, and so does the repair of a view left mid-tool (see ``repair``).

        Returns:
            The reduction row committed, if the edit carried one.

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-plans.
            InvalidPlan: The plan breaks the view rules beyond correction; nothing is committed.
        """
        return self._transact(lambda view: (fit_edit(view, build(view)), None))

    def _transact(self, build: _Build, *, repair: bool = True) -> Reduction | None:
        for attempt in range(self.max_retries + 1):
            with self._lock:
                if self._unknown is not None:
                    self._settle(self._unknown)
                riding = self._riding
                ride = fit_edit(self._view, riding(self._view)) if riding is not None else None
                edit, manager_state = build(projected(self._state, self._view, ride, self.token_counter))
                if riding is not None and ride is not None and not ride.is_empty:
                    merged = ride_with(ride, edit)
                    if merged is None:  # they cannot share a changeset: the host's write commits first
                        self._riding = None
                        self.edit(riding)
                        continue
                    edit = merged
                if (edit is None or edit.is_empty) and (not self._pending_calls or self._defer_count):
                    return None
                edit = edit or Edit()
                real_write = bool(edit.appends or self._pending_calls)
                if repair and self.repair and real_write and needs_repair(self._view, edit.appends):
                    if edit.plan is not None or edit.strategy is not None:
                        # One reduction row per changeset: the repair commits first, alone.
                        self._transact(lambda view: (plan_repair(view, self._state.next_seq), None), repair=False)
                        continue
                    log_repair(self.session_id, self.agent_id)
                    edit = with_repair(self._view, edit, self._state.next_seq)
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
                    before_call=self._preparing_call,
                )
                if changeset.expected_version == 0 and (self.app is not None or self.user is not None):
                    # Only the commit that creates the conversation names the session's owner.
                    changeset = changeset.model_copy(update={"app": self.app, "user": self.user})
                try:
                    version = telemetry.commit(self.store, changeset, attempt)
                except ConcurrencyConflict:
                    if attempt == self.max_retries:
                        raise
                    self.refresh()
                except CommitOutcomeUnknown:
                    self._unknown = changeset  # settled by the next write
                    raise
                else:
                    self._after_commit(changeset, entries, version)
                    return changeset.reduction
            log_conflict(self.session_id, self.agent_id, attempt)
            pause(backoff_delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _settle(self, changeset: Changeset) -> None:
        """Learn the outcome of a commit whose reply was lost: sent again under its id, it applies once at most."""
        calls = self.model_call_count
        try:
            telemetry.commit(self.store, changeset, settling=True)
        except ConcurrencyConflict:  # it never applied, and others wrote since: what it carried is still due
            changeset = changeset.model_copy(update={"model_call_count": None})
        self._unknown = None
        self.refresh()
        if changeset.model_call_count is not None:  # counted now: only calls announced since stay pending
            self._pending_calls = max(0, calls - changeset.model_call_count)

    def _after_commit(self, changeset: Changeset, view: View, version: int) -> None:
        self._state = changeset.state_after(self._state, version)
        before, self._view = self._view, view
        self._pending_calls, self._riding, self._defer_count = 0, None, False
        if changeset.reduction is not None:
            if self.manager is not None:
                self.manager.restore_state(self._state.manager_state)
            log_committed(self.session_id, self.agent_id, changeset.reduction)
            telemetry.reduced(changeset.reduction, before)

    # -- hook dispatch ---------------------------------------------------------------------

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
