"""Reductions of one conversation as one straight line: hook -> plan -> summarize once -> commit.

:meth:`Reducer.dispatch` fires a hook event and runs every reduction its callbacks
requested; :meth:`Reducer.reduce` is that line for one request: the manager plans for
the current view (:func:`~contextledger.core.reduction.plan_reduction`, held to the view
rules), a summary the plan needs is written once, outside the transaction's lock and
retries (:class:`~contextledger.core.reduction.SummaryNeeded` carries it out), and the
plan with its summary is committed once by the :class:`~contextledger.conversation.transaction.Transaction`
(re-planned on a conflict, the summary reused while the entries it covers are unchanged).

Two contracts (DESIGN semantics 3): a per-turn, proactive or end-of-invocation
reduction is best-effort and never breaks the turn (:meth:`Reducer.best_effort` logs a
skipped one); a reactive one (:meth:`Reducer.reactive`) reduces or raises
:class:`~contextledger.errors.ReductionFailed`, at most once per model call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from contextledger.conversation.reading import Reader
from contextledger.conversation.transaction import Transaction
from contextledger.core.building import describe_error
from contextledger.core.changeset import Edit, ReductionPlan, ReductionRequest
from contextledger.core.hooks import HookEvent, HookRegistry
from contextledger.core.reduction import (
    MAX_SUMMARIES,
    SummaryNeeded,
    Written,
    log_skipped,
    plan_reduction,
    reduction_edit,
    write_summary,
)
from contextledger.core.seam import INLINE, WouldWait
from contextledger.core.view import View
from contextledger.errors import ContextLedgerError, InvalidPlan, ReductionFailed
from contextledger.managers.base import ConversationManager
from contextledger.model.records import Reduction, Trigger
from contextledger.telemetry import spans as telemetry

__all__ = ["Reducer"]

_E = TypeVar("_E", bound=HookEvent)


class Reducer:
    """Runs the reductions hooks, callers and hosts ask for, each planned once and committed once.

    Attributes:
        transaction: Commits each reduction.
        reader: Builds the requests and contexts.
        hooks: The registry events are dispatched to.
        manager: The policy that plans (``None``: nothing is ever reduced by request).
        note: Why the last planned reduction came to nothing (``None`` when it did not).
    """

    def __init__(
        self, transaction: Transaction, reader: Reader, hooks: HookRegistry, manager: ConversationManager | None
    ) -> None:
        """Reduce through ``transaction`` with ``manager``'s plans."""
        self.transaction, self.reader, self.hooks, self.manager = transaction, reader, hooks, manager
        self.note: str | None = None
        self._reactive_call: int | None = None  # the model call a reactive reduction already served

    def dispatch(self, event: _E) -> _E:
        """Run the callbacks, then every best-effort reduction they requested, in order.

        A reactive request is left in ``event.requests`` for the caller (it must reduce or raise).
        """
        self.hooks.invoke(event)
        reduced = False
        for request in event.requests:
            if request.trigger == "reactive":
                continue
            if reduced and request.projected_input_tokens is not None:
                # An earlier reduction of this event lowered what the host projected.
                projected = min(request.projected_input_tokens, self.reader.projected_input_tokens())
                request = request.model_copy(update={"projected_input_tokens": projected})
            reduced = self.best_effort(request) or reduced
        return event

    def reduce(self, request: ReductionRequest) -> Reduction | None:
        """Plan ``request`` once, write its summary once (outside the lock), commit once.

        Returns:
            The reduction committed, or ``None`` when the manager planned nothing (see :attr:`note`).

        Raises:
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
            ReductionFailed: The summarizer failed, or the entries to summarize kept
                changing under concurrent writers.
        """
        manager = self.manager
        if manager is None:
            return None
        run = partial(self._plan_and_commit, manager, request)
        return telemetry.reduction(self.transaction, request, run, manager=manager.name, note=lambda: self.note)

    def _plan_and_commit(self, manager: ConversationManager, request: ReductionRequest) -> Reduction | None:
        counter = self.transaction.token_counter
        written: Written = []

        def build(view: View) -> tuple[Edit | None, dict[str, Any] | None]:
            view = view.built()  # the plan and the view rules read each entry many times
            planned = plan_reduction(manager, view, request, counter)
            self.note = planned.note
            return reduction_edit(view, planned, request, written, counter)

        for _ in range(MAX_SUMMARIES + 1):
            try:
                return self.transaction.run(build)
            except SummaryNeeded as need:  # out of the lock and the retry loop: write it, then plan again
                if INLINE.get():  # a summarizer may call a model: never on the caller's loop
                    raise WouldWait("a summary is written first") from None
                if len(written) == MAX_SUMMARIES:
                    break
                summary = telemetry.summarize(
                    self.transaction, need.entries, need.summarize, partial(write_summary, need)
                )
                written.append((need.entries, summary))
        raise ReductionFailed(f"the summarized entries kept changing under concurrent writers ({MAX_SUMMARIES} tries)")

    def preview(self, trigger: Trigger) -> ReductionPlan | None:
        """The plan :meth:`reduce` would commit now for ``trigger`` (tokens estimated), or ``None``; writes nothing.

        Raises:
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
        """
        if self.manager is None:
            return None
        transaction = self.transaction
        with transaction.lock:
            request = self.reader.request(trigger)
            return plan_reduction(self.manager, transaction.view.built(), request, transaction.token_counter).plan

    def apply_plan(
        self,
        planner: Callable[[View], ReductionPlan | None],
        *,
        trigger: Trigger,
        error: BaseException | None,
        as_given: bool,
    ) -> Reduction | None:
        """Commit the plan ``planner`` makes for the current view (re-planned on conflict).

        Raises:
            InvalidPlan: The plan breaks the view rules beyond correction; nothing is committed.
            EntryNotFound: The plan names an entry that is not in the view.
        """

        def build(view: View) -> Edit | None:
            plan = planner(view)
            if plan is None or plan.is_empty:
                return None
            return Edit(plan=plan, trigger=trigger, error=describe_error(error), as_given=as_given)

        return telemetry.reduction(self.transaction, trigger, lambda: self.transaction.edit(build))

    def best_effort(self, request: ReductionRequest) -> bool:
        """Run ``request``; a failure is logged, never raised (the turn goes on). Whether it reduced."""
        try:
            reduction = self.reduce(request)
        except WouldWait:  # run inline, it would wait: nothing was committed, a worker runs the call again
            raise
        except Exception as exc:  # best-effort by contract: the turn must go on
            self._warn(
                request.trigger, f"{type(exc).__name__}: {exc}", exc_info=not isinstance(exc, ContextLedgerError)
            )
            return False
        if reduction is None and self.note:
            self._warn(request.trigger, self.note)
        return reduction is not None

    def reactive(self, request: ReductionRequest, error: BaseException) -> None:
        """Reduce after ``error`` (a context overflow), once per model call, or raise.

        Raises:
            ReductionFailed: This model call was reduced once already, the plan broke the
                view rules, or nothing was left to reduce.
        """
        transaction = self.transaction
        call = transaction.model_call_count
        where = f"session_id={transaction.session_id} agent_id={transaction.agent_id}"
        if self._reactive_call == call:
            raise ReductionFailed(
                f"{where}: model call {call} was already reduced once; count the retried call with before_model_call()"
            ) from error
        try:
            reduction = self.reduce(request)
        except InvalidPlan as exc:
            raise ReductionFailed(f"{where}: {exc}") from exc
        if reduction is None:
            raise ReductionFailed(
                f"{where}: the context window overflowed and the"
                f" {getattr(self.manager, 'name', 'manager')} manager found nothing left to reduce"
                f" ({len(transaction.view)} entries: {self.note or 'all protected, pinned or too recent'})"
            ) from error
        self._reactive_call = call

    def _warn(self, trigger: str, reason: str, *, exc_info: bool = False) -> None:
        name = getattr(self.manager, "name", None)
        log_skipped(self.transaction.session_id, self.transaction.agent_id, name, trigger, reason, exc_info)
